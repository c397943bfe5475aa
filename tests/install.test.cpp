// `cmake --install` (what `make install` runs): the programs and their shipped data under a
// prefix, and the installed sailor runs from anywhere on them alone: its defaults are the
// installed configs/, never a path of the source or build tree (apps/sailor/share_dir.hpp).

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "run_command.hpp"
#include "temp_file.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_install {

using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

const std::string source_dir = std::string(SAILOR_SOURCE_DIR) + "/";
const std::string build_dir = std::string(SAILOR_BUILD_DIR) + "/";

// Installs the build tree under `prefix` (bounded); the failure's output when it fails.
void install_into(const temp_dir& prefix) {
  auto r = run_command("cmake --install " + std::string(SAILOR_BUILD_DIR) + " --prefix " +
                         prefix.root().string(),
                       120);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

// A command line run in `work` with an environment that knows nothing of the build: PATH is
// the prefix's bin/ and the system's, no SAILOR_SHARE_DIR.
std::string installed(const temp_dir& prefix, const temp_dir& work, const std::string& args) {
  return "env -u SAILOR_SHARE_DIR -C " + work.root().string() + " PATH=" +
         (prefix.root() / "bin").string() + ":/usr/bin:/bin sailor " + args;
}

bool fortunes_installed() {
  for (const char* f : {"fortunes", "literature", "riddles"})
    if (!fs::exists(std::string("/usr/share/games/fortunes/") + f)) return false;
  return true;
}

}  // namespace

TEST_CASE("cmake --install puts the programs and the shipped configs under the prefix") {
  temp_dir prefix, work;
  install_into(prefix);
  const auto share = prefix.root() / "share" / "sailor";
  for (const char* program : {"bin/sailor", "bin/sailor-node", "lib/sailor/libsailor_sentencepiece.so"}) {
    INFO(program);
    CHECK(fs::is_regular_file(prefix.root() / program));
  }
  for (const char* file : {"configs/clusters/local-2-zones.yaml", "configs/models/char-fortunes.yaml",
                           "configs/jobs/fortunes-char.yaml", "configs/models/tiny.yaml",
                           "configs/jobs/tiny.yaml", "scripts/make-tls-certs.sh"}) {
    INFO(file);
    CHECK(fs::is_regular_file(share / file));
  }
  // --help shows the installed defaults, nothing of the trees the programs were built in.
  auto help = run_command(installed(prefix, work, "train --help"), 30);
  INFO(help.out);
  INFO(help.err);
  REQUIRE(help.exit_code == 0);
  CHECK(help.out.find((share / "configs/clusters/local-2-zones.yaml").string()) != std::string::npos);
  CHECK(help.out.find(source_dir) == std::string::npos);
  CHECK(help.out.find(build_dir) == std::string::npos);
  auto demo_help = run_command(installed(prefix, work, "demo --help"), 30);
  REQUIRE(demo_help.exit_code == 0);
  CHECK(demo_help.out.find((share / "configs/models/char-fortunes.yaml").string()) != std::string::npos);
  CHECK(demo_help.out.find(source_dir) == std::string::npos);
}

TEST_CASE("sailor finds its shipped data through SAILOR_SHARE_DIR, or says where it looked") {
  temp_dir prefix, work;
  install_into(prefix);
  const auto share = (prefix.root() / "share" / "sailor").string();
  // The build tree's sailor on the installed data.
  auto help = run_command("env SAILOR_SHARE_DIR=" + share + " " + sailor_bin() + " train --help", 30);
  INFO(help.out);
  INFO(help.err);
  REQUIRE(help.exit_code == 0);
  CHECK(help.out.find(share + "/configs/clusters/local-2-zones.yaml") != std::string::npos);
  CHECK(help.out.find(source_dir) == std::string::npos);
  // A share dir that is not one: refused before anything starts, naming the place.
  const auto missing = work.path("no-such-share");
  auto r = run_command("env SAILOR_SHARE_DIR=" + missing + " " + sailor_bin() + " demo --iterations 1", 30);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("$SAILOR_SHARE_DIR") != std::string::npos);
  CHECK(r.err.find(missing + "/configs") != std::string::npos);
  CHECK(r.out.find("iteration ") == std::string::npos);
}

#if defined(SAILOR_WITH_TRAIN)
TEST_CASE("the installed sailor demo trains from another folder on the installed data alone") {
  temp_dir prefix, work;
  install_into(prefix);
  const auto share = (prefix.root() / "share" / "sailor").string();
  // Without fortunes-min the demo's own corpus is missing: the installed tiny job instead.
  const std::string job = fortunes_installed()
                            ? ""
                            : " --model tiny --job " + share + "/configs/jobs/tiny.yaml";
  auto r = run_command(installed(prefix, work,
                                 "demo --nodes 2 --zones 2 --iterations 3 --sample-tokens 20" + job),
                       180);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("sailor demo: done in") != std::string::npos);
  CHECK(r.out.find("iterations completed   3 of 3") != std::string::npos);
  if (job.empty()) CHECK(r.out.find("sample of the trained model") != std::string::npos);
  CHECK(r.out.find(source_dir) == std::string::npos);
  CHECK(r.err.find(source_dir) == std::string::npos);
}
#endif

}  // namespace integration_install
