// The trained model is kept (issue 37, item 3): `sailor train --out DIR` leaves DIR with the
// final checkpoint and the exported model with its vocabulary, `sailor generate DIR` and
// `sailor export DIR` take that folder, the default folder is made under ./sailor-runs/ and
// never reused, and a run interrupted by SIGINT says where its state is, after which `sailor
// train --resume DIR` goes on from its checkpoint: the losses of the iterations left are the
// ones an uninterrupted run gives, not a fresh start's.

// Built only with LibTorch (the nodes train; the reference runs one rank here).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "job_reference.hpp"
#include "local_job.hpp"
#include "word_corpus.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_train_out {

using namespace std::chrono;
using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

const char* out_model =
  "name: tiny-char\narchitecture: gpt2\nlayers: 2\nhidden: 32\nheads: 4\nffn_hidden: 64\n"
  "sequence: 16\nvocabulary: 32\nbias: false\ntied_embeddings: true\ndtype: fp32\n";

struct out_job_files {
  std::string corpus, job_file, model_file;
};

// A text job over word_corpus() of `iterations` iterations, and its model, in `dir`.
out_job_files write_out_job(const temp_dir& dir, int iterations) {
  out_job_files f;
  f.corpus = word_corpus(12000);
  const auto data = dir.write("corpus.txt", f.corpus);
  f.job_file = dir.write("job.yaml", "global_batch: 8\nobjective: max_throughput\noptimizer: adamw\n"
                                     "mixed_precision: false\nallow_recompute: false\nseed: 5\niterations: " +
                                       std::to_string(iterations) + "\ndata: {path: " + data +
                                       ", format: text}\nlr: 3.0e-3\nwarmup_iterations: 2\n");
  f.model_file = dir.write("model.yaml", out_model);
  return f;
}

// `sailor train` of `files` on one node with the even planner; `extra` options follow.
std::string train_command(const out_job_files& files, const std::string& extra) {
  return sailor_bin() + " train --model " + files.model_file + " --job " + files.job_file +
         " --nodes 1 --planner even --no-dashboard " + extra;
}

// The loss `sailor train` printed for each iteration ("iteration   K/N  loss X").
std::map<int, double> losses_printed(const std::string& out, int iterations) {
  std::map<int, double> loss;
  const std::regex line{"iteration +([0-9]+)/" + std::to_string(iterations) + "  loss ([-0-9.naif]+)"};
  for (std::sregex_iterator i{out.begin(), out.end(), line}, end; i != end; ++i)
    loss[std::stoi((*i)[1])] = std::stod((*i)[2]);
  return loss;
}

}  // namespace

TEST_CASE("sailor train --out DIR keeps the checkpoint and the exported model with its vocabulary, and generate and export take DIR") {
  temp_dir dir;
  const auto files = write_out_job(dir, 6);
  const auto run = dir.path("run");
  auto r = run_command(train_command(files, "--sample-tokens 0 --out " + run), 200);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "the run's folder: " + run));
  CHECK(contains(r.out, "the run is kept in " + run));
  CHECK(contains(r.out, "the checkpoint after iteration 6"));
  for (const char* file : {"model/model.safetensors", "model/config.json", "model/vocab.json", "run.json",
                           "model.yaml", "job.yaml"})
    CHECK_MESSAGE(fs::is_regular_file(run + "/" + file), file);
  auto model = sailor::config::load_model(files.model_file);
  REQUIRE(model);
  CHECK(fs::file_size(run + "/model/model.safetensors") > 4 * static_cast<std::uintmax_t>(model->total_params()));
  bool final_checkpoint = false;
  for (const auto& e : fs::recursive_directory_iterator(run + "/state/checkpoints"))
    final_checkpoint = final_checkpoint || e.path().filename() == "iter-00000006";
  CHECK(final_checkpoint);

  // generate on the folder: the prompt, then 30 characters of the corpus's.
  auto gen = run_command(sailor_bin() + " generate " + run + " --prompt 'the ' --tokens 30 --seed 3", 60);
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  REQUIRE(gen.out.size() == std::string("the ").size() + 30 + 1);
  CHECK(gen.out.rfind("the ", 0) == 0);
  for (char c : gen.out.substr(4, 30)) CHECK_MESSAGE(files.corpus.find(c) != std::string::npos, c);

  // The exported model's folder: the same sample from its safetensors.
  auto from_model = run_command(sailor_bin() + " generate " + run + "/model --prompt 'the ' --tokens 30 --seed 3", 60);
  CHECK_MESSAGE(from_model.exit_code == 0, from_model.err);
  CHECK(from_model.out == gen.out);

  // export on the folder, elsewhere: the vocabulary goes with the model.
  auto ex = run_command(sailor_bin() + " export " + run + " --out " + dir.path("elsewhere/m.safetensors"), 60);
  INFO(ex.err);
  REQUIRE(ex.exit_code == 0);
  CHECK(contains(ex.out, "vocab.json"));
  for (const char* file : {"m.safetensors", "config.json", "sailor-model.yaml", "vocab.json"})
    CHECK_MESSAGE(fs::is_regular_file(dir.path("elsewhere") + "/" + file), file);
  // That folder stands on its own: the same sample from its safetensors, no checkpoint.
  auto alone = run_command(sailor_bin() + " generate " + dir.path("elsewhere") + " --prompt 'the ' --tokens 30 --seed 3", 60);
  CHECK_MESSAGE(alone.exit_code == 0, alone.err);
  CHECK(alone.out == gen.out);

  // A folder that is neither, and a second run into the same folder, are refused by name.
  fs::create_directories(dir.path("empty"));
  auto not_run = run_command(sailor_bin() + " generate " + dir.path("empty"), 60);
  CHECK(not_run.exit_code == 2);
  CHECK(contains(not_run.err, dir.path("empty") + "/run.json"));
  auto again = run_command(train_command(files, "--out " + run), 60);
  CHECK(again.exit_code == 2);
  CHECK(contains(again.err, "--resume " + run));
  CHECK(fs::is_regular_file(run + "/model/model.safetensors"));  // nothing of the first run lost
}

TEST_CASE("sailor train without --out keeps the run in a new folder under ./sailor-runs and prints it") {
  temp_dir dir;
  const auto files = write_out_job(dir, 2);
  fs::create_directories(dir.path("here"));
  std::vector<std::string> folders;
  for (int k = 0; k < 2; ++k) {  // twice: the second never reuses the first's folder
    auto r = run_command("sh -c 'cd " + dir.path("here") + " && " + train_command(files, "--sample-tokens 0") + "'", 200);
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch kept;
    REQUIRE(std::regex_search(r.out, kept, std::regex{"the run is kept in (sailor-runs/job-[0-9]{8}-[0-9]{6}(-[0-9]+)?)"}));
    folders.push_back(kept[1].str());
    CHECK(fs::is_regular_file(dir.path("here") + "/" + folders.back() + "/model/model.safetensors"));
  }
  CHECK(folders[0] != folders[1]);
}

TEST_CASE("sailor train interrupted by SIGINT says where its state is, and --resume DIR goes on from its checkpoint") {
  temp_dir dir;
  const auto files = write_out_job(dir, 100000);
  const auto run = dir.path("run");
  child train{{sailor_bin(), "train", "--model", files.model_file, "--job", files.job_file, "--nodes", "1",
               "--planner", "even", "--no-dashboard", "--sample-tokens", "0", "--out", run},
              dir.path("train.out"), dir.path("train.err")};
  const bool trained = eventually(120s, [&] { return std::regex_search(train.out(), std::regex{"iteration +3/100000"}); });
  INFO(train.out());
  REQUIRE(trained);
  train.signal(SIGINT);
  REQUIRE(train.wait_exit(60s) == 1);
  const auto err = train.err();
  INFO(err);
  CHECK(contains(err, "interrupted after"));
  std::smatch said;
  REQUIRE(std::regex_search(err, said, std::regex{"the run's state is kept in (\\S+): its checkpoint after iteration ([0-9]+) of 100000"}));
  CHECK(said[1].str() == run);
  const int held = std::stoi(said[2].str());
  CHECK(held >= 3);
  CHECK(contains(err, "sailor train --resume " + run));
  const auto first_loss = losses_printed(train.out(), 100000).at(1);

  // --resume with a new total: the iterations after the checkpoint, and only those.
  const int total = held + 4;
  auto [r, j] = run_with_summary(sailor_bin() + " train --resume " + run + " --iterations " + std::to_string(total), dir, 200);
  CHECK(contains(r.out, "resuming the run in " + run + ": " + std::to_string(held) + " of " + std::to_string(total)));
  const auto printed = losses_printed(r.out, total);
  REQUIRE_FALSE(printed.empty());
  CHECK(printed.begin()->first == held + 1);
  CHECK(j["iterations_completed"].get<int>() == total);
  CHECK(j["first_iteration"].get<int>() == held + 1);
  const auto loss = j["loss_curve"].get<std::vector<double>>();
  REQUIRE(loss.size() == 4);
  CHECK(loss.front() < first_loss);  // not a fresh start
  // The losses an uninterrupted run of the job gives for those iterations.
  auto model = sailor::config::load_model(files.model_file);
  auto job = sailor::config::load_job(files.job_file);
  REQUIRE(model);
  REQUIRE(job);
  auto reference = single_rank_job(*model, *job, j["plan"]["micro_batch"].get<int>(),
                                   j["plan"]["global_batch"].get<int>(), total);
  check_same_curve(loss, std::vector<double>(reference.loss.end() - 4, reference.loss.end()));
  CHECK(fs::is_regular_file(run + "/model/model.safetensors"));

  // The run is finished: --resume without a larger total says so, naming --iterations.
  auto done = run_command(sailor_bin() + " train --resume " + run, 60);
  CHECK(done.exit_code == 2);
  CHECK(contains(done.err, "--iterations"));
  auto gen = run_command(sailor_bin() + " generate " + run + " --tokens 10", 60);
  CHECK_MESSAGE(gen.exit_code == 0, gen.err);
}

}  // namespace integration_train_out
#endif  // __has_include(<sailor/models/shapes.hpp>)
