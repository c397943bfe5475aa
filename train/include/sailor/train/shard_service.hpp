#pragma once
/// Checkpoint shards between nodes that share no file system.
///
/// Each node keeps the checkpoint shards its ranks write in its own state folder and serves
/// them to its peers over comm's transport (UCX or TCP: the transport the node already
/// runs). A rank of a new plan that must restore a checkpoint whose shards another node
/// wrote fetches the missing files first (`fetch_shards`), then restores from its own
/// folder.
///
///   fetching rank                               serving node (shard_server)
///   connect(holder) ------- handshake ------->  accept
///   control "get <relative path>" ----------->  reads state_dir/<relative path>
///             <------------------ tensor (u8, the file's bytes, name = path)
///             <------------------ or control "error <why>"
///
/// Only files under the state folder's `checkpoints/` are served, by relative paths without
/// `..`; anything else is answered with an error. On a sailor-node, which peer may fetch or
/// hand over which shard is shard_access.hpp's to say (by the name it authenticated as). A fetched file is written under a
/// temporary name and renamed into place, so a reader never sees half a file.
/// No LibTorch here.

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sailor/comm/tensor.hpp"
#include "sailor/comm/transport.hpp"
#include "sailor/config/error.hpp"
#include "sailor/train/shard_access.hpp"

namespace sailor::train {

/// Checkpoint shards a node holds in memory rather than on disk: the state its ranks had
/// after their last completed iteration when their plan ended (recovery from the survivors'
/// memory). Paths look like disk ones (checkpoints/<job>/mem/iter-<n>/<shard file>), so the
/// supervisor's holdings and a fetching rank treat them alike. Thread-safe.
class memory_shards {
public:
  using bytes_ptr = std::shared_ptr<const std::vector<std::byte>>;
  /// Keeps `bytes` under `path`; of each folder (checkpoints/<job>/mem) only the shards of
  /// the newest `keep` iterations stay.
  void put(const std::string& path, std::vector<std::byte> bytes, int keep = 2);
  /// Keeps `bytes` that the peer `from` handed over, as put() does, unless the bytes peers
  /// handed over would then pass `max_held`, or those `from` handed over `per_peer`: then
  /// nothing changes and the reason is returned (empty when kept). This node's own state
  /// (put) counts against neither.
  std::string hold_from(const std::string& from, const std::string& path,
                        std::vector<std::byte> bytes, std::int64_t per_peer,
                        std::int64_t max_held, int keep = 2);
  /// The shard at `path`, or null.
  bytes_ptr get(const std::string& path) const;
  /// Drops the copies of checkpoint shards in the plan folders of `job_dir`
  /// (checkpoints/<job>) other than `keep` (relative, as the paths; its `mem` folder stays):
  /// as the nodes remove the plan folders no plan restores from any more. Returns how many.
  std::size_t drop_plan_folders(const std::string& job_dir, const std::vector<std::string>& keep);
  std::size_t bytes() const;
  /// The paths of this node's own state (put), newest iteration last within a folder: what a
  /// node that rejoins a coordinator offers besides its disk's shards.
  std::vector<std::string> own_paths() const;
  /// The bytes held of what peers handed over (all of them when `from` is empty).
  std::int64_t handed_over_bytes(const std::string& from = {}) const;

  /// Called (on the transport's thread) for each shard a leaving peer handed over to this
  /// node (`hand_over_shard`), once it is held: the node tells its supervisor.
  using handover_listener = std::function<void(const std::string& path, std::int64_t bytes)>;
  void set_handover_listener(handover_listener listener);
  void handed_over(const std::string& path, std::int64_t bytes) const;

private:
  struct entry {
    bytes_ptr bytes;
    std::string from;  // the peer that handed it over; empty: this node's own
  };
  // The paths put() of `path` would drop: older iterations of its folder. Holds mu_.
  std::set<std::string> evicted_by(const std::string& path, int keep) const;
  void keep_newest(const std::string& path, int keep);  // holds mu_

  mutable std::mutex mu_;
  std::map<std::string, entry> held_;
  handover_listener listener_;
};

/// Serves the checkpoint shards under `state_dir` to peers. Resource type.
class shard_server {
public:
  /// Test-only: asked (on the transport's thread) with the path of each request before it
  /// is answered; true leaves the request unanswered, as a holder that stalls mid-transfer
  /// (the process tests SIGKILL it there, at a point they know).
  using request_hold = std::function<bool(const std::string& path)>;

  /// Listens on `host` (port 0: any free port) over `transport` (which must outlive it).
  /// `access` (shard_access.hpp) says which peer may fetch and hand over what, by the name it
  /// authenticated as; a refusal is answered "error refused: <why>". Null: every peer that
  /// passed the transport's handshake may fetch any shard and hand any over (tests, the
  /// coordinator's keeper).
  static result<std::unique_ptr<shard_server>> start(comm::transport& transport,
                                                     const std::string& host,
                                                     std::string state_dir,
                                                     std::shared_ptr<memory_shards> memory = {},
                                                     request_hold hold = {},
                                                     std::shared_ptr<const shard_access> access = {});
  ~shard_server();
  shard_server(const shard_server&) = delete;
  shard_server& operator=(const shard_server&) = delete;

  /// host:port where peers reach it.
  std::string address() const;

  struct impl;

private:
  shard_server() = default;
  std::shared_ptr<impl> impl_;
};

/// One file to fetch: its path relative to the state folders, and the node that holds it.
struct shard_source {
  std::string path;
  std::string holder;  ///< host:port of its shard_server
};

/// Fetches every file of `sources` that `state_dir` does not hold yet (bounded by `timeout`
/// per file); an error names the file and the holder that failed. Calls for one state
/// folder must not overlap (the node's ranks take turns). `fetched_bytes`, when given, gets
/// the bytes that came over the transport added.
status fetch_shards(comm::transport& transport, const std::string& state_dir,
                    const std::vector<shard_source>& sources, std::chrono::milliseconds timeout,
                    std::int64_t* fetched_bytes = nullptr);

/// Ends the fetches given it early (a rank whose plan was released while it restores): once
/// cancel() is called, each such fetch in flight fails at once with `why`, and later ones
/// before they start. Thread-safe: the fetching threads and the one that cancels share it.
class fetch_cancel {
public:
  void cancel(const std::string& why);
  /// Why it was cancelled; empty while it is not.
  std::string reason() const;
  /// For the fetch: `on_cancel` runs once cancel() is called (at once if it was); the
  /// returned key unwatches it. on_cancel must not call back into this object.
  std::uint64_t watch(std::function<void(const std::string& why)> on_cancel);
  void unwatch(std::uint64_t key);

private:
  mutable std::mutex mutex_;
  std::string why_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, std::function<void(const std::string&)>> watching_;
};

/// A shard received into memory: the buffers it arrived in, in order (one per holder it came
/// from in parts), never copied into one piece nor written to a file.
struct received_shard {
  std::string path;
  std::vector<comm::payload_buffer> parts;
  std::int64_t size() const;
  /// The parts as spans (what a restore reads, executor.hpp's shard_input).
  std::vector<std::span<const std::byte>> spans() const;
};

/// Fetches every file of `sources` into memory, as fetch_shards does (in parts from several
/// holders at once when a large shard has several, each bounded by `timeout`), and writes
/// nothing: recovery from the survivors' memory restores straight from the received bytes.
/// An error names the file and the holders that failed. Calls may overlap. `cancel` (may be
/// null) ends it early.
result<std::vector<received_shard>> fetch_into_memory(comm::transport& transport,
                                                      const std::vector<shard_source>& sources,
                                                      std::chrono::milliseconds timeout,
                                                      std::int64_t* fetched_bytes = nullptr,
                                                      fetch_cancel* cancel = nullptr);

/// Whether the shard server at `holder` (host:port) can be reached: the transport's handshake
/// completes within `timeout`. A rank checks its plan's peers this way before the rendezvous:
/// a server listens on the address the node advertised, as its collectives do, so a peer
/// that cannot be reached here would stall the rendezvous; the error says why.
status probe_shard_server(comm::transport& transport, const std::string& holder,
                          std::chrono::milliseconds timeout);

/// True when `path` is a relative path under checkpoints/ without `..` (what a server serves).
bool servable_path(const std::string& path);

/// True when `path` is servable and names in-memory state (checkpoints/<job>/mem/...): what
/// a peer leaving with notice hands over.
bool handover_path(const std::string& path);

/// True when `path` is servable and names one shard of an iteration folder
/// (checkpoints/<job>/<plan folder or mem>/<iteration>/<shard>): what a peer may hand over,
/// its in-memory state (handover_path) or a copy of a checkpoint shard it wrote.
bool shard_copy_path(const std::string& path);

/// The bytes of the file `path` (servable_path) under `state_dir`, or why not.
result<memory_shards::bytes_ptr> read_shard_file(const std::string& state_dir,
                                                 const std::string& path);

/// A node leaving with notice hands a shard only it may hold over to the node at `holder`
/// (host:port of its shard_server), which keeps it in its memory_shards under the same path
/// and tells its supervisor: the state outlives the leaving node even when the next plan
/// takes longer than the grace period. A writer copies each checkpoint shard it wrote to a
/// node outside its stage the same way (any shard_copy_path), so that the checkpoint outlives
/// the whole stage. Bounded by `timeout`; the error names the holder.
///
///   leaving node                                 receiving node (shard_server)
///   tensor (u8, the shard, name = path) ------->  memory_shards::put, handed_over
///             <-------------------------------  control "stored" or "error <why>"
status hand_over_shard(comm::transport& transport, const std::string& holder,
                       const std::string& path, memory_shards::bytes_ptr bytes,
                       std::chrono::milliseconds timeout);

}  // namespace sailor::train
