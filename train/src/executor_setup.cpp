// The stage executor's creation: communicators, the data-plane channel and the gradient
// buckets of its data-parallel groups.
#include "executor_impl.hpp"

namespace sailor::train {

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
    } else if (spec.use == group_spec::purpose::region) {
      region_comm = std::move(c);
    } else if (spec.use == group_spec::purpose::region_sync) {
      outer_sync = std::move(c);
    } else if (spec.use == group_spec::purpose::outer_exchange) {
      outer_exchange = std::move(c);
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

void stage_executor::impl::start_local_sgd() {
  detail::outer_groups groups;
  groups.exchange = outer_exchange.get();
  groups.sync = outer_sync.get();
  groups.sync_root = 0;  // the region's first replica leads, and comes first in its groups
  std::vector<torch::Tensor> params;
  for (const auto& p : module->parameters()) params.push_back(p.tensor);
  outer = std::make_unique<detail::local_sgd>(std::move(params), param_layer, plan.local_sgd->inner_steps,
                                              options.outer, groups, who);
  log::get("train")->debug("{} DiLoCo: {} regions, every {} iterations, {} fragment(s), {}{}", who,
                           regions.regions, plan.local_sgd->inner_steps, outer->fragments(),
                           groups.exchange ? "leads its region" : "follows its region's leader",
                           groups.sync ? "" : " (alone in its region)");
}

namespace {

// A text job's tokenizer goes next to its checkpoints (sailor generate and export read it):
// its characters (vocab.json), or a copy of its tokenizer's files.
void keep_tokenizer(const std::string& checkpoint_dir, const config::data_source& data,
                    const models::token_dataset& opened) {
  namespace fs = std::filesystem;
  fs::create_directories(checkpoint_dir);
  const fs::path dir{checkpoint_dir};
  std::error_code ec;
  const auto copy = [&](const std::string& from, const char* name) {
    if (!ec) fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing, ec);
  };
  switch (data.tokenizer.kind) {
    case config::tokenizer_kind::characters:
      std::ofstream(dir / vocabulary_file_name()) << models::vocabulary_json(opened.symbols()) << "\n";
      break;
    case config::tokenizer_kind::sentencepiece:
      copy(data.tokenizer.model, sentencepiece_file_name());
      break;
    case config::tokenizer_kind::gpt2_bpe:
      copy(data.tokenizer.vocab, gpt2_vocab_file_name());
      copy(data.tokenizer.merges, gpt2_merges_file_name());
      break;
  }
  if (ec)
    log::get("train")->warn("cannot keep the tokenizer next to the checkpoints in {} ({}): sailor generate "
                            "will not decode this job's samples", checkpoint_dir, ec.message());
}

}  // namespace

result<std::unique_ptr<stage_executor>> stage_executor::create(
    const config::model_shape& model, const config::plan& plan, const rank_role& role,
    comm::communicator_factory& factory, const train_options& options,
    comm::channel_factory* p2p) {
  if (auto st = validate_for_training(model, plan)) return *st;
  int rank = global_rank_of(plan, role);
  if (rank < 0) return error::invalid_input("", "role is not in the plan");
  if (rank != factory.global_rank())
    return error::invalid_input("", "the factory's global rank " + std::to_string(factory.global_rank()) +
                                    " differs from the role's " + std::to_string(rank));
  try {
    set_compute_threads(options.torch_threads, options.blas_threads);
    if (options.cuda_device >= 0 && !torch::cuda::is_available())
      return error::invalid_input("", "cuda_device " + std::to_string(options.cuda_device) +
                                      " asked for, but this LibTorch sees no CUDA device");
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
      if (!options.checkpoint_dir.empty() && rank == 0 && options.data->format == config::data_format::text)
        keep_tokenizer(options.checkpoint_dir, *options.data, *st->file_data);
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
    st->regions = regions_of(plan);
    st->step_micro_batches = st->micro_batches;
    st->counts_norm = role.replica == 0;
    if (!st->regions.empty()) {
      const int mine = st->regions.region_of_role(role);
      const int last = st->stages - 1;
      st->step_micro_batches = 0;
      for (int m = 0; m < st->micro_batches; ++m)
        st->step_micro_batches += st->regions.region_of[last][replica_of(plan, last, m)] == mine;
      st->counts_norm = st->regions.leads(role);
    }
    st->ops = one_f_one_b(plan)[role.stage][role.replica];
    if (st->ops.empty() || st->ops.back().forward)
      return error::invalid_input("", st->who + " has no micro-batch to run");
    for (std::size_t i = 0; i < st->module->parameters().size(); ++i)
      st->param_layer.push_back(st->module->layer_of(i));
    if (!options.checkpoint_dir.empty()) {
      if (options.checkpoint_every < 1)
        return error::invalid_input("", "checkpoint_every must be at least 1");
      if (role.replica == 0)
        st->checkpoints = std::make_unique<detail::checkpoint_writer>(
            options.checkpoint_dir, model, plan, role, options, st->who);
    }
    if (!st->regions.empty()) st->start_local_sgd();
    log::get("train")->debug("{} executor ready: layers [{}, {}), {} parameters, {} ops",
                             st->who, sp.first_layer, sp.end_layer(),
                             st->module->num_parameters(), st->ops.size());
    return std::unique_ptr<stage_executor>(new stage_executor(std::move(st)));
  } catch (const std::exception& e) {
    return error::failed(std::string("creating the stage executor: ") + e.what());
  }
}

}  // namespace sailor::train
