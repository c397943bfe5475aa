#include "tables.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace sailor::planner::detail {

tables::tables(const problem& prob, const simulator::sim_context& ctx) : ctx_(ctx) {
  num_layers_ = ctx.num_layers();
  // GPU types: those available that the simulator can time (a profile, or the catalog).
  std::set<std::string> names;
  for (const auto& z : prob.cluster.zones)
    for (const auto& [g, n] : z.gpus)
      if (n > 0 && ctx.gpu_id(g) >= 0) names.insert(g);
  gpu_names_.assign(names.begin(), names.end());
  std::set<int> mbs_set;
  for (int gi = 0; gi < int(gpu_names_.size()); ++gi) {
    const auto& name = gpu_names_[gi];
    const int sid = ctx.gpu_id(name);
    sim_gpu_.push_back(sid);
    const config::gpu_spec* spec = prob.cluster.gpus.find(name);
    memory_.push_back(ctx.gpu_memory_bytes(sid));
    per_node_.push_back(spec ? std::max(1, spec->gpus_per_node) : 1);
    usd_per_s_.push_back(ctx.usd_per_gpu_hour(sid) / 3600.0);
    // Profiled (micro-batch, TP) pairs where the profile has this type (as Sailor searches);
    // otherwise the simulator's analytic model at small micro-batches.
    std::vector<std::pair<int, int>> pairs;
    if (const config::gpu_profile* prof = prob.profile.find(name)) {
      for (const auto& [mbs, by_tp] : prof->times)
        for (const auto& [tp, layers] : by_tp) pairs.emplace_back(mbs, tp);
    } else {
      for (int mbs : {1, 2, 4, 8})
        for (int tp : {1, 2, 4, 8}) pairs.emplace_back(mbs, tp);
    }
    for (auto [mbs, tp] : pairs) {
      if (tp < 1 || mbs < 1) continue;
      if (prob.job.max_micro_batch > 0 && mbs > prob.job.max_micro_batch) continue;
      auto whole = ctx.compute(sid, tp, mbs, 0, num_layers_);
      if (!whole.ok) continue;
      config_table t;
      t.gpu = gi;
      t.tp = tp;
      t.mbs = mbs;
      int n = num_layers_;
      t.fwd.assign(n + 1, 0);
      t.bwd.assign(n + 1, 0);
      t.upd.assign(n + 1, 0);
      for (int l = 1; l <= n; ++l) {
        auto c = ctx.compute(sid, tp, mbs, 0, l);
        t.fwd[l] = c.forward_s;
        t.bwd[l] = c.backward_s;
        t.upd[l] = c.update_s;
      }
      configs_.push_back(std::move(t));
      mbs_set.insert(mbs);
    }
  }
  micro_batches_.assign(mbs_set.begin(), mbs_set.end());
  std::sort(configs_.begin(), configs_.end(), [](const config_table& a, const config_table& b) {
    return std::tie(a.gpu, a.mbs, a.tp) < std::tie(b.gpu, b.mbs, b.tp);
  });
  const size_t cells = gpu_names_.size() * micro_batches_.size();
  tps_.assign(cells, {});
  by_gpu_mbs_.assign(cells, {});
  for (const auto& c : configs_) {
    const size_t cell = size_t(c.gpu) * micro_batches_.size() + size_t(mbs_index(c.mbs));
    by_gpu_mbs_[cell].push_back(&c);
    if (c.tp <= per_node_[c.gpu] && per_node_[c.gpu] % c.tp == 0) tps_[cell].push_back(c.tp);
  }
}

int tables::mbs_index(int mbs) const {
  auto it = std::lower_bound(micro_batches_.begin(), micro_batches_.end(), mbs);
  if (it == micro_batches_.end() || *it != mbs) return -1;
  return int(it - micro_batches_.begin());
}

int tables::gpu_index(const std::string& name) const {
  auto it = std::find(gpu_names_.begin(), gpu_names_.end(), name);
  return it == gpu_names_.end() ? -1 : int(it - gpu_names_.begin());
}

const config_table* tables::find(int gpu, int tp, int mbs) const {
  const int mi = mbs_index(mbs);
  if (gpu < 0 || gpu >= int(gpu_names_.size()) || mi < 0) return nullptr;
  for (const config_table* c : by_gpu_mbs_[size_t(gpu) * micro_batches_.size() + size_t(mi)])
    if (c->tp == tp) return c;
  return nullptr;
}

const std::vector<int>& tables::tps(int gpu, int mbs) const {
  const int mi = mbs_index(mbs);
  if (gpu < 0 || gpu >= int(gpu_names_.size()) || mi < 0) return no_tps_;
  return tps_[size_t(gpu) * micro_batches_.size() + size_t(mi)];
}

double tables::stage_memory(const config_table& t, int a, int e, bool recompute,
                            int in_flight) const {
  // Both checks (ours and Sailor's formula, sim_options::sailor_memory_check) must fit.
  return ctx_.stage_memory_need(sim_gpu_[t.gpu], t.tp, t.mbs, a, e, in_flight, recompute);
}

double tables::stage_memory_ours(const config_table& t, int a, int e, bool recompute,
                                 int in_flight) const {
  return ctx_.stage_memory(sim_gpu_[t.gpu], t.tp, t.mbs, a, e, in_flight, recompute).total();
}

double tables::boundary_bytes(int e, int mbs) const {
  if (e <= 0 || e >= num_layers_) return 0;
  return ctx_.activation_bytes(mbs);
}

double network::transfer_s(const std::string& za, const std::string& ga, int na,
                           const std::string& zb, const std::string& gb, int nb,
                           double bytes) const {
  if (bytes <= 0) return 0;
  double t = ctx_.transfer_s(endpoint_of(za, ga, na), endpoint_of(zb, gb, nb), bytes);
  return t < 0 ? 1e9 : t;
}

double network::egress_usd_per_gb(const std::string& za, const std::string& zb) const {
  return ctx_.egress_usd_per_gb(ctx_.zone_id(za), ctx_.zone_id(zb));
}

}  // namespace sailor::planner::detail
