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
