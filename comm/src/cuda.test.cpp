// sailor/comm/cuda.hpp in every build: without the CUDA toolkit each call says the build has
// no CUDA; with it, on a machine without a driver or GPU (CI), each names the device and the
// CUDA runtime's reason; on a GPU machine the device's memory is read.
#include <sailor/comm/cuda.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {

using namespace sailor;
using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
