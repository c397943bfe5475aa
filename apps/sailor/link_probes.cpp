#include "link_probes.hpp"

#include <cstdio>
#include <set>

#include "sailor/comm/link_probe.hpp"
#include "sailor/comm/shaping.hpp"
#include "sailor/comm/tcp.hpp"

namespace sailor::app {

std::optional<config::zone_link> zone_link_probes::probe(const std::string& a,
                                                         const std::string& b) const {
  const auto configured = configured_.link(a, b);
  auto endpoint = [this](const std::string& name, const std::string& zone)
    -> std::unique_ptr<comm::transport> {
    comm::transport_options o;
    o.local_name = name;
    o.local_zone = zone;
    auto t = comm::make_tcp_transport(o);
    if (!t)
      return nullptr;
    return comm::make_shaped_transport(std::move(*t), comm::links_of(configured_));
  };
  auto warn = [&](const std::string& why) {
    std::fprintf(stderr, "sailor coordinator: warning: [link %s->%s] probe failed (%s): planning "
                         "on the configured link\n",
                 a.c_str(), b.c_str(), why.c_str());
    return std::nullopt;
  };
  auto responder = endpoint("probe-" + a, a);
  auto prober = endpoint("probe-" + b, b);
  if (!responder || !prober)
    return warn("no transport");
  auto listening = responder->listen(comm::address{"127.0.0.1", 0}, comm::probe_responder());
  if (!listening)
    return warn(listening.error().message);
  auto r = comm::probe_link(*prober, (*listening)->local_address());
  if (!r)
    return warn(r.error().message);
  auto measured = comm::measured_link(configured, *r);
  measured.from = a;
  measured.to = b;
  std::printf("sailor coordinator: [link %s->%s] probed in %.2f s: latency %.2f ms, %.1f MB/s "
              "at %.0f KiB (configured %.2f ms, %.1f MB/s)\n",
              a.c_str(), b.c_str(), r->elapsed_s, 1e3 * measured.latency_s,
              r->bandwidth.empty() ? 0.0 : r->bandwidth.back().second / 1e6,
              r->bandwidth.empty() ? 0.0 : r->bandwidth.back().first / 1024,
              1e3 * configured.latency_s, configured.bandwidth_gbytes_per_s * 1e3);
  std::fflush(stdout);
  return measured;
}

config::cluster zone_link_probes::network_for(const std::vector<actors::node_inventory>& nodes) {
  std::set<std::string> zones;
  for (const auto& n : nodes)
    zones.insert(n.zone);
  std::lock_guard lock{mu_};
  config::cluster out = configured_;
  for (auto a = zones.begin(); a != zones.end(); ++a)
    for (auto b = std::next(a); b != zones.end(); ++b) {
      auto [it, fresh] = probed_.try_emplace({*a, *b});
      if (fresh)
        it->second = probe(*a, *b);
      if (!it->second)
        continue;
      std::erase_if(out.links, [&](const config::zone_link& l) {
        return (l.from == *a && l.to == *b) || (l.from == *b && l.to == *a);
      });
      out.links.push_back(*it->second);
    }
  return out;
}

}  // namespace sailor::app
