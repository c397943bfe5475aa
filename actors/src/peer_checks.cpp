#include "peer_checks.hpp"

#include "sailor/actors/probe_messages.hpp"
#include "sailor/actors/rendezvous.hpp"
#include "sailor/actors/scheduler_api.hpp"
#include "sailor/actors/train_messages.hpp"
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
  // A link probe's answer is the answering node's measurement.
  if (m.match_elements<protocol::link_probe_result>())
    return m.get_as<protocol::link_probe_result>(0).node;
  return std::nullopt;
}

namespace {

bool is_scheduler_message(const caf::message& m) {
  return m.match_elements<plan_request>() || m.match_elements<plan_reply>() ||
         m.match_elements<availability_event>() || m.match_elements<iteration_telemetry>() ||
         m.match_elements<plan_applied>() || m.match_elements<plan_refused>() ||
         m.match_elements<replan_finished>() || m.match_elements<protocol::scheduler_hello>() ||
         m.match_elements<protocol::scheduler_request>() ||
         m.match_elements<protocol::scheduler_reply>();
}

}  // namespace

std::optional<std::string> scheduler_refusal(const std::string& peer_name,
                                             const std::string& destination,
                                             const caf::message& body) {
  const bool to_scheduler = destination == protocol::scheduler_gate_actor ||
                            destination == protocol::scheduler_host_actor;
  if (is_scheduler_message(body) && !to_scheduler)
    return "a scheduler message for actor '" + printable(destination) + "'";
  const bool named = !peer_name.empty();
  if (named && destination == protocol::scheduler_gate_actor &&
      peer_name != protocol::scheduler_peer_name)
    return "a message for the scheduler gate from the connection of '" + printable(peer_name) +
           "', which is not the scheduler's";
  if (named && peer_name == protocol::scheduler_peer_name)
    if (auto node = node_spoken_for(body))
      return "a message for node '" + printable(*node) + "' from the scheduler's connection";
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
