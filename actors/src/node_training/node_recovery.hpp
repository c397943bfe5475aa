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

/// Where a rank of `node` in `role` that leaves with notice hands its in-memory state over:
/// the shard server (host:port) of a node of the job's plan that holds other layers (another
/// stage: when a whole stage leaves, no replica of it survives), picked by the rank's replica
/// so that the replicas of a leaving stage spread over the others; failing that, another
/// node of its own stage. Nullopt when the plan has no other node.
std::optional<std::string> handover_target(const actors::training_job& job,
                                           const actors::stage_role& role,
                                           const std::string& node);

/// The report a node sends when it holds a shard a leaving peer handed over (kind snapshot,
/// phase "handover", of no plan version: it does not count as a survivor's report).
actors::train_report handover_report(const std::string& node, const std::string& path,
                                     std::int64_t bytes);

}  // namespace sailor::train
