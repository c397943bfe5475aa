#include <sailor/actors/train/profiler.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <sailor/comm/collective.hpp>
#include <sailor/config/load.hpp>
#include <sailor/config/log.hpp>
#include <sailor/models/gpt.hpp>

#include "threads.hpp"

namespace sailor::train {
namespace {

using clock_type = std::chrono::steady_clock;

error failed(const std::string& message, error_kind kind = error_kind::failed) {
  error e;
  e.kind = kind;
  e.message = message;
  return e;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times of the three layer kinds (0: embedding, 1: block, 2: head) for each micro-batch size,
// as this TP rank measured them.
using kind_times = std::vector<std::vector<config::layer_time>>;  // [mbs index][kind]

kind_times profile_rank(const config::model_shape& model, const profile_options& o,
                        const models::tp_group& tp, torch::Device device) {
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  auto since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  const int L = model.num_layers;
  const int first_of_kind[3] = {0, 1, L + 1};
  kind_times out(o.micro_batches.size(), std::vector<config::layer_time>(3));
  for (int kind = 0; kind < 3; ++kind) {
    const int layer = first_of_kind[kind];
    models::stage_module module(model, layer, layer + 1, tp, o.seed);
    if (device.is_cuda()) module.to(device);
    torch::optim::AdamW optimizer(module.tensors(), torch::optim::AdamWOptions(1e-4));
    for (std::size_t mi = 0; mi < o.micro_batches.size(); ++mi) {
      const int mbs = o.micro_batches[mi];
      auto tokens = torch::randint(model.vocabulary, {mbs, model.sequence + 1}, torch::kLong).to(device);
      auto ids = tokens.narrow(1, 0, model.sequence).contiguous();
      auto targets = tokens.narrow(1, 1, model.sequence).contiguous();
      auto hidden = torch::randn({mbs, model.sequence, model.hidden}, torch::TensorOptions().device(device));
      auto grad_out = torch::randn({mbs, model.sequence, model.hidden}, torch::TensorOptions().device(device)) * 1e-3;
      std::vector<double> fwd, bwd, upd;
      for (int r = 0; r < o.warmup + o.repeats; ++r) {
        optimizer.zero_grad();
        torch::Tensor input = kind == 0 ? ids : hidden.detach().requires_grad_(true);
        sync();
        auto t0 = clock_type::now();
        auto y = module.forward_layer(layer, input, targets);
        sync();
        const double f = since(t0);
        auto t1 = clock_type::now();
        if (kind == 2)
          torch::autograd::backward({y});
        else
          torch::autograd::backward({y}, {grad_out});
        sync();
        const double b = since(t1);
        auto t2 = clock_type::now();
        optimizer.step();
        sync();
        const double u = since(t2);
        if (r >= o.warmup) {
          fwd.push_back(f);
          bwd.push_back(b);
          upd.push_back(u);
        }
      }
      auto stat = [&](const std::vector<double>& v) {
        if (!o.mean) return median(v);
        double sum = 0;
        for (double x : v) sum += x;
        return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
      };
      out[mi][kind] = {stat(fwd), stat(bwd), stat(upd)};
    }
  }
  return out;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    auto piece = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!piece.empty()) out.push_back(std::stoi(piece));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

result<config::model_profile> profile_model(const config::model_shape& model,
                                            const profile_options& o) {
  if (o.micro_batches.empty() || o.tp_degrees.empty())
    return failed("profile: give at least one micro-batch size and one TP degree",
                  error_kind::invalid_input);
  if (o.repeats < 1 || o.warmup < 0)
    return failed("profile: repeats must be >= 1 and warmup >= 0", error_kind::invalid_input);
  for (int mbs : o.micro_batches)
    if (mbs < 1) return failed("profile: micro-batch sizes must be >= 1", error_kind::invalid_input);
  for (int tp : o.tp_degrees)
    if (tp < 1 || model.heads % tp || model.vocabulary % tp || model.ffn() % tp || model.hidden % tp)
      return failed("profile: TP degree " + std::to_string(tp) +
                        " must divide heads, hidden, ffn and vocabulary",
                    error_kind::invalid_input);
  try {
    if (o.cuda_device >= 0 && !torch::cuda::is_available())
      return failed("profile: a CUDA device was asked for, but this LibTorch sees none",
                    error_kind::invalid_input);
    const torch::Device device = o.cuda_device >= 0
                                     ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(o.cuda_device))
                                     : torch::Device(torch::kCPU);
    set_compute_threads(o.torch_threads);
    config::model_profile profile;
    profile.model = model.name;
    auto& gp = profile.by_gpu[o.gpu_type];
    gp.gpu_type = o.gpu_type;
    const int L = model.num_layers;
    for (int tp : o.tp_degrees) {
      kind_times times;
      std::vector<std::string> errors(tp);
      if (tp == 1) {
        times = profile_rank(model, o, {}, device);
      } else {
        comm::gloo_options gopts;
        gopts.in_process_store = comm::make_in_process_store();
        gopts.timeout = o.timeout;
        std::vector<std::thread> threads;
        for (int r = 0; r < tp; ++r) {
          threads.emplace_back([&, r] {
            try {
              auto factory = comm::make_gloo_factory(r, gopts);
              if (!factory) throw std::runtime_error(factory.error().to_string());
              std::vector<int> members;
              for (int k = 0; k < tp; ++k) members.push_back(k);
              auto group = (*factory)->create("tp", members);
              if (!group) throw std::runtime_error(group.error().to_string());
              models::tp_group g;
              g.group = group->get();
              g.rank = r;
              g.size = tp;
              auto mine = profile_rank(model, o, g, device);
              if (r == 0) times = std::move(mine);
            } catch (const std::exception& e) {
              errors[r] = e.what();
            }
          });
        }
        for (auto& t : threads) t.join();
        for (const auto& e : errors)
          if (!e.empty()) return failed("profile: TP " + std::to_string(tp) + ": " + e);
      }
      for (std::size_t mi = 0; mi < o.micro_batches.size(); ++mi) {
        std::vector<config::layer_time> layers(L + 2);
        layers[0] = times[mi][0];
        for (int l = 1; l <= L; ++l) layers[l] = times[mi][1];
        layers[L + 1] = times[mi][2];
        gp.times[o.micro_batches[mi]][tp] = std::move(layers);
      }
    }
    return profile;
  } catch (const std::exception& e) {
    return failed(std::string("profile: ") + e.what());
  }
}

int profile_command(const std::vector<std::string>& args) {
  CLI::App app{"sailor profile: measure per-layer forward, backward and optimizer-step times of a "
               "model on this machine and write them as a profile (Sailor's profiles_tmp.json "
               "layout) that `sailor simulate`, `sailor plan` and `sailor demo` read",
               "sailor profile"};
  std::string model_path, out_path, micro_batches = "1,2,4,8", tps = "1", device = "cpu";
  profile_options o;
  app.add_option("--model", model_path, "model YAML (configs/models/*.yaml)")->required();
  app.add_option("--out", out_path, "profile JSON to write")->required();
  app.add_option("--micro-batches", micro_batches, "micro-batch sizes, comma separated")
    ->capture_default_str();
  app.add_option("--tp", tps, "TP degrees, comma separated (TP ranks run as threads)")
    ->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed runs per measurement (median)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed runs first")->capture_default_str();
  app.add_option("--threads", o.torch_threads, "torch intra-op threads")->capture_default_str();
  app.add_option("--gpu-type", o.gpu_type, "GPU type to file the times under")->capture_default_str();
  app.add_option("--device", device, "cpu or cuda:N")->capture_default_str();
  std::string statistic = "median";
  app.add_option("--statistic", statistic, "median (the layer's own time) or mean (expected "
                                           "time under the machine's current load)")
    ->check(CLI::IsMember({"median", "mean"}))
    ->capture_default_str();
  std::vector<const char*> argv{"sailor profile"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    o.mean = statistic == "mean";
    o.micro_batches = parse_list(micro_batches);
    o.tp_degrees = parse_list(tps);
    if (device.rfind("cuda:", 0) == 0) {
      o.cuda_device = std::stoi(device.substr(5));
    } else if (device != "cpu") {
      throw CLI::ValidationError("--device", "expected cpu or cuda:N");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sailor profile: error: bad list: %s\n", e.what());
    return 2;
  }
  auto model = config::load_model(model_path);
  if (!model) {
    std::fprintf(stderr, "sailor profile: error: %s\n", model.error().to_string().c_str());
    return 2;
  }
  const auto start = clock_type::now();
  auto profile = profile_model(*model, o);
  if (!profile) {
    std::fprintf(stderr, "sailor profile: error: %s\n", profile.error().to_string().c_str());
    return profile.error().kind == error_kind::invalid_input ? 2 : 1;
  }
  std::ofstream out(out_path);
  out << config::to_profile_json(*profile) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "sailor profile: error: cannot write %s\n", out_path.c_str());
    return 1;
  }
  const double took = std::chrono::duration<double>(clock_type::now() - start).count();
  std::printf("sailor profile: %s on %s (%d torch threads), %.1f s\n", model->name.c_str(),
              o.cuda_device >= 0 ? device.c_str() : "cpu", o.torch_threads, took);
  std::printf("  %4s %3s  %-10s %12s %12s %12s\n", "mbs", "tp", "layer", "forward ms", "backward ms",
              "update ms");
  const auto& gp = profile->by_gpu.at(o.gpu_type);
  for (const auto& [mbs, by_tp] : gp.times)
    for (const auto& [tp, layers] : by_tp) {
      const int L = model->num_layers;
      const std::pair<const char*, int> rows[3] = {{"embedding", 0}, {"block", 1}, {"head+loss", L + 1}};
      for (const auto& [name, l] : rows)
        std::printf("  %4d %3d  %-10s %12.3f %12.3f %12.3f\n", mbs, tp, name,
                    layers[l].forward_s * 1e3, layers[l].backward_s * 1e3, layers[l].update_s * 1e3);
    }
  std::printf("  written to %s\n", out_path.c_str());
  return 0;
}

}  // namespace sailor::train
