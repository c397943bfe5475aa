#include "node_probes.hpp"

#include <algorithm>

#include "sailor/comm/link_probe.hpp"
#include "sailor/comm/shaping.hpp"
#include "sailor/config/log.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::node {

node_probes::node_probes(comm::transport_maker make, comm::transport_options options,
                         std::string advertise, std::shared_ptr<const comm::link_table> changed)
  : make_(std::move(make)), options_(std::move(options)), advertise_(std::move(advertise)),
    changed_(std::move(changed)) {}

node_probes::~node_probes() {
  wait();
  std::lock_guard lock{mu_};
  responder_.reset();
  transport_.reset();
}

std::string node_probes::ensure_transport() {
  if (transport_) return {};
  auto inner = make_(options_);
  if (!inner) return "no transport: " + inner.error().message;
  // The requests' links, between zones (a zone with itself, or a pair none names: unshaped),
  // with --link-file's changes over them, as the ranks' data plane shapes its transfers.
  auto state = emulated_;
  comm::link_lookup lookup = [state](const std::string& a, const std::string& b) {
    std::lock_guard lock{state->mu};
    if (!a.empty() && !b.empty() && a != b)
      for (const auto& l : state->links)
        if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l;
    return config::zone_link{};
  };
  transport_ = comm::make_shaped_transport(std::move(*inner), comm::overridden(changed_, lookup));
  return {};
}

void node_probes::wait() {
  std::vector<std::thread> running;
  {
    std::lock_guard lock{mu_};
    running.swap(probes_);
  }
  for (auto& t : running) t.join();
}

void node_probes::handle(const protocol::link_probe_request& request,
                         std::function<void(protocol::link_probe_result)> answer) {
  protocol::link_probe_result out;
  out.probe_id = request.probe_id;
  out.node = options_.local_name;
  {
    std::lock_guard lock{emulated_->mu};
    emulated_->links = request.links;
  }
  std::lock_guard lock{mu_};
  if (auto why = ensure_transport(); !why.empty()) {
    out.error = why;
    answer(std::move(out));
    return;
  }
  if (request.kind == "serve") {
    if (!responder_) {
      auto listening = transport_->listen(comm::address{advertise_, 0}, comm::probe_responder());
      if (!listening) {
        out.error = "cannot listen on " + advertise_ + ": " + listening.error().message;
        answer(std::move(out));
        return;
      }
      responder_ = std::move(*listening);
    }
    out.address = responder_->local_address().to_string();
    log::get("comm")->info("[node {}] serving a link probe from {} ({}) on {}", out.node,
                           request.peer, request.peer_zone, out.address);
    answer(std::move(out));
    return;
  }
  if (request.kind != "probe") {
    out.error = "unknown link probe kind '" + protocol::clip_text(request.kind, 64) + "'";
    answer(std::move(out));
    return;
  }
  probes_.emplace_back([this, request, answer = std::move(answer)]() mutable {
    probe(std::move(request), std::move(answer));
  });
}

void node_probes::probe(protocol::link_probe_request request,
                        std::function<void(protocol::link_probe_result)> answer) {
  protocol::link_probe_result out;
  out.probe_id = request.probe_id;
  out.node = options_.local_name;
  auto to = comm::address::parse(request.address);
  if (!to) {
    out.error = "address '" + protocol::clip_text(request.address, 256) + "': " + to.error().message;
    answer(std::move(out));
    return;
  }
  comm::probe_options o;
  o.timeout_s = std::clamp(static_cast<double>(request.timeout_ms) / 1000.0, 0.1, 60.0);
  auto r = comm::probe_link(*transport_, *to, o);  // transport_ lives until every probe ended
  if (!r) {
    out.error = protocol::clip_text(r.error().message, protocol::wire_bounds::reason_bytes);
  } else {
    out.latency_s = r->latency_s;
    for (const auto& [bytes, rate] : r->bandwidth) {
      out.sizes.push_back(bytes);
      out.bytes_per_s.push_back(rate);
    }
    out.elapsed_s = r->elapsed_s;
  }
  log::get("comm")->info("[node {}] [link {}->{}] probe of {} at {}: {}", out.node,
                         options_.local_zone, request.peer_zone, request.peer, request.address,
                         out.error.empty() ? "done" : out.error);
  answer(std::move(out));
}

}  // namespace sailor::node
