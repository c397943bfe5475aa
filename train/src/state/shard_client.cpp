// The shard service's client side: a shard fetched from its holders (whole, or in parts
// from several at once), handed over to another node, and a holder probed. The server side is
// shard_service.cpp.
#include "sailor/train/shard_service.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "sailor/config/log.hpp"
#include "sailor/config/private_files.hpp"
#include "state/shard_fetch.hpp"
#include "state/shard_wire.hpp"

namespace sailor::train {

namespace fs = std::filesystem;
using namespace shard_wire;

namespace {

// One file from one holder: the outcome arrives on the transport's thread.
struct fetch_call {
  std::mutex mutex;
  std::condition_variable done;
  bool open = false;
  std::int64_t size = -1;  // a "size <n>" answer
  std::optional<result<comm::payload_buffer>> outcome;

  void opened() {
    {
      std::lock_guard lock{mutex};
      open = true;
    }
    done.notify_all();
  }

  void finish(result<comm::payload_buffer> r) {
    {
      std::lock_guard lock{mutex};
      if (outcome)
        return;
      outcome = std::move(r);
    }
    done.notify_all();
  }
};

// Connects to `where` with `h` (whose handlers settle `call`), sends with `send` once the
// handshake (the job token) is through (a frame before it is refused by the serving side), and
// waits for the answer, all within `timeout`: "" once `call` has its outcome, else what did not
// come in time.
result<std::string> exchange(comm::transport& transport, const comm::address& where,
                             comm::connection_handlers h, fetch_call& call,
                             const std::function<void(comm::connection&)>& send,
                             std::chrono::milliseconds timeout) {
  auto conn = transport.connect(where, std::move(h));
  if (!conn)
    return conn.error();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock{call.mutex};
  if (!call.done.wait_until(lock, deadline, [&] { return call.open || call.outcome.has_value(); })) {
    lock.unlock();
    (*conn)->close();
    return "no handshake within " + std::to_string(timeout.count()) + " ms";
  }
  const bool failed_early = call.outcome.has_value();
  lock.unlock();
  if (!failed_early)
    send(**conn);
  lock.lock();
  const bool answered = call.done.wait_until(lock, deadline, [&] { return call.outcome.has_value(); });
  lock.unlock();
  (*conn)->close();
  return answered ? std::string{} : "no answer within " + std::to_string(timeout.count()) + " ms";
}

// One request to one holder; a "size <n>" answer comes back as an empty buffer and `size`.
// A cancel settles the call at once (the connection then closes).
result<comm::payload_buffer> ask(comm::transport& transport, const std::string& holder,
                                 const std::string& request, std::chrono::milliseconds timeout,
                                 std::int64_t* size = nullptr, fetch_cancel* cancel = nullptr) {
  auto where = comm::address::parse(holder);
  if (!where)
    return where.error();
  auto call = std::make_shared<fetch_call>();
  struct watching {
    fetch_cancel* cancel;
    std::uint64_t key;
    ~watching() {
      if (cancel)
        cancel->unwatch(key);
    }
  } watch{cancel, cancel ? cancel->watch([call](const std::string& why) {
                    call->finish(failure("cancelled: " + why));
                  })
                         : 0};
  comm::connection_handlers h;
  h.on_tensor = [call](comm::tensor_descriptor, comm::payload_buffer payload) {
    call->finish(std::move(payload));  // no copy: written from the buffer
  };
  h.on_control = [call](std::vector<std::byte> bytes) {
    const auto text = text_of(bytes);
    std::int64_t n = -1;
    if (text.rfind(size_prefix, 0) == 0) {
      const auto* first = text.data() + size_prefix.size();
      const auto* last = text.data() + text.size();
      if (auto [end, ec] = std::from_chars(first, last, n); ec != std::errc{} || end != last || n < 0)
        n = -1;
    }
    if (n < 0) {
      call->finish(failure(text));
      return;
    }
    {
      std::lock_guard lock{call->mutex};
      call->size = n;
    }
    call->finish(comm::payload_buffer{});
  };
  h.on_error = [call](const comm::transport_error& e) { call->finish(failure(e.to_string())); };
  h.on_open = [call] { call->opened(); };
  auto waited = exchange(
    transport, *where, std::move(h), *call,
    [&](comm::connection& c) { c.send_control(bytes_of(request), {}); }, timeout);
  if (!waited)
    return waited.error();
  if (!waited->empty())
    return failure(*waited);
  std::lock_guard relock{call->mutex};
  if (size)
    *size = call->size;
  return std::move(*call->outcome);
}

result<comm::payload_buffer> fetch_one(comm::transport& transport, const shard_source& src,
                                       std::chrono::milliseconds timeout,
                                       fetch_cancel* cancel = nullptr) {
  return ask(transport, src.holder, std::string{get_prefix} + src.path, timeout, nullptr, cancel);
}

bool cancelled(const fetch_cancel* cancel) { return cancel && !cancel->reason().empty(); }

}  // namespace

status hand_over_shard(comm::transport& transport, const std::string& holder,
                       const std::string& path, memory_shards::bytes_ptr bytes,
                       std::chrono::milliseconds timeout) {
  if (!bytes || !shard_copy_path(path))
    return failure("refusing to hand over '" + path + "': not a shard of an iteration folder");
  auto where = comm::address::parse(holder);
  if (!where)
    return where.error();
  auto call = std::make_shared<fetch_call>();
  comm::connection_handlers h;
  h.on_control = [call](std::vector<std::byte> reply) {
    const auto text = text_of(reply);
    if (text == stored_reply)
      call->finish(comm::payload_buffer{});
    else
      call->finish(failure(text));
  };
  h.on_error = [call](const comm::transport_error& e) { call->finish(failure(e.to_string())); };
  h.on_open = [call] { call->opened(); };
  auto send = [&](comm::connection& c) {
    comm::tensor_descriptor desc;
    desc.type = comm::dtype::u8;
    desc.shape = {static_cast<std::int64_t>(bytes->size())};
    desc.name = path;
    c.send_tensor(desc, *bytes, [bytes](const comm::op_status&) {});  // `bytes` lives
  };
  auto waited = exchange(transport, *where, std::move(h), *call, send, timeout);
  if (!waited)
    return waited.error();
  if (!waited->empty())
    return failure(holder + ": " + *waited);
  std::lock_guard relock{call->mutex};
  if (!*call->outcome)
    return failure(holder + ": " + call->outcome->error().message);
  return {};
}

status probe_shard_server(comm::transport& transport, const std::string& holder,
                          std::chrono::milliseconds timeout) {
  auto where = comm::address::parse(holder);
  if (!where)
    return where.error();
  auto call = std::make_shared<fetch_call>();
  comm::connection_handlers h;
  h.on_error = [call](const comm::transport_error& e) { call->finish(failure(e.to_string())); };
  h.on_open = [call] { call->opened(); };
  auto conn = transport.connect(*where, h);
  if (!conn)
    return conn.error();
  std::unique_lock lock{call->mutex};
  const bool over = call->done.wait_for(lock, timeout, [&] { return call->open || call->outcome.has_value(); });
  std::optional<sailor::error> why;
  if (!over)
    why = failure("no handshake within " + std::to_string(timeout.count()) + " ms");
  else if (!call->open && call->outcome && !*call->outcome)
    why = call->outcome->error();
  lock.unlock();
  (*conn)->close();
  if (why)
    return *why;
  return {};
}

namespace {

status write_atomically(const fs::path& target,
                        const std::vector<std::span<const std::byte>>& parts) {
  std::error_code ec;
  if (auto err = files::make_private_folder(target.parent_path()))
    return failure(err->message);
  // A name of this fetch alone: ranks of nodes that share a folder (a demo on one machine)
  // may fetch the same file at once; the rename replaces the file atomically either way.
  static std::atomic<std::uint64_t> serial{0};
  const auto temp = target.parent_path() /
                    ("." + target.filename().string() + "." + std::to_string(::getpid()) + "-" +
                     std::to_string(serial++) + ".fetch");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    for (const auto& bytes : parts)
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    if (!out)
      return failure("cannot write " + temp.string());
  }
  if (auto err = files::make_private(temp))
    return failure(err->message);
  fs::rename(temp, target, ec);
  if (ec)
    return failure("cannot rename " + temp.string() + ": " + ec.message());
  return {};
}

// Below this a shard comes whole from one holder: splitting it would cost more round trips
// than it saves.
constexpr std::int64_t split_bytes = std::int64_t{8} << 20;
constexpr std::size_t max_parts = 4;

// A shard several nodes hold: its size from the first that answers, then one contiguous range
// from each of (up to max_parts) holders at once; a range whose holder fails is asked of the
// others in turn. Returns the parts in order; none when the shard is small (it comes whole
// from one holder).
result<std::vector<comm::payload_buffer>> fetch_split(comm::transport& transport,
                                                      const std::string& path,
                                                      const std::vector<std::string>& from,
                                                      std::chrono::milliseconds timeout,
                                                      fetch_cancel* cancel) {
  std::int64_t size = -1;
  std::string why;
  for (const auto& holder : from) {
    auto r = ask(transport, holder, std::string{stat_prefix} + path, timeout, &size, cancel);
    if (r && size >= 0)
      break;
    if (cancelled(cancel))
      return failure("cancelled: " + cancel->reason());
    why += (why.empty() ? "" : "; ") + holder + ": " + (r ? "no size" : r.error().message);
  }
  if (size < 0)
    return failure(why);
  if (size < split_bytes)
    return std::vector<comm::payload_buffer>{};  // small: whole, from one holder
  const std::size_t n = std::min(from.size(), max_parts);
  auto begin = [&](std::size_t k) { return size * static_cast<std::int64_t>(k) / static_cast<std::int64_t>(n); };
  auto range = [&](std::size_t k) {
    return std::string{range_prefix} + std::to_string(begin(k)) + " " +
           std::to_string(begin(k + 1) - begin(k)) + " " + path;
  };
  std::vector<std::optional<result<comm::payload_buffer>>> parts(n);
  {
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < n; ++k)
      threads.emplace_back([&, k] { parts[k] = ask(transport, from[k], range(k), timeout, nullptr, cancel); });
    for (auto& t : threads)
      t.join();
  }
  std::vector<comm::payload_buffer> out;
  for (std::size_t k = 0; k < n; ++k) {
    const auto want = static_cast<std::size_t>(begin(k + 1) - begin(k));
    for (std::size_t other = 1; other < from.size() && !(*parts[k] && (*parts[k])->size() == want) &&
                                !cancelled(cancel);
         ++other)
      parts[k] = ask(transport, from[(k + other) % from.size()], range(k), timeout, nullptr, cancel);
    if (!*parts[k] || (*parts[k])->size() != want)
      return failure("bytes " + std::to_string(begin(k)) + ".." + std::to_string(begin(k + 1)) +
                     " from no holder" + (*parts[k] ? "" : ": " + parts[k]->error().message));
    out.push_back(std::move(**parts[k]));
  }
  log::get("train")->info("[shards] fetched {} ({} bytes) in {} parts from {} holders at once",
                          path, size, n, n);
  return out;
}

}  // namespace

namespace detail {

result<std::vector<comm::payload_buffer>> fetch_from(comm::transport& transport,
                                                     const std::string& path,
                                                     const std::vector<std::string>& from,
                                                     std::chrono::milliseconds timeout,
                                                     fetch_cancel* cancel) {
  std::string why;
  std::vector<std::string> distinct;
  for (const auto& holder : from)
    if (std::find(distinct.begin(), distinct.end(), holder) == distinct.end())
      distinct.push_back(holder);
  if (distinct.size() > 1) {
    auto split = fetch_split(transport, path, distinct, timeout, cancel);
    if (split && !split->empty())
      return split;
    if (!split)
      why = "in parts: " + split.error().message;
  }
  for (const auto& holder : distinct) {
    if (cancelled(cancel))
      return failure("cannot fetch checkpoint shard " + path + ": cancelled: " + cancel->reason());
    auto bytes = fetch_one(transport, {path, holder}, timeout, cancel);
    if (!bytes) {
      why += (why.empty() ? "" : "; ") + holder + ": " + bytes.error().message;
      continue;
    }
    log::get("train")->info("[shards] fetched {} ({} bytes) from {}", path, bytes->size(), holder);
    return std::vector<comm::payload_buffer>{std::move(*bytes)};
  }
  return failure("cannot fetch checkpoint shard " + path + " (" + why + ")");
}

std::int64_t total_size(const std::vector<comm::payload_buffer>& parts) {
  std::int64_t n = 0;
  for (const auto& p : parts)
    n += static_cast<std::int64_t>(p.size());
  return n;
}

}  // namespace detail

status fetch_shards(comm::transport& transport, const std::string& state_dir,
                    const std::vector<shard_source>& sources, std::chrono::milliseconds timeout,
                    std::int64_t* fetched_bytes) {
  std::map<std::string, std::vector<std::string>> holders;  // path -> holders, in order
  for (const auto& s : sources)
    holders[s.path].push_back(s.holder);
  for (const auto& [path, from] : holders) {
    if (!servable_path(path))
      return failure("refusing to fetch '" + path + "': not a checkpoint path");
    const fs::path target = fs::path{state_dir} / path;
    std::error_code ec;
    if (fs::exists(target, ec))
      continue;
    auto parts = detail::fetch_from(transport, path, from, timeout);
    if (!parts)
      return parts.error();
    std::vector<std::span<const std::byte>> spans;
    for (const auto& p : *parts)
      spans.emplace_back(p.data(), p.size());
    if (auto err = write_atomically(target, spans))
      return err;
    if (fetched_bytes)
      *fetched_bytes += detail::total_size(*parts);
  }
  return {};
}

void fetch_cancel::cancel(const std::string& why) {
  std::map<std::uint64_t, std::function<void(const std::string&)>> told;
  {
    std::lock_guard lock{mutex_};
    if (!why_.empty())
      return;
    why_ = why.empty() ? "cancelled" : why;
    told.swap(watching_);
  }
  for (auto& [key, on_cancel] : told)
    on_cancel(why_);
}

std::string fetch_cancel::reason() const {
  std::lock_guard lock{mutex_};
  return why_;
}

std::uint64_t fetch_cancel::watch(std::function<void(const std::string& why)> on_cancel) {
  std::unique_lock lock{mutex_};
  const auto key = next_++;
  if (why_.empty()) {
    watching_.emplace(key, std::move(on_cancel));
    return key;
  }
  const auto why = why_;
  lock.unlock();
  on_cancel(why);
  return key;
}

void fetch_cancel::unwatch(std::uint64_t key) {
  std::lock_guard lock{mutex_};
  watching_.erase(key);
}

}  // namespace sailor::train
