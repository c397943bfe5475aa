#include "sailor/actors/wire.hpp"

#include <doctest/doctest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <cstring>

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <caf/make_message.hpp>

#include <sailor/comm/schema/messages.capnp.h>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/train/messages.hpp"
#include "sailor/comm/messages.hpp"

using namespace sailor::actors;

namespace {

struct fixture {
  runtime_config cfg;
  caf::actor_system system{cfg};

  // Encodes and decodes `value` from "src" to "dst"; checks the envelope's names and version.
  template <class T>
  T round_trip(const T& value) {
    auto frame = encode_envelope(system, "src", "dst", caf::make_message(value));
    REQUIRE_MESSAGE(frame.ok(), (frame.ok() ? "" : frame.error().message));
    auto decoded = decode_envelope(system, *frame);
    REQUIRE_MESSAGE(decoded.ok(), (decoded.ok() ? "" : decoded.error().message));
    CHECK(decoded->version == protocol_version);
    CHECK(decoded->source == "src");
    CHECK(decoded->destination == "dst");
    REQUIRE(decoded->body.template match_elements<T>());
    return decoded->body.template get_as<T>(0);
  }
};

sailor::config::plan sample_plan() {
  sailor::config::plan p;
  p.micro_batch = 2;
  p.global_batch = 16;
  p.stages.push_back({0, 3, true, {sailor::config::replica{"CPU", "a", 2, {"n1", "n2"}, {0, 1}}}});
  p.stages.push_back({3, 3, false, {sailor::config::replica{"CPU", "b", 1, {"n2"}, {1}}}});
  p.estimate = sailor::config::plan_estimate{0.5, 2.0, 0.01, 3.0, 1e9};
  return p;
}

void check_same_plan(const sailor::config::plan& a, const sailor::config::plan& b) {
  CHECK(a.micro_batch == b.micro_batch);
  CHECK(a.global_batch == b.global_batch);
  REQUIRE(a.stages.size() == b.stages.size());
  for (std::size_t i = 0; i < a.stages.size(); ++i) {
    CHECK(a.stages[i].first_layer == b.stages[i].first_layer);
    CHECK(a.stages[i].num_layers == b.stages[i].num_layers);
    CHECK(a.stages[i].recompute == b.stages[i].recompute);
    REQUIRE(a.stages[i].replicas.size() == b.stages[i].replicas.size());
    for (std::size_t j = 0; j < a.stages[i].replicas.size(); ++j) {
      CHECK(a.stages[i].replicas[j].nodes == b.stages[i].replicas[j].nodes);
      CHECK(a.stages[i].replicas[j].devices == b.stages[i].replicas[j].devices);
      CHECK(a.stages[i].replicas[j].tp == b.stages[i].replicas[j].tp);
      CHECK(a.stages[i].replicas[j].zone == b.stages[i].replicas[j].zone);
    }
  }
  REQUIRE(a.estimate.has_value() == b.estimate.has_value());
  if (a.estimate)
    CHECK(a.estimate->iteration_time_s == b.estimate->iteration_time_s);
}

void check_same_role(const stage_role& a, const stage_role& b) {
  CHECK(a.plan_version == b.plan_version);
  CHECK(a.stage == b.stage);
  CHECK(a.replica == b.replica);
  CHECK(a.tp_rank == b.tp_rank);
  CHECK(a.tp == b.tp);
  CHECK(a.device == b.device);
  CHECK(a.first_layer == b.first_layer);
  CHECK(a.num_layers == b.num_layers);
  CHECK(a.micro_batch == b.micro_batch);
  CHECK(a.num_stages == b.num_stages);
  CHECK(a.gpu_type == b.gpu_type);
  CHECK(a.zone == b.zone);
}

void check_same_inventory(const node_inventory& a, const node_inventory& b) {
  CHECK(a.name == b.name);
  CHECK(a.zone == b.zone);
  CHECK(a.gpu_type == b.gpu_type);
  CHECK(a.host == b.host);
  REQUIRE(a.devices.size() == b.devices.size());
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    CHECK(a.devices[i].index == b.devices[i].index);
    CHECK(a.devices[i].kind == b.devices[i].kind);
    CHECK(a.devices[i].memory_bytes == b.devices[i].memory_bytes);
  }
}

const stage_role role_a{4, 0, 0, 1, 2, 1, 0, 3, 2, 2, "CPU", "a"};
const stage_role role_b{4, 1, 0, 0, 1, 1, 3, 3, 2, 2, "CPU", "b"};

}  // namespace

TEST_CASE_FIXTURE(fixture, "wire: every wire message survives encoding and decoding, every field") {
  node_inventory inv{"n1", "zone-a", "A100-40", "host1",
                     {{0, "cuda", 40ull << 30}, {1, "cpu", 40ull << 30}}};
  SUBCASE("join_request") {
    auto back = round_trip(join_request{protocol_version, inv});
    CHECK(back.version == protocol_version);
    check_same_inventory(back.inventory, inv);
    // A node without devices keeps its GPU type.
    check_same_inventory(round_trip(join_request{protocol_version, {"n", "z", "T4", "h", {}}}).inventory,
                         node_inventory{"n", "z", "T4", "h", {}});
  }
  SUBCASE("join_accepted names the zone actor and both heartbeat bounds") {
    auto back = round_trip(join_accepted{"n1", "zone:zone-a", 250, 1500});
    CHECK(back.node == "n1");
    CHECK(back.zone_actor == "zone:zone-a");
    CHECK(back.heartbeat_interval_ms == 250);
    CHECK(back.heartbeat_timeout_ms == 1500);
  }
  SUBCASE("join_refused") { CHECK(round_trip(join_refused{"unknown zone"}).reason == "unknown zone"); }
  SUBCASE("heartbeat") {
    auto back = round_trip(heartbeat{"n1", 77});
    CHECK(back.node == "n1");
    CHECK(back.seq == 77);
  }
  SUBCASE("role_assignment: roles are rebuilt from the plan they come with") {
    role_assignment x{4, {role_a, role_b}, sample_plan()};
    auto back = round_trip(x);
    CHECK(back.plan_version == 4);
    REQUIRE(back.roles.size() == 2);
    check_same_role(back.roles[0], role_a);
    check_same_role(back.roles[1], role_b);
    check_same_plan(back.plan, x.plan);
  }
  SUBCASE("stage_ready and stage_failed carry the whole role") {
    auto ready = round_trip(stage_ready{"n2", role_b});
    CHECK(ready.node == "n2");
    check_same_role(ready.role, role_b);
    auto failed = round_trip(stage_failed{"n2", role_a, "out of memory"});
    CHECK(failed.node == "n2");
    CHECK(failed.reason == "out of memory");
    check_same_role(failed.role, role_a);
  }
  SUBCASE("telemetry") {
    auto back = round_trip(telemetry{"n1", 1, 2, 99, 0.125});
    CHECK(back.node == "n1");
    CHECK(back.stage == 1);
    CHECK(back.replica == 2);
    CHECK(back.iteration == 99);
    CHECK(back.iteration_s == 0.125);
  }
  SUBCASE("preemption and shutdown") {
    auto p = round_trip(preemption_notice{"n1", "spot"});
    CHECK(p.node == "n1");
    CHECK(p.reason == "spot");
    CHECK(round_trip(shutdown_notice{"done"}).reason == "done");
  }
  SUBCASE("status request and reply, with nodes, roles, events and refusals") {
    CHECK(round_trip(status_request{41}).unused == 41);
    cluster_status s;
    s.phase = "running";
    s.plan_version = 3;
    s.quorum = 2;
    s.stages = 2;
    s.replicas = 1;
    s.roles_total = 3;
    s.roles_ready = 2;
    s.plan_summary = "2 stages";
    s.training_completed = 12;
    s.training_total = 40;
    s.training_loss = 3.25;
    s.training_summary = "training: 12 of 40 iterations";
    s.zones = {"a", "b"};
    node_status n{inv, "ready", 120, {role_a}, 1};
    s.nodes.push_back(n);
    s.events = {"first", "second"};
    s.refusals.push_back(peer_refused{"127.0.0.1:5555", "protocol version 9", 1700000000123});
    auto back = round_trip(s);
    CHECK(back.phase == "running");
    CHECK(back.plan_version == 3);
    CHECK(back.quorum == 2);
    CHECK(back.stages == 2);
    CHECK(back.replicas == 1);
    CHECK(back.roles_total == 3);
    CHECK(back.roles_ready == 2);
    CHECK(back.plan_summary == "2 stages");
    CHECK(back.training_completed == 12);
    CHECK(back.training_total == 40);
    CHECK(back.training_loss == 3.25);
    CHECK(back.training_summary == "training: 12 of 40 iterations");
    CHECK(back.zones == s.zones);
    REQUIRE(back.nodes.size() == 1);
    check_same_inventory(back.nodes[0].inventory, inv);
    CHECK(back.nodes[0].state == "ready");
    CHECK(back.nodes[0].heartbeat_age_ms == 120);
    CHECK(back.nodes[0].ready_roles == 1);
    REQUIRE(back.nodes[0].roles.size() == 1);
    check_same_role(back.nodes[0].roles[0], role_a);
    CHECK(back.events == s.events);
    REQUIRE(back.refusals.size() == 1);
    CHECK(back.refusals[0].peer == "127.0.0.1:5555");
    CHECK(back.refusals[0].reason == "protocol version 9");
    CHECK(back.refusals[0].unix_ms == 1700000000123);
  }
  SUBCASE("training_job") {
    training_job j;
    j.plan_version = 5;
    j.plan = sample_plan();
    j.model.name = "tiny";
    j.model.sailor_name = "TINY";
    j.model.num_layers = 4;
    j.model.hidden = 64;
    j.model.heads = 4;
    j.model.kv_heads = 2;
    j.model.ffn_hidden = 128;
    j.model.gated_mlp = true;
    j.model.sequence = 32;
    j.model.vocabulary = 1000;
    j.model.precision = sailor::config::dtype::bf16;
    j.model.tied_embeddings = true;
    j.model.learned_positions = false;
    j.iterations = 7;
    j.seed = 1234567890123ull;
    j.optimizer = "sgd";
    j.learning_rate = 0.25;
    j.torch_threads = 3;
    j.timeout_ms = 4321;
    j.predicted_iteration_s = 0.75;
    sailor::config::zone_link link;
    link.from = "zone-a";
    link.to = "zone-b";
    link.latency_s = 0.03;
    link.bandwidth_gbytes_per_s = 0.05;
    link.egress_usd_per_gb = 0.02;
    j.links.push_back(link);
    j.start_iteration = 7;
    j.checkpoint_dir = "/tmp/job/checkpoints";
    j.checkpoint_every = 3;
    j.restore_dir = "/tmp/job/checkpoints/v4";
    j.peer_nodes = {"n1", "n2"};
    j.peer_addresses = {"10.0.0.1:4001", "10.0.0.2:4002"};
    j.keep_checkpoint_dirs = {"checkpoints/j/v4", "checkpoints/j/v5"};
    auto back = round_trip(j);
    CHECK(back.peer_nodes == j.peer_nodes);
    CHECK(back.peer_addresses == j.peer_addresses);
    CHECK(back.keep_checkpoint_dirs == j.keep_checkpoint_dirs);
    CHECK(back.restore_dir == "/tmp/job/checkpoints/v4");
    CHECK(back.start_iteration == 7);
    CHECK(back.checkpoint_dir == "/tmp/job/checkpoints");
    CHECK(back.checkpoint_every == 3);
    REQUIRE(back.links.size() == 1);
    CHECK(back.links[0].from == "zone-a");
    CHECK(back.links[0].to == "zone-b");
    CHECK(back.links[0].latency_s == 0.03);
    CHECK(back.links[0].bandwidth_gbytes_per_s == 0.05);
    CHECK(back.links[0].egress_usd_per_gb == 0.02);
    CHECK(back.plan_version == 5);
    check_same_plan(back.plan, j.plan);
    CHECK(back.model.name == "tiny");
    CHECK(back.model.sailor_name == "TINY");
    CHECK(back.model.num_layers == 4);
    CHECK(back.model.hidden == 64);
    CHECK(back.model.heads == 4);
    CHECK(back.model.kv_heads == 2);
    CHECK(back.model.ffn_hidden == 128);
    CHECK(back.model.gated_mlp);
    CHECK(back.model.sequence == 32);
    CHECK(back.model.vocabulary == 1000);
    CHECK(back.model.precision == sailor::config::dtype::bf16);
    CHECK(back.model.tied_embeddings);
    CHECK_FALSE(back.model.learned_positions);
    CHECK(back.iterations == 7);
    CHECK(back.seed == 1234567890123ull);
    CHECK(back.optimizer == "sgd");
    CHECK(back.learning_rate == 0.25);
    CHECK(back.torch_threads == 3);
    CHECK(back.timeout_ms == 4321);
    CHECK(back.predicted_iteration_s == 0.75);
  }
  SUBCASE("train_report") {
    train_report r{5, "n2", 3, 1, 0, 1, 12, 2.5, 0.1, 0.2, 0.3, 0.4, 1.0, 4096, "peer lost"};
    auto back = round_trip(r);
    CHECK(back.plan_version == 5);
    CHECK(back.node == "n2");
    CHECK(back.rank == 3);
    CHECK(back.stage == 1);
    CHECK(back.replica == 0);
    CHECK(back.tp_rank == 1);
    CHECK(back.iteration == 12);
    CHECK(back.loss == 2.5);
    CHECK(back.compute_s == 0.1);
    CHECK(back.send_wait_s == 0.2);
    CHECK(back.recv_wait_s == 0.3);
    CHECK(back.all_reduce_s == 0.4);
    CHECK(back.total_s == 1.0);
    CHECK(back.tokens == 4096);
    CHECK(back.error == "peer lost");
    CHECK_FALSE(back.has_val_loss);
    r.has_val_loss = true;
    r.val_loss = 1.75;
    auto with_val = round_trip(r);
    CHECK(with_val.has_val_loss);
    CHECK(with_val.val_loss == 1.75);
    CHECK(back.what() == report_kind::failed);  // an error without a kind: a failure
    r.kind = static_cast<std::int32_t>(report_kind::failed);
    r.phase = "setup";
    r.blamed_node = "n7";
    auto failed = round_trip(r);
    CHECK(failed.what() == report_kind::failed);
    CHECK(failed.phase == "setup");
    CHECK(failed.blamed_node == "n7");
    r.kind = static_cast<std::int32_t>(report_kind::reached);
    r.error.clear();
    r.phase = "restore";
    auto reached = round_trip(r);
    CHECK(reached.what() == report_kind::reached);
    CHECK(reached.phase == "restore");
    r.kind = static_cast<std::int32_t>(report_kind::snapshot);
    r.iteration = 7;
    r.checkpoint_file = "checkpoints/j/mem/iter-00000007/shard-0-w0-of-2.ckpt";
    r.bytes = 123456789012;
    auto snap = round_trip(r);
    CHECK(snap.what() == report_kind::snapshot);
    CHECK(snap.iteration == 7);
    CHECK(snap.checkpoint_file == r.checkpoint_file);
    CHECK(snap.bytes == 123456789012);
  }
  SUBCASE("training_job: the model's family and options, the data and the schedule") {
    // What a Llama job needs on the node: without these a node trained a GPT-2 with biases
    // on the synthetic stream at the default learning rate.
    training_job j;
    j.plan_version = 2;
    j.plan = sample_plan();
    j.model.name = "tiny-llama";
    j.model.arch = sailor::config::architecture::llama;
    j.model.bias = false;
    j.model.norm_eps = 1e-6;
    j.model.rope_theta = 500000;
    j.data.path = "/data/shakespeare.txt";
    j.data.format = sailor::config::data_format::text;
    j.data.validation_fraction = 0.1;
    j.learning_rate = 1e-3;
    j.min_learning_rate = 1e-4;
    j.warmup_iterations = 100;
    j.decay_iterations = 2000;
    j.beta1 = 0.9;
    j.beta2 = 0.99;
    j.weight_decay = 0.1;
    j.grad_clip = 0.5;
    j.eval_every = 250;
    j.eval_batches = 100;
    auto back = round_trip(j);
    CHECK(back.model.arch == sailor::config::architecture::llama);
    CHECK_FALSE(back.model.bias);
    CHECK(back.model.norm_eps == 1e-6);
    CHECK(back.model.rope_theta == 500000);
    CHECK(back.data.path == "/data/shakespeare.txt");
    CHECK(back.data.format == sailor::config::data_format::text);
    CHECK(back.data.validation_fraction == 0.1);
    CHECK(back.learning_rate == 1e-3);
    CHECK(back.min_learning_rate == 1e-4);
    CHECK(back.warmup_iterations == 100);
    CHECK(back.decay_iterations == 2000);
    CHECK(back.beta1 == 0.9);
    CHECK(back.beta2 == 0.99);
    CHECK(back.weight_decay == 0.1);
    CHECK(back.grad_clip == 0.5);
    CHECK(back.eval_every == 250);
    CHECK(back.eval_batches == 100);
    j.model.arch = sailor::config::architecture::opt;
    j.data.format = sailor::config::data_format::tokens_u32;
    back = round_trip(j);
    CHECK(back.model.arch == sailor::config::architecture::opt);
    CHECK(back.data.format == sailor::config::data_format::tokens_u32);
  }
  SUBCASE("cluster_status: the validation curve") {
    cluster_status s;
    s.training_total = 10;
    s.val_iterations = {5, 10};
    s.val_losses = {2.5, 2.0};
    auto back = round_trip(s);
    CHECK(back.val_iterations == s.val_iterations);
    CHECK(back.val_losses == s.val_losses);
  }
}

TEST_CASE_FIXTURE(fixture, "wire: CAF's own serialization of a training job keeps the model's family, the data and the schedule") {
  // inspect() is what CAF serializes with (remote actors, message copies across systems).
  training_job j;
  j.model.arch = sailor::config::architecture::opt;
  j.model.bias = false;
  j.model.norm_eps = 1e-6;
  j.model.rope_theta = 5000;
  j.model.precision = sailor::config::dtype::bf16;
  j.data.path = "/data/t.bin";
  j.data.format = sailor::config::data_format::tokens_u16;
  j.eval_every = 7;
  j.weight_decay = 0.25;
  std::vector<char> buf;
  caf::binary_serializer sink{system, buf};
  REQUIRE_FALSE(sink(j));
  training_job back;
  caf::binary_deserializer source{system, buf};
  REQUIRE_FALSE(source(back));
  CHECK(back.model.arch == sailor::config::architecture::opt);
  CHECK_FALSE(back.model.bias);
  CHECK(back.model.norm_eps == 1e-6);
  CHECK(back.model.rope_theta == 5000);
  CHECK(back.model.precision == sailor::config::dtype::bf16);
  CHECK(back.data.path == "/data/t.bin");
  CHECK(back.data.format == sailor::config::data_format::tokens_u16);
  CHECK(back.eval_every == 7);
  CHECK(back.weight_decay == 0.25);
}

TEST_CASE_FIXTURE(fixture, "wire: a frame is exactly the comm module's Cap'n Proto envelope") {
  auto frame = encode_envelope(system, "supervisor", "status", caf::make_message(cluster_status{}));
  REQUIRE(frame.ok());
  auto e = sailor::comm::decode(
    std::span<const std::byte>(reinterpret_cast<const std::byte*>(frame->data()), frame->size()));
  REQUIRE(e.ok());
  CHECK(e->sender == "supervisor");
  CHECK(e->destination == "status");
  CHECK(std::holds_alternative<sailor::comm::status_reply>(e->body));
}

TEST_CASE_FIXTURE(fixture, "wire: another protocol version is refused with both versions named") {
  auto frame = encode_envelope_as_version(99, "agent", "supervisor",
                                          caf::make_message(heartbeat{"n1", 1}));
  REQUIRE(frame.ok());
  auto decoded = decode_envelope(system, *frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().message.find("protocol version 99") != std::string::npos);
  CHECK(decoded.error().message.find("speaks " + std::to_string(protocol_version)) !=
        std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "wire: a variant this build does not know is refused") {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<sailor::comm::schema::Envelope>();
  root.setProtocolVersion(protocol_version);
  root.setSender("newer");
  root.setDestination("supervisor");
  root.getBody().initHeartbeat().setSequence(3);
  auto node = capnp::Schema::from<sailor::comm::schema::Envelope::Body>().getProto();
  auto offset = node.getStruct().getDiscriminantOffset();  // in 16-bit units
  capnp::AnyStruct::Builder any = sailor::comm::schema::Envelope::Builder(root);
  std::uint16_t tag = 300;
  std::memcpy(any.getDataSection().begin() + offset * 2, &tag, sizeof(tag));
  auto words = capnp::messageToFlatArray(mb);
  auto bytes = words.asBytes();
  auto decoded = decode_envelope(system, std::vector<char>(bytes.begin(), bytes.end()));
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().kind == sailor::error_kind::invalid_input);
  CHECK(decoded.error().message.find("unknown variant 300") != std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "wire: garbage, truncated and padded frames, and no destination, are errors") {
  CHECK_FALSE(decode_envelope(system, std::vector<char>{}).ok());
  CHECK_FALSE(decode_envelope(system, std::vector<char>{'x'}).ok());
  auto frame = encode_envelope(system, "agent", "supervisor", caf::make_message(heartbeat{"n1", 7}));
  REQUIRE(frame.ok());
  auto truncated = *frame;
  truncated.resize(truncated.size() - 8);
  CHECK_FALSE(decode_envelope(system, truncated).ok());
  auto cut = *frame;
  cut.resize(cut.size() - 3);
  CHECK_FALSE(decode_envelope(system, cut).ok());
  auto padded = *frame;
  padded.push_back('!');
  CHECK_FALSE(decode_envelope(system, padded).ok());
  auto nowhere = encode_envelope(system, "agent", "", caf::make_message(heartbeat{"n1", 7}));
  REQUIRE(nowhere.ok());
  auto decoded = decode_envelope(system, *nowhere);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().message.find("no destination") != std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "wire: local-only messages cannot be encoded") {
  auto frame = encode_envelope(system, "a", "b", caf::make_message(node_lost{"n", "why"}));
  REQUIRE_FALSE(frame.ok());
  CHECK(frame.error().kind == sailor::error_kind::unimplemented);
}

TEST_CASE_FIXTURE(fixture, "wire: a role outside the plan it came with is refused") {
  role_assignment x{4, {stage_role{4, 5, 0, 0, 1, 0, 0, 1, 1, 1, "CPU", "a"}}, sample_plan()};
  auto frame = encode_envelope(system, "supervisor", "agent", caf::make_message(x));
  REQUIRE(frame.ok());
  auto decoded = decode_envelope(system, *frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().message.find("not in the plan") != std::string::npos);
}
