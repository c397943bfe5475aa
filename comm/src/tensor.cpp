#include "sailor/comm/tensor.hpp"

#include <cstdlib>
#include <new>

namespace sailor::comm {

const char* to_string(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::f64: return "f64";
    case dtype::i64: return "i64";
    case dtype::i32: return "i32";
    case dtype::i8: return "i8";
    case dtype::u8: return "u8";
  }
  return "unknown";
}

std::size_t element_size(dtype t) {
  switch (t) {
    case dtype::f32: case dtype::i32: return 4;
    case dtype::f16: case dtype::bf16: return 2;
    case dtype::f64: case dtype::i64: return 8;
    case dtype::i8: case dtype::u8: return 1;
  }
  return 1;
}

std::int64_t tensor_descriptor::num_elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

payload_buffer payload_buffer::allocate(std::size_t size) {
  if (size == 0) return payload_buffer(nullptr, 0, nullptr);
  std::size_t rounded = (size + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return payload_buffer(static_cast<std::byte*>(p), size, std::move(owner));
}

}  // namespace sailor::comm
