// Who may speak the scheduler protocol on the wire (peer_checks.hpp): the bridge's rules for
// a scheduler in its own process.

#include <doctest/doctest.h>

#include <caf/make_message.hpp>

#include "peer_checks.hpp"
#include "sailor/actors/scheduler_api.hpp"

using namespace sailor::actors;
using sailor::actors::detail::scheduler_refusal;
namespace protocol = sailor::protocol;

TEST_CASE("scheduler wire: only the scheduler's connection reaches the gate") {
  auto request = caf::make_message(protocol::scheduler_request{1, protocol::scheduler_command::evict_node, "n2", "x"});
  auto hello = caf::make_message(protocol::scheduler_hello{"s"});
  // The scheduler's own connection: allowed.
  CHECK_FALSE(scheduler_refusal("scheduler", "scheduler_gate", request));
  CHECK_FALSE(scheduler_refusal("scheduler", "scheduler_gate", hello));
  // A node's connection may not send the gate anything, a request or a hello.
  auto why = scheduler_refusal("n1", "scheduler_gate", request);
  REQUIRE(why);
  CHECK(why->find("'n1'") != std::string::npos);
  CHECK(scheduler_refusal("n1", "scheduler_gate", hello));
  CHECK(scheduler_refusal("n1", "scheduler_gate", caf::make_message(heartbeat{"n1", 1})));
  // Links without a handshake name (in-process pairs): the gate checks the sender itself.
  CHECK_FALSE(scheduler_refusal("", "scheduler_gate", request));
}

TEST_CASE("scheduler wire: scheduler messages go only to scheduler actors") {
  auto reply = caf::make_message(plan_reply::failure(3, "none"));
  CHECK(scheduler_refusal("scheduler", "supervisor", reply));
  CHECK(scheduler_refusal("", "agent", caf::make_message(plan_request{})));
  CHECK_FALSE(scheduler_refusal("coordinator", "scheduler", caf::make_message(plan_request{})));
  // Other messages to other actors are not this check's business.
  CHECK_FALSE(scheduler_refusal("n1", "supervisor", caf::make_message(heartbeat{"n1", 1})));
}

TEST_CASE("scheduler wire: the scheduler's connection speaks for no node") {
  // A node may not join under the scheduler's name (its join speaks for node 'scheduler').
  join_request join{protocol_version, node_inventory{"scheduler", "a", "CPU", "h", {}, "", {}}};
  auto why = scheduler_refusal("scheduler", "supervisor", caf::make_message(join));
  REQUIRE(why);
  CHECK(why->find("scheduler's connection") != std::string::npos);
  CHECK(scheduler_refusal("scheduler", "zone:a", caf::make_message(heartbeat{"n1", 1})));
  CHECK_FALSE(scheduler_refusal("scheduler", "supervisor", caf::make_message(status_request{})));
}
