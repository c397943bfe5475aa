// The transport's own frames: the handshake, tensor headers, addresses and errors.

#include <doctest/doctest.h>

#include "handshake.hpp"
#include "sailor/comm/transport.hpp"

using namespace sailor;
using namespace sailor::comm;

TEST_CASE("frames: garbage tensor headers decode to errors, never exceptions") {
  std::vector<std::byte> junk(64, std::byte{0xff});
  CHECK(std::holds_alternative<transport_error>(detail::decode_tensor_header(junk)));
  CHECK(std::holds_alternative<transport_error>(detail::decode_tensor_header({})));
}

TEST_CASE("frames: tensor descriptors round-trip as the payload header") {
  tensor_descriptor d{dtype::bf16, {4, 1024, 768}, 0xfeedbeef, "activations s1 mb3", 4 * 1024 * 768 * 2};
  auto out = detail::decode_tensor_header(detail::encode_tensor_header(d));
  REQUIRE(std::holds_alternative<tensor_descriptor>(out));
  CHECK(std::get<tensor_descriptor>(out) == d);
  CHECK(d.num_elements() == 4 * 1024 * 768);
  CHECK(element_size(dtype::bf16) == 2);
  tensor_descriptor scalar{dtype::f64, {}, 0, "", 8};
  CHECK(std::get<tensor_descriptor>(detail::decode_tensor_header(detail::encode_tensor_header(scalar))) == scalar);
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
  // A tensor header is not a hello (wrong magic).
  auto not_hello = detail::decode_hello(detail::encode_tensor_header(tensor_descriptor{}));
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
