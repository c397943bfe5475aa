// Plans: loading (checked against the model when given), validation against a model and a
// cluster, writing as YAML, and the inputs a plan was made for (made_for).
#include "sailor/config/load.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "sailor/config/text.hpp"
#include "yaml_reader.hpp"

namespace sailor::config {

using detail::guarded;
using detail::index_path;
using detail::join_path;
using detail::load_failure;
using detail::yaml_reader;

namespace {

local_sgd_plan read_local_sgd(const yaml_reader& r, const YAML::Node& l) {
  r.expect_map(l, "local_sgd");
  r.only_keys(l, "local_sgd", {"inner_steps", "regions"});
  local_sgd_plan out;
  out.inner_steps = static_cast<int>(r.req_count(l, "local_sgd", "inner_steps", true));
  YAML::Node regions = r.required(l, "local_sgd", "regions");
  r.expect_sequence(regions, "local_sgd.regions");
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const std::string path = index_path("local_sgd.regions", i);
    r.expect_map(regions[i], path);
    r.only_keys(regions[i], path, {"name", "zones"});
    local_sgd_plan::region region;
    region.name = r.req_string(regions[i], path, "name");
    YAML::Node zones = r.required(regions[i], path, "zones");
    r.expect_sequence(zones, join_path(path, "zones"));
    for (std::size_t k = 0; k < zones.size(); ++k)
      region.zones.push_back(r.get_string(zones[k], index_path(join_path(path, "zones"), k)));
    out.regions.push_back(std::move(region));
  }
  return out;
}

result<plan> load_plan_impl(const std::string& path, const model_shape* model) {
  return guarded<plan>([&] {
    yaml_reader r(path);
    YAML::Node root = r.parse();
    r.only_keys(root, "", {"micro_batch", "global_batch", "stages", "estimate", "made_for", "local_sgd"});
    plan p;
    p.micro_batch = static_cast<int>(r.req_count(root, "", "micro_batch", true));
    p.global_batch = static_cast<int>(r.req_count(root, "", "global_batch", true));
    YAML::Node stages = r.required(root, "", "stages");
    r.expect_sequence(stages, "stages");
    std::vector<YAML::Node> stage_nodes;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      std::string spath = index_path("stages", i);
      const YAML::Node& sn = stages[i];
      r.expect_map(sn, spath);
      r.only_keys(sn, spath, {"layers", "recompute", "replicas"});
      stage_plan s;
      YAML::Node layers = r.required(sn, spath, "layers");
      std::string lpath = join_path(spath, "layers");
      r.expect_map(layers, lpath);
      r.only_keys(layers, lpath, {"first", "count"});
      s.first_layer = static_cast<int>(r.req_count(layers, lpath, "first", false));
      s.num_layers = static_cast<int>(r.req_count(layers, lpath, "count", true));
      s.recompute = r.opt_bool(sn, spath, "recompute").value_or(false);
      YAML::Node reps = r.required(sn, spath, "replicas");
      std::string rpath = join_path(spath, "replicas");
      r.expect_sequence(reps, rpath);
      for (std::size_t k = 0; k < reps.size(); ++k) {
        std::string ppath = index_path(rpath, k);
        const YAML::Node& rn = reps[k];
        r.expect_map(rn, ppath);
        r.only_keys(rn, ppath, {"gpu", "zone", "tp", "nodes", "devices"});
        replica rep;
        rep.gpu_type = r.req_string(rn, ppath, "gpu");
        rep.zone = r.req_string(rn, ppath, "zone");
        rep.tp = static_cast<int>(r.req_count(rn, ppath, "tp", true));
        if (YAML::Node nodes = rn["nodes"]; nodes.IsDefined() && !nodes.IsNull()) {
          r.expect_sequence(nodes, join_path(ppath, "nodes"));
          for (std::size_t q = 0; q < nodes.size(); ++q)
            rep.nodes.push_back(r.get_string(nodes[q], index_path(join_path(ppath, "nodes"), q)));
        }
        if (YAML::Node devs = rn["devices"]; devs.IsDefined() && !devs.IsNull()) {
          r.expect_sequence(devs, join_path(ppath, "devices"));
          for (std::size_t q = 0; q < devs.size(); ++q) {
            long long d = r.get_int(devs[q], index_path(join_path(ppath, "devices"), q));
            if (d < 0) r.fail(devs[q], index_path(join_path(ppath, "devices"), q), "expected a non-negative device index");
            rep.devices.push_back(static_cast<int>(d));
          }
        }
        s.replicas.push_back(std::move(rep));
      }
      p.stages.push_back(std::move(s));
      stage_nodes.push_back(sn);
    }
    if (YAML::Node e = root["estimate"]; e.IsDefined() && !e.IsNull()) {
      r.expect_map(e, "estimate");
      plan_estimate est;
      est.iteration_time_s = r.opt_double(e, "estimate", "iteration_time_s").value_or(0);
      est.throughput_iters_per_s = r.opt_double(e, "estimate", "throughput_iters_per_s").value_or(0);
      est.cost_per_iteration_usd = r.opt_double(e, "estimate", "cost_per_iteration_usd").value_or(0);
      est.cost_per_hour_usd = r.opt_double(e, "estimate", "cost_per_hour_usd").value_or(0);
      est.peak_memory_bytes = r.opt_double(e, "estimate", "peak_memory_bytes").value_or(0);
      p.estimate = est;
    }
    if (YAML::Node l = root["local_sgd"]; l.IsDefined() && !l.IsNull()) p.local_sgd = read_local_sgd(r, l);
    status bad = model ? validate_plan(p, *model, nullptr, path) : validate_plan(p, model_shape{}, nullptr, path);
    if (bad) {
      // Point at the stage the error is about, when it names one.
      sailor::error err = *bad;
      if (err.field.rfind("stages[", 0) == 0) {
        std::size_t idx = std::stoul(err.field.substr(7));
        if (idx < stage_nodes.size()) err.line = stage_nodes[idx].Mark().line + 1;
      } else if (err.line == 0) {
        err.line = root.Mark().line + 1;
      }
      throw load_failure{err};
    }
    return p;
  });
}

}  // namespace

result<plan> load_plan(const std::string& path, const model_shape& model) {
  return load_plan_impl(path, &model);
}

result<plan> load_plan(const std::string& path) { return load_plan_impl(path, nullptr); }

namespace {

// DiLoCo's regions: two or more, each zone in one, every replica's zone in one, and every
// micro-batch's path (replica m % replicas of each stage, train/schedule.hpp) inside one.
status validate_local_sgd(const plan& p, const std::string& file) {
  const auto& l = *p.local_sgd;
  if (l.inner_steps < 1)
    return error::invalid_input(file, "local_sgd.inner_steps", "expected a positive number of iterations");
  if (l.regions.size() < 2)
    return error::invalid_input(file, "local_sgd.regions",
                                "DiLoCo joins two or more regions; this plan has " + std::to_string(l.regions.size()) +
                                    " (a plan inside one region synchronises every iteration)");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < l.regions.size(); ++i) {
    const std::string path = index_path("local_sgd.regions", i);
    if (l.regions[i].zones.empty()) return error::invalid_input(file, path + ".zones", "a region needs a zone");
    for (const auto& z : l.regions[i].zones)
      if (!seen.insert(z).second)
        return error::invalid_input(file, path + ".zones", "zone '" + z + "' is in two regions");
  }
  std::vector<int> used(l.regions.size(), 0);
  for (std::size_t i = 0; i < p.stages.size(); ++i)
    for (std::size_t k = 0; k < p.stages[i].replicas.size(); ++k)
      if (l.region_of(p.stages[i].replicas[k].zone) < 0)
        return error::invalid_input(file, index_path(index_path("stages", i) + ".replicas", k) + ".zone",
                                    "zone '" + p.stages[i].replicas[k].zone + "' is in no region of local_sgd");
  const int micro_batches = p.global_batch / p.micro_batch;
  for (int m = 0; m < micro_batches; ++m) {
    int region = -1;
    for (std::size_t i = 0; i < p.stages.size(); ++i) {
      const auto& reps = p.stages[i].replicas;
      const int here = l.region_of(reps[m % reps.size()].zone);
      if (region >= 0 && here != region)
        return error::invalid_input(file, "local_sgd.regions",
                                    "micro-batch " + std::to_string(m) + " passes from region '" + l.regions[region].name +
                                        "' to '" + l.regions[here].name + "' at stage " + std::to_string(i) +
                                        ": under DiLoCo every pipeline stays inside its region");
      region = here;
    }
    ++used[region];
  }
  for (std::size_t i = 0; i < used.size(); ++i)
    if (used[i] == 0)
      return error::invalid_input(file, index_path("local_sgd.regions", i),
                                  "region '" + l.regions[i].name + "' trains no micro-batch of the plan");
  return {};
}

}  // namespace

status validate_plan(const plan& p, const model_shape& model, const cluster* c, const std::string& file) {
  if (p.micro_batch <= 0) return error::invalid_input(file, "micro_batch", "expected a positive integer");
  if (p.global_batch <= 0) return error::invalid_input(file, "global_batch", "expected a positive integer");
  if (p.global_batch % p.micro_batch != 0)
    return error::invalid_input(file, "global_batch", "global_batch " + std::to_string(p.global_batch) +
                                " is not a multiple of micro_batch " + std::to_string(p.micro_batch));
  if (p.stages.empty()) return error::invalid_input(file, "stages", "expected at least one stage");
  const bool check_model = model.num_layers > 0;
  int expected_first = 0;
  std::map<std::pair<std::string, std::string>, int> placed;  // (zone, GPU type) -> GPUs
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    const auto& s = p.stages[i];
    std::string spath = index_path("stages", i);
    if (s.num_layers <= 0) return error::invalid_input(file, spath + ".layers.count", "expected a positive layer count");
    if (s.first_layer < expected_first) {
      return error::invalid_input(file, spath + ".layers", "layers " + std::to_string(s.first_layer) + ".." +
                                  std::to_string(s.end_layer() - 1) + " overlap the previous stage, which ends at layer " +
                                  std::to_string(expected_first - 1));
    }
    if (s.first_layer > expected_first) {
      return error::invalid_input(file, spath + ".layers", "gap: layers " + std::to_string(expected_first) + ".." +
                                  std::to_string(s.first_layer - 1) + " belong to no stage");
    }
    expected_first = s.end_layer();
    if (s.replicas.empty()) return error::invalid_input(file, spath + ".replicas", "expected at least one replica");
    // The micro-batches of an iteration are dealt to the replicas in turn (train/schedule.cpp):
    // they need not divide evenly, but a replica without one would have no work.
    if (static_cast<int>(s.replicas.size()) > p.global_batch / p.micro_batch) {
      return error::invalid_input(file, spath + ".replicas", std::to_string(s.replicas.size()) +
                                  " replicas for " + std::to_string(p.global_batch / p.micro_batch) +
                                  " micro-batches an iteration: a replica would have no work");
    }
    for (std::size_t k = 0; k < s.replicas.size(); ++k) {
      const auto& rep = s.replicas[k];
      std::string rpath = index_path(spath + ".replicas", k);
      if (rep.tp <= 0) return error::invalid_input(file, rpath + ".tp", "expected a positive tensor-parallel degree");
      if (!rep.devices.empty() && static_cast<int>(rep.devices.size()) != rep.tp)
        return error::invalid_input(file, rpath + ".devices", "expected " + std::to_string(rep.tp) + " devices (one per TP rank), found " + std::to_string(rep.devices.size()));
      if (check_model && rep.tp > 1 && model.heads % rep.tp != 0)
        return error::invalid_input(file, rpath + ".tp", "tp " + std::to_string(rep.tp) + " does not divide the model's " + std::to_string(model.heads) + " heads");
      if (c) {
        const gpu_spec* g = c->gpus.find(rep.gpu_type);
        if (!g) return error::not_found(file, rpath + ".gpu", "unknown GPU type '" + rep.gpu_type + "'");
        if (!c->find_zone(rep.zone)) return error::not_found(file, rpath + ".zone", "zone '" + rep.zone + "' is not in the cluster");
        if (rep.tp > g->gpus_per_node)
          return error::invalid_input(file, rpath + ".tp", "tp " + std::to_string(rep.tp) + " exceeds the " + std::to_string(g->gpus_per_node) + " GPUs of one " + rep.gpu_type + " node");
        // The GPUs of every replica so far must exist in the zone.
        const auto& zone_gpus = c->find_zone(rep.zone)->gpus;
        const auto have = zone_gpus.find(rep.gpu_type);
        const int available = have == zone_gpus.end() ? 0 : have->second;
        const int used = placed[{rep.zone, rep.gpu_type}] += rep.tp;
        if (available == 0)
          return error::invalid_input(file, rpath + ".zone", "zone '" + rep.zone + "' has no " + rep.gpu_type + " GPUs in the cluster");
        if (used > available)
          return error::invalid_input(file, rpath + ".zone", "the plan places " + std::to_string(used) + " " + rep.gpu_type + " GPUs in zone '" + rep.zone +
                                      "' up to here, but the cluster has " + std::to_string(available) + " there");
      }
    }
  }
  if (p.local_sgd)
    if (auto bad = validate_local_sgd(p, file)) return bad;
  if (check_model && expected_first != model.num_all_layers()) {
    if (expected_first < model.num_all_layers())
      return error::invalid_input(file, "stages", "layers " + std::to_string(expected_first) + ".." + std::to_string(model.num_all_layers() - 1) +
                                  " of " + model.name + " belong to no stage (the model has " + std::to_string(model.num_all_layers()) +
                                  " layers: embedding, " + std::to_string(model.num_layers) + " blocks, head)");
    return error::invalid_input(file, "stages", "the stages cover " + std::to_string(expected_first) + " layers but " + model.name + " has " +
                                std::to_string(model.num_all_layers()));
  }
  return std::nullopt;
}

std::string to_yaml(const plan& p) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "micro_batch" << YAML::Value << p.micro_batch;
  out << YAML::Key << "global_batch" << YAML::Value << p.global_batch;
  out << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const auto& s : p.stages) {
    out << YAML::BeginMap;
    out << YAML::Key << "layers" << YAML::Value << YAML::Flow << YAML::BeginMap
        << YAML::Key << "first" << YAML::Value << s.first_layer
        << YAML::Key << "count" << YAML::Value << s.num_layers << YAML::EndMap;
    if (s.recompute) out << YAML::Key << "recompute" << YAML::Value << true;
    out << YAML::Key << "replicas" << YAML::Value << YAML::BeginSeq;
    for (const auto& rep : s.replicas) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "gpu" << YAML::Value << rep.gpu_type;
      out << YAML::Key << "zone" << YAML::Value << rep.zone;
      out << YAML::Key << "tp" << YAML::Value << rep.tp;
      if (!rep.nodes.empty()) out << YAML::Key << "nodes" << YAML::Value << YAML::Flow << rep.nodes;
      if (!rep.devices.empty()) out << YAML::Key << "devices" << YAML::Value << YAML::Flow << rep.devices;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (p.local_sgd) {
    out << YAML::Key << "local_sgd" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "inner_steps" << YAML::Value << p.local_sgd->inner_steps;
    out << YAML::Key << "regions" << YAML::Value << YAML::BeginSeq;
    for (const auto& region : p.local_sgd->regions)
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << region.name
          << YAML::Key << "zones" << YAML::Value << YAML::Flow << region.zones << YAML::EndMap;
    out << YAML::EndSeq << YAML::EndMap;
  }
  if (p.estimate) {
    const auto& e = *p.estimate;
    out << YAML::Key << "estimate" << YAML::Value << YAML::BeginMap
        << YAML::Key << "iteration_time_s" << YAML::Value << e.iteration_time_s
        << YAML::Key << "throughput_iters_per_s" << YAML::Value << e.throughput_iters_per_s
        << YAML::Key << "cost_per_iteration_usd" << YAML::Value << e.cost_per_iteration_usd
        << YAML::Key << "cost_per_hour_usd" << YAML::Value << e.cost_per_hour_usd
        << YAML::Key << "peak_memory_bytes" << YAML::Value << e.peak_memory_bytes << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// The fields of made_for, in the order a plan file writes them.
struct origin_field {
  const char* key;
  std::string plan_origin::*member;
};
constexpr origin_field origin_fields[] = {
  {"model", &plan_origin::model},
  {"cluster", &plan_origin::cluster},
  {"job", &plan_origin::job},
  {"sailor_data", &plan_origin::sailor_data},
  {"quotas", &plan_origin::quotas},
  {"profile", &plan_origin::profile},
};

}  // namespace

result<plan_origin> load_plan_origin(const std::string& path) {
  return guarded<plan_origin>([&] {
    yaml_reader r(path);
    YAML::Node root = r.parse();
    plan_origin o;
    YAML::Node m = root["made_for"];
    if (!m.IsDefined() || m.IsNull()) return o;
    r.expect_map(m, "made_for");
    r.only_keys(m, "made_for", {"model", "cluster", "job", "sailor_data", "quotas", "profile"});
    for (const auto& [key, member] : origin_fields) o.*member = r.opt_string(m, "made_for", key).value_or("");
    return o;
  });
}

std::string to_yaml(const plan_origin& origin) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "made_for" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, member] : origin_fields)
    if (!(origin.*member).empty()) out << YAML::Key << key << YAML::Value << origin.*member;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace sailor::config
