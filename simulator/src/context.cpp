// The simulation context: tables built once, O(1) queries after.
#include "sailor/simulator/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

namespace sailor::simulator {

namespace {

int log2_index(int v) {
  if (v <= 0 || (v & (v - 1)) != 0) return -1;
  int i = 0;
  while ((1 << i) < v) ++i;
  return i;
}

// Bytes per parameter of optimizer state (and master weights) per optimizer and precision.
double optimizer_state_bytes(config::optimizer_kind opt, bool mixed) {
  double states = opt == config::optimizer_kind::sgd ? 4 : 8;  // momentum / two moments, fp32
  return states + (mixed ? 4 : 0);                              // fp32 master weights
}

}  // namespace

namespace {

// Sailor profiles some models (Llama) with the final norm as a layer of its own, L+3 layers in
// all; we count it with the head, so the last two layers fold into one.
std::optional<config::model_profile> folded_profile(const config::model_profile* in, int L) {
  if (!in) return std::nullopt;
  config::model_profile folded = *in;
  for (auto& [name, gp] : folded.by_gpu)
    for (auto& [mbs, by_tp] : gp.times)
      for (auto& [tp, v] : by_tp)
        if (static_cast<int>(v.size()) == L + 1) {
          v[L - 1].forward_s += v[L].forward_s;
          v[L - 1].backward_s += v[L].backward_s;
          v.pop_back();
        }
  for (auto& [tp, v] : folded.sizes_by_tp)
    if (static_cast<int>(v.size()) == L + 1) {
      v[L - 1].params_floats += v[L].params_floats;
      v[L - 1].act_mem_floats += v[L].act_mem_floats;
      v[L - 1].act_output_floats = v[L].act_output_floats;
      v.pop_back();
    }
  return folded;
}

// A layer's profiled times at every profiled micro-batch of one TP degree.
using profiled_points = std::vector<std::pair<int, const std::vector<config::layer_time>*>>;

// Weighted least squares of t = a + b * mbs over the profiled sizes (weights: Gaussian in
// octaves of width `sigma` over t^2, i.e. relative error), read at `mbs`; `raw` when it cannot
// be fitted. A fit far from the data it smooths is not trusted beyond a factor of two.
double smoothed_time(const profiled_points& points, int layer, bool forward, int mbs, double sigma, double raw) {
  if (sigma <= 0 || points.size() < 2) return raw;
  double S = 0, Sx = 0, Sy = 0, Sxx = 0, Sxy = 0;
  for (const auto& [pm, v] : points) {
    const double t = forward ? (*v)[layer].forward_s : (*v)[layer].backward_s;
    if (!(t > 0)) continue;
    const double d = std::log2(double(pm) / mbs);
    const double w = std::exp(-d * d / (2 * sigma * sigma)) / (t * t);
    S += w;
    Sx += w * pm;
    Sy += w * t;
    Sxx += w * pm * pm;
    Sxy += w * pm * t;
  }
  const double det = S * Sxx - Sx * Sx;
  if (!(S > 0) || !(det > 1e-12 * S * Sxx)) return raw;
  const double b = (S * Sxy - Sx * Sy) / det;
  const double a = (Sy - b * Sx) / S;
  return std::clamp(a + b * mbs, 0.5 * raw, 2.0 * raw);
}

}  // namespace

sim_inputs sim_inputs::of(const config::sailor_data& data) {
  sim_inputs in;
  in.model = data.model;
  in.profile = &data.profile;
  in.gpus = data.gpus;
  in.network = &data.network;
  in.job.optimizer = data.optimizer;
  return in;
}

result<sim_context> sim_context::make(const sim_inputs& in, sim_options options) {
  sim_context c;
  c.options_ = std::move(options);
  c.model_ = in.model;
  c.job_ = in.job;
  const auto& m = in.model;
  if (m.num_layers <= 0 || m.hidden <= 0 || m.heads <= 0 || m.sequence <= 0 || m.vocabulary <= 0)
    return error::invalid_input("model",
                                "model shape needs num_layers, hidden, heads, sequence and vocabulary > 0");
  if (!in.cluster && !in.network)
    return error::invalid_input("network", "neither a cluster nor Sailor's network fits given");
  c.num_layers_ = m.num_all_layers();
  const std::optional<config::model_profile> folded = folded_profile(in.profile, c.num_layers_);
  const config::model_profile* profile = folded ? &*folded : nullptr;
  // GPU types: the catalog's, plus any profiled type not in it.
  config::gpu_catalog catalog = in.cluster ? in.cluster->gpus : in.gpus;
  for (const auto& g : in.gpus.gpus())
    if (!catalog.find(g.name)) catalog.upsert(g);
  c.init_gpus(catalog, in.cluster, profile);
  c.init_zones(in);
  c.init_layer_sizes(profile);
  c.init_time_tables(catalog, profile);
  c.init_network(in);
  return c;
}

void sim_context::init_gpus(const config::gpu_catalog& catalog, const config::cluster* cluster,
                            const config::model_profile* profile) {
  std::vector<std::string> names;
  for (const auto& g : catalog.gpus()) names.push_back(g.name);
  if (profile)
    for (const auto& [name, p] : profile->by_gpu)
      if (!catalog.find(name)) names.push_back(name);
  gpu_names_ = names;
  const int G = static_cast<int>(names.size());
  gpu_memory_.assign(G, 0);
  gpu_price_.assign(G, 0);
  gpu_mem_bw_.assign(G, 0);
  has_profile_.assign(G, 0);
  gpus_per_node_.assign(G, 1);
  gpu_nic_.assign(G, 0);
  for (int g = 0; g < G; ++g) {
    if (const auto* spec = catalog.find(names[g])) {
      gpu_memory_[g] = double(spec->memory_bytes);
      gpu_price_[g] = cluster ? cluster->usd_per_gpu_hour(names[g]) : spec->on_demand_usd_per_hour;
      gpu_mem_bw_[g] = spec->memory_bandwidth_gbytes_per_s * 1e9;
      gpus_per_node_[g] = std::max(1, spec->gpus_per_node);
      gpu_nic_[g] = spec->inter_node_gbytes_per_s * 1e9;
    }
    if (profile && profile->find(names[g])) has_profile_[g] = 1;
  }
}

// Zones: the cluster's and the network's.
void sim_context::init_zones(const sim_inputs& in) {
  std::set<std::string> zone_set;
  if (in.cluster)
    for (const auto& z : in.cluster->zones) zone_set.insert(z.name);
  if (in.network) {
    for (const auto& [k, f] : in.network->fits) {
      zone_set.insert(k.first.zone);
      zone_set.insert(k.second.zone);
    }
    for (const auto& [k, p] : in.network->egress_usd_per_gb) {
      zone_set.insert(k.first);
      zone_set.insert(k.second);
    }
  }
  zone_names_.assign(zone_set.begin(), zone_set.end());
  for (size_t z = 0; z < zone_names_.size(); ++z) zone_index_.emplace(zone_names_[z], int(z));
}

// Sizes per layer (per GPU) by TP degree: llm_info where the profile has it, otherwise the
// shape's formulas (Korthikanti et al. for activations, TP without sequence parallelism).
void sim_context::init_layer_sizes(const config::model_profile* profile) {
  const auto& m = model_;
  const int L = num_layers_;
  const double act_elem_bytes = config::bytes_of(m.precision);
  act_bytes_per_sample_ = double(m.sequence) * m.hidden * act_elem_bytes;
  for (int ti = 0; ti < max_tp_index; ++ti) {
    const int tp = 1 << ti;
    auto& pp = params_prefix_[ti];
    auto& ap = act_prefix_[ti];
    pp.assign(L + 1, 0);
    ap.assign(L + 1, 0);
    const std::vector<config::layer_size>* sizes = nullptr;
    if (profile) {
      auto it = profile->sizes_by_tp.find(tp);
      if (it != profile->sizes_by_tp.end() && static_cast<int>(it->second.size()) == L) sizes = &it->second;
    }
    const double s = m.sequence, h = m.hidden, a = m.heads, v = m.vocabulary;
    for (int l = 0; l < L; ++l) {
      double params, act;
      if (sizes) {
        params = (*sizes)[l].params_floats;
        act = (*sizes)[l].act_mem_floats * 4.0;  // llm_info counts 4-byte units
      } else {
        switch (m.kind_of(l)) {
          case config::layer_kind::embedding:
            params = double(m.params_of_layer(l)) / tp;
            act = s * h * act_elem_bytes;
            break;
          case config::layer_kind::head:
            params = double(m.params_of_layer(l)) / tp;
            // logits in half precision, their fp32 softmax and its gradient
            act = s * v * (act_elem_bytes + 4.0) / tp + s * h * act_elem_bytes;
            break;
          default:
            params = double(m.params_of_block()) / tp;
            act = s * h * (10.0 + 24.0 / tp + 5.0 * a * s / (h * tp));
            break;
        }
      }
      pp[l + 1] = pp[l] + params;
      ap[l + 1] = ap[l] + act;
    }
  }
}

void sim_context::init_time_tables(const config::gpu_catalog& catalog, const config::model_profile* profile) {
  std::set<int> mbs_set(options_.micro_batches.begin(), options_.micro_batches.end());
  std::set<int> tp_set(options_.tp_degrees.begin(), options_.tp_degrees.end());
  if (profile)
    for (const auto& [name, gp] : profile->by_gpu)
      for (const auto& [mbs, by_tp] : gp.times) {
        mbs_set.insert(mbs);
        for (const auto& [tp, t] : by_tp) tp_set.insert(tp);
      }
  const int G = num_gpu_types();
  mbs_slot_.assign(max_mbs + 1, -1);
  int slots = 0;
  for (int mbs : mbs_set)
    if (mbs >= 1 && mbs <= max_mbs && slots < max_mbs_index) mbs_slot_[mbs] = slots++;
  tables_.assign(size_t(G) * max_tp_index * max_mbs_index, table{});
  for (int g = 0; g < G; ++g) {
    const config::gpu_profile* gp = profile ? profile->find(gpu_names_[g]) : nullptr;
    const config::gpu_spec* spec = catalog.find(gpu_names_[g]);
    for (int tp : tp_set) {
      const int ti = log2_index(tp);
      if (ti < 0 || ti >= max_tp_index) continue;
      for (int mbs : mbs_set) {
        const int mi = mbs >= 1 && mbs <= max_mbs ? mbs_slot_[mbs] : -1;
        if (mi < 0) continue;
        table& t = tables_[(size_t(g) * max_tp_index + ti) * max_mbs_index + mi];
        t.fwd.assign(num_layers_ + 1, 0);
        t.bwd.assign(num_layers_ + 1, 0);
        t.upd.assign(num_layers_ + 1, 0);
        if (gp && init_profiled_table(t, *gp, spec, tp, mbs)) continue;
        if (spec && spec->peak_fp16_tflops > 0) init_analytic_table(t, *spec, tp, mbs);
        else t.fwd.clear();
      }
    }
  }
}

bool sim_context::init_profiled_table(table& t, const config::gpu_profile& gp, const config::gpu_spec* spec,
                                      int tp, int mbs) const {
  const int L = num_layers_;
  const int ti = log2_index(tp);
  // The exact (mbs, tp), or the nearest profiled mbs at this tp scaled linearly; with
  // smoothing, every profiled mbs at this tp (see profile_smoothing_octaves).
  profiled_points points;
  for (const auto& [pm, by_tp] : gp.times) {
    auto it = by_tp.find(tp);
    if (it != by_tp.end() && static_cast<int>(it->second.size()) == L) points.push_back({pm, &it->second});
  }
  double scale = 1.0;
  const std::vector<config::layer_time>* times = gp.find(mbs, tp);
  if (times && static_cast<int>(times->size()) != L) times = nullptr;
  // Between two profiled sizes: the time per sequence (the efficiency) interpolated in
  // log2(mbs) between them, instead of one size scaled linearly.
  const std::vector<config::layer_time>* upper = nullptr;
  double upper_weight = 0, upper_scale = 1.0;
  if (!times) {
    const std::vector<config::layer_time>* below = nullptr;
    int lo = 0, hi = 0;
    for (const auto& [pm, v] : points) {
      if (pm < mbs && pm > lo) { lo = pm; below = v; }
      if (pm > mbs && (hi == 0 || pm < hi)) { hi = pm; upper = v; }
    }
    if (below && upper) {
      times = below;
      scale = double(mbs) / lo;
      upper_weight = std::log2(double(mbs) / lo) / std::log2(double(hi) / lo);
      upper_scale = double(mbs) / hi;
    } else {
      upper = nullptr;
      int best = 0;
      for (const auto& [pm, v] : points)
        if (best == 0 || std::abs(std::log2(double(pm) / mbs)) < std::abs(std::log2(double(best) / mbs))) best = pm;
      if (best == 0) return false;
      times = gp.find(best, tp);
      scale = double(mbs) / best;
    }
  }
  auto raw = [&](int l, bool forward) {
    const auto& a = (*times)[l];
    const double ta = (forward ? a.forward_s : a.backward_s) * scale;
    if (!upper) return ta;
    const auto& b = (*upper)[l];
    const double tb = (forward ? b.forward_s : b.backward_s) * upper_scale;
    return (1 - upper_weight) * ta + upper_weight * tb;
  };
  const double sigma = options_.profile_smoothing_octaves;
  const double opt_bytes = options_.optimizer_bytes_per_param;
  // update_s is the step of the profiled one-block model repeated on every layer: without the
  // device's memory bandwidth, it is scaled by each layer's parameters over a block's.
  const double block_params = params_prefix_[ti][2] - params_prefix_[ti][1];
  for (int l = 0; l < L; ++l) {
    const auto& lt = (*times)[l];
    const double lp = params_prefix_[ti][l + 1] - params_prefix_[ti][l];
    // Remove the per-layer overhead of profiling in isolation (never below a quarter).
    const double d = options_.profile_layer_overhead_s;
    const double fs = smoothed_time(points, l, true, mbs, sigma, raw(l, true));
    const double bs = smoothed_time(points, l, false, mbs, sigma, raw(l, false));
    const double f = std::max(fs - d, 0.25 * fs);
    const double b = std::max(bs - d, 0.25 * bs);
    t.fwd[l + 1] = t.fwd[l] + f * options_.compute_scale;
    t.bwd[l + 1] = t.bwd[l] + b * options_.compute_scale;
    // The step is memory bound: bytes moved per parameter over the device's memory bandwidth.
    t.upd[l + 1] = t.upd[l] + (spec && spec->memory_bandwidth_gbytes_per_s > 0
                                   ? lp * opt_bytes / (spec->memory_bandwidth_gbytes_per_s * 1e9 *
                                                       options_.memory_bandwidth_efficiency)
                                   : lt.update_s * (block_params > 0 ? lp / block_params : 1.0));
  }
  return true;
}

// FLOPs over an efficiency of peak, plus TP all-reduces inside the node (two per block
// forward, two backward, of the block's output).
void sim_context::init_analytic_table(table& t, const config::gpu_spec& spec, int tp, int mbs) const {
  const auto& m = model_;
  const int ti = log2_index(tp);
  t.analytic = true;
  const double flops_per_s = spec.peak_fp16_tflops * 1e12 * options_.analytic_efficiency;
  const double intra = std::max(1.0, spec.intra_node_gbytes_per_s) * 1e9;
  const double ar_bytes = double(mbs) * act_bytes_per_sample_;
  const double tp_comm = tp > 1 ? 2.0 * (tp - 1) / tp * ar_bytes / intra : 0.0;
  const double mem_bw = std::max(1.0, spec.memory_bandwidth_gbytes_per_s) * 1e9 * options_.memory_bandwidth_efficiency;
  const double opt_bytes = options_.optimizer_bytes_per_param;
  for (int l = 0; l < num_layers_; ++l) {
    const double flops = m.forward_flops_of_layer(l, mbs) / tp;
    const bool block = m.kind_of(l) == config::layer_kind::block;
    const double lp = params_prefix_[ti][l + 1] - params_prefix_[ti][l];
    double f = flops / flops_per_s + (block ? 2 * tp_comm : 0.0);
    // embedding lookups are memory bound
    if (m.kind_of(l) == config::layer_kind::embedding) f = 2.0 * mbs * act_bytes_per_sample_ / mem_bw;
    t.fwd[l + 1] = t.fwd[l] + f;
    t.bwd[l + 1] = t.bwd[l] + 2.0 * (f - (block ? 2 * tp_comm : 0.0)) + (block ? 2 * tp_comm : 0.0);
    t.upd[l + 1] = t.upd[l] + lp * opt_bytes / mem_bw;
  }
}

// Sailor's fits by (zone, GPU type, GPUs per node) pair (either direction), egress prices,
// and the cluster's links by zone pair.
void sim_context::init_network(const sim_inputs& in) {
  const int Z = num_zones(), G = num_gpu_types();
  egress_.assign(size_t(Z) * Z, 0);
  auto slot = [&](int za, int ga, int na, int zb, int gb, int nb) -> fit& {
    return fits_[((((size_t(za) * G + ga) * max_fit_n + na) * Z + zb) * G + gb) * max_fit_n + nb];
  };
  if (in.network) {
    use_fits_ = true;
    fits_.assign(size_t(Z) * G * max_fit_n * Z * G * max_fit_n, fit{});
    for (const auto& [k, f] : in.network->fits) {
      int za = zone_id(k.first.zone), zb = zone_id(k.second.zone);
      int ga = gpu_id(k.first.gpu_type), gb = gpu_id(k.second.gpu_type);
      int na = log2_index(k.first.gpus_per_node), nb = log2_index(k.second.gpus_per_node);
      if (za < 0 || zb < 0 || ga < 0 || gb < 0 || na < 0 || nb < 0 || na >= max_fit_n || nb >= max_fit_n) continue;
      slot(za, ga, na, zb, gb, nb) = fit{f.a, f.b, f.c, f.max_gbytes_per_s, true};
    }
    // Symmetric fill where only one direction is listed.
    for (int za = 0; za < Z; ++za)
      for (int ga = 0; ga < G; ++ga)
        for (int na = 0; na < max_fit_n; ++na)
          for (int zb = 0; zb < Z; ++zb)
            for (int gb = 0; gb < G; ++gb)
              for (int nb = 0; nb < max_fit_n; ++nb) {
                fit& f = slot(za, ga, na, zb, gb, nb);
                const fit& r = slot(zb, gb, nb, za, ga, na);
                if (!f.ok && r.ok) f = r;
              }
    for (const auto& [k, p] : in.network->egress_usd_per_gb) {
      int za = zone_id(k.first), zb = zone_id(k.second);
      if (za >= 0 && zb >= 0) egress_[size_t(za) * Z + zb] = p;
    }
  }
  if (in.cluster) {
    zone_links_.assign(size_t(Z) * Z, config::zone_link{});
    zone_link_ok_.assign(size_t(Z) * Z, 0);
    for (int a = 0; a < Z; ++a)
      for (int b = 0; b < Z; ++b) {
        const bool known = in.cluster->find_zone(zone_names_[a]) && in.cluster->find_zone(zone_names_[b]);
        if (!known) continue;
        config::zone_link l = in.cluster->link(zone_names_[a], zone_names_[b]);
        zone_links_[size_t(a) * Z + b] = l;
        zone_link_ok_[size_t(a) * Z + b] = 1;
        if (!in.network) egress_[size_t(a) * Z + b] = l.egress_usd_per_gb;
      }
  }
}

int sim_context::gpu_id(std::string_view type) const {
  for (size_t i = 0; i < gpu_names_.size(); ++i)
    if (gpu_names_[i] == type) return static_cast<int>(i);
  return -1;
}

int sim_context::zone_id(std::string_view zone) const {
  auto it = zone_index_.find(std::string(zone));
  return it == zone_index_.end() ? -1 : it->second;
}

const sim_context::table* sim_context::find_table(int gpu, int tp, int mbs) const {
  const int ti = log2_index(tp);
  const int mi = mbs >= 1 && mbs <= max_mbs && !mbs_slot_.empty() ? mbs_slot_[mbs] : -1;
  if (gpu < 0 || gpu >= num_gpu_types() || ti < 0 || ti >= max_tp_index || mi < 0) return nullptr;
  const table& t = tables_[(size_t(gpu) * max_tp_index + ti) * max_mbs_index + mi];
  return t.fwd.empty() ? nullptr : &t;
}

stage_compute sim_context::compute(int gpu, int tp, int mbs, int first, int end) const {
  stage_compute out;
  const table* t = find_table(gpu, tp, mbs);
  if (!t || first < 0 || end > num_layers_ || first >= end) return out;
  out.forward_s = t->fwd[end] - t->fwd[first];
  out.backward_s = t->bwd[end] - t->bwd[first];
  out.update_s = t->upd[end] - t->upd[first];
  out.ok = true;
  out.analytic = t->analytic;
  return out;
}

double sim_context::params_per_gpu(int tp, int first, int end) const {
  const int ti = log2_index(tp);
  if (ti < 0 || ti >= max_tp_index) return 0;
  return params_prefix_[ti][end] - params_prefix_[ti][first];
}

memory_breakdown sim_context::stage_memory(int gpu, int tp, int mbs, int first, int end,
                                           int in_flight, bool recompute) const {
  memory_breakdown mem;
  const int ti = log2_index(tp);
  if (ti < 0 || ti >= max_tp_index) return mem;
  const double params = params_prefix_[ti][end] - params_prefix_[ti][first];
  const bool mixed = job_.mixed_precision;
  const double weight_bytes = mixed ? config::bytes_of(model_.precision) : 4.0;
  mem.parameters = params * weight_bytes;
  mem.gradients = params * (mixed ? options_.mixed_grad_memory_bytes_per_param : 4.0);
  mem.optimizer_states = params * optimizer_state_bytes(job_.optimizer, mixed);
  const double act_per_sample = act_prefix_[ti][end] - act_prefix_[ti][first];
  if (recompute) {
    // Only each micro-batch's stage input is kept; one micro-batch's layers are rebuilt at a
    // time during its backward, at most the largest layer's worth.
    double largest = 0;
    for (int l = first; l < end; ++l) largest = std::max(largest, act_prefix_[ti][l + 1] - act_prefix_[ti][l]);
    mem.activations = (double(in_flight) * act_bytes_per_sample_ + largest) * mbs;
  } else {
    mem.activations = double(in_flight) * act_per_sample * mbs * options_.activation_peak_factor;
  }
  // Send/receive buffers of the boundary activations and one gradient bucket.
  mem.communication_buffers = 2.0 * act_bytes_per_sample_ * mbs +
                              std::min(options_.bucket_bytes, params * options_.grad_bytes_per_param);
  mem.framework = options_.framework_overhead_bytes;
  (void)gpu;
  return mem;
}

}  // namespace sailor::simulator

namespace sailor::simulator {

// Sailor's planner's memory formula, a second opinion on whether a replica fits (issue 13):
// params x 24 B, the forward's growth of every micro-batch in flight (no backward transients,
// no send/receive buffers) and 3 GB for the framework (none where ours counts none). With recomputation (which Sailor's
// planner does not have) only the stage inputs and one rebuilt layer, as ours counts them.
double sim_context::sailor_stage_memory(int tp, int mbs, int first, int end, int in_flight,
                                                           bool recompute) const {
  const int ti = log2_index(tp);
  if (ti < 0 || ti >= max_tp_index) return 0;
  const double params = params_prefix_[ti][end] - params_prefix_[ti][first];
  double act = 0;
  if (recompute) {
    double largest = 0;
    for (int l = first; l < end; ++l) largest = std::max(largest, act_prefix_[ti][l + 1] - act_prefix_[ti][l]);
    act = (double(in_flight) * act_bytes_per_sample_ + largest) * mbs;
  } else {
    act = double(in_flight) * (act_prefix_[ti][end] - act_prefix_[ti][first]) * mbs;
  }
  // The framework reserve is Megatron's on CUDA; devices for which ours counts none (CPU ranks:
  // framework_overhead_bytes = 0) have none by this check either.
  const double framework = std::min(options_.sailor_framework_bytes, options_.framework_overhead_bytes);
  return params * options_.sailor_bytes_per_param + act + framework;
}

double sim_context::stage_memory_need(int gpu, int tp, int mbs, int first, int end, int in_flight,
                                      bool recompute) const {
  const double ours = stage_memory(gpu, tp, mbs, first, end, in_flight, recompute).total();
  if (!options_.sailor_memory_check) return ours;
  return std::max(ours, sailor_stage_memory(tp, mbs, first, end, in_flight, recompute));
}

}  // namespace sailor::simulator
