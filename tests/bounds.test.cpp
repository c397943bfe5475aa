// Inputs larger than the planner can represent are refused at load, with the file, line and
// field named, before anything is allocated for them; counts never wrap around.
#include <doctest/doctest.h>

#include <string>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_bounds {

using namespace sailor::testing;

namespace {
const std::string configs = configs_dir();
}  // namespace

TEST_CASE("bounds: 10^10 GPUs in a zone are refused, not printed as 1410065408") {
  temp_dir dir;
  auto cluster = dir.write("cluster.yaml", "name: c\nzones:\n  - {name: a, gpus: {A100-40: 10000000000}}\n");
  auto r = run_command(sailor_bin() + " validate --cluster " + cluster, 30);
  CHECK(r.exit_code == 2);  // bad input (exit_codes.hpp)
  CHECK(contains(r.err, cluster + ":3: zones[0].gpus.A100-40:"));
  CHECK(contains(r.err, "10000000000"));
  CHECK_FALSE(contains(r.out, "1410065408"));
  // The most a zone may hold is accepted and counted in 64 bits.
  auto big = dir.write("big.yaml", "name: c\nzones:\n  - {name: a, gpus: {A100-40: 1048576}}\n"
                                   "  - {name: b, gpus: {A100-40: 1048576}}\n");
  auto ok = run_command(sailor_bin() + " validate --cluster " + big, 30);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.out, "2097152 GPUs"));
}

TEST_CASE("bounds: a model of 10^6 layers is refused before planning allocates for it") {
  temp_dir dir;
  auto model = dir.write("model.yaml", "name: huge\nlayers: 1000000\nhidden: 64\nheads: 4\nsequence: 8\n"
                                       "vocabulary: 10\n");
  auto v = run_command(sailor_bin() + " validate --model " + model, 30);
  CHECK(v.exit_code == 2);  // bad input (exit_codes.hpp)
  CHECK(contains(v.err, model + ":2: layers: 1000000 layers, more than the planner handles"));
  auto p = run_command(sailor_bin() + " plan --cluster " + configs + "/clusters/gcp-5-zones.yaml --model " + model +
                         " --job " + configs + "/jobs/max-throughput.yaml", 30);
  CHECK(p.exit_code != 0);
  CHECK(p.exit_code != 124);  // refused at once, not after minutes
  CHECK(contains(p.err, "more than the planner handles"));
  // A count past 32 bits is refused rather than wrapped.
  auto wrapped = dir.write("wrapped.yaml", "name: w\nlayers: 4294967300\nhidden: 64\nheads: 4\nsequence: 8\n"
                                           "vocabulary: 10\n");
  auto w = run_command(sailor_bin() + " validate --model " + wrapped, 30);
  CHECK(w.exit_code == 2);  // bad input (exit_codes.hpp)
  CHECK(contains(w.err, "expected at most 2147483647"));
}

TEST_CASE("bounds: a cluster of 50000 zones is refused at once (610000 once took over a minute)") {
  temp_dir dir;
  std::string text = "name: c\nzones:\n";
  for (int k = 0; k < 50000; ++k) text += "  - {name: z" + std::to_string(k) + "}\n";
  auto cluster = dir.write("cluster.yaml", text);
  auto r = run_command(sailor_bin() + " validate --cluster " + cluster, 60);
  CHECK(r.exit_code == 2);  // bad input (exit_codes.hpp)
  CHECK(contains(r.err, "50000 zones, more than the planner handles"));
}

}  // namespace integration_bounds
