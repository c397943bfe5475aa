// The lab's hosts (netns_lab.hpp) each have a private, empty /tmp, yet a checkout or build
// under /tmp must stay runnable from them (issue 37, item 5: a checkout under /tmp made the
// network-namespace tests fail). A folder the hosts need is bound back at its own path; the
// rest of the machine's /tmp stays hidden.
//
// Where namespaces cannot be made (not root), the test exits with code 77 (skipped).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "child_process.hpp"
#include "netns_lab.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_netns_lab {

using namespace std::chrono;
using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

// A folder directly under /tmp (whatever TMPDIR says), removed with its contents.
struct tmp_folder {
  fs::path path;
  tmp_folder() {
    std::random_device rd;
    path = fs::path("/tmp") / ("sailor-lab-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~tmp_folder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("netns lab: a folder under /tmp the hosts need stays visible in their private /tmp, "
          "the rest of /tmp does not") {
  netns_lab lab{1};
  skip_without_namespaces(lab);
  tmp_folder program, other;
  const auto marker = other.write("marker", "the machine's /tmp\n");
  const auto script = program.write(
    "check.sh", "#!/bin/sh\n"
                "echo \"ran from $(dirname \"$0\")\"\n"
                "if [ -e '" + marker + "' ]; then echo 'machine /tmp seen'; fi\n"
                "echo private > /tmp/written-in-host\n"
                "cat /tmp/written-in-host\n");
  lab.keep_visible(program.path.string());
  temp_dir out;
  child host{lab.in_host(0, {"/bin/sh", script}), out.path("out"), out.path("err")};
  INFO(host.out() << host.err());
  REQUIRE(host.wait_exit(seconds(30)) == 0);
  CHECK(host.out().find("ran from " + program.path.string()) != std::string::npos);
  CHECK(host.out().find("machine /tmp seen") == std::string::npos);
  CHECK(host.out().find("private") != std::string::npos);
  // What the host wrote to its /tmp stayed in its own.
  CHECK_FALSE(fs::exists("/tmp/written-in-host"));
}

}  // namespace integration_netns_lab
