// Plan-independent checkpoints: the writer (snapshot on the training thread, file written on
// a background thread) and the reader (assembles this rank's slices from any plan's shards).

#include "checkpoint_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include <c10/util/string_utils.h>
#include <nlohmann/json.hpp>

#include <sailor/actors/train/checkpoint.hpp>
#include <sailor/config/log.hpp>

namespace sailor::train::detail {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr char magic[] = "SAILORCKPT1\n";  // 12 bytes without the terminator
constexpr std::size_t magic_bytes = sizeof(magic) - 1;
constexpr int format_version = 1;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

error invalid(const std::string& message) {
  error e;
  e.kind = error_kind::invalid_input;
  e.message = message;
  return e;
}

error failure(const std::string& message) {
  error e;
  e.kind = error_kind::failed;
  e.message = message;
  return e;
}

const char* optimizer_name(optimizer_kind k) { return k == optimizer_kind::adamw ? "adamw" : "sgd"; }

std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "f32";
    case torch::kDouble: return "f64";
    case torch::kHalf: return "f16";
    case torch::kBFloat16: return "bf16";
    default: throw std::invalid_argument("checkpoint: unsupported tensor type");
  }
}

std::optional<torch::ScalarType> dtype_of(const std::string& name) {
  if (name == "f32") return torch::kFloat;
  if (name == "f64") return torch::kDouble;
  if (name == "f16") return torch::kHalf;
  if (name == "bf16") return torch::kBFloat16;
  return std::nullopt;
}

json model_json(const config::model_shape& m) {
  return {{"name", m.name},       {"num_layers", m.num_layers}, {"hidden", m.hidden},
          {"heads", m.heads},     {"kv_heads", m.kv()},         {"ffn", m.ffn()},
          {"sequence", m.sequence}, {"vocabulary", m.vocabulary}};
}

// The file name of the writer `role` of `plan`.
shard_file file_of(const config::plan& plan, const rank_role& role) {
  shard_file f;
  std::ostringstream layout;
  int writers = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& st = plan.stages[s];
    const int tp = std::max(1, st.replicas.empty() ? 1 : st.replicas[0].tp);
    layout << st.first_layer << '-' << st.end_layer() << '/' << tp << ';';
    if (static_cast<int>(s) == role.stage) {
      f.writer = writers + role.tp_rank;
      f.first_layer = st.first_layer;
      f.end_layer = st.end_layer();
      f.tp_rank = role.tp_rank;
      f.tp_size = tp;
    }
    writers += tp;
  }
  f.writers = writers;
  f.group = layout_hash(layout.str());
  return f;
}

std::string key_of(const torch::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

// A tensor of the snapshot and what it is.
struct snapshot_entry {
  std::string name, state;
  int shard_dim = -1;
  std::int64_t full_size = 0;
  torch::Tensor value;  // CPU, contiguous, owned by the snapshot
};

struct snapshot {
  int iterations = 0;
  std::vector<snapshot_entry> entries;
  std::map<std::string, std::int64_t> steps;  // AdamW
};

status write_all(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return failure("writing " + path + ": " + std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return {};
}

// The parameters and optimizer state of `module`, each through `copy` (to the host).
void fill_snapshot(snapshot& snap, const models::stage_module& module,
                   torch::optim::Optimizer& optimizer, optimizer_kind kind,
                   const std::function<torch::Tensor(const torch::Tensor&)>& copy) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (const auto& p : module.parameters()) {
    snap.entries.push_back({p.name, "param", p.shard_dim, p.full_size, copy(p.tensor)});
    auto it = states.find(key_of(p.tensor));
    if (it == states.end()) continue;  // no optimizer state yet
    if (kind == optimizer_kind::adamw) {
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      snap.entries.push_back({p.name, "exp_avg", p.shard_dim, p.full_size, copy(s.exp_avg())});
      snap.entries.push_back({p.name, "exp_avg_sq", p.shard_dim, p.full_size, copy(s.exp_avg_sq())});
      snap.steps[p.name] = s.step();
    } else {
      auto& s = static_cast<torch::optim::SGDParamState&>(*it->second);
      if (s.momentum_buffer().defined())
        snap.entries.push_back({p.name, "momentum_buffer", p.shard_dim, p.full_size,
                                copy(s.momentum_buffer())});
    }
  }
}

// The shard's header: everything before the tensors' bytes (magic, length, JSON).
std::string shard_head(const shard_file& file, const json& model, optimizer_kind optimizer,
                       const snapshot& snap) {
  json header;
  header["format"] = format_version;
  header["iterations"] = snap.iterations;
  header["model"] = model;
  header["optimizer"] = optimizer_name(optimizer);
  header["first_layer"] = file.first_layer;
  header["end_layer"] = file.end_layer;
  header["tp_rank"] = file.tp_rank;
  header["tp_size"] = file.tp_size;
  json tensors = json::array();
  std::uint64_t offset = 0;
  for (const auto& e : snap.entries) {
    const std::uint64_t bytes = e.value.numel() * e.value.element_size();
    tensors.push_back({{"name", e.name},
                       {"state", e.state},
                       {"shard_dim", e.shard_dim},
                       {"full_size", e.full_size},
                       {"shape", e.value.sizes().vec()},
                       {"dtype", dtype_name(e.value.scalar_type())},
                       {"offset", offset},
                       {"bytes", bytes},
                       {"crc32", checkpoint_crc(0, e.value.data_ptr(), bytes)}});
    offset += bytes;
  }
  header["tensors"] = std::move(tensors);
  header["steps"] = snap.steps;
  header["data_bytes"] = offset;
  const std::string text = header.dump();
  const std::uint64_t length = text.size();
  std::string head(magic, magic_bytes);
  for (int i = 0; i < 8; ++i) head.push_back(static_cast<char>(length >> (8 * i)));
  return head + text;
}

// Writes the shard under a temporary name, then renames it into place.
status write_shard(const std::string& folder, const shard_file& file, const json& model,
                   optimizer_kind optimizer, const snapshot& snap) {
  const std::string head = shard_head(file, model, optimizer, snap);
  std::error_code ec;
  fs::create_directories(folder, ec);  // several writers may race here: check the result
  if (!fs::is_directory(folder))
    return failure("cannot create the checkpoint folder " + folder + ": " + ec.message());
  const std::string name = shard_file_name(file);
  const std::string final_path = (fs::path(folder) / name).string();
  const std::string temp_path = (fs::path(folder) / ("." + name + ".tmp")).string();
  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure("creating " + temp_path + ": " + std::strerror(errno));
  status st = write_all(fd, head.data(), head.size(), temp_path);
  for (const auto& e : snap.entries) {
    if (st) break;
    st = write_all(fd, e.value.data_ptr(), e.value.numel() * e.value.element_size(), temp_path);
  }
  if (!st && ::fsync(fd) != 0) st = failure("syncing " + temp_path + ": " + std::strerror(errno));
  if (::close(fd) != 0 && !st) st = failure("closing " + temp_path + ": " + std::strerror(errno));
  if (!st && std::rename(temp_path.c_str(), final_path.c_str()) != 0)
    st = failure("renaming " + temp_path + ": " + std::strerror(errno));
  if (st) fs::remove(temp_path, ec);
  return st;
}

// One shard file opened for reading: its header, and its tensors by (name, state).
struct shard_reader {
  shard_file file;
  json header;
  std::uint64_t data_start = 0;
  std::map<std::pair<std::string, std::string>, const json*> tensors;
  std::ifstream in;

  status open(const shard_file& f, const config::model_shape& model, optimizer_kind optimizer,
              int iterations) {
    file = f;
    // The whole file is checked (header, sizes, each tensor's checksum) before any of it is
    // trusted, although only some of its rows may be read below.
    if (auto bad = verify_shard(f.path)) return invalid(*bad);
    in.open(f.path, std::ios::binary);
    if (!in) return invalid("cannot open checkpoint file " + f.path);
    char head[magic_bytes + 8];
    if (!in.read(head, sizeof head) || std::memcmp(head, magic, magic_bytes) != 0)
      return invalid(f.path + " is not a checkpoint file");
    std::uint64_t length = 0;
    for (int i = 0; i < 8; ++i)
      length |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[magic_bytes + i])) << (8 * i);
    std::error_code ec;
    const auto size = fs::file_size(f.path, ec);
    if (ec || length > size) return invalid(f.path + " is truncated");
    std::string text(length, '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(length))) return invalid(f.path + " is truncated");
    try {
      header = json::parse(text);
      data_start = magic_bytes + 8 + length;
      if (header.at("format").get<int>() != format_version)
        return invalid(f.path + ": checkpoint format " + header.at("format").dump() + ", expected " +
                       std::to_string(format_version));
      if (data_start + header.at("data_bytes").get<std::uint64_t>() != size)
        return invalid(f.path + " is truncated (" + std::to_string(size) + " bytes)");
      if (header.at("iterations").get<int>() != iterations)
        return invalid(f.path + " holds the state after " + header.at("iterations").dump() +
                       " iterations, expected " + std::to_string(iterations));
      const json want = model_json(model);
      const json& got = header.at("model");
      for (const char* field :
           {"num_layers", "hidden", "heads", "kv_heads", "ffn", "sequence", "vocabulary"}) {
        const json& value = want.at(field);
        if (!got.contains(field) || got.at(field) != value)
          return invalid(f.path + " was written for another model shape: " + std::string(field) + " " +
                         (got.contains(field) ? got.at(field).dump() : "missing") + " there, " +
                         value.dump() + " here (model " + got.value("name", "?") + " there, " +
                         model.name + " here)");
      }
      const std::string opt = header.at("optimizer").get<std::string>();
      if (opt != optimizer_name(optimizer))
        return invalid(f.path + " holds " + opt + " optimizer state; this run uses " +
                       optimizer_name(optimizer));
      for (const auto& t : header.at("tensors"))
        tensors[{t.at("name").get<std::string>(), t.at("state").get<std::string>()}] = &t;
    } catch (const std::exception& e) {
      return invalid(f.path + ": malformed header: " + e.what());
    }
    return {};
  }

  // Copies elements [begin, begin + count) along `dim` of tensor `t` (count < 0: all of it)
  // into `dest`: straight from the file when they are contiguous there and in dest.
  void read_into(const json& t, int dim, std::int64_t begin, std::int64_t count, torch::Tensor dest) {
    auto shape = t.at("shape").get<std::vector<std::int64_t>>();
    auto type = dtype_of(t.at("dtype").get<std::string>());
    if (type && (count < 0 || dim == 0) && !shape.empty() && dest.is_contiguous() &&
        dest.scalar_type() == *type) {
      const std::uint64_t bytes = t.at("bytes").get<std::uint64_t>();
      std::uint64_t offset = data_start + t.at("offset").get<std::uint64_t>();
      if (count >= 0) {
        offset += begin * (shape[0] > 0 ? bytes / shape[0] : 0);
        shape[0] = count;
      }
      if (dest.sizes().equals(shape)) {
        in.clear();
        in.seekg(static_cast<std::streamoff>(offset));
        const std::uint64_t want = dest.numel() * dest.element_size();
        if (!in.read(static_cast<char*>(dest.data_ptr()), static_cast<std::streamsize>(want)))
          throw std::runtime_error(file.path + " is truncated");
        return;
      }
    }
    dest.copy_(read(t, dim, begin, count));
  }

  // Elements [begin, begin + count) along `dim` of tensor `t` (count < 0: all of it).
  torch::Tensor read(const json& t, int dim, std::int64_t begin, std::int64_t count) {
    auto shape = t.at("shape").get<std::vector<std::int64_t>>();
    auto type = dtype_of(t.at("dtype").get<std::string>());
    if (!type) throw std::runtime_error(file.path + ": unknown dtype " + t.at("dtype").dump());
    const std::uint64_t bytes = t.at("bytes").get<std::uint64_t>();
    std::uint64_t offset = data_start + t.at("offset").get<std::uint64_t>();
    bool narrow_after = false;
    if (count >= 0 && dim == 0 && !shape.empty()) {
      // Rows are contiguous: read just the ones asked for.
      const std::uint64_t row = shape[0] > 0 ? bytes / shape[0] : 0;
      offset += begin * row;
      shape[0] = count;
    } else if (count >= 0) {
      narrow_after = true;
    }
    auto out = torch::empty(shape, torch::TensorOptions().dtype(*type));
    const std::uint64_t want = out.numel() * out.element_size();
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(static_cast<char*>(out.data_ptr()), static_cast<std::streamsize>(want)))
      throw std::runtime_error(file.path + " is truncated");
    return narrow_after ? out.narrow(dim, begin, count) : out;
  }
};

// The full shape of a tensor cut along `dim` into pieces of `shape[dim]`.
std::vector<std::int64_t> full_shape(std::vector<std::int64_t> shape, int dim, std::int64_t full) {
  if (dim >= 0 && dim < static_cast<int>(shape.size())) shape[dim] = full;
  return shape;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

checkpoint_writer::checkpoint_writer(std::string dir, const config::model_shape& model,
                                     const config::plan& plan, const rank_role& role,
                                     const train_options& options, std::string who)
    : dir_(std::move(dir)),
      model_(model),
      optimizer_(options.optimizer),
      file_(file_of(plan, role)),
      who_(std::move(who)),
      keep_(options.keep_checkpoint) {}

checkpoint_writer::~checkpoint_writer() { wait_previous(); }

void checkpoint_writer::wait_previous() {
  if (!thread_.joinable()) return;
  thread_.join();
  last_write_s_ = write_s_;
  if (write_result_) {
    // Once at error level: a read-only or full folder fails every checkpoint after it.
    if (!first_failure_)
      log::get("train")->error("{} checkpoint write failed: {}", who_, write_result_->to_string());
    else
      log::get("train")->debug("{} checkpoint write failed: {}", who_, write_result_->to_string());
    note_failure(*write_result_);
  }
  write_result_.reset();
}

void checkpoint_writer::note_failure(const error& e) {
  if (!first_failure_) first_failure_ = e;
  std::lock_guard lock{written_mutex_};
  unreported_failure_ = e.message;
}

std::string checkpoint_writer::take_failure() {
  wait_previous_if_done();
  std::lock_guard lock{written_mutex_};
  return std::exchange(unreported_failure_, std::string{});
}

void checkpoint_writer::wait_previous_if_done() {
  bool done = false;
  {
    std::lock_guard lock{written_mutex_};
    done = write_done_;
  }
  if (done) wait_previous();
}

double checkpoint_writer::take(int iterations, const models::stage_module& module,
                               torch::optim::Optimizer& optimizer) {
  auto start = clock_type::now();
  wait_previous();
  auto snap = std::make_shared<snapshot>();
  snap->iterations = iterations;
  std::size_t next = 0;
  // Into the buffers of the previous checkpoint (its write is done): no allocation and no
  // page faults after the first checkpoint.
  auto cpu_copy = [&](const torch::Tensor& t) {
    auto src = t.detach();
    if (next >= buffers_.size()) buffers_.resize(next + 1);
    auto& b = buffers_[next++];
    if (!b.defined() || !b.sizes().equals(src.sizes()) || b.scalar_type() != src.scalar_type())
      b = torch::empty(src.sizes(), torch::TensorOptions().dtype(src.scalar_type()).pinned_memory(src.is_cuda()));
    b.copy_(src);
    return b;
  };
  try {
    fill_snapshot(*snap, module, optimizer, optimizer_, cpu_copy);
  } catch (const std::exception& e) {
    auto err = failure(who_ + " checkpoint " + std::to_string(iterations) + ": copying the state: " + e.what());
    log::get("train")->error("{}", err.message);
    note_failure(err);
    return seconds_since(start);
  }
  const double spent = seconds_since(start);
  {
    std::lock_guard lock{written_mutex_};
    write_done_ = false;
  }
  thread_ = std::thread([this, snap, model = model_json(model_)] {
    auto begin = clock_type::now();
    const auto folder = checkpoint_path(dir_, snap->iterations);
    try {
      write_result_ = write_shard(folder, file_, model, optimizer_, *snap);
    } catch (const std::exception& e) {
      write_result_ = failure(std::string("writing ") + folder + ": " + e.what());
    }
    if (!write_result_)
      prune_writer_files(dir_, file_, 2, keep_);
    write_s_ = seconds_since(begin);
    std::lock_guard lock{written_mutex_};
    if (!write_result_)
      last_written_ = (std::filesystem::path{folder} / shard_file_name(file_)).string();
    write_done_ = true;
  });
  return spent;
}

status checkpoint_writer::flush() {
  wait_previous();
  return first_failure_;
}

result<state_shard> encode_shard(int iterations, const config::model_shape& model,
                                 const config::plan& plan, const rank_role& role,
                                 optimizer_kind kind, const models::stage_module& module,
                                 torch::optim::Optimizer& optimizer) {
  const auto& replicas = plan.stages.at(role.stage).replicas;
  if (replicas.empty() || replicas[role.replica].tp != replicas[0].tp)
    return invalid("stage " + std::to_string(role.stage) + " replica " +
                   std::to_string(role.replica) + " has another TP degree than replica 0: its "
                   "state has no shard name of the plan's checkpoint layout");
  snapshot snap;
  snap.iterations = iterations;
  fill_snapshot(snap, module, optimizer, kind, [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU).contiguous().clone();
  });
  const auto file = file_of(plan, rank_role{role.stage, 0, role.tp_rank});
  const std::string head = shard_head(file, model_json(model), kind, snap);
  state_shard out;
  out.iterations = iterations;
  out.name = shard_file_name(file);
  std::uint64_t total = head.size();
  for (const auto& e : snap.entries) total += e.value.numel() * e.value.element_size();
  out.bytes.resize(total);
  std::memcpy(out.bytes.data(), head.data(), head.size());
  std::size_t at = head.size();
  for (const auto& e : snap.entries) {
    const std::size_t n = e.value.numel() * e.value.element_size();
    std::memcpy(out.bytes.data() + at, e.value.data_ptr(), n);
    at += n;
  }
  return out;
}

status restore_checkpoint(const std::string& dir, int iterations,
                          const config::model_shape& model, const train_options& options,
                          models::stage_module& module, torch::optim::Optimizer& optimizer,
                          const std::string& who) {
  const std::string folder = checkpoint_path(dir, iterations);
  const auto where = who + " restore: ";
  auto state = inspect_folder(folder);
  if (!state.exists)
    return invalid(where + "no checkpoint taken after " + std::to_string(iterations) +
                   " iterations: " + folder + " does not exist");
  if (state.complete.empty())
    return invalid(where + "checkpoint " + folder + " is incomplete: " +
                   std::to_string(state.best_found) + " of " + std::to_string(state.best_needed) +
                   " writer files");

  // The files that hold any of this stage's layers.
  std::vector<std::unique_ptr<shard_reader>> readers;
  for (const auto& f : state.complete) {
    if (f.end_layer <= module.first_layer() || f.first_layer >= module.end_layer()) continue;
    auto r = std::make_unique<shard_reader>();
    if (auto st = r->open(f, model, options.optimizer, iterations)) {
      st->message = where + st->message;
      return st;
    }
    readers.push_back(std::move(r));
  }

  std::vector<std::string> states = {"param"};
  if (options.optimizer == optimizer_kind::adamw) {
    states.push_back("exp_avg");
    states.push_back("exp_avg_sq");
  } else if (options.momentum > 0) {
    states.push_back("momentum_buffer");
  }

  const auto& params = module.parameters();
  const int my_rank = module.tp().rank;
  // values[i][k]: state k of parameter i, assembled on the CPU.
  std::vector<std::vector<torch::Tensor>> values(params.size());
  std::vector<std::int64_t> steps(params.size(), 0);
  try {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      const int layer = module.layer_of(i);
      const auto my_shape = p.tensor.sizes().vec();
      const int dim = p.shard_dim;
      const std::int64_t length = dim >= 0 ? my_shape[dim] : 0, begin = my_rank * length;
      const auto my_full = full_shape(my_shape, dim, p.full_size);
      for (const auto& state_name : states) {
        auto out = torch::empty(my_shape, torch::TensorOptions().dtype(p.tensor.scalar_type()));
        std::int64_t covered = 0;
        bool whole = false;
        for (auto& r : readers) {
          if (!r->file.holds_layer(layer)) continue;
          auto it = r->tensors.find({p.name, state_name});
          if (it == r->tensors.end())
            return invalid(where + r->file.path + " has no " + state_name + " of parameter " +
                           p.name + (state_name == "param" ? "" : " (written with another optimizer setting?)"));
          const json& t = *it->second;
          const auto saved_shape = t.at("shape").get<std::vector<std::int64_t>>();
          const int saved_dim = t.at("shard_dim").get<int>();
          const auto saved_full = full_shape(saved_shape, saved_dim, t.at("full_size").get<std::int64_t>());
          if (saved_dim != dim || saved_full != my_full)
            return invalid(where + r->file.path + ": parameter " + p.name + " has full shape " +
                           shape_text(saved_full) + " there, " + shape_text(my_full) +
                           " here (another model shape)");
          if (state_name == "param" && options.optimizer == optimizer_kind::adamw) {
            const auto& steps_json = r->header.at("steps");
            if (!steps_json.contains(p.name))
              return invalid(where + r->file.path + " has no AdamW step count of parameter " + p.name);
            steps[i] = steps_json.at(p.name).get<std::int64_t>();
          }
          if (dim < 0) {
            r->read_into(t, -1, 0, -1, out);
            whole = true;
            break;
          }
          const std::int64_t saved_length = saved_shape[dim];
          const std::int64_t saved_begin = r->file.tp_rank * saved_length;
          const std::int64_t lo = std::max(begin, saved_begin);
          const std::int64_t hi = std::min(begin + length, saved_begin + saved_length);
          if (lo >= hi) continue;
          r->read_into(t, dim, lo - saved_begin, hi - lo, out.narrow(dim, lo - begin, hi - lo));
          covered += hi - lo;
        }
        if (!whole && (dim < 0 || covered != length))
          return invalid(where + "checkpoint " + folder + " does not hold all of parameter " +
                         p.name + " (" + state_name + ")");
        values[i].push_back(std::move(out));
      }
    }
  } catch (const std::exception& e) {
    return invalid(where + "reading " + folder + ": " + e.what());
  }

  // Everything read: load it.
  torch::NoGradGuard no_grad;
  auto& opt_state = optimizer.state();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    auto on_device = [&](const torch::Tensor& t) { return t.to(p.tensor.options().requires_grad(false)); };
    p.tensor.detach().copy_(values[i][0]);
    const auto key = key_of(p.tensor);
    if (options.optimizer == optimizer_kind::adamw) {
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(steps[i]);
      s->exp_avg(on_device(values[i][1]));
      s->exp_avg_sq(on_device(values[i][2]));
      opt_state[key] = std::move(s);
    } else if (options.momentum > 0) {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(on_device(values[i][1]));
      opt_state[key] = std::move(s);
    } else {
      opt_state.erase(key);
    }
  }
  log::get("train")->info("{} restored checkpoint {} ({} parameters from {} files)", who, folder,
                          params.size(), readers.size());
  return {};
}

}  // namespace sailor::train::detail
