// Does a crowd of open dashboards slow training? Runs `sailor demo` in pairs with the same
// arguments, alternating: once with nobody watching, once with N clients that each poll what
// the page polls (status, plan, events, metrics since the last point) every 500 ms. Prints
// the measured iteration time of each run, the ratio with/without clients (1.00: no
// slowdown) per pair and over all pairs, the requests served and their latency.
//
//   build/bench/dashboard_clients [--clients 50] [--iterations 20] [--nodes 2]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct load_figures {
  std::atomic<long> requests{0};
  std::atomic<long> failures{0};
  std::atomic<long> latency_us{0};
  std::atomic<long> max_latency_us{0};
};

// One page's polling loop until `stop`.
void poll_like_a_page(int port, const std::atomic<bool>& stop, const std::atomic<bool>& demo_done,
                      load_figures& f) {
  httplib::Client client{"127.0.0.1", port};
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  long newest = -1;
  while (!stop) {
    const auto round = clock_type::now();
    const std::string paths[] = {"/api/status", "/api/plan", "/api/events",
                                 "/api/metrics?since=" + std::to_string(newest + 1)};
    for (const auto& path : paths) {
      const auto t0 = clock_type::now();
      auto res = client.Get(path.c_str());
      const long us = static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count());
      if (demo_done)
        break;
      ++f.requests;
      f.latency_us += us;
      long seen = f.max_latency_us;
      while (us > seen && !f.max_latency_us.compare_exchange_weak(seen, us)) {
      }
      if (demo_done)
        break;  // the demo has shut its dashboard down: not a failure
      if (!res || res->status != 200) {
        if (f.failures++ == 0)
          std::fprintf(stderr, "dashboard_clients: %s: %s\n", path.c_str(),
                       res ? ("HTTP " + std::to_string(res->status)).c_str()
                           : httplib::to_string(res.error()).c_str());
        continue;
      }
      if (path.rfind("/api/metrics", 0) == 0)
        newest = std::max(newest, nlohmann::json::parse(res->body).value("newest", -1L));
    }
    std::this_thread::sleep_until(round + std::chrono::milliseconds{500});  // the page's period
  }
}

// Runs the demo; with clients > 0, they poll its dashboard while it trains. Returns its
// summary JSON (empty on failure).
nlohmann::json run_demo(const std::string& sailor, const std::string& args, int clients,
                        load_figures& f) {
  const std::string dir = "/tmp/sailor-bench-dashboard-" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string out = dir + "/demo.out", summary = dir + "/summary.json";
  std::remove(summary.c_str());
  std::remove(out.c_str());  // else the previous run's address could be read
  std::atomic<bool> done{false};
  std::thread demo([&] {
    // Held 2 s after training, so that no client meets a closed dashboard.
    std::system((sailor + " demo " + args + " --dashboard-hold 2 --summary-json " + summary +
                 " > " + out +
                 " 2>&1").c_str());
    done = true;
  });
  std::vector<std::thread> pages;
  std::atomic<bool> stop{false};
  if (clients > 0) {
    // The dashboard's address, from the demo's first lines (bounded).
    const std::regex printed{R"(dashboard on http://127\.0\.0\.1:([0-9]+)/)"};
    int port = 0;
    for (auto deadline = clock_type::now() + std::chrono::seconds{30};
         port == 0 && !done && clock_type::now() < deadline;) {
      std::ifstream in(out);
      std::stringstream s;
      s << in.rdbuf();
      std::smatch m;
      const std::string text = s.str();
      if (std::regex_search(text, m, printed))
        port = std::stoi(m[1]);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds{50});  // polls a file, bounded
    }
    for (int k = 0; k < clients && port > 0; ++k)
      pages.emplace_back(poll_like_a_page, port, std::cref(stop), std::cref(done),
                         std::ref(f));
  }
  // Training is over once the summary is printed: the clients stop before the demo shuts its
  // dashboard down (a request then would fail for that reason alone).
  while (!pages.empty() && !done) {
    std::ifstream in(out);
    std::stringstream s;
    s << in.rdbuf();
    if (s.str().find("sailor demo: done") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});  // polls a file, bounded by the demo
  }
  stop = true;
  demo.join();
  for (auto& p : pages)
    p.join();
  std::ifstream in(summary);
  if (!in) {
    std::fprintf(stderr, "dashboard_clients: the demo failed; its output is in %s\n",
                 out.c_str());
    return {};
  }
  return nlohmann::json::parse(in);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"training speed of `sailor demo` with and without N dashboard clients"};
  int clients = 50, iterations = 20, nodes = 2, repeat = 3;
  std::string sailor = std::string(SAILOR_BIN_DIR) + "/sailor";
  app.add_option("--clients", clients, "dashboard clients polling as the page does");
  app.add_option("--iterations", iterations, "training iterations per run");
  app.add_option("--nodes", nodes, "sailor-node processes");
  app.add_option("--repeat", repeat, "pairs of runs (without, with clients), alternating");
  app.add_option("--sailor", sailor, "the sailor binary");
  CLI11_PARSE(app, argc, argv);
  const std::string args = "--nodes " + std::to_string(nodes) + " --zones 2 --iterations " +
                           std::to_string(iterations);
  load_figures idle, loaded;
  double quiet_sum = 0, busy_sum = 0;
  std::printf("dashboard_clients: demo %s, %d pairs of runs\n", args.c_str(), repeat);
  for (int k = 0; k < repeat; ++k) {
    auto quiet = run_demo(sailor, args, 0, idle);
    auto busy = run_demo(sailor, args, clients, loaded);
    if (quiet.is_null() || busy.is_null())
      return 1;
    const double a = quiet["measured_iteration_s"], b = busy["measured_iteration_s"];
    quiet_sum += a;
    busy_sum += b;
    std::printf("  pair %d: no clients %.4f s/iteration, %d clients %.4f s/iteration, "
                "ratio %.3f\n",
                k + 1, a, clients, b, a > 0 ? b / a : 0.0);
    std::fflush(stdout);
  }
  const double a = quiet_sum / repeat, b = busy_sum / repeat;
  std::printf("  mean:  no clients %.4f s/iteration, %d clients %.4f s/iteration, "
              "ratio %.3f (with/without clients)\n",
              a, clients, b, a > 0 ? b / a : 0.0);
  const long n = std::max(1L, loaded.requests.load());
  std::printf("  requests answered while training: %ld (%ld failed); latency mean %.2f ms, "
              "max %.1f ms\n",
              loaded.requests.load(), loaded.failures.load(),
              static_cast<double>(loaded.latency_us) / n / 1000.0,
              static_cast<double>(loaded.max_latency_us) / 1000.0);
  return 0;
}
