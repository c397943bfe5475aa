// The README's five-minute path runs as written (issue 37, item 8): the commands between the
// README's `five-minutes` markers are parsed out of it and run one after the other in a fresh
// folder, with `build/bin/` and `configs/` pointing at this build and checkout. `make demo`
// is not run again here (it builds into build/ and runs `sailor demo`, which the demo test
// runs); every other line is, and each must succeed.
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_readme_five_minutes {

using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

// The commands of the README's five-minute block: continuation lines joined, comments and
// blank lines dropped.
std::vector<std::string> five_minute_commands() {
  std::ifstream in(std::string(SAILOR_SOURCE_DIR) + "/README.md");
  std::string line, command;
  std::vector<std::string> out;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("<!-- five-minutes:begin -->") != std::string::npos) inside = true;
    if (line.find("<!-- five-minutes:end -->") != std::string::npos) break;
    if (!inside || line.rfind("```", 0) == 0 || line.rfind("<!--", 0) == 0) continue;
    const auto hash = line.find(" #");
    if (hash != std::string::npos) line = line.substr(0, hash);
    line = std::regex_replace(line, std::regex{R"(\s+$)"}, "");
    const bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.pop_back();
    command += line;
    if (continued) continue;
    command = std::regex_replace(command, std::regex{R"(^\s+|\s+$)"}, "");
    if (!command.empty()) out.push_back(command);
    command.clear();
  }
  return out;
}

// `command` as run from `dir`: this build's programs, this checkout's configs.
std::string localized(std::string command) {
  command = std::regex_replace(command, std::regex{R"((^|\s)build/bin/)"}, "$1" SAILOR_BIN_DIR "/");
  return std::regex_replace(command, std::regex{R"((\s)configs/)"},
                            "$1" SAILOR_SOURCE_DIR "/configs/");
}

}  // namespace

TEST_CASE("README: the five-minute path trains on a text file, samples from the run and exports "
          "it, as written") {
  const auto commands = five_minute_commands();
  REQUIRE_MESSAGE(commands.size() >= 3, "the README has no five-minute block");
  temp_dir dir;
  int ran = 0;
  for (const auto& command : commands) {
    if (command == "make demo") continue;
    const auto local = localized(command);
    CAPTURE(local);
    REQUIRE(local.find('\'') == std::string::npos);  // run through sh -c '...'
    auto r = run_command("sh -c 'cd " + dir.root().string() + " && " + local + "'", 400);
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    ++ran;
  }
  CHECK(ran >= 3);
  // What the path promises: a run folder with the trained model, and the exported file.
  CHECK(fs::exists(dir.root() / "my-run" / "model" / "model.safetensors"));
  CHECK(fs::exists(dir.root() / "my-run" / "model" / "vocab.json"));
  CHECK(fs::exists(dir.root() / "my-model.safetensors"));
}

}  // namespace integration_readme_five_minutes
#endif  // __has_include(<sailor/models/shapes.hpp>)
