// The actor side of the wire: CAF messages in and out of protocol envelopes. The messages'
// own round trips are protocol/src/codec.test.cpp's.

#include "sailor/actors/wire.hpp"

#include <doctest/doctest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/make_message.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/actors/train_messages.hpp"

using namespace sailor::actors;

namespace {

struct fixture {
  runtime_config cfg;
  caf::actor_system system{cfg};
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "wire: a CAF message goes out and comes back as the same struct") {
  preemption_notice notice{"n1", "spot reclaimed", 30.5};
  auto frame = encode_envelope(system, "agent", "supervisor", caf::make_message(notice));
  REQUIRE(frame.ok());
  auto back = decode_envelope(system, *frame);
  REQUIRE(back.ok());
  CHECK(back->version == protocol_version);
  CHECK(back->source == "agent");
  CHECK(back->destination == "supervisor");
  REQUIRE(back->body.match_elements<preemption_notice>());
  CHECK(back->body.get_as<preemption_notice>(0) == notice);
}

TEST_CASE_FIXTURE(fixture, "wire: local-only messages cannot be encoded") {
  auto frame = encode_envelope(system, "a", "b", caf::make_message(node_lost{"n", "why"}));
  REQUIRE_FALSE(frame.ok());
  CHECK(frame.error().kind == sailor::error_kind::unimplemented);
}

TEST_CASE_FIXTURE(fixture, "wire: a frame of another version earns a protocol_version refusal") {
  auto frame = encode_envelope_as_version(99, "agent", "supervisor",
                                          caf::make_message(heartbeat{"n1", 1}));
  REQUIRE(frame.ok());
  auto out = decode_frame(*frame);
  REQUIRE(std::holds_alternative<decode_failure>(out));
  CHECK(std::get<decode_failure>(out).code == refuse_reason::protocol_version);
  auto junk = decode_frame(std::vector<char>(16, 'x'));
  REQUIRE(std::holds_alternative<decode_failure>(junk));
  CHECK(std::get<decode_failure>(junk).code == refuse_reason::invalid_message);
}

TEST_CASE_FIXTURE(fixture, "wire: CAF's own serialization of a training job keeps every field") {
  // inspect() is what CAF serializes with (message copies across systems).
  training_job j;
  j.plan.micro_batch = 3;
  j.model.arch = sailor::config::architecture::opt;
  j.model.bias = false;
  j.model.norm_eps = 1e-6;
  j.model.precision = sailor::config::dtype::bf16;
  j.data.path = "/data/t.bin";
  j.data.format = sailor::config::data_format::tokens_u16;
  j.eval_every = 7;
  j.schedule.weight_decay = 0.25;
  j.keep_checkpoint_dirs = {"v3"};
  std::vector<char> buf;
  caf::binary_serializer sink{system, buf};
  REQUIRE_FALSE(sink(j));
  training_job back;
  caf::binary_deserializer source{system, buf};
  REQUIRE_FALSE(source(back));
  CHECK(back.plan.micro_batch == 3);
  CHECK(back.model.arch == sailor::config::architecture::opt);
  CHECK_FALSE(back.model.bias);
  CHECK(back.model.norm_eps == 1e-6);
  CHECK(back.model.precision == sailor::config::dtype::bf16);
  CHECK(back.data.path == "/data/t.bin");
  CHECK(back.data.format == sailor::config::data_format::tokens_u16);
  CHECK(back.eval_every == 7);
  CHECK(back.schedule.weight_decay == 0.25);
  CHECK(back.keep_checkpoint_dirs == std::vector<std::string>{"v3"});
}
