#include <sailor/comm/collective.hpp>

#include <thread>

namespace sailor::comm {

std::size_t size_of(element_type type) {
  switch (type) {
    case element_type::f32: return 4;
    case element_type::f64: return 8;
    case element_type::f16: return 2;
    case element_type::bf16: return 2;
    case element_type::i32: return 4;
    case element_type::i64: return 8;
    case element_type::u8: return 1;
  }
  return 1;
}

status communicator::send(buffer_view buf, int peer, std::uint64_t tag) {
  auto req = isend(buf, peer, tag);
  return req->wait(timeout());
}

status communicator::recv(buffer_view buf, int peer, std::uint64_t tag) {
  auto req = irecv(buf, peer, tag);
  return req->wait(timeout());
}

// Portable fallback: poll. Backends override it with a proper wait.
result<int> communicator::wait_any(const std::vector<request*>& requests,
                                   std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool any = false;
  for (;;) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i]) continue;
      any = true;
      if (requests[i]->test()) return static_cast<int>(i);
    }
    if (!any) return error::invalid_input("", "wait_any: no request to wait for");
    if (std::chrono::steady_clock::now() > deadline)
      return error::disconnected("[comm " + name() + "] wait_any timed out");
    std::this_thread::yield();
  }
}

}  // namespace sailor::comm
