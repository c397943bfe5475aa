// The network: pipeline transfers between replicas and the data-parallel all-reduce, from
// Sailor's fits (per node pair) or a cluster's zone links (per flow).
#include "sailor/simulator/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace sailor::simulator {

namespace {
// Index of a GPUs-per-node count among the fits' 1, 2, 4, 8 (the largest not above n).
int fit_index(int n, int max_index) {
  int i = 0;
  while (i + 1 < max_index && (2 << i) <= n) ++i;
  return i;
}
}  // namespace

double sim_context::link_gbytes_per_s(const endpoint& a, const endpoint& b, double bytes, int na, int nb) const {
  const int Z = num_zones(), G = num_gpu_types();
  if (a.zone < 0 || b.zone < 0 || a.gpu < 0 || b.gpu < 0 || a.zone >= Z || b.zone >= Z) return -1;
  if (use_fits_) {
    // Sailor's fits are keyed by each side's own count (sender and receiver may differ in GPU
    // type and in how many of their GPUs take part); where a pair was not measured, fewer GPUs.
    auto slot = [&](int ia, int ib) -> const fit& {
      return fits_[((((size_t(a.zone) * G + a.gpu) * max_fit_n + ia) * Z + b.zone) * G + b.gpu) * max_fit_n + ib];
    };
    int ia = fit_index(na, max_fit_n), ib = fit_index(nb, max_fit_n);
    const fit* f = &slot(ia, ib);
    while (!f->ok && (ia > 0 || ib > 0)) {
      if (ia >= ib && ia > 0) --ia;
      else --ib;
      f = &slot(ia, ib);
    }
    if (!f->ok) return -1;
    // as config::sailor_bandwidth_fit::gbytes_per_s
    double x = std::log2(std::max(bytes, 1.0) / 1e6);
    double bw;
    if (x < 0) {
      bw = (f->c) * std::exp2(x);
    } else {
      if (f->a < 0) {
        double vertex = -f->b / (2 * f->a);
        if (vertex >= 0 && x > vertex) x = vertex;
      }
      bw = (f->a * x + f->b) * x + f->c;
    }
    if (f->max > 0) bw = std::min(bw, f->max);
    return std::max(bw, 1e-6);
  }
  if (zone_link_ok_.empty() || !zone_link_ok_[size_t(a.zone) * Z + b.zone]) return -1;
  return zone_links_[size_t(a.zone) * Z + b.zone].bytes_per_s(bytes) / 1e9;
}

double sim_context::gpu_bytes_per_s(const endpoint& a, const endpoint& b, double bytes) const {
  // A collective's edge between two replicas: each of their TP ranks (its own shard's ring)
  // sends in parallel, as many per node pair as both sides have.
  if (a.gpu < 0 || b.gpu < 0 || a.gpu >= num_gpu_types() || b.gpu >= num_gpu_types()) return -1;
  const int n = std::max(1, std::min({a.tp, b.tp, gpus_per_node_[a.gpu], gpus_per_node_[b.gpu]}));
  double gbps = link_gbytes_per_s(a, b, bytes * n, n, n);
  if (gbps <= 0) return -1;
  // Sailor's fits are per node pair; a cluster's zone link is per flow, each flow also
  // limited by its share of the node's NIC.
  if (use_fits_) {
    double per_gpu = options_.network_efficiency * gbps * 1e9 / n;
    if (options_.job_gbytes_per_s_per_gpu > 0) per_gpu = std::min(per_gpu, options_.job_gbytes_per_s_per_gpu * 1e9);
    return per_gpu;
  }
  double per_flow = gbps * 1e9;
  const double nic = std::min(gpu_nic_[a.gpu], gpu_nic_[b.gpu]);
  if (nic > 0) per_flow = std::min(per_flow, nic / n);
  return per_flow;
}

double sim_context::transfer_s(const endpoint& a, const endpoint& b, double bytes) const {
  if (a.gpu < 0 || b.gpu < 0 || a.gpu >= num_gpu_types() || b.gpu >= num_gpu_types()) return -1;
  const int ta = std::max(1, a.tp), tb = std::max(1, b.tp);
  // GPUs of each node that take part (a replica's TP ranks share its node), and the flows
  // between the two nodes: partitioned, min(ta, tb) ranks each send their part; otherwise each
  // of b's ranks receives a full copy.
  const int na = std::min(ta, gpus_per_node_[a.gpu]), nb = std::min(tb, gpus_per_node_[b.gpu]);
  const bool split = options_.p2p_partitioned;
  const int flows = std::max(1, std::min(split ? std::min(ta, tb) : tb, std::max(na, nb)));
  const double node_bytes = split ? bytes : bytes * tb;
  double gbps = link_gbytes_per_s(a, b, node_bytes, na, nb);
  if (gbps <= 0) return -1;
  double aggregate;  // bytes/s of the node pair for this transfer
  double latency = options_.p2p_latency_s;
  if (use_fits_) {
    // The job's ceiling bounds one pipeline transfer (the engine's send, receive and gather of
    // the parts); copies sent side by side by several ranks each have their own.
    aggregate = options_.network_efficiency * gbps * 1e9;
    if (options_.job_gbytes_per_s_per_gpu > 0)
      aggregate = std::min(aggregate, (split ? 1 : flows) * options_.job_gbytes_per_s_per_gpu * 1e9);
  } else {
    // A cluster's zone link is what one flow gets; the node's NIC bounds them all.
    aggregate = flows * gbps * 1e9;
    const double nic = std::min(gpu_nic_[a.gpu], gpu_nic_[b.gpu]);
    if (nic > 0) aggregate = std::min(aggregate, nic);
    latency += zone_links_[size_t(a.zone) * num_zones() + b.zone].latency_s;
  }
  return latency + node_bytes / aggregate;
}

double sim_context::egress_usd_per_gb(int za, int zb) const {
  if (za < 0 || zb < 0 || za >= num_zones() || zb >= num_zones()) return 0;
  return egress_[size_t(za) * num_zones() + zb];
}

namespace {
bool same(const endpoint& a, const endpoint& b) { return a.zone == b.zone && a.gpu == b.gpu && a.tp == b.tp; }

// Room for a sorted copy of a stage's replicas: the caller's stack storage (small_ring
// endpoints) or, beyond, a per-thread buffer that grows once and is reused (no allocation per
// estimate after the first large one; thread-safe since each thread has its own).
constexpr int small_ring = 64;
endpoint* ring_scratch(unsigned char* stack_storage, int n) {
  if (n <= small_ring) return reinterpret_cast<endpoint*>(stack_storage);
  thread_local std::vector<endpoint> scratch;
  if (scratch.size() < size_t(n)) scratch.resize(size_t(n));
  return scratch.data();
}
}  // namespace

double sim_context::zone_latency_s(int za, int zb) const {
  return use_fits_ ? 0.0 : zone_links_[size_t(za) * num_zones() + zb].latency_s;
}

double sim_context::ring_allreduce_s(const endpoint* ring, int k, double shard, double msg, double buckets) const {
  // Per GPU, each member sends and receives 2(k-1)/k of its shard in 2(k-1) steps of 1/k of a
  // bucket (the fits are read at that size); the slowest ring edge sets the pace.
  const double step_msg = msg / k;
  double ring_bw = 1e300, worst_latency = 0;
  for (int i = 0; i < k; ++i) {
    const endpoint& x = ring[i];
    const endpoint& y = ring[(i + 1) % k];
    worst_latency = std::max(worst_latency, zone_latency_s(x.zone, y.zone));
    if (i > 0 && same(x, ring[i - 1]) && same(y, ring[i])) continue;  // same edge as before
    double bw = gpu_bytes_per_s(x, y, step_msg);
    if (bw <= 0) return -1;
    ring_bw = std::min(ring_bw, bw);
  }
  const double steps = 2.0 * (k - 1);
  return steps / k * shard / ring_bw + buckets * steps * (options_.collective_latency_s + worst_latency);
}

double sim_context::hierarchical_allreduce_s(const endpoint* ring, int k, double shard, double msg,
                                             double buckets) const {
  // Zones of the group (ring is sorted by zone id, which is name order, the runtime's order):
  // [begin, end) of each.
  thread_local std::vector<std::pair<int, int>> zones;
  zones.clear();
  for (int i = 0; i < k;) {
    int j = i;
    while (j < k && ring[j].zone == ring[i].zone) ++j;
    zones.emplace_back(i, j);
    i = j;
  }
  const int Z = int(zones.size());
  int P = k;
  bool equal = true;
  for (auto [b, e] : zones) {
    P = std::min(P, e - b);
    equal = equal && e - b == zones.front().second - zones.front().first;
  }
  // Shards: at most one element each (comm::hierarchical caps P by the element count).
  P = std::max(1, std::min(P, int(std::floor(msg / std::max(1.0, options_.grad_bytes_per_param)))));
  const double lat = options_.collective_latency_s;
  // Phases 1 and 3, inside each zone in parallel. When every zone has exactly P members: a ring
  // reduce-scatter leaves member j its shard reduced over the zone, and a ring all-gather brings
  // the P reduced shards back ((g-1)/g of the buffer each). Otherwise an all-reduce of the
  // whole buffer (ring), then one broadcast per shard (binomial tree: ceil(log2 g) rounds).
  double inside_s = 0;
  for (auto [b, e] : zones) {
    const int g = e - b;
    if (g <= 1) continue;
    if (equal && g == P) {
      double bw = 1e300;
      for (int x = b; x < e; ++x) bw = std::min(bw, gpu_bytes_per_s(ring[x], ring[b + (x - b + 1) % g], msg / P));
      if (bw <= 0) return -1;
      const double half = double(g - 1) / g * shard / bw + buckets * (g - 1) * lat;
      inside_s = std::max(inside_s, 2 * half);
      continue;
    }
    const double reduce = ring_allreduce_s(ring + b, g, shard, msg, buckets);
    if (reduce < 0) return -1;
    double bw = 1e300;
    for (int x = b + 1; x < e; ++x) bw = std::min(bw, gpu_bytes_per_s(ring[b], ring[x], msg / P));
    if (bw <= 0) return -1;
    const double rounds = std::ceil(std::log2(double(g)));
    const double spread = rounds * shard / bw + buckets * P * rounds * lat;
    inside_s = std::max(inside_s, reduce + spread);
  }
  // Phase 2: shard j (1/P of the buffer) ring-all-reduced among the j-th members of the Z zones,
  // the P rings side by side: 2(Z-1) steps of shard/(P Z) over each zone pair in name order. The
  // P rings' GPUs of one node share its links: P members of TP t are P t GPUs (at most a node's).
  double cross_bw = 1e300, cross_latency = 0;
  for (int z = 0; z < Z; ++z) {
    endpoint x = ring[zones[z].first], y = ring[zones[(z + 1) % Z].first];
    x.tp = std::max(1, x.tp) * P;
    y.tp = std::max(1, y.tp) * P;
    const double bw = gpu_bytes_per_s(x, y, msg / (double(P) * Z));
    if (bw <= 0) return -1;
    cross_bw = std::min(cross_bw, bw);
    cross_latency = std::max(cross_latency, zone_latency_s(x.zone, y.zone));
  }
  const double cross_s = 2.0 * (Z - 1) / Z * (shard / P) / cross_bw + buckets * 2.0 * (Z - 1) * (lat + cross_latency);
  return inside_s + cross_s;
}

double sim_context::allreduce_s(const endpoint* reps, int n, double stage_params, int calls) const {
  if (n <= 1) return 0;
  const int k = n;
  auto by_zone = [](const endpoint& x, const endpoint& y) { return x.zone < y.zone; };
  // Sorted by zone (a ring crosses each zone boundary once; the hierarchical scheme groups by
  // zone). Sorted copies only when needed: raw stack storage (not initialised) for small
  // stages, a per-thread scratch that keeps its capacity for large ones.
  alignas(endpoint) unsigned char storage[sizeof(endpoint) * small_ring];
  const endpoint* ring = reps;
  if (!std::is_sorted(reps, reps + k, by_zone)) {
    endpoint* buf = ring_scratch(storage, k);
    std::uninitialized_copy(reps, reps + k, buf);
    std::sort(buf, buf + k, by_zone);
    ring = buf;
  }
  double max_shard = 0;  // bytes per GPU: the replica of the smallest TP degree carries most
  for (int i = 0; i < k; ++i)
    max_shard = std::max(max_shard, stage_params / std::max(1, ring[i].tp) * options_.grad_bytes_per_param);
  const double msg = calls > 0 ? max_shard / calls : std::min(options_.bucket_bytes, max_shard);
  const double buckets = calls > 0 ? double(calls) : std::ceil(max_shard / options_.bucket_bytes);
  // The runtime (comm::make_hierarchical) runs the hierarchical scheme for every group that spans
  // zones; sim_options::hierarchical_allreduce = false prices a flat ring instead, to compare.
  const bool spans_zones = ring[0].zone != ring[k - 1].zone;
  if (spans_zones && options_.hierarchical_allreduce) return hierarchical_allreduce_s(ring, k, max_shard, msg, buckets);
  return ring_allreduce_s(ring, k, max_shard, msg, buckets);
}

double sim_context::allreduce_egress_usd(const endpoint* reps, int n, double stage_params) const {
  if (n <= 1) return 0;
  alignas(endpoint) unsigned char storage[sizeof(endpoint) * small_ring];
  const int k = n;
  endpoint* ring = ring_scratch(storage, k);
  std::uninitialized_copy(reps, reps + k, ring);
  std::sort(ring, ring + k, [](const endpoint& x, const endpoint& y) { return x.zone < y.zone; });
  int zones = 1;
  for (int i = 1; i < k; ++i) zones += ring[i].zone != ring[i - 1].zone;
  const double buffer = stage_params * options_.grad_bytes_per_param;
  double usd = 0;
  if (zones > 1 && options_.hierarchical_allreduce) {
    // Only phase 2 crosses zones: the P members of each zone together send 2(Z-1)/Z of the
    // buffer to the next zone in name order.
    const double bytes = 2.0 * (zones - 1) / zones * buffer;
    for (int i = 0; i < k; ++i)
      if (ring[i].zone != ring[(i + 1) % k].zone) usd += bytes / 1e9 * egress_usd_per_gb(ring[i].zone, ring[(i + 1) % k].zone);
    return usd;
  }
  // Flat ring: each replica (all its GPUs) sends 2(k-1)/k of the stage's gradients to its successor.
  const double bytes = 2.0 * (k - 1) / k * buffer;
  for (int i = 0; i < k; ++i) usd += bytes / 1e9 * egress_usd_per_gb(ring[i].zone, ring[(i + 1) % k].zone);
  return usd;
}

}  // namespace sailor::simulator
