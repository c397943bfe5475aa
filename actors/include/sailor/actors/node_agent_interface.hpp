#pragma once
/// What a node agent accepts, as a typed actor interface: from the supervisor (join answers,
/// plans, training jobs, the checkpoint its writers keep, link probes, shutdown), from the node's stage actors and trainer
/// (readiness, failures, training reports), and from its own process (start, preemption
/// notice) and timers. node_agent.hpp has the states it handles them in.

#include <caf/typed_actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/train_messages.hpp"
#include "sailor/protocol/probe_messages.hpp"

namespace sailor::actors {

/// A preemption notice for this node (SIGTERM, a spot notice, `--leave-in`).
using preempt_atom = caf::atom_constant<caf::atom("preempt")>;
/// The grace period after a preemption notice is over.
using leave_atom = caf::atom_constant<caf::atom("leave")>;

using node_agent_actor =
  caf::typed_actor<caf::reacts_to<start_atom>, caf::reacts_to<join_accepted>, caf::reacts_to<join_refused>,
                   caf::reacts_to<role_assignment>, caf::reacts_to<training_job>,
                   caf::reacts_to<checkpoint_kept>,
                   caf::reacts_to<protocol::link_probe_request>, caf::reacts_to<shutdown_notice>,
                   caf::reacts_to<stage_ready>, caf::reacts_to<stage_failed>, caf::reacts_to<train_report>,
                   caf::reacts_to<preempt_atom>, caf::reacts_to<tick_atom>, caf::reacts_to<leave_atom>>;

}  // namespace sailor::actors
