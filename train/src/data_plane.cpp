#include <sailor/train/data_plane.hpp>

#include <sailor/comm/shaping.hpp>
#include <sailor/comm/tcp.hpp>

namespace sailor::train {

comm::transport_channel_options data_plane_options(
  const config::plan& plan, const rank_role& role, const std::vector<config::zone_link>& links,
  comm::transport_channel_options base, std::shared_ptr<const comm::link_table> changed) {
  base.transport.local_zone = plan.stages[role.stage].replicas[role.replica].zone;
  if (links.empty()) return base;
  comm::transport_maker inner = base.make_transport;
  if (!inner)
    inner = [](const comm::transport_options& o) { return comm::make_tcp_transport(o); };
  base.make_transport = [inner, links, changed](const comm::transport_options& o)
      -> result<std::unique_ptr<comm::transport>> {
    auto t = inner(o);
    if (!t) return t.error();
    auto lookup = [links](const std::string& a, const std::string& b) {
      return find_link(links, a, b).value_or(config::zone_link{});
    };
    return comm::make_shaped_transport(std::move(*t), comm::overridden(changed, lookup));
  };
  return base;
}

std::optional<config::zone_link> find_link(const std::vector<config::zone_link>& links,
                                           const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == b) return std::nullopt;
  for (const auto& l : links)
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l;
  return std::nullopt;
}

}  // namespace sailor::train
