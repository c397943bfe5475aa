// What a job leaves on disk is its user's alone (issue 36, item 6): the coordinator's train
// folder, the token it generates, a node's state folder (checkpoint shards) and its log are
// 0600 files in 0700 folders, whatever umask the processes were started with; the generated
// token is in a file whose path is printed, never on stdout or in a log.

// Built only with LibTorch (the node trains and writes checkpoints).
#if __has_include(<sailor/models/shapes.hpp>)

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "local_job.hpp"

// Its own namespace: the integration tests are compiled in unity batches.
namespace integration_private_files {

using namespace std::chrono;
using namespace sailor::testing;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat s {};
  return ::stat(p.c_str(), &s) == 0 ? (s.st_mode & 0777) : 0xffff;
}

// Every folder under `root` (and `root`) is 0700 and every file 0600; returns how many files.
int check_private_tree(const fs::path& root) {
  INFO(root.string());
  CHECK(mode_of(root) == 0700);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    INFO(entry.path().string());
    if (entry.is_directory()) {
      CHECK(mode_of(entry.path()) == 0700);
    } else {
      CHECK(mode_of(entry.path()) == 0600);
      ++files;
    }
  }
  return files;
}

// Restores the umask on scope exit.
struct umask_scope {
  explicit umask_scope(mode_t m) : old(::umask(m)) {}
  ~umask_scope() { ::umask(old); }
  mode_t old;
};

}  // namespace

TEST_CASE("private files: train folder, generated token, checkpoints and logs are 0600 in 0700 folders") {
  temp_dir dir;
  // A permissive umask, inherited by the processes started: they must not rely on it.
  umask_scope permissive{022};
  const auto train = dir.path("train");
  std::unique_ptr<child> coordinator;
  // No --token-file and no SAILOR_TOKEN: the coordinator generates the token.
  ::unsetenv("SAILOR_TOKEN");
  const auto port = start_listening(coordinator,
                                    training_coordinator_argv("127.0.0.1:0", train, 1, 4,
                                                              {"--checkpoint-every", "1", "--transport", "tcp"}),
                                    dir.path("c"));
  const auto token_file = train + "/job-token";
  REQUIRE(fs::exists(token_file));
  const auto token = slurp(token_file).substr(0, slurp(token_file).find('\n'));
  REQUIRE(token.size() >= 16);
  CHECK(coordinator->out().find(token_file) != std::string::npos);  // where it is, said
  child node{node_argv("127.0.0.1:" + port, "n1", "local-a",
                       {"--token-file", token_file, "--state-dir", dir.path("state/n1"), "--log-dir",
                        dir.path("logs")}),
             dir.path("node.out"), dir.path("node.err")};
  const int code = coordinator->wait_exit(120s);
  INFO(coordinator->out());
  INFO(coordinator->err());
  INFO(node.err());
  REQUIRE(code == 0);
  node.wait_exit(30s);
  CHECK(mode_of(token_file) == 0600);
  CHECK(check_private_tree(train) >= 1);
  CHECK(check_private_tree(dir.path("state/n1")) >= 1);  // the node's checkpoint shards
  CHECK(check_private_tree(dir.path("logs")) == 1);      // n1.log
  // The token is in its file only.
  CHECK(coordinator->out().find(token) == std::string::npos);
  CHECK(coordinator->err().find(token) == std::string::npos);
  CHECK(node.err().find(token) == std::string::npos);
  CHECK(slurp(dir.path("logs/n1.log")).find(token) == std::string::npos);
}

}  // namespace integration_private_files
#endif
