#pragma once
// Helpers of the dashboard tests: an HTTP client of the coordinator's dashboard, the address
// a process printed, and headless Chromium (Debian's chromium-headless-shell) loading a page.

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <string>

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
