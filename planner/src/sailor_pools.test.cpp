// Plans on Sailor's pools that the independent judge exposed (issue 13): the data-parallel
// all-reduce priced as the runtime's ring, and kept inside a region.
#include "sailor/planner/planner.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include <doctest/doctest.h>

#include "sailor/config/sailor_format.hpp"

using namespace sailor;
using namespace sailor::planner;

namespace {

problem sailor_pool(const std::string& model, const availability& gpus, int gbs) {
  auto d = config::load_sailor_data(std::string(SAILOR_DATA_DIR) + "/sailor", model);
  REQUIRE(d.ok());
  problem prob;
  prob.model = d->model;
  prob.profile = d->profile;
  prob.job.optimizer = d->optimizer;
  prob.job.global_batch = gbs;
  config::cluster c;
  c.gpus = d->gpus;
  for (const auto& [type, zones] : gpus)
    for (const auto& [zone, n] : zones) c.add_zone(zone).gpus[type] = n;
  prob.cluster = c;
  prob.network = d->network;
  return prob;
}

}  // namespace

TEST_CASE("GPT-Neo-2.7 on 128 A100-40: no stage all-reduces unsharded weights over 32 replicas") {
  auto prob = sailor_pool("GPT-Neo-2.7", {{"A100-40", {{"us-central1-a", 128}}}}, 2048);
  auto r = plan_job(prob);
  REQUIRE(r.ok());
  CAPTURE(summary(r->plan));
  for (const auto& st : r->plan.stages)
    CHECK_FALSE((st.replicas.size() >= 32 && st.replicas.front().tp == 1));
  // The gradient sync is under a fifth of the iteration (the judge priced it at 3.4 s of 14,
  // 24%, for the TP-1 stages over 32 replicas the planner chose before).
  double sync_s = 0;
  for (const auto& st : r->detail.stages) sync_s = std::max(sync_s, st.allreduce_s);
  CHECK(sync_s < 0.2 * r->plan.estimate->iteration_time_s);
}

TEST_CASE("five zones over two regions: every stage's data parallelism stays in one region") {
  availability a;
  for (const char* z : {"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-west1-b"})
    a["A100-40"][z] = 80;
  auto prob = sailor_pool("OPT-350", a, 1024);
  auto r = plan_job(prob);
  REQUIRE(r.ok());
  CAPTURE(summary(r->plan));
  for (const auto& st : r->plan.stages) {
    const std::string region = config::region_of_zone(st.replicas.front().zone);
    for (const auto& rep : st.replicas) CHECK(config::region_of_zone(rep.zone) == region);
  }
  // One zone fewer finds nothing better: the zone sets searched cover what matters.
  const double full = objective_value(prob.job, *r->plan.estimate);
  for (size_t z = 0; z < prob.cluster.zones.size(); ++z) {
    auto fewer = prob;
    fewer.cluster.zones[z].gpus.clear();
    auto f = plan_job(fewer);
    REQUIRE(f.ok());
    CHECK(objective_value(prob.job, *f->plan.estimate) >= full * (1 - 1e-9));
  }
}

TEST_CASE("80 A100-40: micro-batch counts that round up are priced, and the chosen plan loses less to them") {
  auto prob = sailor_pool("OPT-350", {{"A100-40", {{"us-central1-a", 80}}}}, 1024);
  auto r = plan_job(prob);
  REQUIRE(r.ok());
  CAPTURE(summary(r->plan));
  // The plan the judge exposed: 19 replicas of TP 4 (76 GPUs) at micro-batch 8: 1024 / 19 is
  // 53.9 sequences, 7 micro-batches of 8 for the busiest replica (56 slots, 3.9% lost).
  config::plan judged;
  judged.micro_batch = 8;
  judged.global_batch = 1024;
  config::stage_plan st;
  st.first_layer = 0;
  st.num_layers = int(prob.model.num_all_layers());
  st.replicas.assign(19, config::replica{"A100-40", "us-central1-a", 4, {}, {}});
  judged.stages.push_back(st);
  auto ctx = make_context(prob);
  REQUIRE(ctx.ok());
  auto e = simulator::simulate(*ctx, judged);
  REQUIRE(e.ok());
  CHECK(e->stages[0].micro_batches == 7);
  const auto rj = robustness_of(prob.cluster, prob.model, judged);
  CHECK(rj.rounding_waste == doctest::Approx(7.0 * 19 * 8 / 1024 - 1));
  const auto rc = robustness_of(prob.cluster, prob.model, r->plan);
  CHECK(rc.rounding_waste < rj.rounding_waste);
  CHECK(rc.rounding_waste <= 0.02);
  CHECK(r->plan.estimate->iteration_time_s < e->iteration_time_s);
}
