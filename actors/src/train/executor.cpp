#include <sailor/actors/train/executor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

#include <torch/torch.h>

#include <sailor/actors/train/export.hpp>
#include <sailor/comm/hierarchical.hpp>
#include <sailor/config/log.hpp>
#include <sailor/models/gpt.hpp>
#include <sailor/models/synthetic_data.hpp>
#include <sailor/models/token_data.hpp>

#include "checkpoint_io.hpp"
#include "evaluation.hpp"
#include "tied_embeddings.hpp"
#include "fused_adamw.hpp"
#include "schedule.hpp"
#include "threads.hpp"

namespace sailor::train {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

comm::buffer_view view_of(const torch::Tensor& t) {
  auto type = t.scalar_type() == torch::kDouble ? comm::element_type::f64 : comm::element_type::f32;
  TORCH_CHECK(t.is_contiguous() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble),
              "communication buffers are contiguous fp32 or fp64 tensors");
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), type};
}

error failed(const std::string& message, error_kind kind = error_kind::failed) {
  error e;
  e.kind = kind;
  e.message = message;
  return e;
}

// Tags of point-to-point messages: one per (iteration, micro-batch, direction), so messages
// between the same pair never match the wrong receive.
std::uint64_t tag_of(int iteration, int micro_batches, int m, int direction) {
  return ((static_cast<std::uint64_t>(iteration) * micro_batches + m) << 1) |
         static_cast<std::uint64_t>(direction);
}

// A part of this rank's gradient reduced in one data-parallel group.
struct grad_slice {
  std::size_t param = 0;
  int dim = -1;  // -1: the whole tensor
  std::int64_t offset = 0, length = 0;
};

struct dp_group {
  std::unique_ptr<comm::communicator> comm;
  std::vector<grad_slice> slices;
};

// Every gradient of the stage as a view into one flat buffer, parameters in order (so layer
// by layer): zeroing, the norm and clipping are one operation each, and when the stage has
// one data-parallel group that reduces whole tensors (every TP degree equal), a bucket of
// consecutive layers is all-reduced in place, with no gathering copy or scattering back.
struct flat_gradients {
  torch::Tensor buffer;
  std::vector<std::int64_t> offset;                          // per parameter
  std::vector<std::pair<std::int64_t, std::int64_t>> layers;  // [begin, end) per stage layer
  std::vector<const void*> bound;  // data of each gradient when it was bound to the buffer
  bool in_place = false;           // the single DP group reduces ranges of the buffer
  std::int64_t pending_end = -1;   // end of the bucket being filled, -1 when empty
};

// A bucket is all-reduced once it holds this many bytes (or at the stage's first layer).
// 0: one all-reduce per layer, as the simulator models the executor (and the shaping tests
// count); a larger value merges small consecutive layers into fewer collectives.
constexpr std::int64_t bucket_bytes = 0;

// Sum of squares of `t` (fp32): fp32 dot products over chunks (no fp64 copy of the
// gradients), summed in double; one read back to the host.
double sum_of_squares(const torch::Tensor& t) {
  auto flat = t.reshape({-1});
  constexpr std::int64_t chunk = 1 << 16;
  std::vector<torch::Tensor> dots;
  for (std::int64_t at = 0, n = flat.numel(); at < n; at += chunk) {
    auto part = flat.narrow(0, at, std::min(chunk, n - at));
    dots.push_back(part.dot(part));
  }
  if (dots.empty()) return 0;
  return torch::stack(dots).to(torch::kDouble).sum().item<double>();
}

// A transfer in flight and the tensor it reads or writes (kept alive until it is done).
struct transfer {
  std::unique_ptr<comm::request> request;
  torch::Tensor buffer;
};

// Reduces the gradients of a stage's layers on a thread of its own, last layer first, each as
// soon as the backward has finished it: the data-parallel all-reduce overlaps the backward of
// the earlier layers. Every rank of a group reduces the same layers in the same order.
class gradient_reducer {
public:
  gradient_reducer(std::function<void(int)> reduce, int first_layer, int end_layer)
      : reduce_(std::move(reduce)), first_(first_layer), next_(end_layer - 1) {
    thread_ = std::thread([this] { loop(); });
  }
  ~gradient_reducer() {
    if (thread_.joinable()) {
      mark_ready(first_);  // unblocks the loop if finish() was never reached
      thread_.join();
    }
  }
  /// Layers [layer, end) have their final gradients.
  void mark_ready(int layer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_from_ = std::min(ready_from_, layer);
    }
    cv_.notify_all();
  }
  /// Waits for the last reduction; rethrows its failure.
  void finish() {
    thread_.join();
    if (failure_) std::rethrow_exception(failure_);
  }

private:
  void loop() {
    try {
      for (; next_ >= first_; --next_) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return ready_from_ <= next_; });
        }
        reduce_(next_);
      }
    } catch (...) {
      failure_ = std::current_exception();
    }
  }

  std::function<void(int)> reduce_;
  int first_, next_;
  int ready_from_ = std::numeric_limits<int>::max();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::exception_ptr failure_;
  std::thread thread_;
};

// A stage's forward cut at layer boundaries (the last micro-batch's, see gradient_reducer).
struct segment {
  torch::Tensor input, output;
};

}  // namespace

struct stage_executor::impl {
  config::model_shape model;
  config::plan plan;
  rank_role role;
  train_options options;
  int rank = 0;
  int micro_batches = 0;  // per iteration, whole plan
  int stages = 0;
  int my_tp = 1;
  std::string who;
  torch::Device device = torch::kCPU;

  std::unique_ptr<comm::communicator> world;
  std::unique_ptr<comm::channel> p2p;  // activations and gradients between stages
  // The world all-reduces hierarchically when it spans zones (null when it does not).
  std::unique_ptr<comm::communicator> world_zones;
  comm::communicator& world_reduce() { return world_zones ? *world_zones : *world; }
  std::unique_ptr<comm::communicator> tp_comm;
  std::vector<dp_group> dp_groups;
  flat_gradients flat;
  void bind_flat_gradients();
  bool flat_bound() const;
  double tp_seconds = 0;

  std::unique_ptr<models::stage_module> module;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<models::markov_dataset> data;
  std::shared_ptr<const models::token_dataset> file_data;  // the job's data, if any
  std::uint64_t evaluations = 0;
  std::vector<schedule_op> ops;

  int tp_of(int stage, int replica) const {
    return std::max(1, plan.stages[stage].replicas[replica].tp);
  }
  bool first_stage() const { return role.stage == 0; }
  bool last_stage() const { return role.stage == stages - 1; }

  // Token rows of micro-batch m of `iteration`: [mb, seq + 1]. Sample indices follow the
  // global batch, not the plan: every plan reads the same samples.
  torch::Tensor tokens_of(int iteration, int m,
                          models::data_split split = models::data_split::train) const {
    const int mb = plan.micro_batch;
    auto t = torch::empty({mb, model.sequence + 1}, torch::kLong);
    std::int64_t first = static_cast<std::int64_t>(iteration) * plan.global_batch +
                         static_cast<std::int64_t>(m) * mb;
    if (file_data)
      file_data->fill(split, options.seed, first, mb, t.data_ptr<std::int64_t>());
    else
      data->fill(first, mb, t.data_ptr<std::int64_t>());
    return t.to(device);
  }
  void set_learning_rate(int iteration);

  status connect(comm::communicator_factory& factory, comm::channel_factory* p2p_factory);
  status open_channel(comm::channel_factory* p2p_factory, const std::vector<int>& peers);
  void plan_dp_slices(const group_spec& spec, dp_group& group) const;
  iteration_telemetry run(int iteration);
  void reduce_layer(int layer);
  std::vector<int> param_layer;  // layer of each parameter

  // Checkpoints (ranks of replica 0 with a checkpoint_dir): see checkpoint_io.hpp.
  std::unique_ptr<detail::checkpoint_writer> checkpoints;
  double take_checkpoint(int iteration);
};

// The channel's peers: the ranks of adjacent stages, and the ring neighbours across zones in
// every hierarchical group of this rank.
std::vector<int> channel_peers(const config::plan& plan, const rank_role& role, int rank,
                               const std::vector<group_spec>& groups) {
  std::set<int> peers;
  for (int p : p2p_peers(plan, role)) peers.insert(p);
  for (const auto& spec : groups)
    if (spec.hierarchical && std::count(spec.members.begin(), spec.members.end(), rank))
      for (int p : comm::hierarchical_peers({spec.members, spec.zones}, rank)) peers.insert(p);
  return {peers.begin(), peers.end()};
}

// Collectives from `factory`, in the global order of groups_of: the world first, then the
// channel (activations, gradients, and the cross-zone phase of hierarchical all-reduces),
// then tensor-parallel, zone and data-parallel groups.
status stage_executor::impl::connect(comm::communicator_factory& factory,
                                     comm::channel_factory* p2p_factory) {
  const auto groups = groups_of(plan);
  std::map<std::string, std::unique_ptr<comm::communicator>> zone_groups;
  for (std::size_t index = 0; index < groups.size(); ++index) {
    const auto& spec = groups[index];
    if (std::find(spec.members.begin(), spec.members.end(), rank) == spec.members.end()) continue;
    std::unique_ptr<comm::communicator> c;
    if (spec.hierarchical) {
      c = comm::make_hierarchical(spec.name, {spec.members, spec.zones}, rank,
                                  std::move(zone_groups[spec.name]), *p2p,
                                  static_cast<std::uint32_t>(index));
    } else {
      auto made = factory.create(spec.name, spec.members);
      if (!made) return made.error();
      c = std::move(*made);
    }
    if (spec.name == "world") {
      // Members are every global rank in order: a world rank is a global rank.
      world = std::move(c);
      if (auto err = open_channel(p2p_factory, channel_peers(plan, role, rank, groups))) return err;
    } else if (spec.name == "world.zones") {
      world_zones = std::move(c);
    } else if (!spec.zone_group_of.empty()) {
      zone_groups[spec.zone_group_of] = std::move(c);
    } else if (spec.stage < 0) {
      tp_comm = std::move(c);
    } else {
      dp_group g;
      g.comm = std::move(c);
      plan_dp_slices(spec, g);
      dp_groups.push_back(std::move(g));
    }
  }
  return {};
}

status stage_executor::impl::open_channel(comm::channel_factory* p2p_factory,
                                          const std::vector<int>& peers) {
  if (!p2p_factory) {
    p2p = comm::make_communicator_channel(*world);
    return {};
  }
  auto channel = p2p_factory->create("p2p", peers);
  if (!channel) return channel.error();
  p2p = std::move(*channel);
  return {};
}

void stage_executor::impl::plan_dp_slices(const group_spec& spec, dp_group& group) const {
  auto pieces = pieces_of(plan, role.stage);
  const auto& params = module->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    if (p.shard_dim < 0) {
      // Replicated on every TP rank: reduced whole in every group of this rank (each group
      // holds one rank per replica, so every group computes the same sum).
      group.slices.push_back({i, -1, 0, 0});
      continue;
    }
    const std::int64_t shard = p.full_size / my_tp, my_begin = role.tp_rank * shard;
    for (int piece : spec.pieces) {
      auto [lo, hi] = pieces.bounds[piece];
      std::int64_t begin = p.full_size * lo / pieces.units, end = p.full_size * hi / pieces.units;
      group.slices.push_back({i, p.shard_dim, begin - my_begin, end - begin});
    }
  }
}

// Makes every gradient a view into flat.buffer (allocated on first use), before the
// iteration zeroes it. Called whenever a gradient is not the view it was bound to (the first
// iteration, or a gradient set anew by someone else).
void stage_executor::impl::bind_flat_gradients() {
  torch::NoGradGuard no_grad;
  auto& params = module->parameters();
  if (params.empty()) return;
  if (!flat.buffer.defined()) {
    std::int64_t total = 0;
    const int first = module->first_layer();
    flat.layers.assign(module->end_layer() - first, {0, 0});
    for (std::size_t i = 0; i < params.size(); ++i) {
      const int layer = param_layer[i];
      // Parameters come layer by layer (stage_module adds them so): each layer is a range.
      TORCH_CHECK(i == 0 || param_layer[i - 1] <= layer, "parameters out of layer order");
      TORCH_CHECK(params[i].tensor.scalar_type() == params[0].tensor.scalar_type(),
                  "parameters of one stage share one type");
      if (i == 0 || param_layer[i - 1] != layer) flat.layers[layer - first].first = total;
      flat.offset.push_back(total);
      total += params[i].tensor.numel();
      flat.layers[layer - first].second = total;
    }
    // Layers without parameters: empty ranges where the next layer begins.
    for (std::size_t l = flat.layers.size(); l-- > 0;)
      if (flat.layers[l].second == 0)
        flat.layers[l].first = flat.layers[l].second =
            l + 1 < flat.layers.size() ? flat.layers[l + 1].first : total;
    flat.buffer = torch::zeros({total}, params[0].tensor.options().requires_grad(false));
    // In place when every replica of the stage has this TP degree: then every member of the
    // one group holds the same layout and the group reduces each parameter once, whole, in
    // parameter order. All members decide alike: they must cut the same buckets.
    const auto& replicas = plan.stages[role.stage].replicas;
    flat.in_place = dp_groups.size() == 1 &&
                    std::all_of(replicas.begin(), replicas.end(),
                                [&](const config::replica& r) { return std::max(1, r.tp) == my_tp; });
    if (flat.in_place) {
      const auto& slices = dp_groups[0].slices;
      bool whole = slices.size() == params.size();
      for (std::size_t k = 0; whole && k < slices.size(); ++k) {
        const auto& sl = slices[k];
        const auto& t = params[sl.param].tensor;
        whole = sl.param == k && (sl.dim < 0 || (sl.offset == 0 && sl.length == t.size(sl.dim)));
      }
      TORCH_CHECK(whole, "equal TP degrees, yet the data-parallel slices are not whole tensors");
    }
  }
  flat.bound.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& t = params[i].tensor;
    auto view = flat.buffer.narrow(0, flat.offset[i], t.numel()).view(t.sizes());
    t.mutable_grad() = view;
    flat.bound[i] = view.data_ptr();
  }
}

bool stage_executor::impl::flat_bound() const {
  const auto& params = module->parameters();
  if (params.empty()) return true;  // nothing to bind (and no buffer)
  if (!flat.buffer.defined() || flat.bound.size() != params.size()) return false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].tensor.grad();
    if (!g.defined() || g.data_ptr() != flat.bound[i]) return false;
  }
  return true;
}

// Sums the gradients of `layer` over the replicas of this stage, slice by slice.
void stage_executor::impl::reduce_layer(int layer) {
  torch::NoGradGuard no_grad;
  const auto& params = module->parameters();
  if (flat.in_place) {
    // Layers arrive last first; a bucket is the range from this layer to the pending end.
    auto [begin, end] = flat.layers[layer - module->first_layer()];
    if (flat.pending_end < 0) flat.pending_end = end;
    const std::int64_t bytes = (flat.pending_end - begin) * flat.buffer.element_size();
    if (bytes < bucket_bytes && layer != module->first_layer()) return;
    auto bucket = flat.buffer.narrow(0, begin, flat.pending_end - begin);
    flat.pending_end = -1;
    if (bucket.numel() == 0) return;
    auto st = dp_groups[0].comm->all_reduce(view_of(bucket));
    if (st) throw std::runtime_error(st->to_string());
    return;
  }
  // Gather every group's buffer before reducing any: a replicated gradient goes into several
  // groups and must be read before it is overwritten.
  std::vector<torch::Tensor> buffers(dp_groups.size());
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    std::vector<torch::Tensor> parts;
    for (const auto& s : dp_groups[k].slices) {
      if (param_layer[s.param] != layer) continue;
      auto grad = params[s.param].tensor.grad();
      parts.push_back((s.dim < 0 ? grad : grad.narrow(s.dim, s.offset, s.length)).reshape({-1}));
    }
    if (!parts.empty()) buffers[k] = torch::cat(parts).contiguous();
  }
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    if (!buffers[k].defined()) continue;
    auto st = dp_groups[k].comm->all_reduce(view_of(buffers[k]));
    if (st) throw std::runtime_error(st->to_string());
  }
  for (std::size_t k = 0; k < dp_groups.size(); ++k) {
    if (!buffers[k].defined()) continue;
    std::int64_t at = 0;
    for (const auto& s : dp_groups[k].slices) {
      if (param_layer[s.param] != layer) continue;
      auto grad = params[s.param].tensor.mutable_grad();
      auto target = s.dim < 0 ? grad : grad.narrow(s.dim, s.offset, s.length);
      target.copy_(buffers[k].narrow(0, at, target.numel()).view(target.sizes()));
      at += target.numel();
    }
  }
}

iteration_telemetry stage_executor::impl::run(int iteration) {
  iteration_telemetry tel;
  tel.iteration = iteration;
  tel.tokens = static_cast<std::int64_t>(plan.global_batch) * model.sequence;
  auto iteration_start = clock_type::now();
  tp_seconds = 0;
  const int mb = plan.micro_batch, seq = model.sequence, hidden = model.hidden;
  const int s = role.stage;

  if (!flat_bound()) bind_flat_gradients();
  if (flat.buffer.defined()) flat.buffer.zero_();
  flat.pending_end = -1;

  // Post every receive of the iteration up front, so that a peer's send never waits for us.
  std::map<int, transfer> activations, gradients;
  for (const auto& op : ops) {
    if (!op.forward) continue;
    int m = op.micro_batch;
    if (!first_stage()) {
      int from_tp = tp_of(s - 1, replica_of(plan, s - 1, m));
      int src = global_rank_of(plan, {s - 1, replica_of(plan, s - 1, m), role.tp_rank % from_tp});
      transfer t;
      t.buffer = torch::empty({mb, seq, hidden}, torch::TensorOptions().device(device));
      t.request = p2p->irecv(view_of(t.buffer), src, tag_of(iteration, micro_batches, m, 0));
      activations[m] = std::move(t);
    }
    if (!last_stage()) {
      int from_tp = tp_of(s + 1, replica_of(plan, s + 1, m));
      int src = global_rank_of(plan, {s + 1, replica_of(plan, s + 1, m), role.tp_rank % from_tp});
      transfer t;
      t.buffer = torch::empty({mb, seq, hidden}, torch::TensorOptions().device(device));
      t.request = p2p->irecv(view_of(t.buffer), src, tag_of(iteration, micro_batches, m, 1));
      gradients[m] = std::move(t);
    }
  }

  auto wait_for = [&](transfer& t) {
    auto start = clock_type::now();
    auto st = t.request->wait(options.timeout);
    tel.recv_wait_s += seconds_since(start);
    if (st) throw std::runtime_error(st->to_string());
  };

  std::vector<transfer> sends;
  std::map<int, torch::Tensor> inputs, outputs, saved_targets;
  const bool recompute = plan.stages[s].recompute;
  const int first_layer = module->first_layer(), end_layer = module->end_layer();
  // The last backward of the iteration overlaps the data-parallel all-reduce.
  const bool overlap = !dp_groups.empty();
  const int last_micro_batch = ops.back().micro_batch;
  std::vector<segment> last_segments;
  std::unique_ptr<gradient_reducer> reducer;
  auto forward_segments = [&](const torch::Tensor& input, const torch::Tensor& targets) {
    std::vector<segment> segments;
    torch::Tensor x = input;
    for (int layer = first_layer; layer < end_layer; ++layer) {
      auto in = layer == first_layer ? x : x.detach().requires_grad_(true);
      x = module->forward_layer(layer, in, targets);
      segments.push_back({in, x});
    }
    return segments;
  };
  double compute = 0, loss_sum = 0;
  const double scale = 1.0 / micro_batches;
  for (const auto& op : ops) {
    const int m = op.micro_batch;
    if (op.forward) {
      torch::Tensor input, targets;
      if (first_stage() || last_stage()) {
        auto tokens = tokens_of(iteration, m);
        if (first_stage()) input = tokens.narrow(1, 0, seq).contiguous();
        if (last_stage()) targets = tokens.narrow(1, 1, seq).contiguous();
      }
      if (!first_stage()) {
        wait_for(activations[m]);
        input = activations[m].buffer.requires_grad_(true);
        activations.erase(m);
      }
      auto start = clock_type::now();
      torch::Tensor out;
      if (m == last_micro_batch && !recompute && overlap) {
        last_segments = forward_segments(input, targets);
        out = last_segments.back().output;
      } else if (recompute) {
        // Keep only the stage input; the backward runs the forward again with a graph.
        torch::NoGradGuard no_grad;
        out = module->forward(input, targets);
      } else {
        out = module->forward(input, targets);
      }
      compute += seconds_since(start);
      if (last_stage()) {
        loss_sum += out.item<double>();
      } else {
        auto payload = out.detach().contiguous();
        int next = replica_of(plan, s + 1, m);
        for (int k = 0; k < tp_of(s + 1, next); ++k) {
          if (k % my_tp != role.tp_rank) continue;
          int dst = global_rank_of(plan, {s + 1, next, k});
          sends.push_back({p2p->isend(view_of(payload), dst, tag_of(iteration, micro_batches, m, 0)),
                           payload});
        }
      }
      inputs[m] = input;
      outputs[m] = out;
      if (recompute) saved_targets[m] = targets;
      ++tel.micro_batches;
    } else {
      torch::Tensor grad;
      if (last_stage()) {
        grad = torch::full({}, scale, torch::TensorOptions().device(device));
      } else {
        wait_for(gradients[m]);
        grad = gradients[m].buffer;
      }
      auto start = clock_type::now();
      if (m == last_micro_batch && overlap) {
        // Layer by layer, handing each finished layer to the data-parallel reducer.
        if (recompute) last_segments = forward_segments(inputs[m], saved_targets[m]);
        reducer = std::make_unique<gradient_reducer>([this](int layer) { reduce_layer(layer); },
                                                     first_layer, end_layer);
        for (int k = static_cast<int>(last_segments.size()) - 1; k >= 0; --k) {
          torch::autograd::backward({last_segments[k].output}, {grad});
          reducer->mark_ready(first_layer + k);
          if (k > 0) grad = last_segments[k].input.grad();
        }
        last_segments.clear();
      } else {
        if (recompute) outputs[m] = module->forward(inputs[m], saved_targets[m]);
        torch::autograd::backward({outputs[m]}, {grad});
      }
      compute += seconds_since(start);
      gradients.erase(m);
      if (!first_stage()) {
        auto payload = inputs[m].grad().contiguous();
        int prev = replica_of(plan, s - 1, m);
        for (int i = 0; i < tp_of(s - 1, prev); ++i) {
          if (i % my_tp != role.tp_rank) continue;
          int dst = global_rank_of(plan, {s - 1, prev, i});
          sends.push_back({p2p->isend(view_of(payload), dst, tag_of(iteration, micro_batches, m, 1)),
                           payload});
        }
      }
      inputs.erase(m);
      outputs.erase(m);
      saved_targets.erase(m);
    }
  }
  {
    auto start = clock_type::now();
    for (auto& t : sends) {
      auto st = t.request->wait(options.timeout);
      if (st) throw std::runtime_error(st->to_string());
    }
    tel.send_wait_s = seconds_since(start);
  }
  tel.compute_s = std::max(0.0, compute - tp_seconds);

  double dp_seconds = 0;
  if (reducer) {
    // What remains of the data-parallel all-reduce after the backward.
    auto start = clock_type::now();
    reducer->finish();
    reducer.reset();
    dp_seconds = seconds_since(start);
  }
  // The backward accumulates into the bound gradients in place; anything else would have
  // left reduced buffers unread.
  TORCH_CHECK(flat_bound(), "gradients are no longer views into the flat buffer");
  detail::sum_tied_gradients(plan, role, *module, world_reduce());

  // Loss and squared gradient norm over the whole plan in one all-reduce. Each piece of
  // every parameter counts once: replica 0 of each stage; replicated tensors on TP rank 0.
  auto opt_start = clock_type::now();
  double norm_sq = 0;
  if (role.replica == 0) {
    torch::NoGradGuard no_grad;
    if (role.tp_rank == 0) {
      if (flat.buffer.defined()) norm_sq = sum_of_squares(flat.buffer);
    } else {
      for (const auto& p : module->parameters())
        if (p.shard_dim >= 0) norm_sq += sum_of_squares(p.tensor.grad());
    }
    // A tied head's copy holds the embedding's gradient, which stage 0 counts.
    if (int copy = module->tied_head_copy(); copy >= 0)
      norm_sq -= sum_of_squares(module->parameters()[copy].tensor.grad());
  }
  auto totals = torch::tensor({last_stage() && role.tp_rank == 0 ? loss_sum : 0.0, norm_sq},
                              torch::kDouble).to(device);
  auto reduce_start = clock_type::now();
  auto st = world_reduce().all_reduce(view_of(totals));
  double world_seconds = seconds_since(reduce_start);
  if (st) throw std::runtime_error(st->to_string());
  totals = totals.cpu();
  tel.loss = totals[0].item<double>() / micro_batches;
  tel.grad_norm = std::sqrt(totals[1].item<double>());

  {
    torch::NoGradGuard no_grad;
    if (options.clip_norm > 0) {
      double coef = options.clip_norm / (tel.grad_norm + 1e-6);
      // Every gradient is a view into the flat buffer.
      if (coef < 1.0 && flat.buffer.defined()) flat.buffer.mul_(coef);
    }
  }
  set_learning_rate(iteration);
  if (!fused_adamw_step(*optimizer)) optimizer->step();
  tel.optimizer_s = seconds_since(opt_start) - world_seconds;
  tel.all_reduce_s = tp_seconds + dp_seconds + world_seconds;
  tel.checkpoint_s = take_checkpoint(iteration);
  tel.total_s = seconds_since(iteration_start);
  return tel;
}

stage_executor::stage_executor(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
stage_executor::~stage_executor() = default;

result<std::unique_ptr<stage_executor>> stage_executor::create(
    const config::model_shape& model, const config::plan& plan, const rank_role& role,
    comm::communicator_factory& factory, const train_options& options,
    comm::channel_factory* p2p) {
  if (auto st = validate_for_training(model, plan)) return *st;
  int rank = global_rank_of(plan, role);
  if (rank < 0) return failed("role is not in the plan", error_kind::invalid_input);
  if (rank != factory.global_rank())
    return failed("the factory's global rank " + std::to_string(factory.global_rank()) +
                      " differs from the role's " + std::to_string(rank),
                  error_kind::invalid_input);
  try {
    set_compute_threads(options.torch_threads);
    if (options.cuda_device >= 0 && !torch::cuda::is_available())
      return failed("cuda_device " + std::to_string(options.cuda_device) +
                        " asked for, but this LibTorch sees no CUDA device",
                    error_kind::invalid_input);
    auto st = std::make_unique<impl>();
    st->model = model;
    st->plan = plan;
    st->role = role;
    st->options = options;
    st->rank = rank;
    st->stages = plan.num_stages();
    st->micro_batches = micro_batches_per_iteration(plan);
    st->my_tp = st->tp_of(role.stage, role.replica);
    st->who = "[stage " + std::to_string(role.stage) + " replica " + std::to_string(role.replica) +
              " tp " + std::to_string(role.tp_rank) + "]";
    st->data = std::make_unique<models::markov_dataset>(model.vocabulary, model.sequence,
                                                        options.seed, options.dataset_samples);
    if (options.data) {
      auto opened = models::token_dataset::open(*options.data, model.vocabulary, model.sequence);
      if (!opened) return opened.error();
      st->file_data = *opened;
      // A text job's vocabulary goes next to its checkpoints (sailor generate reads it).
      if (!options.checkpoint_dir.empty() && rank == 0 && !st->file_data->symbols().empty()) {
        std::filesystem::create_directories(options.checkpoint_dir);
        std::ofstream(options.checkpoint_dir + "/" + vocabulary_file_name())
            << models::vocabulary_json(st->file_data->symbols()) << "\n";
      }
    }
    const auto& sp = plan.stages[role.stage];
    // The module first (the DP slices depend on its parameters); TP group set after connect.
    models::tp_group tp;
    tp.rank = role.tp_rank;
    tp.size = st->my_tp;
    tp.all_reduce_seconds = &st->tp_seconds;
    st->module = std::make_unique<models::stage_module>(model, sp.first_layer, sp.end_layer(), tp,
                                                        options.seed);
    if (options.cuda_device >= 0) {
      st->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.cuda_device));
      st->module->to(st->device);
    }
    if (auto err = st->connect(factory, p2p)) return *err;
    if (st->tp_comm) {
      tp.group = st->tp_comm.get();
      // Rebuild the module view of the group (parameters are unchanged).
      st->module->set_tp_group(tp);
    }
    // Two parameter groups: weight decay on matrices only, not on norms and biases.
    std::vector<torch::Tensor> decayed, plain;
    for (const auto& p : st->module->parameters()) (models::decays(p) ? decayed : plain).push_back(p.tensor);
    auto groups = [&](const auto& defaults) {
      std::vector<torch::optim::OptimizerParamGroup> out;
      using options_type = std::decay_t<decltype(defaults)>;
      if (!decayed.empty()) out.emplace_back(decayed, std::make_unique<options_type>(defaults));
      if (!plain.empty()) {
        auto no_decay = std::make_unique<options_type>(defaults);
        no_decay->weight_decay(0.0);
        out.emplace_back(plain, std::move(no_decay));
      }
      return out;
    };
    if (options.optimizer == optimizer_kind::adamw) {
      torch::optim::AdamWOptions o(options.learning_rate);
      o.betas({options.beta1, options.beta2}).eps(options.eps).weight_decay(options.weight_decay);
      st->optimizer = std::make_unique<torch::optim::AdamW>(groups(o), o);
    } else {
      torch::optim::SGDOptions o(options.learning_rate);
      o.momentum(options.momentum).weight_decay(options.weight_decay);
      st->optimizer = std::make_unique<torch::optim::SGD>(groups(o), o);
    }
    st->ops = one_f_one_b(plan)[role.stage][role.replica];
    if (st->ops.empty() || st->ops.back().forward)
      return failed(st->who + " has no micro-batch to run", error_kind::invalid_input);
    for (std::size_t i = 0; i < st->module->parameters().size(); ++i)
      st->param_layer.push_back(st->module->layer_of(i));
    if (!options.checkpoint_dir.empty()) {
      if (options.checkpoint_every < 1)
        return failed("checkpoint_every must be at least 1", error_kind::invalid_input);
      if (role.replica == 0)
        st->checkpoints = std::make_unique<detail::checkpoint_writer>(
            options.checkpoint_dir, model, plan, role, options, st->who);
    }
    log::get("train")->debug("{} executor ready: layers [{}, {}), {} parameters, {} ops",
                             st->who, sp.first_layer, sp.end_layer(),
                             st->module->num_parameters(), st->ops.size());
    return std::unique_ptr<stage_executor>(new stage_executor(std::move(st)));
  } catch (const std::exception& e) {
    return failed(std::string("creating the stage executor: ") + e.what());
  }
}

result<iteration_telemetry> stage_executor::run_iteration(int iteration) {
  try {
    return impl_->run(iteration);
  } catch (const std::exception& e) {
    log::get("train")->error("{} iteration {} failed: {}", impl_->who, iteration, e.what());
    return failed(impl_->who + " iteration " + std::to_string(iteration) + ": " + e.what());
  }
}

train_options options_from(const config::job& job) {
  train_options o;
  o.seed = static_cast<std::uint64_t>(job.seed);
  o.optimizer = job.optimizer == config::optimizer_kind::sgd ? optimizer_kind::sgd : optimizer_kind::adamw;
  const auto& s = job.schedule;
  o.learning_rate = s.lr;
  o.min_learning_rate = s.min_lr;
  o.warmup_iterations = s.warmup_iterations;
  o.decay_iterations = s.decay_iterations;
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.weight_decay = s.weight_decay;
  o.clip_norm = s.grad_clip;
  o.data = job.data;
  o.eval_batches = job.eval_batches;
  return o;
}

double learning_rate_at(const train_options& o, int iteration) {
  const double lr = o.learning_rate;
  if (o.warmup_iterations > 0 && iteration < o.warmup_iterations)
    return lr * (iteration + 1) / (o.warmup_iterations + 1);
  if (o.min_learning_rate < 0 || o.decay_iterations <= o.warmup_iterations) return lr;
  if (iteration > o.decay_iterations) return o.min_learning_rate;
  const double ratio = double(iteration - o.warmup_iterations) / (o.decay_iterations - o.warmup_iterations);
  return o.min_learning_rate + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - o.min_learning_rate);
}

void stage_executor::impl::set_learning_rate(int iteration) {
  const double lr = learning_rate_at(options, iteration);
  for (auto& group : optimizer->param_groups()) {
    if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&group.options())) adamw->lr(lr);
    else if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) sgd->lr(lr);
  }
}

result<double> stage_executor::validation_loss() {
  auto& st = *impl_;
  if (!st.file_data || st.file_data->tokens(models::data_split::validation) == 0)
    return failed(st.who + " validation loss: the job has no data with a validation part",
                  error_kind::invalid_input);
  try {
    detail::evaluation_context ctx;
    ctx.plan = &st.plan;
    ctx.role = st.role;
    ctx.micro_batches = st.micro_batches;
    ctx.world = &st.world_reduce();
    ctx.p2p = st.p2p.get();
    ctx.module = st.module.get();
    ctx.device = st.device;
    ctx.timeout = st.options.timeout;
    ctx.tokens = [&st](int b, int m) { return st.tokens_of(b, m, models::data_split::validation); };
    return detail::evaluate_loss(ctx, std::max(1, st.options.eval_batches), st.evaluations++);
  } catch (const std::exception& e) {
    log::get("train")->error("{} validation loss failed: {}", st.who, e.what());
    return failed(st.who + " validation loss: " + e.what());
  }
}

result<std::vector<char>> stage_executor::save_state() const {
  try {
    torch::serialize::OutputArchive archive, params, optim;
    for (const auto& p : impl_->module->parameters()) {
      std::string key = p.name;
      std::replace(key.begin(), key.end(), '.', '_');
      params.write(key, p.tensor.detach());
    }
    impl_->optimizer->save(optim);
    archive.write("params", params);
    archive.write("optimizer", optim);
    std::ostringstream out;
    archive.save_to(out);
    auto bytes = out.str();
    return std::vector<char>(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    return failed(impl_->who + " save_state: " + e.what());
  }
}

status stage_executor::load_state(const std::vector<char>& bytes) {
  try {
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    torch::serialize::InputArchive archive, params, optim;
    archive.load_from(in);
    archive.read("params", params);
    archive.read("optimizer", optim);
    torch::NoGradGuard no_grad;
    for (auto& p : impl_->module->parameters()) {
      std::string key = p.name;
      std::replace(key.begin(), key.end(), '.', '_');
      torch::Tensor t;
      params.read(key, t);
      if (!t.sizes().equals(p.tensor.sizes()))
        return failed(impl_->who + " load_state: " + p.name + " has another shape",
                      error_kind::invalid_input);
      p.tensor.copy_(t);
    }
    impl_->optimizer->load(optim);
    return {};
  } catch (const std::exception& e) {
    return failed(impl_->who + " load_state: " + e.what(), error_kind::invalid_input);
  }
}

std::int64_t stage_executor::num_parameters() const { return impl_->module->num_parameters(); }
const rank_role& stage_executor::role() const { return impl_->role; }

double stage_executor::impl::take_checkpoint(int iteration) {
  if (!checkpoints) return 0;
  if ((iteration + 1) % options.checkpoint_every != 0 && iteration + 1 != options.checkpoint_final)
    return 0;
  return checkpoints->take(iteration + 1, *module, *optimizer);
}

status stage_executor::restore(const std::string& dir, int iterations) {
  try {
    return detail::restore_checkpoint(dir, iterations, impl_->model, impl_->options, *impl_->module,
                                      *impl_->optimizer, impl_->who);
  } catch (const std::exception& e) {
    return failed(impl_->who + " restore of " + dir + " after " + std::to_string(iterations) +
                      " iterations: " + e.what(),
                  error_kind::invalid_input);
  }
}

std::string stage_executor::last_checkpoint_file() const {
  return impl_->checkpoints ? impl_->checkpoints->last_written() : std::string{};
}

std::string stage_executor::take_checkpoint_failure() {
  return impl_->checkpoints ? impl_->checkpoints->take_failure() : std::string{};
}

status stage_executor::flush_checkpoints() {
  if (!impl_->checkpoints) return {};
  return impl_->checkpoints->flush();
}

}  // namespace sailor::train
