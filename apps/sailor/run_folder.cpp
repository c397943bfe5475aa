// The folder `sailor train` keeps a run in (see run_folder.hpp).
#include "run_folder.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "local_cluster.hpp"
#include "sample_text.hpp"
#include "training_setup.hpp"
#include "sailor/config/load.hpp"
#include "sailor/train/checkpoint.hpp"

namespace sailor::app::run_folder {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

result<json> read_record(const fs::path& dir) {
  const auto path = dir / record_file();
  std::ifstream in(path);
  if (!in)
    return sailor::error::invalid_input(
      "--resume", dir.string() + " is not the folder of a sailor train run (no " + path.string() + ")");
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    return sailor::error::invalid_input(path.string(), "", std::string("not JSON: ") + e.what());
  }
}

status write_record(const fs::path& dir, const json& j) {
  const auto path = dir / record_file();
  const auto fresh = dir / (std::string(record_file()) + ".new");
  {
    std::ofstream out(fresh, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out)
      return sailor::error::failed("cannot write " + fresh.string());
  }
  std::error_code ec;
  fs::rename(fresh, path, ec);  // never a half-written record
  if (ec)
    return sailor::error::failed("cannot write " + path.string() + ": " + ec.message());
  return {};
}

status copy_into_run(const std::string& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return sailor::error::failed("cannot copy " + from + " to " + to.string() + ": " + ec.message());
  return {};
}

bool option_given(const local_run_args& args, const char* option) {
  return std::count(args.given.begin(), args.given.end(), option) > 0;
}

// The checkpoints' folder name (job_key) for the state folder where it is now.
std::string key_for(const fs::path& state, const std::string& model_name) {
  training_settings s;
  s.work_dir = state.string();
  s.model.name = model_name;
  return job_key(s);
}

// A run folder moved since it was recorded: its checkpoints under the name the new place
// gives (the nodes look for them there).
status follow_move(const fs::path& dir, json& j) {
  const std::string recorded = j.value("job_key", "");
  const std::string now = key_for(dir / state_folder(), j.value("model_name", ""));
  if (recorded.empty() || recorded == now)
    return {};
  const auto from = dir / state_folder() / "checkpoints" / recorded;
  const auto to = dir / state_folder() / "checkpoints" / now;
  std::error_code ec;
  if (fs::exists(from, ec) && !fs::exists(to, ec)) {
    fs::rename(from, to, ec);
    if (ec)
      return sailor::error::failed("cannot rename " + from.string() + " to " + to.string() + ": " + ec.message());
  }
  j["job_key"] = now;
  return write_record(dir, j);
}

}  // namespace

bool is_run(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / record_file(), ec);
}

result<fs::path> make_default(const std::string& job_file) {
  const fs::path parent = fs::path("sailor-runs");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    return sailor::error::failed("cannot create " + fs::absolute(parent).string() + " for the run (--out DIR puts it elsewhere): " + ec.message());
  const std::string base = fs::path(job_file).stem().string() + "-" + utc_stamp();
  for (int k = 1; k < 1000; ++k) {
    const auto dir = parent / (k == 1 ? base : base + "-" + std::to_string(k));
    if (fs::create_directory(dir, ec))  // atomic: two runs in the same second get two folders
      return dir;
    if (ec)
      return sailor::error::failed("cannot create " + dir.string() + ": " + ec.message());
  }
  return sailor::error::failed("no free folder name under " + parent.string() + " for " + base);
}

result<bool> make_new(const fs::path& dir) {
  std::error_code ec;
  if (is_run(dir))
    return sailor::error::invalid_input(
      "--out", dir.string() + " holds a run already (" + (dir / record_file()).string() +
                 "): `sailor train --resume " + dir.string() + "` continues it; choose another --out for a new one");
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec))
      return sailor::error::invalid_input("--out", dir.string() + " exists and is not an empty folder");
    return false;
  }
  fs::create_directories(dir, ec);
  if (ec)
    return sailor::error::invalid_input("--out", "cannot create " + dir.string() + ": " + ec.message());
  return true;
}

status record(const fs::path& dir, const local_run_args& args, const std::string& data, int iterations,
              const std::string& key) {
  const auto model_copy = dir / "model.yaml";
  const auto job_copy = dir / "job.yaml";
  // On --resume the files are these copies already.
  if (fs::absolute(args.model) != fs::absolute(model_copy))
    if (auto err = copy_into_run(args.model, model_copy))
      return err;
  if (fs::absolute(args.job) != fs::absolute(job_copy))
    if (auto err = copy_into_run(args.job, job_copy))
      return err;
  auto model = config::load_model(model_copy.string());
  json j;
  j["command"] = args.command;
  j["model_name"] = model ? model->name : "";
  j["data"] = data.empty() ? json(nullptr) : json(data);
  j["iterations"] = iterations;
  j["nodes"] = args.nodes;
  j["zones"] = args.zones;
  j["regions"] = args.regions;
  j["region_link"] = args.region_link;
  j["cluster"] = fs::absolute(args.cluster).string();
  j["planner"] = args.planner;
  j["init_from"] = args.init_from.empty() ? json(nullptr) : json(fs::absolute(args.init_from).string());
  j["plan"] = args.plan.empty() ? json(nullptr) : json(fs::absolute(args.plan).string());
  j["checkpoint_every"] = args.checkpoint_every;
  j["sample_prompt"] = args.sample_prompt;
  j["sample_tokens"] = args.sample_tokens;
  j["job_key"] = key;
  j["outcome"] = "running";
  j["iterations_done"] = 0;
  return write_record(dir, j);
}

void set_outcome(const fs::path& dir, const std::string& outcome, int done) {
  auto j = read_record(dir);
  if (!j)
    return;
  (*j)["outcome"] = outcome;
  (*j)["iterations_done"] = done;
  (void)write_record(dir, *j);
}

result<int> resume(local_run_args& args) {
  const fs::path dir = args.resume;
  auto j = read_record(dir);
  if (!j)
    return j.error();
  if (auto err = follow_move(dir, *j))
    return *err;
  args.out = args.resume;
  args.model = (dir / "model.yaml").string();
  args.job = (dir / "job.yaml").string();
  try {
    if (!option_given(args, "--data") && (*j)["data"].is_string()) args.data = (*j)["data"].get<std::string>();
    if (!option_given(args, "--nodes")) args.nodes = j->value("nodes", args.nodes);
    // Other --nodes without --zones: that count's default zones.
    if (!option_given(args, "--zones")) args.zones = option_given(args, "--nodes") ? 0 : j->value("zones", args.zones);
    if (!option_given(args, "--regions")) args.regions = j->value("regions", args.regions);
    if (!option_given(args, "--region-link")) args.region_link = j->value("region_link", args.region_link);
    if (!option_given(args, "--cluster")) args.cluster = j->value("cluster", args.cluster);
    if (!option_given(args, "--planner")) args.planner = j->value("planner", args.planner);
    if (!option_given(args, "--init-from") && (*j)["init_from"].is_string()) args.init_from = (*j)["init_from"].get<std::string>();
    if (!option_given(args, "--plan") && (*j)["plan"].is_string()) args.plan = (*j)["plan"].get<std::string>();
    if (!option_given(args, "--checkpoint-every")) args.checkpoint_every = j->value("checkpoint_every", args.checkpoint_every);
    if (!option_given(args, "--sample-prompt")) args.sample_prompt = j->value("sample_prompt", args.sample_prompt);
    if (!option_given(args, "--sample-tokens")) args.sample_tokens = j->value("sample_tokens", args.sample_tokens);
    if (!option_given(args, "--iterations")) args.iterations = j->value("iterations", 0);
  } catch (const std::exception& e) {
    return sailor::error::invalid_input((dir / record_file()).string(), "", e.what());
  }
  int held = 0;
  if (auto found = newest_checkpoint(dir))
    held = found->iterations;
  if (args.iterations <= held) {
    const std::string total = std::to_string(args.iterations), at = std::to_string(held);
    return sailor::error::invalid_input(
      "--iterations", option_given(args, "--iterations")
                        ? total + " is not above the " + at + " iterations the run in " + dir.string() +
                            " holds already: give the new total, counted from the run's start"
                        : "the run in " + dir.string() + " is finished (its checkpoint holds all its " + total +
                            " iterations): give --iterations N, N above " + at +
                            " (the new total, counted from the run's start), to train it further");
  }
  return held;
}

result<checkpoint_found> newest_checkpoint(const fs::path& dir, int iterations) {
  const auto root = dir / state_folder() / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return sailor::error::not_found(dir.string(), "", "no checkpoints in " + dir.string() + " (no " + root.string() + ")");
  checkpoint_found best;
  std::int64_t best_plan = -1;
  for (fs::directory_iterator job{root, ec}, end; !ec && job != end; job.increment(ec))
    for (fs::directory_iterator plan{job->path(), ec}, plan_end; !ec && plan != plan_end; plan.increment(ec)) {
      const auto name = plan->path().filename().string();
      if (name.size() < 2 || name[0] != 'v' || name.find_first_not_of("0123456789", 1) != std::string::npos)
        continue;  // the ranks' memory copies (mem) and anything else
      const std::int64_t version = std::stoll(name.substr(1));
      int held = train::latest_checkpoint(plan->path().string());
      if (iterations > 0)
        held = fs::is_directory(train::checkpoint_path(plan->path().string(), iterations)) ? iterations : 0;
      if (held > 0 && (held > best.iterations || (held == best.iterations && version > best_plan))) {
        best = {plan->path(), held};
        best_plan = version;
      }
    }
  if (best.iterations == 0)
    return sailor::error::not_found(
      dir.string(), "",
      iterations > 0 ? "no checkpoint after iteration " + std::to_string(iterations) + " under " + root.string()
                     : "no complete checkpoint under " + root.string());
  return best;
}

result<place> open(local_run_args& args) {
  place p;
  if (!args.resume.empty()) {
    for (const char* option : {"--model", "--job", "--out"})
      if (option_given(args, option))
        return sailor::error::invalid_input(
          option, std::string("not with --resume: the run's folder holds its model and job (") + args.resume +
                    "/model.yaml, job.yaml) and is where it goes on");
    auto held = resume(args);
    if (!held)
      return held.error();
    p.dir = args.resume;
    p.resumed = true;
    p.earlier = *held;
    return p;
  }
  if (args.model.empty() || args.job.empty())
    return sailor::error::invalid_input(args.model.empty() ? "--model" : "--job",
                                        "required (or --resume DIR, to continue the run in DIR)");
  if (!args.out.empty()) {
    auto made = make_new(args.out);
    if (!made)
      return made.error();
    p.dir = args.out;
    p.made = *made;
    return p;
  }
  if (!args.default_out)
    return p;
  auto dir = make_default(args.job);
  if (!dir)
    return dir.error();
  p.dir = *dir;
  p.made = true;
  return p;
}

void discard(const place& p) {
  if (p.dir.empty() || p.resumed)
    return;
  std::error_code ec;
  if (p.made) {
    fs::remove_all(p.dir, ec);
    if (p.dir.parent_path().filename() == "sailor-runs")
      fs::remove(p.dir.parent_path(), ec);  // only when empty: other runs stay
    return;
  }
  for (fs::directory_iterator i{p.dir, ec}, end; !ec && i != end; i.increment(ec)) {
    std::error_code gone;
    fs::remove_all(i->path(), gone);  // it was empty: all of it is this run's
  }
}

int finish(const place& p, const local_run_args& args, const config::model_shape& model, int iterations) {
  if (p.dir.empty())
    return 0;
  set_outcome(p.dir, "finished", iterations);
  const std::string dir = p.dir.string();
  std::printf("\n  the run is kept in %s\n", dir.c_str());
  auto found = newest_checkpoint(p.dir);
  if (!found) {
    std::printf("    no checkpoint to export (%s)%s\n", found.error().message.c_str(),
                args.checkpoint_every == 0 ? ": --checkpoint-every 0 writes none" : "");
    std::fflush(stdout);
    return args.checkpoint_every == 0 ? 0 : 1;
  }
  const auto out = p.dir / model_folder() / model_file();
  std::string tokenizer;
  auto written = export_model_files(model, (p.dir / "model.yaml").string(), found->plan_folder.string(),
                                    found->iterations, out.string(), tokenizer);
  if (!written) {
    std::printf("    the model was not exported: %s (`sailor export %s` tries again)\n",
                written.error().to_string().c_str(), dir.c_str());
    std::fflush(stdout);
    return 1;
  }
  std::printf("    %s/%s/  the trained model: %s (%d tensors, Hugging Face names), config.json, %s%s\n",
              dir.c_str(), model_folder(), model_file(), *written, exported_model_file(),
              tokenizer.empty() ? "" : (", " + tokenizer).c_str());
  std::printf("    %s/%s/  the checkpoint after iteration %d (%s), node logs\n", dir.c_str(), state_folder(),
              found->iterations, found->plan_folder.string().c_str());
  if (!tokenizer.empty())
    std::printf("  sailor generate %s --prompt TEXT   samples text from it\n", dir.c_str());
  std::printf("  sailor train --resume %s --iterations N   trains it on to N iterations in all\n", dir.c_str());
  std::fflush(stdout);
  return 0;
}

void report_stopped(const place& p, const local_run_args& args, const std::string& outcome, int iterations) {
  if (p.dir.empty())
    return;
  const std::string dir = p.dir.string();
  auto found = newest_checkpoint(p.dir);
  const int held = found ? found->iterations : 0;
  set_outcome(p.dir, outcome, held);
  if (held > 0)
    std::fprintf(stderr, "sailor %s: the run's state is kept in %s: its checkpoint after iteration %d of %d (%s); "
                         "`sailor %s --resume %s` continues it from there\n",
                 args.command.c_str(), dir.c_str(), held, iterations, found->plan_folder.string().c_str(),
                 args.command.c_str(), dir.c_str());
  else
    std::fprintf(stderr, "sailor %s: the run's state and node logs are kept in %s, with no checkpoint yet: "
                         "`sailor %s --resume %s` starts it again\n",
                 args.command.c_str(), dir.c_str(), args.command.c_str(), dir.c_str());
}

}  // namespace sailor::app::run_folder
