#pragma once
/// The planner: the best plan for a heterogeneous, multi-zone pool of GPUs.
///
/// A pure function of its inputs: `plan_job(problem, options)` returns the chosen plan with its
/// estimate, `replan(problem, current, options)` re-plans after availability changed and, among
/// near-equal plans, prefers the one that moves the least state. Both are deterministic.
///
/// Search space: which GPUs (type, zone) to use; number of pipeline stages and an uneven split
/// of layers over them; tensor-parallel degree per stage (inside a node); data-parallel replicas
/// (the same number for every stage in the program, then adjusted per stage by the hill climbing
/// when `per_stage_replicas`; a stage's replicas may be of several GPU types when one type runs
/// out); micro-batch size; activation recomputation per stage.
///
/// Algorithm (see search.cpp): for every micro-batch size and data-parallel degree worth trying
/// (ordered by a lower bound, cut by the best plan so far), a dynamic program over layers from the
/// last stage back keeps, per layer boundary, a bounded Pareto set of partial pipelines (GPUs used
/// per type, stages after, bottleneck, sum of stage times, slowest gradient sync); stage times are
/// O(1) from prefix sums memoized per (GPU type, TP, micro-batch). The best few complete pipelines
/// are placed on zones (data parallelism kept inside a zone, then a region, regions ordered by
/// bandwidth), scored by the closed form, and the best few re-ranked by the `scorer`; among those
/// within `robust_tolerance` of the best, the most robust is chosen.
///
/// What the plans may rely on is what the runtime runs: a data-parallel group spanning zones
/// or regions is priced as the runtime's hierarchical all-reduce (comm::make_hierarchical: in
/// each zone, sharded rings across zones, back in each zone; the simulator's default).
/// DiLoCo (issue 40): with the job's `allow_local_sgd` a plan whose replicas span regions is
/// also scored as a DiLoCo plan (replicas ordered by region so that every pipeline stays in
/// one, inner steps from 10/25/50/100 or the job's, the fewest within 1% of the best) and the
/// better of the two on the objective is kept; with `data_parallel.across_regions: diloco`
/// such plans are DiLoCo plans only. Without either, no plan gets `local_sgd`.
/// Memory: a replica is admitted only when it fits by the simulator's check and by Sailor's
/// planner's formula (sim_options::sailor_memory_check, on by default).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/config/sailor_format.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::planner {

/// GPUs available: type -> zone -> count (the shape of Sailor's quotas file).
using availability = std::map<std::string, std::map<std::string, int>>;

/// Everything the planner reads. Availability is taken from `cluster.zones[].gpus`.
struct problem {
  config::model_shape model;
  config::model_profile profile;
  config::cluster cluster;
  /// Sailor's network fits, when planning on Sailor's data: bandwidth by (zone, GPU type, GPUs
  /// used per node). Without them the cluster's links are used.
  std::optional<config::sailor_network> network;
  config::job job;
  /// The simulator's free parameters (the planner scores with the simulator's closed form).
  simulator::sim_options sim;
};

/// The simulator context of a problem (what plan_job builds first).
result<simulator::sim_context> make_context(const problem& prob);

/// Availability of a cluster as a map.
availability availability_of(const config::cluster& c);
/// The cluster with its GPU counts replaced by `a` (zones not in the cluster are added).
config::cluster with_availability(config::cluster c, const availability& a);

/// Why the estimate is what it is: the slowest part of an iteration.
struct bottleneck {
  std::string what;  ///< "compute of stage 2", "gradient sync of stage 0", "p2p 1->2", ...
  double seconds = 0;
};

/// The estimate the planner works with: the simulator's, with breakdowns where it was made by
/// `estimate_plan` (a plan the search scored by the closed form alone has its scalars only).
using estimate = simulator::estimate;

/// The slowest part of an estimate with breakdowns (empty `what` without them): a stage's
/// compute with its p2p transfers, its gradient sync, or the optimizer step.
bottleneck bottleneck_of(const estimate& e);

/// Scores a complete plan; the planner re-ranks its best candidates with it. Without one, the
/// planner re-ranks by the simulator's event-driven 1F1B schedule when `rerank_with_events` is
/// set, else keeps the closed form's order.
using scorer = std::function<result<config::plan_estimate>(const config::plan&)>;

struct options {
  int max_micro_batch = 0;       ///< 0: every micro-batch size the profiles have
  int max_stages = 0;            ///< 0: one per layer at most
  int beam_width = 12;           ///< partial pipelines kept per layer boundary
  int candidates_to_rerank = 6;  ///< complete plans re-scored by `score`
  bool mixed_replicas = true;    ///< let a stage's replicas be of several GPU types
  /// Let stages have different numbers of data-parallel replicas (the simulator splits the
  /// global batch over each stage's own replicas). Explored by the hill climbing only: the
  /// program keeps one degree for all stages.
  bool per_stage_replicas = true;
  /// Zones are considered as subsets, pruned by region and bandwidth before the search: all
  /// zones, the two largest zones, the largest regions (three, and the largest for each GPU
  /// type), and regions added outwards from the largest in order of bandwidth at 2, 3, 4, 6, 9,
  /// ... regions (hundreds of zones plan in about a second). Set to false to consider only all
  /// zones together.
  bool zone_subsets = true;
  /// Re-rank the best `candidates_to_rerank` plans by the simulator's event-driven 1F1B
  /// schedule (iteration time from the events; cost: GPU dollars for that time plus egress),
  /// when `score` is empty. The chosen plan's `estimate` is then the event simulation's; the
  /// breakdown (`plan_result::detail`) stays the closed form's.
  bool rerank_with_events = false;
  /// Work spent on hill climbing from the best few plans the program found (moves: stage
  /// boundaries, a stage's TP, type or zone, a replica's zone, merge, split), in replicas
  /// scored: a plan of R replicas costs R per evaluation. 0 turns it off.
  long long polish_work = 12000;
  /// Plans whose objective is within this fraction of the best are taken as equal (the
  /// simulator's error on measured plans is about 3% mean): among them the most robust wins,
  /// first the one whose traffic stays inside regions, then the one that loses the least to
  /// micro-batch counts that round up (see `robustness`). 0: the best objective, as scored.
  double robust_tolerance = 0.03;
  scorer score;  ///< empty: the closed form
};

/// What makes a plan fragile, for choosing among near-equal plans: bytes per iteration that
/// cross regions (slow, priced links whose bandwidth varies most) and the fraction of
/// micro-batch slots wasted because the global batch does not split evenly (the busiest replica
/// of a stage runs ceil(gbs / replicas / mbs) micro-batches; the slowest stage's waste counts).
struct robustness {
  double cross_region_bytes = 0;
  double rounding_waste = 0;
};
robustness robustness_of(const config::cluster& cluster, const config::model_shape& model, const config::plan& p);

/// What the search found, and how hard it looked.
struct plan_result {
  config::plan plan;       ///< with `estimate` filled (from the scorer)
  estimate detail;         ///< the closed form's breakdown of the chosen plan (its scalars only
                           ///< when the breakdown failed)
  double search_s = 0;     ///< wall time of the search (not of reading inputs)
  long long dp_states = 0;  ///< partial pipelines created
  int configurations = 0;  ///< (micro-batch, data-parallel degree, zone set) searched
};

/// The simulator's closed-form estimate of `p`, with its breakdowns. Fails when the plan does not resolve (unknown GPU type, zone, layers).
result<estimate> estimate_plan(const problem& prob, const config::plan& p);

/// The best plan for the job (objective and constraints from `prob.job`). Errors name the
/// constraint that cannot be met and by how much, or why no plan fits at all.
result<plan_result> plan_job(const problem& prob, const options& opts = {});

/// Re-plans after availability changed (`prob.cluster` holds the new availability). Among plans
/// within `tolerance` of the best objective, picks the one that keeps the most of `current`
/// (same stage layer ranges, replicas on the same GPU type and zone).
result<plan_result> replan(const problem& prob, const config::plan& current,
                           const options& opts = {}, double tolerance = 0.02);

/// Every plan of a small pool, scored with `opts.score` (or the closed form): the reference the
/// planner is tested against. Refuses pools of more than `max_gpus` GPUs.
result<plan_result> exhaustive_search(const problem& prob, const options& opts = {},
                                      int max_gpus = 16);

/// State that stays where it is between two plans: the fraction of the new plan's (stage,
/// layer, GPU type, zone) assignments that `before` already had, weighted by parameters.
double state_kept(const problem& prob, const config::plan& before, const config::plan& after);

/// One line per plan: `mbs 2 | [0,3) 4x A100-40/tp1@zone-a | [3,6) rc 2x ... `.
std::string summary(const config::plan& p);

/// The objective's value for an estimate (smaller is better) and whether the constraints hold.
double objective_value(const config::job& job, const config::plan_estimate& e);
bool meets_constraints(const config::job& job, const config::plan_estimate& e);

}  // namespace sailor::planner
