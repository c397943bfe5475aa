#include <sailor/comm/collective.hpp>

#include <doctest/doctest.h>

#include <functional>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

namespace {

using namespace sailor;
using namespace std::chrono_literals;

// Runs `body(rank, factory)` on `n` threads meeting through an in-memory store.
void run_ranks(int n, const std::function<void(int, comm::communicator_factory&)>& body) {
  comm::gloo_options options;
  options.in_process_store = comm::make_in_process_store();
  options.timeout = 20s;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto factory = comm::make_gloo_factory(r, options);
      if (!factory) {
        failures[r] = factory.error().to_string();
        return;
      }
      body(r, **factory);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& f : failures) CHECK(f.empty());
}

}  // namespace

TEST_CASE("gloo communicator: collectives over a group of three threads") {
  std::vector<std::vector<float>> reduced(3), gathered(3), broadcasted(3), maxed(3);
  std::vector<int> ok(3, 0);
  run_ranks(3, [&](int r, comm::communicator_factory& f) {
    auto c = f.create("all", {0, 1, 2});
    if (!c) return;
    auto& comm = **c;
    std::vector<float> v = {float(r), float(r + 1), 10.0f * r};
    if (comm.all_reduce({v.data(), v.size(), comm::element_type::f32})) return;
    reduced[r] = v;
    std::vector<float> m = {float(r), -float(r)};
    if (comm.all_reduce({m.data(), m.size(), comm::element_type::f32}, comm::reduce_op::max)) return;
    maxed[r] = m;
    std::vector<float> b = {float(r), float(r)};
    if (comm.broadcast({b.data(), b.size(), comm::element_type::f32}, 2)) return;
    broadcasted[r] = b;
    std::vector<float> in = {float(r)}, out(3, -1.0f);
    if (comm.all_gather({in.data(), 1, comm::element_type::f32},
                        {out.data(), 3, comm::element_type::f32}))
      return;
    gathered[r] = out;
    if (comm.barrier()) return;
    ok[r] = 1;
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(ok[r] == 1);
    CHECK(reduced[r] == std::vector<float>{3.0f, 6.0f, 30.0f});
    CHECK(maxed[r] == std::vector<float>{2.0f, 0.0f});
    CHECK(broadcasted[r] == std::vector<float>{2.0f, 2.0f});
    CHECK(gathered[r] == std::vector<float>{0.0f, 1.0f, 2.0f});
  }
}

TEST_CASE("gloo communicator: subgroups and point-to-point with wait_any") {
  std::vector<double> got(4, -1);
  std::vector<int> first(4, -1);
  run_ranks(4, [&](int r, comm::communicator_factory& f) {
    // Every rank creates the groups it belongs to in one global order.
    std::unique_ptr<comm::communicator> pair;
    if (r < 2) {
      auto c = f.create("low", {0, 1});
      if (!c) return;
      pair = std::move(*c);
    } else {
      auto c = f.create("high", {3, 2});  // rank order is the list order
      if (!c) return;
      pair = std::move(*c);
      if (r == 3) CHECK(pair->rank() == 0);
    }
    auto w = f.create("world", {0, 1, 2, 3});
    if (!w) return;
    auto& world = **w;
    double sum = r;
    if (pair->all_reduce({&sum, 1, comm::element_type::f64})) return;
    got[r] = sum;
    // Rank 0 receives from 1 (tag 7) and from 3 (tag 9); 3 sends first.
    if (r == 0) {
      std::vector<int> a(4), b(4);
      auto ra = world.irecv({a.data(), 4, comm::element_type::i32}, 1, 7);
      auto rb = world.irecv({b.data(), 4, comm::element_type::i32}, 3, 9);
      auto idx = world.wait_any({ra.get(), rb.get()}, 10s);
      REQUIRE(idx.ok());
      first[0] = *idx;
      std::vector<int> go = {1};
      CHECK_FALSE(world.send({go.data(), 1, comm::element_type::i32}, 1, 8));
      CHECK_FALSE(ra->wait(10s));
      CHECK_FALSE(rb->wait(10s));
      CHECK(a == std::vector<int>{1, 1, 1, 1});
      CHECK(b == std::vector<int>{3, 3, 3, 3});
    } else if (r == 1) {
      std::vector<int> go(1);
      CHECK_FALSE(world.recv({go.data(), 1, comm::element_type::i32}, 0, 8));
      std::vector<int> a(4, 1);
      CHECK_FALSE(world.send({a.data(), 4, comm::element_type::i32}, 0, 7));
    } else if (r == 3) {
      std::vector<int> b(4, 3);
      CHECK_FALSE(world.send({b.data(), 4, comm::element_type::i32}, 0, 9));
    }
    CHECK_FALSE(world.barrier());
  });
  CHECK(got == std::vector<double>{1, 1, 5, 5});
  CHECK(first[0] == 1);  // rank 3's message, since rank 1 waits for rank 0's go-ahead
}

namespace {

// Two ranks of one group whose rank 1 never takes part in an operation (a peer gone silent:
// its connections stay open, nothing arrives); the communicators' timeout is 30 s. Rank 0 runs
// `blocked` on a thread of its own; once it is seen blocked, another thread aborts rank 0's
// communicator: the call must return an error well within the timeout.
void check_abort_unblocks(const char* what,
                          const std::function<sailor::status(comm::communicator&)>& blocked) {
  INFO(std::string{what});
  comm::gloo_options options;
  options.in_process_store = comm::make_in_process_store();
  options.timeout = 30s;
  std::unique_ptr<comm::communicator> groups[2];
  {
    auto f0 = comm::make_gloo_factory(0, options);
    auto f1 = comm::make_gloo_factory(1, options);
    REQUIRE(f0.ok());
    REQUIRE(f1.ok());
    auto peer = std::async(std::launch::async, [&] { return (*f1)->create("pair", {0, 1}); });
    auto mine = (*f0)->create("pair", {0, 1});
    auto theirs = peer.get();
    REQUIRE(mine.ok());
    REQUIRE(theirs.ok());
    groups[0] = std::move(*mine);
    groups[1] = std::move(*theirs);
  }
  auto outcome = std::async(std::launch::async, [&] { return blocked(*groups[0]); });
  // Blocked: the peer never answers (a bounded look, not a wait for something to happen).
  REQUIRE(outcome.wait_for(300ms) == std::future_status::timeout);
  const auto start = std::chrono::steady_clock::now();
  groups[0]->abort("the plan was released");
  REQUIRE(outcome.wait_for(2s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  auto err = outcome.get();
  REQUIRE(err);
  CHECK(err->message.find("the plan was released") != std::string::npos);

  // Later operations fail at once, with the same reason.
  float x = 1;
  auto later = groups[0]->all_reduce({&x, 1, comm::element_type::f32});
  REQUIRE(later);
  CHECK(later->message.find("aborted: the plan was released") != std::string::npos);
  auto req = groups[0]->irecv({&x, 1, comm::element_type::f32}, 1, 3);
  CHECK(req->wait(1s));

  // The peer gives up as well (a released plan aborts every rank): at once.
  groups[1]->abort("the plan was released");
  CHECK(groups[1]->all_reduce({&x, 1, comm::element_type::f32}));
}

}  // namespace

TEST_CASE("gloo communicator: abort ends an all-reduce blocked on a silent peer") {
  check_abort_unblocks("all_reduce", [](comm::communicator& c) {
    std::vector<float> v(1024, 1.0f);
    return c.all_reduce({v.data(), v.size(), comm::element_type::f32});
  });
}

TEST_CASE("gloo communicator: abort ends a broadcast, an all-gather and a barrier blocked on a silent peer") {
  check_abort_unblocks("broadcast", [](comm::communicator& c) {
    std::vector<float> v(64, 1.0f);
    return c.broadcast({v.data(), v.size(), comm::element_type::f32}, 1);
  });
  check_abort_unblocks("all_gather", [](comm::communicator& c) {
    std::vector<float> in(8, 1.0f), out(16);
    return c.all_gather({in.data(), in.size(), comm::element_type::f32},
                        {out.data(), out.size(), comm::element_type::f32});
  });
  check_abort_unblocks("barrier", [](comm::communicator& c) { return c.barrier(); });
}

TEST_CASE("gloo communicator: abort ends a receive and a wait_any in flight") {
  check_abort_unblocks("recv", [](comm::communicator& c) {
    std::vector<float> v(256);
    return c.recv({v.data(), v.size(), comm::element_type::f32}, 1, 42);
  });
  check_abort_unblocks("wait_any", [](comm::communicator& c) -> sailor::status {
    std::vector<float> a(16), b(16);
    auto ra = c.irecv({a.data(), a.size(), comm::element_type::f32}, 1, 1);
    auto rb = c.irecv({b.data(), b.size(), comm::element_type::f32}, 1, 2);
    auto first = c.wait_any({ra.get(), rb.get()}, 30s);
    if (!first) return first.error();
    return (*first == 0 ? ra : rb)->wait(30s);
  });
}
