#include "sailor/train/shard_service.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "sailor/config/log.hpp"
#include "sailor/train/checkpoint_files.hpp"
#include "state/shard_wire.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

using namespace shard_wire;


bool servable_path(const std::string& path) {
  const fs::path p{path};
  if (path.empty() || p.is_absolute() || path.size() > 4096)
    return false;
  auto part = p.begin();
  if (part == p.end() || *part != "checkpoints")
    return false;
  for (; part != p.end(); ++part)
    if (*part == ".." || *part == ".")
      return false;
  return true;
}

bool handover_path(const std::string& path) {
  if (!servable_path(path))
    return false;
  const fs::path p{path};
  auto part = p.begin();
  // checkpoints / <job> / mem / <iteration> / <shard>
  for (int k = 0; k < 2 && part != p.end(); ++k)
    ++part;
  return part != p.end() && *part == "mem" && std::distance(part, p.end()) == 3;
}

bool shard_copy_path(const std::string& path) {
  if (!servable_path(path))
    return false;
  // checkpoints / <job> / <folder> / <iteration> / <shard>
  const fs::path p{path};
  return std::distance(p.begin(), p.end()) == 5 &&
         detail::iterations_of_folder(p.parent_path().filename().string()) > 0;
}

result<memory_shards::bytes_ptr> read_shard_file(const std::string& state_dir,
                                                 const std::string& path) {
  if (!servable_path(path))
    return failure("not a checkpoint path: '" + path + "'");
  std::ifstream in(fs::path{state_dir} / path, std::ios::binary);
  if (!in)
    return failure("no such shard: " + path);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    return failure("reading " + path + " failed");
  auto* p = reinterpret_cast<const std::byte*>(chars.data());
  return std::make_shared<const std::vector<std::byte>>(p, p + chars.size());
}

struct shard_server::impl : std::enable_shared_from_this<shard_server::impl> {
  std::string state_dir;
  std::shared_ptr<memory_shards> memory;
  shard_server::request_hold hold;
  std::shared_ptr<const shard_access> access;  // null: every token holder may ask anything
  std::unique_ptr<comm::listener> listener;
  std::string address;

  // Empty when the peer at `conn` may fetch `path`; else the reason, logged and sent back.
  std::string refuse_fetch(const comm::connection_ptr& conn, const std::string& path) const {
    if (!access)
      return {};
    auto why = access->may_fetch(conn->peer().name, path);
    if (!why.empty()) {
      log::get("train")->warn("[shards {}] {} asked for {}: refused: {}", address,
                              conn->peer().name, path, why);
      conn->send_control(bytes_of(std::string{error_prefix} + "refused: " + why), {});
    }
    return why;
  }

  // Runs on the transport's thread: a request names one file; the reply is the file.
  void serve(const comm::connection_ptr& conn, const std::vector<std::byte>& request) {
    const auto text = text_of(request);
    if (text.rfind(stat_prefix, 0) == 0 || text.rfind(range_prefix, 0) == 0) {
      serve_part(conn, text);
      return;
    }
    if (text.rfind(get_prefix, 0) != 0) {
      conn->send_control(bytes_of(std::string{error_prefix} + "unknown request"), {});
      return;
    }
    const std::string path = text.substr(get_prefix.size());
    if (!refuse_fetch(conn, path).empty() || (hold && hold(path)))
      return;
    if (auto held = memory ? memory->get(path) : nullptr) {
      comm::tensor_descriptor desc;
      desc.type = comm::dtype::u8;
      desc.shape = {static_cast<std::int64_t>(held->size())};
      desc.name = path;
      conn->send_tensor(desc, *held, [held](const comm::op_status&) {});
      return;
    }
    auto contents = read_shard_file(state_dir, path);
    if (!contents) {
      log::get("train")->warn("[shards {}] {} asked for {}: {}", address, conn->peer().name,
                              path, contents.error().message);
      conn->send_control(bytes_of(std::string{error_prefix} + contents.error().message), {});
      return;
    }
    auto data = std::move(*contents);
    comm::tensor_descriptor desc;
    desc.type = comm::dtype::u8;
    desc.shape = {static_cast<std::int64_t>(data->size())};
    desc.name = path;
    // `data` lives until the send is done.
    conn->send_tensor(desc, *data, [data](const comm::op_status&) {});
  }

  // "stat <path>": its size ("size <n>"); "range <offset> <length> <path>": those bytes of
  // it (a fetching rank splits a shard several nodes hold among them).
  void serve_part(const comm::connection_ptr& conn, const std::string& text) {
    const bool stat = text.rfind(stat_prefix, 0) == 0;
    std::uint64_t offset = 0, length = 0;
    std::string path;
    if (stat) {
      path = text.substr(stat_prefix.size());
    } else {
      std::istringstream in{text.substr(range_prefix.size())};
      in >> offset >> length;
      in.get();
      std::getline(in, path, '\0');
    }
    if (!refuse_fetch(conn, path).empty() || (hold && hold(path)))
      return;
    memory_shards::bytes_ptr held = memory ? memory->get(path) : nullptr;
    if (!held) {
      auto contents = read_shard_file(state_dir, path);
      if (!contents) {
        conn->send_control(bytes_of(std::string{error_prefix} + contents.error().message), {});
        return;
      }
      held = std::move(*contents);
    }
    if (stat) {
      conn->send_control(bytes_of(std::string{size_prefix} + std::to_string(held->size())), {});
      return;
    }
    if (offset > held->size() || length > held->size() - offset) {
      conn->send_control(bytes_of(std::string{error_prefix} + "range out of " + path), {});
      return;
    }
    comm::tensor_descriptor desc;
    desc.type = comm::dtype::u8;
    desc.shape = {static_cast<std::int64_t>(length)};
    desc.name = path;
    conn->send_tensor(desc, std::span<const std::byte>{held->data() + offset, length},
                      [held](const comm::op_status&) {});
  }

  // Runs on the transport's thread: a leaving peer hands over a shard of its memory.
  void store(const comm::connection_ptr& conn, const comm::tensor_descriptor& desc,
             const comm::payload_buffer& payload) {
    const auto& path = desc.name;
    std::string why;
    if (!memory)
      why = "this node keeps no state in memory";
    else if (!shard_copy_path(path))
      why = "not a path of a shard: '" + path + "'";
    else if (access)
      why = access->may_hand_over(conn->peer().name, path);
    const auto bytes = payload.bytes();
    if (why.empty()) {
      constexpr auto unbounded = std::numeric_limits<std::int64_t>::max();
      why = memory->hold_from(conn->peer().name, path,
                              std::vector<std::byte>(bytes.begin(), bytes.end()),
                              access ? access->budget_per_peer() : unbounded,
                              access ? access->max_held_bytes() : unbounded);
    }
    if (!why.empty()) {
      log::get("train")->warn("[shards {}] {} handed over {}: refused: {}", address,
                              conn->peer().name, path, why);
      conn->send_control(bytes_of(std::string{error_prefix} + "refused: " + why), {});
      return;
    }
    conn->send_control(bytes_of(stored_reply), {});
    log::get("train")->info("[shards {}] holds {} ({} bytes) {} by {}", address, path,
                            bytes.size(), handover_path(path) ? "handed over" : "copied",
                            conn->peer().name);
    memory->handed_over(path, static_cast<std::int64_t>(bytes.size()));
  }

};

result<std::unique_ptr<shard_server>> shard_server::start(comm::transport& transport,
                                                          const std::string& host,
                                                          std::string state_dir,
                                                          std::shared_ptr<memory_shards> memory,
                                                          request_hold hold,
                                                          std::shared_ptr<const shard_access> access) {
  std::unique_ptr<shard_server> self{new shard_server};
  self->impl_ = std::make_shared<impl>();
  self->impl_->state_dir = std::move(state_dir);
  self->impl_->memory = std::move(memory);
  self->impl_->hold = std::move(hold);
  self->impl_->access = std::move(access);
  std::weak_ptr<impl> weak = self->impl_;
  auto on_accept = [weak](const comm::connection_ptr& conn) {
    comm::connection_handlers h;
    std::weak_ptr<comm::connection> wconn = conn;
    h.on_control = [weak, wconn](std::vector<std::byte> bytes) {
      auto me = weak.lock();
      auto c = wconn.lock();
      if (me && c)
        me->serve(c, bytes);
    };
    h.on_tensor = [weak, wconn](comm::tensor_descriptor desc, comm::payload_buffer payload) {
      auto me = weak.lock();
      auto c = wconn.lock();
      if (me && c)
        me->store(c, desc, payload);
    };
    return h;
  };
  auto listener = transport.listen(comm::address{host, 0}, on_accept);
  if (!listener)
    return listener.error();
  self->impl_->listener = std::move(*listener);
  self->impl_->address = self->impl_->listener->local_address().to_string();
  log::get("train")->info("[shards {}] serving {}/checkpoints", self->impl_->address,
                          self->impl_->state_dir);
  return self;
}

shard_server::~shard_server() {
  if (impl_ && impl_->listener)
    impl_->listener->close();
}

std::string shard_server::address() const { return impl_->address; }

}  // namespace sailor::train
