// Sailor's plan_config files: reading them into our plan, writing ours in their format.
#include <string>

#include "sailor/config/sailor_format.hpp"
#include "sailor_json.hpp"

namespace sailor::config {

using namespace sailor_json;

result<sailor_plan_file> load_sailor_plan(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.error();
  sailor_plan_file out;
  try {
    auto need = [&](const json& obj, const std::string& key, const std::string& field) -> const json& {
      if (!obj.is_object() || !obj.contains(key))
        throw error::invalid_input(path, field, "missing");
      return obj[key];
    };
    const json& mbs = need(*j, "mbs", "mbs");
    const json& gbs = need(*j, "gbs", "gbs");
    out.value.micro_batch = static_cast<int>(number_at(mbs, path, "mbs"));
    out.value.global_batch = static_cast<int>(number_at(gbs, path, "gbs"));
    if (out.value.micro_batch <= 0) throw error::invalid_input(path, "mbs", "must be positive");
    if (out.value.global_batch <= 0) throw error::invalid_input(path, "gbs", "must be positive");
    const json& pipelines = need(*j, "pipeline_list", "pipeline_list");
    if (!pipelines.is_array() || pipelines.empty())
      throw error::invalid_input(path, "pipeline_list", "expected a non-empty array");
    for (size_t p = 0; p < pipelines.size(); ++p) {
      std::string pf = "pipeline_list[" + std::to_string(p) + "]";
      const json& pl = pipelines[p];
      const json& layers = need(pl, "layers_per_stage", pf + ".layers_per_stage");
      const json& tmp = need(pl, "tmp_per_stage", pf + ".tmp_per_stage");
      if (!layers.is_array() || !tmp.is_array() || layers.size() != tmp.size())
        throw error::invalid_input(path, pf,
                                   "layers_per_stage and tmp_per_stage must be arrays of the same length");
      if (pl.contains("num_stages") && pl["num_stages"].get<size_t>() != layers.size())
        throw error::invalid_input(path, pf + ".num_stages",
                                   "differs from the length of layers_per_stage");
      std::vector<stage_plan> stages;
      for (size_t s = 0; s < layers.size(); ++s) {
        std::string sf = pf + ".layers_per_stage[" + std::to_string(s) + "]";
        if (!layers[s].is_array() || layers[s].empty())
          throw error::invalid_input(path, sf, "expected a non-empty array of layer ids");
        stage_plan st;
        st.first_layer = layers[s][0].get<int>();
        for (size_t i = 0; i < layers[s].size(); ++i)
          if (layers[s][i].get<int>() != st.first_layer + static_cast<int>(i))
            throw error::invalid_input(path, sf, "layer ids must be consecutive");
        st.num_layers = static_cast<int>(layers[s].size());
        std::string tf = pf + ".tmp_per_stage[" + std::to_string(s) + "]";
        if (!tmp[s].is_array() || tmp[s].empty())
          throw error::invalid_input(path, tf, "expected a non-empty array of replicas");
        for (size_t r = 0; r < tmp[s].size(); ++r) {
          std::string rf = tf + "[" + std::to_string(r) + "]";
          const json& rep = tmp[s][r];
          // [[[gpu_type, gpus_per_node, zone], ...], tp]
          if (!rep.is_array() || rep.size() != 2 || !rep[0].is_array() || rep[0].empty() ||
              !rep[0][0].is_array() || rep[0][0].size() < 3)
            throw error::invalid_input(path, rf,
                                       "expected [[[gpu_type, gpus_per_node, zone], ...], tp]");
          replica rp;
          rp.gpu_type = rep[0][0][0].get<std::string>();
          rp.zone = rep[0][0][2].get<std::string>();
          rp.tp = static_cast<int>(number_at(rep[1], path, rf + "[1]"));
          if (rp.tp <= 0) throw error::invalid_input(path, rf + "[1]", "tp must be positive");
          for (size_t k = 1; k < rep[0].size(); ++k)
            if (rep[0][k][0].get<std::string>() != rp.gpu_type || rep[0][k][2].get<std::string>() != rp.zone)
              throw error::invalid_input(path, rf,
                                         "a replica spanning nodes of different GPU types or zones is not supported");
          st.replicas.push_back(std::move(rp));
        }
        if (pl.contains("dp") && pl["dp"].is_array() && s < pl["dp"].size() &&
            pl["dp"][s].get<size_t>() != st.replicas.size())
          throw error::invalid_input(path, pf + ".dp[" + std::to_string(s) + "]",
                                     "differs from the number of replicas in tmp_per_stage");
        stages.push_back(std::move(st));
      }
      if (p == 0) {
        out.value.stages = std::move(stages);
      } else {
        // Several pipelines with the same split are replicas of the same stages.
        if (stages.size() != out.value.stages.size())
          throw error::invalid_input(path, pf, "pipelines with different stage splits are not supported");
        for (size_t s = 0; s < stages.size(); ++s) {
          if (stages[s].first_layer != out.value.stages[s].first_layer ||
              stages[s].num_layers != out.value.stages[s].num_layers)
            throw error::invalid_input(path, pf, "pipelines with different stage splits are not supported");
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
    return error::invalid_input(path, "", std::string("unexpected JSON: ") + e.what());
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

}  // namespace sailor::config
