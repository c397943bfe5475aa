#include "peer_checks.hpp"

#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/train/messages.hpp"
#include "sailor/comm/auth.hpp"

namespace sailor::actors::detail {

std::optional<std::string> node_spoken_for(const caf::message& m) {
  if (m.match_elements<join_request>())
    return m.get_as<join_request>(0).inventory.name;
  if (m.match_elements<heartbeat>())
    return m.get_as<heartbeat>(0).node;
  if (m.match_elements<stage_ready>())
    return m.get_as<stage_ready>(0).node;
  if (m.match_elements<stage_failed>())
    return m.get_as<stage_failed>(0).node;
  if (m.match_elements<preemption_notice>())
    return m.get_as<preemption_notice>(0).node;
  if (m.match_elements<train_report>())
    return m.get_as<train_report>(0).node;
  // A rank's request to the rendezvous store names its node: the store answers a node only in
  // the scopes of plans it has ranks in (rendezvous.hpp says what is enforced).
  if (m.match_elements<protocol::store_request>())
    return m.get_as<protocol::store_request>(0).node;
  return std::nullopt;
}

std::optional<std::string> inventory_refusal(const node_inventory& inv) {
  const std::pair<const char*, const std::string*> fields[] = {
    {"name", &inv.name}, {"zone", &inv.zone}, {"GPU type", &inv.gpu_type}, {"host", &inv.host}};
  for (auto& [what, text] : fields)
    if (text->size() > max_inventory_text || !comm::is_printable_utf8(*text))
      return std::string("the node's ") + what + " is not printable UTF-8 of at most " +
             std::to_string(max_inventory_text) + " bytes";
  if (inv.devices.size() > max_devices_per_node)
    return "the node announces " + std::to_string(inv.devices.size()) + " devices, more than " +
           std::to_string(max_devices_per_node);
  for (auto& d : inv.devices)
    if (d.kind.size() > max_inventory_text || !comm::is_printable_utf8(d.kind))
      return "a device kind is not printable UTF-8";
  return std::nullopt;
}

std::string printable(const std::string& text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && out.size() < max; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (comm::is_printable_utf8(text) && text.size() <= max)
    return text;
  return out;
}

}  // namespace sailor::actors::detail
