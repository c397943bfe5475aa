// sailor/comm/cuda.hpp in every build: without the CUDA toolkit each call says the build has
// no CUDA; with it, on a machine without a driver or GPU (CI), each names the device and the
// CUDA runtime's reason; on a GPU machine the device's memory is read.
#include <sailor/comm/cuda.hpp>
#include <sailor/comm/device_channel.hpp>

#include <doctest/doctest.h>

#include "strings.hpp"

#include <string>

namespace {

using namespace sailor;
using namespace std::chrono_literals;

using sailor::testing::contains;

}  // namespace

TEST_CASE("cuda: the build says whether it has CUDA, and every call agrees") {
#if defined(SAILOR_WITH_CUDA)
  CHECK(comm::cuda_built());
#else
  CHECK(!comm::cuda_built());
  auto count = comm::cuda_device_count();
  REQUIRE(!count);
  CHECK(count.error().kind == error_kind::unimplemented);
  CHECK(contains(count.error().message, "SAILOR_WITH_CUDA=OFF"));
  CHECK(!comm::allocate_pinned(64));
  CHECK(!comm::cuda_stream::create(0));
#endif
}

TEST_CASE("cuda: device count, memory, pinned buffers and streams give reasons or work") {
  auto count = comm::cuda_device_count();
  if (!count) {
    INFO(count.error().message);
    CHECK(contains(count.error().message, "no CUDA device"));
    auto memory = comm::cuda_memory_info(0);
    REQUIRE(!memory);
    CHECK(contains(memory.error().message, "cuda:0"));
    auto stream = comm::cuda_stream::create(0);
    REQUIRE(!stream);
    CHECK(contains(stream.error().message, "cuda:0"));
    CHECK(!comm::allocate_pinned(4096));
    comm::pinned_pool pool;
    auto pooled = pool.take(4096);
    REQUIRE(!pooled);
    CHECK(contains(pooled.error().message, "pinned host buffer"));
    if (comm::cuda_built()) CHECK(comm::allocate_pinned(0));  // nothing to allocate: no driver needed
    return;
  }
  REQUIRE(*count >= 1);
  auto memory = comm::cuda_memory_info(0);
  REQUIRE(memory);
  CHECK(memory->total_bytes > 0);
  CHECK(memory->free_bytes <= memory->total_bytes);
  CHECK(!memory->name.empty());
  auto beyond = comm::cuda_memory_info(*count);
  REQUIRE(!beyond);
  CHECK(contains(beyond.error().message, "cuda:" + std::to_string(*count) + ": no such device"));
  // Host to host through a stream, with pinned memory on both sides: no kernel needed.
  auto a = comm::allocate_pinned(1024), b = comm::allocate_pinned(1024);
  REQUIRE(a);
  REQUIRE(b);
  for (std::size_t i = 0; i < 1024; ++i) a->data()[i] = std::byte(i % 251);
  auto stream = comm::cuda_stream::create(0);
  REQUIRE(stream);
  CHECK(!(*stream)->copy_async(b->data(), a->data(), 1024));
  CHECK(!(*stream)->synchronize(10s));
  CHECK(b->data()[1000] == std::byte(1000 % 251));
}

TEST_CASE("cuda: a pinned pool hands a returned buffer out again, up to what it keeps") {
  if (!comm::cuda_device_count()) return;  // the case above checked the refusal
  comm::pinned_pool pool(8192);
  std::byte* first = nullptr;
  {
    auto a = pool.take(5000);
    REQUIRE(a);
    CHECK(a->size() == 5000);
    first = a->data();
  }
  CHECK(pool.kept_bytes() == 8192);  // rounded up to a power of two
  auto b = pool.take(6000);
  REQUIRE(b);
  CHECK(b->data() == first);
  CHECK(pool.kept_bytes() == 0);
  {
    auto big = pool.take(100000);  // more than the pool keeps: freed when it goes
    REQUIRE(big);
  }
  CHECK(pool.kept_bytes() == 0);
}

TEST_CASE("cuda: a device channel needs an inner channel and a usable device") {
  auto none = comm::make_device_channel(nullptr, 0);
  REQUIRE(!none);
  // A host channel of one rank: the Gloo world of a group of one.
  comm::gloo_options options;
  options.in_process_store = comm::make_in_process_store();
  options.timeout = 5s;
  auto factory = comm::make_gloo_factory(0, options);
  REQUIRE(factory);
  auto world = (*factory)->create("world", {0});
  REQUIRE(world);
  auto made = comm::make_device_channel(comm::make_communicator_channel(**world), 0);
  if (!comm::cuda_device_count()) {
    REQUIRE(!made);
    CHECK(contains(made.error().message, "cuda:0"));
  } else {
    REQUIRE(made);
    CHECK((*made)->backend() == "cuda:0 staged(pairs of world)");
  }
}
