#pragma once
/// Training on a sailor-node: the stage hook that turns a stage role into a running rank.
///
/// The supervisor sends a training_job (model, plan, iterations) before the role_assignment
/// of its plan. For each role the hook starts a thread (training never runs inside a CAF
/// message handler) that builds the rank's Gloo communicators and its data-plane channel
/// (comm's transport, shaped under link emulation), meeting its peers through the
/// coordinator's rendezvous store and listening on the node's advertised address, builds the
/// stage_executor and runs the iterations, sending one train_report per iteration to the
/// node agent (which forwards it to the supervisor). Checkpoints go to the node's own state
/// folder: the job's checkpoint folders are relative to it.
/// A failure is a train_report with `error` set. No LibTorch in this header.

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor.hpp>

#include "sailor/actors/stage_actor.hpp"
#include "sailor/actors/messages.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/train/executor.hpp"
#include "sailor/actors/train_messages.hpp"
#include "sailor/train/shard_access.hpp"
#include "sailor/train/shard_service.hpp"
#include "sailor/comm/channel.hpp"
#include "sailor/comm/link_table.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::train {

/// The executor options a training job asks for (the same on every rank; tests use it to
/// compute reference loss curves).
train_options options_for(const actors::training_job& job);

/// Where a node trains: its name, the address its peers reach it on, its own state folder.
struct node_training_options {
  std::string node_name;
  std::string advertise = "127.0.0.1";  ///< collectives listen here
  std::string state_dir;  ///< relative checkpoint folders of a job resolve here
  /// Fetches checkpoint shards other nodes hold (shard_service.hpp); must outlive the
  /// trainer. Null: restore only from the state folder.
  comm::transport* transport = nullptr;
  /// Builds each rank's data-plane transport (activations and gradients, comm/channel.hpp);
  /// empty: comm's TCP transport. Its options carry the job token of `transport`.
  comm::transport_maker make_data_transport;
  /// Emulation (`sailor-node --slowdown`): every iteration's compute stretched this many
  /// times (the rank waits (F-1) x its compute after the step); changeable while training.
  /// Null or 1: none.
  std::shared_ptr<std::atomic<double>> slowdown;
  /// Emulation (`sailor-node --link-file`): zone links changed while training, over the
  /// job's; the shaper applies them to the bytes sent from then on. Null: none.
  std::shared_ptr<const comm::link_table> link_changes;
  /// Where a rank keeps its state when its plan ends before the job's last iteration (the
  /// node's shard server serves it, node_recovery.hpp); null: nothing is kept in memory.
  std::shared_ptr<memory_shards> memory;
  /// What the node's shard server lets peers fetch and hand over (shard_access.hpp): told of
  /// each plan the node is told of, and of the iterations its ranks complete. Null: nothing
  /// is told.
  std::shared_ptr<shard_access> access;
  /// LibTorch intra-op and OpenBLAS threads of each rank (`sailor-node --threads`). 0: the
  /// host's cores shared among this node's ranks of the plan (at least 1 each). A job that
  /// names a count (training_job::torch_threads > 0) overrides both.
  int threads_per_rank = 0;
};


/// Owns the training threads of one node. Thread-safe.
class node_trainer {
public:
  explicit node_trainer(node_training_options options);
  /// Stops and joins every training thread (see stop()).
  ~node_trainer();
  node_trainer(const node_trainer&) = delete;
  node_trainer& operator=(const node_trainer&) = delete;

  /// Where reports go (the node agent) and where ranks meet (the coordinator's store). Call
  /// once the node has joined, before the first role.
  void set_agent(caf::actor agent, std::shared_ptr<actors::rendezvous_client> store);
  /// Remembers the job; threads of older plan versions stop after their current iteration.
  void on_job(const actors::training_job& job);
  /// The newest checkpoint of a plan complete across its stages (from the supervisor): the
  /// writers of that plan keep their shards of it and of every newer iteration, whatever
  /// their count, until a newer one is told.
  void on_checkpoint_kept(const actors::checkpoint_kept& kept);
  /// The stage hook: starts the role's training thread when a job exists for its plan
  /// version (without one the role is control-only and ready at once: null work). The thread
  /// calls `ready` once its communicators and channel are connected and its state restored;
  /// destroying the returned work releases the rank: it stops after its current iteration,
  /// or, when that iteration has not ended 200 ms later (a peer went silent), aborts it
  /// (stage_executor::abort), and keeps its state after its last completed iteration (the
  /// thread is joined by stop()).
  result<std::unique_ptr<actors::stage_work>> on_role(const actors::stage_role& role,
                                                      actors::stage_ready_fn ready);
  /// The node leaves with notice: each rank whose plan ends from now on hands the state it
  /// keeps in memory over to a node of its plan that holds other layers (hand_over_shard),
  /// so that the state outlives the grace period. Call before the ranks are stopped.
  void leaving();
  /// Whether a rank of this node completed the last iteration of its job (every rank of a
  /// plan completes an iteration together): the job's training is done.
  bool finished_job() const;
  /// The newest plan version this node's ranks were given (0: none).
  std::int64_t plan_version() const;
  /// Releases every rank as above and joins their threads: bounded, also when a rank was
  /// blocked on a peer that is gone.
  void stop();

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sailor::train
