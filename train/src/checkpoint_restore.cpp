// Restoring a rank from a checkpoint: the shards of any plan are read (each checked whole
// first) and this rank's slices of every parameter and its optimizer state assembled from
// them, whatever the stage boundaries and TP degrees of the plan that wrote them. A slice
// that holds a NaN or an infinity refuses the restore, naming its file: a checksum proves only
// that the bytes are those written, not that training can go on from them.

#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>

#include <sailor/train/checkpoint.hpp>
#include <sailor/config/log.hpp>

#include "checkpoint_format.hpp"
#include "checkpoint_io.hpp"
#include "shape_text.hpp"

namespace sailor::train::detail {
namespace {

namespace fs = std::filesystem;
using namespace shard_format;

// One shard opened for reading (a file, or bytes received into memory): its header, and
// its tensors by (name, state).
struct shard_reader {
  shard_file file;
  json header;
  std::uint64_t data_start = 0;
  std::map<std::pair<std::string, std::string>, const json*> tensors;
  std::unique_ptr<shard_bytes> in;

  status open(const shard_file& f, std::unique_ptr<shard_bytes> bytes,
              const config::model_shape& model, optimizer_kind optimizer, int iterations) {
    file = f;
    in = std::move(bytes);
    if (!in) return error::invalid_input("", "cannot open checkpoint file " + f.path);
    // The whole shard is checked (header, sizes, each tensor's checksum) before any of it is
    // trusted, although only some of its rows may be read below.
    if (auto bad = verify_shard(*in)) return error::invalid_input("", *bad);
    char head[magic_bytes + 8];
    if (!in->read(0, head, sizeof head) || std::memcmp(head, magic, magic_bytes) != 0)
      return error::invalid_input("", f.path + " is not a checkpoint file");
    std::uint64_t length = 0;
    for (int i = 0; i < 8; ++i)
      length |= static_cast<std::uint64_t>(static_cast<unsigned char>(head[magic_bytes + i])) << (8 * i);
    const auto size = in->size();
    if (length > size) return error::invalid_input("", f.path + " is truncated");
    std::string text(length, '\0');
    if (!in->read(sizeof head, text.data(), length)) return error::invalid_input("", f.path + " is truncated");
    try {
      header = json::parse(text);
      data_start = magic_bytes + 8 + length;
      if (header.at("format").get<int>() != format_version)
        return error::invalid_input("", f.path + ": checkpoint format " + header.at("format").dump() + ", expected " +
                                    std::to_string(format_version));
      if (data_start + header.at("data_bytes").get<std::uint64_t>() != size)
        return error::invalid_input("", f.path + " is truncated (" + std::to_string(size) + " bytes)");
      if (header.at("iterations").get<int>() != iterations)
        return error::invalid_input("", f.path + " holds the state after " + header.at("iterations").dump() +
                                    " iterations, expected " + std::to_string(iterations));
      const json want = model_json(model);
      const json& got = header.at("model");
      for (const char* field :
           {"num_layers", "hidden", "heads", "kv_heads", "ffn", "sequence", "vocabulary"}) {
        const json& value = want.at(field);
        if (!got.contains(field) || got.at(field) != value)
          return error::invalid_input("", f.path + " was written for another model shape: " + std::string(field) + " " +
                                      (got.contains(field) ? got.at(field).dump() : "missing") + " there, " +
                                      value.dump() + " here (model " + got.value("name", "?") + " there, " +
                                      model.name + " here)");
      }
      const std::string opt = header.at("optimizer").get<std::string>();
      if (opt != optimizer_name(optimizer))
        return error::invalid_input("", f.path + " holds " + opt + " optimizer state; this run uses " +
                                    optimizer_name(optimizer));
      for (const auto& t : header.at("tensors"))
        tensors[{t.at("name").get<std::string>(), t.at("state").get<std::string>()}] = &t;
    } catch (const std::exception& e) {
      return error::invalid_input("", f.path + ": malformed header: " + e.what());
    }
    return {};
  }

  // Copies elements [begin, begin + count) along `dim` of tensor `t` (count < 0: all of it)
  // into `dest`: straight from the shard when they are contiguous there and in dest.
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
        const std::uint64_t want = dest.numel() * dest.element_size();
        if (!in->read(offset, dest.data_ptr(), want))
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
    if (!in->read(offset, out.data_ptr(), want))
      throw std::runtime_error(file.path + " is truncated");
    return narrow_after ? out.narrow(dim, begin, count) : out;
  }
};

// The full shape of a tensor cut along `dim` into pieces of `shape[dim]`.
std::vector<std::int64_t> full_shape(std::vector<std::int64_t> shape, int dim, std::int64_t full) {
  if (dim >= 0 && dim < static_cast<int>(shape.size())) shape[dim] = full;
  return shape;
}

// Whether every element of `t` is finite: a restore takes no NaN or infinity into training.
bool only_finite_values(const torch::Tensor& t) {
  return t.numel() == 0 || torch::isfinite(t).all().item<bool>();
}

}  // namespace

namespace {

status load_from(std::vector<std::unique_ptr<shard_reader>>& readers, const std::string& folder,
                 const std::string& where, const train_options& options,
                 models::stage_module& module, torch::optim::Optimizer& optimizer);
status load_outer(std::vector<std::unique_ptr<shard_reader>>& readers, const std::string& folder,
                  const std::string& where, const models::stage_module& module, outer_tensors& out);

// Opens the shards of `files` that hold any of `module`'s layers (`open` gives each one's
// bytes) and loads this rank's slices from them.
status restore_from(const std::vector<shard_file>& files,
                    const std::function<std::unique_ptr<shard_bytes>(const shard_file&)>& open,
                    const std::string& folder, int iterations, const config::model_shape& model,
                    const train_options& options, models::stage_module& module,
                    torch::optim::Optimizer& optimizer, const std::string& who, outer_tensors* outer) {
  const auto where = who + " restore: ";
  std::vector<std::unique_ptr<shard_reader>> readers;
  for (const auto& f : files) {
    if (f.end_layer <= module.first_layer() || f.first_layer >= module.end_layer()) continue;
    auto r = std::make_unique<shard_reader>();
    if (auto st = r->open(f, open(f), model, options.optimizer, iterations)) {
      st->message = where + st->message;
      return st;
    }
    readers.push_back(std::move(r));
  }
  if (auto st = load_from(readers, folder, where, options, module, optimizer)) return st;
  if (outer)
    if (auto st = load_outer(readers, folder, where, module, *outer)) return st;
  log::get("train")->info("{} restored {} ({} parameters from {} shards)", who, folder,
                          module.parameters().size(), readers.size());
  return {};
}

}  // namespace

status restore_checkpoint(const std::string& dir, int iterations,
                          const config::model_shape& model, const train_options& options,
                          models::stage_module& module, torch::optim::Optimizer& optimizer,
                          const std::string& who, outer_tensors* outer) {
  const std::string folder = checkpoint_path(dir, iterations);
  const auto where = who + " restore: ";
  auto state = inspect_folder(folder);
  if (!state.exists)
    return error::invalid_input("", where + "no checkpoint taken after " + std::to_string(iterations) +
                                " iterations: " + folder + " does not exist");
  if (state.complete.empty())
    return error::invalid_input("", where + "checkpoint " + folder + " is incomplete: " +
                                std::to_string(state.best_found) + " of " + std::to_string(state.best_needed) +
                                " writer files");
  return restore_from(state.complete, [](const shard_file& f) { return open_shard_file(f.path); },
                      "checkpoint " + folder, iterations, model, options, module, optimizer, who, outer);
}

status restore_shards(const std::vector<shard_input>& shards, int iterations,
                      const config::model_shape& model, const train_options& options,
                      models::stage_module& module, torch::optim::Optimizer& optimizer,
                      const std::string& who, outer_tensors* outer) {
  // Only the shards that hold this rank's layers need be given: completeness is checked
  // parameter by parameter as they are assembled (load_from), not by counting writers.
  const auto where = who + " restore: ";
  std::vector<shard_file> files;
  std::map<std::string, const shard_input*> by_name;  // the same shard from two places: once
  for (const auto& in : shards) {
    const auto name = fs::path{in.path}.filename().string();
    auto f = parse_shard_file_name(name);
    if (!f)
      return error::invalid_input("", where + "'" + in.path + "' is not the name of a checkpoint shard");
    if (!files.empty() && f->group != files.front().group)
      return error::invalid_input("", where + in.path + " was written by another layout than " +
                                  files.front().path);
    if (!by_name.emplace(name, &in).second) continue;
    f->path = in.path;
    files.push_back(std::move(*f));
  }
  const std::string what = "the state after " + std::to_string(iterations) + " iterations (" +
                           std::to_string(files.size()) + " shards)";
  auto open = [&](const shard_file& f) -> std::unique_ptr<shard_bytes> {
    const auto* in = by_name.at(fs::path{f.path}.filename().string());
    if (!in->file.empty()) return open_shard_file(in->file);
    return shard_in_memory(in->path, in->parts);
  };
  return restore_from(files, open, what, iterations, model, options, module, optimizer, who, outer);
}

namespace {

// This rank's slice of one parameter: what a restore assembles from the shards.
struct restore_slice {
  const models::stage_parameter* p = nullptr;
  int layer = 0;
  int dim = -1;  // the TP split's dimension (-1: whole on every rank)
  std::int64_t begin = 0, length = 0;
  std::vector<std::int64_t> shape, full;
};

// This rank's slice of parameter `i` of `module`.
restore_slice slice_of(const models::stage_module& module, std::size_t i) {
  restore_slice s;
  s.p = &module.parameters()[i];
  s.layer = module.layer_of(i);
  s.shape = s.p->tensor.sizes().vec();
  s.dim = s.p->shard_dim;
  s.length = s.dim >= 0 ? s.shape[s.dim] : 0;
  s.begin = module.tp().rank * s.length;
  s.full = full_shape(s.shape, s.dim, s.p->full_size);
  return s;
}

// State `state_name` of slice `s` read from `readers` into `out` (AdamW's step count of the
// parameter into `step` with its "param"); a part that is not finite refuses the restore.
status assemble_state_slice(std::vector<std::unique_ptr<shard_reader>>& readers,
                            const restore_slice& s, const std::string& state_name,
                            const std::string& where, const std::string& folder, bool adamw,
                            torch::Tensor& out, std::int64_t& step) {
  const auto& p = *s.p;
  std::int64_t covered = 0;
  for (auto& r : readers) {
    if (!r->file.holds_layer(s.layer)) continue;
    auto it = r->tensors.find({p.name, state_name});
    if (it == r->tensors.end())
      return error::invalid_input("", where + r->file.path + " has no " + state_name + " of parameter " +
                                  p.name + (state_name == "param" ? "" : " (written with another optimizer setting?)"));
    const json& t = *it->second;
    const auto saved_shape = t.at("shape").get<std::vector<std::int64_t>>();
    const int saved_dim = t.at("shard_dim").get<int>();
    const auto saved_full = full_shape(saved_shape, saved_dim, t.at("full_size").get<std::int64_t>());
    if (saved_dim != s.dim || saved_full != s.full)
      return error::invalid_input("", where + r->file.path + ": parameter " + p.name + " has full shape " +
                                  shape_text(saved_full) + " there, " + shape_text(s.full) +
                                  " here (another model shape)");
    if (state_name == "param" && adamw) {
      const auto& steps_json = r->header.at("steps");
      if (!steps_json.contains(p.name))
        return error::invalid_input("", where + r->file.path + " has no AdamW step count of parameter " + p.name);
      step = steps_json.at(p.name).get<std::int64_t>();
    }
    torch::Tensor part = out;
    if (s.dim < 0) {
      r->read_into(t, -1, 0, -1, out);
    } else {
      const std::int64_t saved_length = saved_shape[s.dim];
      const std::int64_t saved_begin = r->file.tp_rank * saved_length;
      const std::int64_t lo = std::max(s.begin, saved_begin);
      const std::int64_t hi = std::min(s.begin + s.length, saved_begin + saved_length);
      if (lo >= hi) continue;
      part = out.narrow(s.dim, lo - s.begin, hi - lo);
      r->read_into(t, s.dim, lo - saved_begin, hi - lo, part);
      covered += hi - lo;
    }
    if (!only_finite_values(part))
      return error::invalid_input("", where + r->file.path + ": " + state_name + " of parameter " +
                                  p.name + " holds values that are not finite (NaN or infinite): "
                                  "the checkpoint is refused");
    if (s.dim < 0) return {};
  }
  if (s.dim < 0 || covered != s.length)
    return error::invalid_input("", where + folder + " does not hold all of parameter " + p.name +
                                " (" + state_name + ")");
  return {};
}

status load_from(std::vector<std::unique_ptr<shard_reader>>& readers, const std::string& folder,
                 const std::string& where, const train_options& options,
                 models::stage_module& module, torch::optim::Optimizer& optimizer) {
  std::vector<std::string> states = {"param"};
  if (options.optimizer == optimizer_kind::adamw) {
    states.push_back("exp_avg");
    states.push_back("exp_avg_sq");
  } else if (options.momentum > 0) {
    states.push_back("momentum_buffer");
  }

  const auto& params = module.parameters();
  // values[i][k]: state k of parameter i, assembled on the CPU.
  std::vector<std::vector<torch::Tensor>> values(params.size());
  std::vector<std::int64_t> steps(params.size(), 0);
  try {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const restore_slice s = slice_of(module, i);
      for (const auto& state_name : states) {
        auto out = torch::empty(s.shape, torch::TensorOptions().dtype(s.p->tensor.scalar_type()));
        if (auto st = assemble_state_slice(readers, s, state_name, where, folder,
                                           options.optimizer == optimizer_kind::adamw, out, steps[i]))
          return st;
        values[i].push_back(std::move(out));
      }
    }
  } catch (const std::exception& e) {
    return error::invalid_input("", where + "reading " + folder + ": " + e.what());
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
  return {};
}

// DiLoCo's outer state of every parameter, when each shard holding one has it (a checkpoint of
// a synchronous plan has none: `out` stays empty).
status load_outer(std::vector<std::unique_ptr<shard_reader>>& readers, const std::string& folder,
                  const std::string& where, const models::stage_module& module, outer_tensors& out) {
  const auto& params = module.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    for (const auto& r : readers)
      if (r->file.holds_layer(module.layer_of(i)) && !r->tensors.count({params[i].name, "outer_anchor"}))
        return {};
  outer_tensors got;
  try {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const restore_slice s = slice_of(module, i);
      std::int64_t unused_step = 0;
      for (auto* into : {&got.anchor, &got.momentum}) {
        auto t = torch::empty(s.shape, torch::TensorOptions().dtype(s.p->tensor.scalar_type()));
        const char* state = into == &got.anchor ? "outer_anchor" : "outer_momentum";
        if (auto st = assemble_state_slice(readers, s, state, where, folder, false, t, unused_step)) return st;
        into->push_back(t.to(s.p->tensor.device()));
      }
    }
  } catch (const std::exception& e) {
    return error::invalid_input("", where + "reading DiLoCo's outer state of " + folder + ": " + e.what());
  }
  out = std::move(got);
  return {};
}

}  // namespace
}  // namespace sailor::train::detail
