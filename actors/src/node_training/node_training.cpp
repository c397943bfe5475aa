#include "sailor/actors/node_training.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <caf/send.hpp>

#include "sailor/comm/collective.hpp"
#include "sailor/train/data_plane.hpp"
#include "sailor/train/checkpoint.hpp"
#include "sailor/train/shard_service.hpp"
#include "checkpoint_copies.hpp"
#include "checkpoint_pins.hpp"
#include "fresh_start.hpp"
#include "node_recovery.hpp"
#include "release_watch.hpp"
#include "sailor/actors/placement.hpp"
#include "sailor/config/log.hpp"

namespace sailor::train {

struct node_trainer::impl : std::enable_shared_from_this<node_trainer::impl> {
  std::string node;
  node_training_options options;
  std::mutex mu;
  caf::actor agent;
  std::shared_ptr<actors::rendezvous_client> store;
  std::condition_variable joined;
  std::mutex fetching;  // one fetch of checkpoint shards at a time into the state folder
  std::map<std::int64_t, actors::training_job> jobs;
  std::atomic<std::int64_t> current{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> leaving{false};
  std::atomic<bool> finished_job{false};  // a rank completed the job's last iteration
  struct rank_thread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    std::shared_ptr<release_signal> release;
  };
  std::vector<rank_thread> threads;
  // Copies each checkpoint shard this node's ranks write to a node outside their stage
  // (checkpoint_copies.hpp); null without a transport or a state folder. Gone in stop(),
  // once the rank threads that use it have ended.
  std::unique_ptr<checkpoint_copier> copier;

  // Joins the threads that have finished (those of past plans), so they do not pile up over
  // re-plans. Holds `mu`.
  void reap() {
    std::erase_if(threads, [](rank_thread& t) {
      if (!t.done->load()) return false;
      t.thread.join();
      return true;
    });
  }
  checkpoint_pins pins;  // what the writers keep whatever their count (guarded by mu)

  void send(actors::train_report r) {
    caf::actor to;
    {
      std::lock_guard lock{mu};
      to = agent;
    }
    if (to)
      caf::anon_send(to, std::move(r));
  }

  // --slowdown: the rank waits (F-1) x its compute, reported as compute (an emulated slow
  // device; its peers wait for it as they would).
  void stretch_compute(iteration_telemetry& tel) const {
    const double f = options.slowdown ? options.slowdown->load() : 1.0;
    if (!(f > 1.0) || f > 1000)
      return;
    const double extra = (f - 1.0) * tel.compute_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(extra));
    tel.compute_s += extra;
    tel.total_s += extra;
  }

  // A job's folder as this node stores it: relative folders live in the node's own state
  // folder (nodes share no file system).
  std::string local_path(const std::string& dir) const {
    if (dir.empty() || std::filesystem::path{dir}.is_absolute() || options.state_dir.empty())
      return dir;
    return (std::filesystem::path{options.state_dir} / dir).string();
  }

  // A path in the state folder, relative to it (as other nodes name it); empty otherwise.
  std::string relative_path(const std::string& path) const {
    if (path.empty() || options.state_dir.empty())
      return {};
    auto rel = std::filesystem::path{path}.lexically_relative(options.state_dir);
    return rel.empty() || *rel.begin() == ".." ? std::string{} : rel.string();
  }

  // The shards of the job's checkpoint this node lacks, from the nodes that hold them.
  status fetch(const actors::training_job& job, std::int64_t& fetched) {
    if (job.restore_files.empty() || !options.transport)
      return {};
    std::vector<shard_source> sources;
    for (std::size_t i = 0; i < job.restore_files.size() && i < job.restore_holders.size(); ++i)
      sources.push_back({job.restore_files[i], job.restore_holders[i]});
    std::lock_guard lock{fetching};
    return fetch_shards(*options.transport, options.state_dir, sources,
                        std::chrono::milliseconds{job.timeout_ms}, &fetched);
  }

  // The survivors' state into this rank's tensors, no file written or read for what a holder
  // keeps in memory (node_recovery.hpp's gather_state): the bytes of state restored (from this
  // node's memory or over the transport), or why it failed.
  result<std::int64_t> restore_in_memory(const actors::training_job& job, int rank,
                                         const actors::stage_role& role, stage_executor& exec,
                                         release_signal& release) {
    const auto& stage = job.plan.stages.at(static_cast<std::size_t>(role.stage));
    const auto from = "the state after iteration " + std::to_string(job.start_iteration);
    fetch_cancel cancel;
    auto state = [&] {
      // No grace: nothing of a restore is worth finishing once the plan is gone.
      abort_on_release watch{release, [] { return std::chrono::milliseconds{0}; },
                             [&cancel, &job] {
                               cancel.cancel("plan v" + std::to_string(job.plan_version) +
                                             " was released");
                             }};
      return gather_state(job, stage.first_layer, stage.end_layer(), options.memory.get(),
                          options.state_dir, *options.transport, &cancel);
    }();
    if (!state)
      return sailor::error{state.error().kind, "fetching " + from + ": " + state.error().to_string(),
                           "", 0, ""};
    if (auto err = exec.restore(state->shards, job.start_iteration))
      return sailor::error{err->kind, "restoring " + from + ": " + err->to_string(), "", 0, ""};
    log::get("train")->info("[{} rank {}] resumed from {} in memory ({} shards, {} bytes, {} of "
                            "them over the transport, no file written)",
                            node, rank, from, state->shards.size(), state->bytes,
                            state->fetched_bytes);
    return state->bytes;
  }

  // A node of the plan that holds state this job restores and cannot be reached now (its
  // name; empty: none): a fetch that failed on a holder that died names it, so the supervisor
  // re-plans without it rather than forgetting the state the others hold.
  std::string unreachable_holder(const actors::training_job& job) const {
    std::set<std::string> holders{job.restore_holders.begin(), job.restore_holders.end()};
    const auto bound = std::chrono::milliseconds{std::min<std::int64_t>(job.timeout_ms, 3000)};
    for (std::size_t i = 0; i < job.peer_nodes.size() && i < job.peer_addresses.size(); ++i)
      if (job.peer_nodes[i] != node && holders.count(job.peer_addresses[i]) &&
          probe_shard_server(*options.transport, job.peer_addresses[i], bound))
        return job.peer_nodes[i];
    return {};
  }

  // Leaving with notice: the state this rank keeps in memory goes to a node that stays, so
  // that it outlives this node's grace period (the next plan may take longer to come).
  void hand_over(const actors::training_job& job, const actors::stage_role& role,
                 const std::string& path) {
    if (!options.transport || !options.memory)
      return;
    auto target = handover_target(job, role, node);
    if (!target) {
      log::get("train")->warn("[{}] leaves with {}: no other node of its plan takes it", node,
                              path);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    auto held = options.memory->get(path);
    if (auto err = hand_over_shard(*options.transport, *target, path, held,
                                   std::chrono::milliseconds{job.timeout_ms})) {
      log::get("train")->warn("[{}] could not hand {} over: {}", node, path, err->message);
      return;
    }
    log::get("train")->info("[{}] handed {} ({} bytes) over to {} in {:.3f} s", node, path,
                            held ? held->size() : 0, *target,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }

  // A checkpoint shard this rank wrote (relative to the state folder) goes to a node of
  // another stage as well, off this thread: the checkpoint then outlives the whole stage.
  void copy_checkpoint(const actors::training_job& job, const actors::stage_role& role,
                       const std::string& path) {
    if (!copier || path.empty())
      return;
    auto target = handover_target(job, role, node);
    if (!target)
      return;  // a plan of one node: nowhere else to keep it
    copier->copy(path, *target, std::chrono::milliseconds{job.timeout_ms});
  }

  // The rank's data-plane channel: the node's transport kind and job token, the store and
  // address of its collectives, shaped under link emulation.
  comm::transport_channel_options data_plane(const actors::training_job& job, const rank_role& rr,
                                             const comm::gloo_options& gopts) const {
    comm::transport_channel_options c;
    c.make_transport = options.make_data_transport;
    if (options.transport) {
      c.transport.token = options.transport->options().token;
      c.transport.tls = options.transport->options().tls;
    }
    c.store = gopts.store;
    c.host = options.advertise;
    c.timeout = gopts.timeout;
    c.prefix = gopts.prefix;
    return data_plane_options(job.plan, rr, job.links, std::move(c), options.link_changes);
  }

  // The report of a completed iteration: its measurements and the newest checkpoint shard.
  actors::train_report iteration_report(const actors::train_report& base,
                                        const iteration_telemetry& tel,
                                        const stage_executor& exec) const {
    auto r = base;
    r.iteration = tel.iteration;
    r.loss = tel.loss;
    r.compute_s = tel.compute_s;
    r.send_wait_s = tel.send_wait_s;
    r.recv_wait_s = tel.recv_wait_s;
    r.all_reduce_s = tel.all_reduce_s;
    r.total_s = tel.total_s;
    r.data_s = tel.data_s;
    r.optimizer_s = tel.optimizer_s;
    r.checkpoint_s = tel.checkpoint_s;
    r.tokens = tel.tokens;
    r.checkpoint_file = relative_path(exec.last_checkpoint_file());
    return r;
  }

  struct rank_work final : actors::stage_work {
    std::shared_ptr<release_signal> stop = std::make_shared<release_signal>();
    ~rank_work() override { stop->release(); }
  };

  // The first peer of the job this node cannot reach at its advertised address (the node's
  // name and why), before the rendezvous would wait for it.
  std::optional<std::pair<std::string, std::string>> unreachable_peer(
    const actors::training_job& job) const {
    if (!options.transport)
      return std::nullopt;
    for (std::size_t i = 0; i < job.peer_nodes.size() && i < job.peer_addresses.size(); ++i) {
      if (job.peer_nodes[i] == node)
        continue;
      if (auto err = probe_shard_server(*options.transport, job.peer_addresses[i],
                                        std::chrono::milliseconds{job.timeout_ms}))
        return std::pair{job.peer_nodes[i], "node " + node + " cannot reach node " +
                                              job.peer_nodes[i] + " at " +
                                              job.peer_addresses[i] + " (the address it "
                                              "advertised): " + err->message};
    }
    return std::nullopt;
  }

  // The state the job resumes from into the rank's tensors: the survivors' memory, or the
  // checkpoint on disk (its missing shards fetched first). False when the rank stops here: a
  // failure reported through `fail`, or the plan released meanwhile.
  template <class Fail, class Reached>
  bool restore(const actors::training_job& job, const actors::stage_role& role, int rank,
               stage_executor& exec, release_signal& release, Fail& fail, Reached& reached) {
    if (starts_from_pretrained(job)) {
      if (auto err = load_init_from(job, exec)) {
        fail("restore", err->to_string());
        return false;
      }
      log::get("train")->info("[{} rank {}] starts from {}", node, rank, job.init_from);
      reached("restore");
    }
    if (job.start_iteration == 0)
      return true;
    if (restores_from_memory(job) && options.transport) {
      auto fetched = restore_in_memory(job, rank, role, exec, release);
      if (!fetched && release.released) {
        log::get("train")->info("[{} rank {}] gave up restoring: plan v{} was released", node,
                                rank, job.plan_version);
        return false;
      }
      if (!fetched) {
        fail("restore", fetched.error().message, unreachable_holder(job));
        return false;
      }
      reached("restore", *fetched);
      return true;
    }
    std::int64_t fetched = 0;
    if (auto err = fetch(job, fetched)) {
      fail("restore", "fetching the checkpoint after iteration " +
                        std::to_string(job.start_iteration) + ": " + err->to_string());
      return false;
    }
    if (auto err = exec.restore(local_path(job.restore_dir), job.start_iteration)) {
      fail("restore", "restoring the checkpoint after iteration " +
                        std::to_string(job.start_iteration) + ": " + err->to_string());
      return false;
    }
    log::get("train")->info("[{} rank {}] resumed from the checkpoint after iteration {}",
                            node, rank, job.start_iteration);
    reached("restore", fetched);
    return true;
  }

  void run(const actors::training_job& job, const actors::stage_role& role, int rank,
           const actors::stage_ready_fn& ready, release_signal& release) {
    const std::atomic<bool>& released = release.released;
    actors::train_report base;
    base.plan_version = job.plan_version;
    base.node = node;
    base.rank = rank;
    base.stage = role.stage;
    base.replica = role.replica;
    base.tp_rank = role.tp_rank;
    // A failure is its own kind of report, whatever the iteration (a resumed plan's ranks
    // fail before their first one), with the step it happened in.
    auto fail = [&](const char* phase, const std::string& why, const std::string& blamed = {}) {
      auto r = base;
      r.kind = static_cast<std::int32_t>(actors::report_kind::failed);
      r.phase = phase;
      r.error = why;
      r.blamed_node = blamed;
      log::get("train")->error("[{} rank {}] {}", node, rank, why);
      send(std::move(r));
    };
    auto reached = [&](const char* phase, std::int64_t bytes = 0) {
      auto r = base;
      r.kind = static_cast<std::int32_t>(actors::report_kind::reached);
      r.phase = phase;
      r.bytes = bytes;
      send(std::move(r));
    };
    comm::gloo_options gopts;
    {
      // set_agent runs right after the node joined; a role can only come after that, but
      // the two race on different threads: wait for it, bounded.
      std::unique_lock lock{mu};
      joined.wait_for(lock, std::chrono::milliseconds{job.timeout_ms}, [this] { return !!store; });
      if (store)
        gopts.store = store->scope(job.plan_version);
    }
    if (!gopts.store) {
      fail("setup", "no rendezvous store: the node has not joined a coordinator");
      return;
    }
    if (auto peer = unreachable_peer(job)) {
      fail("setup", peer->second, peer->first);
      return;
    }
    gopts.hostname = options.advertise;
    gopts.timeout = std::chrono::milliseconds{job.timeout_ms};
    gopts.prefix = "sailor-v" + std::to_string(job.plan_version);
    auto factory = comm::make_gloo_factory(rank, gopts);
    if (!factory) {
      fail("setup", "communicators: " + factory.error().to_string());
      return;
    }
    rank_role rr{role.stage, role.replica, role.tp_rank};
    auto topts = options_for(job);
    // The rank's share of the cores goes to OpenBLAS (the matrix products); LibTorch's other
    // operators stay on the rank's thread: its OpenMP pool spin-waits between the small
    // operators of a step (two intra-op threads made the char-LM recipe 2.4x slower here).
    // A job that names a count sets both, as before.
    const int threads = actors::rank_threads(job.torch_threads, options.threads_per_rank,
                                             actors::ranks_on_host(job.plan, job.peer_nodes,
                                                                   job.peer_addresses, node),
                                             std::thread::hardware_concurrency());
    topts.torch_threads = job.torch_threads > 0 ? threads : 1;
    topts.blas_threads = threads;
    topts.checkpoint_dir = local_path(topts.checkpoint_dir);
    topts.keep_checkpoint = [weak = std::weak_ptr<impl>(shared_from_this())](
                              const std::string& folder) {
      auto self = weak.lock();
      if (!self)
        return false;
      std::lock_guard lock{self->mu};
      return self->pins.keeps(folder);
    };
    auto p2p = comm::make_transport_channel_factory(rank, data_plane(job, rr, gopts));
    auto exec = stage_executor::create(job.model, job.plan, rr, **factory, topts, p2p.get());
    if (!exec) {
      fail("setup", "executor: " + exec.error().to_string());
      return;
    }
    reached("setup");
    log::get("train")->info("[{} rank {}] stage {} replica {} tp rank {}: {} parameters", node,
                            rank, role.stage, role.replica, role.tp_rank,
                            (*exec)->num_parameters());
    if (!restore(job, role, rank, **exec, release, fail, reached))
      return;
    ready();
    int end = 0;
    bool diverged = false;
    {
      iteration_grace grace;
      abort_on_release watch{release, [&grace] { return grace.get(); },
                             [&exec, &job] {
                               (*exec)->abort("plan v" + std::to_string(job.plan_version) +
                                              " was released");
                             }};
      end = train(job, role, base, **exec, released, grace, fail, diverged);
    }
    if (end < job.iterations) {
      auto kept = diverged ? not_kept(base, end)
                           : keep_state(options.memory.get(), job, base, **exec, end);
      send(kept);
      if (leaving && kept.error.empty())
        hand_over(job, role, kept.checkpoint_file);
      return;
    }
    if (auto err = (*exec)->flush_checkpoints())
      log::get("train")->warn("[{} rank {}] last checkpoint: {}", node, rank, err->to_string());
    finished_job = true;
  }

  // Runs the job's iterations; returns the number of iterations completed when it stops
  // (the plan ended, or an iteration failed: told through `fail`, or not finite: `diverged`).
  template <class Fail>
  int train(const actors::training_job& job, const actors::stage_role& role,
            const actors::train_report& base, stage_executor& exec,
            const std::atomic<bool>& released, iteration_grace& grace, Fail& fail,
            bool& diverged) {
    std::string copied;  // the newest checkpoint shard copied
    if (auto val = initial_validation(job, base, exec)) {
      if (!*val) {
        if (!released)
          fail("iteration", "validation of the starting weights: " + val->error().to_string());
        return job.start_iteration;
      }
      log::get("train")->info("[{} rank {}] validation loss {:.4f} before training", node,
                              base.rank, (*val)->val_loss);
      send(std::move(**val));
    }
    for (int it = job.start_iteration; it < job.iterations; ++it) {
      if (stopping || released || current.load() != job.plan_version)
        return it;
      auto tel = exec.run_iteration(it);
      if (!tel && released) {
        // Abandoned on purpose (abort_on_release): no failure of the plan.
        log::get("train")->info("[{} rank {}] abandoned iteration {}: plan v{} was released",
                                node, base.rank, it, job.plan_version);
        return it;
      }
      if (!tel && non_finite_iteration(tel.error())) {
        (void)exec.flush_checkpoints();  // the newest one: what the job may go back to
        send(diverged_report(base, it, tel.error().message,
                             relative_path(exec.last_checkpoint_file())));
        diverged = true;
        return it;
      }
      if (!tel) {
        fail("iteration", "iteration " + std::to_string(it) + ": " + tel.error().to_string());
        return it;
      }
      stretch_compute(*tel);
      grace.measured(tel->total_s);
      if (options.access)
        options.access->completed(job.plan_version, it + 1);
      auto r = iteration_report(base, *tel, exec);
      // Every rank runs the pass (it is a collective of the plan) after the same iterations:
      // every eval_every-th and the last (as bench/char_lm does).
      if (job.eval_every > 0 && ((it + 1) % job.eval_every == 0 || it + 1 == job.iterations)) {
        auto val = exec.validation_loss();
        if (!val && released) {  // the iteration completed: its report, without validation
          send(std::move(r));
          return it + 1;
        }
        if (!val) {
          fail("iteration", "validation after iteration " + std::to_string(it + 1) + ": " +
                              val.error().to_string());
          return it + 1;
        }
        r.has_val_loss = true;
        r.val_loss = *val;
      }
      if (r.checkpoint_file != copied) {
        copied = r.checkpoint_file;
        copy_checkpoint(job, role, copied);
      }
      send(std::move(r));
      if (auto why = exec.take_checkpoint_failure(); !why.empty()) {
        auto c = base;
        c.kind = static_cast<std::int32_t>(actors::report_kind::checkpoint_failed);
        c.iteration = it;
        c.error = why;
        send(std::move(c));
      }
    }
    return job.iterations;
  }
};

node_trainer::node_trainer(node_training_options options) : impl_(std::make_shared<impl>()) {
  impl_->node = options.node_name;
  impl_->options = std::move(options);
  if (impl_->options.memory)
    impl_->options.memory->set_handover_listener(
      [weak = std::weak_ptr<impl>(impl_)](const std::string& path, std::int64_t bytes) {
        if (auto self = weak.lock())
          self->send(handover_report(self->node, path, bytes));
      });
  if (impl_->options.transport && !impl_->options.state_dir.empty())
    impl_->copier = std::make_unique<checkpoint_copier>(*impl_->options.transport,
                                                        impl_->options.state_dir, impl_->node);
}

void node_trainer::leaving() { impl_->leaving = true; }

bool node_trainer::finished_job() const { return impl_->finished_job; }

std::int64_t node_trainer::plan_version() const { return impl_->current; }

node_trainer::~node_trainer() { stop(); }

void node_trainer::set_agent(caf::actor agent, std::shared_ptr<actors::rendezvous_client> store) {
  std::lock_guard lock{impl_->mu};
  impl_->agent = std::move(agent);
  impl_->store = std::move(store);
  impl_->joined.notify_all();
}

void node_trainer::on_job(const actors::training_job& job) {
  std::lock_guard lock{impl_->mu};
  impl_->jobs[job.plan_version] = job;
  if (job.plan_version > impl_->current)
    impl_->current = job.plan_version;
  // Older jobs are no longer needed.
  while (!impl_->jobs.empty() && impl_->jobs.begin()->first < job.plan_version)
    impl_->jobs.erase(impl_->jobs.begin());
  if (job.plan_version < impl_->current)
    return;
  if (impl_->options.access)  // who may fetch from and hand over to this node
    impl_->options.access->plan(plan_members_of(job));
  // The checkpoint this job restores stays, whatever an older plan's writers still write;
  // the plan folders no plan needs any more go.
  auto& pinned = impl_->pins.restore;
  pinned.clear();
  if (job.start_iteration > 0 && !job.restore_dir.empty())
    pinned = std::filesystem::path{checkpoint_path(impl_->local_path(job.restore_dir),
                                                   job.start_iteration)}
               .lexically_normal()
               .string();
  if (job.checkpoint_dir.empty() || job.keep_checkpoint_dirs.empty())
    return;
  if (impl_->options.memory) {  // copies of peers' checkpoint shards (checkpoint_copies.hpp)
    std::vector<std::string> kept{job.checkpoint_dir};
    kept.insert(kept.end(), job.keep_checkpoint_dirs.begin(), job.keep_checkpoint_dirs.end());
    impl_->options.memory->drop_plan_folders(
      std::filesystem::path{job.checkpoint_dir}.parent_path().string(), kept);
  }
  std::vector<std::string> keep{impl_->local_path(job.checkpoint_dir)};
  for (const auto& dir : job.keep_checkpoint_dirs)
    keep.push_back(impl_->local_path(dir));
  if (!pinned.empty())
    keep.push_back(pinned);  // when it is a copy of a survivor's memory (mem/iter-N)
  const auto job_dir = std::filesystem::path{keep.front()}.parent_path().string();
  for (const auto& gone : remove_plan_folders(job_dir, keep))
    log::get("train")->info("[{}] removed {}: no plan restores from it any more", impl_->node,
                            gone);
}

void node_trainer::on_checkpoint_kept(const actors::checkpoint_kept& kept) {
  std::lock_guard lock{impl_->mu};
  impl_->pins.kept(kept.plan_version, kept.iterations, impl_->local_path(kept.folder));
}

result<std::unique_ptr<actors::stage_work>> node_trainer::on_role(const actors::stage_role& role,
                                                                  actors::stage_ready_fn ready) {
  std::lock_guard lock{impl_->mu};
  if (role.plan_version > impl_->current)
    impl_->current = role.plan_version;
  auto j = impl_->jobs.find(role.plan_version);
  if (j == impl_->jobs.end())
    return std::unique_ptr<actors::stage_work>{};  // control-plane only
  const auto& job = j->second;
  int rank = global_rank_of(job.plan, rank_role{role.stage, role.replica, role.tp_rank});
  if (rank < 0)
    return sailor::error{error_kind::invalid_input,
                         "role stage " + std::to_string(role.stage) + " replica " +
                           std::to_string(role.replica) + " is not in the plan",
                         "", 0, "role"};
  if (auto err = validate_for_training(job.model, job.plan))
    return *err;
  auto state = impl_;
  auto work = std::make_unique<impl::rank_work>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  impl_->reap();
  impl_->threads.push_back({std::thread{[state, job, role, rank, ready = std::move(ready),
                                         stop = work->stop, done] {
                              state->run(job, role, rank, ready, *stop);
                              *done = true;
                            }},
                            done, work->stop});
  return std::unique_ptr<actors::stage_work>{std::move(work)};
}

void node_trainer::stop() {
  impl_->stopping = true;
  std::vector<impl::rank_thread> threads;
  {
    std::lock_guard lock{impl_->mu};
    threads.swap(impl_->threads);
  }
  for (auto& t : threads)
    t.release->release();  // one blocked on a peer that is gone aborts its iteration
  for (auto& t : threads)
    if (t.thread.joinable())
      t.thread.join();
  impl_->copier.reset();
}

}  // namespace sailor::train
