#pragma once
// The links between the zones of the nodes that joined, probed (issue 14) and given to the
// planner and simulator instead of the configured figures (`sailor coordinator
// --emulate-links` or --probe-links).
//
// For each zone pair not yet probed, a node of zone B is asked to serve a probe and a node of
// zone A to probe it (protocol/probe_messages.hpp): the latency and a bandwidth curve from
// 64 KiB up (comm/link_probe.hpp), measured over the nodes' own data transport, shaped by the
// emulated links when they are emulated. Each answer is waited for a bounded time: a node
// that dies or a probe that fails or times out keeps the pair's configured link, with a
// warning naming the pair. Only when no node of a pair can be asked (no agent known, or the
// answers are not attached yet) and the links are emulated, the pair is probed in this
// process over loopback through the same shaper: on one machine that emulates its zones,
// that is the link the nodes get. A pair is probed once when its probe succeeds; one that
// failed is probed again when plans are next made over it, after a wait that doubles each
// time (from `retry_after_s`), at most `most_probes` times in all.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "sailor/actors/bridge.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/protocol/probe_messages.hpp"

namespace sailor::app {

class zone_link_probes {
public:
  /// `emulated`: the configured links are the shaper's (the nodes shape their probes by them);
  /// else the links are real and only probes between nodes measure them. `timeout_s` bounds
  /// every wait of a probe; an answer is waited for at most twice that.
  zone_link_probes(config::cluster configured, bool emulated, double timeout_s = 5,
                   double retry_after_s = 10, int most_probes = 4);
  ~zone_link_probes();
  zone_link_probes(const zone_link_probes&) = delete;
  zone_link_probes& operator=(const zone_link_probes&) = delete;

  /// A node admitted, and the actor that reaches its agent (supervisor_options::on_admitted).
  void admitted(const actors::node_inventory& node, const caf::actor& agent);
  /// The nodes' answers come to an actor of `system` published on `bridge` as "link_probes".
  void attach(caf::actor_system& system, actors::bridge& bridge);
  /// Stops that actor (before the actor system ends).
  void detach();

  /// The configured cluster with the link of every pair of `nodes`' zones as probed. A pair
  /// not probed yet is probed now, as is one whose probe failed and whose wait is over.
  config::cluster network_for(const std::vector<actors::node_inventory>& nodes);

  /// Probes of the zone pair so far (either order), failed ones included.
  int probes_of(const std::string& a, const std::string& b);
  /// The clock the waits between probes are read on (tests move it).
  void set_clock(std::function<std::chrono::steady_clock::time_point()> now) { now_ = std::move(now); }

private:
  struct inbox {  // the answers, by probe id
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::uint64_t, protocol::link_probe_result> answers;
  };

  // The pair's link as measured (nullopt: the probe failed, said on stderr).
  std::optional<config::zone_link> probe(const std::string& a, const std::string& b,
                                         const std::vector<actors::node_inventory>& nodes);
  // Node `from` probes node `to`; an error says why not.
  result<protocol::link_probe_result> between(const std::string& from, const caf::actor& from_agent,
                                              const std::string& to, const caf::actor& to_agent,
                                              const std::string& zone_a, const std::string& zone_b);
  // Asks `agent` and waits for its node's answer.
  result<protocol::link_probe_result> ask(const std::string& node, const caf::actor& agent,
                                          protocol::link_probe_request request);
  // The pair probed in this process, over loopback through the shaper.
  result<protocol::link_probe_result> loopback(const std::string& a, const std::string& b) const;

  const config::cluster configured_;
  const bool emulated_;
  const double timeout_s_;
  std::shared_ptr<inbox> inbox_ = std::make_shared<inbox>();
  std::atomic<std::uint64_t> next_id_{0};
  std::mutex agents_mu_;  // agents_, answers_
  std::map<std::string, caf::actor> agents_;
  caf::actor answers_;
  // A zone pair: its link as probed (nullopt: not yet, or the probes failed), the probes so
  // far, and when a failed one may be probed again.
  struct pair_probes {
    std::optional<config::zone_link> link;
    int probes = 0;
    std::chrono::steady_clock::time_point again;
  };
  // Whether `p` is to be probed now.
  bool due(const pair_probes& p) const;
  // What a failed probe's warning adds: when the pair is probed next, if ever (under mu_).
  std::string next_probe(const std::string& a, const std::string& b) const;

  const double retry_after_s_;
  const int most_probes_;
  std::function<std::chrono::steady_clock::time_point()> now_ = [] { return std::chrono::steady_clock::now(); };
  std::mutex mu_;  // probed_
  std::map<std::pair<std::string, std::string>, pair_probes> probed_;
};

}  // namespace sailor::app
