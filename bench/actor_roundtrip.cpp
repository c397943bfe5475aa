// CAF message round trips: inside one actor system, and across processes through the bridge
// (Cap'n Proto envelopes over comm's UCX and TCP transports).
// The same figures are printed by bench/transport; the measurement is actor_roundtrip.hpp.
//
//   build/bench/actor_roundtrip [--round-trips N]
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "actor_roundtrip.hpp"

int main(int argc, char** argv) {
  CLI::App app{"CAF round trips in one actor system and across processes through the bridge"};
  int n = 2000;
  app.add_option("--round-trips", n, "Round trips per row");
  CLI11_PARSE(app, argc, argv);
  setenv("UCX_NET_DEVICES", "lo", 0);
  // Fork the servers first, while this process has no threads.
  auto servers = sailor::bench::start_echo_servers();
  sailor::bench::print_actor_round_trips(*servers, n);
  return 0;
}
