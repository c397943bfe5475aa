#include "sailor/simulator/correction.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace sailor::simulator {

double median_of(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

std::string format_ratio(const char* what, double ratio, double reference) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "measured/predicted %.4g is over %s %.4g by more than the limit",
                ratio, what, reference);
  return buf;
}

// Every layer time of `gp` (forward, backward, update; each micro-batch size and TP degree)
// multiplied by `factor`: a GPU type `factor` times slower.
void scale_times(config::gpu_profile& gp, double factor) {
  for (auto& [mbs, by_tp] : gp.times)
    for (auto& [tp, layers] : by_tp)
      for (auto& l : layers) {
        l.forward_s *= factor;
        l.backward_s *= factor;
        l.update_s *= factor;
      }
}

}  // namespace

std::vector<double> speed_correction::ratios_of(const std::string& gpu_type) const {
  std::vector<double> out;
  if (auto it = ratios_.find(gpu_type); it != ratios_.end())
    for (const auto& s : it->second)
      out.push_back(s.ratio);
  return out;
}

std::size_t speed_correction::forget_from(const std::string& gpu_type, std::int64_t first) {
  auto it = ratios_.find(gpu_type);
  if (it == ratios_.end())
    return 0;
  return std::erase_if(it->second, [first](const sample& s) { return s.iteration >= first; });
}

std::string speed_correction::add(const std::string& gpu_type, double predicted_s,
                                  double measured_s, std::int64_t iteration) {
  auto refuse = [this](std::string why) {
    ++refused_;
    return why;
  };
  if (!std::isfinite(predicted_s) || predicted_s <= 0)
    return refuse("no prediction to compare with (predicted " + std::to_string(predicted_s) +
                  " s)");
  if (!std::isfinite(measured_s) || measured_s <= 0)
    return refuse("measured time " + std::to_string(measured_s) + " s is not positive");
  const double ratio = measured_s / predicted_s;
  const double limit = options_.max_peer_factor;
  auto absurd = [limit](double r, double ref) { return ref > 0 && (r > ref * limit || r * limit < ref); };
  // Against the type's own history, once it has one.
  auto own = ratios_.find(gpu_type);
  if (own != ratios_.end() && own->second.size() >= options_.min_samples) {
    const double ref = median_of(ratios_of(gpu_type));
    if (absurd(ratio, ref))
      return refuse(format_ratio("its own median", ratio, ref));
  }
  // Against the other types: the same job on one kind of device is not 1000x off the others.
  std::vector<double> peers;
  for (const auto& [type, rs] : ratios_)
    if (type != gpu_type && rs.size() >= options_.min_samples)
      peers.push_back(median_of(ratios_of(type)));
  if (!peers.empty()) {
    const double ref = median_of(peers);
    if (absurd(ratio, ref))
      return refuse(format_ratio("the other types' median", ratio, ref));
  }
  auto& rs = ratios_[gpu_type];
  rs.push_back({ratio, iteration});
  while (rs.size() > std::max<std::size_t>(1, options_.window))
    rs.pop_front();
  return {};
}

double speed_correction::factor(const std::string& gpu_type) const {
  auto it = ratios_.find(gpu_type);
  if (it == ratios_.end() || it->second.size() < std::max<std::size_t>(1, options_.min_samples))
    return 1.0;
  return median_of(ratios_of(gpu_type));
}

std::size_t speed_correction::samples(const std::string& gpu_type) const {
  auto it = ratios_.find(gpu_type);
  return it == ratios_.end() ? 0 : it->second.size();
}

std::map<std::string, double> speed_correction::factors() const {
  std::map<std::string, double> out;
  for (const auto& [type, rs] : ratios_)
    if (rs.size() >= std::max<std::size_t>(1, options_.min_samples))
      out[type] = factor(type);
  return out;
}

config::model_profile speed_correction::apply(config::model_profile p) const {
  for (auto& [type, gp] : p.by_gpu) {
    // A slowed type (a straggler planned at its speed) is corrected as its base type is.
    const auto base = slowed_base_type(type);
    const double f = factor(base.empty() ? type : base);
    if (f == 1.0)
      continue;
    scale_times(gp, f);
  }
  return p;
}

namespace {
constexpr const char* slowed_mark = "~slow";
}  // namespace

std::string slowed_type_name(const std::string& base, double factor) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%.2fx", slowed_mark, factor);
  return base + buf;
}

std::string slowed_base_type(const std::string& name) {
  auto at = name.rfind(slowed_mark);
  return at == std::string::npos ? std::string{} : name.substr(0, at);
}

std::string add_slowed_type(const std::string& base, double factor, config::gpu_catalog& catalog,
                            config::model_profile* profile) {
  const config::gpu_spec* spec = catalog.find(base);
  if (!spec || !std::isfinite(factor) || factor <= 1)
    return {};
  config::gpu_spec slow = *spec;
  slow.name = slowed_type_name(base, factor);
  slow.peak_fp16_tflops /= factor;
  slow.peak_fp32_tflops /= factor;
  slow.memory_bandwidth_gbytes_per_s /= factor;
  slow.source = "measured " + std::to_string(factor) + "x slower than " + base;
  const std::string name = slow.name;
  catalog.upsert(std::move(slow));
  if (profile)
    if (const auto* gp = profile->find(base)) {
      config::gpu_profile scaled = *gp;
      scaled.gpu_type = name;
      scale_times(scaled, factor);
      profile->by_gpu[name] = std::move(scaled);
    }
  return name;
}

std::string link_key(const std::string& zone_a, const std::string& zone_b) {
  return zone_a < zone_b ? zone_a + "<->" + zone_b : zone_b + "<->" + zone_a;
}

config::cluster corrected_links(config::cluster cluster, const speed_correction& links) {
  for (const auto& [key, factor] : links.factors()) {
    const auto at = key.find("<->");
    if (at == std::string::npos || !std::isfinite(factor) || factor <= 0 || factor == 1.0)
      continue;
    const std::string a = key.substr(0, at), b = key.substr(at + 3);
    auto scaled = cluster.link(a, b);  // the explicit link, else the defaults'
    scaled.latency_s *= factor;
    scaled.bandwidth_gbytes_per_s /= factor;
    if (scaled.curve)
      for (auto& [bytes, gbps] : scaled.curve->points)
        gbps /= factor;
    std::erase_if(cluster.links, [&](const config::zone_link& l) {
      return (l.from == a && l.to == b) || (l.from == b && l.to == a);
    });
    cluster.links.push_back(std::move(scaled));
  }
  return cluster;
}

}  // namespace sailor::simulator
