#pragma once
// `sailor demo`'s text: the English quotes of Debian's fortunes-min package (installed by
// scripts/install-deps.sh), joined into one corpus. No download: the package ships them.
#include <filesystem>
#include <string>
#include <vector>

#include "sailor/config/error.hpp"

namespace sailor::app {

/// The quote files the corpus is joined from, in order.
std::vector<std::filesystem::path> fortunes_files();

/// One quote file's text as the corpus holds it: the '%' lines between quotes become blank
/// lines and the overstrike sequences (a character, then a backspace) of a few quotes are
/// dropped.
std::string clean_fortunes(const std::string& text);

/// Writes the joined corpus to `out`. An error names a missing file and the package.
status write_fortunes_corpus(const std::filesystem::path& out);

}  // namespace sailor::app
