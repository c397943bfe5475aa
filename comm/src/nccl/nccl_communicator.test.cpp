// The NCCL communicator on any machine (built with SAILOR_WITH_CUDA): the checks made before
// anything reaches NCCL, the factory's bookkeeping of group names, and what a rank gets on a
// machine without a usable GPU (an error that names the device and the reason). On a machine
// with a GPU the last case makes a real one-rank group and checks its refusals; the traffic
// itself is bench/nccl_check's (scripts/gpu-check.sh).
#include <sailor/comm/collective.hpp>
#include <sailor/comm/cuda.hpp>

#include <doctest/doctest.h>

#include <string>

#include "strings.hpp"
#include "nccl_checks.hpp"

namespace {

using namespace sailor;
using namespace std::chrono_literals;
namespace nd = sailor::comm::nccl_detail;

using sailor::testing::contains;

// The message of a refusal, or "" when `st` is success.
std::string refusal(const status& st) {
  if (!st) return "";
  CHECK(st->kind == error_kind::invalid_input);
  return st->message;
}

comm::gloo_options in_process_options() {
  comm::gloo_options options;
  options.in_process_store = comm::make_in_process_store();
  options.timeout = 5s;
  return options;
}

}  // namespace

TEST_CASE("nccl checks: a group needs a name, members, distinct ranks and this rank") {
  CHECK(refusal(nd::check_group("dp", {0, 1, 2}, 1)).empty());
  CHECK(contains(refusal(nd::check_group("", {0}, 0)), "needs a name"));
  CHECK(contains(refusal(nd::check_group("dp", {}, 0)), "[comm dp] a group needs at least one rank"));
  CHECK(contains(refusal(nd::check_group("dp", {0, -1}, 0)), "negative global rank -1"));
  CHECK(contains(refusal(nd::check_group("dp", {3, 1, 3}, 1)), "global rank 3 appears twice"));
  CHECK(contains(refusal(nd::check_group("dp", {0, 2}, 1)), "global rank 1 (this factory's) is not a member"));
}

TEST_CASE("nccl checks: buffers, roots, peers and all_gather sizes") {
  float x[4] = {};
  const comm::buffer_view four{x, 4, comm::element_type::f32};
  CHECK(refusal(nd::check_buffer("tp", "all_reduce", four)).empty());
  CHECK(refusal(nd::check_buffer("tp", "all_reduce", {nullptr, 0, comm::element_type::f32})).empty());
  CHECK(contains(refusal(nd::check_buffer("tp", "all_reduce", {nullptr, 3, comm::element_type::f32})),
                 "[comm tp] all_reduce: null buffer of 3 elements"));

  CHECK(refusal(nd::check_root("tp", 1, 2)).empty());
  CHECK(contains(refusal(nd::check_root("tp", 2, 2)), "broadcast: root 2 is not a rank of the group (0..1)"));
  CHECK(contains(refusal(nd::check_root("tp", -1, 2)), "root -1"));

  CHECK(refusal(nd::check_peer("pp", "isend", 0, 1, 2)).empty());
  CHECK(contains(refusal(nd::check_peer("pp", "isend", 1, 1, 2)), "isend: peer 1 is this rank"));
  CHECK(contains(refusal(nd::check_peer("pp", "irecv", 5, 1, 2)), "irecv: peer 5 is not a rank of the group (0..1)"));

  float out[8] = {};
  CHECK(refusal(nd::check_gather("tp", {x, 4, comm::element_type::f32}, {out, 8, comm::element_type::f32}, 2)).empty());
  CHECK(contains(refusal(nd::check_gather("tp", {x, 4, comm::element_type::f32}, {out, 6, comm::element_type::f32}, 2)),
                 "all_gather: output holds 6 elements, needs 8"));
  CHECK(contains(refusal(nd::check_gather("tp", {x, 4, comm::element_type::f32}, {out, 8, comm::element_type::i32}, 2)),
                 "differ in element type"));
}

TEST_CASE("nccl checks: a factory uses each group name once") {
  nd::group_names names;
  CHECK(refusal(names.claim("dp/0")).empty());
  CHECK(refusal(names.claim("tp/0")).empty());
  CHECK(contains(refusal(names.claim("dp/0")), "[comm dp/0] this factory has made a group of that name before"));
}

TEST_CASE("nccl factory: a negative device or rank is refused, naming it") {
  auto options = in_process_options();
  auto bad_device = comm::make_nccl_factory(0, -1, options);
  REQUIRE(!bad_device);
  CHECK(bad_device.error().kind == error_kind::invalid_input);
  CHECK(contains(bad_device.error().message, "cuda:-1 is not a device"));
  auto bad_rank = comm::make_nccl_factory(-2, 0, options);
  REQUIRE(!bad_rank);
  CHECK(contains(bad_rank.error().message, "negative global rank -2"));
}

TEST_CASE("nccl factory: without a usable GPU a group is refused with the reason (with one: a "
          "one-rank group refuses bad arguments)") {
  auto options = in_process_options();
  auto factory = comm::make_nccl_factory(0, 0, options);
  REQUIRE(factory);
  // The group's own arguments are checked before the device.
  auto stranger = (*factory)->create("other", {1});
  REQUIRE(!stranger);
  CHECK(contains(stranger.error().message, "is not a member"));

  auto devices = comm::cuda_device_count();
  auto group = (*factory)->create("solo", {0});
  if (!devices) {
    // This machine has no driver or no GPU (CI): a clear error, no crash, nothing created.
    INFO(devices.error().message);
    REQUIRE(!group);
    CHECK(group.error().kind == error_kind::failed);
    CHECK(contains(group.error().message, "[comm solo] cuda:0: no CUDA device"));
  } else {
    INFO("a GPU is present: " << *devices << " device(s)");
    REQUIRE(group);
    auto& c = **group;
    CHECK(c.rank() == 0);
    CHECK(c.size() == 1);
    CHECK(contains(refusal(c.broadcast({nullptr, 0, comm::element_type::f32}, 1)), "root 1"));
    CHECK(contains(refusal(c.all_reduce({nullptr, 2, comm::element_type::f32})), "null buffer"));
    auto self = c.isend({nullptr, 0, comm::element_type::u8}, 0, 7);
    CHECK(contains(refusal(self->wait(1s)), "peer 0 is this rank"));
  }
  // Either way the name is spent: a second group of that name would read the first one's id.
  auto again = (*factory)->create("solo", {0});
  REQUIRE(!again);
  CHECK(contains(again.error().message, "made a group of that name before"));
}

TEST_CASE("nccl factory: a device the machine does not have is refused, naming it") {
  auto factory = comm::make_nccl_factory(0, 4096, in_process_options());
  REQUIRE(factory);
  auto group = (*factory)->create("far", {0});
  REQUIRE(!group);
  CHECK(contains(group.error().message, "cuda:4096"));
}
