// Reading and writing profiles in the layout of Sailor's profiles_tmp.json.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sailor/config/profile.hpp"

namespace sailor::config {
namespace {

using json = nlohmann::json;

// A non-negative integer key ("4"), or -1.
int key_to_int(const std::string& key) {
  if (key.empty() || key.size() > 9) return -1;
  for (char c : key)
    if (c < '0' || c > '9') return -1;
  return std::stoi(key);
}

}  // namespace

std::string to_profile_json(const model_profile& profile) {
  json by_gpu = json::object();
  for (const auto& [gpu, gp] : profile.by_gpu) {
    json by_mbs = json::object();
    for (const auto& [mbs, by_tp] : gp.times) {
      json tps = json::object();
      for (const auto& [tp, layers] : by_tp) {
        json ls = json::object();
        for (std::size_t l = 0; l < layers.size(); ++l)
          ls[std::to_string(l)] = {layers[l].forward_s, layers[l].backward_s, layers[l].update_s};
        tps[std::to_string(tp)] = ls;
      }
      by_mbs[std::to_string(mbs)] = tps;
    }
    by_gpu[gpu] = by_mbs;
  }
  json root = json::object();
  root[profile.model] = by_gpu;
  return root.dump(1);
}

result<model_profile> load_profile_json(const std::string& path, const std::string& model) {
  std::ifstream in(path);
  if (!in) {
    return error::not_found(path, "", "cannot open the profile");
  }
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& ex) {
    return error::invalid_input(path, "", std::string("not JSON: ") + ex.what());
  }
  if (!root.is_object() || root.empty()) return error::invalid_input(path, "", "expected {model: {...}}");
  std::string key = model;
  if (key.empty()) {
    if (root.size() != 1)
      return error::invalid_input(path, "", "the file holds several models: name one");
    key = root.begin().key();
  } else if (!root.contains(key)) {
    return error::not_found(path, key, "no profile for model '" + key + "'");
  }
  model_profile out;
  out.model = key;
  const json& by_gpu = root[key];
  if (!by_gpu.is_object()) return error::invalid_input(path, key, "expected {gpu_type: {...}}");
  for (const auto& [gpu, by_mbs] : by_gpu.items()) {
    const std::string gf = key + "." + gpu;
    if (!by_mbs.is_object()) return error::invalid_input(path, gf, "expected {micro_batch: {...}}");
    auto& gp = out.by_gpu[gpu];
    gp.gpu_type = gpu;
    for (const auto& [mbs_key, by_tp] : by_mbs.items()) {
      const std::string mf = gf + "." + mbs_key;
      const int mbs = key_to_int(mbs_key);
      if (mbs <= 0) return error::invalid_input(path, mf, "micro-batch keys are positive integers");
      if (!by_tp.is_object()) return error::invalid_input(path, mf, "expected {tp: {...}}");
      for (const auto& [tp_key, layers] : by_tp.items()) {
        const std::string tf = mf + "." + tp_key;
        const int tp = key_to_int(tp_key);
        if (tp <= 0) return error::invalid_input(path, tf, "TP keys are positive integers");
        if (!layers.is_object() || layers.empty())
          return error::invalid_input(path, tf, "expected {layer: [fwd_s, bwd_s, update_s]}");
        std::vector<layer_time> times(layers.size());
        for (const auto& [layer_key, v] : layers.items()) {
          const std::string lf = tf + "." + layer_key;
          const int layer = key_to_int(layer_key);
          if (layer < 0 || layer >= static_cast<int>(layers.size()))
            return error::invalid_input(path, lf, "layer ids must be 0.." + std::to_string(layers.size() - 1));
          if (!v.is_array() || v.size() < 3 || !v[0].is_number() || !v[1].is_number() ||
              !v[2].is_number())
            return error::invalid_input(path, lf, "expected [fwd_s, bwd_s, update_s]");
          times[layer] = {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
          if (times[layer].forward_s < 0 || times[layer].backward_s < 0 || times[layer].update_s < 0)
            return error::invalid_input(path, lf, "times must not be negative");
        }
        gp.times[mbs][tp] = std::move(times);
      }
    }
  }
  return out;
}

}  // namespace sailor::config
