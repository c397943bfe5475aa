// What a newcomer meets in the first hour (issue 19): every input is checked in one place and
// refused with a message that names the option or the file and field, one exit-code scheme
// (0 done, 1 failed, 2 bad input, 3 unavailable), and nothing estimated or dropped in silence.
// Each test runs `sailor` and checks its exit code and output; none needs a network or LibTorch.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "sailor/config/profile.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_cli_input {

using namespace sailor::testing;

namespace {
const std::string configs = configs_dir();
const std::string sailor_data = std::string(SAILOR_DATA_DIR) + "/sailor";
// A plan of the tiny model (6 layers) on local-2-zones: `stages` as YAML list items.
std::string tiny_plan(const std::string& stages) {
  return "micro_batch: 1\nglobal_batch: 8\nstages:\n" + stages;
}
const std::string tiny_model = configs + "/models/tiny.yaml";
const std::string local_cluster = configs + "/clusters/local-2-zones.yaml";
const std::string tiny_job = configs + "/jobs/tiny.yaml";
// A plan that takes a fraction of a second: OPT-350M on the 5 GCP zones.
const std::string opt_inputs = " --model " + configs + "/models/opt-350m.yaml --cluster " + configs +
                               "/clusters/gcp-5-zones.yaml --job " + configs + "/jobs/max-throughput.yaml";
}  // namespace

TEST_CASE("sailor --help documents the exit codes, and --version answers") {
  auto help = run_command(sailor_bin() + " --help");
  CHECK(help.exit_code == 0);
  for (const char* line : {"Exit codes", "0  done", "1  failed", "2  bad input", "3  unavailable"})
    CHECK_MESSAGE(contains(help.out, line), line);
  auto version = run_command(sailor_bin() + " --version");
  CHECK(version.exit_code == 0);
  CHECK(std::regex_search(version.out, std::regex{R"(sailor [0-9]+\.[0-9]+)"}));
}

TEST_CASE("sailor alone and an unknown subcommand are told apart, and exit 2") {
  auto alone = run_command(sailor_bin());
  CHECK(alone.exit_code == 2);
  CHECK(contains(alone.err, "a subcommand is required: plan, simulate"));
  auto typo = run_command(sailor_bin() + " plna");
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.err, "unknown subcommand 'plna'"));
  CHECK(contains(typo.err, "did you mean 'plan'?"));
  // An unknown option is bad input too (CLI11's own codes are 104-109).
  auto option = run_command(sailor_bin() + " validate --frobnicate");
  CHECK(option.exit_code == 2);
}

TEST_CASE("sailor validate says a file does not exist, and names a misspelt field of an unnamed file") {
  auto missing = run_command(sailor_bin() + " validate /nonexistent.yaml");
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "/nonexistent.yaml: file does not exist"));
  CHECK_FALSE(contains(missing.err, "cannot tell"));

  temp_dir dir;
  auto job = dir.write("job.yaml", "global_bacth: 8\nobjective: max_throughput\n");
  auto r = run_command(sailor_bin() + " validate " + job);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, job + ":1: global_bacth: unknown field (did you mean 'global_batch'?)"));
  auto lone = dir.write("lone.yaml", "global_bacth: 8\n");
  auto l = run_command(sailor_bin() + " validate " + lone);
  CHECK(l.exit_code == 2);
  CHECK(contains(l.err, "did you mean 'global_batch'?"));
}

TEST_CASE("numbers on the command line are checked as in the job file") {
  const std::string plan = sailor_bin() + " plan --cluster " + local_cluster + " --model " + tiny_model + " --job " + tiny_job;
  for (const char* bad : {" --gbs 0", " --gbs -5", " --max-micro-batch 0", " --min-throughput -1"}) {
    auto r = run_command(plan + bad);
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, std::string(bad).substr(1, std::string(bad).find(' ', 1) - 1)));
    CHECK(r.out.empty());
  }
  auto coordinator = run_command(sailor_bin() + " coordinator --cluster " + local_cluster + " --model " + tiny_model +
                                 " --job " + tiny_job + " --iterations -5 --train-dir /nonexistent/never");
  CHECK(coordinator.exit_code == 2);
  CHECK(contains(coordinator.err, "--iterations"));
}

TEST_CASE("a quotas file with a zone or GPU type Sailor's data lacks is refused, naming it") {
  temp_dir dir;
  const std::string plan = sailor_bin() + " plan --sailor-data " + sailor_data + " --model OPT-350 --gbs 32 --quotas ";
  auto zone = dir.write("zone.json", R"({"A100-40": {"us-central1-a": 4, "us-central1-z": 4}})");
  auto r = run_command(plan + zone);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, zone + ": A100-40.us-central1-z: unknown zone 'us-central1-z'"));
  auto gpu = dir.write("gpu.json", R"({"V100-32": {"us-central1-a": 4}})");
  auto g = run_command(plan + gpu);
  CHECK(g.exit_code == 2);
  CHECK(contains(g.err, gpu + ": V100-32: unknown GPU type 'V100-32'"));
}

TEST_CASE("a plan that places GPUs a zone does not have fails validate and simulate") {
  temp_dir dir;
  // local-a has 2 CPUs: three replicas of tp 1 there are one too many.
  auto too_many = dir.write("many.yaml", tiny_plan("  - layers: {first: 0, count: 6}\n"
                                                   "    replicas: [{gpu: CPU, zone: local-a, tp: 1}, {gpu: CPU, zone: local-a, tp: 1},\n"
                                                   "               {gpu: CPU, zone: local-a, tp: 1}, {gpu: CPU, zone: local-b, tp: 1}]\n"));
  auto v = run_command(sailor_bin() + " validate --cluster " + local_cluster + " --model " + tiny_model + " --plan " + too_many);
  CHECK(v.exit_code == 2);
  CHECK(contains(v.err, "stages[0].replicas[2].zone: the plan places 3 CPU GPUs in zone 'local-a' up to here, but the cluster has 2 there"));
  auto s = run_command(sailor_bin() + " simulate --cluster " + local_cluster + " --model " + tiny_model + " --job " + tiny_job +
                       " --plan " + too_many);
  CHECK(s.exit_code == 2);
  CHECK(contains(s.err, "but the cluster has 2 there"));
  CHECK_FALSE(contains(s.out, "cost"));

  // A GPU type the zone has none of.
  auto none = dir.write("none.yaml", tiny_plan("  - layers: {first: 0, count: 6}\n"
                                               "    replicas: [{gpu: A100-40, zone: local-a, tp: 1}]\n"));
  auto n = run_command(sailor_bin() + " validate --cluster " + local_cluster + " --plan " + none);
  CHECK(n.exit_code == 2);
  CHECK(contains(n.err, "zone 'local-a' has no A100-40 GPUs in the cluster"));
}

TEST_CASE("one model registry: a model by its file, its name or Sailor's name, a YAML shape with Sailor's data") {
  const std::string pool = " --cluster " + configs + "/clusters/gcp-5-zones.yaml --job " + configs + "/jobs/max-throughput.yaml";
  for (const char* name : {"OPT-350M", "opt-350", "opt-350m"}) {
    auto r = run_command(sailor_bin() + " plan --model " + name + pool + " --json");
    INFO(name << ": " << r.err);
    CHECK(r.exit_code == 0);
  }
  auto unknown = run_command(sailor_bin() + " plan --model GPT-5" + pool);
  CHECK(unknown.exit_code == 2);
  CHECK(contains(unknown.err, "--model: unknown model 'GPT-5' (known: "));
  CHECK(contains(unknown.err, "tiny-gpt"));
  // The tiny model is not in Sailor's data: its YAML gives the whole shape.
  auto tiny = run_command(sailor_bin() + " plan --sailor-data " + sailor_data + " --model " + tiny_model + " --cluster " +
                          configs + "/clusters/gcp-5-zones.yaml --job " + tiny_job);
  INFO(tiny.err);
  CHECK(tiny.exit_code == 0);
  CHECK(contains(tiny.out, "estimated iteration time"));
}

TEST_CASE("a plan file records what it was made for: simulate needs nothing else") {
  temp_dir dir;
  auto out = dir.path("plan.yaml");
  auto p = run_command(sailor_bin() + " plan" + opt_inputs + " --out " + out);
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(contains(text.str(), "made_for:"));
  auto s = run_command(sailor_bin() + " simulate --plan " + out + " --json");
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  auto j = nlohmann::json::parse(s.out);
  CHECK(j["iteration_time_s"].get<double>() > 0);
  // The file stays a plan that validate reads.
  auto v = run_command(sailor_bin() + " validate" + opt_inputs + " --plan " + out);
  INFO(v.err);
  CHECK(v.exit_code == 0);
}

TEST_CASE("a profile written as `sailor profile` writes it is read by plan and simulate (--profile)") {
  temp_dir dir;
  // Every GPU type of the pool, every micro-batch and TP degree the planner may pick.
  sailor::config::model_profile prof;
  prof.model = "OPT-350M";
  for (const char* type : {"A100-40", "V100-16"}) {
    auto& g = prof.by_gpu[type];
    g.gpu_type = type;
    for (int mb = 1; mb <= 16; mb *= 2)
      for (int tp : {1, 2, 4, 8, 16})
        g.times[mb][tp] = std::vector<sailor::config::layer_time>(26, {0.001 * mb / tp, 0.002 * mb / tp, 0.0001});
  }
  auto file = dir.write("profile.json", sailor::config::to_profile_json(prof));
  const std::string plan = sailor_bin() + " plan" + opt_inputs;
  auto with = run_command(plan + " --profile " + file + " --json");
  auto without = run_command(plan + " --json");
  INFO(with.err);
  REQUIRE(with.exit_code == 0);
  REQUIRE(without.exit_code == 0);
  auto a = nlohmann::json::parse(with.out);
  auto b = nlohmann::json::parse(without.out);
  CHECK(a["notes"].empty());        // measured times: no analytic estimate
  CHECK_FALSE(b["notes"].empty());  // catalog peak FLOP/s x an efficiency
  CHECK(a["iteration_time_s"].get<double>() != doctest::Approx(b["iteration_time_s"].get<double>()));
}

TEST_CASE("plan says when its estimate is analytic, and the efficiency it assumed") {
  auto r = run_command(sailor_bin() + " plan" + opt_inputs);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.out, std::regex{R"(note: GPU type [^:]+: no profile[^\n]*efficiency 0\.1)"}));
}

TEST_CASE("plan's bottleneck shows how its time adds up from the table") {
  auto r = run_command(sailor_bin() + " plan" + opt_inputs);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  const bool stage_bottleneck = std::regex_search(
      r.out, m, std::regex{R"(bottleneck: (compute|p2p transfers) of stage ([0-9]+), ([0-9.]+) ms per micro-batch \(compute_ms ([0-9.]+) \+ p2p transfers ([0-9.]+)\))"});
  if (stage_bottleneck) {
    CHECK(std::stod(m[3]) == doctest::Approx(std::stod(m[4]) + std::stod(m[5])).epsilon(0.01));
    // compute_ms is the table's figure for that stage.
    CHECK(std::regex_search(r.out, std::regex{"\\n  " + std::string(m[2]) + " [^\\n]* " + std::string(m[4]) + " "}));
  } else {
    CHECK(std::regex_search(r.out, std::regex{R"(bottleneck: [^\n]*, [0-9.]+ ms per iteration)"}));
  }
}

// One zone of 16 V100s with `memory_gib` each, one per node (no TP to spread a layer over).
std::string v100_pool(const temp_dir& dir, const std::string& memory_gib) {
  return dir.write("v100-" + memory_gib + ".yaml",
                   "name: v100-" + memory_gib + "\npricing: on_demand\ngpus:\n"
                   "  - {name: V100-16, memory_gib: " + memory_gib + ", gpus_per_node: 1}\n"
                   "zones:\n  - {name: us-east-2b, region: us-east-2, gpus: {V100-16: 16}}\n");
}

TEST_CASE("plan says which memory limit excluded the larger micro-batches, and never chooses one") {
  temp_dir dir;
  const std::string opt = " --model " + configs + "/models/opt-350m.yaml --job " + configs +
                          "/jobs/max-throughput.yaml --cluster ";
  // 8 GiB V100s: OPT-350M's head at micro-batch 8 (a 2048-token sequence, a 50272-word
  // vocabulary) needs more than that, however the layers are split.
  auto r = run_command(sailor_bin() + " plan" + opt + v100_pool(dir, "8"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex{
    R"(\nmicro-batch: sizes up to ([0-9]+) considered; ([0-9]+) and larger do not fit: layer [0-9]+ )"
    R"(alone needs ([0-9.]+) GiB on V100-16 \(TP 1[^)]*\), which has 8\.00 GiB\n)"}));
  const int largest = std::stoi(m[1]), excluded = std::stoi(m[2]);
  CHECK(largest >= 1);
  CHECK(excluded > largest);
  CHECK(std::stod(m[3]) > 8.0);
  std::smatch chosen;
  REQUIRE(std::regex_search(r.out, chosen, std::regex{R"(plan: [0-9]+ stages?, micro-batch ([0-9]+),)"}));
  CHECK(std::stoi(chosen[1]) <= largest);

  // The same in --json.
  auto j = run_command(sailor_bin() + " plan" + opt + v100_pool(dir, "8") + " --json");
  REQUIRE(j.exit_code == 0);
  const auto limit = nlohmann::json::parse(j.out)["micro_batch_limit"];
  INFO(limit.dump());
  CHECK(limit["largest_fitting"] == largest);
  CHECK(limit["excluded"] == excluded);
  CHECK(limit["gpu_type"] == "V100-16");
  CHECK(limit["needed_bytes"].get<double>() > limit["available_bytes"].get<double>());
  CHECK(limit["available_bytes"].get<double>() == doctest::Approx(8.0 * (1 << 30)));

  // Sizes the job rules out itself, or sizes that fit, are not reported as excluded by memory.
  for (const std::string& args : {v100_pool(dir, "8") + " --max-micro-batch " + std::to_string(largest),
                                  v100_pool(dir, "16")}) {
    auto fits = run_command(sailor_bin() + " plan" + opt + args);
    INFO(args << ": " << fits.err);
    REQUIRE(fits.exit_code == 0);
    CHECK_FALSE(contains(fits.out, "micro-batch: sizes up to"));
    auto fits_json = run_command(sailor_bin() + " plan" + opt + args + " --json");
    REQUIRE(fits_json.exit_code == 0);
    CHECK(nlohmann::json::parse(fits_json.out)["micro_batch_limit"].is_null());
  }
}

TEST_CASE("simulate --trace names only tracks that hold events, sends included") {
  temp_dir dir;
  auto plan = dir.write("plan.yaml", tiny_plan("  - layers: {first: 0, count: 3}\n    replicas: [{gpu: CPU, zone: local-a, tp: 1}]\n"
                                               "  - layers: {first: 3, count: 3}\n    replicas: [{gpu: CPU, zone: local-b, tp: 1}]\n"));
  for (const char* set : {"", " --set overlap_p2p=1"}) {
    auto trace = dir.path("trace.json");
    auto r = run_command(sailor_bin() + " simulate --cluster " + local_cluster + " --model " + tiny_model + " --job " +
                         tiny_job + " --plan " + plan + " --trace " + trace + set);
    INFO(set << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(trace);
    auto j = nlohmann::json::parse(in);
    std::set<std::pair<int, int>> named, busy;
    int sends = 0;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name") named.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      if (e["ph"] != "X") continue;
      busy.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      if (e["name"].get<std::string>().rfind("send", 0) == 0) ++sends;
    }
    CHECK(sends > 0);
    for (const auto& track : named) CHECK_MESSAGE(busy.count(track), "empty track " << track.first << "/" << track.second);
  }
}

TEST_CASE("counts read as words: 1 stage, 1 replica, 1 region") {
  temp_dir dir;
  auto plan = dir.write("plan.yaml", tiny_plan("  - layers: {first: 0, count: 6}\n    replicas: [{gpu: CPU, zone: local-a, tp: 1}]\n"));
  auto r = run_command(sailor_bin() + " validate " + local_cluster + " --model " + tiny_model + " --plan " + plan);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* singular : {"1 region,", "plan: 1 stage,", "1 replica:"})
    CHECK_MESSAGE(contains(r.out, singular), singular);
  for (const char* plural : {"1 stages", "1 replicas", "1 regions"})
    CHECK_FALSE_MESSAGE(contains(r.out, plural), plural);
}

}  // namespace integration_cli_input
