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

namespace sailor::config {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

sailor::error make_error(error_kind kind, std::string file, std::string field, std::string message) {
  sailor::error e;
  e.kind = kind;
  e.file = std::move(file);
  e.field = std::move(field);
  e.message = std::move(message);
  return e;
}

result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(error_kind::not_found, path, "", "cannot open file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    return make_error(error_kind::invalid_input, path, "", std::string("not valid JSON: ") + e.what());
  }
}

// Lower case, letters and digits only: "OPT-350" and "opt_350" compare equal.
std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
  return out;
}

int to_int(const std::string& key, const std::string& file, const std::string& field) {
  try {
    size_t used = 0;
    int v = std::stoi(key, &used);
    if (used == key.size()) return v;
  } catch (...) {
  }
  throw make_error(error_kind::invalid_input, file, field, "expected an integer key, got '" + key + "'");
}

double number_at(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_number())
    throw make_error(error_kind::invalid_input, file, field, "expected a number");
  return j.get<double>();
}

sailor_bandwidth_fit parse_fit(const json& j, const std::string& file, const std::string& field) {
  // [[a, b, c], max_bytes_per_s]
  if (!j.is_array() || j.size() != 2 || !j[0].is_array() || j[0].size() != 3)
    throw make_error(error_kind::invalid_input, file, field, "expected [[a, b, c], max_bw]");
  sailor_bandwidth_fit f;
  f.a = number_at(j[0][0], file, field + "[0][0]");
  f.b = number_at(j[0][1], file, field + "[0][1]");
  f.c = number_at(j[0][2], file, field + "[0][2]");
  f.max_gbytes_per_s = number_at(j[1], file, field + "[1]") / 1e9;
  return f;
}

// Known shapes of the models Sailor profiles, for those without a training config.
std::optional<model_shape> known_shape(const std::string& name) {
  std::string n = normalized(name);
  model_shape m;
  m.sailor_name = name;
  m.precision = dtype::fp16;
  if (n == "opt350") {
    m.name = "OPT-350M"; m.num_layers = 24; m.hidden = 1024; m.heads = 16; m.sequence = 2048;
    m.vocabulary = 50272;
  } else if (n == "opt30") {
    m.name = "OPT-30B"; m.num_layers = 48; m.hidden = 7168; m.heads = 56; m.sequence = 2048;
    m.vocabulary = 50272;
  } else if (n == "gptneo27") {
    m.name = "GPT-Neo-2.7B"; m.num_layers = 32; m.hidden = 2560; m.heads = 32; m.sequence = 2048;
    m.vocabulary = 50257; m.tied_embeddings = true;
  } else if (n == "llama38") {
    // Llama-3-8B. Sailor's profile of it has 35 layers (embedding, 32 blocks, final norm,
    // head); we number 34 (the final norm belongs to the head).
    m.name = "Llama-3-8B"; m.num_layers = 32; m.hidden = 4096; m.heads = 32; m.kv_heads = 8;
    m.ffn_hidden = 14336; m.gated_mlp = true; m.sequence = 8192; m.vocabulary = 128256;
    m.learned_positions = false; m.precision = dtype::bf16;
  } else {
    return std::nullopt;
  }
  return m;
}

optimizer_kind parse_optimizer(const std::string& s) {
  std::string n = normalized(s);
  if (n == "sgd") return optimizer_kind::sgd;
  if (n == "adamw") return optimizer_kind::adamw;
  return optimizer_kind::adam;
}

// model -> gpu -> mbs -> tp -> layer -> [fwd, bwd, update]; fills only what is missing.
void merge_profile(gpu_profile& out, const json& by_mbs, const std::string& file,
                   const std::string& field) {
  if (!by_mbs.is_object()) throw make_error(error_kind::invalid_input, file, field, "expected an object");
  for (const auto& [mbs_key, by_tp] : by_mbs.items()) {
    int mbs = to_int(mbs_key, file, field + "." + mbs_key);
    if (!by_tp.is_object())
      throw make_error(error_kind::invalid_input, file, field + "." + mbs_key, "expected an object");
    for (const auto& [tp_key, layers] : by_tp.items()) {
      int tp = to_int(tp_key, file, field + "." + mbs_key + "." + tp_key);
      auto& slot = out.times[mbs][tp];
      if (!slot.empty()) continue;
      std::string f = field + "." + mbs_key + "." + tp_key;
      if (!layers.is_object()) throw make_error(error_kind::invalid_input, file, f, "expected an object");
      std::vector<layer_time> times(layers.size());
      for (const auto& [layer_key, v] : layers.items()) {
        int layer = to_int(layer_key, file, f + "." + layer_key);
        if (layer < 0 || layer >= static_cast<int>(layers.size()))
          throw make_error(error_kind::invalid_input, file, f + "." + layer_key,
                           "layer ids must be 0.." + std::to_string(layers.size() - 1));
        if (!v.is_array() || v.size() < 3)
          throw make_error(error_kind::invalid_input, file, f + "." + layer_key,
                           "expected [fwd_s, bwd_s, update_s]");
        times[layer] = {number_at(v[0], file, f + "." + layer_key + "[0]"),
                        number_at(v[1], file, f + "." + layer_key + "[1]"),
                        number_at(v[2], file, f + "." + layer_key + "[2]")};
      }
      slot = std::move(times);
    }
  }
}

std::string region_of(const std::string& zone) {
  auto dash = zone.rfind('-');
  return dash == std::string::npos ? zone : zone.substr(0, dash);
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

result<sailor_data> load_sailor_data(const std::string& root, const std::string& model_name,
                                     const model_shape* shape) {
  sailor_data out;
  out.root = root;
  const fs::path base(root);
  if (!fs::is_directory(base))
    return make_error(error_kind::not_found, root, "", "not a directory (expected a Sailor checkout)");
  try {
    // Model shape: the training config whose "model" (or file name) matches.
    bool found_config = false;
    const fs::path cfg_dir = base / configs_dir;
    if (fs::is_directory(cfg_dir)) {
      for (const auto& entry : fs::directory_iterator(cfg_dir)) {
        std::string fname = entry.path().filename().string();
        if (fname.rfind("training_config_", 0) != 0 || entry.path().extension() != ".json") continue;
        auto j = read_json(entry.path().string());
        if (!j) return j.error();
        std::string stem = fname.substr(16, fname.size() - 16 - 5);
        std::string declared = j->value("model", std::string());
        if (normalized(declared) != normalized(model_name) && normalized(stem) != normalized(model_name))
          continue;
        const std::string file = entry.path().string();
        auto get_int = [&](const char* field) {
          if (!j->contains(field) || !(*j)[field].is_number_integer())
            throw make_error(error_kind::invalid_input, file, field, "expected an integer");
          return (*j)[field].get<int>();
        };
        model_shape m = known_shape(model_name).value_or(model_shape{});
        if (m.name.empty()) m.name = declared.empty() ? model_name : declared;
        m.sailor_name = declared.empty() ? model_name : declared;
        m.hidden = get_int("hidden_size");
        m.sequence = get_int("sequence_length");
        m.num_layers = get_int("num_layers");
        m.heads = get_int("heads");
        // GPT-Neo's config lists Llama's vocabulary; the known shape (from llm_info's
        // embedding size) wins where we have one.
        if (m.vocabulary == 0) m.vocabulary = get_int("vocab_size");
        if (j->contains("num_all_layers") && get_int("num_all_layers") != m.num_layers + 2)
          throw make_error(error_kind::invalid_input, file, "num_all_layers",
                           "expected num_layers + 2 (embedding, blocks, head)");
        out.model = m;
        out.default_global_batch = j->value("global_batch_size", 0);
        out.optimizer = parse_optimizer(j->value("optimizer", std::string("Adam")));
        found_config = true;
        break;
      }
    }
    if (!found_config) {
      auto m = known_shape(model_name);
      if (!m && shape) m = *shape;
      if (!m)
        return make_error(error_kind::not_found, (cfg_dir / ("training_config_<model>.json")).string(),
                          "model", "no training config for model '" + model_name +
                          "' and no known shape (known: OPT-350, OPT-30, GPT-Neo-2.7, LLAMA-3-8)");
      out.model = *m;
      out.optimizer = optimizer_kind::adam;
    }
    std::string sailor_name = out.model.sailor_name.empty() ? model_name : out.model.sailor_name;
    out.profile.model = sailor_name;

    // Time profiles: profiles_tmp.json first, the planner's per-model copies fill gaps.
    auto match_key = [&](const json& obj) -> std::string {
      for (const auto& [k, v] : obj.items())
        if (normalized(k) == normalized(sailor_name) || normalized(k) == normalized(model_name)) return k;
      return {};
    };
    if (fs::exists(base / profiles_tmp)) {
      const std::string file = (base / profiles_tmp).string();
      auto j = read_json(file);
      if (!j) return j.error();
      std::string key = match_key(*j);
      if (!key.empty()) {
        for (const auto& [gpu, by_mbs] : (*j)[key].items()) {
          auto& gp = out.profile.by_gpu[gpu];
          gp.gpu_type = gpu;
          merge_profile(gp, by_mbs, file, key + "." + gpu);
        }
      }
    }
    const fs::path per_model = base / planner_profiles;
    if (fs::is_directory(per_model)) {
      for (const auto& mdir : fs::directory_iterator(per_model)) {
        if (!mdir.is_directory()) continue;
        std::string mname = mdir.path().filename().string();
        if (normalized(mname) != normalized(sailor_name) && normalized(mname) != normalized(model_name)) continue;
        for (const auto& gdir : fs::directory_iterator(mdir.path())) {
          fs::path pfile = gdir.path() / "profile.json";
          if (!fs::exists(pfile)) continue;
          auto j = read_json(pfile.string());
          if (!j) return j.error();
          std::string gpu = gdir.path().filename().string();
          auto& gp = out.profile.by_gpu[gpu];
          gp.gpu_type = gpu;
          merge_profile(gp, *j, pfile.string(), "");
        }
      }
    }

    // Per-layer sizes.
    if (fs::exists(base / llm_info)) {
      const std::string file = (base / llm_info).string();
      auto j = read_json(file);
      if (!j) return j.error();
      std::string key = match_key(*j);
      if (!key.empty()) {
        for (const auto& [tp_key, layers] : (*j)[key].items()) {
          int tp = to_int(tp_key, file, key + "." + tp_key);
          std::vector<layer_size> sizes(layers.size());
          for (const auto& [layer_key, v] : layers.items()) {
            std::string f = key + "." + tp_key + "." + layer_key;
            int layer = to_int(layer_key, file, f);
            if (layer < 0 || layer >= static_cast<int>(sizes.size()))
              throw make_error(error_kind::invalid_input, file, f, "layer id out of range");
            auto num = [&](const char* name) {
              if (!v.contains(name)) throw make_error(error_kind::invalid_input, file, f + "." + name, "missing");
              return number_at(v[name], file, f + "." + name);
            };
            sizes[layer] = {num("params_floats"), num("act_output_floats"), num("act_input_floats"),
                            num("act_mem_floats")};
          }
          out.profile.sizes_by_tp[tp] = std::move(sizes);
        }
      }
    }

    // GPU catalog: built-in, updated by basic_cluster_config.json.
    out.gpus = gpu_catalog::builtin();
    if (fs::exists(base / cluster_config)) {
      const std::string file = (base / cluster_config).string();
      auto j = read_json(file);
      if (!j) return j.error();
      for (const auto& [gpu, v] : j->items()) {
        if (!v.is_object()) continue;  // "zone": ...
        gpu_spec spec;
        if (const gpu_spec* known = out.gpus.find(gpu)) spec = *known;
        spec.name = gpu;
        if (v.contains("gpus_per_node")) spec.gpus_per_node = static_cast<int>(number_at(v["gpus_per_node"], file, gpu + ".gpus_per_node"));
        if (v.contains("mem_per_gpu")) spec.memory_bytes = static_cast<std::uint64_t>(number_at(v["mem_per_gpu"], file, gpu + ".mem_per_gpu"));
        if (spec.source.empty()) spec.source = file;
        out.gpus.upsert(std::move(spec));
      }
    }

    // Network fits: heterogeneous first, the homogeneous file fills gaps.
    for (const char* rel : {het_bandwidths, homo_bandwidths}) {
      if (!fs::exists(base / rel)) continue;
      const std::string file = (base / rel).string();
      auto j = read_json(file);
      if (!j) return j.error();
      for (const auto& [za, by_ga] : j->items())
        for (const auto& [ga, by_na] : by_ga.items())
          for (const auto& [na, by_zb] : by_na.items())
            for (const auto& [zb, by_gb] : by_zb.items())
              for (const auto& [gb, by_nb] : by_gb.items())
                for (const auto& [nb, fit] : by_nb.items()) {
                  std::string field = za + "." + ga + "." + na + "." + zb + "." + gb + "." + nb;
                  sailor_network::endpoint a{za, ga, to_int(na, file, field)};
                  sailor_network::endpoint b{zb, gb, to_int(nb, file, field)};
                  out.network.fits.emplace(std::make_pair(a, b), parse_fit(fit, file, field));
                }
    }
    if (fs::exists(base / intra_bandwidths)) {
      const std::string file = (base / intra_bandwidths).string();
      auto j = read_json(file);
      if (!j) return j.error();
      for (const auto& [gpu, by_n] : j->items())
        for (const auto& [n, fit] : by_n.items())
          out.network.intra_node[{gpu, to_int(n, file, gpu + "." + n)}] = parse_fit(fit, file, gpu + "." + n);
    }
    if (fs::exists(base / egress_costs)) {
      const std::string file = (base / egress_costs).string();
      auto j = read_json(file);
      if (!j) return j.error();
      for (const auto& [za, by_zb] : j->items())
        for (const auto& [zb, price] : by_zb.items())
          out.network.egress_usd_per_gb[{za, zb}] = number_at(price, file, za + "." + zb);
    }
  } catch (const sailor::error& e) {
    return e;
  } catch (const json::exception& e) {
    return make_error(error_kind::invalid_input, root, "", std::string("unexpected JSON: ") + e.what());
  }
  // A shape given by the caller needs no profile: its times are then analytic (and said so).
  if (out.profile.by_gpu.empty() && out.profile.sizes_by_tp.empty() && !shape)
    return make_error(error_kind::not_found, (base / profiles_tmp).string(), model_name,
                      "no profile and no llm_info entry for model '" + model_name + "'");
  return out;
}

result<sailor_plan_file> load_sailor_plan(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.error();
  sailor_plan_file out;
  try {
    auto need = [&](const json& obj, const std::string& key, const std::string& field) -> const json& {
      if (!obj.is_object() || !obj.contains(key))
        throw make_error(error_kind::invalid_input, path, field, "missing");
      return obj[key];
    };
    const json& mbs = need(*j, "mbs", "mbs");
    const json& gbs = need(*j, "gbs", "gbs");
    out.value.micro_batch = static_cast<int>(number_at(mbs, path, "mbs"));
    out.value.global_batch = static_cast<int>(number_at(gbs, path, "gbs"));
    if (out.value.micro_batch <= 0) throw make_error(error_kind::invalid_input, path, "mbs", "must be positive");
    if (out.value.global_batch <= 0) throw make_error(error_kind::invalid_input, path, "gbs", "must be positive");
    const json& pipelines = need(*j, "pipeline_list", "pipeline_list");
    if (!pipelines.is_array() || pipelines.empty())
      throw make_error(error_kind::invalid_input, path, "pipeline_list", "expected a non-empty array");
    for (size_t p = 0; p < pipelines.size(); ++p) {
      std::string pf = "pipeline_list[" + std::to_string(p) + "]";
      const json& pl = pipelines[p];
      const json& layers = need(pl, "layers_per_stage", pf + ".layers_per_stage");
      const json& tmp = need(pl, "tmp_per_stage", pf + ".tmp_per_stage");
      if (!layers.is_array() || !tmp.is_array() || layers.size() != tmp.size())
        throw make_error(error_kind::invalid_input, path, pf,
                         "layers_per_stage and tmp_per_stage must be arrays of the same length");
      if (pl.contains("num_stages") && pl["num_stages"].get<size_t>() != layers.size())
        throw make_error(error_kind::invalid_input, path, pf + ".num_stages",
                         "differs from the length of layers_per_stage");
      std::vector<stage_plan> stages;
      for (size_t s = 0; s < layers.size(); ++s) {
        std::string sf = pf + ".layers_per_stage[" + std::to_string(s) + "]";
        if (!layers[s].is_array() || layers[s].empty())
          throw make_error(error_kind::invalid_input, path, sf, "expected a non-empty array of layer ids");
        stage_plan st;
        st.first_layer = layers[s][0].get<int>();
        for (size_t i = 0; i < layers[s].size(); ++i)
          if (layers[s][i].get<int>() != st.first_layer + static_cast<int>(i))
            throw make_error(error_kind::invalid_input, path, sf, "layer ids must be consecutive");
        st.num_layers = static_cast<int>(layers[s].size());
        std::string tf = pf + ".tmp_per_stage[" + std::to_string(s) + "]";
        if (!tmp[s].is_array() || tmp[s].empty())
          throw make_error(error_kind::invalid_input, path, tf, "expected a non-empty array of replicas");
        for (size_t r = 0; r < tmp[s].size(); ++r) {
          std::string rf = tf + "[" + std::to_string(r) + "]";
          const json& rep = tmp[s][r];
          // [[[gpu_type, gpus_per_node, zone], ...], tp]
          if (!rep.is_array() || rep.size() != 2 || !rep[0].is_array() || rep[0].empty() ||
              !rep[0][0].is_array() || rep[0][0].size() < 3)
            throw make_error(error_kind::invalid_input, path, rf,
                             "expected [[[gpu_type, gpus_per_node, zone], ...], tp]");
          replica rp;
          rp.gpu_type = rep[0][0][0].get<std::string>();
          rp.zone = rep[0][0][2].get<std::string>();
          rp.tp = static_cast<int>(number_at(rep[1], path, rf + "[1]"));
          if (rp.tp <= 0) throw make_error(error_kind::invalid_input, path, rf + "[1]", "tp must be positive");
          for (size_t k = 1; k < rep[0].size(); ++k)
            if (rep[0][k][0].get<std::string>() != rp.gpu_type || rep[0][k][2].get<std::string>() != rp.zone)
              throw make_error(error_kind::invalid_input, path, rf,
                               "a replica spanning nodes of different GPU types or zones is not supported");
          st.replicas.push_back(std::move(rp));
        }
        if (pl.contains("dp") && pl["dp"].is_array() && s < pl["dp"].size() &&
            pl["dp"][s].get<size_t>() != st.replicas.size())
          throw make_error(error_kind::invalid_input, path, pf + ".dp[" + std::to_string(s) + "]",
                           "differs from the number of replicas in tmp_per_stage");
        stages.push_back(std::move(st));
      }
      if (p == 0) {
        out.value.stages = std::move(stages);
      } else {
        // Several pipelines with the same split are replicas of the same stages.
        if (stages.size() != out.value.stages.size())
          throw make_error(error_kind::invalid_input, path, pf, "pipelines with different stage splits are not supported");
        for (size_t s = 0; s < stages.size(); ++s) {
          if (stages[s].first_layer != out.value.stages[s].first_layer ||
              stages[s].num_layers != out.value.stages[s].num_layers)
            throw make_error(error_kind::invalid_input, path, pf, "pipelines with different stage splits are not supported");
          for (auto& r : stages[s].replicas) out.value.stages[s].replicas.push_back(std::move(r));
        }
      }
    }
    if (j->contains("real") && (*j)["real"].is_number()) out.measured_iteration_s = (*j)["real"].get<double>();
    if (j->contains("max_mem") && (*j)["max_mem"].is_number())
      out.measured_peak_memory_bytes = (*j)["max_mem"].get<double>();
  } catch (const sailor::error& e) {
    return e;
  } catch (const json::exception& e) {
    return make_error(error_kind::invalid_input, path, "", std::string("unexpected JSON: ") + e.what());
  }
  return out;
}

std::string to_sailor_plan_json(const plan& p) {
  json pl;
  pl["num_stages"] = p.stages.size();
  json layers = json::array(), tmp = json::array(), dp = json::array();
  for (const auto& s : p.stages) {
    json ids = json::array();
    for (int l = s.first_layer; l < s.end_layer(); ++l) ids.push_back(l);
    layers.push_back(ids);
    json reps = json::array();
    for (const auto& r : s.replicas)
      reps.push_back(json::array({json::array({json::array({r.gpu_type, r.tp, r.zone})}), r.tp}));
    tmp.push_back(reps);
    dp.push_back(s.replicas.size());
  }
  pl["layers_per_stage"] = layers;
  pl["tmp_per_stage"] = tmp;
  pl["dp"] = dp;
  json out;
  std::string zone;
  if (!p.stages.empty() && !p.stages[0].replicas.empty()) zone = p.stages[0].replicas[0].zone;
  out["zone"] = zone;
  out["pipeline_list"] = json::array({pl});
  out["mbs"] = p.micro_batch;
  out["gbs"] = p.global_batch;
  if (p.estimate) {
    out["estimated_iteration_s"] = p.estimate->iteration_time_s;
    out["estimated_max_mem"] = p.estimate->peak_memory_bytes;
  }
  return out.dump(2);
}

result<std::map<std::string, std::map<std::string, int>>> load_sailor_quotas(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.error();
  std::map<std::string, std::map<std::string, int>> out;
  if (!j->is_object()) return make_error(error_kind::invalid_input, path, "", "expected {gpu_type: {zone: count}}");
  for (const auto& [gpu, zones] : j->items()) {
    if (!zones.is_object()) return make_error(error_kind::invalid_input, path, gpu, "expected {zone: count}");
    for (const auto& [zone, count] : zones.items()) {
      if (!count.is_number_integer() || count.get<int>() < 0)
        return make_error(error_kind::invalid_input, path, gpu + "." + zone, "expected a non-negative integer");
      out[gpu][zone] = count.get<int>();
    }
  }
  return out;
}

status check_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                    const sailor_data& data, const std::string& file) {
  std::set<std::string> zones;
  for (const auto& [ends, fit] : data.network.fits) {
    zones.insert(ends.first.zone);
    zones.insert(ends.second.zone);
  }
  for (const auto& [ends, price] : data.network.egress_usd_per_gb) {
    zones.insert(ends.first);
    zones.insert(ends.second);
  }
  auto listed = [](const auto& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  for (const auto& [gpu, counts] : quotas) {
    if (!data.gpus.find(gpu)) {
      std::vector<std::string> known;
      for (const auto& g : data.gpus.gpus()) known.push_back(g.name);
      return make_error(error_kind::invalid_input, file, gpu,
                        "unknown GPU type '" + gpu + "' (known: " + listed(known) + ")");
    }
    for (const auto& [zone_name, count] : counts)
      if (!zones.empty() && !zones.count(zone_name))
        return make_error(error_kind::invalid_input, file, gpu + "." + zone_name,
                          "unknown zone '" + zone_name + "': Sailor's data in " + data.root +
                              " has no bandwidth or price for it (known: " + listed(zones) + ")");
  }
  return std::nullopt;
}

cluster cluster_from_quotas(const std::map<std::string, std::map<std::string, int>>& quotas,
                            const sailor_data& data) {
  cluster c;
  c.name = "sailor-quotas";
  c.gpus = data.gpus;
  for (const auto& [gpu, zones] : quotas) {
    for (const auto& [zone_name, count] : zones) {
      auto* z = const_cast<zone*>(c.find_zone(zone_name));
      if (!z) {
        c.zones.push_back(zone{zone_name, region_of(zone_name), {}});
        z = &c.zones.back();
      }
      z->gpus[gpu] += count;
    }
  }
  for (const auto& z : c.zones) {
    auto it = std::find_if(c.regions.begin(), c.regions.end(), [&](const region& r) { return r.name == z.region; });
    if (it == c.regions.end()) c.regions.push_back(region{z.region, {z.name}});
    else it->zones.push_back(z.name);
  }
  // One link per zone pair (and per zone): the Sailor fit of the first GPU type both zones
  // hold, one GPU per node, sampled as a curve; the fit's small-message floor stands in for
  // latency. Egress from communication_cost.json.
  for (size_t i = 0; i < c.zones.size(); ++i) {
    for (size_t k = i; k < c.zones.size(); ++k) {
      const zone& a = c.zones[i];
      const zone& b = c.zones[k];
      zone_link l = c.link(a.name, b.name);
      l.latency_s = 0;
      const sailor_bandwidth_fit* fit = nullptr;
      for (const auto& [ga, na] : a.gpus) {
        for (const auto& [gb, nb] : b.gpus) {
          fit = data.network.find({a.name, ga, 1}, {b.name, gb, 1});
          if (fit) break;
        }
        if (fit) break;
      }
      if (fit) {
        bandwidth_curve curve;
        for (double bytes = 1e3; bytes <= 2e10; bytes *= 2) curve.points.emplace_back(bytes, fit->gbytes_per_s(bytes));
        l.bandwidth_gbytes_per_s = curve.points.back().second;
        l.curve = std::move(curve);
      }
      auto price = data.network.egress_usd_per_gb.find({a.name, b.name});
      if (price != data.network.egress_usd_per_gb.end()) l.egress_usd_per_gb = price->second;
      if (fit || price != data.network.egress_usd_per_gb.end()) c.links.push_back(l);
    }
  }
  return c;
}

}  // namespace sailor::config
