// DiLoCo through processes: `sailor train` over two emulated regions (a slow link between
// them) with a job whose data_parallel says diloco. The plan joins the regions, training
// goes on through the SIGKILL of a node, and the survivors resume with the outer state (the
// anchor and momentum of the exchanges so far), not a fresh outer step.

// Built only with LibTorch (sailor-node's training).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_diloco {

using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

const std::string configs = sailor::testing::configs_dir();

// Every node log under `dir`, one after the other.
std::string node_logs(const fs::path& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); ++it)
    if (it->is_regular_file() && it->path().filename().string().rfind("node-", 0) == 0 &&
        it->path().extension() == ".log") {
      std::ifstream in(it->path());
      std::stringstream text;
      text << in.rdbuf();
      all += text.str();
    }
  return all;
}

}  // namespace

TEST_CASE("diloco: sailor train joins two regions by DiLoCo and resumes with the outer state after a node is killed") {
  temp_dir dir;
  std::ifstream tiny(configs + "/jobs/tiny.yaml");
  std::stringstream job;
  job << tiny.rdbuf()
      << "data_parallel: {across_regions: diloco, inner_steps: 3, overlap_steps: 0}\n";
  const auto job_file = dir.write("tiny-diloco.yaml", job.str());
  // 3 nodes over zones local-a (node-0, node-2) and local-b (node-1), one zone a region: one
  // stage of three replicas, two in region local-1. The kill takes node-2; the next plan
  // joins node-0 and node-1, each its region's only replica.
  auto run = run_with_summary(sailor_bin() + " train --nodes 3 --zones 2 --regions 2 --region-link 20,50 "
                                "--planner even --model " + configs + "/models/tiny.yaml --job " + job_file +
                                " --iterations 12 --preempt-at 5 --checkpoint-every 2 --out " + dir.path("run"),
                              dir, 240);
  INFO(run.result.out);
  CHECK(run.result.out.find("across regions: DiLoCo across 2 regions (local-1, local-2), every 3 iterations") !=
        std::string::npos);
  const auto& j = run.summary;
  CHECK(j["iterations_completed"].get<int>() == 12);
  CHECK(j["replans"].get<int>() == 1);
  for (double loss : j["loss_curve"].get<std::vector<double>>()) CHECK(std::isfinite(loss));
  const auto logs = node_logs(dir.path("run"));
  INFO(logs.substr(0, 4000));
  CHECK(logs.find("DiLoCo continues from the restored outer state") != std::string::npos);
  CHECK(logs.find("DiLoCo starts a fresh outer step") == std::string::npos);
}

TEST_CASE("diloco: a job that asks for DiLoCo on a plan inside one region is refused naming the field") {
  temp_dir dir;
  std::ifstream tiny(configs + "/jobs/tiny.yaml");
  std::stringstream job;
  job << tiny.rdbuf() << "data_parallel: {across_regions: diloco}\n";
  const auto job_file = dir.write("tiny-diloco.yaml", job.str());
  auto got = run_command(sailor_bin() + " train --nodes 2 --zones 2 --planner even --model " + configs +
                             "/models/tiny.yaml --job " + job_file + " --iterations 4",
                         120);
  CHECK(got.exit_code != 0);
  CHECK(got.err.find("data_parallel.across_regions") != std::string::npos);
}

}  // namespace integration_train_diloco
#endif  // __has_include(<sailor/models/shapes.hpp>)
