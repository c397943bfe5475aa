// The link probes' messages (probe_messages.hpp) into and out of their schema structs, field
// for field; codec_write.cpp and codec_read.cpp call these for the envelope's body.

#include <algorithm>

#include "codec_internal.hpp"
#include "sailor/protocol/limits.hpp"

namespace sailor::protocol::detail {
namespace {

link_probe_request get(s::LinkProbeRequest::Reader r) {
  link_probe_request v;
  v.probe_id = r.getProbeId();
  v.kind = r.getKind();
  v.peer = r.getPeer();
  v.peer_zone = r.getPeerZone();
  v.address = r.getAddress();
  v.links = get_zone_links(r.getLinks());
  v.timeout_ms = r.getTimeoutMs();
  return v;
}

link_probe_result get(s::LinkProbeResult::Reader r) {
  link_probe_result v;
  v.probe_id = r.getProbeId();
  v.node = r.getNode();
  v.error = r.getError();
  v.address = r.getAddress();
  v.latency_s = r.getLatencyS();
  v.sizes = list_of<double>(r.getSizes());
  v.bytes_per_s = list_of<double>(r.getBytesPerS());
  v.elapsed_s = r.getElapsedS();
  return v;
}

// At most wire_bounds::probe_sizes of them.
template <class Init>
void put_doubles(Init init, const std::vector<double>& v) {
  const auto n = static_cast<unsigned>(std::min(v.size(), wire_bounds::probe_sizes));
  auto list = init(n);
  for (unsigned i = 0; i < n; ++i) list.set(i, v[i]);
}

}  // namespace

void put_probe(s::Envelope::Body::Builder b, const link_probe_request& v) {
  auto x = b.initLinkProbeRequest();
  x.setProbeId(v.probe_id);
  x.setKind(v.kind);
  x.setPeer(v.peer);
  x.setPeerZone(v.peer_zone);
  x.setAddress(v.address);
  put_zone_links(x.initLinks(static_cast<unsigned>(v.links.size())), v.links);
  x.setTimeoutMs(v.timeout_ms);
}

void put_probe(s::Envelope::Body::Builder b, const link_probe_result& v) {
  auto x = b.initLinkProbeResult();
  x.setProbeId(v.probe_id);
  x.setNode(v.node);
  x.setError(clip_text(v.error, wire_bounds::reason_bytes));
  x.setAddress(clip_text(v.address, wire_bounds::name_bytes));
  x.setLatencyS(v.latency_s);
  put_doubles([&x](unsigned n) { return x.initSizes(n); }, v.sizes);
  put_doubles([&x](unsigned n) { return x.initBytesPerS(n); }, v.bytes_per_s);
  x.setElapsedS(v.elapsed_s);
}

std::optional<message> get_probe(s::Envelope::Body::Reader b) {
  using B = s::Envelope::Body;
  switch (b.which()) {
    case B::LINK_PROBE_REQUEST: return message{get(b.getLinkProbeRequest())};
    case B::LINK_PROBE_RESULT: return message{get(b.getLinkProbeResult())};
    default: return std::nullopt;
  }
}

}  // namespace sailor::protocol::detail
