#include "sailor/comm/messages.hpp"

#include <doctest/doctest.h>

#include <capnp/any.h>
#include <capnp/schema.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>

#include <sailor/comm/schema/messages.capnp.h>

#include "handshake.hpp"
#include "sailor/comm/transport.hpp"

using namespace sailor;
using namespace sailor::comm;

namespace {

config::plan sample_plan() {
  config::plan p;
  p.micro_batch = 2;
  p.global_batch = 64;
  config::stage_plan s0;
  s0.first_layer = 0;
  s0.num_layers = 5;
  s0.recompute = true;
  s0.replicas.push_back({"A100-40", "us-central1-a", 2, {"node-1", "node-1"}, {0, 1}});
  s0.replicas.push_back({"V100-16", "us-west1-b", 1, {"node-7"}, {3}});
  config::stage_plan s1;
  s1.first_layer = 5;
  s1.num_layers = 4;
  s1.replicas.push_back({"A100-40", "europe-west4-a", 4, {"n2", "n2", "n3", "n3"}, {0, 1, 0, 1}});
  p.stages = {s0, s1};
  p.estimate = config::plan_estimate{1.25, 0.8, 0.013, 37.5, 3.5e10};
  return p;
}

void check_same(const config::plan& a, const config::plan& b) {
  CHECK(a.micro_batch == b.micro_batch);
  CHECK(a.global_batch == b.global_batch);
  REQUIRE(a.stages.size() == b.stages.size());
  for (std::size_t i = 0; i < a.stages.size(); ++i) {
    CHECK(a.stages[i].first_layer == b.stages[i].first_layer);
    CHECK(a.stages[i].num_layers == b.stages[i].num_layers);
    CHECK(a.stages[i].recompute == b.stages[i].recompute);
    REQUIRE(a.stages[i].replicas.size() == b.stages[i].replicas.size());
    for (std::size_t j = 0; j < a.stages[i].replicas.size(); ++j) {
      const auto& x = a.stages[i].replicas[j];
      const auto& y = b.stages[i].replicas[j];
      CHECK(x.gpu_type == y.gpu_type);
      CHECK(x.zone == y.zone);
      CHECK(x.tp == y.tp);
      CHECK(x.nodes == y.nodes);
      CHECK(x.devices == y.devices);
    }
  }
  REQUIRE(a.estimate.has_value() == b.estimate.has_value());
  if (a.estimate) {
    CHECK(a.estimate->iteration_time_s == b.estimate->iteration_time_s);
    CHECK(a.estimate->throughput_iters_per_s == b.estimate->throughput_iters_per_s);
    CHECK(a.estimate->cost_per_iteration_usd == b.estimate->cost_per_iteration_usd);
    CHECK(a.estimate->cost_per_hour_usd == b.estimate->cost_per_hour_usd);
    CHECK(a.estimate->peak_memory_bytes == b.estimate->peak_memory_bytes);
  }
}

template <class T>
T round_trip(const T& value) {
  auto bytes = encode("sender-1", message_body{value});
  auto e = decode(bytes);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().to_string()));
  CHECK(e->sender == "sender-1");
  CHECK(e->version == protocol_version);
  REQUIRE(std::holds_alternative<T>(e->body));
  return std::get<T>(e->body);
}

}  // namespace

TEST_CASE("messages: every variant round-trips through the Cap'n Proto envelope") {
  node_inventory inv{"node-3", "host-3.internal", "us-central1-a", "10.0.0.3:4100",
                     {{0, "A100-40", 40ull << 30}, {1, "A100-40", 40ull << 30}}};
  CHECK(round_trip(join_request{inv}) == join_request{inv});
  CHECK(round_trip(join_accept{"node-3", "coord:4000", 0.5}) == join_accept{"node-3", "coord:4000", 0.5});
  CHECK(round_trip(refusal{refuse_reason::duplicate_node, "node-3 already joined"}) ==
        refusal{refuse_reason::duplicate_node, "node-3 already joined"});
  CHECK(round_trip(heartbeat{"node-3", 42, 1700000000123456789}) ==
        heartbeat{"node-3", 42, 1700000000123456789});
  role r{1, 0, 3, "node-3", 1};
  CHECK(round_trip(stage_ready{7, r}) == stage_ready{7, r});
  iteration_telemetry t{7, 1234, r, 0.5, 0.01, 0.02, 0.3, 0.9, 2.75};
  CHECK(round_trip(t) == t);
  CHECK(round_trip(preemption_notice{"node-3", 30, "spot reclaim"}) ==
        preemption_notice{"node-3", 30, "spot reclaim"});
  CHECK(round_trip(shutdown_notice{"job done"}) == shutdown_notice{"job done"});

  role_assignment a;
  a.plan_epoch = 9;
  a.plan = sample_plan();
  a.roles = {r, {0, 1, 0, "node-3", 0}};
  a.peers = {{r, "10.0.0.3:4100"}, {{0, 0, 0, "node-1", 0}, "10.0.0.1:4100"}};
  auto back = round_trip(a);
  CHECK(back.plan_epoch == 9);
  CHECK(back.roles == a.roles);
  CHECK(back.peers == a.peers);
  check_same(back.plan, a.plan);

  // A plan without an estimate stays without one.
  a.plan.estimate.reset();
  check_same(round_trip(a).plan, a.plan);
  CHECK(std::string(body_name(message_body{heartbeat{}})) == "heartbeat");
}

TEST_CASE("messages: version 2 variants and fields round-trip, destination included") {
  node_inventory inv{"node-3", "host-3", "us-central1-a", "10.0.0.3:4100",
                     {{0, "A100-40", 40ull << 30, "cuda"}, {1, "A100-40", 40ull << 30, "cpu"}},
                     "A100-40"};
  CHECK(round_trip(join_request{inv}) == join_request{inv});
  join_accept acc{"node-3", "supervisor", 0.25, "zone:us-central1-a", 1.5};
  CHECK(round_trip(acc) == acc);
  role r{1, 0, 3, "node-3", 1};
  stage_shape shape{4, 5, 4, 2, 3, "A100-40", "us-central1-a"};
  CHECK(round_trip(stage_ready{7, r, shape}) == stage_ready{7, r, shape});
  CHECK(round_trip(stage_failed{7, r, shape, "no memory"}) == stage_failed{7, r, shape, "no memory"});
  CHECK(round_trip(status_request{12}) == status_request{12});
  status_reply st;
  st.phase = "running";
  st.plan_epoch = 4;
  st.quorum = 2;
  st.stages = 2;
  st.replicas = 3;
  st.roles_total = 6;
  st.roles_ready = 5;
  st.plan_summary = "pp2 dp3";
  st.zones = {"a", "b"};
  st.nodes.push_back({inv, "ready", 40, {{4, r, shape}}, 1});
  st.events = {"joined", "assigned"};
  st.refusals.push_back({"127.0.0.1:4242", "unknown zone 'moon'", 1700000000000});
  CHECK(round_trip(st) == st);
  training_job j;
  j.plan_epoch = 4;
  j.plan = sample_plan();
  j.model.name = "m";
  j.model.num_layers = 2;
  j.model.precision = config::dtype::fp32;
  j.iterations = 3;
  j.seed = 9;
  j.optimizer = "adamw";
  j.learning_rate = 1e-3;
  j.torch_threads = 2;
  j.timeout_ms = 1000;
  j.predicted_iteration_s = 0.5;
  j.peer_nodes = {"a", "b"};
  j.peer_addresses = {"10.1.0.1:1", "10.1.0.2:2"};
  j.keep_checkpoint_dirs = {"checkpoints/k/v3"};
  auto jb = round_trip(j);
  CHECK(jb.peer_nodes == j.peer_nodes);
  CHECK(jb.peer_addresses == j.peer_addresses);
  CHECK(jb.keep_checkpoint_dirs == j.keep_checkpoint_dirs);
  check_same(jb.plan, j.plan);
  CHECK(jb.model.name == "m");
  CHECK(jb.model.num_layers == 2);
  CHECK(jb.model.precision == config::dtype::fp32);
  CHECK(jb.seed == 9);
  CHECK(jb.timeout_ms == 1000);
  train_report tr{4, 2, r, 10, 3.5, 0.1, 0.2, 0.3, 0.4, 1.0, 2048, ""};
  CHECK(round_trip(tr) == tr);
  tr.has_val_loss = true;
  tr.val_loss = 1.875;
  CHECK(round_trip(tr) == tr);
  train_report failed{4, 2, r, 0, 0, 0, 0, 0, 0, 0, 0, "unreachable", "", false, 0, 1, "setup", "n9"};
  CHECK(round_trip(failed) == failed);
  store_request sr{7, 3, "k", true, {'v'}, 0, "n2"};
  CHECK(round_trip(sr) == sr);

  auto bytes = encode("agent", message_body{heartbeat{"n", 1, 2}}, "supervisor");
  auto e = decode(bytes);
  REQUIRE(e.ok());
  CHECK(e->destination == "supervisor");
  CHECK(std::string(body_name(e->body)) == "heartbeat");
  CHECK(std::string(body_name(message_body{train_report{}})) == "train_report");
}

TEST_CASE("messages: another protocol version is refused with both versions named") {
  envelope e{protocol_version + 1, "future-node", heartbeat{"n", 1, 2}};
  auto out = decode_envelope(encode(e));
  REQUIRE(std::holds_alternative<transport_error>(out));
  auto err = std::get<transport_error>(out);
  CHECK(err.code == errc::protocol_mismatch);
  CHECK(err.message.find("future-node") != std::string::npos);
  CHECK(err.message.find(std::to_string(protocol_version + 1)) != std::string::npos);
  auto as_result = decode(encode(e));
  REQUIRE_FALSE(as_result.ok());
  CHECK(as_result.error().kind == error_kind::invalid_input);
}

TEST_CASE("messages: an unknown variant (from a newer peer) is a clear error") {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<schema::Envelope>();
  root.setProtocolVersion(protocol_version);
  root.setSender("newer");
  root.getBody().initHeartbeat().setSequence(3);
  // Write a discriminant this build does not know into the union's tag.
  auto node = capnp::Schema::from<schema::Envelope::Body>().getProto();
  auto offset = node.getStruct().getDiscriminantOffset();  // in 16-bit units
  capnp::AnyStruct::Builder any = schema::Envelope::Builder(root);
  auto data = any.getDataSection();
  std::uint16_t tag = 200;
  std::memcpy(data.begin() + offset * 2, &tag, sizeof(tag));
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  auto out = decode_envelope({reinterpret_cast<const std::byte*>(chars.begin()), chars.size()});
  REQUIRE(std::holds_alternative<transport_error>(out));
  CHECK(std::get<transport_error>(out).code == errc::invalid_message);
  CHECK(std::get<transport_error>(out).message.find("unknown variant 200") != std::string::npos);
}

TEST_CASE("messages: garbage and truncated bytes decode to errors, never exceptions") {
  std::vector<std::byte> empty;
  CHECK(std::holds_alternative<transport_error>(decode_envelope(empty)));
  std::vector<std::byte> odd(13, std::byte{0x5a});
  CHECK(std::holds_alternative<transport_error>(decode_envelope(odd)));
  std::vector<std::byte> junk(256);
  for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<std::byte>(i * 97 + 13);
  auto out = decode_envelope(junk);
  REQUIRE(std::holds_alternative<transport_error>(out));
  CHECK(std::get<transport_error>(out).code == errc::invalid_message);
  // A valid message cut short.
  auto good = encode("s", message_body{shutdown_notice{"a fairly long reason to make it span words"}});
  std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<long>(good.size() / 2 / 8 * 8));
  CHECK(std::holds_alternative<transport_error>(decode_envelope(cut)));
  CHECK(std::holds_alternative<transport_error>(decode_tensor_header(junk)));
}

TEST_CASE("messages: tensor descriptors round-trip as the payload header") {
  tensor_descriptor d{dtype::bf16, {4, 1024, 768}, 0xfeedbeef, "activations s1 mb3", 4 * 1024 * 768 * 2};
  auto out = decode_tensor_header(encode_tensor_header(d));
  REQUIRE(std::holds_alternative<tensor_descriptor>(out));
  CHECK(std::get<tensor_descriptor>(out) == d);
  CHECK(d.num_elements() == 4 * 1024 * 768);
  CHECK(element_size(dtype::bf16) == 2);
  tensor_descriptor scalar{dtype::f64, {}, 0, "", 8};
  CHECK(std::get<tensor_descriptor>(decode_tensor_header(encode_tensor_header(scalar))) == scalar);
}

TEST_CASE("handshake: hello round-trips, wrong magic and version are refused") {
  detail::hello h{protocol_version, "node-1", "zone-a"};
  auto out = detail::decode_hello(detail::encode_hello(h));
  REQUIRE(std::holds_alternative<detail::hello>(out));
  CHECK(std::get<detail::hello>(out).name == "node-1");
  CHECK_FALSE(detail::check_hello(std::get<detail::hello>(out)).has_value());
  h.version = protocol_version + 3;
  auto refused = detail::check_hello(h);
  REQUIRE(refused.has_value());
  CHECK(refused->code == errc::protocol_mismatch);
  // A heartbeat envelope is not a hello (wrong magic).
  auto not_hello = detail::decode_hello(encode("x", message_body{heartbeat{}}));
  CHECK(std::holds_alternative<transport_error>(not_hello));
  detail::hello_reply r{false, "version", 1, "srv", "z"};
  auto rr = detail::decode_hello_reply(detail::encode_hello_reply(r));
  REQUIRE(std::holds_alternative<detail::hello_reply>(rr));
  CHECK_FALSE(std::get<detail::hello_reply>(rr).accepted);
  CHECK(std::get<detail::hello_reply>(rr).reason == "version");
}

TEST_CASE("address: parse and print") {
  auto a = address::parse("10.1.2.3:4100");
  REQUIRE(a.ok());
  CHECK(a->host == "10.1.2.3");
  CHECK(a->port == 4100);
  CHECK(a->to_string() == "10.1.2.3:4100");
  CHECK_FALSE(address::parse("10.1.2.3").ok());
  CHECK_FALSE(address::parse("host:99999").ok());
  CHECK_FALSE(address::parse("host:12x").ok());
  CHECK_FALSE(address::parse(":80").ok());
  CHECK_FALSE(address::parse("host:").ok());
  // An IPv6 literal in brackets (the command lines' --listen, --join and --dashboard).
  auto v6 = address::parse("[::1]:7000");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 7000);
}

TEST_CASE("errors map onto the project's error kinds") {
  CHECK(transport_error{errc::disconnected, "x"}.to_error().kind == error_kind::disconnected);
  CHECK(transport_error{errc::protocol_mismatch, "x"}.to_error().kind == error_kind::invalid_input);
  CHECK(transport_error{errc::timed_out, "x"}.to_error().kind == error_kind::failed);
  CHECK(transport_error{errc::refused, "peer said no"}.to_string() == "refused: peer said no");
}

TEST_CASE("messages: a training job carries the model's family and options, the data and the schedule") {
  training_job j;
  j.plan = sample_plan();
  j.model.name = "tiny-llama";
  j.model.num_layers = 2;
  j.model.precision = config::dtype::fp32;
  j.model.arch = config::architecture::llama;
  j.model.bias = false;
  j.model.norm_eps = 1e-6;
  j.model.rope_theta = 500000;
  j.data_path = "/data/tokens.bin";
  j.data_format = config::data_format::tokens_u16;
  j.validation_fraction = 0.05;
  j.learning_rate = 6e-4;
  j.min_learning_rate = 6e-5;
  j.warmup_iterations = 100;
  j.decay_iterations = 2000;
  j.beta1 = 0.85;
  j.beta2 = 0.95;
  j.weight_decay = 0.1;
  j.grad_clip = 0.5;
  j.eval_every = 250;
  j.eval_batches = 20;
  auto b = round_trip(j);
  CHECK(b.model.arch == config::architecture::llama);
  CHECK_FALSE(b.model.bias);
  CHECK(b.model.norm_eps == 1e-6);
  CHECK(b.model.rope_theta == 500000);
  CHECK(b.data_path == "/data/tokens.bin");
  CHECK(b.data_format == config::data_format::tokens_u16);
  CHECK(b.validation_fraction == 0.05);
  CHECK(b.learning_rate == 6e-4);
  CHECK(b.min_learning_rate == 6e-5);
  CHECK(b.warmup_iterations == 100);
  CHECK(b.decay_iterations == 2000);
  CHECK(b.beta1 == 0.85);
  CHECK(b.beta2 == 0.95);
  CHECK(b.weight_decay == 0.1);
  CHECK(b.grad_clip == 0.5);
  CHECK(b.eval_every == 250);
  CHECK(b.eval_batches == 20);
  for (auto arch : {config::architecture::gpt2, config::architecture::opt}) {
    j.model.arch = arch;
    j.model.bias = true;
    CHECK(round_trip(j).model.arch == arch);
    CHECK(round_trip(j).model.bias);
  }
  // A job without data or schedule keeps the defaults the nodes would otherwise assume.
  training_job plain;
  auto p = round_trip(plain);
  CHECK(p.data_path.empty());
  CHECK(p.min_learning_rate == -1);
  CHECK(p.grad_clip == 1.0);
  CHECK(p.beta2 == 0.999);
  CHECK(p.eval_batches == 1);
}

TEST_CASE("messages: the status reply carries the validation curve") {
  status_reply st;
  st.phase = "running";
  st.training_total = 10;
  st.val_iterations = {3, 6, 9, 10};
  st.val_losses = {2.5, 2.25, 2.125, 2.0};
  CHECK(round_trip(st) == st);
}
