#include "model_inputs.hpp"

#include "sailor/config/load.hpp"

namespace sailor::app {

namespace {
bool is_yaml(const std::string& path) {
  auto ends = [&](const std::string& e) {
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  return ends(".yaml") || ends(".yml");
}
}  // namespace

result<model_inputs> load_model_inputs(const std::string& model, const std::string& sailor_data,
                                       const std::string& job) {
  model_inputs out;
  if (model.empty()) return sailor::error{error_kind::invalid_input, "is required", "", 0, "--model"};
  if (is_yaml(model)) {
    auto m = config::load_model(model);
    if (!m) return m.error();
    out.model = *m;
    if (!sailor_data.empty()) {
      auto d = config::load_sailor_data(sailor_data, m->sailor_name.empty() ? m->name : m->sailor_name);
      if (!d) return d.error();
      out.data = std::move(*d);
    }
  } else {
    if (sailor_data.empty())
      return sailor::error{error_kind::invalid_input,
                           "names a Sailor model (" + model + "): give --sailor-data DIR, or a model YAML file",
                           "", 0, "--model"};
    auto d = config::load_sailor_data(sailor_data, model);
    if (!d) return d.error();
    out.data = std::move(*d);
    out.model = out.data->model;
  }
  if (out.data) {
    out.job.optimizer = out.data->optimizer;
    out.job.global_batch = out.data->default_global_batch;
  }
  if (!job.empty()) {
    auto j = config::load_job(job);
    if (!j) return j.error();
    out.job = *j;
  }
  return out;
}

}  // namespace sailor::app
