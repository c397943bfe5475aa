#pragma once
// The folder `sailor train` keeps a run in (--out DIR, by default ./sailor-runs/<job>-<UTC
// time>), which `sailor train --resume DIR`, `sailor export DIR` and `sailor generate DIR` take:
//
//   DIR/run.json     what was run (the options --resume takes again) and how far it got
//   DIR/model.yaml   the model file it trains, DIR/job.yaml the job file (copies)
//   DIR/state/       the coordinator's and the nodes' folder: the checkpoints
//                    (state/checkpoints/<job>/v<plan>/iter-<N>/), the node logs, the profiles
//   DIR/model/       the trained model, exported at the end: model.safetensors (Hugging Face
//                    names), config.json, sailor-model.yaml and, for a text job, its
//                    tokenizer (vocab.json, its characters, or tokenizer.model or gpt2-*
//                    as the job named): `sailor generate DIR/model` needs nothing else
//
// No LibTorch here: finding checkpoints needs only their index (sailor/train/checkpoint.hpp).
#include <filesystem>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"
#include "sailor/config/model.hpp"

namespace sailor::app {

struct local_run_args;  // local_cluster.hpp

namespace run_folder {

inline const char* record_file() { return "run.json"; }
inline const char* state_folder() { return "state"; }
inline const char* model_folder() { return "model"; }
inline const char* model_file() { return "model.safetensors"; }

/// ./sailor-runs/<job file's name>-<UTC yyyymmdd-hhmmss>, with -2, -3, ... after it when
/// that is taken: made here (never an existing run's folder).
result<std::filesystem::path> make_default(const std::string& job_file);

/// Makes `dir` for a new run: refused when it holds a run already (its run.json: --resume it)
/// or anything else. Returns whether the folder was made here (it did not exist).
result<bool> make_new(const std::filesystem::path& dir);

/// Records the run in `dir`: copies the model and job files, and writes run.json with the
/// options --resume takes again (`args` after its inputs were read; `data` the data file the
/// nodes train on, "" for none, `job_key` the checkpoints' folder name).
status record(const std::filesystem::path& dir, const local_run_args& args, const std::string& data,
              int iterations, const std::string& job_key);

/// Marks the run in `dir` "finished", "interrupted" or "failed" after `done` iterations.
void set_outcome(const std::filesystem::path& dir, const std::string& outcome, int done);

/// `args` for `sailor train --resume DIR` (args.resume): what DIR/run.json recorded, except
/// the options in args.given (given on this command line, their values in `args` already).
/// Refuses a folder that is not a run's, and a total of iterations (--iterations, or the
/// recorded one) not above what its newest checkpoint holds. A run folder moved since it was
/// recorded has its checkpoints' folder renamed to the name its new place gives (job_key), so
/// that the nodes find them again. Returns the iterations the checkpoint holds.
result<int> resume(local_run_args& args);

/// The newest complete checkpoint under a run's state folder: the plan folder holding it
/// (state/checkpoints/<job>/v<plan>) and its iterations; or, with `iterations` > 0, the plan
/// folder holding that one. Errors name the folder and what is missing.
struct checkpoint_found {
  std::filesystem::path plan_folder;
  int iterations = 0;
};
result<checkpoint_found> newest_checkpoint(const std::filesystem::path& dir, int iterations = 0);

/// Whether `dir` is a run's folder (it holds run.json).
bool is_run(const std::filesystem::path& dir);

/// Where a local run keeps its state.
struct place {
  std::filesystem::path dir;  ///< "": a temporary folder (sailor demo without --out)
  bool made = false;          ///< made by this run
  bool resumed = false;       ///< --resume
  int earlier = 0;            ///< --resume: the iterations its checkpoint holds
};

/// The run's folder for `args` (--resume DIR, --out DIR, the default one of `sailor train`, or
/// none), made or checked, and `args` completed from a resumed run's record. Errors name the
/// option.
result<place> open(local_run_args& args);

/// The run's inputs were refused before it started: what this run made goes (a resumed run's
/// folder stays as it was).
void discard(const place& p);

/// After a success (the nodes stopped, their last checkpoint written): the trained model
/// exported into DIR/model from the newest checkpoint, the run marked finished and what the
/// folder holds printed. Returns an exit code: 1 when nothing could be exported.
int finish(const place& p, const local_run_args& args, const config::model_shape& model, int iterations);

/// After a failure or Ctrl-C (the nodes stopped): the run marked `outcome` ("interrupted",
/// "failed") and, on stderr, where its state is, how far its checkpoint goes and the command
/// that continues it.
void report_stopped(const place& p, const local_run_args& args, const std::string& outcome, int iterations);

}  // namespace run_folder
}  // namespace sailor::app
