#include "child_process.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace sailor::app {

using clock_type = std::chrono::steady_clock;

// A child process: sailor-node in its own process group (Ctrl-C reaches the demo, which
// stops it), killed if the demo dies, output to `log`.
pid_t spawn(const std::vector<std::string>& argv_strings, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : argv_strings)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t parent = getpid();
  // Signals blocked across the fork: the child inherits this process's handlers (local_cluster
  // writes SIGINT/SIGTERM to a pipe it shares until exec), so a SIGTERM that reached the child
  // before exec would read as Ctrl-C of the parent. The child takes the default actions back
  // before it unblocks them.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = fork();
  if (pid != 0) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return pid;
  }
  // Child: only async-signal-safe calls until exec.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGINT, &default_action, nullptr);
  sigaction(SIGTERM, &default_action, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127);
  setpgid(0, 0);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

std::string tail_of(const std::string& path, std::size_t max_chars) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  if (s.size() > max_chars)
    s = "..." + s.substr(s.size() - max_chars);
  return s;
}

// Reaps children that exited; returns the first that exited (if any) since the last call.
child* reap(std::vector<child>& children) {
  child* first = nullptr;
  for (auto& c : children) {
    if (c.pid <= 0 || c.exit_code != -1)
      continue;
    int st = 0;
    if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
      c.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      if (!first)
        first = &c;
    }
  }
  return first;
}

// Waits (bounded) for the children to leave by themselves, then SIGTERM, then SIGKILL.
void stop_children(std::vector<child>& children, std::chrono::milliseconds grace) {
  auto all_done = [&] {
    reap(children);
    for (auto& c : children)
      if (c.pid > 0 && c.exit_code == -1)
        return false;
    return true;
  };
  auto wait_until = [&](clock_type::time_point deadline) {
    while (!all_done() && clock_type::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});  // polling child exits
    return all_done();
  };
  if (wait_until(clock_type::now() + grace))
    return;
  for (auto& c : children)
    if (c.pid > 0 && c.exit_code == -1)
      kill(c.pid, SIGTERM);
  if (wait_until(clock_type::now() + std::chrono::seconds{2}))
    return;
  for (auto& c : children)
    if (c.pid > 0 && c.exit_code == -1)
      kill(c.pid, SIGKILL);
  for (auto& c : children)
    if (c.pid > 0 && c.exit_code == -1) {
      int st = 0;
      waitpid(c.pid, &st, 0);
      c.exit_code = 137;
    }
}

}  // namespace sailor::app
