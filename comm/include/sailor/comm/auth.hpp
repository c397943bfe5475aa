#pragma once
/// The job token: a shared secret that every process of one job holds, proven in the
/// transport handshake by a challenge and an HMAC (never sent itself).
///
///     client                                         server
///       hello {version, name, zone, nonce_c}  -->
///                                             <--  hello_reply {accepted, nonce_s,
///                                                   HMAC(token, server | transcript)}
///       (checks the server's proof)
///       auth {HMAC(token, client | transcript)} -->
///                                                  (checks the client's proof; only now
///                                                   is the connection accepted)
///
/// The transcript holds both nonces, both names and the client's zone, so a proof cannot be
/// replayed on another connection or under another name. Without a token on both sides the
/// handshake is the plain hello / hello_reply (tests, trusted networks); a side with a token
/// refuses a side without one. Nothing is encrypted: see docs/distributed.md for which networks the
/// transports may face.

#include <string>
#include <string_view>

#include "sailor/config/error.hpp"

namespace sailor::comm {

/// The environment variable a token is read from when no file is given.
inline constexpr const char* token_environment_variable = "SAILOR_TOKEN";

/// The token of this process: the first line of `token_file` when it is not empty, else the
/// value of SAILOR_TOKEN, else an empty string (no authentication). Errors name the file
/// and what was wrong (unreadable, empty, control characters, longer than 4096 bytes).
result<std::string> load_job_token(const std::string& token_file);

/// A digest of `token` that may be written down (the coordinator's journal keeps it, to know
/// its job again): "sha256:" and 64 hex digits of SHA-256 over a label and the token. Empty
/// for an empty token (no authentication).
std::string token_digest(std::string_view token);

/// A fresh token: 32 random bytes from the system's generator, as 64 hex digits.
std::string generate_job_token();

/// Whether `text` is valid UTF-8 (no overlong forms, no surrogates) without control
/// characters: what a peer may announce as a name, shown in logs and JSON.
bool is_printable_utf8(std::string_view text);

}  // namespace sailor::comm
