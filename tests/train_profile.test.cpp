// `sailor profile` measures the tiny model on this machine and writes a profile that the
// simulator reads and predicts from.

// Built only with LibTorch (sailor-node then holds the profiler).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <string>

#include <sailor/config/load.hpp>
#include <sailor/config/profile.hpp>
#include <sailor/train/profiler.hpp>

#include <fstream>
#include <sailor/simulator/simulator.hpp>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_profile {

using namespace sailor::testing;

namespace {
const std::string configs = configs_dir();
}  // namespace

TEST_CASE("sailor profile writes positive times for every layer, and the simulator reads them") {
  temp_dir dir;
  const auto out = dir.path("tiny.profile.json");
  auto r = run_command(sailor_bin() + " profile --model " + configs +
                           "/models/tiny.yaml --micro-batches 1,2 --tp 1,2 --repeats 3 --warmup 1 --out " +
                           out,
                       120);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto model = sailor::config::load_model(configs + "/models/tiny.yaml");
  REQUIRE(model);
  auto profile = sailor::config::load_profile_json(out);
  REQUIRE_MESSAGE(profile, (profile ? "" : profile.error().to_string()));
  CHECK(profile->model == model->name);
  const auto* cpu = profile->find("CPU");
  REQUIRE(cpu != nullptr);
  for (int mbs : {1, 2})
    for (int tp : {1, 2}) {
      const auto* layers = cpu->find(mbs, tp);
      REQUIRE_MESSAGE(layers != nullptr, "mbs " << mbs << " tp " << tp);
      REQUIRE(static_cast<int>(layers->size()) == model->num_all_layers());
      for (const auto& t : *layers) {
        CHECK(t.forward_s > 0);
        CHECK(t.backward_s > 0);
        CHECK(t.update_s > 0);
      }
    }

  // The simulator takes its compute times from the profile, not from the catalog.
  auto cluster = sailor::config::load_cluster(configs + "/clusters/local-2-zones.yaml");
  REQUIRE(cluster);
  sailor::simulator::sim_inputs in;
  in.model = *model;
  in.cluster = &*cluster;
  in.gpus = cluster->gpus;
  in.profile = &*profile;
  sailor::simulator::sim_options options;
  options.profile_layer_overhead_s = 0;
  auto ctx = sailor::simulator::sim_context::make(in, options);
  REQUIRE_MESSAGE(ctx, (ctx ? "" : ctx.error().to_string()));
  const int gpu = ctx->gpu_id("CPU");
  REQUIRE(gpu >= 0);
  auto c = ctx->compute(gpu, 1, 2, 0, model->num_all_layers());
  REQUIRE(c.ok);
  CHECK_FALSE(c.analytic);
  double forward = 0;
  for (const auto& t : *cpu->find(2, 1)) forward += t.forward_s;
  CHECK(c.forward_s == doctest::Approx(forward).epsilon(1e-9));
}

TEST_CASE("sailor profile --cpu-clock --host-figures: CPU work per pass and what the host gives ranks") {
  temp_dir dir;
  const auto out = dir.path("cpu.profile.json"), host = dir.path("host.json"),
             ready = dir.path("ready"), go = dir.path("go");
  std::ofstream(go) << "go\n";  // the go-ahead is already there: no waiting
  // sailor-node's own options (the ones the demo uses).
  auto r = run_command(sailor_bin("sailor-node") + " profile --model " + configs +
                           "/models/tiny.yaml --micro-batches 1 --tp 1 --repeats 5 --warmup 1 --cpu-clock "
                           "--cold-cache-bytes 1048576 --host-figures " + host + " --ready-file " + ready +
                           " --go-file " + go + " --out " + out,
                       120);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::ifstream(ready).good());
  auto profile = sailor::config::load_profile_json(out);
  REQUIRE_MESSAGE(profile, (profile ? "" : profile.error().to_string()));
  const auto* layers = profile->find("CPU")->find(1, 1);
  REQUIRE(layers != nullptr);
  for (const auto& t : *layers) {
    CHECK(t.forward_s > 0);
    CHECK(t.backward_s > 0);
  }
  auto figures = sailor::train::load_host_figures(host);
  REQUIRE_MESSAGE(figures, (figures ? "" : figures.error().to_string()));
  // A process gets at most one core for its one busy thread; messages and all-reduces cost CPU.
  CHECK(figures->core_share > 0);
  CHECK(figures->core_share <= 1.0);
  CHECK(figures->cpu_per_message_s > 0);
  CHECK(figures->cpu_per_collective_s > 0);
  // A block's gradients (50k parameters) gathered, reduced and copied back cost more CPU than
  // sending one micro-batch's activation (2k floats).
  CHECK(figures->cpu_per_collective_s > figures->cpu_per_message_s);
  CHECK_FALSE(sailor::train::load_host_figures(dir.path("missing.json")));
}

TEST_CASE("sailor profile refuses a TP degree that does not divide the model") {
  temp_dir dir;
  auto r = run_command(sailor_bin() + " profile --model " + configs + "/models/tiny.yaml --tp 3 --out " +
                           dir.path("p.json"),
                       60);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("TP degree 3") != std::string::npos);
}

}  // namespace integration_train_profile
#endif  // __has_include(<sailor/models/shapes.hpp>)
