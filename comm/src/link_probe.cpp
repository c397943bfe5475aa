#include "sailor/comm/link_probe.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace sailor::comm {
namespace {

using clock_type = std::chrono::steady_clock;

std::vector<std::byte> word(std::uint64_t v) {
  std::vector<std::byte> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

// What the prober's connection received, for the probing thread to wait on.
struct probe_inbox {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::string failure;  ///< non-empty: the connection failed
  std::deque<std::uint64_t> replies;
};

sailor::error probe_error(const address& to, const std::string& why) {
  return sailor::error::of(error_kind::failed, "", "probe",
                           "link probe to " + to.to_string() + ": " + why);
}

// Waits for the next reply (or the connection's opening when `opening`); "" on success.
std::string await(probe_inbox& in, double timeout_s, bool opening, std::uint64_t* reply) {
  std::unique_lock lock{in.mu};
  const bool ok = in.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    return !in.failure.empty() || (opening ? in.open : !in.replies.empty());
  });
  if (!in.failure.empty())
    return in.failure;
  if (!ok)
    return std::string("no ") + (opening ? "connection" : "reply") + " within " +
           std::to_string(timeout_s) + " s";
  if (!opening) {
    *reply = in.replies.front();
    in.replies.pop_front();
  }
  return {};
}

connection_handlers prober_handlers(const std::shared_ptr<probe_inbox>& inbox) {
  connection_handlers h;
  h.on_open = [inbox] {
    std::lock_guard lock{inbox->mu};
    inbox->open = true;
    inbox->cv.notify_all();
  };
  h.on_control = [inbox](std::vector<std::byte> bytes) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof v));
    std::lock_guard lock{inbox->mu};
    inbox->replies.push_back(v);
    inbox->cv.notify_all();
  };
  h.on_error = [inbox](const transport_error& err) {
    std::lock_guard lock{inbox->mu};
    inbox->failure = err.message.empty() ? "connection failed" : err.message;
    inbox->cv.notify_all();
  };
  return h;
}

// Sends `count` tensors of `size` bytes back to back and waits for every acknowledgement; ""
// on success.
std::string send_train(connection& conn, probe_inbox& inbox, std::uint64_t size, int count, double timeout_s) {
  std::vector<std::byte> payload(size, std::byte{0x5a});
  tensor_descriptor desc;
  desc.type = dtype::u8;
  desc.shape = {static_cast<std::int64_t>(size)};
  desc.name = "link probe";
  for (int k = 0; k < count; ++k) conn.send_tensor(desc, payload, nullptr);
  // The payload stays alive until the last reply: the responder acknowledges each tensor once
  // received.
  for (int k = 0; k < count; ++k) {
    std::uint64_t reply = 0;
    if (auto why = await(inbox, timeout_s, false, &reply); !why.empty()) return std::to_string(size) + " bytes: " + why;
    if (reply != size)
      return "the responder acknowledged " + std::to_string(reply) + " bytes of " + std::to_string(size);
  }
  return {};
}

}  // namespace

accept_handler probe_responder() {
  return [](const connection_ptr& conn) {
    connection_handlers h;
    std::weak_ptr<connection> weak = conn;
    h.on_control = [weak](std::vector<std::byte> bytes) {
      if (auto c = weak.lock())
        c->send_control(std::move(bytes), nullptr);
    };
    h.on_tensor = [weak](tensor_descriptor desc, payload_buffer) {
      if (auto c = weak.lock())
        c->send_control(word(desc.bytes), nullptr);
    };
    return h;
  };
}

sailor::result<link_probe_result> probe_link(transport& t, const address& to,
                                             const probe_options& o) {
  const auto start = clock_type::now();
  auto since = [](clock_type::time_point from) {
    return std::chrono::duration<double>(clock_type::now() - from).count();
  };
  auto inbox = std::make_shared<probe_inbox>();
  auto conn = t.connect(to, prober_handlers(inbox));
  if (!conn)
    return probe_error(to, conn.error().message);
  // Closed on every way out: the responder sees a quiet disconnect.
  struct closer {
    connection_ptr c;
    ~closer() { c->close(); }
  } closing{*conn};
  std::uint64_t reply = 0;
  if (auto why = await(*inbox, o.timeout_s, true, &reply); !why.empty())
    return probe_error(to, why);
  std::vector<double> trips;
  for (int k = 0; k < std::max(1, o.pings); ++k) {
    const auto sent = clock_type::now();
    (*conn)->send_control(word(static_cast<std::uint64_t>(k)), nullptr);
    if (auto why = await(*inbox, o.timeout_s, false, &reply); !why.empty())
      return probe_error(to, "ping " + std::to_string(k + 1) + ": " + why);
    trips.push_back(since(sent));
  }
  link_probe_result out;
  // The floor of the round trips: a busy host only ever adds to a round trip, so the smallest
  // is the closest to the link's own (a median moved with the load and, subtracted from a
  // transfer below, could leave nothing of it).
  const double round_trip = *std::min_element(trips.begin(), trips.end());
  out.latency_s = round_trip / 2;
  for (const auto size : o.sizes) {
    // A train of back-to-back messages of this size, at least train_bytes long, so that the
    // transfer's time stands well above the noise of one round trip.
    const int count = static_cast<int>(std::max<std::uint64_t>(1, (o.train_bytes + size - 1) / size));
    const double bytes = static_cast<double>(size) * count;
    // Predicted from the last figure: a size that would pass the budget is left out, once
    // two sizes give the curve a shape (a slow connection on a busy host must not leave one).
    if (out.bandwidth.size() >= 2 && since(start) + round_trip + bytes / out.bandwidth.back().second > o.budget_s)
      break;
    const auto sent = clock_type::now();
    if (auto why = send_train(**conn, *inbox, size, count, o.timeout_s); !why.empty()) return probe_error(to, why);
    const double took = since(sent) - round_trip;
    // Nothing left of the transfer once the round trip is taken off: this size says nothing
    // about the bandwidth (no figure rather than an absurd one).
    if (took <= 0) continue;
    out.bandwidth.emplace_back(static_cast<double>(size), bytes / took);
  }
  out.elapsed_s = since(start);
  return out;
}

config::zone_link measured_link(const config::zone_link& configured, const link_probe_result& r) {
  config::zone_link out = configured;
  out.latency_s = r.latency_s;
  if (r.bandwidth.empty())
    return out;
  out.bandwidth_gbytes_per_s = r.bandwidth.back().second / 1e9;
  config::bandwidth_curve curve;
  for (const auto& [bytes, rate] : r.bandwidth)
    curve.points.emplace_back(bytes, rate / 1e9);
  out.curve = curve;
  return out;
}

}  // namespace sailor::comm
