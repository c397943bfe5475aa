#pragma once
/// DiLoCo across regions as a plan property (plan.hpp's local_sgd_plan): the regions a plan
/// joins, and a job's across_regions: diloco applied to a plan made without it.

#include <string>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/plan.hpp"

namespace sailor::config {

/// DiLoCo's inner steps when neither the job nor the planner chose them.
inline constexpr int default_inner_steps = 50;

/// The regions of the plan's replicas, each with the zones of it the plan uses, in the order
/// the plan first names them. A zone the cluster lacks is its own name's region
/// (region_of_zone).
std::vector<local_sgd_plan::region> regions_of(const plan& p, const cluster& c);

/// Makes `p` follow the job's data_parallel choice: `diloco` joins the plan's regions with
/// the job's inner_steps (else `inner_steps`, else default_inner_steps) when the plan has no
/// local_sgd of its own; `sync` leaves the plan as it is. Refused, naming
/// data_parallel.across_regions, when a pipeline of the plan crosses regions, or when the
/// job's first plan (`first_plan`) lies inside one region; a re-plan inside one region (a
/// region lost) stays synchronous, with a note in the log.
status apply_data_parallel(plan& p, const job& j, const cluster& c, int inner_steps = 0, bool first_plan = true);

/// One line for people: "DiLoCo across 2 regions (us-central1, europe-west4), every 50
/// iterations" or "synchronous".
std::string describe_local_sgd(const plan& p);

}  // namespace sailor::config
