#include "link_probes.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "sailor/actors/probe_messages.hpp"
#include "sailor/comm/link_probe.hpp"
#include "sailor/comm/shaping.hpp"
#include "sailor/comm/tcp.hpp"

namespace sailor::app {
namespace {

sailor::error probe_failed(std::string why) {
  return sailor::error::of(error_kind::failed, "", "probe", std::move(why));
}

// Keeps every answer for the thread that waits on it.
caf::behavior answers_actor(caf::event_based_actor*,
                            std::function<void(protocol::link_probe_result)> put) {
  return {[put](protocol::link_probe_result& r) { put(std::move(r)); }};
}

comm::link_probe_result to_comm(const protocol::link_probe_result& r) {
  comm::link_probe_result out;
  out.latency_s = r.latency_s;
  for (std::size_t i = 0; i < r.sizes.size() && i < r.bytes_per_s.size(); ++i)
    out.bandwidth.emplace_back(r.sizes[i], r.bytes_per_s[i]);
  out.elapsed_s = r.elapsed_s;
  return out;
}

}  // namespace

zone_link_probes::zone_link_probes(config::cluster configured, bool emulated, double timeout_s,
                                   double retry_after_s, int most_probes)
  : configured_(std::move(configured)), emulated_(emulated), timeout_s_(timeout_s),
    retry_after_s_(retry_after_s), most_probes_(std::max(1, most_probes)) {}

zone_link_probes::~zone_link_probes() { detach(); }

void zone_link_probes::admitted(const actors::node_inventory& node, const caf::actor& agent) {
  std::lock_guard lock{agents_mu_};
  agents_[node.name] = agent;
}

void zone_link_probes::attach(caf::actor_system& system, actors::bridge& bridge) {
  auto box = inbox_;
  auto put = [box](protocol::link_probe_result r) {
    std::lock_guard lock{box->mu};
    box->answers[r.probe_id] = std::move(r);
    box->cv.notify_all();
  };
  // Detached: the planner's thread waits on the answers while a CAF worker may be busy.
  auto actor = system.spawn<caf::detached>(answers_actor, put);
  bridge.publish("link_probes", actor);
  std::lock_guard lock{agents_mu_};
  answers_ = actor;
}

void zone_link_probes::detach() {
  std::lock_guard lock{agents_mu_};
  if (answers_)
    caf::anon_send_exit(answers_, caf::exit_reason::user_shutdown);
  answers_ = nullptr;
}

result<protocol::link_probe_result> zone_link_probes::ask(const std::string& node,
                                                          const caf::actor& agent,
                                                          protocol::link_probe_request request) {
  caf::actor answers;
  {
    std::lock_guard lock{agents_mu_};
    answers = answers_;
  }
  if (!answers)
    return probe_failed("the coordinator takes no answers yet");
  request.probe_id = ++next_id_;
  request.timeout_ms = static_cast<std::int64_t>(timeout_s_ * 1000);
  const auto id = request.probe_id;
  caf::send_as(answers, agent, std::move(request));
  std::unique_lock lock{inbox_->mu};
  // The probe's own waits are bounded by timeout_s each: its connection, then its replies.
  const double bound_s = 2 * timeout_s_ + 1;
  const bool answered = inbox_->cv.wait_for(lock, std::chrono::duration<double>(bound_s),
                                            [&] { return inbox_->answers.count(id) > 0; });
  if (!answered) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " did not answer within %.1f s", bound_s);
    return probe_failed(node + buf);
  }
  auto r = std::move(inbox_->answers[id]);
  inbox_->answers.erase(id);
  if (r.node != node)
    return probe_failed("the answer came from " + r.node + ", not " + node);
  if (!r.error.empty())
    return probe_failed(node + ": " + r.error);
  return r;
}

result<protocol::link_probe_result> zone_link_probes::between(const std::string& from,
                                                              const caf::actor& from_agent,
                                                              const std::string& to,
                                                              const caf::actor& to_agent,
                                                              const std::string& zone_a,
                                                              const std::string& zone_b) {
  protocol::link_probe_request serve;
  serve.kind = "serve";
  serve.peer = from;
  serve.peer_zone = zone_a;
  if (emulated_)
    serve.links = configured_.links;
  auto served = ask(to, to_agent, serve);
  if (!served)
    return served.error();
  protocol::link_probe_request run = serve;
  run.kind = "probe";
  run.peer = to;
  run.peer_zone = zone_b;
  run.address = served->address;
  return ask(from, from_agent, run);
}

result<protocol::link_probe_result> zone_link_probes::loopback(const std::string& a,
                                                               const std::string& b) const {
  auto endpoint = [this](const std::string& name, const std::string& zone)
    -> std::unique_ptr<comm::transport> {
    comm::transport_options o;
    o.local_name = name;
    o.local_zone = zone;
    auto t = comm::make_tcp_transport(o);
    if (!t)
      return nullptr;
    return comm::make_shaped_transport(std::move(*t), comm::links_of(configured_));
  };
  auto responder = endpoint("probe-" + a, a);
  auto prober = endpoint("probe-" + b, b);
  if (!responder || !prober)
    return probe_failed("no transport");
  auto listening = responder->listen(comm::address{"127.0.0.1", 0}, comm::probe_responder());
  if (!listening)
    return listening.error();
  auto r = comm::probe_link(*prober, (*listening)->local_address());
  if (!r)
    return r.error();
  protocol::link_probe_result out;
  out.latency_s = r->latency_s;
  for (const auto& [bytes, rate] : r->bandwidth) {
    out.sizes.push_back(bytes);
    out.bytes_per_s.push_back(rate);
  }
  out.elapsed_s = r->elapsed_s;
  return out;
}

std::optional<config::zone_link> zone_link_probes::probe(
  const std::string& a, const std::string& b, const std::vector<actors::node_inventory>& nodes) {
  const auto configured = configured_.link(a, b);
  // The first node of each zone whose agent is known.
  std::string na, nb;
  caf::actor agent_a, agent_b;
  bool attached = false;
  {
    std::lock_guard lock{agents_mu_};
    attached = static_cast<bool>(answers_);
    for (const auto& n : nodes) {
      auto i = agents_.find(n.name);
      if (i == agents_.end())
        continue;
      if (n.zone == a && na.empty())
        na = n.name, agent_a = i->second;
      if (n.zone == b && nb.empty())
        nb = n.name, agent_b = i->second;
    }
  }
  std::string how;
  result<protocol::link_probe_result> r = probe_failed("no node of the pair can be asked");
  if (!na.empty() && !nb.empty() && attached) {
    how = "by node " + na + " to node " + nb;
    r = between(na, agent_a, nb, agent_b, a, b);
  } else if (emulated_) {
    how = "on this host's loopback, through the link shaper (no node of the pair can be asked)";
    r = loopback(a, b);
  }
  if (!r) {
    std::fprintf(stderr, "sailor coordinator: warning: [link %s->%s] probe failed (%s): planning "
                         "on the configured link%s\n",
                 a.c_str(), b.c_str(), r.error().message.c_str(), next_probe(a, b).c_str());
    return std::nullopt;
  }
  auto measured = comm::measured_link(configured, to_comm(*r));
  measured.from = a;
  measured.to = b;
  std::printf("sailor coordinator: [link %s->%s] probed in %.2f s: latency %.2f ms, %.1f MB/s "
              "at %.0f KiB (configured %.2f ms, %.1f MB/s); %s\n",
              a.c_str(), b.c_str(), r->elapsed_s, 1e3 * measured.latency_s,
              r->bytes_per_s.empty() ? 0.0 : r->bytes_per_s.back() / 1e6,
              r->sizes.empty() ? 0.0 : r->sizes.back() / 1024, 1e3 * configured.latency_s,
              configured.bandwidth_gbytes_per_s * 1e3, how.c_str());
  std::fflush(stdout);
  return measured;
}

bool zone_link_probes::due(const pair_probes& p) const {
  return !p.link && p.probes < most_probes_ && (p.probes == 0 || now_() >= p.again);
}

std::string zone_link_probes::next_probe(const std::string& a, const std::string& b) const {
  auto it = probed_.find({a, b});
  if (it == probed_.end())
    return {};
  const auto& p = it->second;
  char buf[160];
  if (p.probes >= most_probes_)
    std::snprintf(buf, sizeof buf, " (probe %d of %d: not probed again)", p.probes, most_probes_);
  else
    std::snprintf(buf, sizeof buf, " (probe %d of %d: probed again when plans are made after %.0f s)",
                  p.probes, most_probes_, std::chrono::duration<double>(p.again - now_()).count());
  return buf;
}

int zone_link_probes::probes_of(const std::string& a, const std::string& b) {
  std::lock_guard lock{mu_};
  auto it = probed_.find(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
  return it == probed_.end() ? 0 : it->second.probes;
}

config::cluster zone_link_probes::network_for(const std::vector<actors::node_inventory>& nodes) {
  std::set<std::string> zones;
  for (const auto& n : nodes)
    zones.insert(n.zone);
  std::lock_guard lock{mu_};
  config::cluster out = configured_;
  for (auto a = zones.begin(); a != zones.end(); ++a)
    for (auto b = std::next(a); b != zones.end(); ++b) {
      auto& pair = probed_[{*a, *b}];
      if (due(pair)) {
        ++pair.probes;
        pair.again = now_() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(retry_after_s_ * (1 << std::min(pair.probes - 1, 20))));
        pair.link = probe(*a, *b, nodes);
      }
      if (!pair.link)
        continue;
      std::erase_if(out.links, [&](const config::zone_link& l) {
        return (l.from == *a && l.to == *b) || (l.from == *b && l.to == *a);
      });
      out.links.push_back(*pair.link);
    }
  return out;
}

}  // namespace sailor::app
