// GPT-2's pre-tokenizer and byte-to-character table (see bpe.hpp).
#include "sailor/models/bpe.hpp"

namespace sailor::models {
namespace {

struct code_point {
  std::uint32_t value = 0;
  std::size_t offset = 0;  // in bytes
};

// The code points of `text`; a byte that starts no valid UTF-8 sequence is one code point of
// its own (U+FFFD's class: neither letter, digit nor space).
std::vector<code_point> code_points(std::string_view text) {
  std::vector<code_point> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    const std::size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = len > 0 && i + len <= text.size();
    std::uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1f) : len == 3 ? (b & 0x0f) : (b & 0x07);
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      valid = (c >> 6) == 2;
      cp = (cp << 6) | (c & 0x3f);
    }
    out.push_back({valid ? cp : 0xfffd, i});
    i += valid ? len : 1;
  }
  return out;
}

bool is_space(std::uint32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

bool is_digit(std::uint32_t c) {
  return (c >= '0' && c <= '9') || c == 0xb2 || c == 0xb3 || c == 0xb9 || (c >= 0xbc && c <= 0xbe) ||
         (c >= 0x660 && c <= 0x669) || (c >= 0x6f0 && c <= 0x6f9) || (c >= 0x966 && c <= 0x96f) ||
         (c >= 0xff10 && c <= 0xff19);
}

// Neither letter, digit nor space: ASCII punctuation and controls, Latin-1's symbols, general
// and CJK punctuation, the symbol blocks and emoji.
bool is_other(std::uint32_t c) {
  if (c < 0x80)
    return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || is_space(c));
  if (c < 0xc0)
    return c != 0xaa && c != 0xb5 && c != 0xba && !is_digit(c) && !is_space(c);
  return c == 0xd7 || c == 0xf7 || (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205e) ||
         (c >= 0x20a0 && c <= 0x20cf) || (c >= 0x2100 && c <= 0x2bff) || (c >= 0x3001 && c <= 0x303f) ||
         (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff01 && c <= 0xff0f) || (c >= 0xff1a && c <= 0xff20) ||
         (c >= 0xff3b && c <= 0xff40) || (c >= 0xff5b && c <= 0xff65) || (c >= 0x1f000 && c <= 0x1faff) ||
         c == 0xfffd;
}

bool is_letter(std::uint32_t c) { return !is_space(c) && !is_digit(c) && !is_other(c); }

// The length (in code points) of a contraction 's 't 're 've 'm 'll 'd at `i`; 0: none.
std::size_t contraction_at(const std::vector<code_point>& cps, std::size_t i) {
  if (cps[i].value != '\'' || i + 1 >= cps.size())
    return 0;
  const auto a = cps[i + 1].value;
  const auto b = i + 2 < cps.size() ? cps[i + 2].value : 0;
  if (a == 's' || a == 't' || a == 'm' || a == 'd')
    return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
    return 3;
  return 0;
}

// The end of the piece that starts at code point `i` (the pattern's alternatives in order).
std::size_t piece_end(const std::vector<code_point>& cps, std::size_t i) {
  const std::size_t n = cps.size();
  if (auto len = contraction_at(cps, i))
    return i + len;
  const std::size_t j = cps[i].value == ' ' && i + 1 < n ? i + 1 : i;
  for (auto* cls : {&is_letter, &is_digit, &is_other}) {
    if (!(*cls)(cps[j].value))
      continue;
    std::size_t k = j;
    while (k < n && (*cls)(cps[k].value))
      ++k;
    return k;
  }
  // White space: all of it at the end of the text; else all but its last character, which
  // starts the next piece (a space joins the word after it); a single one alone.
  std::size_t k = i;
  while (k < n && is_space(cps[k].value))
    ++k;
  if (k == n || k - i == 1)
    return k;
  return k - 1;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  const auto cps = code_points(text);
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < cps.size();) {
    const std::size_t end = piece_end(cps, i);
    const std::size_t from = cps[i].offset;
    const std::size_t to = end < cps.size() ? cps[end].offset : text.size();
    pieces.push_back(text.substr(from, to - from));
    i = end;
  }
  return pieces;
}

// bytes_to_unicode: the printable bytes ('!'..'~', 0xa1..0xac, 0xae..0xff) stand for
// themselves; the others, in byte order, for U+0100 onwards.
std::string gpt2_byte_char(unsigned char b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  std::uint32_t cp = b;
  if (!printable) {
    cp = 256;
    for (int k = 0; k < b; ++k) {
      const bool p = (k >= '!' && k <= '~') || (k >= 0xa1 && k <= 0xac) || k >= 0xae;
      cp += p ? 0 : 1;
    }
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

int gpt2_char_byte(std::string_view utf8_char) {
  static const auto table = [] {
    std::unordered_map<std::string, int> t;
    for (int b = 0; b < 256; ++b)
      t[gpt2_byte_char(static_cast<unsigned char>(b))] = b;
    return t;
  }();
  auto it = table.find(std::string(utf8_char));
  return it == table.end() ? -1 : it->second;
}

}  // namespace sailor::models
