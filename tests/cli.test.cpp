// The `sailor` command line as a user meets it: help, validation of configs, bad input.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cli {

using namespace sailor::testing;

namespace {
const std::string configs = configs_dir();
}  // namespace

TEST_CASE("sailor --help lists every subcommand of the design") {
  auto r = run_command(sailor_bin() + " --help");
  CHECK(r.exit_code == 0);
  for (const char* sub : {"plan", "simulate", "profile", "coordinator", "demo", "replay", "status", "validate"})
    CHECK_MESSAGE(contains(r.out, sub), sub);
  auto sub = run_command(sailor_bin() + " validate --help");
  CHECK(sub.exit_code == 0);
  CHECK(contains(sub.out, "--plan"));
}

TEST_CASE("sailor without a subcommand, or with an unknown one, fails") {
  CHECK(run_command(sailor_bin()).exit_code != 0);
  auto r = run_command(sailor_bin() + " frobnicate");
  CHECK(r.exit_code != 0);
}

TEST_CASE("sailor validate accepts every shipped config") {
  auto r = run_command(sailor_bin() + " validate " + configs + "/clusters/gcp-5-zones.yaml " + configs +
                       "/jobs/max-throughput.yaml --model " + configs + "/models/opt-350m.yaml --plan " + configs +
                       "/plans/opt-350m-2-stages.yaml");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "5 zones"));
  CHECK(contains(r.out, "2 stages"));
}

TEST_CASE("sailor validate names file, line and field of a bad config, and exits 2 (bad input)") {
  temp_dir dir;
  auto cluster = dir.write("cluster.yaml", "name: c\nzones:\n  - {name: a, gpus: {A100-40: 4}}\nlinks:\n  - {from: a, to: mars, bandwidth_gbytes_per_s: 1}\n");
  auto r = run_command(sailor_bin() + " validate --cluster " + cluster);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, cluster + ":5: links[0].to: zone 'mars' is not declared"));
  CHECK(r.out.empty());

  auto model = dir.write("model.yaml", "name: m\nlayers: 2\nhidden: 64\nheads: 4\nsequence: 8\nvocabulary: 10\n");
  auto plan = dir.write("plan.yaml",
                        "micro_batch: 1\nglobal_batch: 2\nstages:\n"
                        "  - layers: {first: 0, count: 2}\n    replicas: [{gpu: A100-40, zone: a, tp: 1}]\n"
                        "  - layers: {first: 3, count: 1}\n    replicas: [{gpu: A100-40, zone: a, tp: 1}]\n");
  auto p = run_command(sailor_bin() + " validate --model " + model + " --plan " + plan);
  CHECK(p.exit_code == 2);
  CHECK(contains(p.err, plan + ":6: stages[1].layers: gap: layers 2..2 belong to no stage"));
}

TEST_CASE("every subcommand of the design parses its own options: an unknown one is bad input") {
  // A placeholder subcommand (add_not_built) takes any option and exits 3 (unavailable), "not
  // built yet"; a built one refuses the command line with exit 2 (bad input), naming the
  // option: the unknown one, or a required one it checks first.
  std::vector<std::string> subs{"plan", "simulate", "profile", "coordinator", "demo", "train", "replay",
                                "status", "validate"};
#ifdef SAILOR_WITH_TRAIN
  subs.insert(subs.end(), {"export", "generate"});
#else
  // Without LibTorch these two say so plainly and exit 3 (unavailable).
  for (const char* sub : {"export", "generate"}) {
    auto run = run_command(sailor_bin() + " " + sub);
    CHECK_MESSAGE(run.exit_code == 3, sub);
    CHECK_MESSAGE(contains(run.err, "not built yet"), sub);
  }
#endif
  for (const auto& sub : subs) {
    auto r = run_command(sailor_bin() + " " + sub + " --no-such-option 1", 30);
    INFO(sub << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--"));
    CHECK_FALSE(contains(r.err, "not built yet"));
  }
}

TEST_CASE("sailor profile is built: its help names the model, the sizes and the output file") {
  auto r = run_command(sailor_bin() + " profile --help");
  CHECK(r.exit_code == 0);
  for (const char* option : {"--model", "--micro-batches", "--out"})
    CHECK_MESSAGE(contains(r.out, option), option);
  CHECK_FALSE(contains(r.out, "not built yet"));
  // A missing sailor-node (which holds LibTorch) is a clear error, not a hang.
  auto missing = run_command(sailor_bin() + " profile --node-binary /nonexistent/sailor-node");
  CHECK(missing.exit_code == 3);  // unavailable
  CHECK(contains(missing.err, "cannot run /nonexistent/sailor-node"));
}

}  // namespace integration_cli
