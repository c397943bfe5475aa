#include "sailor/comm/link_table.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace sailor::comm {
namespace {

std::pair<std::string, std::string> pair_of(const std::string& a, const std::string& b) {
  return a < b ? std::pair{a, b} : std::pair{b, a};
}

// A finite number filling all of `s`, or nothing.
std::optional<double> number_of(const std::string& s) {
  if (s.empty())
    return std::nullopt;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

}  // namespace

void link_table::set(config::zone_link link) {
  std::lock_guard lock{mu_};
  auto key = pair_of(link.from, link.to);
  links_[key] = std::move(link);
}

std::optional<config::zone_link> link_table::find(const std::string& a, const std::string& b) const {
  std::lock_guard lock{mu_};
  auto it = links_.find(pair_of(a, b));
  if (it == links_.end())
    return std::nullopt;
  auto l = it->second;
  l.from = a;
  l.to = b;
  return l;
}

std::size_t link_table::size() const {
  std::lock_guard lock{mu_};
  return links_.size();
}

link_lookup overridden(std::shared_ptr<const link_table> table, link_lookup fallback) {
  return [table, fallback](const std::string& a, const std::string& b) {
    if (table && a != b)
      if (auto l = table->find(a, b))
        return *l;
    return fallback ? fallback(a, b) : config::zone_link{};
  };
}

result<config::zone_link> parse_link_change(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return sailor::error::invalid_input(
      what, "'" + text + "': " + why +
              " (expected ZONE_A:ZONE_B=LATENCY_MS,MBPS, e.g. zone-a:zone-b=50,5)");
  };
  const auto eq = text.find('=');
  if (eq == std::string::npos)
    return bad("no '='");
  const std::string zones = text.substr(0, eq), figures = text.substr(eq + 1);
  const auto colon = zones.find(':');
  if (colon == std::string::npos)
    return bad("no ':' between the two zones");
  config::zone_link l;
  l.from = zones.substr(0, colon);
  l.to = zones.substr(colon + 1);
  if (l.from.empty() || l.to.empty() || l.from == l.to)
    return bad("expected two different zone names");
  const auto comma = figures.find(',');
  if (comma == std::string::npos)
    return bad("no ',' between latency and bandwidth");
  auto latency_ms = number_of(figures.substr(0, comma));
  auto mbps = number_of(figures.substr(comma + 1));
  if (!latency_ms || *latency_ms < 0 || *latency_ms > 60000)
    return bad("latency: expected milliseconds from 0 to 60000");
  if (!mbps || *mbps <= 0 || *mbps > 1e6)
    return bad("bandwidth: expected MB/s over 0 and up to 1000000");
  l.latency_s = *latency_ms / 1000;
  l.bandwidth_gbytes_per_s = *mbps / 1000;
  return l;
}

result<std::vector<config::zone_link>> read_link_changes(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    return sailor::error::not_found(file, "", "cannot read the link file");
  std::vector<config::zone_link> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#')
      continue;
    auto l = parse_link_change(line.substr(first), "link");
    if (!l) {
      auto err = l.error();
      err.file = file;
      err.line = number;
      return err;
    }
    out.push_back(std::move(*l));
  }
  return out;
}

std::string link_change_text(const config::zone_link& link) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "=%g,%g", link.latency_s * 1000, link.bandwidth_gbytes_per_s * 1000);
  return link.from + ":" + link.to + buf;
}

}  // namespace sailor::comm
