#include "job_metrics.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "sailor/simulator/host_profile.hpp"
#include "sailor/simulator/simulator.hpp"

namespace sailor::app {

using nlohmann::json;

job_metrics::job_metrics(std::shared_ptr<const actors::status_board> board,
                         config::cluster cluster, config::model_shape model)
    : board_(std::move(board)), cluster_(std::move(cluster)), model_(std::move(model)) {}

// The simulator as our runtime sends (full copies to every receiving TP rank, hierarchical
// all-reduce across zones): bytes do not depend on a profile. Absent when it cannot say.
job_metrics::plan_traffic job_metrics::traffic_of(const actors::board_snapshot& s) const {
  if (!s.plan || s.plan->stages.empty())
    return {};
  std::lock_guard lock{mu_};
  if (traffic_version_ == s.status.plan_version)
    return traffic_;
  traffic_ = {};
  traffic_version_ = s.status.plan_version;
  simulator::sim_inputs in;
  in.model = model_;
  in.gpus = cluster_.gpus;
  in.cluster = &cluster_;
  in.job.global_batch = s.plan->global_batch;
  auto ctx = simulator::sim_context::make(in, simulator::cpu_sim_options(nullptr));
  if (!ctx)
    return traffic_;
  auto e = simulator::simulate(*ctx, *s.plan);
  if (!e)
    return traffic_;
  traffic_.cross_zone_bytes = e->egress_bytes_per_iteration;
  traffic_.egress_usd = e->egress_usd_per_iteration;
  return traffic_;
}

job_figures job_metrics::figures() const {
  job_figures f;
  const auto snap = board_->snapshot();
  const auto& st = snap->status;
  f.plan_version = st.plan_version;
  f.iterations_completed = st.training_completed;
  f.iterations_total = st.training_total;
  for (const char* state : {"joined", "assigned", "idle", "ready"})
    f.nodes_by_state[state] = 0;
  for (const auto& n : st.nodes)
    ++f.nodes_by_state[n.state];
  f.counters = board_->counters();
  if (st.checkpoint_every > 0)
    f.checkpoint_behind_iterations = st.checkpoint_behind;
  const auto newest = board_->metrics(INT64_MAX / 2, 0).newest;
  const auto page = board_->metrics(newest < 0 ? INT64_MAX / 2 : newest, 1);
  if (!page.points.empty()) {
    const auto& p = page.points.back();
    f.iteration = p.iteration;
    f.loss = p.record.loss;
    f.measured_iteration_s = p.record.measured_s;
    if (p.record.measured_s > 0)
      f.tokens_per_s = static_cast<double>(p.record.tokens) / p.record.measured_s;
    if (p.predicted_s > 0)
      f.predicted_iteration_s = p.predicted_s;
  }
  if (!f.predicted_iteration_s && snap->predicted_s > 0)
    f.predicted_iteration_s = snap->predicted_s;
  const auto traffic = traffic_of(*snap);
  f.cross_zone_bytes_per_iteration = traffic.cross_zone_bytes;
  if (snap->plan && f.measured_iteration_s) {
    double usd_per_hour = 0;
    for (const auto& stage : snap->plan->stages)
      for (const auto& r : stage.replicas)
        usd_per_hour += r.tp * cluster_.usd_per_gpu_hour(r.gpu_type);
    if (usd_per_hour > 0 || traffic.egress_usd.value_or(0) > 0)
      f.usd_per_iteration =
        usd_per_hour * *f.measured_iteration_s / 3600.0 + traffic.egress_usd.value_or(0);
  }
  return f;
}

namespace {

// A sample value as the format takes it (Go's float syntax: NaN, +Inf, -Inf).
std::string number(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// A label value: backslash, double quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

class exposition {
public:
  // A family's HELP and TYPE, once, before its samples.
  exposition& family(const std::string& name, const char* type, const char* help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    return *this;
  }
  exposition& sample(const std::string& name, double v, const std::string& label = {},
                     const std::string& label_v = {}) {
    text_ += name;
    if (!label.empty())
      text_ += "{" + label + "=\"" + label_value(label_v) + "\"}";
    text_ += " " + number(v) + "\n";
    return *this;
  }
  exposition& gauge(const std::string& name, const char* help, std::optional<double> v) {
    if (v)
      family(name, "gauge", help).sample(name, *v);
    return *this;
  }
  std::string take() { return std::move(text_); }

private:
  std::string text_;
};

}  // namespace

std::string prometheus_text(const job_figures& f) {
  exposition out;
  out.family("sailor_iterations_completed_total", "counter",
             "Training iterations completed, by any plan.")
    .sample("sailor_iterations_completed_total", static_cast<double>(f.iterations_completed));
  out.gauge("sailor_iterations_planned", "Iterations the job trains (0: not training).",
            static_cast<double>(f.iterations_total));
  out.gauge("sailor_plan_version", "The current plan's version.",
            static_cast<double>(f.plan_version));
  out.gauge("sailor_loss", "Training loss of the newest iteration.", f.loss);
  out.gauge("sailor_tokens_per_second", "Tokens per second of the newest iteration.",
            f.tokens_per_s);
  out.gauge("sailor_iteration_measured_seconds", "Measured time of the newest iteration.",
            f.measured_iteration_s);
  out.gauge("sailor_iteration_predicted_seconds",
            "The running plan's predicted iteration time.", f.predicted_iteration_s);
  out.family("sailor_nodes", "gauge", "Nodes in the job by state.");
  for (const auto& [state, n] : f.nodes_by_state)
    out.sample("sailor_nodes", n, "state", state);
  out.family("sailor_replans_total", "counter",
             "Plans made after the first, by cause (node_lost, node_joined, drift, scheduler, "
             "restore_failed, startup_failed, other).");
  for (const auto& [cause, n] : f.counters.replans)
    out.sample("sailor_replans_total", static_cast<double>(n), "cause", cause);
  out.family("sailor_recoveries_total", "counter",
             "Plans that resumed training after a loss (loss) or took over running ranks "
             "(replan), by cause.");
  for (const auto& [cause, n] : f.counters.recoveries)
    out.sample("sailor_recoveries_total", static_cast<double>(n), "cause", cause);
  if (f.counters.last_recovery_s >= 0)
    out.gauge("sailor_last_recovery_seconds",
              "The newest recovery: from the loss to the next plan's first iteration.",
              f.counters.last_recovery_s);
  out.gauge("sailor_cross_zone_bytes_per_iteration",
            "Bytes the running plan sends between zones per iteration (the simulator's "
            "estimate).",
            f.cross_zone_bytes_per_iteration);
  out.gauge("sailor_usd_per_iteration",
            "Dollars of the newest iteration: GPUs at the cluster's prices for its measured "
            "time, and the estimated egress.",
            f.usd_per_iteration);
  if (f.checkpoint_behind_iterations)
    out.gauge("sailor_checkpoint_behind_iterations",
              "Iterations completed since the newest complete checkpoint.",
              static_cast<double>(*f.checkpoint_behind_iterations));
  return out.take();
}

json figures_json(const job_figures& f) {
  const auto optional = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"plan_version", f.plan_version},
          {"iteration", f.iteration},
          {"iterations_completed", f.iterations_completed},
          {"iterations_planned", f.iterations_total},
          {"loss", optional(f.loss)},
          {"tokens_per_s", optional(f.tokens_per_s)},
          {"iteration_measured_s", optional(f.measured_iteration_s)},
          {"iteration_predicted_s", optional(f.predicted_iteration_s)},
          {"nodes", f.nodes_by_state},
          {"replans", f.counters.replans},
          {"recoveries", f.counters.recoveries},
          {"last_recovery_s",
           f.counters.last_recovery_s >= 0 ? json(f.counters.last_recovery_s) : json(nullptr)},
          {"cross_zone_bytes_per_iteration", optional(f.cross_zone_bytes_per_iteration)},
          {"usd_per_iteration", optional(f.usd_per_iteration)},
          {"checkpoint_behind_iterations", optional(f.checkpoint_behind_iterations)}};
}

metrics_jsonl::metrics_jsonl(std::FILE* file, std::string path,
                             std::shared_ptr<const job_metrics> metrics)
    : file_(file), path_(std::move(path)), metrics_(std::move(metrics)) {}

metrics_jsonl::~metrics_jsonl() { std::fclose(file_); }

result<std::unique_ptr<metrics_jsonl>> metrics_jsonl::open(
  const std::string& path, std::shared_ptr<const job_metrics> metrics) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (!file)
    return sailor::error::of(error_kind::invalid_input, path, "--metrics-jsonl",
                             "--metrics-jsonl: cannot open " + path + " to append: " +
                               std::strerror(errno));
  return std::unique_ptr<metrics_jsonl>(new metrics_jsonl(file, path, std::move(metrics)));
}

void metrics_jsonl::append() {
  const auto line = figures_json(metrics_->figures())
                      .dump(-1, ' ', false, json::error_handler_t::replace) +
                    "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
                  std::fflush(file_) == 0;
  if (!ok && !std::exchange(failed_, true))
    std::fprintf(stderr, "sailor: --metrics-jsonl: cannot write %s: %s (training goes on)\n",
                 path_.c_str(), std::strerror(errno));
}

void append_figures_on_iteration(actors::supervisor_options& options,
                                 std::shared_ptr<metrics_jsonl> file) {
  if (!file)
    return;
  options.on_iteration = [before = std::move(options.on_iteration), file](
                           const actors::iteration_record& r, const actors::training_progress& p) {
    file->append();  // first: `before` may end the process on the last iteration
    if (before)
      before(r, p);
  };
}

result<std::shared_ptr<metrics_jsonl>> open_metrics_jsonl(
  const std::string& path, std::shared_ptr<const actors::status_board> board,
  const config::cluster& cluster, const config::model_shape& model) {
  if (path.empty())
    return std::shared_ptr<metrics_jsonl>{};
  auto metrics = std::make_shared<const job_metrics>(std::move(board), cluster, model);
  auto file = metrics_jsonl::open(path, std::move(metrics));
  if (!file)
    return file.error();
  return std::shared_ptr<metrics_jsonl>(std::move(*file));
}

}  // namespace sailor::app
