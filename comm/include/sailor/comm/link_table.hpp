#pragma once
/// Emulated links changed at run time (issue 14): a table of zone links the link shaper
/// consults for every message it schedules, so a change applies to the bytes sent from then
/// on (messages already scheduled keep their release times).
///
/// The text form of one change, on command lines (`sailor demo --link-change`) and in the
/// file a node reads again on SIGUSR2 (`sailor-node --link-file`), one per line:
///
///   ZONE_A:ZONE_B=LATENCY_MS,MBPS      e.g.  zone-a:zone-b=50,5
///
/// (both directions; MB/s are 1e6 bytes per second).

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sailor/comm/shaping.hpp"
#include "sailor/config/cluster.hpp"
#include "sailor/config/error.hpp"

namespace sailor::comm {

/// Zone links set at run time, shared between threads.
class link_table {
public:
  /// The link between `link.from` and `link.to` (either direction) is `link` from now on.
  void set(config::zone_link link);
  /// The link set between `a` and `b`, if any.
  std::optional<config::zone_link> find(const std::string& a, const std::string& b) const;
  std::size_t size() const;

private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, config::zone_link> links_;
};

/// `fallback`'s links with the table's over them (looked up on every call).
link_lookup overridden(std::shared_ptr<const link_table> table, link_lookup fallback);

/// One change in the text form above; an error names `what` (an option, or FILE:LINE) and
/// what was expected.
result<config::zone_link> parse_link_change(const std::string& text, const std::string& what);

/// Every change in `file` (blank lines and lines starting with '#' skipped): all of them, or
/// an error naming the file and line of the first bad one.
result<std::vector<config::zone_link>> read_link_changes(const std::string& file);

/// The text form of `link` ("a:b=50,5").
std::string link_change_text(const config::zone_link& link);

}  // namespace sailor::comm
