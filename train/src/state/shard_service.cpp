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
#include "state/shard_fetch.hpp"

namespace sailor::train {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view get_prefix = "get ";
constexpr std::string_view error_prefix = "error ";
constexpr std::string_view stored_reply = "stored";
constexpr std::string_view stat_prefix = "stat ";
constexpr std::string_view range_prefix = "range ";
constexpr std::string_view size_prefix = "size ";

std::vector<std::byte> bytes_of(std::string_view text) {
  auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

std::string text_of(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

sailor::error failure(const std::string& what) {
  return sailor::error{error_kind::failed, what, "", 0, ""};
}

}  // namespace

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

void memory_shards::set_handover_listener(handover_listener listener) {
  std::lock_guard lock{mu_};
  listener_ = std::move(listener);
}

void memory_shards::handed_over(const std::string& path, std::int64_t bytes) const {
  handover_listener listener;
  {
    std::lock_guard lock{mu_};
    listener = listener_;
  }
  if (listener)
    listener(path, bytes);
}

void memory_shards::put(const std::string& path, std::vector<std::byte> bytes, int keep) {
  const fs::path p{path};
  const auto folder = p.parent_path().parent_path().string();
  std::lock_guard lock{mu_};
  held_[path] = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  // The iteration folders of `folder`, newest first: those after the newest `keep` go.
  std::set<std::string, std::greater<>> iterations;
  for (const auto& [k, v] : held_)
    if (fs::path{k}.parent_path().parent_path().string() == folder)
      iterations.insert(fs::path{k}.parent_path().filename().string());
  std::set<std::string> gone;
  int n = 0;
  for (const auto& it : iterations)
    if (++n > keep)
      gone.insert(it);
  std::erase_if(held_, [&](const auto& kv) {
    const fs::path k{kv.first};
    return k.parent_path().parent_path().string() == folder &&
           gone.count(k.parent_path().filename().string()) > 0;
  });
}

memory_shards::bytes_ptr memory_shards::get(const std::string& path) const {
  std::lock_guard lock{mu_};
  auto i = held_.find(path);
  return i == held_.end() ? nullptr : i->second;
}

std::size_t memory_shards::bytes() const {
  std::lock_guard lock{mu_};
  std::size_t n = 0;
  for (const auto& [k, v] : held_)
    n += v->size();
  return n;
}

struct shard_server::impl : std::enable_shared_from_this<shard_server::impl> {
  std::string state_dir;
  std::shared_ptr<memory_shards> memory;
  std::unique_ptr<comm::listener> listener;
  std::string address;

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
    if (auto held = memory ? memory->get(path) : nullptr) {
      comm::tensor_descriptor desc;
      desc.type = comm::dtype::u8;
      desc.shape = {static_cast<std::int64_t>(held->size())};
      desc.name = path;
      conn->send_tensor(desc, *held, [held](const comm::op_status&) {});
      return;
    }
    auto contents = read(path);
    if (!contents) {
      log::get("train")->warn("[shards {}] {} asked for {}: {}", address, conn->peer().name,
                              path, contents.error().message);
      conn->send_control(bytes_of(std::string{error_prefix} + contents.error().message), {});
      return;
    }
    auto data = std::make_shared<std::vector<std::byte>>(std::move(*contents));
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
    memory_shards::bytes_ptr held = memory ? memory->get(path) : nullptr;
    if (!held) {
      auto contents = read(path);
      if (!contents) {
        conn->send_control(bytes_of(std::string{error_prefix} + contents.error().message), {});
        return;
      }
      held = std::make_shared<const std::vector<std::byte>>(std::move(*contents));
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
    else if (!handover_path(path))
      why = "not a path of in-memory state: '" + path + "'";
    if (!why.empty()) {
      log::get("train")->warn("[shards {}] {} handed over {}: refused: {}", address,
                              conn->peer().name, path, why);
      conn->send_control(bytes_of(std::string{error_prefix} + why), {});
      return;
    }
    const auto bytes = payload.bytes();
    memory->put(path, std::vector<std::byte>(bytes.begin(), bytes.end()));
    conn->send_control(bytes_of(stored_reply), {});
    log::get("train")->info("[shards {}] holds {} ({} bytes) handed over by {}", address, path,
                            bytes.size(), conn->peer().name);
    memory->handed_over(path, static_cast<std::int64_t>(bytes.size()));
  }

  result<std::vector<std::byte>> read(const std::string& path) const {
    if (!servable_path(path))
      return failure("not a checkpoint path: '" + path + "'");
    std::ifstream in(fs::path{state_dir} / path, std::ios::binary);
    if (!in)
      return failure("no such shard: " + path);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto* p = reinterpret_cast<const std::byte*>(chars.data());
    return std::vector<std::byte>(p, p + chars.size());
  }
};

result<std::unique_ptr<shard_server>> shard_server::start(comm::transport& transport,
                                                          const std::string& host,
                                                          std::string state_dir,
                                                          std::shared_ptr<memory_shards> memory) {
  std::unique_ptr<shard_server> self{new shard_server};
  self->impl_ = std::make_shared<impl>();
  self->impl_->state_dir = std::move(state_dir);
  self->impl_->memory = std::move(memory);
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
result<comm::payload_buffer> ask(comm::transport& transport, const std::string& holder,
                                 const std::string& request, std::chrono::milliseconds timeout,
                                 std::int64_t* size = nullptr) {
  auto where = comm::address::parse(holder);
  if (!where)
    return where.error();
  auto call = std::make_shared<fetch_call>();
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
                                       std::chrono::milliseconds timeout) {
  return ask(transport, src.holder, std::string{get_prefix} + src.path, timeout);
}

}  // namespace

status hand_over_shard(comm::transport& transport, const std::string& holder,
                       const std::string& path, memory_shards::bytes_ptr bytes,
                       std::chrono::milliseconds timeout) {
  if (!bytes || !handover_path(path))
    return failure("refusing to hand over '" + path + "': not in-memory state");
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
  fs::create_directories(target.parent_path(), ec);
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
                                                      std::chrono::milliseconds timeout) {
  std::int64_t size = -1;
  std::string why;
  for (const auto& holder : from) {
    auto r = ask(transport, holder, std::string{stat_prefix} + path, timeout, &size);
    if (r && size >= 0)
      break;
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
      threads.emplace_back([&, k] { parts[k] = ask(transport, from[k], range(k), timeout); });
    for (auto& t : threads)
      t.join();
  }
  std::vector<comm::payload_buffer> out;
  for (std::size_t k = 0; k < n; ++k) {
    const auto want = static_cast<std::size_t>(begin(k + 1) - begin(k));
    for (std::size_t other = 1; other < from.size() && !(*parts[k] && (*parts[k])->size() == want); ++other)
      parts[k] = ask(transport, from[(k + other) % from.size()], range(k), timeout);
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
                                                     std::chrono::milliseconds timeout) {
  std::string why;
  std::vector<std::string> distinct;
  for (const auto& holder : from)
    if (std::find(distinct.begin(), distinct.end(), holder) == distinct.end())
      distinct.push_back(holder);
  if (distinct.size() > 1) {
    auto split = fetch_split(transport, path, distinct, timeout);
    if (split && !split->empty())
      return split;
    if (!split)
      why = "in parts: " + split.error().message;
  }
  for (const auto& holder : distinct) {
    auto bytes = fetch_one(transport, {path, holder}, timeout);
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

}  // namespace sailor::train
