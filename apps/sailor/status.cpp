// `sailor status HOST:PORT [--json]`: the nodes, zones, roles and heartbeats of a coordinator.
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

#include "commands.hpp"
#include "job_token.hpp"
#include "status_json.hpp"
#include "exit_codes.hpp"
#include "sailor/config/text.hpp"
#include "sailor/actors/runtime.hpp"

namespace sailor::app {
namespace {

// "2026-11-22 05:31:07.123Z" for a time in milliseconds since the epoch.
std::string utc_time(std::int64_t unix_ms) {
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", text, static_cast<int>(unix_ms % 1000));
  return out;
}

// The newest complete checkpoint's age, and the warning when it is far behind.
void print_checkpoint(const actors::cluster_status& s) {
  if (s.training_total <= 0 || s.checkpoint_every <= 0)
    return;
  if (s.checkpoint_iterations > 0) {
    std::string age = s.checkpoint_age_s >= 0 ? "" : ", age unknown";
    if (s.checkpoint_age_s >= 0) {
      char text[32];
      std::snprintf(text, sizeof text, ", %.1f s ago", s.checkpoint_age_s);
      age = text;
    }
    std::printf("newest complete checkpoint: after iteration %lld, %lld iterations behind%s "
                "(checkpoint every %d)\n",
                static_cast<long long>(s.checkpoint_iterations),
                static_cast<long long>(s.checkpoint_behind), age.c_str(), s.checkpoint_every);
  } else {
    std::printf("newest complete checkpoint: none yet (checkpoint every %d)\n",
                s.checkpoint_every);
  }
  if (!s.checkpoint_warning.empty())
    std::printf("WARNING: %s\n", s.checkpoint_warning.c_str());
}

void print_text(const actors::cluster_status& s) {
  std::printf("phase %s, plan v%lld: %s, %s, %d/%d stage actors ready\n", s.phase.c_str(),
              static_cast<long long>(s.plan_version), count_of(s.stages, "stage").c_str(),
              count_of(s.replicas, "replica").c_str(), s.roles_ready, s.roles_total);
  std::string zones;
  for (auto& z : s.zones)
    zones += (zones.empty() ? "" : ", ") + z;
  std::printf("zones: %s\n", zones.c_str());
  if (!s.plan_summary.empty())
    std::printf("plan: %s\n", s.plan_summary.c_str());
  if (!s.training_summary.empty())
    std::printf("%s\n", s.training_summary.c_str());
  print_checkpoint(s);
  if (!s.val_losses.empty()) {
    // The newest passes (all of them in --json).
    constexpr std::size_t shown = 8;
    const std::size_t first = s.val_losses.size() > shown ? s.val_losses.size() - shown : 0;
    std::printf("validation loss after iteration:%s", first > 0 ? " ..." : "");
    for (std::size_t k = first; k < s.val_losses.size() && k < s.val_iterations.size(); ++k)
      std::printf(" %lld: %.4f", static_cast<long long>(s.val_iterations[k]), s.val_losses[k]);
    std::printf("\n");
  }
  std::printf("%-16s %-14s %-10s %7s %-9s %9s  %s\n", "node", "zone", "gpu", "devices", "state",
              "heartbeat", "roles (stage/replica/rank@device)");
  for (auto& n : s.nodes) {
    std::string roles;
    for (auto& r : n.roles)
      roles += (roles.empty() ? "" : " ") + std::to_string(r.stage) + "/" +
               std::to_string(r.replica) + "/" + std::to_string(r.tp_rank) + "@" +
               std::to_string(r.device);
    std::string age = n.heartbeat_age_ms < 0 ? "-" : std::to_string(n.heartbeat_age_ms) + " ms";
    std::printf("%-16s %-14s %-10s %7zu %-9s %9s  %s\n", n.inventory.name.c_str(),
                n.inventory.zone.c_str(), n.inventory.gpu_type.c_str(),
                n.inventory.devices.size(), n.state.c_str(), age.c_str(), roles.c_str());
  }
  if (!s.refusals.empty()) {
    std::printf("refused at the door (most recent last):\n");
    for (auto& r : s.refusals)
      std::printf("  %s  %s: %s\n", utc_time(r.unix_ms).c_str(), r.peer.c_str(),
                  r.reason.c_str());
  }
  if (!s.events.empty()) {
    std::printf("recent events:\n");
    for (auto& e : s.events)
      std::printf("  %s\n", e.c_str());
  }
}

struct status_args {
  std::string where;
  bool json = false;
  int timeout_ms = 5000;
  std::string transport = "tcp";
  std::string token_file;
  comm::transport_options::tls_files tls;
};

int run_status(const status_args& args) {
  auto where = comm::address::parse(args.where);
  if (!where) {
    std::fprintf(stderr, "sailor status: %s\n", where.error().message.c_str());
    return exit_bad_input;
  }
  auto token = job_token(args.token_file, "", "sailor status");
  if (!token) {
    std::fprintf(stderr, "sailor status: %s\n", token.error().to_string().c_str());
    return 2;
  }
  auto transport = actors::make_transport(args.transport, "sailor-status", "", *token, {}, args.tls);
  if (!transport) {
    std::fprintf(stderr, "sailor status: %s\n", transport.error().message.c_str());
    return exit_bad_input;
  }
  actors::runtime_config cfg;
  caf::actor_system system{cfg};
  auto status = actors::query_status(system, where->host, where->port,
                                     std::chrono::milliseconds{args.timeout_ms},
                                     transport->get());
  if (!status) {
    std::fprintf(stderr, "sailor status: %s\n", status.error().message.c_str());
    return exit_unavailable;
  }
  // Text from peers that is not UTF-8 is replaced, never a reason to abort.
  if (args.json)
    std::printf("%s\n", status_json(*status)
                          .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                          .c_str());
  else
    print_text(*status);
  return 0;
}

}  // namespace

void add_status(CLI::App& app, command_set& commands) {
  auto args = std::make_shared<status_args>();
  auto* sub = app.add_subcommand("status", "show the nodes, zones, roles and heartbeats of a "
                                           "coordinator");
  sub->add_option("address", args->where, "HOST:PORT of the coordinator")->required();
  sub->add_flag("--json", args->json, "print JSON");
  sub->add_option("--timeout-ms", args->timeout_ms, "give up after this long")
    ->check(positive_number())
    ->capture_default_str();
  sub->add_option("--transport", args->transport, "tcp or ucx (as the coordinator)")
    ->capture_default_str();
  add_token_option(sub, args->token_file);
  add_tls_options(sub, args->tls);
  sub->callback([&commands, args] {
    commands.selected = [args] { return run_status(*args); };
  });
}

}  // namespace sailor::app
