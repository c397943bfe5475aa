#include "sailor/actors/wire.hpp"

#include <doctest/doctest.h>

#include <caf/make_message.hpp>

#include "sailor/actors/runtime.hpp"

using namespace sailor::actors;

namespace {

struct fixture {
  runtime_config cfg;
  caf::actor_system system{cfg};
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "wire: a join request survives encoding and decoding") {
  join_request request;
  request.inventory = node_inventory{"n1", "zone-a", "A100-40", "host1",
                                     {{0, "cuda", 40ull << 30}, {1, "cuda", 40ull << 30}}};
  auto frame = encode_envelope(system, "agent", "supervisor", caf::make_message(request));
  REQUIRE(frame.ok());
  auto decoded = decode_envelope(system, *frame);
  REQUIRE(decoded.ok());
  CHECK(decoded->version == protocol_version);
  CHECK(decoded->source == "agent");
  CHECK(decoded->destination == "supervisor");
  REQUIRE(decoded->body.match_elements<join_request>());
  auto& back = decoded->body.get_as<join_request>(0);
  CHECK(back.inventory.name == "n1");
  CHECK(back.inventory.zone == "zone-a");
  REQUIRE(back.inventory.devices.size() == 2);
  CHECK(back.inventory.devices[1].memory_bytes == (40ull << 30));
}

TEST_CASE_FIXTURE(fixture, "wire: a status with nodes and roles survives encoding") {
  cluster_status s;
  s.phase = "running";
  s.plan_version = 3;
  node_status n;
  n.inventory.name = "n2";
  n.roles.push_back(stage_role{3, 1, 0, 0, 1, 1, 2, 3, 1, 2, "CPU", "local-b"});
  s.nodes.push_back(n);
  s.events = {"a", "b"};
  auto frame = encode_envelope(system, "supervisor", "status", caf::make_message(s));
  REQUIRE(frame.ok());
  auto decoded = decode_envelope(system, *frame);
  REQUIRE(decoded.ok());
  auto& back = decoded->body.get_as<cluster_status>(0);
  CHECK(back.phase == "running");
  CHECK(back.plan_version == 3);
  REQUIRE(back.nodes.size() == 1);
  REQUIRE(back.nodes[0].roles.size() == 1);
  CHECK(back.nodes[0].roles[0].first_layer == 2);
  CHECK(back.nodes[0].roles[0].zone == "local-b");
  CHECK(back.events.size() == 2);
}

TEST_CASE_FIXTURE(fixture, "wire: another protocol version is refused with both versions named") {
  auto frame = encode_raw_frame(99, join_request_kind(), "agent", "supervisor", {});
  auto decoded = decode_envelope(system, frame);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.error().message.find("protocol version 99") != std::string::npos);
  CHECK(decoded.error().message.find("expected 1") != std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "wire: garbage, unknown kinds and truncated bodies are errors") {
  CHECK_FALSE(decode_envelope(system, std::vector<char>{'x'}).ok());
  CHECK_FALSE(decode_envelope(system, encode_raw_frame(protocol_version, 999, "a", "b", {})).ok());
  auto frame = encode_envelope(system, "agent", "supervisor",
                               caf::make_message(heartbeat{"n1", 7}));
  REQUIRE(frame.ok());
  auto truncated = *frame;
  truncated.resize(truncated.size() - 3);
  CHECK_FALSE(decode_envelope(system, truncated).ok());
  auto padded = *frame;
  padded.push_back('!');
  CHECK_FALSE(decode_envelope(system, padded).ok());
}

TEST_CASE_FIXTURE(fixture, "wire: local-only messages cannot be encoded") {
  auto frame = encode_envelope(system, "a", "b", caf::make_message(node_lost{"n", "why"}));
  REQUIRE_FALSE(frame.ok());
  CHECK(frame.error().kind == sailor::error_kind::unimplemented);
}

TEST_CASE_FIXTURE(fixture, "wire: control messages travel as Cap'n Proto; roles are rebuilt from the plan") {
  sailor::config::plan p;
  p.micro_batch = 2;
  p.stages.push_back({0, 3, false, {sailor::config::replica{"CPU", "a", 2, {"n1", "n2"}, {0, 1}}}});
  p.stages.push_back({3, 3, false, {sailor::config::replica{"CPU", "b", 1, {"n2"}, {1}}}});
  role_assignment x;
  x.plan_version = 4;
  x.plan = p;
  x.roles.push_back(stage_role{4, 0, 0, 1, 2, 1, 0, 3, 2, 2, "CPU", "a"});
  x.roles.push_back(stage_role{4, 1, 0, 0, 1, 1, 3, 3, 2, 2, "CPU", "b"});
  auto frame = encode_envelope(system, "supervisor", "agent", caf::make_message(x));
  REQUIRE(frame.ok());
  CHECK((*frame)[0] == 'C');
  auto decoded = decode_envelope(system, *frame);
  REQUIRE(decoded.ok());
  CHECK(decoded->destination == "agent");
  REQUIRE(decoded->body.match_elements<role_assignment>());
  auto& back = decoded->body.get_as<role_assignment>(0);
  CHECK(back.plan_version == 4);
  REQUIRE(back.roles.size() == 2);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(back.roles[k].stage == x.roles[k].stage);
    CHECK(back.roles[k].tp_rank == x.roles[k].tp_rank);
    CHECK(back.roles[k].tp == x.roles[k].tp);
    CHECK(back.roles[k].device == x.roles[k].device);
    CHECK(back.roles[k].first_layer == x.roles[k].first_layer);
    CHECK(back.roles[k].num_layers == x.roles[k].num_layers);
    CHECK(back.roles[k].micro_batch == 2);
    CHECK(back.roles[k].zone == x.roles[k].zone);
  }
  CHECK(back.plan.stages[0].replicas[0].nodes == std::vector<std::string>{"n1", "n2"});
  // What the schema lacks travels in the CAF envelope.
  auto status = encode_envelope(system, "supervisor", "status", caf::make_message(cluster_status{}));
  REQUIRE(status.ok());
  CHECK((*status)[0] == 'A');
  // A Cap'n Proto frame cut short is refused.
  auto cut = *frame;
  cut.resize(cut.size() / 2);
  CHECK_FALSE(decode_envelope(system, cut).ok());
}
