// The shipped configs work together (issue 37, item 4: the shipped max-throughput and min-cost
// jobs admitted no plan for the shipped Llama-3-8B and OPT-30B): every shipped model plans on
// the shipped GCP pool with the two jobs docs/usage.md ("Configs") names for it, and the plan
// chosen meets the job's constraint.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>
#include <sailor/config/load.hpp>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_shipped_configs {

using namespace sailor::testing;

namespace {

struct pairing {
  const char* model;
  const char* max_throughput_job;
  const char* min_cost_job;
};

}  // namespace

TEST_CASE("shipped configs: each shipped model plans on gcp-5-zones with its max-throughput and "
          "min-cost jobs, within their constraints") {
  const std::string configs = configs_dir();
  const pairing pairings[] = {
    {"opt-350m", "max-throughput", "min-cost"},
    {"gpt-neo-2.7b", "max-throughput", "large-min-cost"},
    {"llama-3-8b", "large-max-throughput", "large-min-cost"},
    {"opt-30b", "large-max-throughput", "large-min-cost"},
  };
  for (const auto& p : pairings) {
    for (const char* job : {p.max_throughput_job, p.min_cost_job}) {
      const std::string job_file = configs + "/jobs/" + job + ".yaml";
      const std::string model = p.model;
      CAPTURE(model);
      CAPTURE(job_file);
      auto r = run_command(sailor_bin() + " plan --cluster " + configs +
                             "/clusters/gcp-5-zones.yaml --model " + configs + "/models/" +
                             model + ".yaml --job " + job_file + " --json",
                           120);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      auto plan = nlohmann::json::parse(r.out);
      auto loaded = sailor::config::load_job(job_file);
      REQUIRE(loaded);
      const auto& limits = loaded->limits;
      const double cost = plan["cost_per_iteration_usd"].get<double>();
      const double speed = plan["throughput_iters_per_s"].get<double>();
      CHECK_FALSE(plan["gpus_used"].empty());  // GPUs by type
      REQUIRE((limits.max_cost_per_iteration_usd || limits.min_iterations_per_s));
      if (limits.max_cost_per_iteration_usd)
        CHECK(cost <= *limits.max_cost_per_iteration_usd);
      if (limits.min_iterations_per_s)
        CHECK(speed >= *limits.min_iterations_per_s);
    }
  }
}

}  // namespace integration_shipped_configs
