// DiLoCo in the search: on the five GCP zones (us-central1 and us-west1), plans that span the
// two regions compete as DiLoCo plans when the job allows it, and never otherwise.
#include "sailor/planner/planner.hpp"

#include <string>

#include <doctest/doctest.h>

#include "sailor/config/load.hpp"
#include "sailor/config/local_sgd.hpp"
#include "sailor/config/sailor_format.hpp"

namespace sailor::planner::local_sgd_test {

const std::string configs = std::string(SAILOR_SOURCE_DIR) + "/configs";

problem gcp_problem(const char* model_file, const char* sailor_name, const char* job_file) {
  auto model = config::load_model(configs + "/models/" + model_file);
  auto cluster = config::load_cluster(configs + "/clusters/gcp-5-zones.yaml");
  auto job = config::load_job(configs + "/jobs/" + job_file);
  auto data = config::load_sailor_data(std::string(SAILOR_DATA_DIR) + "/sailor", sailor_name);
  REQUIRE(model.ok());
  REQUIRE(cluster.ok());
  REQUIRE(job.ok());
  REQUIRE(data.ok());
  problem prob;
  prob.model = *model;
  prob.cluster = *cluster;
  prob.job = *job;
  prob.profile = data->profile;
  return prob;
}

bool spans_regions(const problem& prob, const config::plan& p) {
  return config::regions_of(p, prob.cluster).size() > 1;
}

plan_result plan_or_fail(const problem& prob) {
  auto r = plan_job(prob);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().to_string()));
  return *r;
}

TEST_CASE("diloco on gcp-5-zones, OPT-350M: the planner joins us-west1 by DiLoCo where it wins") {
  auto prob = gcp_problem("opt-350m.yaml", "OPT-350", "max-throughput.yaml");
  const plan_result sync = plan_or_fail(prob);
  prob.job.allow_local_sgd = true;
  const plan_result diloco = plan_or_fail(prob);
  MESSAGE("synchronous: " << summary(sync.plan) << ", egress $" << sync.detail.egress_usd_per_iteration
                          << "/it, search " << sync.search_s << " s");
  MESSAGE(config::describe_local_sgd(diloco.plan) << ": " << summary(diloco.plan) << ", egress $"
                                                  << diloco.detail.egress_usd_per_iteration << "/it, search "
                                                  << diloco.search_s << " s");
  CHECK_FALSE(sync.plan.local_sgd);
  REQUIRE(diloco.plan.local_sgd);
  CHECK(diloco.plan.local_sgd->regions.size() == 2);
  const int h = diloco.plan.local_sgd->inner_steps;
  CHECK((h == 10 || h == 25 || h == 50 || h == 100));
  // It wins on the objective, and each of its pipelines stays inside one region.
  CHECK(diloco.plan.estimate->iteration_time_s < sync.plan.estimate->iteration_time_s);
  CHECK_FALSE(config::validate_plan(diloco.plan, prob.model, &prob.cluster, ""));
  // The same plan run synchronously is slower: the all-reduce across regions every iteration.
  config::plan same = diloco.plan;
  same.local_sgd.reset();
  auto same_sync = estimate_plan(prob, same);
  REQUIRE(same_sync.ok());
  CHECK(diloco.plan.estimate->iteration_time_s < same_sync->iteration_time_s);
  CHECK(diloco.detail.outer_egress_usd_per_iteration > 0);
  // Re-ranked by the event simulation (as `sailor plan` does), DiLoCo still wins.
  options by_events;
  by_events.rerank_with_events = true;
  auto ranked = plan_job(prob, by_events);
  REQUIRE(ranked.ok());
  CHECK(ranked->plan.local_sgd);
  CHECK(ranked->plan.estimate->iteration_time_s < sync.plan.estimate->iteration_time_s);
}

TEST_CASE("diloco on gcp-5-zones: a job without allow_local_sgd never gets local_sgd") {
  for (const char* job : {"max-throughput.yaml", "min-cost.yaml"}) {
    CAPTURE(job);
    auto prob = gcp_problem("opt-350m.yaml", "OPT-350", job);
    const plan_result r = plan_or_fail(prob);
    CHECK_FALSE(r.plan.local_sgd);
    CHECK(r.detail.outer_exchange_s == 0);
  }
}

TEST_CASE("diloco on gcp-5-zones: the job's inner_steps are kept, and across_regions: diloco joins what spans regions") {
  auto prob = gcp_problem("opt-350m.yaml", "OPT-350", "max-throughput.yaml");
  prob.job.allow_local_sgd = true;
  prob.job.data_parallel.inner_steps = 40;
  const plan_result given = plan_or_fail(prob);
  REQUIRE(given.plan.local_sgd);
  CHECK(given.plan.local_sgd->inner_steps == 40);
  prob.job.allow_local_sgd = false;
  prob.job.data_parallel.across_regions = config::across_regions_mode::diloco;
  const plan_result forced = plan_or_fail(prob);
  CHECK(bool(forced.plan.local_sgd) == spans_regions(prob, forced.plan));
  CHECK_FALSE(config::validate_plan(forced.plan, prob.model, &prob.cluster, ""));
}

TEST_CASE("diloco on gcp-5-zones, GPT-Neo-2.7B: the figures, and never worse than synchronous") {
  auto prob = gcp_problem("gpt-neo-2.7b.yaml", "GPT-Neo-2.7", "max-throughput.yaml");
  const plan_result sync = plan_or_fail(prob);
  prob.job.allow_local_sgd = true;
  const plan_result diloco = plan_or_fail(prob);
  MESSAGE("synchronous: " << summary(sync.plan) << ", egress $" << sync.detail.egress_usd_per_iteration << "/it");
  MESSAGE(config::describe_local_sgd(diloco.plan) << ": " << summary(diloco.plan) << ", egress $"
                                                  << diloco.detail.egress_usd_per_iteration << "/it");
  CHECK_FALSE(sync.plan.local_sgd);
  // Within the planner's tolerance for near-equal plans (it prefers plans that stay in a region).
  CHECK(diloco.plan.estimate->iteration_time_s <= sync.plan.estimate->iteration_time_s * 1.03);
}

}  // namespace sailor::planner::local_sgd_test
