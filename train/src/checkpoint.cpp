// Plan-independent checkpoints: the writer (snapshot on the training thread, file written on
// a background thread); the reader is in checkpoint_restore.cpp.

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

#include <sailor/train/checkpoint.hpp>
#include <sailor/config/log.hpp>

#include "checkpoint_format.hpp"
#include "sailor/config/private_files.hpp"

namespace sailor::train::detail {
namespace {

namespace fs = std::filesystem;

// Checkpoints each writer keeps on its disk (see checkpoint_writer::write).
constexpr int kept_checkpoints = 3;
using clock_type = std::chrono::steady_clock;
using namespace shard_format;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
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
      return error::failed("writing " + path + ": " + std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return {};
}

// The parameters and optimizer state of `module`, each through `copy` (to the host).
void fill_snapshot(snapshot& snap, const models::stage_module& module,
                   torch::optim::Optimizer& optimizer, optimizer_kind kind,
                   const std::function<torch::Tensor(const torch::Tensor&)>& copy,
                   const outer_tensors* outer) {
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (std::size_t i = 0; i < module.parameters().size(); ++i) {
    const auto& p = module.parameters()[i];
    snap.entries.push_back({p.name, "param", p.shard_dim, p.full_size, copy(p.tensor)});
    if (outer) {
      snap.entries.push_back({p.name, "outer_anchor", p.shard_dim, p.full_size, copy(outer->anchor.at(i))});
      snap.entries.push_back({p.name, "outer_momentum", p.shard_dim, p.full_size, copy(outer->momentum.at(i))});
    }
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
  // Several writers may race here: make_private_folder takes a folder made meanwhile.
  if (auto err = files::make_private_folder(folder))
    return error::failed("cannot create the checkpoint folder " + folder + ": " + err->message);
  const std::string name = shard_file_name(file);
  const std::string final_path = (fs::path(folder) / name).string();
  const std::string temp_path = (fs::path(folder) / ("." + name + ".tmp")).string();
  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, files::private_file_mode);
  if (fd < 0) return error::failed("creating " + temp_path + ": " + std::strerror(errno));
  status st = write_all(fd, head.data(), head.size(), temp_path);
  for (const auto& e : snap.entries) {
    if (st) break;
    st = write_all(fd, e.value.data_ptr(), e.value.numel() * e.value.element_size(), temp_path);
  }
  if (!st && ::fsync(fd) != 0) st = error::failed("syncing " + temp_path + ": " + std::strerror(errno));
  if (::close(fd) != 0 && !st) st = error::failed("closing " + temp_path + ": " + std::strerror(errno));
  if (!st && std::rename(temp_path.c_str(), final_path.c_str()) != 0)
    st = error::failed("renaming " + temp_path + ": " + std::strerror(errno));
  if (st) fs::remove(temp_path, ec);
  return st;
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
                               torch::optim::Optimizer& optimizer, const outer_tensors* outer) {
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
    fill_snapshot(*snap, module, optimizer, optimizer_, cpu_copy, outer);
  } catch (const std::exception& e) {
    auto err = error::failed(who_ + " checkpoint " + std::to_string(iterations) + ": copying the state: " + e.what());
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
      write_result_ = error::failed(std::string("writing ") + folder + ": " + e.what());
    }
    // The copies of the other stages' shards (checkpoint_copies) lag a checkpoint or two
    // behind, and the newest checkpoint that outlives a whole stage must still be on this disk
    // when one is lost: keep_ pins it and every newer one once the supervisor has told it
    // (checkpoint_kept); three of its own cover the plan's first checkpoints, before that.
    if (!write_result_)
      prune_writer_files(dir_, file_, kept_checkpoints, keep_);
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
                                 torch::optim::Optimizer& optimizer, const outer_tensors* outer) {
  const auto& replicas = plan.stages.at(role.stage).replicas;
  if (replicas.empty() || replicas[role.replica].tp != replicas[0].tp)
    return error::invalid_input("", "stage " + std::to_string(role.stage) + " replica " +
                                std::to_string(role.replica) + " has another TP degree than replica 0: its "
                                "state has no shard name of the plan's checkpoint layout");
  snapshot snap;
  snap.iterations = iterations;
  fill_snapshot(snap, module, optimizer, kind, [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU).contiguous().clone();
  }, outer);
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

}  // namespace sailor::train::detail
