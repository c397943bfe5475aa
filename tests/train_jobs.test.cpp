// Whole jobs over node processes: what the job and model files say reaches every node. A tiny
// Llama and a tiny OPT without biases train through `sailor train` to the curve one process
// gives; a Llama-style model learns a text file (training and validation losses falling); a job on a text file with its own schedule and validation passes trains to the
// one-process loss and validation curves, also across a re-plan; the coordinator reports the
// validation curve in its progress line, in `sailor status` (text and JSON) and in its
// summary; bad data is refused before anything is planned.

// Built only with LibTorch (the reference runs need the training executor).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "job_reference.hpp"
#include "local_job.hpp"
#include "word_corpus.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_jobs {

using namespace std::chrono;
using namespace sailor::testing;

namespace {

const std::string configs = configs_dir();

// About 12 kB of text over a few words, with some structure to learn.
std::string corpus() { return word_corpus(12000); }

const char* text_model =
  "name: tiny-char\narchitecture: gpt2\nlayers: 2\nhidden: 32\nheads: 4\nffn_hidden: 64\n"
  "sequence: 16\nvocabulary: 32\nbias: false\ntied_embeddings: true\ndtype: fp32\n";

// A schedule and optimizer unlike the defaults (a node that dropped them trains otherwise).
std::string text_job(const std::string& data, int iterations) {
  return "global_batch: 8\nobjective: max_throughput\noptimizer: adamw\nmixed_precision: false\n"
         "allow_recompute: false\nseed: 7\niterations: " + std::to_string(iterations) + "\n"
         "data: {path: " + data + ", format: text, validation_fraction: 0.2}\n"
         "eval_every: 3\neval_batches: 2\nlr: 3.0e-3\nmin_lr: 3.0e-4\nwarmup_iterations: 2\n"
         "decay_iterations: 8\nbetas: [0.8, 0.95]\nweight_decay: 0.1\ngrad_clip: 0.5\n";
}

// A text job's files in `dir`: the corpus, a job of `iterations` iterations over it
// (text_job) and the model (text_model).
struct text_job_files {
  std::string job_file, model_file;
};
text_job_files write_text_job(const temp_dir& dir, int iterations) {
  const auto data = dir.write("corpus.txt", corpus());
  return {dir.write("job.yaml", text_job(data, iterations)), dir.write("model.yaml", text_model)};
}

// The curves one process trains from the model and job files with these batch sizes.
sailor::testing::job_curves one_process(const std::string& model_file, const std::string& job_file, int micro_batch,
                                        int global_batch, int iterations) {
  auto model = sailor::config::load_model(model_file);
  auto job = sailor::config::load_job(job_file);
  REQUIRE(model);
  REQUIRE(job);
  return single_rank_job(*model, *job, micro_batch, global_batch, iterations);
}

void check_same_validation(const nlohmann::json& got,
                           const std::vector<std::pair<std::int64_t, double>>& want) {
  REQUIRE(got.is_array());
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    INFO("validation pass " << k << ": run " << got[k].dump() << ", one process ["
                            << want[k].first << ", " << want[k].second << "]");
    CHECK(got[k][0].get<std::int64_t>() == want[k].first);
    CHECK(std::abs(got[k][1].get<double>() - want[k].second) <= 1e-4 * want[k].second);
  }
}

}  // namespace

TEST_CASE("sailor train: a tiny Llama and a tiny OPT without biases train over node processes to the one-process curve") {
  temp_dir dir;
  // Non-default epsilon and rotary base, and no biases on an OPT: each must reach the nodes.
  const std::vector<std::pair<std::string, std::string>> models = {
    {"llama", "name: tiny-llama\narchitecture: llama\nlayers: 4\nhidden: 64\nheads: 4\n"
              "kv_heads: 2\nffn_hidden: 128\nsequence: 32\nvocabulary: 128\ndtype: fp32\n"
              "norm_eps: 1.0e-6\nrope_theta: 5000\n"},
    {"opt", "name: tiny-opt\narchitecture: opt\nlayers: 4\nhidden: 64\nheads: 4\n"
            "ffn_hidden: 256\nsequence: 32\nvocabulary: 128\ndtype: fp32\nbias: false\n"}};
  auto job = sailor::config::load_job(configs + "/jobs/tiny.yaml");
  REQUIRE(job);
  for (const auto& [family, yaml] : models) {
    CAPTURE(family);
    const auto model_file = dir.write(family + ".yaml", yaml);
    auto [r, j] = run_with_summary(sailor_bin() + " train --model " + model_file + " --job " + configs +
                                     "/jobs/tiny.yaml --nodes 2 --zones 2 --iterations 6 --out " + dir.path(family + "-run"),
                                   dir, 150);
    CHECK(r.out.find("(" + family + ",") != std::string::npos);
    CHECK(j["plan"]["stages"].get<int>() >= 1);
    auto model = sailor::config::load_model(model_file);
    REQUIRE(model);
    auto reference = single_rank_job(*model, *job, j["plan"]["micro_batch"].get<int>(),
                                     j["plan"]["global_batch"].get<int>(), 6);
    check_same_curve(j["loss_curve"].get<std::vector<double>>(), reference.loss);
  }
}

TEST_CASE("sailor train: a text job's data, schedule and validation reach the nodes, and a re-plan keeps both curves") {
  temp_dir dir;
  const int iterations = 10;
  const auto [job_file, model_file] = write_text_job(dir, iterations);
  // Three nodes in two zones; the newest dies after 4 iterations and the others go on.
  auto [r, j] = run_with_summary(sailor_bin() + " train --model " + model_file + " --job " + job_file +
                                   " --nodes 3 --zones 2 --preempt-at 4 --out " + dir.path("run"),
                                 dir, 200);
  CHECK(r.out.find("validation loss") != std::string::npos);
  CHECK(r.out.find("sample of the trained model") != std::string::npos);
  CHECK(j["replans"].get<int>() == 1);
  CHECK(j["iterations_completed"].get<int>() == iterations);
  auto reference = one_process(model_file, job_file, j["plan"]["micro_batch"].get<int>(),
                               j["plan"]["global_batch"].get<int>(), iterations);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(), reference.loss);
  // After iterations 3, 6, 9 and the last; the same numbers whichever plan ran them.
  check_same_validation(j["val_loss_curve"], reference.validation);
  // The sample: the default prompt "The " without the 'T' the corpus lacks, then 200
  // characters of the corpus's (one byte each here).
  REQUIRE(j["sample"].is_string());
  const auto sample = j["sample"].get<std::string>();
  CHECK(sample.rfind("he ", 0) == 0);
  CHECK(sample.size() == 3 + 200);
  const auto text = corpus();
  for (char c : sample) CHECK_MESSAGE(text.find(c) != std::string::npos, c);
}

TEST_CASE("sailor train: a Llama-style model learns a text file over node processes, the training and validation losses falling") {
  temp_dir dir;
  const auto data = dir.write("corpus.txt", corpus());
  const int iterations = 40;
  // Grouped-query attention (2 KV heads for 4), rotary positions, SwiGLU, RMSNorm, no biases.
  const auto model_file = dir.write(
    "llama.yaml", "name: char-llama\narchitecture: llama\nlayers: 2\nhidden: 32\nheads: 4\n"
                  "kv_heads: 2\nffn_hidden: 64\nsequence: 16\nvocabulary: 32\ndtype: fp32\n");
  const auto job_file = dir.write(
    "job.yaml", "global_batch: 8\nobjective: max_throughput\noptimizer: adamw\n"
                "mixed_precision: false\nallow_recompute: false\nseed: 11\niterations: " +
                  std::to_string(iterations) + "\n"
                  "data: {path: " + data + ", format: text, validation_fraction: 0.2}\n"
                  "eval_every: 10\neval_batches: 4\nlr: 1.0e-2\nmin_lr: 1.0e-3\n"
                  "warmup_iterations: 4\ndecay_iterations: 40\nbetas: [0.9, 0.99]\n"
                  "weight_decay: 0.1\ngrad_clip: 1.0\n");
  auto [r, j] = run_with_summary(sailor_bin() + " train --model " + model_file + " --job " + job_file +
                                   " --nodes 2 --zones 2 --sample-tokens 0 --out " + dir.path("run"),
                                 dir, 200);
  CHECK(r.out.find("(llama,") != std::string::npos);
  const auto loss = j["loss_curve"].get<std::vector<double>>();
  REQUIRE(loss.size() == static_cast<std::size_t>(iterations));
  // The first iterations guess among the corpus's symbols; the last have learnt the words.
  double first = 0, last = 0;
  for (int k = 0; k < 5; ++k) {
    first += loss[static_cast<std::size_t>(k)] / 5;
    last += loss[loss.size() - 1 - static_cast<std::size_t>(k)] / 5;
  }
  CHECK(last < 0.75 * first);
  const auto& val = j["val_loss_curve"];
  REQUIRE(val.size() == 4);  // after iterations 10, 20, 30, 40
  for (std::size_t k = 0; k < val.size(); ++k)
    CHECK(val[k][0].get<int>() == 10 * static_cast<int>(k + 1));
  CHECK(val[3][1].get<double>() < val[0][1].get<double>());
  CHECK(val[3][1].get<double>() < 0.75 * first);
  // And it is the model one process trains from the same files.
  auto reference = one_process(model_file, job_file, j["plan"]["micro_batch"].get<int>(),
                               j["plan"]["global_batch"].get<int>(), iterations);
  check_same_curve(loss, reference.loss);
  check_same_validation(val, reference.validation);
}

TEST_CASE("sailor coordinator --train-dir: the validation curve in the progress line, sailor status and the summary") {
  temp_dir dir;
  const int iterations = 6;
  const auto [job_file, model_file] = write_text_job(dir, iterations);
  const auto summary = dir.path("summary.json");
  std::unique_ptr<child> coordinator_process;
  const std::string port = start_listening(
    coordinator_process,
    coordinator_argv("127.0.0.1:0",
                     {"--quorum", "2", "--settle-s", "30", "--transport", "tcp", "--token-file", job_token_file(dir),
                      "--train-dir", dir.path("train"), "--summary-json", summary},
                     model_file, job_file),
    dir.path("coordinator"));
  child& coordinator = *coordinator_process;
  std::vector<std::unique_ptr<child>> nodes;
  for (int k = 0; k < 2; ++k) {
    const std::string name = "node-" + std::to_string(k);
    nodes.push_back(std::make_unique<child>(
      node_argv("127.0.0.1:" + port, name, k == 0 ? "local-a" : "local-b",
                {"--token-file", job_token_file(dir), "--state-dir", dir.path(name)}),
      dir.path(name + ".out"), dir.path(name + ".err")));
  }
  const bool finished = eventually(120s, [&] {
    return coordinator.out().find("training finished") != std::string::npos;
  });
  INFO(coordinator.out());
  INFO(coordinator.err());
  REQUIRE(finished);
  // The progress line of iteration 3 (and of the last) carries the validation loss.
  CHECK(std::regex_search(coordinator.out(), std::regex{"iteration 3/6 .*validation loss [0-9.]+"}));
  CHECK(std::regex_search(coordinator.out(), std::regex{"iteration 6/6 .*validation loss [0-9.]+"}));
  auto st = run_command(sailor_bin() + " status 127.0.0.1:" + port +
                          " --transport tcp --token-file " + job_token_file(dir) + " --json --timeout-ms 30000", 60);
  INFO(st.out);
  INFO(st.err);
  REQUIRE(st.exit_code == 0);
  auto status = nlohmann::json::parse(st.out);
  auto model = sailor::config::load_model(model_file);
  auto job = sailor::config::load_job(job_file);
  REQUIRE(model);
  REQUIRE(job);
  CHECK(status["nodes"].size() == 2);
  auto text = run_command(sailor_bin() + " status 127.0.0.1:" + port +
                            " --transport tcp --token-file " + job_token_file(dir) + " --timeout-ms 30000", 60);
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("validation loss after iteration: 3: ") != std::string::npos);
  coordinator.signal(SIGTERM);
  CHECK(coordinator.wait_exit(30s) == 0);
  auto j = read_json(summary);
  // Whatever plan the coordinator made over the two nodes, one process gives the same curves
  // (the micro-batch size changes only the rounding).
  auto reference = single_rank_job(*model, *job, 1, job->global_batch, iterations);
  check_same_validation(status["training"]["val_loss_curve"], reference.validation);
  check_same_validation(j["val_loss_curve"], reference.validation);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(), reference.loss);
}

TEST_CASE("sailor train and sailor coordinator refuse bad data before planning, naming the file") {
  temp_dir dir;
  const auto model_file = dir.write("model.yaml", text_model);
  // `sailor train` of the job in `job_file`: one node, one zone.
  auto train = [&model_file](const std::string& job_file) {
    return run_command(sailor_bin() + " train --model " + model_file + " --job " + job_file + " --nodes 1 --zones 1", 60);
  };
  SUBCASE("a missing file") {
    const auto job_file = dir.write("job.yaml", text_job(dir.path("nowhere.txt"), 4));
    auto r = train(job_file);
    INFO(r.out);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("nowhere.txt") != std::string::npos);
    CHECK(r.out.find("joined") == std::string::npos);
    auto c = run_command(sailor_bin() + " coordinator --listen 127.0.0.1:0 --cluster " + configs +
                           "/clusters/local-2-zones.yaml --model " + model_file + " --job " +
                           job_file + " --transport tcp --token-file " + job_token_file(dir) + " --train-dir " + dir.path("train"), 60);
    INFO(c.err);
    CHECK(c.exit_code == 2);
    CHECK(c.err.find("nowhere.txt") != std::string::npos);
    CHECK(c.out.find("listening") == std::string::npos);
  }
  SUBCASE("more symbols than the model's vocabulary") {
    std::string text;
    for (int k = 0; k < 2000; ++k) text += static_cast<char>('0' + k % 75);  // 75 symbols
    const auto data = dir.write("wide.txt", text);
    const auto job_file = dir.write("job.yaml", text_job(data, 4));
    auto r = train(job_file);
    INFO(r.out);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("wide.txt") != std::string::npos);
    CHECK(r.err.find("75") != std::string::npos);
    CHECK(r.err.find("32") != std::string::npos);
  }
}

TEST_CASE("sailor train --nodes 1 needs no --zones, plans with the search and splits an iteration by phase") {
  temp_dir dir;
  const int iterations = 8;
  const auto [job_file, model_file] = write_text_job(dir, iterations);
  auto [r, j] = run_with_summary(sailor_bin() + " train --model " + model_file + " --job " + job_file +
                                   " --nodes 1 --sample-tokens 0 --out " + dir.path("run"),
                                 dir, 200);
  CHECK(r.out.find("1 nodes in 1 zones") != std::string::npos);
  CHECK(j["planner"].get<std::string>() == "search");
  CHECK(j["iterations_completed"].get<int>() == iterations);
  // One node alone has every core of the machine for its rank.
  CHECK(j["threads_per_rank"].get<int>() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The search chose among the micro-batch sizes the profile measured (the job's divisors);
  // the loss curve is the one-process curve whatever it chose.
  const int mbs = j["plan"]["micro_batch"].get<int>();
  CHECK(j["plan"]["global_batch"].get<int>() % mbs == 0);
  auto reference = one_process(model_file, job_file, mbs, j["plan"]["global_batch"].get<int>(), iterations);
  check_same_curve(j["loss_curve"].get<std::vector<double>>(), reference.loss);
  // Every phase measured on the rank, none longer than the iteration, the compute the
  // largest part of it.
  const auto& phases = j["phases_s"];
  const double iteration = phases["iteration"].get<double>();
  CHECK(iteration > 0);
  for (const char* name : {"data", "forward_backward", "send_wait", "recv_wait", "all_reduce",
                           "optimizer", "checkpoint", "bookkeeping"}) {
    CAPTURE(name);
    REQUIRE(phases.contains(name));
    CHECK(phases[name].get<double>() >= 0);
    CHECK(phases[name].get<double>() <= iteration);
  }
  CHECK(phases["forward_backward"].get<double>() > 0);
  CHECK(phases["optimizer"].get<double>() > 0);
  CHECK(j["measured_iteration_s_median"].get<double>() == doctest::Approx(iteration));
}

}  // namespace integration_train_jobs
#endif  // __has_include(<sailor/models/shapes.hpp>)
