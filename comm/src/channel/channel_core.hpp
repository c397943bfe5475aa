#pragma once
// The state of one transport channel that its transport's callbacks share: the connection to
// each peer, receives posted and payloads arrived before their receive, keyed by (peer, tag).
// Every member is guarded by `mu_`; transport callbacks run on the transport's progress
// thread, posts and waits on the rank's threads.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "request_state.hpp"
#include "sailor/comm/channel.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::comm::channel_detail {

class channel_core : public std::enable_shared_from_this<channel_core> {
public:
  channel_core(int rank, std::string name, std::set<int> peers, std::chrono::milliseconds timeout)
      : rank_(rank), name_(std::move(name)), peers_(std::move(peers)), timeout_(timeout) {}

  int rank() const { return rank_; }
  const std::string& name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The transport name of rank `r` of this channel: "<channel>/rank-<r>".
  std::string transport_name(int r) const { return name_ + "/rank-" + std::to_string(r); }
  /// The peer rank a transport name stands for; -1 when it is not a peer of this channel.
  int peer_of_name(const std::string& transport_name) const;

  /// Handlers of the connection to `peer` (accepted or initiated).
  connection_handlers handlers_for(int peer);
  /// Records the connection to `peer`; `open`: usable now (accepted, or on_open fired).
  void attach(int peer, connection_ptr conn, bool open);
  /// The initiated connection to `peer` is open (its on_open fired; may come before attach).
  void mark_open(int peer);
  /// Waits until every peer's connection is open, or one failed, or `deadline`: the peers
  /// not connected then (empty: all are).
  std::set<int> wait_connected(std::chrono::steady_clock::time_point deadline);
  /// The error that failed `peer`, if any.
  std::optional<transport_error> failure_of(int peer) const;

  std::unique_ptr<request> isend(buffer_view buf, int peer, std::uint64_t tag);
  std::unique_ptr<request> irecv(buffer_view buf, int peer, std::uint64_t tag);
  /// Makes sure every peer has received what this rank sent: a flush mark goes to each peer
  /// behind the tensors already sent (connections keep order), and each peer's transport
  /// answers it at once. Waits for the answers, a peer's failure, or `deadline`.
  void flush(std::chrono::steady_clock::time_point deadline);
  /// Fails every pending receive, and every later request, with `why` (the channel is going
  /// away or was aborted); sends complete through their transport.
  void close(const std::string& why);

  std::atomic<std::uint64_t> bytes_sent{0}, bytes_received{0};

private:
  using key = std::pair<int, std::uint64_t>;
  struct posted_receive {
    buffer_view buf;
    std::shared_ptr<request_state> state;
    bool landing = false;  // the transport is writing the payload straight into buf
  };

  payload_buffer allocate(int peer, const tensor_descriptor& desc);
  void deliver(int peer, const tensor_descriptor& desc, payload_buffer payload);
  void fail_peer(int peer, const transport_error& err);
  void on_mark(int peer, const std::vector<std::byte>& bytes);
  bool withdraw(const key& k, const std::shared_ptr<request_state>& state);
  std::string who(int peer) const;

  const int rank_;
  const std::string name_;
  const std::set<int> peers_;
  const std::chrono::milliseconds timeout_;

  mutable std::mutex mu_;
  std::condition_variable connected_;
  std::map<int, connection_ptr> connections_;
  std::set<int> open_;
  std::map<int, transport_error> failed_;
  std::set<int> flushed_;  // peers that answered this rank's flush mark
  std::map<key, std::deque<posted_receive>> posted_;
  std::map<key, std::deque<payload_buffer>> arrived_;
  bool closed_ = false;
  std::string closed_why_;  // what close() was told
};

}  // namespace sailor::comm::channel_detail
