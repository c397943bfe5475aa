#include "sailor/actors/wire.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include <caf/make_message.hpp>

#include "sailor/actors/messages.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/train/messages.hpp"
#include "sailor/comm/messages.hpp"
#include "sailor/comm/transport.hpp"

namespace sailor::actors {

static_assert(comm::protocol_version == protocol_version,
              "the runtime's protocol version is the Cap'n Proto envelope's");

namespace {

// The optimizer schedule and evaluation settings of a training job, named alike on both sides
// of the wire (actors::training_job and comm::training_job), in either direction.
template <class From, class To>
void copy_schedule(const From& x, To& out) {
  out.min_learning_rate = x.min_learning_rate;
  out.warmup_iterations = x.warmup_iterations;
  out.decay_iterations = x.decay_iterations;
  out.beta1 = x.beta1;
  out.beta2 = x.beta2;
  out.weight_decay = x.weight_decay;
  out.grad_clip = x.grad_clip;
  out.eval_every = x.eval_every;
  out.eval_batches = x.eval_batches;
}

sailor::error bad(std::string message) {
  return sailor::error{error_kind::invalid_input, std::move(message), "", 0, ""};
}

std::vector<char> to_chars(const std::vector<std::byte>& bytes) {
  std::vector<char> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::int64_t ms_of(double seconds) { return std::llround(seconds * 1000.0); }

// -- runtime values <-> comm values --------------------------------------------------------

comm::node_inventory to_comm(const node_inventory& x) {
  comm::node_inventory out{x.name, x.host, x.zone, x.address, {}, x.gpu_type, x.checkpoints};
  for (auto& d : x.devices)
    out.devices.push_back(comm::device_info{d.index, x.gpu_type, d.memory_bytes, d.kind});
  return out;
}

node_inventory from_comm(const comm::node_inventory& x) {
  node_inventory out{x.node_id, x.zone, x.gpu_type, x.host, {}, x.address, x.checkpoints};
  for (auto& d : x.devices)
    out.devices.push_back(device_info{d.index, d.kind, d.memory_bytes});
  return out;
}

comm::role where_of(const std::string& node, const stage_role& r) {
  return comm::role{r.stage, r.replica, r.tp_rank, node, r.device};
}

comm::stage_shape shape_of(const stage_role& r) {
  return comm::stage_shape{r.tp, r.first_layer, r.num_layers, r.micro_batch, r.num_stages,
                           r.gpu_type, r.zone};
}

stage_role stage_role_of(std::uint64_t epoch, const comm::role& w, const comm::stage_shape& s) {
  return stage_role{static_cast<std::int64_t>(epoch), w.stage, w.replica, w.tp_rank, s.tp,
                    w.device, s.first_layer, s.num_layers, s.micro_batch, s.num_stages,
                    s.gpu_type, s.zone};
}

std::uint64_t epoch(std::int64_t plan_version) { return static_cast<std::uint64_t>(plan_version); }

// The node of a role: the one of its replica's rank in the placed plan.
std::string node_in_plan(const config::plan& p, const stage_role& r) {
  if (r.stage < 0 || r.stage >= p.num_stages())
    return {};
  auto& reps = p.stages[r.stage].replicas;
  if (r.replica < 0 || r.replica >= static_cast<int>(reps.size()))
    return {};
  auto& nodes = reps[r.replica].nodes;
  return r.tp_rank >= 0 && r.tp_rank < static_cast<int>(nodes.size()) ? nodes[r.tp_rank]
                                                                       : std::string{};
}

// The comm body of a runtime message, if it is a wire message.
std::optional<comm::message_body> to_comm_body(const caf::message& m, const std::string& source) {
  if (m.match_elements<join_request>())
    return comm::join_request{to_comm(m.get_as<join_request>(0).inventory)};
  if (m.match_elements<join_accepted>()) {
    auto& x = m.get_as<join_accepted>(0);
    return comm::join_accept{x.node, source, x.heartbeat_interval_ms / 1000.0, x.zone_actor,
                             x.heartbeat_timeout_ms / 1000.0};
  }
  if (m.match_elements<join_refused>())
    return comm::refusal{comm::refuse_reason::other, m.get_as<join_refused>(0).reason};
  if (m.match_elements<heartbeat>()) {
    auto& x = m.get_as<heartbeat>(0);
    auto now = std::chrono::system_clock::now().time_since_epoch();
    return comm::heartbeat{x.node, x.seq,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()};
  }
  if (m.match_elements<role_assignment>()) {
    // Roles travel as places in the plan; the rest of a role follows from the plan.
    auto& x = m.get_as<role_assignment>(0);
    comm::role_assignment out;
    out.plan_epoch = epoch(x.plan_version);
    out.plan = x.plan;
    for (auto& r : x.roles)
      out.roles.push_back(where_of(node_in_plan(x.plan, r), r));
    return out;
  }
  if (m.match_elements<stage_ready>()) {
    auto& x = m.get_as<stage_ready>(0);
    return comm::stage_ready{epoch(x.role.plan_version), where_of(x.node, x.role),
                             shape_of(x.role)};
  }
  if (m.match_elements<stage_failed>()) {
    auto& x = m.get_as<stage_failed>(0);
    return comm::stage_failed{epoch(x.role.plan_version), where_of(x.node, x.role),
                              shape_of(x.role), x.reason};
  }
  if (m.match_elements<telemetry>()) {
    auto& x = m.get_as<telemetry>(0);
    comm::iteration_telemetry out;
    out.iteration = x.iteration;
    out.where = comm::role{x.stage, x.replica, 0, x.node, 0};
    out.iteration_s = x.iteration_s;
    return out;
  }
  if (m.match_elements<preemption_notice>()) {
    auto& x = m.get_as<preemption_notice>(0);
    return comm::preemption_notice{x.node, 0, x.reason};
  }
  if (m.match_elements<shutdown_notice>())
    return comm::shutdown_notice{m.get_as<shutdown_notice>(0).reason};
  if (m.match_elements<status_request>())
    return comm::status_request{m.get_as<status_request>(0).unused};
  if (m.match_elements<cluster_status>()) {
    auto& x = m.get_as<cluster_status>(0);
    comm::status_reply out;
    out.phase = x.phase;
    out.plan_epoch = epoch(x.plan_version);
    out.quorum = x.quorum;
    out.stages = x.stages;
    out.replicas = x.replicas;
    out.roles_total = x.roles_total;
    out.roles_ready = x.roles_ready;
    out.plan_summary = x.plan_summary;
    out.zones = x.zones;
    out.training_completed = x.training_completed;
    out.training_total = x.training_total;
    out.training_loss = x.training_loss;
    out.training_summary = x.training_summary;
    out.val_iterations = x.val_iterations;
    out.val_losses = x.val_losses;
    for (auto& n : x.nodes) {
      comm::node_status ns{to_comm(n.inventory), n.state, n.heartbeat_age_ms, {}, n.ready_roles};
      for (auto& r : n.roles)
        ns.roles.push_back({epoch(r.plan_version), where_of(n.inventory.name, r), shape_of(r)});
      out.nodes.push_back(std::move(ns));
    }
    out.events = x.events;
    for (auto& r : x.refusals)
      out.refusals.push_back({r.peer, r.reason, r.unix_ms});
    return out;
  }
  if (m.match_elements<training_job>()) {
    auto& x = m.get_as<training_job>(0);
    comm::training_job out{epoch(x.plan_version), x.plan,         x.model,
                           x.iterations,          x.seed,
                           x.optimizer,           x.learning_rate, x.torch_threads,
                           x.timeout_ms,          x.predicted_iteration_s,
                           x.links,               x.start_iteration,
                           x.checkpoint_dir,      x.checkpoint_every,
                           x.restore_dir,         x.restore_files,
                           x.restore_holders};
    out.data_path = x.data.path;
    out.data_format = x.data.format;
    out.validation_fraction = x.data.validation_fraction;
    copy_schedule(x, out);
    out.peer_nodes = x.peer_nodes;
    out.peer_addresses = x.peer_addresses;
    out.keep_checkpoint_dirs = x.keep_checkpoint_dirs;
    return out;
  }
  if (m.match_elements<comm::store_request>())
    return m.get_as<comm::store_request>(0);
  if (m.match_elements<comm::store_reply>())
    return m.get_as<comm::store_reply>(0);
  if (m.match_elements<train_report>()) {
    auto& x = m.get_as<train_report>(0);
    return comm::train_report{epoch(x.plan_version),
                              x.rank,
                              comm::role{x.stage, x.replica, x.tp_rank, x.node, 0},
                              x.iteration,
                              x.loss,
                              x.compute_s,
                              x.send_wait_s,
                              x.recv_wait_s,
                              x.all_reduce_s,
                              x.total_s,
                              x.tokens,
                              x.error,
                              x.checkpoint_file,
                              x.has_val_loss,
                              x.val_loss,
                              x.kind,
                              x.phase,
                              x.blamed_node,
                              x.bytes};
  }
  return std::nullopt;
}

// The runtime message of a comm body.
struct from_comm_body {
  std::uint16_t version;

  result<caf::message> operator()(comm::join_request& x) const {
    return caf::make_message(join_request{version, from_comm(x.inventory)});
  }
  result<caf::message> operator()(comm::join_accept& x) const {
    return caf::make_message(join_accepted{x.node_id, x.zone_actor, ms_of(x.heartbeat_interval_s),
                                           ms_of(x.heartbeat_timeout_s)});
  }
  result<caf::message> operator()(comm::refusal& x) const {
    return caf::make_message(join_refused{x.detail});
  }
  result<caf::message> operator()(comm::heartbeat& x) const {
    return caf::make_message(heartbeat{x.node_id, x.sequence});
  }
  result<caf::message> operator()(comm::role_assignment& x) const {
    role_assignment out;
    out.plan_version = static_cast<std::int64_t>(x.plan_epoch);
    out.plan = std::move(x.plan);
    for (auto& r : x.roles) {
      if (r.stage < 0 || r.stage >= out.plan.num_stages() || r.replica < 0 ||
          r.replica >= static_cast<int>(out.plan.stages[r.stage].replicas.size()))
        return bad("role (stage " + std::to_string(r.stage) + ", replica " +
                   std::to_string(r.replica) + ") is not in the plan it came with");
      auto& stage = out.plan.stages[r.stage];
      auto& rep = stage.replicas[r.replica];
      out.roles.push_back(stage_role{out.plan_version, r.stage, r.replica, r.tp_rank, rep.tp,
                                     r.device, stage.first_layer, stage.num_layers,
                                     out.plan.micro_batch, out.plan.num_stages(), rep.gpu_type,
                                     rep.zone});
    }
    return caf::make_message(std::move(out));
  }
  result<caf::message> operator()(comm::stage_ready& x) const {
    return caf::make_message(stage_ready{x.where.node_id, stage_role_of(x.plan_epoch, x.where, x.shape)});
  }
  result<caf::message> operator()(comm::stage_failed& x) const {
    return caf::make_message(
      stage_failed{x.where.node_id, stage_role_of(x.plan_epoch, x.where, x.shape), x.reason});
  }
  result<caf::message> operator()(comm::iteration_telemetry& x) const {
    return caf::make_message(telemetry{x.where.node_id, x.where.stage, x.where.replica,
                                       x.iteration, x.iteration_s});
  }
  result<caf::message> operator()(comm::preemption_notice& x) const {
    return caf::make_message(preemption_notice{x.node_id, x.reason});
  }
  result<caf::message> operator()(comm::shutdown_notice& x) const {
    return caf::make_message(shutdown_notice{x.reason});
  }
  result<caf::message> operator()(comm::status_request& x) const {
    return caf::make_message(status_request{x.token});
  }
  result<caf::message> operator()(comm::status_reply& x) const {
    cluster_status out;
    out.phase = x.phase;
    out.plan_version = static_cast<std::int64_t>(x.plan_epoch);
    out.quorum = x.quorum;
    out.stages = x.stages;
    out.replicas = x.replicas;
    out.roles_total = x.roles_total;
    out.roles_ready = x.roles_ready;
    out.plan_summary = x.plan_summary;
    out.zones = x.zones;
    out.training_completed = x.training_completed;
    out.training_total = x.training_total;
    out.training_loss = x.training_loss;
    out.training_summary = x.training_summary;
    out.val_iterations = x.val_iterations;
    out.val_losses = x.val_losses;
    for (auto& n : x.nodes) {
      node_status ns{from_comm(n.inventory), n.state, n.heartbeat_age_ms, {}, n.ready_roles};
      for (auto& r : n.roles)
        ns.roles.push_back(stage_role_of(r.plan_epoch, r.where, r.shape));
      out.nodes.push_back(std::move(ns));
    }
    out.events = x.events;
    for (auto& r : x.refusals)
      out.refusals.push_back(peer_refused{r.peer, r.reason, r.unix_ms});
    return caf::make_message(std::move(out));
  }
  result<caf::message> operator()(comm::training_job& x) const {
    training_job out;
    out.plan_version = static_cast<std::int64_t>(x.plan_epoch);
    out.plan = std::move(x.plan);
    out.model = std::move(x.model);
    out.iterations = x.iterations;
    out.seed = x.seed;
    out.optimizer = x.optimizer;
    out.learning_rate = x.learning_rate;
    out.torch_threads = x.torch_threads;
    out.timeout_ms = x.timeout_ms;
    out.predicted_iteration_s = x.predicted_iteration_s;
    out.links = std::move(x.links);
    out.start_iteration = x.start_iteration;
    out.checkpoint_dir = std::move(x.checkpoint_dir);
    out.checkpoint_every = x.checkpoint_every;
    out.restore_dir = std::move(x.restore_dir);
    out.restore_files = std::move(x.restore_files);
    out.restore_holders = std::move(x.restore_holders);
    out.data.path = std::move(x.data_path);
    out.data.format = x.data_format;
    out.data.validation_fraction = x.validation_fraction;
    copy_schedule(x, out);
    out.peer_nodes = std::move(x.peer_nodes);
    out.peer_addresses = std::move(x.peer_addresses);
    out.keep_checkpoint_dirs = std::move(x.keep_checkpoint_dirs);
    return caf::make_message(std::move(out));
  }
  result<caf::message> operator()(comm::store_request& x) const {
    return caf::make_message(std::move(x));
  }
  result<caf::message> operator()(comm::store_reply& x) const {
    return caf::make_message(std::move(x));
  }
  result<caf::message> operator()(comm::train_report& x) const {
    train_report out;
    out.plan_version = static_cast<std::int64_t>(x.plan_epoch);
    out.node = x.where.node_id;
    out.rank = x.rank;
    out.stage = x.where.stage;
    out.replica = x.where.replica;
    out.tp_rank = x.where.tp_rank;
    out.iteration = x.iteration;
    out.loss = x.loss;
    out.compute_s = x.compute_s;
    out.send_wait_s = x.send_wait_s;
    out.recv_wait_s = x.recv_wait_s;
    out.all_reduce_s = x.allreduce_s;
    out.total_s = x.total_s;
    out.tokens = x.tokens;
    out.error = x.error;
    out.checkpoint_file = std::move(x.checkpoint_file);
    out.has_val_loss = x.has_val_loss;
    out.val_loss = x.val_loss;
    out.kind = x.kind;
    out.phase = std::move(x.phase);
    out.blamed_node = std::move(x.blamed_node);
    out.bytes = x.bytes;
    return caf::make_message(std::move(out));
  }
};

}  // namespace

result<std::vector<char>> encode_envelope_as_version(std::uint32_t version,
                                                     const std::string& source,
                                                     const std::string& destination,
                                                     const caf::message& body) {
  auto b = to_comm_body(body, source);
  if (!b)
    return sailor::error{error_kind::unimplemented,
                         "not a wire message: " + caf::to_string(body), "", 0, ""};
  return to_chars(comm::encode(comm::envelope{version, source, std::move(*b), destination}));
}

result<std::vector<char>> encode_envelope(caf::actor_system&, const std::string& source,
                                          const std::string& destination,
                                          const caf::message& body) {
  return encode_envelope_as_version(protocol_version, source, destination, body);
}

result<envelope> decode_envelope(caf::actor_system&, const std::vector<char>& frame) {
  if (frame.empty())
    return bad("empty frame");
  auto bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(frame.data()),
                                          frame.size());
  auto decoded = comm::decode_envelope(bytes);
  if (auto* err = std::get_if<comm::transport_error>(&decoded))
    return bad(err->message);
  auto& e = std::get<comm::envelope>(decoded);
  if (e.destination.empty())
    return bad("message " + std::string(comm::body_name(e.body)) + " from '" + e.sender +
               "' names no destination actor");
  auto version = static_cast<std::uint16_t>(e.version);
  auto body = std::visit(from_comm_body{version}, e.body);
  if (!body)
    return body.error();
  envelope out;
  out.version = version;
  out.source = std::move(e.sender);
  out.destination = std::move(e.destination);
  out.body = std::move(*body);
  return out;
}

}  // namespace sailor::actors
