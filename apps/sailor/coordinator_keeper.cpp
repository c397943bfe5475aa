// `sailor coordinator --keep-checkpoints`: the job's checkpoints kept where the coordinator
// runs (train/checkpoint_keeper.hpp), so that they outlive every node.
#include <cstdio>
#include <filesystem>

#include "coordinator_parts.hpp"
#include "exit_codes.hpp"

namespace sailor::app {

int start_keeper(const coordinator_args& args, const coordinator_inputs& in,
                 const std::string& token, actors::supervisor_options& supervisor) {
  if (!args.keep_checkpoints)
    return exit_done;
  if (args.train_dir.empty()) {
    std::fprintf(stderr, "sailor coordinator: --keep-checkpoints needs --train-dir (the "
                         "checkpoints go under it)\n");
    return exit_bad_input;
  }
  train::checkpoint_keeper_options o;
  o.state_dir = (std::filesystem::absolute(args.train_dir) / "kept").string();
  o.host = in.listen.host;
  o.timeout = std::chrono::milliseconds{static_cast<std::int64_t>(args.peer_timeout_s * 1000)};
  auto keeper = actors::start_checkpoint_keeper(args.transport, token, o, args.tls);
  if (!keeper) {
    std::fprintf(stderr, "sailor coordinator: --keep-checkpoints: %s\n",
                 keeper.error().to_string().c_str());
    return exit_bad_input;
  }
  supervisor.keeper = *keeper;
  std::printf("sailor coordinator: keeping the job's checkpoints in %s (served on %s)\n",
              o.state_dir.c_str(), supervisor.keeper->address().c_str());
  return exit_done;
}

}  // namespace sailor::app
