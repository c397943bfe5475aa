// The protocol's one round-trip suite: every message, every field, and every way a peer's
// bytes can be wrong.

#include "sailor/protocol/codec.hpp"

#include <doctest/doctest.h>

#include <concepts>
#include <cstring>

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>

#include <sailor/protocol/schema/messages.capnp.h>

using namespace sailor::protocol;
namespace config = sailor::config;

namespace {

config::plan sample_plan() {
  config::plan p;
  p.micro_batch = 2;
  p.global_batch = 64;
  p.stages.push_back({0, 5, true,
                      {config::replica{"A100-40", "us-central1-a", 2, {"n1", "n1"}, {0, 1}},
                       config::replica{"V100-16", "us-west1-b", 1, {"n7"}, {3}}}});
  p.stages.push_back({5, 4, false, {config::replica{"A100-40", "europe-west4-a", 2, {"n2", "n3"}, {0, 1}}}});
  p.estimate = config::plan_estimate{1.25, 0.8, 0.013, 37.5, 3.5e10};
  p.local_sgd = config::local_sgd_plan{20, {{"us-central1", {"us-central1-a", "us-central1-b"}},
                                            {"europe-west4", {"europe-west4-a"}}}};
  return p;
}

node_inventory sample_inventory() {
  return node_inventory{"n1", "zone-a", "A100-40", "10.0.0.7",
                        {device_info{0, "cuda", 40ull << 30}, device_info{1, "cpu", 1ull << 33}},
                        "10.0.0.7:4100", {"checkpoints/job/v3/s0.pt"}};
}

const stage_role role_a{4, 0, 0, 1, 2, 1, 0, 5, 2, 2, "A100-40", "us-central1-a"};  // in sample_plan()

// A link of 20 ms with a constant bandwidth (no curve: the wire carries none).
config::zone_link sample_link(const std::string& from, const std::string& to, double gbytes_per_s,
                              double egress_usd_per_gb) {
  config::zone_link l;
  l.from = from;
  l.to = to;
  l.latency_s = 0.02;
  l.bandwidth_gbytes_per_s = gbytes_per_s;
  l.egress_usd_per_gb = egress_usd_per_gb;
  return l;
}

training_job sample_job() {
  training_job j;
  j.plan_version = 9;
  j.model.name = "llama-tiny";
  j.model.sailor_name = "LLAMA";
  j.model.num_layers = 9;
  j.model.hidden = 64;
  j.model.heads = 4;
  j.model.kv_heads = 2;
  j.model.ffn_hidden = 172;
  j.model.gated_mlp = true;
  j.model.sequence = 32;
  j.model.vocabulary = 97;
  j.model.precision = config::dtype::bf16;
  j.model.tied_embeddings = false;
  j.model.learned_positions = false;
  j.model.arch = config::architecture::llama;
  j.model.bias = false;
  j.model.norm_eps = 1e-6;
  j.model.rope_theta = 5e5;
  j.iterations = 40;
  j.seed = 77;
  j.optimizer = "sgd";
  j.schedule = {.lr = 3e-4, .min_lr = 1e-5, .warmup_iterations = 5, .decay_iterations = 30,
                .beta1 = 0.85, .beta2 = 0.99, .weight_decay = 0.1, .grad_clip = 0.5};
  j.torch_threads = 2;
  j.timeout_ms = 1234;
  j.predicted_iteration_s = 0.42;
  j.links = {sample_link("a", "b", 0.2, 0.08)};
  j.start_iteration = 12;
  j.checkpoint_dir = "checkpoints/job/v9";
  j.checkpoint_every = 3;
  j.restore_dir = "checkpoints/job/v8";
  j.restore_files = {"s0.pt", "s1.pt"};
  j.restore_holders = {"10.0.0.7:4100", "10.0.0.8:4100"};
  j.data = config::data_source{"/data/t.txt", config::data_format::text, 0.05,
                               {config::tokenizer_kind::gpt2_bpe, "/data/vocab.json", "/data/merges.txt",
                                "/data/sp.model"}};
  j.eval_every = 10;
  j.eval_batches = 3;
  j.peer_nodes = {"n1", "n2"};
  j.peer_addresses = {"10.0.0.7:4100", "10.0.0.8:4100"};
  j.keep_checkpoint_dirs = {"checkpoints/job/v8"};
  j.init_from = "/models/gpt2";
  j.outer = {config::across_regions_mode::diloco, 20, config::outer_optimizer_kind::sgd, 0.5, 0.75,
             config::delta_compression::int8, 4, 2};
  return j;
}

cluster_status sample_status() {
  cluster_status s;
  s.phase = "running";
  s.plan_version = 3;
  s.quorum = 2;
  s.stages = 2;
  s.replicas = 3;
  s.roles_total = 4;
  s.roles_ready = 3;
  s.plan_summary = "2 stages";
  s.zones = {"a", "b"};
  s.nodes = {node_status{sample_inventory(), "ready", 120, {role_a}, 1}};
  s.events = {"joined n1", "plan v3"};
  s.refusals = {peer_refused{"10.0.0.9:5000", "unknown zone 'x'", 1700000000123}};
  s.training_completed = 17;
  s.training_total = 40;
  s.training_loss = 2.5;
  s.training_summary = "17/40";
  s.val_iterations = {10};
  s.val_losses = {2.75};
  s.checkpoint_iterations = 2;
  s.checkpoint_behind = 15;
  s.checkpoint_age_s = 41.5;
  s.checkpoint_every = 1;
  s.checkpoint_warning = "15 iterations behind";
  return s;
}

plan_request sample_plan_request() {
  return plan_request{12,
                      "node n4 lost",
                      {sample_inventory()},
                      true,
                      sample_plan(),
                      {placement_rule{placement_kind::pin, "n1", 1}, placement_rule{placement_kind::forbid, "n7", -1}},
                      {"objective=cost", "max_cost_per_hour=3.5"},
                      9};
}

link_probe_request sample_probe_request() {
  return link_probe_request{8, "probe", "n2", "zone-b", "10.0.0.8:4711",
                            {sample_link("zone-a", "zone-b", 0.025, 0.01)}, 2500};
}

train_report sample_report() {
  return train_report{5,   "n2",  3,     1,   0,   1,   17,  2.5, 0.1,       0.02, 0.03,
                      0.04, 0.2, 4096, "x", "checkpoints/job/v5/s1.pt", true, 2.7,
                      static_cast<std::int32_t>(report_kind::snapshot), "restore", "n3", 1 << 20,
                      0.001, 0.005, 0.002};
}

// Every message, each field set to a value other than its default.
std::vector<message> every_message() {
  return {join_request{protocol_version, sample_inventory(), 7},
          join_accepted{"n1", "zone:a", 500, 4000},
          join_refused{"unknown zone 'x'", refuse_reason::unknown_zone},
          heartbeat{"n1", 42},
          role_assignment{4, {role_a}, sample_plan()},
          stage_ready{"n1", role_a},
          stage_failed{"n1", role_a, "no device 3"},
          preemption_notice{"n1", "spot reclaimed", 30.5},
          shutdown_notice{"declared lost: missed heartbeats", shutdown_kind::declared_lost},
          status_request{7},
          sample_status(),
          sample_job(),
          sample_report(),
          store_request{11, 4, "rank0/addr", true, {'a', '\0', 'b'}, 900, "n1"},
          store_reply{11, true, {'x', 'y'}, "gone"},
          // a scheduler in its own process
          sample_plan_request(),
          plan_reply{12, true, sample_plan(), "late"},
          availability_event{availability_kind::preemption_notice, sample_inventory(), "spot", 2500},
          iteration_telemetry{3, 17, "n2", 1, 2, 0.5, 0.3, 0.1, 0.05, 0.45, 2.25},
          plan_applied{3, sample_plan(), "built-in planner"},
          plan_refused{12, "stage 1 is on node n3, which a rule forbids"},
          replan_finished{3, "node n4 lost", 1.75},
          scheduler_hello{"cost-cap"},
          scheduler_request{5, scheduler_command::pin, "n1", "hot", 1200, 2, "objective", "cost"},
          scheduler_reply{5, true, "already draining"},
          // link probes between nodes
          sample_probe_request(),
          link_probe_result{8, "n2", "no reply within 5 s", "10.0.0.8:4711", 0.021,
                            {65536, 1048576}, {2.4e7, 2.5e7}, 0.35},
          // training, added after the above
          checkpoint_kept{6, 8, "checkpoints/job/v6"}};
}

envelope round_trip(const message& m) {
  auto out = decode(encode(envelope{protocol_version, "src", "dst", m}));
  if (auto* err = std::get_if<decode_error>(&out)) FAIL(err->message);
  return std::get<envelope>(out);
}

std::vector<std::byte> bytes_of(capnp::MallocMessageBuilder& mb) {
  auto words = capnp::messageToFlatArray(mb);
  auto chars = words.asBytes();
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.begin(), chars.size());
  return out;
}

}  // namespace

TEST_CASE("protocol: every message survives encoding and decoding, every field") {
  auto all = every_message();
  CHECK(all.size() == std::variant_size_v<message>);
  for (auto& m : all) {
    CAPTURE(std::string(name_of(m)));
    auto e = round_trip(m);
    CHECK(e.version == protocol_version);
    CHECK(e.sender == "src");
    CHECK(e.destination == "dst");
    CHECK(e.body.index() == m.index());
    // Decoding keeps every field the encoder writes: encoding the result again gives the
    // same bytes.
    CHECK(encode(e) == encode(envelope{protocol_version, "src", "dst", m}));
    std::visit(
      [&](auto& sent) {
        using T = std::decay_t<decltype(sent)>;
        if constexpr (std::equality_comparable<T>)
          CHECK(std::get<T>(e.body) == sent);  // and it writes every field
      },
      m);
  }
}

// The scheduler's messages that hold a plan (which has no ==): the fields beside it.
TEST_CASE("protocol: a plan request reaches a scheduler in another process whole") {
  auto sent = sample_plan_request();
  auto got = std::get<plan_request>(round_trip(sent).body);
  CHECK(got.request_id == 12);
  CHECK(got.reason == sent.reason);
  CHECK(got.nodes == sent.nodes);
  CHECK(got.has_current);
  REQUIRE(got.current.stages.size() == 2);
  CHECK(got.current.stages[1].replicas[0].nodes == std::vector<std::string>{"n2", "n3"});
  CHECK(got.rules == sent.rules);
  CHECK(got.objective == sent.objective);
  CHECK(got.model_layers == 9);
  auto reply = std::get<plan_reply>(round_trip(plan_reply{12, true, sample_plan(), "x"}).body);
  CHECK(reply.ok);
  CHECK(reply.request_id == 12);
  CHECK(reply.plan.stages.size() == 2);
  CHECK(reply.plan.estimate.has_value());
  auto applied = std::get<plan_applied>(round_trip(plan_applied{3, sample_plan(), "scheduler"}).body);
  CHECK(applied.plan_version == 3);
  CHECK(applied.by == "scheduler");
  CHECK(applied.plan.micro_batch == 2);
}

// The messages that hold config values (which have no ==): every field, by name.
TEST_CASE("protocol: the plan, the model, the data and the links arrive whole") {
  auto a = std::get<role_assignment>(round_trip(role_assignment{4, {role_a}, sample_plan()}).body);
  auto p = sample_plan();
  CHECK(a.plan_version == 4);
  CHECK(a.roles == std::vector<stage_role>{role_a});
  CHECK(a.plan.micro_batch == p.micro_batch);
  CHECK(a.plan.global_batch == p.global_batch);
  REQUIRE(a.plan.stages.size() == p.stages.size());
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    auto &x = a.plan.stages[i], &y = p.stages[i];
    CHECK(x.first_layer == y.first_layer);
    CHECK(x.num_layers == y.num_layers);
    CHECK(x.recompute == y.recompute);
    REQUIRE(x.replicas.size() == y.replicas.size());
    for (std::size_t j = 0; j < y.replicas.size(); ++j) {
      CHECK(x.replicas[j].gpu_type == y.replicas[j].gpu_type);
      CHECK(x.replicas[j].zone == y.replicas[j].zone);
      CHECK(x.replicas[j].tp == y.replicas[j].tp);
      CHECK(x.replicas[j].nodes == y.replicas[j].nodes);
      CHECK(x.replicas[j].devices == y.replicas[j].devices);
    }
  }
  REQUIRE(a.plan.estimate.has_value());
  CHECK(a.plan.estimate->iteration_time_s == 1.25);
  CHECK(a.plan.estimate->throughput_iters_per_s == 0.8);
  CHECK(a.plan.estimate->cost_per_iteration_usd == 0.013);
  CHECK(a.plan.estimate->cost_per_hour_usd == 37.5);
  CHECK(a.plan.estimate->peak_memory_bytes == 3.5e10);
  REQUIRE(a.plan.local_sgd.has_value());
  CHECK(a.plan.local_sgd->inner_steps == 20);
  REQUIRE(a.plan.local_sgd->regions.size() == 2);
  CHECK(a.plan.local_sgd->regions[0].name == "us-central1");
  CHECK(a.plan.local_sgd->regions[0].zones == p.local_sgd->regions[0].zones);
  CHECK(a.plan.local_sgd->regions[1].zones == p.local_sgd->regions[1].zones);
  auto synchronous = p;
  synchronous.local_sgd.reset();
  CHECK_FALSE(std::get<role_assignment>(round_trip(role_assignment{4, {role_a}, synchronous}).body).plan.local_sgd);

  auto sent = sample_job();
  auto j = std::get<training_job>(round_trip(sent).body);
  CHECK(j.plan.stages.empty());  // the plan travels in the role assignment of the same version
  auto &m = j.model, &w = sent.model;
  CHECK(m.name == w.name);
  CHECK(m.sailor_name == w.sailor_name);
  CHECK(m.num_layers == w.num_layers);
  CHECK(m.hidden == w.hidden);
  CHECK(m.heads == w.heads);
  CHECK(m.kv_heads == w.kv_heads);
  CHECK(m.ffn_hidden == w.ffn_hidden);
  CHECK(m.gated_mlp == w.gated_mlp);
  CHECK(m.sequence == w.sequence);
  CHECK(m.vocabulary == w.vocabulary);
  CHECK(m.precision == w.precision);
  CHECK(m.tied_embeddings == w.tied_embeddings);
  CHECK(m.learned_positions == w.learned_positions);
  CHECK(m.arch == w.arch);
  CHECK(m.bias == w.bias);
  CHECK(m.norm_eps == w.norm_eps);
  CHECK(m.rope_theta == w.rope_theta);
  REQUIRE(j.links.size() == 1);
  CHECK(j.links[0].from == "a");
  CHECK(j.links[0].to == "b");
  CHECK(j.links[0].latency_s == 0.02);
  CHECK(j.links[0].bandwidth_gbytes_per_s == 0.2);
  CHECK(j.links[0].egress_usd_per_gb == 0.08);
  CHECK(j.data.path == sent.data.path);
  CHECK(j.data.format == sent.data.format);
  CHECK(j.data.validation_fraction == sent.data.validation_fraction);
  CHECK(j.data.tokenizer.kind == config::tokenizer_kind::gpt2_bpe);
  CHECK(j.data.tokenizer.vocab == "/data/vocab.json");
  CHECK(j.data.tokenizer.merges == "/data/merges.txt");
  CHECK(j.data.tokenizer.model == "/data/sp.model");
  auto sp = sample_job();
  sp.data.tokenizer.kind = config::tokenizer_kind::sentencepiece;
  CHECK(std::get<training_job>(round_trip(sp).body).data.tokenizer.kind == config::tokenizer_kind::sentencepiece);
  CHECK(j.iterations == sent.iterations);
  CHECK(j.seed == sent.seed);
  CHECK(j.optimizer == sent.optimizer);
  CHECK(j.torch_threads == sent.torch_threads);
  CHECK(j.timeout_ms == sent.timeout_ms);
  CHECK(j.predicted_iteration_s == sent.predicted_iteration_s);
  CHECK(j.start_iteration == sent.start_iteration);
  CHECK(j.checkpoint_dir == sent.checkpoint_dir);
  CHECK(j.checkpoint_every == sent.checkpoint_every);
  CHECK(j.restore_dir == sent.restore_dir);
  CHECK(j.restore_files == sent.restore_files);
  CHECK(j.restore_holders == sent.restore_holders);
  auto &s = j.schedule, &t = sent.schedule;  // the flat schedule fields of TrainingJob
  CHECK(s.lr == t.lr);
  CHECK(s.min_lr == t.min_lr);
  CHECK(s.warmup_iterations == t.warmup_iterations);
  CHECK(s.decay_iterations == t.decay_iterations);
  CHECK(s.beta1 == t.beta1);
  CHECK(s.beta2 == t.beta2);
  CHECK(s.weight_decay == t.weight_decay);
  CHECK(s.grad_clip == t.grad_clip);
  CHECK(j.eval_every == sent.eval_every);
  CHECK(j.eval_batches == sent.eval_batches);
  CHECK(j.peer_nodes == sent.peer_nodes);
  CHECK(j.peer_addresses == sent.peer_addresses);
  CHECK(j.keep_checkpoint_dirs == sent.keep_checkpoint_dirs);
  CHECK(j.init_from == sent.init_from);
  CHECK(j.outer.outer_optimizer == config::outer_optimizer_kind::sgd);  // the plan says diloco and H
  CHECK(j.outer.outer_lr == 0.5);
  CHECK(j.outer.outer_momentum == 0.75);
  CHECK(j.outer.compression == config::delta_compression::int8);
  CHECK(j.outer.fragments == 4);
  CHECK(j.outer.overlap_steps == 2);
}

TEST_CASE("protocol: a role travels as its place and is rebuilt from the plan beside it") {
  // Fields of the role that contradict the plan are not carried: the plan wins.
  stage_role place{4, 1, 0, 1, 99, 1, 77, 77, 99, 99, "wrong", "wrong"};
  auto e = round_trip(role_assignment{4, {place}, sample_plan()});
  auto& back = std::get<role_assignment>(e.body).roles.at(0);
  CHECK(back == stage_role{4, 1, 0, 1, 2, 1, 5, 4, 2, 2, "A100-40", "europe-west4-a"});
}

TEST_CASE("protocol: a role outside the plan it came with is refused") {
  stage_role outside{4, 5, 0, 0, 1, 0, 0, 1, 1, 1, "CPU", "a"};
  auto out = decode(encode(envelope{protocol_version, "s", "d", role_assignment{4, {outside}, sample_plan()}}));
  REQUIRE(std::holds_alternative<decode_error>(out));
  CHECK(std::get<decode_error>(out).message.find("not in the plan") != std::string::npos);
}

TEST_CASE("protocol: another protocol version is refused with both versions named") {
  auto out = decode(encode(envelope{99, "agent", "supervisor", heartbeat{"n1", 1}}));
  REQUIRE(std::holds_alternative<decode_error>(out));
  auto& err = std::get<decode_error>(out);
  CHECK(err.what == decode_error::kind::version_mismatch);
  CHECK(err.message.find("protocol version 99") != std::string::npos);
  CHECK(err.message.find("speaks " + std::to_string(protocol_version)) != std::string::npos);
}

namespace {

// What decode says of the message in `mb`, which it must refuse.
std::string refusal_of(capnp::MallocMessageBuilder& mb) {
  auto out = decode(bytes_of(mb));
  REQUIRE(std::holds_alternative<decode_error>(out));
  return std::get<decode_error>(out).message;
}

}  // namespace

TEST_CASE("protocol: a variant this build does not know is refused") {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<schema::Envelope>();
  root.setProtocolVersion(protocol_version);
  root.setSender("newer");
  root.setDestination("supervisor");
  root.getBody().initHeartbeat().setSeq(3);
  auto node = capnp::Schema::from<schema::Envelope::Body>().getProto();
  auto offset = node.getStruct().getDiscriminantOffset();  // in 16-bit units
  capnp::AnyStruct::Builder any = schema::Envelope::Builder(root);
  std::uint16_t tag = 300;
  std::memcpy(any.getDataSection().begin() + offset * 2, &tag, sizeof(tag));
  CHECK(refusal_of(mb).find("unknown variant 300") != std::string::npos);
}

TEST_CASE("protocol: enum values this build does not know") {
  // Each a message from a newer peer, whose enum value this build does not have.
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<schema::Envelope>();
  root.setProtocolVersion(protocol_version);
  root.setSender("newer");
  root.setDestination("agent");
  root.getBody().initTrainingJob().initModel().setArch(static_cast<schema::Architecture>(9));
  CHECK(refusal_of(mb).find("unknown architecture 9") != std::string::npos);
  root.getBody().initSchedulerRequest().setKind(static_cast<schema::SchedulerCommand>(12));
  CHECK(refusal_of(mb).find("unknown scheduler request 12") != std::string::npos);
  root.getBody().initAvailabilityEvent().setKind(static_cast<schema::AvailabilityKind>(5));
  CHECK(refusal_of(mb).find("unknown availability kind 5") != std::string::npos);
  // A refusal code from a newer peer reads as `other`; its text is kept.
  capnp::MallocMessageBuilder mb2;
  auto r2 = mb2.initRoot<schema::Envelope>();
  r2.setProtocolVersion(protocol_version);
  r2.setDestination("agent");
  auto refused = r2.getBody().initJoinRefused();
  refused.setReason("a new reason");
  refused.setCode(static_cast<schema::RefuseReason>(40));
  auto back = decode(bytes_of(mb2));
  REQUIRE(std::holds_alternative<envelope>(back));
  CHECK(std::get<join_refused>(std::get<envelope>(back).body) ==
        join_refused{"a new reason", refuse_reason::other});
}

TEST_CASE("protocol: garbage, truncated and padded bytes, and no destination, are errors") {
  auto bad = [](std::vector<std::byte> b) { return std::holds_alternative<decode_error>(decode(b)); };
  CHECK(bad({}));
  CHECK(bad({std::byte{'x'}}));
  std::vector<std::byte> junk(64, std::byte{0xff});
  CHECK(bad(junk));
  auto good = encode(envelope{protocol_version, "a", "b", shutdown_notice{"a reason long enough to span words"}});
  auto truncated = good;
  truncated.resize(truncated.size() - 8);
  CHECK(bad(truncated));
  auto cut = good;
  cut.resize(cut.size() - 3);
  CHECK(bad(cut));
  auto padded = good;
  padded.push_back(std::byte{'!'});
  CHECK(bad(padded));
  auto nowhere = decode(encode(envelope{protocol_version, "agent", "", heartbeat{"n1", 7}}));
  REQUIRE(std::holds_alternative<decode_error>(nowhere));
  CHECK(std::get<decode_error>(nowhere).message.find("no destination") != std::string::npos);
}

TEST_CASE("protocol: a report from a sender without kinds still reads as a failure") {
  train_report r;
  r.error = "boom";
  CHECK(r.what() == report_kind::failed);
  r.kind = static_cast<std::int32_t>(report_kind::checkpoint_failed);
  CHECK(r.what() == report_kind::checkpoint_failed);
}
