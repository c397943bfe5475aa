#include "demo_corpus.hpp"

#include <fstream>
#include <sstream>

namespace sailor::app {

std::vector<std::filesystem::path> fortunes_files() {
  const std::filesystem::path dir = "/usr/share/games/fortunes";
  return {dir / "fortunes", dir / "literature", dir / "riddles"};
}

std::string clean_fortunes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\b') {
      // Overstrike: the backspace and the character before it go (not across a line).
      if (out.size() > line_start)
        out.pop_back();
      continue;
    }
    if (c == '\n') {
      // A line holding only '%' separates two quotes: it becomes a blank line.
      if (out.size() == line_start + 1 && out.back() == '%')
        out.pop_back();
      out += '\n';
      line_start = out.size();
      continue;
    }
    out += c;
  }
  if (out.size() == line_start + 1 && out.back() == '%')
    out.pop_back();
  return out;
}

status write_fortunes_corpus(const std::filesystem::path& out) {
  std::string corpus;
  for (const auto& file : fortunes_files()) {
    std::ifstream in(file, std::ios::binary);
    if (!in)
      return sailor::error::invalid_input(
        file.string(), "",
        "missing: the demo trains on the quotes of Debian's fortunes-min "
        "package (scripts/install-deps.sh installs it: apt-get install "
        "fortunes-min), or give --model and --job (for example "
        "configs/models/tiny.yaml and configs/jobs/tiny.yaml, the synthetic "
        "stream)");
    std::stringstream text;
    text << in.rdbuf();
    corpus += clean_fortunes(text.str());
  }
  std::ofstream o(out, std::ios::binary);
  o << corpus;
  if (!o)
    return sailor::error::of(error_kind::failed, out.string(), "",
                             "cannot write the demo's corpus");
  return {};
}

}  // namespace sailor::app
