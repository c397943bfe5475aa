#pragma once
// A node's side of the link probes between nodes (issue 14, protocol/probe_messages.hpp): a
// probe responder for its peers and the probes it runs of theirs, over a transport of the
// node's data-transport kind, shaped by the emulated links the coordinator sends (and by
// --link-file's changes) so that a probe crosses what the ranks' transfers cross.
//
//   link_probe_request{serve} --> the responder listens on the advertised address (once;
//                                 later requests get the same) --> {address}
//   link_probe_request{probe} --> comm::probe_link to the address, on a thread of its own
//                                 (bounded by the request's timeout) --> {latency, curve}
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sailor/comm/channel.hpp"  // transport_maker
#include "sailor/comm/link_table.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/protocol/probe_messages.hpp"

namespace sailor::node {

class node_probes {
public:
  /// `make`: the node's data-transport kind; `options`: its name, zone, job token and TLS;
  /// `changed`: the emulated links changed at run time (--link-file), over the requests'.
  node_probes(comm::transport_maker make, comm::transport_options options, std::string advertise,
              std::shared_ptr<const comm::link_table> changed);
  /// Waits for the probes in flight (each bounded by its timeout).
  ~node_probes();
  /// Waits for the probes in flight: their answers go through the actor system, which must
  /// outlive them.
  void wait();
  node_probes(const node_probes&) = delete;
  node_probes& operator=(const node_probes&) = delete;

  /// Serves or runs `request`; `answer` gets the result (at once for serve, from the probe's
  /// thread for probe).
  void handle(const protocol::link_probe_request& request,
              std::function<void(protocol::link_probe_result)> answer);

private:
  // The shaped transport, made on first use; "" or why it could not be made.
  std::string ensure_transport();
  void probe(protocol::link_probe_request request,
             std::function<void(protocol::link_probe_result)> answer);

  struct emulated {  // what the shaper's lookup reads, from any thread
    std::mutex mu;
    std::vector<config::zone_link> links;
  };

  comm::transport_maker make_;
  comm::transport_options options_;
  std::string advertise_;
  std::shared_ptr<const comm::link_table> changed_;
  std::shared_ptr<emulated> emulated_ = std::make_shared<emulated>();
  std::mutex mu_;  // everything below
  std::unique_ptr<comm::transport> transport_;
  std::unique_ptr<comm::listener> responder_;
  std::vector<std::thread> probes_;
};

}  // namespace sailor::node
