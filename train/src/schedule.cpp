#include "schedule.hpp"

#include <sailor/config/load.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace sailor::train {

int world_size(const config::plan& p) {
  int n = 0;
  for (const auto& s : p.stages)
    for (const auto& r : s.replicas) n += std::max(1, r.tp);
  return n;
}

int global_rank_of(const config::plan& p, const rank_role& role) {
  int n = 0;
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& replicas = p.stages[s].replicas;
    for (int j = 0; j < static_cast<int>(replicas.size()); ++j) {
      int tp = std::max(1, replicas[j].tp);
      if (s == role.stage && j == role.replica)
        return role.tp_rank >= 0 && role.tp_rank < tp ? n + role.tp_rank : -1;
      n += tp;
    }
  }
  return -1;
}

rank_role role_of(const config::plan& p, int rank) {
  int n = 0;
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& replicas = p.stages[s].replicas;
    for (int j = 0; j < static_cast<int>(replicas.size()); ++j) {
      int tp = std::max(1, replicas[j].tp);
      if (rank < n + tp) return {s, j, rank - n};
      n += tp;
    }
  }
  return {-1, -1, -1};
}

int micro_batches_per_iteration(const config::plan& p) {
  return p.micro_batch > 0 ? p.global_batch / p.micro_batch : 0;
}

std::vector<std::vector<std::vector<schedule_op>>> one_f_one_b(const config::plan& p) {
  const int stages = p.num_stages();
  const int m_total = micro_batches_per_iteration(p);
  constexpr long never = std::numeric_limits<long>::max();
  struct worker {
    int stage, replica;
    std::vector<int> micro_batches;
    std::size_t next_f = 0, next_b = 0;
    long busy_until = 0;
  };
  std::vector<worker> workers;
  std::vector<std::vector<std::vector<schedule_op>>> out(stages);
  for (int s = 0; s < stages; ++s) {
    int replicas = static_cast<int>(p.stages[s].replicas.size());
    out[s].resize(replicas);
    for (int j = 0; j < replicas; ++j) {
      worker w{s, j, {}};
      for (int m = j; m < m_total; m += replicas) w.micro_batches.push_back(m);
      workers.push_back(std::move(w));
    }
  }
  std::vector<std::vector<long>> done_f(stages, std::vector<long>(m_total, never));
  std::vector<std::vector<long>> done_b(stages, std::vector<long>(m_total, never));
  std::size_t remaining = 0;
  for (const auto& w : workers) remaining += 2 * w.micro_batches.size();
  // Each step some op becomes ready (see the header); the bound only guards a broken plan.
  const long limit = 8L * static_cast<long>(remaining + 4) * (stages + 1);
  for (long t = 0; remaining > 0 && t < limit; ++t) {
    for (auto& w : workers) {
      if (w.busy_until > t) continue;
      const int s = w.stage;
      const std::size_t n = w.micro_batches.size();
      const std::size_t cap = static_cast<std::size_t>(stages - s);
      if (w.next_b < w.next_f) {
        int m = w.micro_batches[w.next_b];
        bool ready = done_f[s][m] <= t && (s == stages - 1 || done_b[s + 1][m] <= t);
        if (ready) {
          out[s][w.replica].push_back({false, m});
          done_b[s][m] = t + 2;
          w.busy_until = t + 2;
          ++w.next_b;
          --remaining;
          continue;
        }
      }
      if (w.next_f < n && w.next_f - w.next_b < cap) {
        int m = w.micro_batches[w.next_f];
        if (s == 0 || done_f[s - 1][m] <= t) {
          out[s][w.replica].push_back({true, m});
          done_f[s][m] = t + 1;
          w.busy_until = t + 1;
          ++w.next_f;
          --remaining;
        }
      }
    }
  }
  return out;
}

stage_pieces pieces_of(const config::plan& p, int stage) {
  stage_pieces out;
  std::set<int> tps;
  for (const auto& r : p.stages[stage].replicas) tps.insert(std::max(1, r.tp));
  for (int tp : tps) out.units = std::lcm(out.units, tp);
  std::set<int> cuts = {0, out.units};
  for (int tp : tps)
    for (int k = 1; k < tp; ++k) cuts.insert(k * out.units / tp);
  std::vector<int> c(cuts.begin(), cuts.end());
  for (std::size_t i = 0; i + 1 < c.size(); ++i) out.bounds.push_back({c[i], c[i + 1]});
  return out;
}

namespace {

// Marks the world and data-parallel groups whose members span zones hierarchical and puts
// their zone groups before them; "world.zones" stays only when the world spans zones.
std::vector<group_spec> by_zone(const config::plan& p, std::vector<group_spec> groups) {
  auto zone_of = [&](int rank) {
    auto r = role_of(p, rank);
    return p.stages[r.stage].replicas[r.replica].zone;
  };
  std::vector<group_spec> out;
  for (auto& g : groups) {
    std::vector<std::string> zones;
    for (int m : g.members) zones.push_back(zone_of(m));
    const std::set<std::string> distinct(zones.begin(), zones.end());
    const bool spans = distinct.size() > 1;
    if (g.name == "world.zones" && !spans) continue;
    if (!spans || g.name == "world" || g.name.rfind("tp.", 0) == 0) {
      out.push_back(std::move(g));
      continue;
    }
    for (const auto& z : distinct) {
      group_spec zone_group{g.name + "@" + z, {}, g.stage, {}, false, {}, {}};
      for (std::size_t i = 0; i < g.members.size(); ++i)
        if (zones[i] == z) zone_group.members.push_back(g.members[i]);
      zone_group.zone_group_of = g.name;
      if (zone_group.members.size() > 1) out.push_back(std::move(zone_group));
    }
    g.hierarchical = true;
    g.zones = std::move(zones);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

region_layout regions_of(const config::plan& p) {
  region_layout out;
  if (!p.local_sgd) return out;
  out.regions = static_cast<int>(p.local_sgd->regions.size());
  for (const auto& s : p.stages) {
    std::vector<int> of;
    std::vector<int> lead(out.regions, -1);
    for (int j = 0; j < static_cast<int>(s.replicas.size()); ++j) {
      const int r = p.local_sgd->region_of(s.replicas[j].zone);
      of.push_back(r);
      if (r >= 0 && lead[r] < 0) lead[r] = j;
    }
    out.region_of.push_back(std::move(of));
    out.leader.push_back(std::move(lead));
  }
  return out;
}

namespace {

void add_tp_groups(const config::plan& p, std::vector<group_spec>& groups) {
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& replicas = p.stages[s].replicas;
    for (int j = 0; j < static_cast<int>(replicas.size()); ++j) {
      group_spec g{"tp.s" + std::to_string(s) + ".r" + std::to_string(j), {}, -1, {}, false, {}, {}};
      for (int k = 0; k < std::max(1, replicas[j].tp); ++k)
        g.members.push_back(global_rank_of(p, {s, j, k}));
      groups.push_back(std::move(g));
    }
  }
}

// Synchronous data parallelism: one group per stage and set of pieces, over every replica.
void add_dp_groups(const config::plan& p, std::vector<group_spec>& groups) {
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& replicas = p.stages[s].replicas;
    if (replicas.size() < 2) continue;
    auto pieces = pieces_of(p, s);
    std::map<std::vector<int>, std::size_t> by_members;
    for (int piece = 0; piece < static_cast<int>(pieces.bounds.size()); ++piece) {
      std::vector<int> members;
      for (int j = 0; j < static_cast<int>(replicas.size()); ++j) {
        int tp = std::max(1, replicas[j].tp);
        int holder = pieces.bounds[piece].first * tp / pieces.units;
        members.push_back(global_rank_of(p, {s, j, holder}));
      }
      auto it = by_members.find(members);
      if (it == by_members.end()) {
        group_spec g{"dp.s" + std::to_string(s) + ".p" + std::to_string(piece), members, s,
                     {piece}, false, {}, {}};
        by_members[members] = groups.size();
        groups.push_back(std::move(g));
      } else {
        groups[it->second].pieces.push_back(piece);
      }
    }
  }
}

// DiLoCo (every replica of a stage at one TP degree, so piece k is TP rank k's shard): per
// stage, TP rank and region, the replicas that reduce gradients every iteration and receive
// the outer average from their leader; then the leaders of every region; then the regions.
void add_local_sgd_groups(const config::plan& p, std::vector<group_spec>& groups) {
  const auto layout = regions_of(p);
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& replicas = p.stages[s].replicas;
    const int tp = std::max(1, replicas.front().tp);
    const std::string stage = "s" + std::to_string(s) + ".p";
    for (int k = 0; k < tp; ++k) {
      group_spec outer{"outer." + stage + std::to_string(k), {}, s, {k}, false, {}, {}};
      outer.use = group_spec::purpose::outer_exchange;
      for (int r = 0; r < layout.regions; ++r) {
        std::vector<int> members;
        for (int j = 0; j < static_cast<int>(replicas.size()); ++j)
          if (layout.region_of[s][j] == r) members.push_back(global_rank_of(p, {s, j, k}));
        if (members.empty()) continue;
        outer.members.push_back(members.front());
        if (members.size() < 2) continue;
        const std::string suffix = stage + std::to_string(k) + ".g" + std::to_string(r);
        group_spec dp{"dp." + suffix, members, s, {k}, false, {}, {}};
        dp.region = r;
        group_spec sync = dp;
        sync.name = "sync." + suffix;
        sync.use = group_spec::purpose::region_sync;
        groups.push_back(std::move(dp));
        groups.push_back(std::move(sync));
      }
      std::sort(outer.members.begin(), outer.members.end());
      groups.push_back(std::move(outer));
    }
  }
  for (int r = 0; r < layout.regions; ++r) {
    group_spec region{"region.g" + std::to_string(r), {}, -1, {}, false, {}, {}};
    region.use = group_spec::purpose::region;
    region.region = r;
    for (int rank = 0; rank < world_size(p); ++rank)
      if (layout.region_of_role(role_of(p, rank)) == r) region.members.push_back(rank);
    groups.push_back(std::move(region));
  }
}

}  // namespace

std::vector<group_spec> groups_of(const config::plan& p) {
  std::vector<group_spec> groups;
  group_spec world{"world", {}, -1, {}, false, {}, {}};
  for (int r = 0; r < world_size(p); ++r) world.members.push_back(r);
  groups.push_back(std::move(world));
  add_tp_groups(p, groups);
  if (p.local_sgd) add_local_sgd_groups(p, groups);
  else add_dp_groups(p, groups);
  group_spec world_zones{"world.zones", groups.front().members, -1, {}, false, {}, {}};
  groups.push_back(std::move(world_zones));
  return by_zone(p, std::move(groups));
}

status validate_architecture(const config::model_shape& model) {
  auto bad = [](std::string field, std::string message) {
    return status(error::of(error_kind::unimplemented, "", std::move(field), std::move(message)));
  };
  const std::string family = config::to_string(model.arch);
  const bool llama = model.arch == config::architecture::llama;
  if (llama && model.learned_positions)
    return bad("learned_positions", "llama uses rotary positions; learned positions are implemented "
                                    "for gpt2 and opt");
  if (!llama && !model.learned_positions)
    return bad("learned_positions", "rotary positions are implemented for llama only (architecture: " +
                                        family + ")");
  if (llama != model.gated_mlp)
    return bad("gated_mlp", llama ? "llama's MLP is SwiGLU (gated_mlp: true)"
                                  : "a gated MLP is implemented for llama only (architecture: " + family + ")");
  if (llama && model.bias) return bad("bias", "llama has no biases (bias: false)");
  if (!llama && model.kv() != model.heads)
    return bad("kv_heads", "grouped-query attention is implemented for llama only (architecture: " +
                               family + ")");
  if (llama && (model.hidden / model.heads) % 2)
    return bad("heads", "rotary positions need an even head size (hidden / heads)");
  if (model.heads % model.kv()) return bad("kv_heads", "must divide heads");
  if (model.gelu_tanh && model.arch != config::architecture::gpt2)
    return bad("activation", "gelu_new is gpt2's (architecture: " + family + ")");
  return {};
}

status validate_for_training(const config::model_shape& model, const config::plan& plan) {
  auto bad = [](std::string field, std::string message) {
    return status(error::invalid_input(std::move(field), std::move(message)));
  };
  if (auto st = validate_architecture(model)) return st;
  if (plan.stages.empty()) return bad("stages", "a plan needs at least one stage");
  if (plan.micro_batch <= 0 || plan.global_batch <= 0 || plan.global_batch % plan.micro_batch)
    return bad("global_batch", "must be a positive multiple of micro_batch");
  int next = 0;
  for (int s = 0; s < plan.num_stages(); ++s) {
    const auto& st = plan.stages[s];
    std::string where = "stages[" + std::to_string(s) + "]";
    if (st.first_layer != next || st.num_layers <= 0)
      return bad(where + ".first_layer", "stages must cover consecutive layers from 0, expected " +
                                             std::to_string(next));
    next = st.end_layer();
    if (st.replicas.empty()) return bad(where + ".replicas", "a stage needs a replica");
    if (static_cast<int>(st.replicas.size()) > micro_batches_per_iteration(plan))
      return bad(where + ".replicas", "more replicas than micro-batches per iteration");
    int units = pieces_of(plan, s).units;
    for (std::size_t j = 0; j < st.replicas.size(); ++j) {
      int tp = st.replicas[j].tp;
      std::string rw = where + ".replicas[" + std::to_string(j) + "].tp";
      if (tp < 1) return bad(rw, "must be at least 1");
      if (model.heads % tp || model.vocabulary % tp || model.ffn() % tp || model.hidden % tp)
        return bad(rw, "must divide heads, hidden, ffn and vocabulary");
      if (model.kv() % tp)
        return bad(rw, "must divide kv_heads (" + std::to_string(model.kv()) +
                           "): each TP rank holds whole KV heads");
    }
    const int kv_width = model.hidden / model.heads * model.kv();
    if (model.vocabulary % units || model.ffn() % units || model.hidden % units || kv_width % units)
      return bad(where + ".replicas", "the lcm of the replicas' TP degrees must divide hidden, "
                                      "ffn and vocabulary");
  }
  if (next != model.num_all_layers())
    return bad("stages", "stages must end at layer " + std::to_string(model.num_all_layers()) +
                             " (the head), got " + std::to_string(next));
  if (plan.local_sgd) {
    if (auto st = config::validate_plan(plan, config::model_shape{}, nullptr, "")) return st;
    for (int s = 0; s < plan.num_stages(); ++s)
      for (const auto& r : plan.stages[s].replicas)
        if (std::max(1, r.tp) != std::max(1, plan.stages[s].replicas.front().tp))
          return status(error::of(error_kind::unimplemented, "", "stages[" + std::to_string(s) + "].replicas",
                                  "DiLoCo (local_sgd) is implemented for stages whose replicas share one TP degree"));
  }
  return {};
}

std::vector<int> p2p_peers(const config::plan& p, const rank_role& role) {
  // Mirrors the executor: activations go to every TP rank k of the next stage's replica
  // with k % my_tp == tp_rank and come from the previous stage's rank tp_rank % its TP;
  // gradients the other way round.
  std::set<int> peers;
  const int s = role.stage, stages = p.num_stages();
  auto tp_of = [&](int stage, int replica) { return std::max(1, p.stages[stage].replicas[replica].tp); };
  const int my_tp = tp_of(s, role.replica);
  for (int m = 0; m < micro_batches_per_iteration(p); ++m) {
    if (replica_of(p, s, m) != role.replica) continue;
    if (s > 0) {
      const int prev = replica_of(p, s - 1, m), prev_tp = tp_of(s - 1, prev);
      peers.insert(global_rank_of(p, {s - 1, prev, role.tp_rank % prev_tp}));
      for (int i = 0; i < prev_tp; ++i)
        if (i % my_tp == role.tp_rank) peers.insert(global_rank_of(p, {s - 1, prev, i}));
    }
    if (s + 1 < stages) {
      const int next = replica_of(p, s + 1, m), next_tp = tp_of(s + 1, next);
      peers.insert(global_rank_of(p, {s + 1, next, role.tp_rank % next_tp}));
      for (int k = 0; k < next_tp; ++k)
        if (k % my_tp == role.tp_rank) peers.insert(global_rank_of(p, {s + 1, next, k}));
    }
  }
  return {peers.begin(), peers.end()};
}

}  // namespace sailor::train
