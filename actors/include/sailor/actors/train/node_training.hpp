#pragma once
/// Training on a sailor-node: the stage hook that turns a stage role into a running rank.
///
/// The supervisor sends a training_job (model, plan, rendezvous folder, iterations) before the
/// role_assignment of its plan. For each role the hook starts a thread (training never runs
/// inside a CAF message handler) that builds the rank's Gloo communicators through the
/// job's FileStore, builds the stage_executor and runs the iterations, sending one
/// train_report per iteration to the node agent (which forwards it to the supervisor).
/// A failure is a train_report with `error` set. No LibTorch in this header.

#include <memory>
#include <string>

#include <caf/actor.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/train/executor.hpp"
#include "sailor/actors/train/messages.hpp"

namespace sailor::train {

/// The executor options a training job asks for (the same on every rank; tests use it to
/// compute reference loss curves).
train_options options_for(const actors::training_job& job);

/// Owns the training threads of one node. Thread-safe.
class node_trainer {
public:
  explicit node_trainer(std::string node_name);
  /// Stops and joins every training thread (see stop()).
  ~node_trainer();
  node_trainer(const node_trainer&) = delete;
  node_trainer& operator=(const node_trainer&) = delete;

  /// Where reports go: the node agent.
  void set_agent(caf::actor agent);
  /// Remembers the job; threads of older plan versions stop after their current iteration.
  void on_job(const actors::training_job& job);
  /// The stage hook: starts the role's training thread when a job exists for its plan
  /// version (without one the role is control-only and ready at once).
  status on_role(const actors::stage_role& role);
  /// Asks every thread to stop after its current iteration and joins them. A thread blocked
  /// on a peer that is gone ends when its wait times out (the job's timeout).
  void stop();

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sailor::train
