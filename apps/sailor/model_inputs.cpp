#include "model_inputs.hpp"

#include <filesystem>
#include <set>

#include "sailor/config/load.hpp"
#include "sailor/config/shipped_models.hpp"
#include "share_dir.hpp"

namespace sailor::app {

namespace {

bool is_yaml(const std::string& path) {
  auto ends = [&](const std::string& e) {
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  return ends(".yaml") || ends(".yml");
}

// Folders of the registry: the working directory's configs/models, then the shipped ones
// (share_dir.hpp: an installed copy's, or the source tree's).
std::vector<std::filesystem::path> registry_folders() {
  std::vector<std::filesystem::path> out{"configs/models"};
  if (auto share = find_share_dir())
    out.push_back(*share / "configs" / "models");
  return out;
}

// Adds --profile's GPU types to `out` (a type in both: the file's wins).
status add_profile(model_inputs& out, const std::string& path) {
  auto p = config::load_profile_json(path);
  if (!p) {
    // A file with several models: take this model's entry.
    auto named = config::load_profile_json(path, out.model.sailor_name.empty() ? out.model.name : out.model.sailor_name);
    if (!named) named = config::load_profile_json(path, out.model.name);
    if (!named) return p.error();
    p = std::move(named);
  }
  if (out.profile.model.empty()) out.profile.model = p->model;
  for (auto& [gpu, prof] : p->by_gpu) out.profile.by_gpu[gpu] = prof;
  for (auto& [tp, sizes] : p->sizes_by_tp) out.profile.sizes_by_tp.emplace(tp, sizes);
  out.has_profile = true;
  return std::nullopt;
}

}  // namespace

std::string find_model_file(const std::string& name, std::vector<std::string>* known) {
  const std::string want = config::normalized_name(name);
  std::set<std::string> names;
  for (const auto& folder : registry_folders()) {
    std::error_code ec;
    for (std::filesystem::directory_iterator i{folder, ec}, end; !ec && i != end; i.increment(ec)) {
      const auto path = i->path().string();
      if (!is_yaml(path)) continue;
      auto m = config::load_model(path);
      if (!m) continue;
      if (config::normalized_name(m->name) == want || (!m->sailor_name.empty() && config::normalized_name(m->sailor_name) == want) ||
          config::normalized_name(i->path().stem().string()) == want)
        return path;
      names.insert(m->name);
    }
  }
  if (known) known->assign(names.begin(), names.end());
  return "";
}

result<model_inputs> load_model_inputs(const model_request& request) {
  model_inputs out;
  std::string file = request.model;
  if (file.empty()) return sailor::error::invalid_input("--model", "is required (a model YAML file or a model name)");
  if (!is_yaml(file)) {
    // A name: Sailor's data first (its shape and profiles), then the shipped files.
    if (!request.sailor_data.empty()) {
      auto d = config::load_sailor_data(request.sailor_data, file);
      if (d) {
        out.data = std::move(*d);
        out.model = out.data->model;
        file.clear();
      } else if (d.error().kind != error_kind::not_found) {
        return d.error();
      }
    }
    if (!out.data) {
      std::vector<std::string> known;
      const std::string found = find_model_file(file, &known);
      if (found.empty()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        return sailor::error::invalid_input("--model", "unknown model '" + file + "' (known: " + list +
                                            (request.sailor_data.empty() ? "; or give --sailor-data DIR for Sailor's models" : ", and Sailor's") +
                                            "; or give a model YAML file)");
      }
      file = found;
    }
  }
  if (!file.empty()) {
    auto m = config::load_model(file);
    if (!m) return m.error();
    out.model = *m;
    out.model_file = file;
    if (!request.sailor_data.empty()) {
      // A model Sailor's data lacks keeps the YAML's shape: no profiles, but the network,
      // prices and catalog of the data.
      auto d = config::load_sailor_data(request.sailor_data, m->sailor_name.empty() ? m->name : m->sailor_name, &*m);
      if (!d) return d.error();
      out.data = std::move(*d);
    }
  }
  if (out.data) {
    out.profile = out.data->profile;
    out.has_profile = !out.profile.by_gpu.empty();
    out.job.optimizer = out.data->optimizer;
    out.job.global_batch = out.data->default_global_batch;
  }
  if (!request.profile.empty())
    if (auto err = add_profile(out, request.profile)) return *err;
  if (!request.job.empty()) {
    auto j = config::load_job(request.job);
    if (!j) return j.error();
    out.job = *j;
  }
  return out;
}

}  // namespace sailor::app
