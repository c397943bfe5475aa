// DiLoCo across regions in job and plan files: the data_parallel block, a plan's local_sgd
// (read, written back, checked), and a job's diloco applied to a plan made without it.
#include "sailor/config/local_sgd.hpp"

#include <doctest/doctest.h>

#include <utility>

#include "error_of.hpp"
#include "sailor/config/load.hpp"
#include "temp_file.hpp"

namespace config_local_sgd_test {

using namespace sailor;
using namespace sailor::config;
using sailor::testing::error_of;

const char* two_region_plan = R"(micro_batch: 1
global_batch: 4
stages:
  - layers: {first: 0, count: 4}
    replicas:
      - {gpu: A100-40, zone: us-central1-a, tp: 1}
      - {gpu: A100-40, zone: europe-west4-a, tp: 1}
)";

TEST_CASE("jobs: the data_parallel block") {
  testing::temp_dir dir;
  const std::string base = "global_batch: 12\n";
  auto plain = load_job(dir.write("plain.yaml", base));
  REQUIRE(plain);
  CHECK(plain->data_parallel.across_regions == across_regions_mode::sync);
  CHECK_FALSE(plain->allow_local_sgd);
  auto d = load_job(dir.write("d.yaml", base + "allow_local_sgd: true\ndata_parallel: {across_regions: diloco, "
                                               "inner_steps: 20, outer_lr: 0.5, outer_momentum: 0.8, "
                                               "outer_optimizer: sgd, compression: int8, fragments: 4, "
                                               "overlap_steps: 2}\n"));
  REQUIRE(d);
  CHECK(d->allow_local_sgd);
  CHECK(d->data_parallel.across_regions == across_regions_mode::diloco);
  CHECK(d->data_parallel.inner_steps == 20);
  CHECK(d->data_parallel.outer_lr == 0.5);
  CHECK(d->data_parallel.outer_momentum == 0.8);
  CHECK(d->data_parallel.outer_optimizer == outer_optimizer_kind::sgd);
  CHECK(d->data_parallel.compression == delta_compression::int8);
  CHECK(d->data_parallel.fragments == 4);
  CHECK(d->data_parallel.overlap_steps == 2);
  const std::pair<const char*, const char*> bad_settings[] = {
    {"data_parallel: {across_regions: diloco, inner_steps: 0}\n", "data_parallel.inner_steps"},
    {"data_parallel: {across_regions: diloco, compression: fp8}\n", "data_parallel.compression"},
    {"data_parallel: {across_regions: gossip}\n", "data_parallel.across_regions"},
    {"data_parallel: {inner_steps: 10}\n", "data_parallel"},
    {"data_parallel: {across_regions: diloco, outer_lr: 0}\n", "data_parallel.outer_lr"},
    {"data_parallel: {across_regions: diloco, outer_momentum: 1}\n", "data_parallel.outer_momentum"},
    {"data_parallel: {across_regions: diloco, inner_steps: 4, fragments: 5}\n", "data_parallel.fragments"},
    {"data_parallel: {across_regions: diloco, inner_steps: 4, overlap_steps: 4}\n", "data_parallel.overlap_steps"},
    {"data_parallel: {across_regions: diloco, shards: 2}\n", "data_parallel.shards"},
  };
  for (const auto& [setting, field] : bad_settings) {
    INFO(setting);
    CHECK(error_of(load_job(dir.write("bad.yaml", base + setting))).field == field);
  }
}

TEST_CASE("plans: local_sgd is read, written back and checked") {
  testing::temp_dir dir;
  const std::string joined = std::string(two_region_plan) +
                             "local_sgd:\n  inner_steps: 10\n  regions:\n"
                             "    - {name: us-central1, zones: [us-central1-a]}\n"
                             "    - {name: europe-west4, zones: [europe-west4-a]}\n";
  auto p = load_plan(dir.write("p.yaml", joined));
  REQUIRE(p);
  REQUIRE(p->local_sgd);
  CHECK(p->local_sgd->inner_steps == 10);
  CHECK(p->local_sgd->regions.size() == 2);
  CHECK(p->local_sgd->region_of("europe-west4-a") == 1);
  CHECK(p->local_sgd->region_of("asia-east1-a") == -1);
  auto again = load_plan(dir.write("again.yaml", to_yaml(*p)));
  REQUIRE(again);
  REQUIRE(again->local_sgd);
  CHECK(again->local_sgd->regions[1].zones == std::vector<std::string>{"europe-west4-a"});
  CHECK(describe_local_sgd(*again) == "DiLoCo across 2 regions (us-central1, europe-west4), every 10 iterations");

  const std::pair<std::string, const char*> bad[] = {
    {"local_sgd: {inner_steps: 0, regions: []}\n", "local_sgd.inner_steps"},
    {"local_sgd: {inner_steps: 5, regions: [{name: all, zones: [us-central1-a, europe-west4-a]}]}\n",
     "local_sgd.regions"},
    {"local_sgd: {inner_steps: 5, regions: [{name: a, zones: [us-central1-a]}, {name: b, zones: [us-central1-a]}]}\n",
     "local_sgd.regions[1].zones"},
    {"local_sgd: {inner_steps: 5, regions: [{name: a, zones: [us-central1-a]}, {name: b, zones: [asia-east1-a]}]}\n",
     "stages[0].replicas[1].zone"},
  };
  for (const auto& [block, field] : bad) {
    INFO(block);
    CHECK(error_of(load_plan(dir.write("bad.yaml", std::string(two_region_plan) + block))).field == field);
  }
  // Two stages whose replicas pair across regions: micro-batch 0 runs stage 0 in one region
  // and stage 1 in the other.
  const std::string crossing = R"(micro_batch: 1
global_batch: 2
stages:
  - layers: {first: 0, count: 2}
    replicas:
      - {gpu: A100-40, zone: us-central1-a, tp: 1}
      - {gpu: A100-40, zone: europe-west4-a, tp: 1}
  - layers: {first: 2, count: 2}
    replicas:
      - {gpu: A100-40, zone: europe-west4-a, tp: 1}
      - {gpu: A100-40, zone: us-central1-a, tp: 1}
local_sgd: {inner_steps: 5, regions: [{name: us, zones: [us-central1-a]}, {name: eu, zones: [europe-west4-a]}]}
)";
  auto crossed = error_of(load_plan(dir.write("crossing.yaml", crossing)));
  CHECK(crossed.field == "local_sgd.regions");
  CHECK(crossed.message.find("micro-batch 0") != std::string::npos);
}

TEST_CASE("a job's diloco joins the plan's regions, and is refused inside one region") {
  testing::temp_dir dir;
  auto p = load_plan(dir.write("p.yaml", two_region_plan));
  REQUIRE(p);
  cluster c;
  c.add_zone("us-central1-a");
  c.add_zone("europe-west4-a");
  job sync_job;
  auto kept = *p;
  CHECK_FALSE(apply_data_parallel(kept, sync_job, c));
  CHECK_FALSE(kept.local_sgd);
  job diloco = sync_job;
  diloco.data_parallel.across_regions = across_regions_mode::diloco;
  auto joined = *p;
  REQUIRE_FALSE(apply_data_parallel(joined, diloco, c, 25));
  REQUIRE(joined.local_sgd);
  CHECK(joined.local_sgd->inner_steps == 25);
  CHECK(joined.local_sgd->regions.size() == 2);
  CHECK(joined.local_sgd->regions[0].name == "us-central1");
  diloco.data_parallel.inner_steps = 7;
  auto fixed = *p;
  REQUIRE_FALSE(apply_data_parallel(fixed, diloco, c, 25));
  CHECK(fixed.local_sgd->inner_steps == 7);
  auto one_region = *p;
  one_region.stages[0].replicas[1].zone = "us-central1-b";
  c.add_zone("us-central1-b");
  auto refused = apply_data_parallel(one_region, diloco, c);
  REQUIRE(refused);
  CHECK(refused->field == "data_parallel.across_regions");
  CHECK_FALSE(one_region.local_sgd);
}

}  // namespace config_local_sgd_test
