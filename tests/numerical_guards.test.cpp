// Numerical guards with real processes (a coordinator and one node over TCP, a job token):
// a checkpoint shard poisoned with NaN whose checksums are recomputed (it passes every byte
// check) is refused when a plan restores it, named, and the job resumes from the previous
// checkpoint on the undisturbed loss curve; a job whose learning rate makes its loss overflow
// does not finish "successfully" on nan: it goes back to a checkpoint and, unable to get past
// the iteration, fails with exit 1 naming it.

// Built only with LibTorch (the nodes train; the reference runs the executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_job.hpp"
#include "sailor/train/checkpoint_files.hpp"
#include "sailor/train/executor.hpp"
#include "tiny_reference.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_numerical_guards {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

namespace fs = std::filesystem;

struct guarded_run {
  int code = -1;
  std::string out;  // the coordinator's output
  std::string log;  // the coordinator's and the node's logs
};

// A coordinator and node n1 train `iterations` iterations of the job in `job_file` (empty:
// the tiny one) in dir/train, the node's state in dir/state; every wait bounded.
guarded_run run_job(const temp_dir& dir, int iterations, const std::string& run,
                    const std::string& job_file = "") {
  const auto token = job_token_file(dir);
  std::unique_ptr<child> coordinator;
  const std::string port = start_listening(
    coordinator,
    coordinator_argv("127.0.0.1:0",
                     {"--quorum", "1", "--train-dir", dir.path("train"), "--iterations",
                      std::to_string(iterations), "--exit-when-done", "--settle-s", "30",
                      "--transport", "tcp", "--token-file", token},
                     "", job_file),
    dir.path(run + "-coordinator"));
  child node(node_argv("127.0.0.1:" + port, "n1", "local-a",
                       {"--token-file", token, "--state-dir", dir.path("state")}),
             dir.path(run + "-node.out"), dir.path(run + "-node.err"));
  guarded_run r;
  r.code = coordinator->wait_exit(150s);
  {
    INFO("the node's log: " << node.err());
    CHECK(node.wait_exit(30s) >= 0);  // it leaves once the coordinator is gone
  }
  r.out = coordinator->out();
  r.log = coordinator->err() + node.err();
  return r;
}

// The shard of the checkpoint after `iterations` in the node's state folder.
fs::path shard_after(const temp_dir& dir, int iterations) {
  char name[32];
  std::snprintf(name, sizeof name, "iter-%08d", iterations);
  for (auto& e : fs::recursive_directory_iterator(fs::path(dir.path("state")) / "checkpoints"))
    if (e.path().extension() == ".ckpt" && e.path().parent_path().filename() == name)
      return e.path();
  return {};
}

// Fills the first fp32 parameter tensor of the shard at `path` with NaN and recomputes its
// CRC-32 in the header (train/src/checkpoint_io.hpp: magic, u64 header length, JSON header,
// data), so that the file passes every checksum; returns the parameter's name.
std::string poison_with_nan(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  constexpr std::size_t magic = 12;
  REQUIRE(bytes.size() > magic + 8);
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[magic + i])) << (8 * i);
  auto header = nlohmann::json::parse(bytes.substr(magic + 8, length));
  std::string data = bytes.substr(magic + 8 + length);
  std::string name;
  for (auto& t : header.at("tensors")) {
    if (t.at("state") != "param" || t.at("dtype") != "f32")
      continue;
    const auto offset = t.at("offset").get<std::size_t>();
    const auto count = t.at("bytes").get<std::size_t>() / sizeof(float);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 0; i < count; ++i)
      std::memcpy(data.data() + offset + i * sizeof(float), &nan, sizeof(float));
    t["crc32"] = sailor::train::detail::checkpoint_crc(0, data.data() + offset, count * sizeof(float));
    name = t.at("name").get<std::string>();
    break;
  }
  REQUIRE(!name.empty());
  const auto text = header.dump();
  std::string out = bytes.substr(0, magic);
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
  out += text + data;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  return name;
}

}  // namespace

TEST_CASE("guards: what of an iteration's loss and gradient norm is not finite is named") {
  using sailor::train::non_finite_totals;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_FALSE(non_finite_totals(2.5, 1e30));
  CHECK(non_finite_totals(std::nan(""), 1.0) == "the loss is nan");
  CHECK(non_finite_totals(inf, std::nan("")) == "the loss is inf");
  CHECK(non_finite_totals(1.0, inf) == "the gradient norm is inf");
  CHECK(non_finite_totals(-inf, 1.0) == "the loss is -inf");
}

TEST_CASE("guards: a checkpoint poisoned with NaN under valid checksums is refused, naming its file, and the job resumes from the previous one with finite losses") {
  temp_dir dir;
  auto first = run_job(dir, 4, "first");
  INFO(first.out);
  REQUIRE(first.code == 0);
  const auto shard = shard_after(dir, 4);
  REQUIRE(!shard.empty());
  REQUIRE(!shard_after(dir, 3).empty());
  const auto parameter = poison_with_nan(shard);
  REQUIRE(!sailor::train::detail::verify_shard(shard.string()));  // every checksum matches

  auto second = run_job(dir, 6, "second");
  INFO(second.out);
  INFO(second.log);
  REQUIRE(second.code == 0);
  // Restored, the poisoned checkpoint is refused, the file and the parameter named.
  CHECK(second.log.find(shard.filename().string() + ": param of parameter " + parameter +
                        " holds values that are not finite") != std::string::npos);
  CHECK(second.log.find("could not restore the checkpoint after iteration 4") != std::string::npos);
  CHECK(second.out.find("training iterations 4..6 (resumed from the checkpoint)") != std::string::npos);
  const auto losses = printed_losses(second.out, 6);
  CHECK(losses.size() == 3);
  for (const auto& [iteration, loss] : losses)
    CHECK(std::isfinite(loss));
  CHECK(second.out.find("training finished: 6 iterations") != std::string::npos);
  check_printed_curve(second.out, 6, 4);
}

TEST_CASE("guards: a job whose loss overflows goes back to a checkpoint and, unable to get past the iteration, fails with exit 1 naming it") {
  temp_dir dir;
  // The tiny job with a learning rate so large that the first step takes the weights to
  // about 1e30: the next forward overflows fp32.
  std::ifstream tiny(configs_dir() + "/jobs/tiny.yaml");
  std::string job{std::istreambuf_iterator<char>(tiny), {}};
  const auto job_file = dir.write("overflow.yaml", job + "\nlr: 1.0e30\n");
  auto run = run_job(dir, 6, "overflow", job_file);
  INFO(run.out);
  INFO(run.log);
  CHECK(run.code == 1);
  CHECK(run.out.find("training finished") == std::string::npos);
  // It went back once, then failed on the same iteration, named.
  CHECK(run.log.find("is not finite: going back to the newest checkpoint") != std::string::npos);
  std::smatch failed;
  REQUIRE(std::regex_search(run.out, failed,
                            std::regex{"training failed: iteration ([0-9]+) \\(n1 rank 0: .*the "
                                       "(loss|gradient norm) is (nan|inf|-inf)\\) is not finite "
                                       "again after going back to (the checkpoint after "
                                       "iteration ([0-9]+)|the start): the job cannot get past "
                                       "it"}));
  const int named = std::stoi(failed[1].str());
  CHECK(named <= 6);
  // Every loss printed is finite, and none of the iteration named or after it.
  for (const auto& [iteration, loss] : printed_losses(run.out, 6)) {
    CHECK(std::isfinite(loss));
    CHECK(iteration < named);
  }
}

}  // namespace integration_numerical_guards
#endif
