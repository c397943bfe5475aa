#pragma once
/// Tensors as the transport sees them: a small descriptor (sent as a Cap'n Proto header) and
/// the raw payload bytes, which never sit inside a Cap'n Proto message.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sailor::comm {

/// Element type of a tensor payload.
enum class dtype : std::uint8_t { f32, f16, bf16, f64, i64, i32, i8, u8 };

const char* to_string(dtype t);
/// Bytes per element of `t`.
std::size_t element_size(dtype t);

/// What a payload holds. `bytes` is authoritative for the transfer; `shape` and `dtype` are
/// carried for the receiver (and `bytes` need not equal shape x element size, e.g. for
/// packed or partial buffers).
struct tensor_descriptor {
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t tag = 0;  ///< meaning chosen by the users (e.g. iteration, micro-batch, kind)
  std::string name;       ///< for logs, may be empty
  std::uint64_t bytes = 0;

  /// Product of the shape (1 for a scalar, 0 if any dimension is 0).
  std::int64_t num_elements() const;
  bool operator==(const tensor_descriptor&) const = default;
};

/// Bytes of a received tensor: memory owned by this buffer, or memory handed out by a
/// receiver's allocator (e.g. a tensor's storage, kept alive by `owner`). Movable value.
class payload_buffer {
public:
  payload_buffer() = default;
  /// Wraps memory someone else owns; `owner` keeps it alive as long as this buffer lives.
  payload_buffer(std::byte* data, std::size_t size, std::shared_ptr<void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  /// Fresh heap memory of `size` bytes, 64-byte aligned, not initialised.
  static payload_buffer allocate(std::size_t size);

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> bytes() const { return {data_, size_}; }

private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<void> owner_;
};

}  // namespace sailor::comm
