#pragma once
// The recovery fields of the run summaries (`sailor demo --summary-json`, `sailor coordinator
// --summary-json`): how many completed iterations were run again, how long each recovery
// took, where the state came from and how many bytes moved (issue 12).
#include <vector>

#include <nlohmann/json.hpp>

#include "sailor/actors/job_supervisor.hpp"

namespace sailor::app {

/// Sets lost_iterations (sum), recovery_s (`recovery_s`: one per recovery, seconds from the
/// kill or notice, or from the loss noticed when the caller cannot see the kill, to the next
/// completed iteration), state_source (replicas, checkpoint, none, or mixed: when recoveries
/// differ, or one took some layers from memory and others from a checkpoint; null without
/// one), bytes_restored (sum) and recovery (each record's cause and time split). A re-plan
/// that stopped ranks still training (a node joined: growth) is a recovery of cause "replan",
/// counted like a loss: its seconds run from the ranks' stop.
void add_recovery_fields(nlohmann::json& j, const std::vector<actors::recovery_record>& records,
                         const std::vector<double>& recovery_s);

}  // namespace sailor::app
