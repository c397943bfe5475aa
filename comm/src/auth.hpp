#pragma once
// Private: the proofs of the job token in the handshake (see sailor/comm/auth.hpp) and the
// limits every backend applies to what arrives before and after it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sailor/comm/auth.hpp"

namespace sailor::comm::detail {

using comm::is_printable_utf8;

inline constexpr std::size_t nonce_bytes = 32;
inline constexpr std::size_t proof_bytes = 32;  // HMAC-SHA256

/// Longest handshake message (hello, hello reply) accepted before allocating for it.
inline constexpr std::size_t max_handshake_bytes = 4096;
/// Longest name or zone a peer may announce in its hello.
inline constexpr std::size_t max_peer_name_bytes = 256;
/// Longest tensor header (descriptor: shape, name) accepted.
inline constexpr std::size_t max_tensor_header_bytes = 64 * 1024;

/// `nonce_bytes` bytes from the system's cryptographic generator.
std::vector<std::byte> random_nonce();

/// Which side proves: the server's and the client's proofs differ, so one cannot be
/// reflected as the other.
enum class proof_role { server, client };

/// HMAC-SHA256 keyed by `token` over the role and the handshake's transcript.
std::vector<std::byte> handshake_proof(std::string_view token, proof_role role,
                                       std::span<const std::byte> client_nonce,
                                       std::span<const std::byte> server_nonce,
                                       std::string_view client_name, std::string_view client_zone,
                                       std::string_view server_name);

/// Constant-time comparison of a received proof with the expected one.
bool proofs_match(std::span<const std::byte> expected, std::span<const std::byte> got);

}  // namespace sailor::comm::detail
