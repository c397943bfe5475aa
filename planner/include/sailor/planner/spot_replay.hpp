#pragma once
/// A spot availability timeline through the planner and simulator: what a job would train, pay,
/// lose and spend recovering, under several ways of reacting to the changes.
///
/// Policies (all priced by the same simulator and the same recovery model):
/// - `ours`: our runtime as it recovers (docs/distributed.md, "Preemption and growth"): re-plans on
///   every change that touches the plan; a growth re-plan trains on while the next plan is made and
///   takes state from the running ranks' memory (only shards that must move are transferred,
///   no iteration lost: tests/train_growth); a loss whose survivors hold every layer resumes
///   from their memory (the iteration in flight is lost: tests/train_elastic); a node with
///   notice hands the state only it holds to a node that stays before it leaves (no loss);
///   only when no survivor holds some layer (a whole stage lost without notice, or a notice
///   too short to hand the state over) does the job roll back to the newest checkpoint. With the liveput
///   objective, plans are chosen by expected throughput under the preemption rates seen so far
///   (no look-ahead), and the job grows only when the gain pays for the switch.
/// - `restart_from_checkpoint` (Sailor, Varuna): every change of plan stops the job and restarts
///   it from the newest checkpoint (taken at the notice when there is one); plans maximise
///   throughput over what is available.
/// - `static`: the plan chosen over the capacity at the start, restarted from the newest
///   checkpoint whenever its GPUs are all back; it waits otherwise.
/// - `on_demand`: the peak of every column of the trace at on-demand prices, never preempted.
///
/// A job holds (and pays for) the GPUs its plan uses, during recovery too; a trace's count is
/// the GPUs it could hold, so a plan that leaves some spare is not touched by a drop that the
/// spare absorbs.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sailor/planner/planner.hpp"
#include "sailor/planner/spot_trace.hpp"

namespace sailor::planner {

/// What a change of plan costs in wall time. Defaults, and where each comes from:
struct recovery_model {
  /// Noticing a node that left without notice: the supervisor's heartbeat timeout
  /// (job_supervisor_config::heartbeat_timeout, 2 s).
  double detection_s = 2.0;
  /// Stopping the ranks and starting the new plan's (rendezvous, communicators, first
  /// iteration): 3 s, the middle of the 2.5-3.4 s the runtime takes from a node's loss to the
  /// next plan's first iteration (tests/train_elastic, bench/README.md "Preemption").
  double restart_s = 3.0;
  /// The same for restart_from_checkpoint and static (a full restart); by default the same
  /// figure, as our runtime restarts the same way (pass a measured figure to change it).
  double baseline_restart_s = 3.0;
  /// < 0: the planner's own search time for the plan, measured in this replay.
  double planning_s = -1;
  /// Per GPU, state moved between nodes or read from checkpoints: 1.25 GB/s, the 10 Gbit/s NIC
  /// of an AWS p3.2xlarge (the instances of the spot traces).
  double transfer_gbytes_per_s = 1.25;
  /// Model and optimizer state per parameter: 16 bytes (mixed-precision Adam: fp16 weights and
  /// gradients, fp32 master weights and two moments; ZeRO, Rajbhandari et al. 2020).
  double state_bytes_per_param = 16;
  /// Asynchronous checkpoints, every this many seconds of training.
  double checkpoint_interval_s = 600;
  /// Warning before a spot instance is taken: AWS gives 2 minutes.
  double notice_s = 120;
  /// Fraction of the ticks with a drop whose preemptions come without notice (spread evenly
  /// over the trace, the same ticks for every policy).
  double no_notice_fraction = 0;
  /// Checkpoints are kept where they outlive every node (`sailor coordinator
  /// --keep-checkpoints`, or shared or object storage, as restart_from_checkpoint assumes of
  /// Sailor and Varuna). false: only on the nodes (each in its own state folder, each shard
  /// copied to a node of another stage; docs/distributed.md "Preemption and growth"): a whole stage
  /// lost still resumes from the checkpoint, but when no node of the plan is left (every one gone,
  /// with notice or not) the job starts over from iteration 0.
  bool checkpoints_outlive_nodes = true;
};

enum class spot_policy { ours, restart_from_checkpoint, static_plan, on_demand };
enum class spot_objective { throughput, liveput };
const char* to_string(spot_policy p);
const char* to_string(spot_objective o);

/// One change of plan.
struct replay_change {
  double at_s = 0;
  std::string why;  ///< "preemption (notice)", "preemption (no notice)", "growth", "start", ...
  int gpus_before = 0, gpus_after = 0;
  double throughput_after = 0;  ///< iterations/s of the new plan (0: waiting)
  double downtime_s = 0;        ///< modelled stop of training
  double lost_iterations = 0;
  double usd_per_hour_after = 0;  ///< GPUs held by the new plan
  std::string plan_after;       ///< summary() of the new plan ("" while waiting)
};

struct replay_totals {
  double iterations = 0;  ///< completed and kept (rolled-back work not counted)
  double dollars = 0;     ///< GPU time held plus egress
  double lost_iterations = 0;
  double recovery_s_total = 0;  ///< wall time stopped for a change of plan
  double training_s = 0, waiting_s = 0;  ///< waiting: no plan (no capacity, or static's GPUs gone)
  double gpu_hours = 0;
  int replans = 0;
  int preemptions_with_notice = 0, preemptions_without_notice = 0;  ///< those that hit the plan
  double span_s = 0;
  /// When the kept iterations first reached the replayer's target (< 0: not in the span, or
  /// no target set).
  double time_to_target_s = -1;
  std::vector<replay_change> changes;
  double iterations_per_dollar() const { return dollars > 0 ? iterations / dollars : 0; }
};

/// Per column, how often its count fell below each level, from the ticks seen so far.
class preemption_history {
public:
  explicit preemption_history(size_t columns);
  void observe(const std::vector<int>& counts, double duration_s);
  /// Falls below `level` per second (a prior of one per 12 hours until the history says more).
  double crossing_rate(size_t column, int level) const;
  double seen_s() const { return seen_s_; }

private:
  std::vector<std::map<int, int>> crossings_;  ///< column -> level -> falls from >= level to < level
  std::vector<int> last_;
  double seen_s_ = 0;
};

/// The replay of one timeline. Plans are cached per distinct capacity vector.
class spot_replayer {
public:
  spot_replayer(problem prob, availability_timeline timeline, recovery_model rec, options opts = {});
  replay_totals run(spot_policy policy, spot_objective objective = spot_objective::throughput);
  /// Another recovery model for the next runs; the plans cached stay (unless
  /// `state_bytes_per_param` changes: the shard sizes are cached with them).
  void set_recovery(const recovery_model& rec);

  /// What makes the plan over one capacity vector (`prob.cluster` holds that capacity): the
  /// planner's search by default; another (such as the plan a live run makes, every GPU a
  /// replica) to replay that policy's plans. Clears the plans cached.
  using plan_source = std::function<result<plan_result>(const problem&)>;
  void set_plan_source(plan_source source);

  /// Ours (throughput objective) and restart_from_checkpoint re-plan on every rise of
  /// capacity, faster plan or not, as a live coordinator does when a node joins (`sailor replay
  /// --live`: every node trains).
  void set_grow_on_every_rise(bool on) { grow_on_every_rise_ = on; }

  /// Iterations whose completion time `replay_totals::time_to_target_s` reports (0: none).
  void set_target_iterations(double n) { target_iterations_ = n; }
  int planner_calls() const { return planner_calls_; }
  double planner_s() const { return planner_s_; }

  /// A plan over one capacity vector, with what the replay needs of it.
  struct entry {
    bool ok = false;
    std::string why;  ///< when not ok
    config::plan plan;
    double throughput = 0, gpu_usd_per_s = 0, egress_usd_per_iteration = 0;
    double search_s = 0;
    double state_per_gpu_bytes = 0;  ///< the largest shard one GPU holds
    std::vector<int> held;           ///< GPUs used per column
  };
  const entry& plan_for(const std::vector<int>& counts, bool on_demand = false);

private:
  struct state;
  void handle_preemption(state& s, int tick, spot_policy policy, spot_objective objective);
  void handle_growth(state& s, int tick, spot_policy policy, spot_objective objective);
  const entry* choose(const std::vector<int>& counts, spot_objective objective, const preemption_history& h);
  double liveput(const entry& e, const std::vector<int>& counts, const preemption_history& h) const;
  double planning_s(const entry& e) const;
  double transfer_s(const entry& from, const entry& to) const;
  bool without_notice(int tick) const;

  problem prob_;
  availability_timeline timeline_;
  recovery_model rec_;
  options opts_;
  plan_source source_;
  std::map<std::pair<bool, std::vector<int>>, entry> cache_;
  int planner_calls_ = 0;
  double planner_s_ = 0;
  double target_iterations_ = 0;
  bool grow_on_every_rise_ = false;
};

/// Whether every stage of `plan` keeps a replica when the columns it holds (`held`) fall to
/// `counts`. Which instances a cloud takes is not in a trace: a column's replicas are taken from
/// the last stage backwards.
bool survivors_hold_every_layer(const config::plan& plan, const std::vector<trace_column>& columns,
                                const std::vector<int>& held, const std::vector<int>& counts);

/// Whether none of the GPUs a plan holds per column (`held`) is left when the columns fall to
/// `counts`.
bool every_node_gone(const std::vector<int>& held, const std::vector<int>& counts);

/// The replay's figures as the `--json` contract prints them (one policy); with
/// `with_changes`, also `changes`: every change of plan.
std::string totals_json(const replay_totals& t, bool with_changes = false);

}  // namespace sailor::planner
