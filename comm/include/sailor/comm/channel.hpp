#pragma once
/// Channels: tensors point to point between the ranks of a job (activations forward,
/// gradients backward between pipeline stages, state for recovery).
///
/// A channel belongs to one rank and joins it to a fixed set of peers (global ranks), chosen
/// when it is created. Sends and receives are matched by (peer, tag), in any order: a receive
/// may be posted before or after the bytes arrive, and several transfers between one pair may
/// be in flight at once. Requests are comm::request (collective.hpp): `wait` is bounded and a
/// failed peer fails every request that involves it.
///
/// Backends:
///  - the transport channel (`make_transport_channel_factory`): the bytes travel over one of
///    comm's transports (UCX or TCP, optionally behind the link shaper, which then limits the
///    real bytes on each emulated zone link), authenticated by the job token like every other
///    connection of the job. Each rank owns a transport; ranks meet through the job's
///    rendezvous store, where each publishes the address it listens on. The raw bytes go as
///    transport tensor payloads (a small Cap'n Proto header, then the payload, never inside a
///    control message); a receive posted before the bytes arrive gets them straight into its
///    buffer.
///  - a communicator's own point-to-point operations (`make_communicator_channel`: Gloo's TCP
///    pairs, NCCL's send/recv), kept for comparison in benches and for single-process tools.
///
/// Lifetime: a send completes once its bytes have left this rank's hands; destroying a
/// transport channel first makes sure its peers received what it sent (a flush mark behind
/// the data, answered by each peer's transport; bounded by the smaller of the timeout and 5 s,
/// peers that failed are not waited for). It then fails every request still pending with it
/// (after which their buffers are no longer touched) and closes its connections; its peers see
/// their requests with this rank fail. Requests must not outlive their channel.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sailor/comm/collective.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::comm {

/// Point-to-point transfers between this rank and its peers. One owner; any thread may post
/// and wait.
class channel : non_copyable {
public:
  virtual ~channel() = default;

  /// This rank's global rank.
  virtual int rank() const = 0;
  /// Starts sending `buf` to global rank `peer` with `tag`. The buffer must stay valid and
  /// unchanged until the request is done.
  virtual std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag) = 0;
  /// Starts receiving exactly buf.bytes() from `peer` with `tag` into `buf` (another size is
  /// an error of the request).
  virtual std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag) = 0;
  /// Bound on waits for a peer.
  virtual std::chrono::milliseconds timeout() const = 0;
  /// What this channel runs over ("tcp", "shaped(ucx)", "gloo pairs", ...).
  virtual std::string backend() const = 0;
  /// Payload bytes handed to the transport and received, since creation.
  virtual std::uint64_t bytes_sent() const = 0;
  virtual std::uint64_t bytes_received() const = 0;
  /// Abandons every transfer: every request in flight fails within a short bound (well under
  /// a second, whatever the peers do) and later ones fail at once, with errors that name
  /// `why`; buffers are no longer touched once their request failed. The connections close
  /// without a flush (the peers' requests with this rank fail). Any thread may call it, any
  /// number of times; it cannot be undone. For a rank that gives up its work.
  virtual void abort(const std::string& why) = 0;
};

/// Makes the channel of one rank.
class channel_factory {
public:
  virtual ~channel_factory() = default;
  /// A channel joining this rank to `peers` (global ranks, not containing this rank); every
  /// peer must create its channel with the same `name` and this rank among its peers. Blocks
  /// until every peer is connected, bounded by the factory's timeout.
  virtual result<std::unique_ptr<channel>> create(const std::string& name,
                                                  const std::vector<int>& peers) = 0;
};

/// Makes the transport one rank's channel runs over (its options name the rank, carry the job
/// token and the node's zone).
using transport_maker =
    std::function<result<std::unique_ptr<transport>>(const transport_options& options)>;

struct transport_channel_options {
  /// Builds the rank's transport; empty: comm's TCP transport.
  transport_maker make_transport;
  /// Options of that transport (token, zone, limits). local_name is set by the factory.
  transport_options transport;
  /// Where the ranks meet (the coordinator's store on a node, an in-memory one in tests).
  std::shared_ptr<rendezvous_store> store;
  /// The address this rank listens on, which its peers must be able to reach (the node's
  /// advertised address).
  std::string host = "127.0.0.1";
  std::chrono::milliseconds timeout{60000};
  /// Distinguishes jobs and plan versions sharing a store.
  std::string prefix = "sailor";
};

/// The transport channels of global rank `global_rank`.
std::unique_ptr<channel_factory> make_transport_channel_factory(int global_rank,
                                                                transport_channel_options options);

/// A channel over `world`'s own isend/irecv, where `world`'s ranks are global ranks (the
/// job's world communicator). `world` must outlive the channel; aborting the channel aborts
/// `world` (the transfers are its own).
std::unique_ptr<channel> make_communicator_channel(communicator& world);

/// A rendezvous store in this process's memory, for ranks running as threads of one process.
std::shared_ptr<rendezvous_store> make_memory_store();

}  // namespace sailor::comm
