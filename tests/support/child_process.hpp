#pragma once
// A child process for integration tests (output in files, killed and reaped on destruction)
// and a bounded poll for another process's state.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sailor::testing {

using namespace std::chrono;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Starts `argv` (argv[0] a path) with its standard output and error in the files `out` and
/// `err`, emptied first, or appended to with `append`; the child's pid, or -1.
inline pid_t spawn_with_output(const std::vector<std::string>& argv, const std::string& out,
                               const std::string& err, bool append = false) {
  const int flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), flags, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), flags, 0644);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// A child process with its output in files; killed (SIGKILL) and reaped on destruction.
class child {
public:
  child(const std::vector<std::string>& argv, const std::string& out, const std::string& err)
    : pid_(spawn_with_output(argv, out, err)), out_(out), err_(err) {}
  ~child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }
  /// Waits for the exit, bounded; returns the exit code or -1.
  int wait_exit(milliseconds limit) {
    auto deadline = steady_clock::now() + limit;
    while (steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);  // sleep override: polls a child's exit (no fd to wait on), bounded by the deadline
    }
    return -1;
  }
  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_, err_;
};

// Polls `ready` every 20 ms until it holds or `limit` passes.
inline bool eventually(milliseconds limit, const std::function<bool()>& ready) {
  auto deadline = steady_clock::now() + limit;
  while (steady_clock::now() < deadline) {
    if (ready())
      return true;
    std::this_thread::sleep_for(20ms);  // sleep override: polls another process's state, bounded by `limit`
  }
  return ready();
}

/// The port a coordinator printed that it listens on ("listening on HOST:PORT", on its
/// standard output or error), or "" when it printed none within `limit`. The default is
/// generous: starting the program (it loads LibTorch) took over 10 s on a loaded 2-core
/// machine.
inline std::string listening_port(const child& coordinator, const std::string& host = "127.0.0.1",
                                  milliseconds limit = 60s) {
  const std::regex listening{"listening on " + std::regex_replace(host, std::regex{R"(\.)"}, R"(\.)") +
                             ":([0-9]+)"};
  std::smatch m;
  std::string text;
  if (!eventually(limit, [&] {
        text = coordinator.out() + coordinator.err();
        return std::regex_search(text, m, listening);
      }))
    return "";
  return m[1].str();
}

}  // namespace sailor::testing
