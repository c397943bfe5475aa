// The simulator's iteration time against the runtime's, end to end: `sailor demo` plans the
// tiny model over N nodes in Z emulated zones (the link shaper between zones), predicts the
// plan's iteration time with the simulator from a profile it measures, trains it as real
// processes, and writes both figures to its summary. Printed per layout: the plan's shape,
// predicted, measured (median iteration), and predicted / measured.
//
//   build/bench/sim_vs_runtime [--iterations N] [--layouts 2x1,4x2,3x3]
//
// Layout NxZ: N nodes (one CPU device each) in Z zones, round-robin. On this 2-core machine
// more than 2 ranks share cores, which the profile accounts for (CPU per message and per
// all-reduce, cores the ranks share) but noisily; run it on a quiet machine.
//
// Measured on the quiet 2-core machine, Nov 2026, 12 iterations: predicted / measured 0.90
// (2x1: PP=2 in one zone), 0.79 (4x2: PP=2 x DP=2 across zones, hierarchical all-reduce),
// 0.85 (3x3: DP=3 over three zones, a ring of shards across them).
//
// Each layout runs with the demo's planners (--planners search,even). The loop's correction
// (simulator/correction.hpp: the median measured/predicted) learns from the `--learn`
// iterations after the first and is judged on the iterations after those. Then the straggler
// scenario (--straggler-slowdown F; 1 skips it): tokens/s before, during and after the re-plan.
// Measured on the 2-core machine under load from other builds (load average ~8), Nov 24 2026,
// 12 iterations: predicted/measured before correction 0.42-1.70 (search 0.68, 0.42, 0.89;
// even 0.46, 1.70, 1.60 for 2x1, 4x2, 3x3); after it 0.93-1.32 (search 1.13, 0.99, 0.93;
// even 0.95, 1.32, 1.05). The search chose one node for this small model in every layout
// (measured 0.09-0.19 s against the even plans' 0.18-0.31 s). Straggler 3x: 8229 tokens/s
// before, 1954 during, 11075 after the re-plan (one re-plan, predicted gain +40%).
// On the quiet machine (load under 3), Nov 25 2026, 12 iterations, 5 learned: predicted /
// measured 0.68-0.87 before the correction, 0.93-1.04 after it (search 1.00, 0.93, 0.97; even
// 1.01, 1.04, 0.96 for 2x1, 4x2, 3x3): within 10% in every row. Straggler 3x: 11206 tokens/s
// before, 4380 during, 5331 after (a second run: 13718, 5419, 6960), against 12821 for the
// tiny model on one node alone (`sailor demo --nodes 1`): the re-plan keeps the straggler with
// a smaller share, because the plan without it is predicted on the running plan's profile
// (2 ranks sharing the cores) and correction, about 1.5x slower than it runs. Target (90% of
// the best plan without that node): NOT met.
//
// Since (Nov 25 2026, session 10): the host model (apps/sailor/demo_profile.hpp: one process
// alone is profiled too, and each count's pass work scales a plan's compute to its own count
// of ranks, sim_options::host_cpu_scale), and the correction forgets the iterations a straggler
// measured once it is found out (it had learnt them, and predicted the plans around it as slow
// as the straggler: "not re-planning ... predicted 0.1716 s against 0.1716 s measured"). The
// straggler scenario runs `sailor demo --nodes 1` just before and just after it and compares
// with their mean. No quiet machine could be had (other sessions' builds and tests). At load
// average 4.0-4.6, three runs: after the re-plan 14874, 14186, 12163 tokens/s against one node
// alone 16392/13507, 13681/12844, 13841/11343 (before/after): 99%, 107%, 97% of their mean;
// one re-plan each, without the straggler. Target (90% of the best plan without that node):
// met in those runs. At load average 6-11 (4 runs, one node alone run once after): 68-261%,
// the load moving by more than the margin between runs; the straggler left out in all, after
// a first re-plan that kept a smaller share in one and a false straggler (load) in another.
// Main table at load average 4.1-4.3, 12 iterations, 5 learned: predicted / measured 0.51-0.82
// before the correction, 0.90-1.43 after it (search 1.08, 0.96, 0.90; even 1.43, 1.03, 1.17
// for 2x1, 4x2, 3x3): within 10% in 3 of 6 rows under that load (the quiet machine's
// 0.93-1.04 not re-measured). The search chose DP=2 in one zone for 2x1 and 4x2 and one node
// for 3x3 in that run; one node in every layout at load average 8-10.
//
// The "online" columns: the correction as the live loop keeps it (drift_watch.cpp: every
// iteration feeds its window), each judged iteration predicted from the ones before it. The
// frozen columns (learnt from iterations 2-6 only) stay as they were. On the nearly quiet
// machine (load average 1.9-3.9, the lead's own runs the only load), Nov 25 2026, after the
// merges: 12 iterations, frozen 0.92-1.18 (4 of 6 rows within 10%), then 0.79-1.05 (5 of 6);
// 30 iterations, three runs of the table: frozen 0.81-1.12, 0.88-1.20, 0.76-1.12 (4 of 6 each:
// the first iterations after the warm-up one are still slower or faster than the rest), online
// 0.90-1.05, 0.92-1.02, 0.95-1.08 (6 of 6 each). Straggler 3x at load average 1.8-1.9: 14091
// tokens/s before, 4686 during, 15236 after the re-plan (one re-plan, without the straggler);
// one node alone 13742 before and 14614 after: 107% of their mean (target 90%: met).
//
// The link scenario (--link-change; empty skips it), on the 2-core machine under load from
// other builds (load average ~5), Nov 25 2026, 30 iterations, 30 ms / 5 MB/s after iteration
// 5: one re-plan, for the link (factor 2.33 with 12 samples; the one-node plan predicted
// 0.211 s against 0.795 s measured, gain +63%): tokens/s 7497 before, 2431 during, 5347 after
// (71% of before; one node instead of two). The search's first choice on this small model is
// close between one node and two zones: of 5 runs, 2 planned on one zone and had no link to
// notice (the bench says so).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sailor/simulator/correction.hpp"

namespace {

struct layout {
  int nodes = 0;
  int zones = 0;
};

std::vector<layout> parse_layouts(const std::string& text) {
  std::vector<layout> out;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ',')) {
    layout l;
    if (std::sscanf(item.c_str(), "%dx%d", &l.nodes, &l.zones) == 2 && l.nodes > 0 && l.zones > 0)
      out.push_back(l);
    else
      std::fprintf(stderr, "sim_vs_runtime: --layouts: '%s' is not NxZ, skipped\n", item.c_str());
  }
  return out;
}

std::string shape_of(const nlohmann::json& plan) {
  if (!plan.is_object()) return "?";
  if (plan.contains("summary") && plan["summary"].is_string()) return plan["summary"];
  return std::to_string(plan.value("stages", 0)) + " stage(s)";
}

// The loop's correction as the live job makes it: fed with the `learn` iterations after the
// first (warm-up), then judged on the iterations after those (out of sample).
struct corrected_figures {
  double factor = 1, predicted_s = 0, measured_s = 0;
  double online_predicted_s = 0;  ///< the mean of each judged iteration's prediction, online
  int judged = 0;
};

corrected_figures correct(double uncorrected_s, const std::vector<double>& each, int learn) {
  sailor::simulator::speed_correction loop;
  corrected_figures out;
  for (int k = 1; k <= learn && k < static_cast<int>(each.size()); ++k)
    loop.add("CPU", uncorrected_s, each[static_cast<std::size_t>(k)]);
  out.factor = loop.factor("CPU");
  out.predicted_s = uncorrected_s * out.factor;
  double sum = 0;
  for (std::size_t k = static_cast<std::size_t>(learn) + 1; k < each.size(); ++k, ++out.judged)
    sum += each[k];
  out.measured_s = out.judged ? sum / out.judged : 0;
  // Online, as the live loop corrects (drift_watch.cpp): every iteration after the first feeds
  // the correction (its window of recent samples), and each judged iteration is predicted with
  // what the iterations before it taught.
  sailor::simulator::speed_correction online;
  double predicted_sum = 0;
  for (std::size_t k = 1; k < each.size(); ++k) {
    if (k > static_cast<std::size_t>(learn)) predicted_sum += uncorrected_s * online.factor("CPU");
    online.add("CPU", uncorrected_s, each[k]);
  }
  out.online_predicted_s = out.judged ? predicted_sum / out.judged : 0;
  return out;
}

// The link scenario: the tiny model at global batch 64 over 2 nodes in 2 zones (the search
// splits its batch over both, so the gradient all-reduce crosses the link); the link becomes
// `change` after 5 iterations in every node. Prints the zone pair's correction, the re-plans
// and their reasons, and tokens/s before, during and after.
void link_scenario(const std::string& sailor, const std::filesystem::path& dir,
                   const std::string& change, int iterations) {
  const auto job = dir / "job-batch64.yaml";
  {
    std::ifstream tiny(std::string(SAILOR_SOURCE_DIR) + "/configs/jobs/tiny.yaml");
    std::stringstream text;
    text << tiny.rdbuf();
    std::string yaml = text.str();
    const auto at = yaml.find("global_batch: 8");
    if (at != std::string::npos)
      yaml.replace(at, 15, "global_batch: 64");
    std::ofstream(job) << yaml;
  }
  const auto summary = dir / "summary-link.json";
  const std::string cmd = sailor + " demo --model " + SAILOR_SOURCE_DIR "/configs/models/tiny.yaml --job " +
                          job.string() + " --nodes 2 --zones 2 --iterations " +
                          std::to_string(iterations) + " --link-change-at 5 --link-change " + change +
                          " --profile-cache " + (dir / "profiles-link").string() +
                          " --no-dashboard --summary-json " + summary.string() + " > " +
                          (dir / "demo.out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(summary);
  if (rc != 0 || !in) {
    std::printf("link change: demo failed (exit %d)\n", rc);
    return;
  }
  auto j = nlohmann::json::parse(in, nullptr, false);
  std::printf("\nlink local-a<->local-b changed to %s after iteration 5 (2 nodes, 2 zones): "
              "tokens/s before %.0f, during %.0f, after the re-plan %.0f; re-plans %d\n",
              change.c_str(), j.value("tokens_per_s_before", 0.0), j.value("tokens_per_s_during", 0.0),
              j.value("tokens_per_s_after", 0.0), j.value("replans", 0));
  std::printf("  the last plan: %s\n", shape_of(j.value("plan", nlohmann::json{})).c_str());
  if (j.value("link_factors", nlohmann::json::object()).empty())
    std::printf("  no all-reduce crossed the link: the search kept the first plan in one zone on "
                "this run's profile (the choice is close here; run it again)\n");
  for (const auto& [key, factor] : j.value("link_factors", std::map<std::string, double>{}))
    std::printf("  link %s: all-reduce measured/predicted %.2f\n", key.c_str(), factor);
  for (const auto& why : j.value("replan_reasons", std::vector<std::string>{}))
    std::printf("  reason: %s\n", why.c_str());
  for (const auto& note : j.value("loop_notes", std::vector<std::string>{}))
    if (note.find("not re-planning") != std::string::npos)
      std::printf("  %s\n", note.c_str());
}

// The machine's load average over the last minute (-1: unknown).
double load_now() {
  double load[1] = {-1};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

// `sailor demo` with `args`, its summary JSON (nothing when it failed: said).
std::optional<nlohmann::json> demo(const std::string& sailor, const std::filesystem::path& dir,
                                   const std::string& name, const std::string& args) {
  const auto summary = dir / ("summary-" + name + ".json");
  const std::string cmd = sailor + " demo " + args + " --profile-cache " + (dir / "profiles").string() +
                          " --no-dashboard --summary-json " + summary.string() + " > " +
                          (dir / "demo.out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(summary);
  if (rc != 0 || !in) {
    std::printf("%s: demo failed (exit %d)\n", name.c_str(), rc);
    return std::nullopt;
  }
  return nlohmann::json::parse(in, nullptr, false);
}

// The straggler scenario: the node the plan runs on (of two) slows down after 4 iterations;
// the job re-plans around it. Throughput before, during (slowdown to re-plan) and after,
// against the best plan without that node: the tiny model on one node alone, run just before
// and just after (their mean: the machine's load moves between runs).
void straggler_scenario(const std::string& sailor, const std::filesystem::path& dir,
                        double slowdown) {
  const double load_before = load_now();
  auto first = demo(sailor, dir, "one-node-before", "--nodes 1 --zones 1 --iterations 40");
  auto j = demo(sailor, dir, "straggler",
                "--nodes 2 --zones 1 --iterations 40 --straggler-at 4 --straggler-slowdown " +
                  std::to_string(slowdown));
  auto second = demo(sailor, dir, "one-node-after", "--nodes 1 --zones 1 --iterations 40");
  if (!j)
    return;
  const double after = j->value("tokens_per_s_after", 0.0);
  std::printf("\nstraggler %.1fx after iteration 4 (2 nodes): tokens/s before %.0f, during "
              "%.0f, after the re-plan %.0f (%.0f%% of before); re-plans %d\n",
              slowdown, j->value("tokens_per_s_before", 0.0), j->value("tokens_per_s_during", 0.0),
              after,
              j->value("tokens_per_s_before", 0.0) > 0 ? 100 * after / j->value("tokens_per_s_before", 0.0) : 0.0,
              j->value("replans", 0));
  std::printf("  the last plan: %s\n", shape_of(j->value("plan", nlohmann::json{})).c_str());
  for (const auto& why : j->value("replan_reasons", std::vector<std::string>{}))
    std::printf("  reason: %s\n", why.c_str());
  if (!first || !second)
    return;
  const double a = first->value("tokens_per_s", 0.0), b = second->value("tokens_per_s", 0.0);
  const double best = 0.5 * (a + b);
  std::printf("  one node alone (the best plan without the straggler): %.0f tokens/s before, %.0f "
              "after; after the re-plan / their mean = %.0f%% (target 90%%); load average %.2f "
              "before, %.2f after\n",
              a, b, best > 0 ? 100 * after / best : 0.0, load_before, load_now());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The simulator's predicted iteration time against the runtime's measured one"};
  int iterations = 15;
  int learn = 5;
  std::string layouts_text = "2x1,4x2,3x3";
  std::string planners_text = "search,even";
  app.add_option("--iterations", iterations, "training iterations per layout");
  app.add_option("--layouts", layouts_text, "NxZ,...: N nodes in Z emulated zones");
  app.add_option("--planners", planners_text, "search,even: the demo's --planner values to run");
  double straggler_slowdown = 3;
  app.add_option("--straggler-slowdown", straggler_slowdown,
                 "the straggler scenario's slowdown (1: skip it)");
  app.add_option("--learn", learn, "iterations (after the first) the correction learns from");
  std::string link_change = "local-a:local-b=30,5";
  app.add_option("--link-change", link_change,
                 "the link scenario's changed link, ZONE_A:ZONE_B=LATENCY_MS,MBPS (empty: skip it)");
  CLI11_PARSE(app, argc, argv);
  const std::string sailor = std::string(SAILOR_BIN_DIR) + "/sailor";
  const auto dir = std::filesystem::temp_directory_path() / ("sim_vs_runtime-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> planners;
  {
    std::stringstream in{planners_text};
    std::string item;
    while (std::getline(in, item, ','))
      planners.push_back(item);
  }
  std::printf("%-7s %-7s %10s %10s %9s | %7s %10s %10s %9s | %10s %9s   plan\n", "layout", "planner",
              "predicted", "measured", "pred/meas", "factor", "corrected", "measured", "corr/meas", "online",
              "onl/meas");
  for (const auto& l : parse_layouts(layouts_text))
    for (const auto& planner : planners) {
    const auto summary = dir / ("summary-" + std::to_string(l.nodes) + "x" + std::to_string(l.zones) + ".json");
    std::filesystem::remove(summary);
    const std::string cmd = sailor + " demo --nodes " + std::to_string(l.nodes) + " --zones " +
                            std::to_string(l.zones) + " --iterations " + std::to_string(iterations) +
                            " --planner " + planner + " --profile-cache " + (dir / "profiles").string() +
                            " --no-dashboard --summary-json " + summary.string() + " > " +
                            (dir / "demo.out").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(summary);
    if (rc != 0 || !in) {
      std::printf("%dx%-5d %-7s demo failed (exit %d); output in %s\n", l.nodes, l.zones,
                  planner.c_str(), rc, (dir / "demo.out").c_str());
      continue;
    }
    auto j = nlohmann::json::parse(in, nullptr, false);
    const double predicted = j.value("predicted_iteration_s_uncorrected", j.value("predicted_iteration_s", 0.0));
    const double measured = j.value("measured_iteration_s", 0.0);
    const auto each = j.value("measured_iteration_s_each", std::vector<double>{});
    const auto c = correct(predicted, each, learn);
    std::printf("%dx%-5d %-7s %9.3fs %9.3fs %8.2fx | %7.3f %9.3fs %9.3fs %8.2fx | %9.3fs %8.2fx   %s\n",
                l.nodes, l.zones, planner.c_str(), predicted, measured, measured > 0 ? predicted / measured : 0.0,
                c.factor, c.predicted_s, c.measured_s, c.measured_s > 0 ? c.predicted_s / c.measured_s : 0.0,
                c.online_predicted_s, c.measured_s > 0 ? c.online_predicted_s / c.measured_s : 0.0,
                shape_of(j.value("plan", nlohmann::json{})).c_str());
    std::fflush(stdout);
  }
  if (straggler_slowdown > 1)
    straggler_scenario(sailor, dir, straggler_slowdown);
  if (!link_change.empty())
    link_scenario(sailor, dir, link_change, 30);
  std::filesystem::remove_all(dir);
  return 0;
}
