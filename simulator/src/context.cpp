// The simulation context: tables built once, O(1) queries after.
#include "sailor/simulator/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

namespace sailor::simulator {

namespace {

sailor::error make_error(error_kind kind, std::string field, std::string message) {
  sailor::error e;
  e.kind = kind;
  e.field = std::move(field);
  e.message = std::move(message);
  return e;
}

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

result<sim_context> sim_context::make(const sim_inputs& in, sim_options options) {
  sim_context c;
  c.options_ = std::move(options);
  c.model_ = in.model;
  c.job_ = in.job;
  const auto& m = in.model;
  if (m.num_layers <= 0 || m.hidden <= 0 || m.heads <= 0 || m.sequence <= 0 || m.vocabulary <= 0)
    return make_error(error_kind::invalid_input, "model",
                      "model shape needs num_layers, hidden, heads, sequence and vocabulary > 0");
  if (!in.cluster && !in.network)
    return make_error(error_kind::invalid_input, "network", "neither a cluster nor Sailor's network fits given");
  const int L = m.num_all_layers();
  c.num_layers_ = L;

  // Sailor profiles some models (Llama) with the final norm as a layer of its own, L+3 layers
  // in all; we count it with the head, so fold the last two layers into one.
  std::optional<config::model_profile> folded;
  if (in.profile) {
    folded = *in.profile;
    for (auto& [name, gp] : folded->by_gpu)
      for (auto& [mbs, by_tp] : gp.times)
        for (auto& [tp, v] : by_tp)
          if (static_cast<int>(v.size()) == L + 1) {
            v[L - 1].forward_s += v[L].forward_s;
            v[L - 1].backward_s += v[L].backward_s;
            v.pop_back();
          }
    for (auto& [tp, v] : folded->sizes_by_tp)
      if (static_cast<int>(v.size()) == L + 1) {
        v[L - 1].params_floats += v[L].params_floats;
        v[L - 1].act_mem_floats += v[L].act_mem_floats;
        v[L - 1].act_output_floats = v[L].act_output_floats;
        v.pop_back();
      }
  }
  const config::model_profile* profile = folded ? &*folded : nullptr;

  // GPU types: the catalog's, plus any profiled type not in it.
  config::gpu_catalog catalog = in.cluster ? in.cluster->gpus : in.gpus;
  for (const auto& g : in.gpus.gpus())
    if (!catalog.find(g.name)) catalog.upsert(g);
  std::vector<std::string> names;
  for (const auto& g : catalog.gpus()) names.push_back(g.name);
  if (profile)
    for (const auto& [name, p] : profile->by_gpu)
      if (!catalog.find(name)) names.push_back(name);
  c.gpu_names_ = names;
  const int G = static_cast<int>(names.size());
  c.gpu_memory_.assign(G, 0);
  c.gpu_price_.assign(G, 0);
  c.gpu_mem_bw_.assign(G, 0);
  c.has_profile_.assign(G, 0);
  c.gpus_per_node_.assign(G, 1);
  c.gpu_nic_.assign(G, 0);
  for (int g = 0; g < G; ++g) {
    if (const auto* spec = catalog.find(names[g])) {
      c.gpu_memory_[g] = double(spec->memory_bytes);
      c.gpu_price_[g] = in.cluster ? in.cluster->usd_per_gpu_hour(names[g])
                                   : spec->on_demand_usd_per_hour;
      c.gpu_mem_bw_[g] = spec->memory_bandwidth_gbytes_per_s * 1e9;
      c.gpus_per_node_[g] = std::max(1, spec->gpus_per_node);
      c.gpu_nic_[g] = spec->inter_node_gbytes_per_s * 1e9;
    }
    if (profile && profile->find(names[g])) c.has_profile_[g] = 1;
  }

  // Zones: the cluster's and the network's.
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
  c.zone_names_.assign(zone_set.begin(), zone_set.end());
  for (size_t z = 0; z < c.zone_names_.size(); ++z) c.zone_index_.emplace(c.zone_names_[z], int(z));
  const int Z = static_cast<int>(c.zone_names_.size());

  // Sizes per layer (per GPU) by TP degree: llm_info where the profile has it, otherwise the
  // shape's formulas (Korthikanti et al. for activations, TP without sequence parallelism).
  const double act_elem_bytes = config::bytes_of(m.precision);
  c.act_bytes_per_sample_ = double(m.sequence) * m.hidden * act_elem_bytes;
  for (int ti = 0; ti < max_tp_index; ++ti) {
    const int tp = 1 << ti;
    auto& pp = c.params_prefix_[ti];
    auto& ap = c.act_prefix_[ti];
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
            params = double(m.params_of_layer(l)) / tp + (m.tied_embeddings ? 0 : 0);
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

  // Time tables.
  std::set<int> mbs_set(c.options_.micro_batches.begin(), c.options_.micro_batches.end());
  std::set<int> tp_set(c.options_.tp_degrees.begin(), c.options_.tp_degrees.end());
  if (profile)
    for (const auto& [name, gp] : profile->by_gpu)
      for (const auto& [mbs, by_tp] : gp.times) {
        mbs_set.insert(mbs);
        for (const auto& [tp, t] : by_tp) tp_set.insert(tp);
      }
  c.tables_.assign(size_t(G) * max_tp_index * max_mbs_index, table{});
  const double opt_bytes = c.options_.optimizer_bytes_per_param;
  for (int g = 0; g < G; ++g) {
    const config::gpu_profile* gp = profile ? profile->find(names[g]) : nullptr;
    const config::gpu_spec* spec = catalog.find(names[g]);
    for (int tp : tp_set) {
      const int ti = log2_index(tp);
      if (ti < 0 || ti >= max_tp_index) continue;
      for (int mbs : mbs_set) {
        const int mi = log2_index(mbs);
        if (mi < 0 || mi >= max_mbs_index) continue;
        table& t = c.tables_[(size_t(g) * max_tp_index + ti) * max_mbs_index + mi];
        // Profile: exact (mbs, tp), or the nearest profiled mbs at this tp scaled linearly;
        // with smoothing, every profiled mbs at this tp (see profile_smoothing_octaves).
        const std::vector<config::layer_time>* times = nullptr;
        double scale = 1.0;
        std::vector<std::pair<int, const std::vector<config::layer_time>*>> points;
        if (gp)
          for (const auto& [pm, by_tp] : gp->times) {
            auto it = by_tp.find(tp);
            if (it != by_tp.end() && static_cast<int>(it->second.size()) == L) points.push_back({pm, &it->second});
          }
        const double sigma = c.options_.profile_smoothing_octaves;
        // Weighted least squares of t = a + b * mbs over the profiled sizes (weights: Gaussian
        // in octaves over t^2, i.e. relative error); `raw` when it cannot be fitted.
        auto smoothed = [&](int l, bool forward, double raw) {
          if (sigma <= 0 || points.size() < 2) return raw;
          double S = 0, Sx = 0, Sy = 0, Sxx = 0, Sxy = 0;
          for (const auto& [pm, v] : points) {
            const double t = forward ? (*v)[l].forward_s : (*v)[l].backward_s;
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
          const double v = a + b * mbs;
          // A fit far from the data it smooths is not trusted beyond a factor of two.
          return std::clamp(v, 0.5 * raw, 2.0 * raw);
        };
        if (gp) {
          times = gp->find(mbs, tp);
          if (times && static_cast<int>(times->size()) != L) times = nullptr;
          if (!times) {
            int best = 0;
            for (const auto& [pm, by_tp] : gp->times) {
              auto it = by_tp.find(tp);
              if (it == by_tp.end() || static_cast<int>(it->second.size()) != L) continue;
              if (best == 0 || std::abs(std::log2(double(pm) / mbs)) < std::abs(std::log2(double(best) / mbs))) best = pm;
            }
            if (best > 0) {
              times = gp->find(best, tp);
              scale = double(mbs) / best;
            }
          }
        }
        t.fwd.assign(L + 1, 0);
        t.bwd.assign(L + 1, 0);
        t.upd.assign(L + 1, 0);
        if (times) {
          // update_s is the step of the profiled one-block model repeated on every layer:
          // scale it by each layer's parameters over a block's.
          const double block_params = c.params_prefix_[ti][2] - c.params_prefix_[ti][1];
          for (int l = 0; l < L; ++l) {
            const auto& lt = (*times)[l];
            const double lp = c.params_prefix_[ti][l + 1] - c.params_prefix_[ti][l];
            // Remove the per-layer overhead of profiling in isolation (never below a quarter).
            const double d = c.options_.profile_layer_overhead_s;
            const double fs = smoothed(l, true, lt.forward_s * scale);
            const double bs = smoothed(l, false, lt.backward_s * scale);
            const double f = std::max(fs - d, 0.25 * fs);
            const double b = std::max(bs - d, 0.25 * bs);
            t.fwd[l + 1] = t.fwd[l] + f * c.options_.compute_scale;
            t.bwd[l + 1] = t.bwd[l] + b * c.options_.compute_scale;
            // The profiled update_s is the step of the small profiled model, not of this
            // layer: the step is memory bound, so it is modelled from bytes moved per
            // parameter over the device's memory bandwidth.
            (void)block_params;
            t.upd[l + 1] = t.upd[l] + (spec && spec->memory_bandwidth_gbytes_per_s > 0
                                           ? lp * opt_bytes / (spec->memory_bandwidth_gbytes_per_s * 1e9 *
                                                               c.options_.memory_bandwidth_efficiency)
                                           : lt.update_s * (block_params > 0 ? lp / block_params : 1.0));
          }
        } else if (spec && spec->peak_fp16_tflops > 0) {
          // Analytic: FLOPs over an efficiency of peak, plus TP all-reduces inside the node
          // (two per block forward, two backward, of the block's output).
          t.analytic = true;
          const double flops_per_s = spec->peak_fp16_tflops * 1e12 * c.options_.analytic_efficiency;
          const double intra = std::max(1.0, spec->intra_node_gbytes_per_s) * 1e9;
          const double ar_bytes = double(mbs) * c.act_bytes_per_sample_;
          const double tp_comm = tp > 1 ? 2.0 * (tp - 1) / tp * ar_bytes / intra : 0.0;
          const double mem_bw = std::max(1.0, spec->memory_bandwidth_gbytes_per_s) * 1e9 *
                                c.options_.memory_bandwidth_efficiency;
          for (int l = 0; l < L; ++l) {
            const double flops = m.forward_flops_of_layer(l, mbs) / tp;
            const bool block = m.kind_of(l) == config::layer_kind::block;
            const double lp = c.params_prefix_[ti][l + 1] - c.params_prefix_[ti][l];
            double f = flops / flops_per_s + (block ? 2 * tp_comm : 0.0);
            // embedding lookups are memory bound
            if (m.kind_of(l) == config::layer_kind::embedding) f = 2.0 * mbs * c.act_bytes_per_sample_ / mem_bw;
            t.fwd[l + 1] = t.fwd[l] + f;
            t.bwd[l + 1] = t.bwd[l] + 2.0 * (f - (block ? 2 * tp_comm : 0.0)) + (block ? 2 * tp_comm : 0.0);
            t.upd[l + 1] = t.upd[l] + lp * opt_bytes / mem_bw;
          }
        } else {
          t.fwd.clear();
        }
      }
    }
  }

  // Network.
  c.egress_.assign(size_t(Z) * Z, 0);
  c.intra_zone_latency_.assign(Z, 0);
  if (in.network) {
    c.use_fits_ = true;
    c.fits_.assign(size_t(Z) * G * max_fit_n * Z * G * max_fit_n, fit{});
    auto zid = [&](const std::string& z) { return c.zone_id(z); };
    for (const auto& [k, f] : in.network->fits) {
      int za = zid(k.first.zone), zb = zid(k.second.zone);
      int ga = c.gpu_id(k.first.gpu_type), gb = c.gpu_id(k.second.gpu_type);
      int na = log2_index(k.first.gpus_per_node), nb = log2_index(k.second.gpus_per_node);
      if (za < 0 || zb < 0 || ga < 0 || gb < 0 || na < 0 || nb < 0 || na >= max_fit_n || nb >= max_fit_n) continue;
      fit& slot = c.fits_[((((size_t(za) * G + ga) * max_fit_n + na) * Z + zb) * G + gb) * max_fit_n + nb];
      slot = fit{f.a, f.b, f.c, f.max_gbytes_per_s, true};
    }
    // Symmetric fill where only one direction is listed.
    for (int za = 0; za < Z; ++za)
      for (int ga = 0; ga < G; ++ga)
        for (int na = 0; na < max_fit_n; ++na)
          for (int zb = 0; zb < Z; ++zb)
            for (int gb = 0; gb < G; ++gb)
              for (int nb = 0; nb < max_fit_n; ++nb) {
                fit& f = c.fits_[((((size_t(za) * G + ga) * max_fit_n + na) * Z + zb) * G + gb) * max_fit_n + nb];
                const fit& r = c.fits_[((((size_t(zb) * G + gb) * max_fit_n + nb) * Z + za) * G + ga) * max_fit_n + na];
                if (!f.ok && r.ok) f = r;
              }
    for (const auto& [k, p] : in.network->egress_usd_per_gb) {
      int za = zid(k.first), zb = zid(k.second);
      if (za >= 0 && zb >= 0) c.egress_[size_t(za) * Z + zb] = p;
    }
  }
  if (in.cluster) {
    c.zone_links_.assign(size_t(Z) * Z, config::zone_link{});
    c.zone_link_ok_.assign(size_t(Z) * Z, 0);
    for (int a = 0; a < Z; ++a)
      for (int b = 0; b < Z; ++b) {
        const bool known = in.cluster->find_zone(c.zone_names_[a]) && in.cluster->find_zone(c.zone_names_[b]);
        if (!known) continue;
        config::zone_link l = in.cluster->link(c.zone_names_[a], c.zone_names_[b]);
        c.zone_links_[size_t(a) * Z + b] = l;
        c.zone_link_ok_[size_t(a) * Z + b] = 1;
        if (!in.network) c.egress_[size_t(a) * Z + b] = l.egress_usd_per_gb;
      }
  }
  return c;
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
  const int ti = log2_index(tp), mi = log2_index(mbs);
  if (gpu < 0 || gpu >= num_gpu_types() || ti < 0 || ti >= max_tp_index || mi < 0 || mi >= max_mbs_index)
    return nullptr;
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
