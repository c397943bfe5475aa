#pragma once
// The TCP backend's frame header, as it is on the wire (tcp_transport.cpp describes the frame
// and its kinds). Private to the backend; the hostile-peer test writes such headers too.

#include <cstdint>

namespace sailor::comm::tcp_backend {

constexpr std::uint32_t frame_magic = 0x524c4153;  // "SALR"
enum frame_kind : std::uint8_t {
  kind_hello = 0,
  kind_hello_reply = 1,
  kind_control = 2,
  kind_tensor = 3,
  kind_auth = 4,
};

struct frame_header {
  std::uint32_t magic = frame_magic;
  std::uint8_t kind = 0;
  std::uint8_t pad[3] = {0, 0, 0};
  std::uint32_t header_len = 0;
  std::uint32_t reserved = 0;
  std::uint64_t payload_len = 0;
};
static_assert(sizeof(frame_header) == 24);

}  // namespace sailor::comm::tcp_backend
