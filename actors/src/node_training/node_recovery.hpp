#pragma once
// Private to node training: what a rank keeps when its plan ends before the job's last
// iteration (a node was lost, or the supervisor released the plan), so that the next plan
// takes the state from the survivors' memory rather than from an older checkpoint on disk.
//
// The rank encodes its parameters and optimizer state after its last completed iteration as
// the checkpoint shard replica 0 of its stage writes (same name, same format), keeps it in
// the node's memory_shards under checkpoints/<job>/mem/iter-<n>/<shard file>, and tells the
// supervisor (a train_report of kind snapshot): the supervisor's holdings then list it like
// a file on disk, and the node's shard server serves it like one. No LibTorch here.

#include <optional>
#include <string>

#include "sailor/train/executor.hpp"
#include "sailor/actors/train_messages.hpp"
#include "sailor/train/shard_access.hpp"
#include "sailor/train/shard_service.hpp"

namespace sailor::train {

/// Where the in-memory state of a job whose plan writes to `checkpoint_dir`
/// (checkpoints/<job>/v<N>) lives: checkpoints/<job>/mem/iter-<iterations>/<name>.
std::string memory_state_path(const std::string& checkpoint_dir, int iterations,
                              const std::string& name);

/// Keeps the rank's state after `completed` iterations in `memory` and returns the report
/// that says so (kind snapshot), from `base` (the rank's identity). Without memory or a
/// checkpoint folder, or when the state cannot be encoded, the report says why (error).
actors::train_report keep_state(memory_shards* memory, const actors::training_job& job,
                                const actors::train_report& base, const stage_executor& exec,
                                int completed);

/// The report of a rank whose iteration `iteration` reached a loss or gradient norm that is
/// not finite (`why`), from `base`: kind diverged, with the newest checkpoint shard it wrote
/// (`checkpoint_file`, relative to the state folder; may be empty), which the job may go back
/// to. The rank stops; the report of the state it keeps then follows (not_kept, since that
/// state led to the non-finite value).
actors::train_report diverged_report(const actors::train_report& base, int iteration,
                                     const std::string& why, const std::string& checkpoint_file);

/// The snapshot report of a rank that keeps no state after `completed` iterations because
/// its next iteration was not finite: the next plan takes its state from a checkpoint.
actors::train_report not_kept(const actors::train_report& base, int completed);

/// Whether a job's restore takes any shard from the survivors' memory (a path under
/// checkpoints/<job>/mem): such a restore reads no file it does not already have.
bool restores_from_memory(const actors::training_job& job);

/// The state a rank restores from, gathered without writing a file: the shards of the job's
/// restore that hold any of layers [first_layer, end_layer), each from this node's memory
/// when it holds it, else from its state folder when the file is there, else fetched into
/// memory from its holders over `transport` (several at once for a large shard); `cancel`
/// (may be null) ends the fetches early.
struct gathered_state {
  std::vector<shard_input> shards;            ///< what stage_executor::restore reads
  std::vector<received_shard> received;       ///< keeps fetched bytes alive
  std::vector<memory_shards::bytes_ptr> held;  ///< keeps this node's own bytes alive
  std::int64_t fetched_bytes = 0;             ///< that came over the transport
  std::int64_t bytes = 0;                     ///< of every shard read, from wherever
};
result<gathered_state> gather_state(const actors::training_job& job, int first_layer,
                                    int end_layer, const memory_shards* memory,
                                    const std::string& state_dir, comm::transport& transport,
                                    fetch_cancel* cancel = nullptr);

/// Where a rank of `node` in `role` that leaves with notice hands its in-memory state over:
/// the shard server (host:port) of a node of the job's plan that holds other layers (another
/// stage: when a whole stage leaves, no replica of it survives), picked by the rank's replica
/// so that the replicas of a leaving stage spread over the others; failing that, another
/// node of its own stage. Nullopt when the plan has no other node.
std::optional<std::string> handover_target(const actors::training_job& job,
                                           const actors::stage_role& role,
                                           const std::string& node);

/// The job's plan as the node's shard server judges peers' requests by (shard_access.hpp):
/// its nodes with the layers of their stages, its folders and iterations.
plan_members plan_members_of(const actors::training_job& job);

/// The report a node sends when it holds a shard a peer handed over (kind snapshot, of no plan
/// version: it does not count as a survivor's report): phase "handover" for the in-memory
/// state of a peer that leaves, "copy" for a copy of a checkpoint shard a peer wrote
/// (checkpoint_copies.hpp).
actors::train_report handover_report(const std::string& node, const std::string& path,
                                     std::int64_t bytes);

}  // namespace sailor::train
