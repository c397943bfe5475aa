#include "sailor/config/sailor_format.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sailor/config/shipped_models.hpp"
#include "sailor_json.hpp"

namespace sailor::config {

namespace fs = std::filesystem;
using namespace sailor_json;

namespace {

constexpr const char* configs_dir = "sailor/Planner/simulations/configs";
constexpr const char* profiles_tmp = "sailor/Planner/simulations/profiles_tmp.json";
constexpr const char* planner_profiles = "sailor/Planner/sailor_planner/profiles";
constexpr const char* llm_info = "sailor/Planner/llm_info.json";
constexpr const char* het_bandwidths = "sailor/providers/multizone_bandwidths_het.json";
constexpr const char* homo_bandwidths = "sailor/providers/multizone_bandwidths.json";
constexpr const char* intra_bandwidths = "sailor/providers/intra_node_bandwidths.json";
constexpr const char* egress_costs = "sailor/providers/gcp/communication_cost.json";
constexpr const char* cluster_config = "sailor/Planner/simulations/configs/basic_cluster_config.json";

sailor_bandwidth_fit parse_fit(const json& j, const std::string& file, const std::string& field) {
  // [[a, b, c], max_bytes_per_s]
  if (!j.is_array() || j.size() != 2 || !j[0].is_array() || j[0].size() != 3)
    throw error::invalid_input(file, field, "expected [[a, b, c], max_bw]");
  sailor_bandwidth_fit f;
  f.a = number_at(j[0][0], file, field + "[0][0]");
  f.b = number_at(j[0][1], file, field + "[0][1]");
  f.c = number_at(j[0][2], file, field + "[0][2]");
  f.max_gbytes_per_s = number_at(j[1], file, field + "[1]") / 1e9;
  return f;
}

// The shape of a model Sailor profiles, from the shipped models (configs/models), under the
// name the caller gave it; nullopt for another model.
std::optional<model_shape> known_shape(const std::string& name) {
  auto m = find_shipped_sailor_model(name);
  if (m) m->sailor_name = name;
  return m;
}

// Sailor's names of the shipped models, for messages.
std::string known_sailor_names() {
  std::string out;
  for (const auto& m : shipped_models())
    if (!m.shape.sailor_name.empty()) out += (out.empty() ? "" : ", ") + m.shape.sailor_name;
  return out;
}

optimizer_kind parse_optimizer(const std::string& s) {
  std::string n = normalized_name(s);
  if (n == "sgd") return optimizer_kind::sgd;
  if (n == "adamw") return optimizer_kind::adamw;
  return optimizer_kind::adam;
}

// model -> gpu -> mbs -> tp -> layer -> [fwd, bwd, update]; fills only what is missing.
void merge_profile(gpu_profile& out, const json& by_mbs, const std::string& file,
                   const std::string& field) {
  if (!by_mbs.is_object()) throw error::invalid_input(file, field, "expected an object");
  for (const auto& [mbs_key, by_tp] : by_mbs.items()) {
    int mbs = to_int(mbs_key, file, field + "." + mbs_key);
    if (!by_tp.is_object())
      throw error::invalid_input(file, field + "." + mbs_key, "expected an object");
    for (const auto& [tp_key, layers] : by_tp.items()) {
      int tp = to_int(tp_key, file, field + "." + mbs_key + "." + tp_key);
      auto& slot = out.times[mbs][tp];
      if (!slot.empty()) continue;
      std::string f = field + "." + mbs_key + "." + tp_key;
      if (!layers.is_object()) throw error::invalid_input(file, f, "expected an object");
      std::vector<layer_time> times(layers.size());
      for (const auto& [layer_key, v] : layers.items()) {
        int layer = to_int(layer_key, file, f + "." + layer_key);
        if (layer < 0 || layer >= static_cast<int>(layers.size()))
          throw error::invalid_input(file, f + "." + layer_key,
                                     "layer ids must be 0.." + std::to_string(layers.size() - 1));
        if (!v.is_array() || v.size() < 3)
          throw error::invalid_input(file, f + "." + layer_key,
                                     "expected [fwd_s, bwd_s, update_s]");
        times[layer] = {number_at(v[0], file, f + "." + layer_key + "[0]"),
                        number_at(v[1], file, f + "." + layer_key + "[1]"),
                        number_at(v[2], file, f + "." + layer_key + "[2]")};
      }
      slot = std::move(times);
    }
  }
}

}  // namespace

double sailor_bandwidth_fit::gbytes_per_s(double bytes) const {
  // The quadratic was fitted on messages from 1 MB up; below that it is held at the 1 MB
  // transfer time (a latency floor), and past its vertex it is held at its maximum.
  double x = std::log2(std::max(bytes, 1.0) / 1e6);
  auto eval = [this](double v) { return (a * v + b) * v + c; };
  double bw;
  if (x < 0) {
    bw = eval(0.0) * std::exp2(x);
  } else {
    if (a < 0) {
      double vertex = -b / (2 * a);
      if (vertex >= 0 && x > vertex) x = vertex;
    }
    bw = eval(x);
  }
  if (max_gbytes_per_s > 0) bw = std::min(bw, max_gbytes_per_s);
  return std::max(bw, 1e-6);
}

const sailor_bandwidth_fit* sailor_network::find(const endpoint& a, const endpoint& b) const {
  auto it = fits.find({a, b});
  if (it != fits.end()) return &it->second;
  it = fits.find({b, a});
  return it == fits.end() ? nullptr : &it->second;
}

namespace {

// What load_sailor_data reads, one file (or folder) a step; each throws the error it finds.
class sailor_reader {
public:
  sailor_reader(const std::string& root, const std::string& model_name, sailor_data& out)
      : base_(root), model_name_(model_name), out_(out) {}

  // The model's shape from the training config whose "model" (or file name) matches; false
  // when there is none.
  bool read_training_config() {
    const fs::path cfg_dir = base_ / configs_dir;
    if (!fs::is_directory(cfg_dir)) return false;
    for (const auto& entry : fs::directory_iterator(cfg_dir)) {
      std::string fname = entry.path().filename().string();
      if (fname.rfind("training_config_", 0) != 0 || entry.path().extension() != ".json") continue;
      const std::string file = entry.path().string();
      const json j = parsed(file);
      std::string stem = fname.substr(16, fname.size() - 16 - 5);
      std::string declared = j.value("model", std::string());
      if (normalized_name(declared) != normalized_name(model_name_) && normalized_name(stem) != normalized_name(model_name_)) continue;
      auto get_int = [&](const char* field) {
        if (!j.contains(field) || !j[field].is_number_integer())
          throw error::invalid_input(file, field, "expected an integer");
        return j[field].get<int>();
      };
      model_shape m = known_shape(model_name_).value_or(model_shape{});
      if (m.name.empty()) m.name = declared.empty() ? model_name_ : declared;
      m.sailor_name = declared.empty() ? model_name_ : declared;
      m.hidden = get_int("hidden_size");
      m.sequence = get_int("sequence_length");
      m.num_layers = get_int("num_layers");
      // Sizes are what Sailor profiled, but heads and vocabulary of a known model come from its
      // shipped shape: GPT-Neo-2.7's config lists 32 heads of 80 (the released model has 20 of
      // 128) and Llama's vocabulary (llm_info's embedding has GPT-2's 50257 rows).
      if (m.heads == 0) m.heads = get_int("heads");
      if (m.vocabulary == 0) m.vocabulary = get_int("vocab_size");
      if (j.contains("num_all_layers") && get_int("num_all_layers") != m.num_layers + 2)
        throw error::invalid_input(file, "num_all_layers",
                                   "expected num_layers + 2 (embedding, blocks, head)");
      out_.model = m;
      out_.default_global_batch = j.value("global_batch_size", 0);
      out_.optimizer = parse_optimizer(j.value("optimizer", std::string("Adam")));
      return true;
    }
    return false;
  }

  // Time profiles: profiles_tmp.json first, the planner's per-model copies fill gaps.
  void read_profiles() {
    if (fs::exists(base_ / profiles_tmp)) {
      const std::string file = (base_ / profiles_tmp).string();
      const json j = parsed(file);
      std::string key = model_key(j);
      if (!key.empty())
        for (const auto& [gpu, by_mbs] : j[key].items()) {
          auto& gp = out_.profile.by_gpu[gpu];
          gp.gpu_type = gpu;
          merge_profile(gp, by_mbs, file, key + "." + gpu);
        }
    }
    const fs::path per_model = base_ / planner_profiles;
    if (!fs::is_directory(per_model)) return;
    for (const auto& mdir : fs::directory_iterator(per_model)) {
      if (!mdir.is_directory() || !is_model(mdir.path().filename().string())) continue;
      for (const auto& gdir : fs::directory_iterator(mdir.path())) {
        fs::path pfile = gdir.path() / "profile.json";
        if (!fs::exists(pfile)) continue;
        const json j = parsed(pfile.string());
        std::string gpu = gdir.path().filename().string();
        auto& gp = out_.profile.by_gpu[gpu];
        gp.gpu_type = gpu;
        merge_profile(gp, j, pfile.string(), "");
      }
    }
  }

  // Per-layer sizes by TP degree (llm_info.json).
  void read_layer_sizes() {
    if (!fs::exists(base_ / llm_info)) return;
    const std::string file = (base_ / llm_info).string();
    const json j = parsed(file);
    std::string key = model_key(j);
    if (key.empty()) return;
    for (const auto& [tp_key, layers] : j[key].items()) {
      int tp = to_int(tp_key, file, key + "." + tp_key);
      std::vector<layer_size> sizes(layers.size());
      for (const auto& [layer_key, v] : layers.items()) {
        std::string f = key + "." + tp_key + "." + layer_key;
        int layer = to_int(layer_key, file, f);
        if (layer < 0 || layer >= static_cast<int>(sizes.size()))
          throw error::invalid_input(file, f, "layer id out of range");
        auto num = [&](const char* name) {
          if (!v.contains(name)) throw error::invalid_input(file, f + "." + name, "missing");
          return number_at(v[name], file, f + "." + name);
        };
        sizes[size_t(layer)] = {num("params_floats"), num("act_output_floats"), num("act_input_floats"),
                                num("act_mem_floats")};
      }
      out_.profile.sizes_by_tp[tp] = std::move(sizes);
    }
  }

  // GPU catalog: built-in, updated by basic_cluster_config.json.
  void read_gpus() {
    out_.gpus = gpu_catalog::builtin();
    if (!fs::exists(base_ / cluster_config)) return;
    const std::string file = (base_ / cluster_config).string();
    const json j = parsed(file);
    for (const auto& [gpu, v] : j.items()) {
      if (!v.is_object()) continue;  // "zone": ...
      gpu_spec spec;
      if (const gpu_spec* known = out_.gpus.find(gpu)) spec = *known;
      spec.name = gpu;
      if (v.contains("gpus_per_node"))
        spec.gpus_per_node = static_cast<int>(number_at(v["gpus_per_node"], file, gpu + ".gpus_per_node"));
      if (v.contains("mem_per_gpu"))
        spec.memory_bytes = static_cast<std::uint64_t>(number_at(v["mem_per_gpu"], file, gpu + ".mem_per_gpu"));
      if (spec.source.empty()) spec.source = file;
      out_.gpus.upsert(std::move(spec));
    }
  }

  // Network fits (heterogeneous first, the homogeneous file fills gaps), inside a node, and
  // egress prices.
  void read_network() {
    for (const char* rel : {het_bandwidths, homo_bandwidths}) {
      if (!fs::exists(base_ / rel)) continue;
      const std::string file = (base_ / rel).string();
      const json j = parsed(file);
      for (const auto& [za, by_ga] : j.items())
        for (const auto& [ga, by_na] : by_ga.items())
          for (const auto& [na, by_zb] : by_na.items())
            for (const auto& [zb, by_gb] : by_zb.items())
              for (const auto& [gb, by_nb] : by_gb.items())
                for (const auto& [nb, fit] : by_nb.items()) {
                  std::string field = za + "." + ga + "." + na + "." + zb + "." + gb + "." + nb;
                  sailor_network::endpoint a{za, ga, to_int(na, file, field)};
                  sailor_network::endpoint b{zb, gb, to_int(nb, file, field)};
                  out_.network.fits.emplace(std::make_pair(a, b), parse_fit(fit, file, field));
                }
    }
    if (fs::exists(base_ / intra_bandwidths)) {
      const std::string file = (base_ / intra_bandwidths).string();
      const json j = parsed(file);
      for (const auto& [gpu, by_n] : j.items())
        for (const auto& [n, fit] : by_n.items())
          out_.network.intra_node[{gpu, to_int(n, file, gpu + "." + n)}] = parse_fit(fit, file, gpu + "." + n);
    }
    if (fs::exists(base_ / egress_costs)) {
      const std::string file = (base_ / egress_costs).string();
      const json j = parsed(file);
      for (const auto& [za, by_zb] : j.items())
        for (const auto& [zb, price] : by_zb.items())
          out_.network.egress_usd_per_gb[{za, zb}] = number_at(price, file, za + "." + zb);
    }
  }

private:
  static json parsed(const std::string& file) {
    auto j = read_json(file);
    if (!j) throw j.error();
    return std::move(*j);
  }
  bool is_model(const std::string& name) const {
    const std::string n = normalized_name(name);
    const std::string& sailor_name = out_.profile.model;
    return n == normalized_name(sailor_name) || n == normalized_name(model_name_);
  }
  // The key of this model in a file keyed by model name ("" when it has none).
  std::string model_key(const json& obj) const {
    for (const auto& [k, v] : obj.items())
      if (is_model(k)) return k;
    return {};
  }

  const fs::path base_;
  const std::string model_name_;
  sailor_data& out_;
};

}  // namespace

result<sailor_data> load_sailor_data(const std::string& root, const std::string& model_name,
                                     const model_shape* shape) {
  sailor_data out;
  out.root = root;
  const fs::path base(root);
  if (!fs::is_directory(base))
    return error::not_found(root, "", "not a directory (expected a Sailor checkout)");
  try {
    sailor_reader reader(root, model_name, out);
    if (!reader.read_training_config()) {
      auto m = known_shape(model_name);
      if (!m && shape) m = *shape;
      if (!m)
        return error::not_found((base / configs_dir / "training_config_<model>.json").string(),
                                "model", "no training config for model '" + model_name +
                                "' and no known shape (known: " + known_sailor_names() + ")");
      out.model = *m;
      out.optimizer = optimizer_kind::adam;
    }
    out.profile.model = out.model.sailor_name.empty() ? model_name : out.model.sailor_name;
    reader.read_profiles();
    reader.read_layer_sizes();
    reader.read_gpus();
    reader.read_network();
  } catch (const sailor::error& e) {
    return e;
  } catch (const json::exception& e) {
    return error::invalid_input(root, "", std::string("unexpected JSON: ") + e.what());
  }
  // A shape given by the caller needs no profile: its times are then analytic (and said so).
  if (out.profile.by_gpu.empty() && out.profile.sizes_by_tp.empty() && !shape)
    return error::not_found((base / profiles_tmp).string(), model_name,
                            "no profile and no llm_info entry for model '" + model_name + "'");
  return out;
}

}  // namespace sailor::config
