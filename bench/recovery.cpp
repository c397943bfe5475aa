// Recovery from the survivors' memory (issue 12): how long from a kill to the next completed
// iteration, split into its steps, and how fast the state moves.
//
//  1. `sailor demo --nodes 4 --zones 2 --preempt-at K` (2 stages of 2 replicas; the kill takes
//     one replica of stage 1; the next plan is 1 stage of 3 replicas and takes every layer
//     from the survivors' memory), --runs times, the profile measured once and reused.
//     Printed per run, from the summary JSON:
//       detection   kill -> the supervisor noticed the loss (the demo's recovery_s minus the
//                   supervisor's total)
//       planning    noticed -> next plan assigned (releasing the survivors, their state
//                   reports, the planner)
//       rendezvous  assigned -> every rank set up (peers probed, communicators, model built)
//       transfer    set up -> every rank restored (state fetched over the transport from
//                   the survivors' memory into memory, checked and loaded into the tensors)
//       first it.   restored -> the first iteration completed on every rank
//     and the bytes of state restored with their rate over the transfer step (a lower bound
//     on the transport's share: the step includes checking and loading the state; bytes a
//     node held itself count too).
//     Then the same for `--preempt-at 5 --preempt-stage --checkpoint-every 2`: both replicas
//     of stage 1 killed; their layers come from the newest checkpoint whose shards have a
//     live copy on a node of stage 0 (each writer copies the shards it writes there).
//  2. The state transfer itself, for the tiny model's state (2.63 MB, median of 9) and at
//     --state-bytes (default about an OPT-350M stage's state, 1.5 GB, one run): one shard
//     served from a node's memory (memory_shards + shard_server) and fetched into memory with
//     fetch_into_memory (over comm's TCP transport, no file: what a rank of the next plan
//     does) from one holder, then from two holders at once (two replicas of the stage: one
//     half from each; a shard under 8 MiB comes whole from one), and, for comparison, with
//     fetch_shards to a state folder (what a checkpoint on another node still takes),
//     against the same bytes sent as one tensor over one connection of the same transport
//     (the transport's throughput for one message of that size).
//
//   build/bench/recovery [--runs 3] [--state-bytes 1500000000] [--skip-demo] [--skip-transfer]
//
// The transfer is measured in rounds (9 for the tiny state, 3 at --state-bytes), each of the
// transport's own send and the three fetches one after another; each fetch's figure is the
// median of its rounds' ratios to the same round's send. Nov 27, session 13 (load 7.5-8, two
// runs): 1.5 GB into memory from 1 holder 97% / 105% of the transport (rounds 93-277% /
// 90-116%), from 2 holders 125% / 106%, to the state folder 25% / 27%. Target 70% with one
// holder: met. (Two holders gain little on one loopback: both are served by this machine's
// 2 cores.)
// The figures below, taken one measurement after another rather than in rounds, moved with
// the load (one holder from 45% to 116%), which is why the rounds.
// Measured on the shared 2-core machine (other builds running, load 8-10), Nov 2026, state
// fetched into memory (no file written or read), three runs minutes apart, ratios within one
// run (the load moves the transport's own figure by 2x between runs: noisy):
//   1.5 GB: transport 2.57 / 2.25 / 2.77 s (0.58 / 0.67 / 0.54 GB/s); into memory from 1
//   holder 5.14 / 2.96 / 2.38 s = 50% / 76% / 116% of it; from 2 holders at once 2.19 / 2.26 /
//   1.98 s = 118% / 100% / 140%; to the state folder from 1 holder 7.48 / 7.07 / 6.08 s = 34% /
//   32% / 45% (the old path of the survivors' state).
//   Tiny model's state (2.63 MB, medians of 9): into memory 1 holder 52% / 108% / 108% of the
//   transport (3-5 ms each: the request's round trip and the handshake weigh).
//   Target 70% with one holder: met in 2 runs of 3; the fetch figure excludes the restore's
//   checksum pass and its copy into the tensors (the demo's transfer step includes them).
//   Demo, three sessions of --runs 3 (load 8-17): kill -> next completed iteration medians
//   0.416 / 0.883 / 0.612 s (target < 1 s); runs 0.51-0.88 s but one of 4.42 s whose planning
//   step took 3.05 s (not looked into); transfer step 0.08-0.18 s for 7.97 MB restored (3 ranks x
//   2.66 MB, most of it from the ranks' own nodes' memory); 0 iterations lost, replicas.
//   Whole stage by SIGKILL (Nov 2026, session 11, load 7.5-11.7, 3 runs): kill -> next
//   completed iteration 0.129 / 0.174 / 0.130 s, state from the checkpoint after iteration 2,
//   3 iterations run again each time (the kill lands after iteration 5; the copy of the
//   checkpoint after 4 is still on its way then: a copy starts once the write is done, seen at
//   the next iteration's end). 0 bytes: the demo's nodes share one state folder, so the file is
//   found on disk; across hosts (tests/train_netns, namespaces) the same restore fetched
//   3.97 MB over the transport. Before the copies: state_source none, every completed
//   iteration run again (5 here).
//   Replica kill in the same session: 0.261 / 0.226 / 0.414 s, 0 lost, replicas.
//   A node that goes silent (its link cut, no reset: not something `sailor demo` can do, so
//   measured by tests/train_netns, network namespaces, heartbeat timeout 3 s, peer timeout
//   20 s, the supervisor's state wait 5 s; Nov 27, session 12, load 7-8): cut -> the next
//   plan's first completed iteration 3.49 / 3.51 / 3.73 / 3.69 s, the survivors' state
//   reports 0.24-0.36 s after the loss was noticed, state from replicas, 0 iterations run
//   again. Before the abort on release (the same build with the abort left out, 2 runs):
//   the survivors were still blocked in the iteration when the state wait ended, 0 of 2
//   reported; resumed 5.07 / 5.16 s after noticing (about 8.1 s after the cut) from the
//   checkpoint, 1 iteration run again. With heartbeat and peer timeouts both 10 s: 10.19 s,
//   the heartbeat timeout's (the release and the peer timeout come together).
//     build/tests/sailor_integration_tests -tc='*noticed long before the peer timeout*'
// Earlier (Nov 2026, before the state went into memory): kill -> next completed iteration
// 0.23-0.33 s at lower load; fetch_shards to the state folder 37-78% of the transport from one
// holder, 83-173% from two.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sailor/actors/runtime.hpp"
#include "sailor/train/shard_service.hpp"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

struct split {
  double total = 0, detection = 0, planning = 0, setup = 0, restore = 0, first = 0;
  std::int64_t bytes = 0;
  int lost = -1;
  std::string source;
};

bool demo_run(const fs::path& work, const std::string& preemption, int run, split& out) {
  const auto summary = work / ("summary-" + std::to_string(run) + ".json");
  const std::string cmd = std::string(SAILOR_BIN_DIR) + "/sailor demo --nodes 4 --zones 2 " +
                          "--iterations 8 " + preemption + " --planner even --model " SAILOR_SOURCE_DIR
                          "/configs/models/tiny.yaml --job " SAILOR_SOURCE_DIR
                          "/configs/jobs/tiny.yaml --profile " +
                          (work / "profile.json").string() + " --summary-json " +
                          summary.string() + " > " + (work / "demo.log").string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "run %d: sailor demo failed (log: %s)\n", run,
                 (work / "demo.log").c_str());
    return false;
  }
  std::ifstream in(summary);
  auto j = nlohmann::json::parse(in);
  if (j["recovery"].empty() || j["recovery_s"].empty())
    return false;
  const auto& r = j["recovery"][0];
  out.total = j["recovery_s"][0].get<double>();
  out.detection = out.total - r["total_s"].get<double>();
  out.planning = r["planning_s"].get<double>();
  out.setup = r["setup_s"].get<double>();
  out.restore = r["restore_s"].get<double>();
  out.first = r["first_iteration_s"].get<double>();
  out.bytes = r["bytes_restored"].get<std::int64_t>();
  out.lost = j["lost_iterations"].get<int>();
  out.source = j["state_source"].get<std::string>();
  return true;
}

// `runs` demos preempted as `preemption` says (sailor demo's options), described by `what`.
void demo_scenario(const fs::path& work, const std::string& preemption, const char* what,
                   int runs) {
  std::printf("tiny model (218k parameters), sailor demo --nodes 4 --zones 2 %s, %s:\n",
              preemption.c_str(), what);
  std::printf("  run  kill->next it.  detection  planning  rendezvous  transfer  first it.  "
              "bytes      MB/s (transfer step)  lost  source\n");
  std::vector<double> totals;
  for (int k = 0; k < runs; ++k) {
    split s;
    if (!demo_run(work, preemption, k, s))
      continue;
    totals.push_back(s.total);
    std::printf("  %3d  %12.3f s  %7.3f s  %6.3f s  %8.3f s  %6.3f s  %7.3f s  %9lld  %8.1f"
                "              %4d  %s\n",
                k + 1, s.total, s.detection, s.planning, s.setup, s.restore, s.first,
                static_cast<long long>(s.bytes), s.restore > 0 ? s.bytes / s.restore / 1e6 : 0.0,
                s.lost, s.source.c_str());
    std::fflush(stdout);
  }
  if (!totals.empty()) {
    std::sort(totals.begin(), totals.end());
    std::printf("  median kill -> next completed iteration: %.3f s over %zu runs (target < 1 s)\n",
                totals[totals.size() / 2], totals.size());
  }
}

void demo_bench(int runs) {
  const fs::path work = fs::temp_directory_path() / ("sailor-recovery-bench-" + std::to_string(::getpid()));
  fs::create_directories(work);
  demo_scenario(work, "--preempt-at 3", "kill of one replica of a DP=2 stage", runs);
  demo_scenario(work, "--preempt-at 5 --preempt-stage --checkpoint-every 2",
                "kill of both replicas of stage 1 (its checkpoint from the copies on stage 0; "
                "the nodes share a state folder here, so no copy crosses the transport)",
                runs);
  fs::remove_all(work);
}

// One tensor of `bytes` over a fresh connection of `transport` to `listener_of`: seconds from
// the send to its arrival.
double raw_send(sailor::comm::transport& sender, sailor::comm::transport& receiver,
                const std::vector<std::byte>& bytes) {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false, arrived = false;
  auto listener = receiver.listen(sailor::comm::address{"127.0.0.1", 0},
                                  [&](const sailor::comm::connection_ptr&) {
                                    sailor::comm::connection_handlers h;
                                    h.on_tensor = [&](sailor::comm::tensor_descriptor,
                                                      sailor::comm::payload_buffer) {
                                      std::lock_guard lock{mu};
                                      arrived = true;
                                      cv.notify_all();
                                    };
                                    return h;
                                  });
  if (!listener)
    return -1;
  sailor::comm::connection_handlers h;
  h.on_open = [&] {
    std::lock_guard lock{mu};
    open = true;
    cv.notify_all();
  };
  auto conn = sender.connect((*listener)->local_address(), h);
  if (!conn)
    return -1;
  std::unique_lock lock{mu};
  if (!cv.wait_for(lock, std::chrono::seconds{10}, [&] { return open; }))
    return -1;
  lock.unlock();
  sailor::comm::tensor_descriptor desc;
  desc.type = sailor::comm::dtype::u8;
  desc.shape = {static_cast<std::int64_t>(bytes.size())};
  const auto start = clock_type::now();
  (*conn)->send_tensor(desc, bytes, [](const sailor::comm::op_status&) {});
  lock.lock();
  const bool ok = cv.wait_for(lock, std::chrono::seconds{300}, [&] { return arrived; });
  const double s = seconds_since(start);
  lock.unlock();
  (*conn)->close();
  return ok ? s : -1;
}

double median(std::vector<double> v) {
  if (v.empty())
    return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "min-max" of ratios as percentages.
std::string range_of(const std::vector<double>& ratios) {
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  return std::to_string(static_cast<int>(100 * *lo + 0.5)) + "-" +
         std::to_string(static_cast<int>(100 * *hi + 0.5)) + "%";
}

void transfer_bench(std::int64_t state_bytes, const char* what, int runs) {
  auto server_t = sailor::actors::make_transport("tcp", "holder", "local-a", "bench-token");
  auto client_t = sailor::actors::make_transport("tcp", "fetcher", "local-a", "bench-token");
  auto second_t = sailor::actors::make_transport("tcp", "holder-2", "local-a", "bench-token");
  if (!server_t || !client_t || !second_t) {
    std::fprintf(stderr, "no TCP transport\n");
    return;
  }
  std::vector<std::byte> state(static_cast<std::size_t>(state_bytes));
  for (std::size_t k = 0; k < state.size(); k += 4096)
    state[k] = static_cast<std::byte>(k / 4096);
  const std::string path = "checkpoints/bench/mem/iter-00000001/shard.ckpt";
  // Two holders of the same shard (two replicas of a stage), each serving it from memory.
  auto memory = std::make_shared<sailor::train::memory_shards>();
  memory->put(path, state);
  auto memory2 = std::make_shared<sailor::train::memory_shards>();
  memory2->put(path, state);  // `state` itself stays for the transport's own sends
  const fs::path dir = fs::temp_directory_path() / ("sailor-recovery-fetch-" + std::to_string(::getpid()));
  auto server = sailor::train::shard_server::start(**server_t, "127.0.0.1", dir.string() + "-holder", memory);
  auto server2 = sailor::train::shard_server::start(**second_t, "127.0.0.1", dir.string() + "-holder-2", memory2);
  if (!server || !server2) {
    std::fprintf(stderr, "shard server: %s\n", (server ? server2 : server).error().message.c_str());
    return;
  }
  const double gb = static_cast<double>(state_bytes) / 1e9;
  std::printf("\nstate transfer of %s, %.4f GB (one shard from nodes' memory, TCP transport on "
              "loopback, medians of %d rounds):\n", what, gb, runs);
  const std::vector<sailor::train::shard_source> one{{path, (*server)->address()}};
  const std::vector<sailor::train::shard_source> two{{path, (*server)->address()},
                                                     {path, (*server2)->address()}};
  // Into memory, as a rank of the next plan restores the survivors' state (no file).
  auto into_memory = [&](const std::vector<sailor::train::shard_source>& sources) {
    std::int64_t fetched = 0;
    const auto start = clock_type::now();
    auto got = sailor::train::fetch_into_memory(**client_t, sources, std::chrono::seconds{300}, &fetched);
    const double s = seconds_since(start);
    if (!got || fetched != state_bytes) {
      std::fprintf(stderr, "fetch: %s\n", got ? "short" : got.error().message.c_str());
      return -1.0;
    }
    return s;
  };
  // To the state folder, as a checkpoint on another node is fetched (for comparison).
  auto to_disk = [&](const std::vector<sailor::train::shard_source>& sources) {
    std::int64_t fetched = 0;
    const auto start = clock_type::now();
    auto err = sailor::train::fetch_shards(**client_t, dir.string(), sources,
                                           std::chrono::seconds{300}, &fetched);
    const double s = seconds_since(start);
    fs::remove_all(dir);
    if (err) {
      std::fprintf(stderr, "fetch: %s\n", err->message.c_str());
      return -1.0;
    }
    return s;
  };
  // Rounds interleave the four measurements, and each fetch is compared with the transport's
  // own send of the same round: on this shared machine the load moves a single figure by 3x
  // between minutes, so only ratios taken side by side mean anything.
  const char* names[] = {"into memory, 1 holder", "into memory, 2 holders at once",
                         "to the state folder (a checkpoint), 1 holder"};
  std::vector<double> raws;
  std::vector<std::vector<double>> seconds(3), ratios(3);
  for (int k = 0; k < runs; ++k) {
    const double r = raw_send(**client_t, **server_t, state);
    const double got[] = {into_memory(one), into_memory(two), to_disk(one)};
    if (r < 0)
      continue;
    raws.push_back(r);
    for (int m = 0; m < 3; ++m)
      if (got[m] > 0) {
        seconds[m].push_back(got[m]);
        ratios[m].push_back(r / got[m]);
      }
  }
  const double raw = median(raws);
  std::printf("  transport, one tensor message                       %7.3f s  %6.2f GB/s\n", raw,
              gb / raw);
  for (int m = 0; m < 3; ++m)
    if (!ratios[m].empty())
      std::printf("  %-50s  %7.3f s  %6.2f GB/s  = %3.0f%% of the transport (median of the rounds' "
                  "ratios, %s)\n",
                  names[m], median(seconds[m]), gb / median(seconds[m]), 100.0 * median(ratios[m]),
                  range_of(ratios[m]).c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recovery from the survivors' memory: time split and state transfer rate"};
  int runs = 3;
  std::int64_t state_bytes = 1500000000;
  bool skip_demo = false, skip_transfer = false;
  app.add_option("--runs", runs, "demo runs");
  app.add_option("--state-bytes", state_bytes, "bytes of the state transfer measurement");
  app.add_flag("--skip-demo", skip_demo, "only the state transfer");
  app.add_flag("--skip-transfer", skip_transfer, "only the demo runs");
  CLI11_PARSE(app, argc, argv);
  if (!skip_demo)
    demo_bench(runs);
  if (!skip_transfer) {
    // The tiny model's state (218,496 parameters, AdamW: 3 x 4 bytes each, plus the header).
    transfer_bench(2630000, "the tiny model's state", 9);
    transfer_bench(state_bytes, "an OPT-350M-sized stage's state", 3);
  }
  return 0;
}
