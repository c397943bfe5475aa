#pragma once
// Helpers of the dashboard tests: an HTTP client of the coordinator's dashboard, the address
// a process printed (and the process that printed it), and headless Chromium (Debian's chromium-headless-shell) loading a page.

#include <httplib.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "run_command.hpp"

namespace sailor::testing {

struct http_reply {
  int status = 0;  ///< 0: no answer
  std::string body;
  std::string content_type;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

class dashboard_client {
public:
  explicit dashboard_client(int port) : client_("127.0.0.1", port) {
    client_.set_connection_timeout(2, 0);
    client_.set_read_timeout(5, 0);
  }
  http_reply get(const std::string& path) { return reply(client_.Get(path.c_str())); }
  http_reply post(const std::string& path) {
    return reply(client_.Post(path.c_str(), "x", "text/plain"));
  }
  /// The JSON of a 200 answer; null when there was none.
  nlohmann::json json(const std::string& path) {
    auto r = get(path);
    return r.status == 200 ? r.json() : nlohmann::json{};
  }

private:
  static http_reply reply(const httplib::Result& res) {
    http_reply out;
    if (!res)
      return out;
    out.status = res->status;
    out.body = res->body;
    out.content_type = res->get_header_value("Content-Type");
    return out;
  }
  httplib::Client client_;
};

/// The port of the first "dashboard on http://127.0.0.1:PORT/" a child printed, waiting up to
/// `limit`; 0 when none.
inline int dashboard_port(const child& c, std::chrono::milliseconds limit) {
  static const std::regex printed{R"(dashboard on http://127\.0\.0\.1:([0-9]+)/)"};
  std::smatch m;
  std::string out;
  if (!eventually(limit, [&] {
        out = c.out();
        return std::regex_search(out, m, printed);
      }))
    return 0;
  return std::stoi(m[1]);
}

/// A process that serves the dashboard (a coordinator or a demo given --dashboard
/// 127.0.0.1:0), its output in `dir` as NAME.out and NAME.err, and the port it printed within
/// `limit` (0: none).
class dashboard_child : public child {
public:
  dashboard_child(const std::vector<std::string>& argv, const temp_dir& dir, const std::string& name,
                  std::chrono::milliseconds limit)
    : child(argv, dir.path(name + ".out"), dir.path(name + ".err")),
      web_port(dashboard_port(*this, limit)) {}
  /// Both of its streams, for INFO: what a failed check is read with.
  std::string output() const { return "stdout:\n" + out() + "\nstderr:\n" + err(); }

  const int web_port;
};

/// The command line of `sailor demo` with `options`, serving the dashboard on a free port of
/// 127.0.0.1 and holding it `hold_s` seconds after training (a test ends the hold with SIGTERM).
inline std::vector<std::string> demo_with_dashboard_argv(std::vector<std::string> options, int hold_s) {
  options.insert(options.begin(), {sailor_bin(), "demo"});
  for (std::string more : {"--dashboard", "127.0.0.1:0", "--dashboard-hold"})
    options.push_back(more);
  options.push_back(std::to_string(hold_s));
  return options;
}

/// False once the child has exited (a zombie not yet reaped counts as exited).
inline bool running(const child& c) {
  std::ifstream stat("/proc/" + std::to_string(c.pid()) + "/stat");
  std::string pid, name, state;
  stat >> pid >> name >> state;
  return stat && state != "Z";
}

inline std::string chromium_binary() {
  for (const char* path : {"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"})
    if (::access(path, X_OK) == 0)
      return path;
  return {};
}

/// Whether the environment says to skip browser checks (SAILOR_SKIP_BROWSER=1): a browser
/// test on a machine without Chromium is then reported skipped instead of failing.
inline bool browser_skip_allowed() {
  const char* v = std::getenv("SAILOR_SKIP_BROWSER");
  return v != nullptr && std::string{v} == "1";
}

/// Counts the failed assertions of this test executable (a doctest listener), so that a
/// test can end as skipped only when nothing it did check failed.
struct failure_counter : doctest::IReporter {
  explicit failure_counter(const doctest::ContextOptions&) {}
  static std::atomic<int>& failed() {
    static std::atomic<int> n{0};
    return n;
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override { ++failed(); }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& a) override { failed() += a.m_failed ? 1 : 0; }
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("failure_counter", 1, failure_counter);

/// The start of a browser test: true with Chromium. Without it the test fails, unless
/// SAILOR_SKIP_BROWSER=1: then false, and the caller runs what needs no browser and ends with
/// end_as_skipped().
inline bool require_browser() {
  if (!chromium_binary().empty())
    return true;
  if (!browser_skip_allowed())
    FAIL("chromium-headless-shell is not installed (scripts/install-deps.sh installs it); "
         "set SAILOR_SKIP_BROWSER=1 to report this test as skipped instead");
  MESSAGE("no Chromium and SAILOR_SKIP_BROWSER=1: the browser checks are skipped");
  return false;
}

/// Ends a browser test that ran without a browser: skipped (exit 77, see tests/CMakeLists.txt)
/// when nothing else it checked failed; failed otherwise.
inline void end_as_skipped(const std::string& what) {
  REQUIRE(failure_counter::failed() == 0);
  std::printf("skipped: %s (no Chromium, SAILOR_SKIP_BROWSER=1)\n", what.c_str());
  std::fflush(stdout);
  std::exit(77);
}

/// Loads `url` in headless Chromium, lets its scripts run for `budget_ms` of virtual time
/// (network fetches are real), and returns the DOM; with `screenshot`, also saves a PNG.
inline std::string chromium_dom(const std::string& url, int budget_ms,
                                const std::string& screenshot = "") {
  const std::string flags = " --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=" +
                            std::to_string(budget_ms) + " --window-size=1400,1500 ";
  auto dom = run_command(chromium_binary() + flags + "--dump-dom '" + url + "'", 60);
  if (!screenshot.empty())
    run_command(chromium_binary() + flags + "--screenshot=" + screenshot + " '" + url + "'", 60);
  return dom.out;
}

/// The value of `attribute` of the element with id `id` in a DOM dump ("" when absent).
inline std::string dom_attribute(const std::string& dom, const std::string& id,
                                 const std::string& attribute) {
  std::smatch m;
  const std::regex element{"<[a-z]+ [^>]*id=\"" + id + "\"[^>]*>"};
  if (!std::regex_search(dom, m, element))
    return {};
  std::smatch a;
  const std::string tag = m[0];
  const std::regex value{attribute + "=\"([^\"]*)\""};
  return std::regex_search(tag, a, value) ? std::string{a[1]} : std::string{};
}

}  // namespace sailor::testing
