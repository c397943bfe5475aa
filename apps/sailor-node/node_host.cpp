// What a node learns of the machine it runs on: the address peers reach it on, its devices,
// its state folder and the checkpoint shards there (see node_host.hpp).
#include "node_host.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "sailor/comm/cuda.hpp"
#include "sailor/train/checkpoint.hpp"
#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"

namespace sailor::node {

// The address of this machine's interface that routes to host:port (a UDP socket connected
// there: nothing is sent). Empty when the host does not resolve or no route exists.
std::string local_address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return {};
  std::string out;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      out = text;
  }
  if (fd >= 0)
    ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

// The address peers reach this node on: --advertise, or the interface towards the coordinator.
result<std::string> advertised_address(const std::string& advertise, const std::string& host,
                                       std::uint16_t port) {
  auto out = advertise.empty() ? local_address_towards(host, port) : advertise;
  if (out.empty())
    return sailor::error{error_kind::invalid_input,
                         "cannot tell which address of this machine reaches " + host + ":" +
                           std::to_string(port) +
                           "; name it with --advertise HOST",
                         "", 0, "--advertise"};
  return out;
}

// The checkpoint shards under `state_dir` (relative paths), at most `limit` of them, each of
// at most the protocol's bound (a longer path is not one Sailor wrote): the join request
// stays under its size ceiling.
std::vector<std::string> held_shards(const std::string& state_dir, std::size_t limit) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root = fs::path{state_dir} / "checkpoints";
  for (fs::recursive_directory_iterator i{root, ec}, end; !ec && i != end && out.size() < limit;
       i.increment(ec)) {
    const auto name = i->path().filename().string();
    if (!i->is_regular_file(ec) || name.rfind("shard-", 0) != 0 || name.size() <= 5 ||
        name.substr(name.size() - 5) != ".ckpt")
      continue;
    // A corrupt shard is not offered: the job resumes from an older checkpoint instead.
    if (auto bad = train::verify_checkpoint_shard(i->path().string())) {
      log::get("train")->warn("[state {}] skipping checkpoint shard {}: {}", state_dir,
                              i->path().string(), *bad);
      continue;
    }
    auto relative = i->path().lexically_relative(state_dir).string();
    if (relative.size() <= protocol::wire_bounds::shard_path_bytes)
      out.push_back(std::move(relative));
  }
  return out;
}

namespace {

// The first folder CACHE/node-HOST-K no running node holds, made and held by this process:
// the lock's descriptor stays open (on purpose, never closed) until the process exits.
result<std::string> claim_state_slot() {
  constexpr int slots = 256;
  for (int k = 0; k < slots; ++k) {
    const auto dir = files::cache_folder() / ("node-" + host_name() + "-" + std::to_string(k));
    if (auto err = files::make_private_folder(dir))
      return sailor::error{error_kind::invalid_input, err->message, "", 0, "--state-dir"};
    const auto lock = dir / ".lock";
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, files::private_file_mode);
    if (fd < 0)
      return sailor::error{error_kind::invalid_input, lock.string() + ": " + std::strerror(errno), "", 0,
                           "--state-dir"};
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
      return dir.string();
    ::close(fd);  // held by a node that runs: the next slot
  }
  return sailor::error{error_kind::invalid_input,
                       "all " + std::to_string(slots) + " default state folders under " +
                         files::cache_folder().string() + " are held by running nodes; give one",
                       "", 0, "--state-dir"};
}

}  // namespace

result<std::string> make_state_dir(const std::string& state_dir, const std::string& name, bool named) {
  if (state_dir.empty() && !named)
    return claim_state_slot();
  const std::string dir = state_dir.empty() ? (files::cache_folder() / name).string() : state_dir;
  if (auto err = files::make_private_folder(dir))
    return sailor::error{error_kind::invalid_input, err->message, "", 0, "--state-dir"};
  return dir;
}

namespace {

sailor::error refuse_devices(error_kind kind, const std::string& message) {
  return sailor::error{kind, message, "", 0, "--devices"};
}

// The CUDA devices `text` asks for (`requested` of them, or all for -1), each with its memory
// as the CUDA runtime reports it. Refused with the reason when this build has no CUDA, the
// machine has no usable GPU (no driver, no device), or the node could not train on them.
result<std::vector<protocol::device_info>> cuda_devices(const std::string& text, int requested) {
  if (!comm::cuda_built())
    return refuse_devices(error_kind::invalid_input,
                          "this sailor-node was built without CUDA (no CUDA toolkit and NCCL when it "
                          "was configured): it cannot run on '" + text + "'; give cpu:N, or use a "
                          "build with CUDA");
  auto available = comm::cuda_device_count();
  if (!available)
    return refuse_devices(error_kind::not_found, "'" + text + "' asks for CUDA devices, but this machine has "
                                                 "none usable: " + available.error().message + "; give cpu:N");
  if (requested > *available)
    return refuse_devices(error_kind::not_found, "'" + text + "' asks for " + std::to_string(requested) +
                                                 " CUDA devices, this machine has " + std::to_string(*available));
#if defined(SAILOR_WITH_TRAIN) && !defined(SAILOR_WITH_TORCH_CUDA)
  return refuse_devices(error_kind::invalid_input,
                        "this machine has " + std::to_string(*available) + " CUDA device(s), but this "
                        "sailor-node's LibTorch is CPU only: it cannot train on '" + text + "'; give "
                        "cpu:N, or use a build with a CUDA-enabled LibTorch");
#endif
  const int count = requested < 0 ? *available : requested;
  std::vector<protocol::device_info> out;
  for (int k = 0; k < count; ++k) {
    auto memory = comm::cuda_memory_info(k);
    if (!memory) return refuse_devices(error_kind::failed, memory.error().message);
    out.push_back(protocol::device_info{k, "cuda", memory->total_bytes});
  }
  return out;
}

}  // namespace

// Devices from "cpu:N" or "cuda:all" / "cuda:N" (N devices, numbered from 0).
result<std::vector<protocol::device_info>> parse_devices(const std::string& text,
                                                       std::string& default_type) {
  std::smatch m;
  // At most 5 digits: std::stoi below cannot overflow.
  static const std::regex pattern{R"(^(cpu|cuda):(all|[0-9]{1,5})$)"};
  if (!std::regex_match(text, m, pattern))
    return sailor::error{error_kind::invalid_input,
                         "expected cpu:N, cuda:N or cuda:all, got '" + text + "'", "", 0,
                         "--devices"};
  const std::string kind = m[1];
  const bool all = m[2] == "all";
  if (kind == "cuda") {
    // The machine is asked first: on one without a GPU, cuda:0 is refused for that reason.
    auto devices = cuda_devices(text, all ? -1 : std::stoi(m[2]));
    if (devices && devices->empty())
      return refuse_devices(error_kind::not_found, "'" + text + "' asks for no device (cuda:N is a "
                                                   "count: give cuda:1 or more, or cuda:all)");
    if (devices) default_type = "GPU";
    return devices;
  }
  const int count = all ? static_cast<int>(std::thread::hardware_concurrency()) : std::stoi(m[2]);
  if (count <= 0)
    return refuse_devices(error_kind::not_found, "no " + kind + " devices found");
  auto pages = sysconf(_SC_PHYS_PAGES);
  auto page = sysconf(_SC_PAGE_SIZE);
  const std::uint64_t memory = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page / count : 0;
  default_type = "CPU";
  std::vector<protocol::device_info> out;
  for (int k = 0; k < count; ++k)
    out.push_back(protocol::device_info{k, kind, memory});
  return out;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace sailor::node
