#include <sailor/train/profiler.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <time.h>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <sailor/comm/collective.hpp>
#include <sailor/config/load.hpp>
#include <sailor/config/log.hpp>
#include <sailor/models/gpt.hpp>

#include "fused_adamw.hpp"
#include "threads.hpp"

namespace sailor::train {
namespace {

using clock_type = std::chrono::steady_clock;

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
  // The wall clock, or this thread's CPU time (options.cpu_clock), in seconds.
  auto now = [&o]() -> double {
    if (!o.cpu_clock) return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  auto since = [&now](double t) { return now() - t; };
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
      // Evicts this core's caches (not timed): a rank of a training run gets the core back
      // after others ran on it (while it waited for a transfer), so its layers start cold.
      std::vector<std::uint64_t> evict(o.cold_cache_bytes / sizeof(std::uint64_t));
      std::uint64_t evict_sum = 0;
      auto cool = [&] {
        for (std::size_t i = 0; i < evict.size(); i += 8) evict_sum += ++evict[i];
      };
      for (int r = 0; r < o.warmup + o.repeats; ++r) {
        optimizer.zero_grad();
        torch::Tensor input = kind == 0 ? ids : hidden.detach().requires_grad_(true);
        sync();
        cool();
        auto t0 = now();
        auto y = module.forward_layer(layer, input, targets);
        sync();
        const double f = since(t0);
        cool();
        auto t1 = now();
        if (kind == 2)
          torch::autograd::backward({y});
        else
          torch::autograd::backward({y}, {grad_out});
        sync();
        const double b = since(t1);
        cool();
        auto t2 = now();
        {
          // The executor's step, per parameter: its share of the global gradient norm, the
          // clipping (the norm is over the bound early in training), the optimizer.
          torch::NoGradGuard no_grad;
          double norm_sq = 0;
          for (const auto& p : module.parameters()) {
            auto g = p.tensor.grad().reshape({-1});
            norm_sq += g.dot(g).item<double>();  // fp32 dot products summed in double
          }
          const double coef = 1.0 / (std::sqrt(norm_sq) + 1e-6);
          for (auto& p : module.parameters()) p.tensor.mutable_grad().mul_(std::min(1.0, coef));
        }
        if (!fused_adamw_step(optimizer)) optimizer.step();  // as the executor steps
        sync();
        const double u = since(t2);
        if (r >= o.warmup) {
          fwd.push_back(f);
          bwd.push_back(b);
          upd.push_back(u);
        }
      }
      if (evict_sum == 1) std::printf(" ");  // keeps the eviction from being optimized away
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

}  // namespace

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

result<host_figures> measure_host_communication(const config::model_shape& model, int mbs,
                                                const profile_options& o) {
  try {
    set_compute_threads(o.torch_threads, o.blas_threads);
    comm::gloo_options gopts;
    gopts.in_process_store = comm::make_in_process_store();
    gopts.timeout = o.timeout;
    const int rounds = std::max(10, o.repeats);
    // A block's gradients as the executor reduces them: its parameters' gradients gathered
    // into one buffer, all-reduced, copied back.
    models::stage_module block(model, 1, 2, {}, o.seed);
    std::vector<torch::Tensor> grads;
    for (const auto& p : block.parameters()) grads.push_back(torch::randn_like(p.tensor));
    std::vector<std::string> errors(2);
    std::vector<std::unique_ptr<comm::communicator>> groups(2);
    std::vector<double> phase(3, 0.0);  // process CPU at the starts and end of the two phases
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0, generation = 0;
    auto barrier = [&] {  // both ranks (threads) between the phases
      std::unique_lock lock(mu);
      const int g = generation;
      if (++arrived == 2) {
        arrived = 0;
        ++generation;
        cv.notify_all();
      } else {
        cv.wait(lock, [&] { return generation != g; });
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        try {
          set_compute_threads(o.torch_threads, o.blas_threads);
          auto factory = comm::make_gloo_factory(r, gopts);
          if (!factory) throw std::runtime_error(factory.error().to_string());
          auto group = (*factory)->create("host", {0, 1});
          if (!group) throw std::runtime_error(group.error().to_string());
          auto& c = **group;
          const int peer = 1 - r;
          auto out = torch::randn({mbs, model.sequence, model.hidden});
          auto in = torch::empty_like(out);
          auto view = [](const torch::Tensor& t) {
            return comm::buffer_view{t.data_ptr(), static_cast<std::size_t>(t.numel()), comm::element_type::f32};
          };
          barrier();
          if (r == 0) phase[0] = process_cpu_s();
          barrier();
          for (int k = 0; k < rounds; ++k) {  // one send and one receive per rank per round
            auto recv = c.irecv(view(in), peer, static_cast<std::uint64_t>(k));
            auto send = c.isend(view(out), peer, static_cast<std::uint64_t>(k));
            if (auto st = send->wait(o.timeout)) throw std::runtime_error(st->to_string());
            if (auto st = recv->wait(o.timeout)) throw std::runtime_error(st->to_string());
          }
          barrier();
          if (r == 0) phase[1] = process_cpu_s();
          barrier();
          torch::NoGradGuard no_grad;
          for (int k = 0; k < rounds; ++k) {
            std::vector<torch::Tensor> flat;
            for (const auto& g : grads) flat.push_back(g.reshape({-1}));
            auto buffer = torch::cat(flat).contiguous();
            if (auto st = c.all_reduce(view(buffer))) throw std::runtime_error(st->to_string());
            std::int64_t at = 0;
            for (auto& g : grads) {
              g.copy_(buffer.narrow(0, at, g.numel()).view(g.sizes()));
              at += g.numel();
            }
            // Keep the sums bounded: the figures are about time, not values.
            if (r == 0 && k % 8 == 7)
              for (auto& g : grads) g.mul_(0.25);
          }
          barrier();
          if (r == 0) phase[2] = process_cpu_s();
          groups[r] = std::move(*group);
        } catch (const std::exception& e) {
          errors[r] = e.what();
          // Let the other rank out of the barriers it may be waiting in.
          std::lock_guard lock(mu);
          arrived = 0;
          generation += 100;
          cv.notify_all();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (!e.empty()) return error::failed("host figures: " + e);
    host_figures h;
    h.cpu_per_message_s = (phase[1] - phase[0]) / (2.0 * 2.0 * rounds);
    h.cpu_per_collective_s = (phase[2] - phase[1]) / (2.0 * rounds);
    return h;
  } catch (const std::exception& e) {
    return error::failed(std::string("host figures: ") + e.what());
  }
}

result<host_figures> load_host_figures(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error::not_found("", "", path + ": cannot read");
  try {
    auto j = nlohmann::json::parse(in);
    host_figures h;
    h.core_share = j.at("core_share").get<double>();
    h.cpu_per_message_s = j.at("cpu_per_message_s").get<double>();
    h.cpu_per_collective_s = j.at("cpu_per_collective_s").get<double>();
    return h;
  } catch (const std::exception& e) {
    return error::invalid_input("", path + ": " + e.what());
  }
}

status save_host_figures(const host_figures& h, const std::string& path) {
  nlohmann::json j;
  j["core_share"] = h.core_share;
  j["cpu_per_message_s"] = h.cpu_per_message_s;
  j["cpu_per_collective_s"] = h.cpu_per_collective_s;
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) return error::failed(path + ": cannot write");
  return {};
}

result<config::model_profile> profile_model(const config::model_shape& model,
                                            const profile_options& o) {
  if (o.micro_batches.empty() || o.tp_degrees.empty())
    return error::invalid_input("", "profile: give at least one micro-batch size and one TP degree");
  if (o.repeats < 1 || o.warmup < 0)
    return error::invalid_input("", "profile: repeats must be >= 1 and warmup >= 0");
  for (int mbs : o.micro_batches)
    if (mbs < 1) return error::invalid_input("", "profile: micro-batch sizes must be >= 1");
  for (int tp : o.tp_degrees)
    if (tp < 1 || model.heads % tp || model.vocabulary % tp || model.ffn() % tp || model.hidden % tp)
      return error::invalid_input("", "profile: TP degree " + std::to_string(tp) +
                                  " must divide heads, hidden, ffn and vocabulary");
  try {
    if (o.cuda_device >= 0 && !torch::cuda::is_available())
      return error::invalid_input("", "profile: a CUDA device was asked for, but this LibTorch sees none");
    const torch::Device device = o.cuda_device >= 0
                                     ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(o.cuda_device))
                                     : torch::Device(torch::kCPU);
    set_compute_threads(o.torch_threads, o.blas_threads);
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
          if (!e.empty()) return error::failed("profile: TP " + std::to_string(tp) + ": " + e);
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
    return error::failed(std::string("profile: ") + e.what());
  }
}

}  // namespace sailor::train
