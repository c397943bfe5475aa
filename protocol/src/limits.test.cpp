// Each message kind's ceiling: the largest legal message of every kind decodes, a message
// over its kind's ceiling is refused naming kind, size and limit, and text for people is cut
// by the sender so that it never crosses a ceiling.

#include "sailor/protocol/limits.hpp"

#include <doctest/doctest.h>

#include <string>

#include "sailor/protocol/codec.hpp"

using namespace sailor::protocol;
namespace config = sailor::config;
namespace b = wire_bounds;

namespace {

std::string text(std::size_t n, char c = 'x') { return std::string(n, c); }

node_inventory largest_inventory() {
  node_inventory v{text(b::name_bytes), text(b::name_bytes), text(b::name_bytes),
                   text(b::name_bytes), {}, text(b::name_bytes), {}};
  for (std::size_t i = 0; i < b::devices_per_node; ++i)
    v.devices.push_back(device_info{int(i), text(b::name_bytes), 1ull << 40});
  v.checkpoints.assign(b::shards_per_node, text(b::shard_path_bytes));
  return v;
}

// plan_devices devices in plan_stages stages, one device per replica (the largest layout).
config::plan largest_plan() {
  config::plan p;
  p.micro_batch = 1;
  p.global_batch = int(b::plan_devices);
  const std::size_t per_stage = b::plan_devices / b::plan_stages;
  for (std::size_t s = 0; s < b::plan_stages; ++s) {
    config::stage_plan st{int(s), 1, true, {}};
    for (std::size_t r = 0; r < per_stage; ++r)
      st.replicas.push_back(config::replica{text(b::name_bytes, 'g'), text(b::name_bytes, 'z'), 1,
                                            {text(b::name_bytes, 'n')}, {int(r)}});
    p.stages.push_back(std::move(st));
  }
  p.estimate = config::plan_estimate{1, 1, 1, 1, 1};
  return p;
}

stage_role largest_role() {
  return stage_role{7, 1, 2, 3, 4, 5, 6, 7, 8, 9, text(b::name_bytes), text(b::name_bytes)};
}

// The largest legal message of every kind whose ceiling is fixed.
std::vector<message> largest_messages() {
  role_assignment assignment{1, {}, largest_plan()};
  for (std::size_t i = 0; i < b::devices_per_node; ++i)
    assignment.roles.push_back(stage_role{1, int(i % b::plan_stages), 0, 0, 1, int(i)});
  train_report report;
  report.node = report.blamed_node = text(b::name_bytes);
  report.error = text(b::reason_bytes);
  report.checkpoint_file = text(b::path_bytes);
  report.phase = text(b::word_bytes);
  return {
    join_request{protocol_version, largest_inventory()},
    join_accepted{text(b::name_bytes), text(b::actor_name_bytes), 1, 2},
    join_refused{text(b::reason_bytes), refuse_reason::other},
    heartbeat{text(b::name_bytes), ~0ull},
    assignment,
    stage_ready{text(b::name_bytes), largest_role()},
    stage_failed{text(b::name_bytes), largest_role(), text(b::reason_bytes)},
    preemption_notice{text(b::name_bytes), text(b::reason_bytes), 30},
    shutdown_notice{text(b::reason_bytes)},
    status_request{1},
    report,
    store_request{1, 2, text(b::store_key_bytes), true, std::vector<char>(b::store_value_bytes, 'v'),
                  1000, text(b::name_bytes)},
    store_reply{1, true, std::vector<char>(b::store_value_bytes, 'v'), text(b::reason_bytes)},
    // A scheduler in its own process.
    plan_reply{1, true, largest_plan(), text(b::reason_bytes)},
    availability_event{availability_kind::preemption_notice, largest_inventory(), text(b::reason_bytes), 1},
    iteration_telemetry{1, 2, text(b::name_bytes), 3, 4, 1, 1, 1, 1, 1, 1},
    plan_applied{1, largest_plan(), text(b::name_bytes)},
    plan_refused{1, text(b::reason_bytes)},
    replan_finished{1, text(b::reason_bytes), 1},
    scheduler_hello{text(b::name_bytes)},
    scheduler_request{1, scheduler_command::objective_change, text(b::name_bytes), text(b::reason_bytes), 1, 2,
                      text(b::name_bytes), text(b::reason_bytes)},
    scheduler_reply{1, true, text(b::reason_bytes)},
    // Link probes between nodes (a request carries the cluster's links: no ceiling of its own).
    link_probe_result{1, text(b::name_bytes), text(b::reason_bytes), text(b::name_bytes), 1,
                      std::vector<double>(b::probe_sizes, 1), std::vector<double>(b::probe_sizes, 2), 1},
    // Training, added after the above.
    checkpoint_kept{1, 2, text(b::path_bytes)},
  };
}

envelope wrap(message m) {
  return envelope{protocol_version, text(b::actor_name_bytes, 'a'), text(b::actor_name_bytes, 'd'),
                  std::move(m)};
}

}  // namespace

TEST_CASE("limits: kinds are named as the codec names them, every kind has a ceiling") {
  for (const auto& m : largest_messages()) CHECK(std::string(kind_name(m.index())) == name_of(m));
  CHECK(std::string(kind_name(message{cluster_status{}}.index())) == "cluster_status");
  CHECK(std::string(kind_name(message{training_job{}}.index())) == "training_job");
  CHECK(std::string(kind_name(message{plan_request{}}.index())) == "plan_request");
  CHECK(std::string(kind_name(message_kinds)) == "unknown");
  CHECK(max_encoded_bytes(message_kinds) == 0);
  // No ceiling is over the control frame limit, which the transport checks first (the bridge's
  // test checks that comm's default is this limit).
  for (std::size_t k = 0; k < message_kinds; ++k) {
    INFO(kind_name(k));
    CHECK(max_encoded_bytes(k) > 0);
    CHECK(max_encoded_bytes(k) <= b::control_frame_bytes);
  }
  // The kinds a node sends the coordinator many times are small.
  CHECK(max_encoded_bytes(message{heartbeat{}}.index()) < 4096);
  CHECK(max_encoded_bytes(message{status_request{}}.index()) < 4096);
  CHECK(max_encoded_bytes(message{train_report{}}.index()) < 64 * 1024);
}

TEST_CASE("limits: the largest legal message of every kind decodes, within twice its content") {
  for (const auto& m : largest_messages()) {
    const auto bytes = encode(wrap(m));
    const auto limit = max_encoded_bytes(m.index());
    INFO(name_of(m) << ": " << bytes.size() << " bytes, limit " << limit);
    CHECK(bytes.size() <= limit);
    // The ceiling is derived from the content, not a round number far above it.
    CHECK(bytes.size() * 4 > limit);
    auto out = decode(bytes);
    REQUIRE(std::holds_alternative<envelope>(out));
    CHECK(std::get<envelope>(out).body.index() == m.index());
  }
}

TEST_CASE("limits: a message over its kind's ceiling is refused, naming kind, size and limit") {
  const auto limit = max_encoded_bytes(message{heartbeat{}}.index());
  // A heartbeat whose node name alone is over the ceiling (far under the frame limit).
  const auto bytes = encode(wrap(heartbeat{text(64 * 1024), 1}));
  auto out = decode(bytes);
  REQUIRE(std::holds_alternative<decode_error>(out));
  const auto& err = std::get<decode_error>(out);
  CHECK(err.what == decode_error::kind::invalid);
  CHECK(err.message == "a heartbeat of " + std::to_string(bytes.size()) + " bytes, over its limit of " +
                         std::to_string(limit) + " bytes");
  // The same bytes as a kind with a larger ceiling decode.
  auto store = decode(encode(wrap(store_request{1, 2, "k", true, std::vector<char>(64 * 1024, 'v'), 0, "n"})));
  CHECK(std::holds_alternative<envelope>(store));
  // A role assignment whose plan spans more devices than a plan may is refused as one.
  auto plan = largest_plan();
  for (auto& st : plan.stages) {  // three times the devices: past the ceiling's slack
    const auto one = st.replicas;
    for (int k = 0; k < 2; ++k) st.replicas.insert(st.replicas.end(), one.begin(), one.end());
  }
  auto big = decode(encode(wrap(role_assignment{1, {}, plan})));
  REQUIRE(std::holds_alternative<decode_error>(big));
  CHECK(std::get<decode_error>(big).message.find("a role_assignment of ") == 0);
}

TEST_CASE("limits: reasons and errors are cut by the sender, at a character boundary") {
  // An exception text of 1 MiB in a stage failure: the message stays under its ceiling.
  auto out = decode(encode(wrap(stage_failed{"n1", largest_role(), text(1 << 20, 'e')})));
  REQUIRE(std::holds_alternative<envelope>(out));
  const auto& failed = std::get<envelope>(out).body;
  CHECK(std::get<stage_failed>(failed).reason == text(b::reason_bytes, 'e'));
  // Two-byte characters: the cut never splits one.
  std::string accents;
  while (accents.size() < b::reason_bytes + 10) accents += "\xc3\xa9";  // é
  CHECK(clip_text(accents, 5) == "\xc3\xa9\xc3\xa9");
  auto report = train_report{};
  report.error = "x" + accents;  // odd offset: a cut at the bound lands inside a character
  auto decoded = decode(encode(wrap(report)));
  REQUIRE(std::holds_alternative<envelope>(decoded));
  const auto& error = std::get<train_report>(std::get<envelope>(decoded).body).error;
  CHECK(error.size() == b::reason_bytes - 1);
  CHECK(error.substr(error.size() - 2) == "\xc3\xa9");
  CHECK(clip_text("short", 100) == "short");
}
