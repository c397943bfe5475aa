#include "auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "sailor/comm/auth.hpp"

namespace sailor::comm {
namespace detail {
namespace {

// Each field with its length first, so that no two transcripts concatenate alike.
void append_field(std::vector<unsigned char>& out, const void* data, std::size_t size) {
  std::uint32_t n = static_cast<std::uint32_t>(size);
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<unsigned char>(n >> (8 * i)));
  auto* p = static_cast<const unsigned char*>(data);
  out.insert(out.end(), p, p + size);
}

}  // namespace

std::vector<std::byte> random_nonce() {
  std::vector<std::byte> out(nonce_bytes);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) != 1)
    throw std::runtime_error("the system's random generator failed");  // nothing is safe then
  return out;
}

std::vector<std::byte> handshake_proof(std::string_view token, proof_role role,
                                       std::span<const std::byte> client_nonce,
                                       std::span<const std::byte> server_nonce,
                                       std::string_view client_name, std::string_view client_zone,
                                       std::string_view server_name) {
  std::vector<unsigned char> transcript;
  std::string_view label = role == proof_role::server ? "sailor handshake: server"
                                                      : "sailor handshake: client";
  append_field(transcript, label.data(), label.size());
  append_field(transcript, client_nonce.data(), client_nonce.size());
  append_field(transcript, server_nonce.data(), server_nonce.size());
  append_field(transcript, client_name.data(), client_name.size());
  append_field(transcript, client_zone.data(), client_zone.size());
  append_field(transcript, server_name.data(), server_name.size());
  std::vector<std::byte> out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), transcript.data(),
       transcript.size(), reinterpret_cast<unsigned char*>(out.data()), &len);
  out.resize(len);
  return out;
}

bool proofs_match(std::span<const std::byte> expected, std::span<const std::byte> got) {
  return expected.size() == got.size() && !expected.empty() &&
         CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

}  // namespace detail

result<std::string> load_job_token(const std::string& token_file) {
  auto bad = [&](const std::string& why) {
    return sailor::error::invalid_input(token_file, "--token-file", why);
  };
  std::string token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) return bad("cannot read the token file");
    std::getline(in, token);
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (token.empty()) return bad("the token file's first line is empty");
  } else if (const char* env = std::getenv(token_environment_variable)) {
    token = env;
  }
  if (token.size() > 4096)
    return bad("the token is longer than 4096 bytes");
  for (char c : token)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return bad("the token holds a control character");
  return token;
}

bool is_printable_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    std::size_t extra = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 0;
    if (extra == 0 || i + extra >= text.size()) return false;
    std::uint32_t cp = c & (0x3f >> extra);
    for (std::size_t k = 1; k <= extra; ++k) {
      auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[extra] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    if (cp >= 0x80 && cp < 0xa0) return false;  // C1 controls
    i += extra + 1;
  }
  return true;
}

namespace {

// `n` bytes as lowercase hex digits, two a byte.
std::string hex_text(const std::byte* p, std::size_t n) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(hex[static_cast<unsigned>(p[i]) >> 4]);
    out.push_back(hex[static_cast<unsigned>(p[i]) & 15]);
  }
  return out;
}

}  // namespace

std::string token_digest(std::string_view token) {
  if (token.empty())
    return {};
  static constexpr std::string_view label = "sailor job token digest\n";
  std::string text{label};
  text.append(token);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return "sha256:" + hex_text(reinterpret_cast<const std::byte*>(md), len);
}

std::string generate_job_token() {
  const auto bytes = detail::random_nonce();
  return hex_text(bytes.data(), bytes.size());
}

}  // namespace sailor::comm
