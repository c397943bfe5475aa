#pragma once
/// The simulator: iteration time, per-GPU peak memory and cost of any plan.
///
/// How to use it (planner and CLI):
///
///   1. Build one `sim_context` per problem with `sim_context::make(inputs, options)`: it resolves
///      GPU types and zones to small integer ids, and precomputes, for every (GPU type, TP degree,
///      micro-batch) it can, prefix sums of per-layer forward/backward/update times and of
///      per-layer parameter and activation sizes. Everything after this is O(1) per stage.
///   2. Inner loop (millions of calls, no allocation, thread-safe: the context is immutable):
///        ctx.gpu_id("A100-40"), ctx.zone_id("us-central1-a")      -> ids, -1 when unknown
///        ctx.compute(gpu, tp, mbs, first, end)  -> forward/backward/update seconds of layers
///                                                  [first, end) on one replica (null `ok` when
///                                                  neither profile nor catalog can say)
///        ctx.stage_memory(gpu, tp, mbs, first, end, in_flight, recompute) -> bytes per GPU
///        ctx.transfer_s(a, b, bytes)            -> point-to-point seconds between endpoints
///        ctx.allreduce_s(endpoints, n, stage_param_count) -> data-parallel gradient sync
///        ctx.activation_bytes(mbs)              -> bytes sent between stages per micro-batch
///   3. Score a whole candidate: `resolve(ctx, plan)` (validates, maps names to ids, once per
///      plan) then `closed_form(ctx, resolved)` (allocation-free, about a microsecond).
///   4. Report: `simulate(ctx, plan)` gives the full `estimate` with breakdowns (per stage time,
///      per GPU memory, cost); `simulate_events(ctx, plan)` runs the event-driven 1F1B schedule
///      (used to check the closed form, and to draw a Chrome trace with `to_chrome_trace`).
///
/// The physics (simulator/README.md has the details): a stage runs at the pace of its slowest
/// replica; consecutive stages exchange activations forward and gradients backward over the link
/// their zones and GPU types imply (blocking the sender, and the receiver too, as DeepSpeed's
/// pipeline does, or overlapping compute as our runtime does); the 1F1B schedule is costed from
/// each stage's point of view (the first micro-batch's way to it and back, m periods of its own,
/// and the idle time its S-k-1 warm-up forwards cannot hide while the first micro-batch makes
/// the round trip downstream; a period is at least the loop through the downstream stages over
/// the S-k micro-batches 1F1B lets be in flight) and the worst view wins; each stage then
/// all-reduces its gradients across its replicas (ring or hierarchical by zone, bucketed, shard by
/// shard when replicas differ in TP) and steps its optimizer (memory bound); the iteration ends
/// when the last stage is done. Free parameters (sim_options) each have a physical meaning and
/// defaults calibrated on Sailor's measured GH200 plans (bench/simulator_accuracy reports the
/// accuracy, also with the parameters refitted without the plans they are tested on).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <map>
#include <unordered_map>
#include <vector>

#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"
#include "sailor/config/gpu.hpp"
#include "sailor/config/job.hpp"
#include "sailor/config/model.hpp"
#include "sailor/config/plan.hpp"
#include "sailor/config/profile.hpp"
#include "sailor/config/sailor_format.hpp"

namespace sailor::simulator {

/// Free parameters of the model, each a physical quantity.
struct sim_options {
  /// Measured kernel time over profiled kernel time (profiles taken in isolation run a little
  /// slower or faster than inside a training job).
  double compute_scale = 1.0;
  /// Fraction of the catalog's peak FP16 FLOP/s reached by layers without a profile. 0.15 is
  /// about the median reached in Sailor's profiles (TP 1, micro-batch >= 4: 0.07 for OPT-350
  /// on GH200 up to 0.26 for GPT-Neo-2.7 on A100-80).
  double analytic_efficiency = 0.15;
  /// Fixed cost of one point-to-point message (launch, rendezvous), seconds.
  double p2p_latency_s = 50e-6;
  /// Fixed cost of one step of a collective (per bucket, per ring step), seconds.
  double collective_latency_s = 20e-6;
  /// Gradient bucket size of the data-parallel all-reduce, bytes.
  double bucket_bytes = 25e6;
  /// Bytes per gradient element in the all-reduce (fp32 main grads: 4; fp16: 2).
  double grad_bytes_per_param = 4;
  /// True when a stage's sends overlap its compute (our runtime); false when they block the
  /// sender (Megatron/DeepSpeed, where Sailor's measurements come from).
  bool overlap_p2p = false;
  /// With blocking sends: whether the receiver's stream is held for the transfer too
  /// (synchronous recv, as DeepSpeed's pipeline engine does).
  bool receiver_blocks = true;
  /// What a TP replica sends to the next stage. true: the activation (and its gradient) is split
  /// over the TP ranks, each sends its 1/k part (k: the smaller TP degree of the two stages) and
  /// the receiver gathers it inside its node: one copy crosses the network (DeepSpeed's
  /// `pipe_partitioned` / `grad_partitioned`, on by default, and Megatron's scatter-gather;
  /// Sailor's measurements). false: every TP rank of the receiving replica gets a full copy
  /// (our runtime, train/src/executor.cpp): tp copies cross.
  bool p2p_partitioned = true;
  /// Data-parallel groups that span zones all-reduce hierarchically, as the runtime does
  /// (comm::make_hierarchical): (1) inside each zone a reduce-scatter (equal zones) or an
  /// all-reduce, (2) the buffer cut into P
  /// shards (P: the fewest members of any zone), shard j ring-all-reduced across the zones by
  /// their j-th members, the P rings side by side, (3) the shards back to every member inside
  /// each zone. false: a flat ring over all replicas, bounded by its slowest link (for
  /// comparison; the runtime does not run it across zones).
  bool hierarchical_allreduce = true;
  /// Per layer and pass, time a profile measured in isolation includes but a training step
  /// does not (a synchronisation after each layer, launch latency not hidden), seconds.
  double profile_layer_overhead_s = 50e-6;
  /// A layer's time is read from the profile as an affine function of the micro-batch (a fixed
  /// cost per call: launches, TP collective latency; plus work per sample), fitted by weighted
  /// least squares (relative error) to the profiled micro-batch sizes at that TP degree, each
  /// weighted by a Gaussian of its distance to the wanted size in octaves (log2) with this
  /// width. This smooths the noise of single profiling runs and interpolates or extrapolates
  /// sizes that were not profiled. 0: the raw profiled value (and proportional scaling from the
  /// nearest profiled size).
  double profile_smoothing_octaves = 1.5;
  /// Fraction of the network fits' bandwidth that a training job's own transfers reach.
  /// Applies to Sailor's fits only (a cluster's links state what a job gets). 1: the fits are
  /// what a job gets, up to `job_gbytes_per_s_per_gpu` (simulator/README.md, "Network").
  double network_efficiency = 1.0;
  /// Ceiling on what one GPU's transfers reach inside a training job, GB/s: NCCL inside the
  /// framework (its channels, proxy thread and copies) bounds a GPU's point-to-point and ring
  /// traffic whatever the network. 9 GB/s fitted on GH200/Slingshot, whose fits (23 GB/s per GPU,
  /// near line rate) a job does not reach; Sailor's GCP fits (1-4 GB/s per node pair) are below
  /// it and used as they are. Applies to Sailor's fits only, after `network_efficiency`; 0: none.
  double job_gbytes_per_s_per_gpu = 9.0;
  /// Memory no tensor accounts for: CUDA context, allocator caching, NCCL buffers, bytes/GPU.
  double framework_overhead_bytes = 4.3e9;
  /// Ratio of peak activation memory to the sum of per-layer forward growth (transient
  /// buffers of the backward pass, allocator rounding).
  double activation_peak_factor = 1.12;
  /// A second memory check, Sailor's planner's formula (issue 13): per GPU, `sailor_bytes_per_param`
  /// per parameter (fp32 weights, gradients, two Adam moments and DeepSpeed's copies: 24), the
  /// forward's growth (llm_info's act_mem_floats, 4 B each) times the micro-batch times the
  /// micro-batches in flight, with no peak factor and no buffers, plus `sailor_framework_bytes`
  /// (3 GB, Megatron's; at most `framework_overhead_bytes`, so CPU ranks, where that is 0, have
  /// none). A plan fits only when both checks fit it; the predicted memory stays ours.
  bool sailor_memory_check = true;
  double sailor_bytes_per_param = 24;
  double sailor_framework_bytes = 3e9;
  /// Gradient bytes per parameter held in memory with mixed precision (fp16 grads and the
  /// fp32 copy the optimizer reads: 2 + 4).
  double mixed_grad_memory_bytes_per_param = 6;
  /// DiLoCo (config::plan::local_sgd): values per fp32 scale of the int8 outer exchange
  /// (data_parallel.compression: int8 sends 1 byte per parameter plus 4 per block).
  double int8_block_values = 256;
  /// DiLoCo's state on every replica, bytes per parameter: the fp32 parameters at the last
  /// exchange and the outer optimizer's momentum.
  double outer_state_bytes_per_param = 8;
  /// Optimizer step: bytes moved per parameter (Adam mixed precision: read/write fp32 master,
  /// two moments, grad, fp16 copy) and the device memory bandwidth fraction reached.
  double optimizer_bytes_per_param = 36;
  double memory_bandwidth_efficiency = 0.5;
  /// The data-parallel all-reduce is issued per layer (our runtime: each layer's gradients as
  /// soon as its backward is done, one collective each) rather than in buckets of
  /// `bucket_bytes` (Megatron, DDP): every layer pays the collective's latency terms.
  bool allreduce_per_layer = false;
  /// After the optimizer's gradients are summed, every rank of the plan takes part in one
  /// small all-reduce (our runtime's loss and global gradient norm, 16 bytes) before the
  /// step: it ends the iteration with the latency of a collective over all ranks.
  bool final_allreduce = false;
  /// Ranks that share the cores of one host (CPU training: every rank a process of this
  /// machine): > 0 is the number of cores they get, and profile times are then CPU work
  /// measured without contention. An iteration then takes at least the CPU work of every
  /// rank (compute, optimizer, and the CPU the communication threads spend) over these cores,
  /// plus the waits no rank's work can fill (the last gradient sync and the final
  /// all-reduce). 0: every rank has its own device (GPUs).
  double host_cores = 0;
  /// How the profile's CPU work changes with the number of ranks sharing the host: per count
  /// of ranks, a pass's CPU work relative to the profile's times (1 at the count that measured
  /// them). Ranks that share cores also share caches and memory bandwidth, so a plan with
  /// fewer ranks than the profile was measured with computes each pass faster, one with more
  /// slower. Interpolated between the counts held, the nearest count's beyond them; empty:
  /// the profile's times at every count. Only with `host_cores`.
  std::map<int, double> host_cpu_scale;
  /// CPU seconds a rank's communication spends per point-to-point message (send or receive:
  /// its threads, copies, wake-ups) and per collective call; only with `host_cores`.
  double cpu_per_message_s = 0;
  double cpu_per_collective_s = 0;
  /// Micro-batch sizes and TP degrees to precompute tables for (profiles add theirs).
  std::vector<int> micro_batches = {1, 2, 4, 8, 16, 32, 64, 128};
  std::vector<int> tp_degrees = {1, 2, 4, 8};
};

/// Sets one option by name (`p2p_latency_s`, `overlap_p2p` (0/1), ...). Errors name the key.
status set_option(sim_options& o, const std::string& key, double value);
/// Applies "key=value,key=value" (e.g. from --set or SAILOR_SIM_OPTIONS).
status set_options(sim_options& o, const std::string& list);

/// A pass's CPU work when `ranks` share the host, relative to the profile's times
/// (sim_options::host_cpu_scale; 1 without a host model).
double host_cpu_scale(const sim_options& o, double ranks);

/// The options as "key=value" lines, for reports.
std::string describe(const sim_options& o);

/// What the context is built from. Pointers may be null where the input is absent; at least
/// one of `cluster` and `network` must be given.
struct sim_inputs {
  config::model_shape model;
  const config::model_profile* profile = nullptr;
  config::gpu_catalog gpus = config::gpu_catalog::builtin();
  const config::cluster* cluster = nullptr;          ///< links, zones, prices
  const config::sailor_network* network = nullptr;   ///< Sailor's fits (win over cluster links)
  config::job job;

  /// Sailor's inputs for one of its models: the shape, profile, GPU catalog, network fits and
  /// optimizer (`data` must outlive the inputs).
  static sim_inputs of(const config::sailor_data& data);
};

/// One end of a transfer: a replica's zone, GPU type and TP degree (GPUs used per node).
struct endpoint {
  int zone = -1;
  int gpu = -1;
  int tp = 1;
  int region = 0;  ///< index into the plan's local_sgd regions (0 without local_sgd)
};

/// Per-replica compute of a layer range, seconds for one micro-batch (update: once per iteration).
struct stage_compute {
  double forward_s = 0;
  double backward_s = 0;
  double update_s = 0;
  bool ok = false;          ///< false: no profile and no catalog entry for this GPU type
  bool analytic = false;    ///< true: from the catalog's peak FLOP/s, not a profile
};

/// Per-GPU memory of one replica of a stage, bytes.
struct memory_breakdown {
  double parameters = 0;
  double gradients = 0;
  double optimizer_states = 0;
  double activations = 0;
  double communication_buffers = 0;
  double framework = 0;
  double total() const {
    return parameters + gradients + optimizer_states + activations + communication_buffers + framework;
  }
};

class sim_context {
public:
  /// Builds the tables. Fails when the model shape is unusable or no network is given.
  static result<sim_context> make(const sim_inputs& inputs, sim_options options = {});

  int gpu_id(std::string_view type) const;
  int zone_id(std::string_view zone) const;
  const std::string& gpu_name(int gpu) const { return gpu_names_[gpu]; }
  const std::string& zone_name(int zone) const { return zone_names_[zone]; }
  int num_gpu_types() const { return static_cast<int>(gpu_names_.size()); }
  int num_zones() const { return static_cast<int>(zone_names_.size()); }
  int num_layers() const { return num_layers_; }  ///< num_all_layers of the model

  /// Compute of layers [first, end) on one replica of (gpu, tp) at micro-batch mbs.
  stage_compute compute(int gpu, int tp, int mbs, int first, int end) const;
  /// Parameters (elements) of layers [first, end) on one GPU of a TP-tp replica.
  double params_per_gpu(int tp, int first, int end) const;
  /// Per-GPU memory of a replica holding `in_flight` micro-batches of activations.
  memory_breakdown stage_memory(int gpu, int tp, int mbs, int first, int end, int in_flight,
                                bool recompute) const;
  /// The same replica's memory by Sailor's planner's formula (sim_options::sailor_memory_check).
  double sailor_stage_memory(int tp, int mbs, int first, int end, int in_flight, bool recompute) const;
  /// What a replica needs to be admitted: the larger of the two checks (ours alone when the
  /// second check is off).
  double stage_memory_need(int gpu, int tp, int mbs, int first, int end, int in_flight, bool recompute) const;
  /// Usable memory of one GPU of this type, bytes (0 when unknown).
  double gpu_memory_bytes(int gpu) const { return gpu_memory_[gpu]; }
  /// $/hour of one GPU of this type.
  double usd_per_gpu_hour(int gpu) const { return gpu_price_[gpu]; }
  /// Bytes of the activation (or its gradient) between two stages for one micro-batch.
  double activation_bytes(int mbs) const { return act_bytes_per_sample_ * mbs; }

  /// Seconds to send one activation (or its gradient) of `bytes` from replica a to replica b.
  /// The network fit is the one of the node pair with min(tp, GPUs per node) GPUs taking part
  /// on each side (each side its own count); those flows share it. Partitioned (the default):
  /// the TP ranks each send 1/min(tp_a, tp_b) of it, one copy crosses; otherwise each of b's TP
  /// ranks receives a full copy (see sim_options::p2p_partitioned). Negative: no link known.
  double transfer_s(const endpoint& a, const endpoint& b, double bytes) const;
  /// Per-GPU bandwidth (bytes/s) between two endpoints for messages of `bytes`; <= 0: no link.
  double gpu_bytes_per_s(const endpoint& a, const endpoint& b, double bytes) const;
  /// Egress $/GB from zone a to zone b.
  double egress_usd_per_gb(int zone_a, int zone_b) const;
  /// Data-parallel gradient all-reduce of a stage with `stage_params` parameters (whole, not
  /// per GPU) among `n` replicas: per shard among the replicas holding it, a ring inside one
  /// zone, hierarchical across zones (sim_options::hierarchical_allreduce), in buckets. Negative when a link is missing.
  /// `calls` > 0: issued as that many collectives of equal size (one per layer) instead of
  /// buckets of `bucket_bytes`.
  double allreduce_s(const endpoint* replicas, int n, double stage_params, int calls = 0) const;
  /// Bytes that cross zones in that all-reduce, and their egress cost in $.
  double allreduce_egress_usd(const endpoint* replicas, int n, double stage_params) const;

  const sim_options& options() const { return options_; }
  const config::model_shape& model() const { return model_; }
  const config::job& job() const { return job_; }
  /// Whether any analytic (catalog-based) timing was used for this GPU type.
  bool has_profile(int gpu) const { return has_profile_[gpu]; }

private:
  struct table {  // prefix sums over layers, size num_layers_ + 1
    std::vector<double> fwd, bwd, upd;
    bool analytic = false;
  };
  const table* find_table(int gpu, int tp, int mbs) const;
  // The steps of make(), in order (context.cpp).
  void init_gpus(const config::gpu_catalog& catalog, const config::cluster* cluster,
                 const config::model_profile* profile);
  void init_zones(const sim_inputs& in);
  void init_layer_sizes(const config::model_profile* profile);
  void init_time_tables(const config::gpu_catalog& catalog, const config::model_profile* profile);
  /// From the profile of (tp, mbs), or the nearest profiled mbs at this tp; false if none.
  bool init_profiled_table(table& t, const config::gpu_profile& gp, const config::gpu_spec* spec, int tp,
                           int mbs) const;
  /// From the catalog's peak FLOP/s (no profile for this type).
  void init_analytic_table(table& t, const config::gpu_spec& spec, int tp, int mbs) const;
  void init_network(const sim_inputs& in);
  // allreduce_s's two algorithms over replicas sorted by zone (network.cpp); negative: no link.
  double ring_allreduce_s(const endpoint* ring, int k, double shard, double msg, double buckets) const;
  double hierarchical_allreduce_s(const endpoint* ring, int k, double shard, double msg, double buckets) const;
  /// The latency of the cluster's link between two zones (0 with Sailor's fits).
  double zone_latency_s(int za, int zb) const;
  /// Aggregate GB/s of the node pair when na GPUs of a's node and nb of b's take part.
  double link_gbytes_per_s(const endpoint& a, const endpoint& b, double bytes, int na, int nb) const;

  sim_options options_;
  config::model_shape model_;
  config::job job_;
  int num_layers_ = 0;
  std::vector<std::string> gpu_names_, zone_names_;
  std::unordered_map<std::string, int> zone_index_;  // zone_names_ by name (clouds list hundreds)
  std::vector<double> gpu_memory_, gpu_price_, gpu_mem_bw_;
  std::vector<char> has_profile_;
  std::vector<int> gpus_per_node_;
  std::vector<double> gpu_nic_;  // bytes/s of a node's NIC (catalog), 0 when unknown
  // tables_[gpu][tp_index][mbs_index]; tp_index = log2(tp); mbs_index = mbs_slot_[mbs], the
  // rank of mbs among the sizes tabulated (any size up to max_mbs, at most max_mbs_index of
  // them: a profile measured at 1, 2, 3, 4, 6 and 12 sequences is used as measured).
  static constexpr int max_tp_index = 5, max_mbs_index = 24, max_mbs = 512;
  std::vector<int> mbs_slot_;  // size max_mbs + 1; -1: not tabulated
  std::vector<table> tables_;
  std::vector<double> params_prefix_[max_tp_index];    // elements per GPU, by tp index
  std::vector<double> act_prefix_[max_tp_index];       // bytes per sample, by tp index
  double act_bytes_per_sample_ = 0;
  // network: fits by (zone, gpu, n index) pairs, dense, or the cluster's links by zone pair
  struct fit { double a = 0, b = 0, c = 0, max = 0; bool ok = false; };
  static constexpr int max_fit_n = 4;  // GPUs per node used: 1, 2, 4, 8
  std::vector<fit> fits_;      // [za][ga][na][zb][gb][nb]
  std::vector<config::zone_link> zone_links_;  // [za][zb] when no Sailor fits
  std::vector<char> zone_link_ok_;
  std::vector<double> egress_;  // [za][zb]
  bool use_fits_ = false;
};

/// The replicas of a resolved stage: up to `inline_capacity` stored in place (no allocation for
/// the plans the planner scores by the million), any number more on the heap. Reads like the
/// fixed array it replaces: `list[i]`, and it converts to `const endpoint*` (as
/// `sim_context::allreduce_s` takes).
class replica_list {
public:
  static constexpr int inline_capacity = 8;
  replica_list() = default;
  replica_list(const replica_list& o) { assign(o.data(), o.size_); }
  replica_list(replica_list&& o) noexcept { take(std::move(o)); }
  replica_list& operator=(const replica_list& o) {
    if (this != &o) assign(o.data(), o.size_);
    return *this;
  }
  replica_list& operator=(replica_list&& o) noexcept {
    if (this != &o) take(std::move(o));
    return *this;
  }
  /// Sets the count; new entries are default endpoints. Keeps the first min(old, n) entries.
  void resize(int n) {
    if (n < 0) n = 0;
    if (n > inline_capacity) {
      if (size_ <= inline_capacity) heap_.assign(inline_, inline_ + size_);
      heap_.resize(static_cast<std::size_t>(n));
    } else if (size_ > inline_capacity) {
      for (int i = 0; i < n; ++i) inline_[i] = heap_[static_cast<std::size_t>(i)];
      heap_.clear();
    } else {
      for (int i = size_ < 0 ? 0 : size_; i < n && i < inline_capacity; ++i) inline_[i] = endpoint{};
    }
    size_ = n;
  }
  void push_back(const endpoint& e) {
    resize(size_ + 1);
    data()[size_ - 1] = e;
  }
  void clear() { resize(0); }
  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  endpoint* data() { return size_ <= inline_capacity ? inline_ : heap_.data(); }
  const endpoint* data() const { return size_ <= inline_capacity ? inline_ : heap_.data(); }
  endpoint& operator[](std::size_t i) { return data()[i]; }
  const endpoint& operator[](std::size_t i) const { return data()[i]; }
  operator const endpoint*() const { return data(); }
  operator endpoint*() { return data(); }
  endpoint* begin() { return data(); }
  endpoint* end() { return data() + size_; }
  const endpoint* begin() const { return data(); }
  const endpoint* end() const { return data() + size_; }

private:
  void assign(const endpoint* first, int n) {
    resize(0);
    resize(n);
    endpoint* d = data();
    for (int i = 0; i < n; ++i) d[i] = first[i];
  }
  void take(replica_list&& o) {
    if (o.size_ > inline_capacity) {
      heap_ = std::move(o.heap_);
    } else {
      heap_.clear();
      for (int i = 0; i < o.size_; ++i) inline_[i] = o.inline_[i];
    }
    size_ = o.size_;
    o.heap_.clear();
    o.size_ = 0;
  }
  int size_ = 0;
  endpoint inline_[inline_capacity];
  std::vector<endpoint> heap_;
};

/// A plan with names resolved to ids, checked against the model; what the hot path reads.
struct resolved_plan {
  /// Limits of `resolve`: stages per plan, replicas per stage (no fixed storage behind the
  /// latter; a stage can hold thousands of replicas).
  static constexpr int max_stages = 64, max_replicas = 1 << 16;
  int micro_batch = 1;
  int global_batch = 0;
  int num_stages = 0;
  struct stage {
    int first = 0, end = 0;
    bool recompute = false;
    int num_replicas = 0;  ///< == replicas.size()
    replica_list replicas;
  };
  std::vector<stage> stages;
  /// DiLoCo (config::plan::local_sgd): the regions run `inner_steps` iterations apart (each
  /// replica's `region` says which), then exchange their parameter deltas. 0: synchronous.
  int inner_steps = 0;
  int num_regions = 1;
};

/// Validates `p` (layers cover the model once, known GPU types and zones, links between
/// consecutive stages) and resolves it. Errors name what is missing.
result<resolved_plan> resolve(const sim_context& ctx, const config::plan& p);

struct stage_estimate {
  int first_layer = 0, end_layer = 0;
  double forward_s = 0, backward_s = 0, update_s = 0;  ///< slowest replica, per micro-batch
  double send_forward_s = 0;      ///< activation to the next stage, per micro-batch
  double send_backward_s = 0;     ///< gradient to the previous stage, per micro-batch
  double allreduce_s = 0;
  int micro_batches = 0;          ///< per replica
  int slowest_replica = 0;
  bool analytic = false;
};

struct gpu_memory {
  int stage = 0, replica = 0;
  std::string gpu_type, zone;
  int tp = 1;
  memory_breakdown bytes;
  double capacity_bytes = 0;
  double sailor_check_bytes = 0;  ///< by Sailor's formula (0: that check is off)
  bool fits() const { return capacity_bytes <= 0 || std::max(bytes.total(), sailor_check_bytes) <= capacity_bytes; }
};

/// The estimate of a plan: the figures a plan records (config::plan_estimate: iteration time,
/// throughput, costs, peak memory as the max over GPUs), more scalars, and breakdowns that only
/// `simulate` fills (per stage times, per GPU memory, the notes, e.g. which GPU types used the
/// analytic model). `closed_form` fills the scalars alone, without allocating: it is what the
/// planner ranks by.
struct estimate : config::plan_estimate {
  double pipeline_s = 0;            ///< warm-up, steady state and drain
  double warmup_drain_s = 0;        ///< one micro-batch's round trip through the pipeline (simulate)
  double steady_s = 0;              ///< (m-1) periods of the bottleneck stage (simulate)
  int bottleneck_stage = 0;         ///< the stage whose view of the schedule is the longest
  double sync_and_update_s = 0;     ///< after the pipeline: all-reduce and optimizer
  bool fits_memory = true;
  double worst_memory_headroom_bytes = 0;  ///< min over GPUs of capacity - need (< 0: OOM)
  int worst_memory_stage = -1;      ///< the stage of that GPU
  int worst_memory_replica = -1;
  bool worst_memory_by_sailor_check = false;  ///< that GPU's need is Sailor's formula's, not ours
  /// Each check on its own: the least capacity - need over GPUs (< 0: out of memory), ours and
  /// Sailor's formula's (sim_options::sailor_memory_check; 0 when off). From `simulate`.
  double our_check_headroom_bytes = 0;
  double sailor_check_headroom_bytes = 0;
  double tokens_per_s = 0;
  double gpu_usd_per_hour = 0;
  double egress_usd_per_iteration = 0;
  double egress_bytes_per_iteration = 0;  ///< from `simulate`
  /// DiLoCo plans (resolved_plan::inner_steps > 0), else 0: the slowest region's inner
  /// iteration; the outer exchange of the parameter deltas (slowest stage, all fragments); the
  /// exchange time the overlap does not hide plus the outer step, per iteration (amortised over
  /// the inner steps; iteration_time_s = inner + this); egress $ of the exchange per iteration.
  double inner_iteration_s = 0;
  double outer_exchange_s = 0;
  double outer_exposed_s = 0;
  double outer_egress_usd_per_iteration = 0;

  // Breakdowns (empty from `closed_form`).
  std::vector<stage_estimate> stages;
  std::vector<gpu_memory> memory;   ///< one entry per replica (all its GPUs are alike)
  std::string memory_verdict;       ///< "fits", or which GPU is over and by how much

  /// What a plan records of it (config::plan::estimate): its figures without the notes.
  config::plan_estimate summary() const;
  /// The replica of `stage` whose need is the largest share of its capacity (the first such),
  /// or null without a memory breakdown.
  const gpu_memory* fullest_replica(int stage) const;
};

/// The closed form: the scalars of the estimate, allocation-free (about a microsecond). A plan
/// that does not fit memory is reported by `worst_memory_headroom_bytes < 0`, not refused.
estimate closed_form(const sim_context& ctx, const resolved_plan& p);

/// The closed form with breakdowns.
result<estimate> simulate(const sim_context& ctx, const config::plan& p);

/// One event of the 1F1B timeline.
struct trace_event {
  std::string name;   ///< F3, B3, send F3, all-reduce, update
  std::string category;  ///< compute, p2p, collective, optimizer
  int stage = 0;
  int lane = 0;       ///< 0: compute stream, 1: sends
  double start_s = 0, end_s = 0;
};

struct event_result {
  double iteration_time_s = 0;
  double pipeline_s = 0;
  std::vector<trace_event> events;
};

/// Event-driven simulation of the 1F1B schedule of the plan, with the same physics as the
/// closed form: one representative pipeline whose stages run at their slowest replica's pace
/// when every stage has the same replica count; otherwise every replica on its own (its
/// micro-batches j = r mod R_s, its compute and links; trace lane 2r, sends 2r+1).
result<event_result> simulate_events(const sim_context& ctx, const config::plan& p);

/// Chrome trace JSON (chrome://tracing, Perfetto) of a timeline: one process per stage.
std::string to_chrome_trace(const event_result& r);

}  // namespace sailor::simulator
