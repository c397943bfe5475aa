#include "sailor/config/load.hpp"
#include "sailor/config/pools.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "sailor/config/text.hpp"
#include "yaml_reader.hpp"

namespace sailor::config {

using detail::index_path;
using detail::join_path;
using detail::guarded;
using detail::load_failure;
using detail::yaml_reader;

// What the planner and simulator can represent (their tables grow with layers x zones x GPUs):
// a file beyond these is refused at load, before anything is allocated for it. With both GPU
// bounds, every GPU count and their sum fit in 32 bits.
constexpr long long max_model_layers = 4096;
constexpr std::size_t max_cluster_zones = 1024;
constexpr long long max_gpus_per_zone = 1 << 20;

namespace {

std::string known_gpu_list(const gpu_catalog& catalog) {
  std::string out;
  for (const auto& g : catalog.gpus()) out += (out.empty() ? "" : ", ") + g.name;
  return out;
}

zone_link read_link_params(const yaml_reader& r, const YAML::Node& n, const std::string& path,
                           zone_link base) {
  if (auto v = r.opt_double(n, path, "latency_ms")) {
    if (*v < 0) r.fail(n["latency_ms"], join_path(path, "latency_ms"), "expected a non-negative number");
    base.latency_s = *v / 1e3;
  }
  if (auto v = r.opt_double(n, path, "bandwidth_gbytes_per_s")) {
    if (*v <= 0) r.fail(n["bandwidth_gbytes_per_s"], join_path(path, "bandwidth_gbytes_per_s"), "expected a positive number (GB/s)");
    base.bandwidth_gbytes_per_s = *v;
  }
  if (auto v = r.opt_double(n, path, "egress_usd_per_gb")) {
    if (*v < 0) r.fail(n["egress_usd_per_gb"], join_path(path, "egress_usd_per_gb"), "expected a non-negative number ($/GB)");
    base.egress_usd_per_gb = *v;
  }
  if (YAML::Node c = n["curve"]; c.IsDefined() && !c.IsNull()) {
    std::string cpath = join_path(path, "curve");
    r.expect_sequence(c, cpath);
    bandwidth_curve curve;
    double last = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      std::string ppath = index_path(cpath, i);
      if (!c[i].IsSequence() || c[i].size() != 2) r.fail(c[i], ppath, "expected [bytes, GB/s]");
      double bytes = r.get_double(c[i][0], ppath + "[0]");
      double gbps = r.get_double(c[i][1], ppath + "[1]");
      if (bytes <= last) r.fail(c[i], ppath, "expected sizes in increasing order, all positive");
      if (gbps <= 0) r.fail(c[i], ppath, "expected a positive bandwidth");
      last = bytes;
      curve.points.emplace_back(bytes, gbps);
    }
    if (curve.points.empty()) r.fail(c, cpath, "expected at least one [bytes, GB/s] point");
    base.bandwidth_gbytes_per_s = curve.points.back().second;
    base.curve = std::move(curve);
  }
  return base;
}

gpu_spec read_gpu(const yaml_reader& r, const YAML::Node& n, const std::string& path,
                  const gpu_catalog& catalog) {
  r.expect_map(n, path);
  r.only_keys(n, path, {"name", "peak_fp16_tflops", "peak_fp32_tflops", "memory_gib",
                        "memory_bandwidth_gbytes_per_s", "gpus_per_node", "intra_node_gbytes_per_s",
                        "inter_node_gbytes_per_s", "on_demand_usd_per_hour", "spot_usd_per_hour",
                        "source"});
  gpu_spec g;
  g.name = r.req_string(n, path, "name");
  if (const gpu_spec* known = catalog.find(g.name)) g = *known;  // override fields of a known type
  auto num = [&](const char* key, double& out) {
    if (auto v = r.opt_double(n, path, key)) {
      if (*v < 0) r.fail(n[key], join_path(path, key), "expected a non-negative number");
      out = *v;
    }
  };
  num("peak_fp16_tflops", g.peak_fp16_tflops);
  num("peak_fp32_tflops", g.peak_fp32_tflops);
  num("memory_bandwidth_gbytes_per_s", g.memory_bandwidth_gbytes_per_s);
  num("intra_node_gbytes_per_s", g.intra_node_gbytes_per_s);
  num("inter_node_gbytes_per_s", g.inter_node_gbytes_per_s);
  num("on_demand_usd_per_hour", g.on_demand_usd_per_hour);
  num("spot_usd_per_hour", g.spot_usd_per_hour);
  if (auto v = r.opt_double(n, path, "memory_gib")) {
    if (*v <= 0) r.fail(n["memory_gib"], join_path(path, "memory_gib"), "expected a positive number");
    g.memory_bytes = static_cast<std::uint64_t>(*v * 1024.0 * 1024.0 * 1024.0);
  }
  if (auto v = r.opt_int(n, path, "gpus_per_node")) {
    if (*v <= 0) r.fail(n["gpus_per_node"], join_path(path, "gpus_per_node"), "expected a positive integer");
    g.gpus_per_node = static_cast<int>(*v);
  }
  if (auto v = r.opt_string(n, path, "source")) g.source = *v;
  if (g.memory_bytes == 0) r.fail(n, join_path(path, "memory_gib"), "missing for a GPU type not in the built-in catalog");
  if (g.peak_fp16_tflops <= 0) r.fail(n, join_path(path, "peak_fp16_tflops"), "missing for a GPU type not in the built-in catalog");
  return g;
}

// One zone of the cluster file: its name (once in `c`), region (its name when absent) and GPU
// counts per known type or pool, within what the planner handles.
zone read_zone(const yaml_reader& r, const YAML::Node& zn, const std::string& zpath, cluster& c) {
  r.expect_map(zn, zpath);
  r.only_keys(zn, zpath, {"name", "region", "gpus"});
  zone z;
  z.name = r.req_string(zn, zpath, "name");
  if (c.find_zone(z.name)) r.fail(zn["name"], join_path(zpath, "name"), "zone '" + z.name + "' is declared twice");
  z.region = r.opt_string(zn, zpath, "region").value_or(z.name);
  if (YAML::Node g = zn["gpus"]; g.IsDefined() && !g.IsNull()) {
    std::string gpath = join_path(zpath, "gpus");
    r.expect_map(g, gpath);
    for (const auto& kv : g) {
      std::string type = kv.first.as<std::string>();
      std::string tpath = join_path(gpath, type);
      if (!c.gpus.find(type) && !add_pool_type(type, c.gpus))  // `<type>/on-demand`: pools.hpp
        r.fail(kv.first, tpath, "unknown GPU type '" + type + "'; known: " + known_gpu_list(c.gpus) +
                                    " (or declare it under gpus:; a pool is <type>/on-demand or <type>/spot)",
               error_kind::not_found);
      long long count = r.get_int(kv.second, tpath);
      if (count < 0) r.fail(kv.second, tpath, "expected a non-negative GPU count, found " + std::to_string(count));
      if (count > max_gpus_per_zone)
        r.fail(kv.second, tpath, std::to_string(count) + " GPUs, more than the planner handles in one zone (at most " +
                                     std::to_string(max_gpus_per_zone) + ")");
      z.gpus[type] = static_cast<int>(count);
    }
  }
  return z;
}

// The zones of the cluster file, in order, and the regions they name (in order of first use).
void read_zones(const yaml_reader& r, const YAML::Node& root, cluster& c) {
  YAML::Node zones = r.required(root, "", "zones");
  r.expect_sequence(zones, "zones");
  if (zones.size() == 0) r.fail(zones, "zones", "expected at least one zone");
  // Bounds the planner can represent, checked before anything is built from the file.
  if (zones.size() > max_cluster_zones)
    r.fail(zones, "zones", std::to_string(zones.size()) + " zones, more than the planner handles (at most " +
                               std::to_string(max_cluster_zones) + ")");
  for (std::size_t i = 0; i < zones.size(); ++i) c.zones.push_back(read_zone(r, zones[i], index_path("zones", i), c));
  for (const auto& z : c.zones) {
    auto it = std::find_if(c.regions.begin(), c.regions.end(), [&](const region& rg) { return rg.name == z.region; });
    if (it == c.regions.end()) c.regions.push_back({z.region, {z.name}});
    else it->zones.push_back(z.name);
  }
}

// link_defaults: the figures of a link by relation (same zone, same region, across regions).
void read_link_defaults(const yaml_reader& r, const YAML::Node& d, cluster& c) {
  r.expect_map(d, "link_defaults");
  r.only_keys(d, "link_defaults", {"same_zone", "same_region", "cross_region"});
  auto one = [&](const char* key, zone_link& out) {
    if (YAML::Node n = d[key]; n.IsDefined() && !n.IsNull()) {
      std::string p = join_path("link_defaults", key);
      r.expect_map(n, p);
      r.only_keys(n, p, {"latency_ms", "bandwidth_gbytes_per_s", "egress_usd_per_gb", "curve"});
      out = read_link_params(r, n, p, out);
    }
  };
  one("same_zone", c.defaults.same_zone);
  one("same_region", c.defaults.same_region);
  one("cross_region", c.defaults.cross_region);
}

// links: zone pairs between declared zones, each over its relation's defaults.
void read_links(const yaml_reader& r, const YAML::Node& links, cluster& c) {
  r.expect_sequence(links, "links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    std::string lpath = index_path("links", i);
    const YAML::Node& ln = links[i];
    r.expect_map(ln, lpath);
    r.only_keys(ln, lpath, {"from", "to", "latency_ms", "bandwidth_gbytes_per_s", "egress_usd_per_gb", "curve"});
    std::string from = r.req_string(ln, lpath, "from");
    std::string to = r.req_string(ln, lpath, "to");
    for (const auto& [key, name] : {std::pair{"from", from}, std::pair{"to", to}}) {
      if (!c.find_zone(name))
        r.fail(ln[key], join_path(lpath, key), "zone '" + name + "' is not declared under zones:", error_kind::not_found);
    }
    zone_link base = c.link(from, to);  // defaults for the relation, overridden below
    if (!ln["bandwidth_gbytes_per_s"].IsDefined() && !ln["curve"].IsDefined())
      r.fail(ln, join_path(lpath, "bandwidth_gbytes_per_s"), "missing: a link needs bandwidth_gbytes_per_s or curve");
    zone_link l = read_link_params(r, ln, lpath, base);
    l.from = from;
    l.to = to;
    c.links.push_back(std::move(l));
  }
}

}  // namespace

result<cluster> load_cluster(const std::string& path) {
  return guarded<cluster>([&] {
    yaml_reader r(path);
    YAML::Node root = r.parse();
    r.only_keys(root, "", {"name", "pricing", "zones", "links", "link_defaults", "gpus"});
    cluster c;
    c.name = r.req_string(root, "", "name");
    if (auto p = r.opt_string(root, "", "pricing")) {
      if (*p == "spot") c.use_spot_prices = true;
      else if (*p != "on_demand") r.fail(root["pricing"], "pricing", "expected on_demand or spot, found '" + *p + "'");
    }
    if (YAML::Node gpus = root["gpus"]; gpus.IsDefined() && !gpus.IsNull()) {
      r.expect_sequence(gpus, "gpus");
      for (std::size_t i = 0; i < gpus.size(); ++i)
        c.gpus.upsert(read_gpu(r, gpus[i], index_path("gpus", i), c.gpus));
    }
    read_zones(r, root, c);
    if (YAML::Node d = root["link_defaults"]; d.IsDefined() && !d.IsNull()) read_link_defaults(r, d, c);
    if (YAML::Node links = root["links"]; links.IsDefined() && !links.IsNull()) read_links(r, links, c);
    return c;
  });
}

result<std::string> config_kind(const std::string& path) {
  return guarded<std::string>([&] {
    yaml_reader r(path);
    YAML::Node root = r.parse();
    // Top-level fields of each kind, as the loaders accept them; ties go to the first.
    static const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
        {"cluster", {"name", "pricing", "zones", "links", "link_defaults", "gpus"}},
        {"model", {"name", "sailor_name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "gated_mlp",
                   "sequence", "vocabulary", "dtype", "tied_embeddings", "learned_positions"}},
        {"job", {"global_batch", "objective", "constraints", "optimizer", "mixed_precision", "allow_recompute",
                 "max_micro_batch", "seed", "iterations"}},
        {"plan", {"micro_batch", "global_batch", "stages", "estimate", "made_for"}},
    };
    std::string best;
    double best_score = 0;
    for (const auto& [kind, fields] : kinds) {
      double score = 0;
      for (const auto& kv : root) {
        const auto key = kv.first.as<std::string>();
        if (std::find(fields.begin(), fields.end(), key) != fields.end()) score += key == "name" ? 0.25 : 1;
        else if (!closest_name(key, fields).empty()) score += 0.5;
      }
      if (score > best_score) best_score = score, best = kind;
    }
    if (best.empty())
      r.fail(root, "", "cannot tell what kind of config this is: none of its fields is one of a cluster (zones), "
                       "model (layers, hidden), job (global_batch) or plan (stages); name its kind with --cluster, "
                       "--model, --job or --plan");
    return best;
  });
}

namespace {

model_shape read_model(const yaml_reader& r, const YAML::Node& root) {
  r.only_keys(root, "", {"name", "sailor_name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden",
                         "gated_mlp", "sequence", "vocabulary", "dtype", "tied_embeddings",
                         "learned_positions", "architecture", "bias", "norm_eps", "rope_theta",
                         "activation"});
  model_shape m;
  m.name = r.req_string(root, "", "name");
  m.sailor_name = r.opt_string(root, "", "sailor_name").value_or("");
  m.num_layers = static_cast<int>(r.req_count(root, "", "layers", true));
  if (m.num_layers > max_model_layers)
    r.fail(root["layers"], "layers", std::to_string(m.num_layers) + " layers, more than the planner handles (at most " +
                                         std::to_string(max_model_layers) + ")");
  m.hidden = static_cast<int>(r.req_count(root, "", "hidden", true));
  m.heads = static_cast<int>(r.req_count(root, "", "heads", true));
  m.sequence = static_cast<int>(r.req_count(root, "", "sequence", true));
  m.vocabulary = static_cast<int>(r.req_count(root, "", "vocabulary", true));
  if (m.hidden % m.heads != 0)
    r.fail(root["heads"], "heads", "hidden (" + std::to_string(m.hidden) + ") must be a multiple of heads (" + std::to_string(m.heads) + ")");
  if (auto kv = r.opt_int(root, "", "kv_heads")) {
    if (*kv <= 0 || m.heads % *kv != 0) r.fail(root["kv_heads"], "kv_heads", "expected a positive divisor of heads");
    m.kv_heads = static_cast<int>(*kv);
  }
  if (auto f = r.opt_int(root, "", "ffn_hidden")) {
    if (*f <= 0) r.fail(root["ffn_hidden"], "ffn_hidden", "expected a positive integer");
    m.ffn_hidden = static_cast<int>(*f);
  }
  if (auto a = r.opt_enum(root, "", "architecture", detail::architecture_names)) m.arch = *a;
  const bool llama = m.arch == architecture::llama;
  // Each family's defaults; a value that contradicts the family is kept and refused by the
  // training runtime (naming the field), the planner and simulator accept it.
  m.gated_mlp = r.opt_bool(root, "", "gated_mlp").value_or(llama);
  m.tied_embeddings = r.opt_bool(root, "", "tied_embeddings").value_or(false);
  m.learned_positions = r.opt_bool(root, "", "learned_positions").value_or(!m.gated_mlp && !llama);
  m.bias = r.opt_bool(root, "", "bias").value_or(!llama);
  if (auto v = r.opt_double(root, "", "norm_eps")) {
    if (*v <= 0 || *v >= 1) r.fail(root["norm_eps"], "norm_eps", "expected a small positive number");
    m.norm_eps = *v;
  }
  if (auto a = r.opt_string(root, "", "activation")) {
    if (*a != "gelu" && *a != "gelu_new")
      r.fail(root["activation"], "activation",
             "expected gelu (exact) or gelu_new (its tanh approximation, Hugging Face's GPT-2's), found '" + *a + "'");
    m.gelu_tanh = *a == "gelu_new";
  }
  if (auto v = r.opt_double(root, "", "rope_theta")) {
    if (*v <= 1) r.fail(root["rope_theta"], "rope_theta", "expected a number above 1");
    m.rope_theta = *v;
  }
  if (auto d = r.opt_enum(root, "", "dtype", detail::dtype_names)) m.precision = *d;
  return m;
}

}  // namespace

result<model_shape> load_model(const std::string& path) {
  return guarded<model_shape>([&] {
    yaml_reader r(path);
    return read_model(r, r.parse());
  });
}

result<model_shape> load_model_text(const std::string& text, const std::string& file) {
  return guarded<model_shape>([&] {
    yaml_reader r(file);
    return read_model(r, r.parse_text(text));
  });
}

namespace {

void read_schedule(const yaml_reader& r, const YAML::Node& root, optimizer_schedule& s) {
  auto positive = [&](const char* key, double& out, bool zero_ok) {
    if (auto v = r.opt_double(root, "", key)) {
      if (*v < 0 || (!zero_ok && *v == 0))
        r.fail(root[key], key, zero_ok ? "expected a non-negative number" : "expected a positive number");
      out = *v;
    }
  };
  positive("lr", s.lr, false);
  positive("min_lr", s.min_lr, true);
  positive("weight_decay", s.weight_decay, true);
  positive("grad_clip", s.grad_clip, true);
  if (s.min_lr > s.lr) r.fail(root["min_lr"], "min_lr", "expected at most lr (" + std::to_string(s.lr) + ")");
  auto count = [&](const char* key, int& out) {
    if (auto v = r.opt_int(root, "", key)) {
      if (*v < 0) r.fail(root[key], key, "expected a non-negative integer");
      out = static_cast<int>(*v);
    }
  };
  count("warmup_iterations", s.warmup_iterations);
  count("decay_iterations", s.decay_iterations);
  if (s.decay_iterations > 0 && s.decay_iterations < s.warmup_iterations)
    r.fail(root["decay_iterations"], "decay_iterations", "expected at least warmup_iterations");
  if (YAML::Node b = root["betas"]; b.IsDefined() && !b.IsNull()) {
    if (!b.IsSequence() || b.size() != 2) r.fail(b, "betas", "expected [beta1, beta2]");
    s.beta1 = r.get_double(b[0], "betas[0]");
    s.beta2 = r.get_double(b[1], "betas[1]");
    for (int i = 0; i < 2; ++i) {
      double v = i == 0 ? s.beta1 : s.beta2;
      if (v < 0 || v >= 1) r.fail(b[i], index_path("betas", i), "expected a number in [0, 1)");
    }
  }
}

tokenizer_source read_tokenizer(const yaml_reader& r, const YAML::Node& t) {
  r.expect_map(t, "data.tokenizer");
  r.only_keys(t, "data.tokenizer", {"kind", "vocab", "merges", "model"});
  tokenizer_source out;
  auto kind = r.opt_enum(t, "data.tokenizer", "kind", detail::tokenizer_kind_names);
  if (!kind)
    r.fail(t, "data.tokenizer.kind", "required: characters, gpt2_bpe or sentencepiece");
  out.kind = *kind;
  if (out.kind == tokenizer_kind::gpt2_bpe) {
    out.vocab = r.req_string(t, "data.tokenizer", "vocab");
    out.merges = r.req_string(t, "data.tokenizer", "merges");
  } else if (t["vocab"].IsDefined() || t["merges"].IsDefined()) {
    r.fail(t, "data.tokenizer", "vocab and merges belong to kind gpt2_bpe");
  }
  if (out.kind == tokenizer_kind::sentencepiece)
    out.model = r.req_string(t, "data.tokenizer", "model");
  else if (t["model"].IsDefined())
    r.fail(t, "data.tokenizer", "model belongs to kind sentencepiece");
  return out;
}

data_source read_data(const yaml_reader& r, const YAML::Node& d) {
  r.expect_map(d, "data");
  r.only_keys(d, "data", {"path", "format", "validation_fraction", "tokenizer"});
  data_source out;
  out.path = r.req_string(d, "data", "path");
  if (auto f = r.opt_enum(d, "data", "format", detail::data_format_names)) out.format = *f;
  if (auto v = r.opt_double(d, "data", "validation_fraction")) {
    if (*v < 0 || *v >= 1) r.fail(d["validation_fraction"], "data.validation_fraction", "expected a number in [0, 1)");
    out.validation_fraction = *v;
  }
  if (YAML::Node t = d["tokenizer"]; t.IsDefined() && !t.IsNull()) {
    out.tokenizer = read_tokenizer(r, t);
    if (out.format != data_format::text && out.tokenizer.kind != tokenizer_kind::characters)
      r.fail(t, "data.tokenizer", "a tokenizer reads text: format is " + std::string(to_string(out.format)));
  }
  return out;
}

// The data_parallel: block (job.hpp's data_parallel_options).
data_parallel_options read_data_parallel(const yaml_reader& r, const YAML::Node& d) {
  const std::string path = "data_parallel";
  r.expect_map(d, path);
  r.only_keys(d, path, {"across_regions", "inner_steps", "outer_optimizer", "outer_lr", "outer_momentum",
                        "compression", "fragments", "overlap_steps"});
  data_parallel_options o;
  if (auto v = r.opt_enum(d, path, "across_regions", detail::across_regions_names)) o.across_regions = *v;
  if (auto v = r.opt_int(d, path, "inner_steps")) {
    if (*v < 1) r.fail(d["inner_steps"], join_path(path, "inner_steps"),
                       "expected a positive number of iterations between the regions' exchanges");
    o.inner_steps = static_cast<int>(*v);
  }
  if (auto v = r.opt_enum(d, path, "outer_optimizer", detail::outer_optimizer_names)) o.outer_optimizer = *v;
  if (auto v = r.opt_double(d, path, "outer_lr")) {
    if (!(*v > 0)) r.fail(d["outer_lr"], join_path(path, "outer_lr"), "expected a positive learning rate");
    o.outer_lr = *v;
  }
  if (auto v = r.opt_double(d, path, "outer_momentum")) {
    if (!(*v >= 0 && *v < 1)) r.fail(d["outer_momentum"], join_path(path, "outer_momentum"), "expected a number in [0, 1)");
    o.outer_momentum = *v;
  }
  if (auto v = r.opt_enum(d, path, "compression", detail::compression_names)) o.compression = *v;
  if (auto v = r.opt_int(d, path, "fragments")) {
    if (*v < 1) r.fail(d["fragments"], join_path(path, "fragments"), "expected a positive number of fragments");
    o.fragments = static_cast<int>(*v);
  }
  if (auto v = r.opt_int(d, path, "overlap_steps")) {
    if (*v < 0) r.fail(d["overlap_steps"], join_path(path, "overlap_steps"), "expected a non-negative number of iterations");
    o.overlap_steps = static_cast<int>(*v);
  }
  const bool diloco_only = d["inner_steps"] || d["outer_optimizer"] || d["outer_lr"] || d["outer_momentum"] ||
                           d["compression"] || d["fragments"] || d["overlap_steps"];
  if (o.across_regions == across_regions_mode::sync && diloco_only)
    r.fail(d, path, "inner_steps, the outer optimizer, compression, fragments and overlap_steps are DiLoCo's: "
                    "set across_regions: diloco");
  if (o.inner_steps > 0 && o.fragments > o.inner_steps)
    r.fail(d["fragments"], join_path(path, "fragments"), "at most inner_steps (" + std::to_string(o.inner_steps) +
                                                             "): each fragment is exchanged once every inner_steps iterations");
  if (o.inner_steps > 0 && o.overlap_steps >= o.inner_steps)
    r.fail(d["overlap_steps"], join_path(path, "overlap_steps"),
           "must be less than inner_steps (" + std::to_string(o.inner_steps) + ")");
  return o;
}

}  // namespace

result<job> load_job(const std::string& path) {
  return guarded<job>([&] {
    yaml_reader r(path);
    YAML::Node root = r.parse();
    r.only_keys(root, "", {"global_batch", "objective", "constraints", "optimizer", "mixed_precision",
                           "allow_recompute", "max_micro_batch", "seed", "iterations", "data",
                           "eval_every", "eval_batches", "init_from", "lr", "min_lr", "warmup_iterations",
                           "decay_iterations", "betas", "weight_decay", "grad_clip", "data_parallel",
                           "allow_local_sgd"});
    job j;
    j.global_batch = static_cast<int>(r.req_count(root, "", "global_batch", true));
    if (auto o = r.opt_string(root, "", "objective")) {
      if (*o == "max_throughput" || *o == "throughput") j.goal = objective::max_throughput;
      else if (*o == "min_cost" || *o == "cost") j.goal = objective::min_cost;
      else r.fail(root["objective"], "objective", "expected max_throughput or min_cost, found '" + *o + "'");
    }
    if (YAML::Node c = root["constraints"]; c.IsDefined() && !c.IsNull()) {
      r.expect_map(c, "constraints");
      r.only_keys(c, "constraints", {"max_cost_per_iteration_usd", "min_iterations_per_s", "max_cost_per_hour_usd"});
      auto positive = [&](const char* key) -> std::optional<double> {
        auto v = r.opt_double(c, "constraints", key);
        if (v && *v <= 0) r.fail(c[key], join_path("constraints", key), "expected a positive number");
        return v;
      };
      j.limits.max_cost_per_iteration_usd = positive("max_cost_per_iteration_usd");
      j.limits.min_iterations_per_s = positive("min_iterations_per_s");
      j.limits.max_cost_per_hour_usd = positive("max_cost_per_hour_usd");
    }
    if (auto o = r.opt_enum(root, "", "optimizer", detail::optimizer_names)) j.optimizer = *o;
    j.mixed_precision = r.opt_bool(root, "", "mixed_precision").value_or(true);
    j.allow_recompute = r.opt_bool(root, "", "allow_recompute").value_or(true);
    if (auto v = r.opt_int(root, "", "max_micro_batch")) {
      if (*v < 0) r.fail(root["max_micro_batch"], "max_micro_batch", "expected a non-negative integer (0: no limit)");
      j.max_micro_batch = static_cast<int>(*v);
    }
    if (auto v = r.opt_int(root, "", "seed")) j.seed = static_cast<int>(*v);
    if (auto v = r.opt_int(root, "", "iterations")) {
      if (*v < 0) r.fail(root["iterations"], "iterations", "expected a non-negative integer");
      j.iterations = static_cast<int>(*v);
    }
    read_schedule(r, root, j.schedule);
    if (YAML::Node d = root["data"]; d.IsDefined() && !d.IsNull()) j.data = read_data(r, d);
    if (auto v = r.opt_int(root, "", "eval_every")) {
      if (*v < 0) r.fail(root["eval_every"], "eval_every", "expected a non-negative integer (0: never)");
      j.eval_every = static_cast<int>(*v);
    }
    if (auto v = r.opt_int(root, "", "eval_batches")) {
      if (*v < 1) r.fail(root["eval_batches"], "eval_batches", "expected a positive integer");
      j.eval_batches = static_cast<int>(*v);
    }
    if (auto v = r.opt_string(root, "", "init_from")) {
      if (v->empty()) r.fail(root["init_from"], "init_from", "expected a .safetensors file or a folder holding one");
      j.init_from = *v;
    }
    if (YAML::Node d = root["data_parallel"]; d.IsDefined() && !d.IsNull()) j.data_parallel = read_data_parallel(r, d);
    j.allow_local_sgd = r.opt_bool(root, "", "allow_local_sgd").value_or(false);
    if (j.eval_every > 0 && !j.data)
      r.fail(root["eval_every"], "eval_every", "a validation loss needs a data: block to hold out from");
    return j;
  });
}

}  // namespace sailor::config
