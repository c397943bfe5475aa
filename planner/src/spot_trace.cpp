#include "sailor/planner/spot_trace.hpp"

#include "sailor/config/pools.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sailor::planner {

namespace {

std::string tick_field(int tick) { return "tick " + std::to_string(tick); }

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  for (auto& c : out) {
    while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.pop_back();
    while (!c.empty() && std::isspace(static_cast<unsigned char>(c.front()))) c.erase(c.begin());
  }
  return out;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `v100` -> the catalog's V100 type: an exact name first, then the one type whose name before
// its first '-' matches (case-insensitive).
std::string match_gpu(const std::string& token, const config::gpu_catalog& catalog) {
  if (catalog.find(token)) return token;
  std::string found;
  for (const auto& g : catalog.gpus()) {
    if (!config::pool_base_type(g.name).empty()) continue;  // a trace counts a type, not a pool
    const std::string family = lower(g.name.substr(0, g.name.find('-')));
    if (lower(g.name) == lower(token)) return g.name;
    if (family == lower(token)) {
      if (!found.empty()) return "";  // ambiguous
      found = g.name;
    }
  }
  return found;
}

result<int> parse_count(const std::string& cell, const std::string& file, int line, const std::string& field) {
  try {
    size_t used = 0;
    long long n = std::stoll(cell, &used);
    if (used != cell.size()) throw std::invalid_argument(cell);
    if (n < 0) return error::invalid_input(file, field, "negative count " + std::to_string(n)).at_line(line);
    if (n > 1000000) return error::invalid_input(file, field, "count " + std::to_string(n) + " is beyond any cluster").at_line(line);
    return static_cast<int>(n);
  } catch (const std::exception&) {
    return error::invalid_input(file, field, "expected a count, found '" + cell + "'").at_line(line);
  }
}

}  // namespace

double availability_timeline::duration_s(int tick) const {
  return (tick + 1 < ticks() ? start_s[tick + 1] : end_s) - start_s[tick];
}

int availability_timeline::total(int tick) const {
  int n = 0;
  for (int c : counts[tick]) n += c;
  return n;
}

availability availability_timeline::at(int tick) const {
  availability a;
  for (size_t c = 0; c < columns.size(); ++c)
    if (counts[tick][c] > 0) a[columns[c].gpu_type][columns[c].zone] += counts[tick][c];
  return a;
}

result<availability_timeline> read_sailor_trace_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error::not_found(path, "", "cannot open file");
  std::string line;
  if (!std::getline(in, line)) return error::invalid_input(path, "", "empty trace (expected a header ,Timestamp,GPU_zone,...)").at_line(1);
  const auto header = split_csv(line);
  if (header.size() < 3 || lower(header[1]) != "timestamp")
    return error::invalid_input(path, "header", "expected ',Timestamp,GPU_zone,...', found '" + line + "'").at_line(1);
  availability_timeline t;
  for (size_t i = 2; i < header.size(); ++i) {
    const auto pos = header[i].find('_');
    if (pos == std::string::npos || pos == 0 || pos + 1 == header[i].size())
      return error::invalid_input(path, "column " + header[i], "expected GPU_zone (such as A100-40_us-central1-a)").at_line(1);
    t.columns.push_back({header[i].substr(0, pos), header[i].substr(pos + 1), path});
  }
  std::vector<double> stamps;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const int tick = static_cast<int>(t.counts.size());
    const auto cells = split_csv(line);
    if (cells.size() != header.size())
      return error::invalid_input(path, tick_field(tick),
                                  "expected " + std::to_string(header.size()) + " cells, found " + std::to_string(cells.size())).at_line(line_no);
    double stamp = 0;
    try {
      stamp = std::stod(cells[1]);
    } catch (const std::exception&) {
      return error::invalid_input(path, tick_field(tick) + ", Timestamp", "expected seconds, found '" + cells[1] + "'").at_line(line_no);
    }
    if (!stamps.empty() && stamp <= stamps.back())
      return error::invalid_input(path, tick_field(tick),
                                  "ticks out of order: timestamp " + cells[1] + " is not after the previous tick's").at_line(line_no);
    std::vector<int> row;
    for (size_t i = 2; i < cells.size(); ++i) {
      auto n = parse_count(cells[i], path, line_no, tick_field(tick) + ", column " + header[i]);
      if (!n) return n.error();
      row.push_back(*n);
    }
    stamps.push_back(stamp);
    t.counts.push_back(std::move(row));
  }
  if (stamps.empty()) return error::invalid_input(path, "", "empty trace (a header and no ticks)").at_line(2);
  for (double s : stamps) t.start_s.push_back(s - stamps.front());
  t.tick_s = stamps.size() > 1 ? (stamps.back() - stamps.front()) / double(stamps.size() - 1) : 60.0;
  t.end_s = t.start_s.back() + t.tick_s;
  return t;
}

result<availability_timeline> read_spot_trace_json(const std::string& path, const config::gpu_catalog& catalog) {
  std::ifstream in(path);
  if (!in) return error::not_found(path, "", "cannot open file");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return error::invalid_input(path, "", std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_array())
    return error::invalid_input(path, "data", "expected {\"metadata\": {\"gap_seconds\": S}, \"data\": [count per tick, ...]}");
  const auto meta = doc.value("metadata", nlohmann::json::object());
  double gap = 0;
  if (meta.contains("gap_seconds") && meta["gap_seconds"].is_number()) gap = meta["gap_seconds"].get<double>();
  if (!(gap > 0)) return error::invalid_input(path, "metadata.gap_seconds", "expected a positive tick length in seconds");
  // Zone and GPU type: the metadata's, else the file name's `<zone>_<gpu>_...`.
  const std::string stem = std::filesystem::path(path).stem().string();
  const auto cut = stem.find('_');
  std::string zone = meta.value("zone", cut == std::string::npos ? std::string() : stem.substr(0, cut));
  std::string gpu_token = meta.value("gpu", std::string());
  if (gpu_token.empty() && cut != std::string::npos) {
    const auto rest = stem.substr(cut + 1);
    gpu_token = rest.substr(0, rest.find('_'));
  }
  if (zone.empty() || gpu_token.empty())
    return error::invalid_input(path, "metadata.zone/metadata.gpu",
                                "no zone or GPU type: give them in the metadata or name the file <zone>_<gpu>_*.json");
  const std::string gpu = match_gpu(gpu_token, catalog);
  if (gpu.empty()) return error::invalid_input(path, "gpu", "unknown GPU type '" + gpu_token + "' (not one of the catalog's types)");
  availability_timeline t;
  t.tick_s = gap;
  t.columns.push_back({gpu, zone, path});
  const auto& data = doc["data"];
  for (size_t i = 0; i < data.size(); ++i) {
    const int tick = static_cast<int>(i);
    const std::string field = "data[" + std::to_string(i) + "] (" + tick_field(tick) + ")";
    if (!data[i].is_number_integer()) return error::invalid_input(path, field, "expected a count, found " + data[i].dump());
    auto n = parse_count(std::to_string(data[i].get<long long>()), path, 0, field);
    if (!n) return n.error();
    t.start_s.push_back(gap * double(i));
    t.counts.push_back({*n});
  }
  if (t.start_s.empty()) return error::invalid_input(path, "data", "empty trace (no ticks)");
  t.end_s = gap * double(data.size());
  return t;
}

result<availability_timeline> read_trace(const std::string& path, const config::gpu_catalog& catalog) {
  const std::string ext = lower(std::filesystem::path(path).extension().string());
  if (ext == ".csv") return read_sailor_trace_csv(path);
  if (ext == ".json") return read_spot_trace_json(path, catalog);
  return error::invalid_input(path, "", "unknown trace format: expected a .csv (Sailor's) or .json (spot-traces) file");
}

result<availability_timeline> combine(const std::vector<availability_timeline>& parts) {
  if (parts.empty()) return error::invalid_input("--trace", "no trace given");
  if (parts.size() == 1) return parts.front();
  availability_timeline out;
  out.tick_s = std::numeric_limits<double>::infinity();
  out.end_s = std::numeric_limits<double>::infinity();
  std::vector<double> times;
  for (const auto& p : parts) {
    for (const auto& c : p.columns) {
      for (const auto& o : out.columns)
        if (o.gpu_type == c.gpu_type && o.zone == c.zone)
          return error::invalid_input(c.source, c.gpu_type + "_" + c.zone, "the same GPU type and zone as " + o.source);
      out.columns.push_back(c);
    }
    out.tick_s = std::min(out.tick_s, p.tick_s);
    out.end_s = std::min(out.end_s, p.end_s);
    times.insert(times.end(), p.start_s.begin(), p.start_s.end());
  }
  for (const auto& p : parts)
    if (p.end_s > out.end_s)
      out.notes.push_back(p.columns.front().source + ": cut to the common span (" + std::to_string(int(out.end_s)) +
                          " s of " + std::to_string(int(p.end_s)) + " s)");
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  std::vector<size_t> at(parts.size(), 0);  // each part's tick in force
  for (double t : times) {
    if (t >= out.end_s) break;
    std::vector<int> row;
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto& p = parts[i];
      while (at[i] + 1 < p.start_s.size() && p.start_s[at[i] + 1] <= t) ++at[i];
      row.insert(row.end(), p.counts[at[i]].begin(), p.counts[at[i]].end());
    }
    out.start_s.push_back(t);
    out.counts.push_back(std::move(row));
  }
  return out;
}

result<availability_timeline> read_traces(const std::vector<std::string>& paths, const config::gpu_catalog& catalog) {
  std::vector<availability_timeline> parts;
  for (const auto& p : paths) {
    auto t = read_trace(p, catalog);
    if (!t) return t.error();
    parts.push_back(std::move(*t));
  }
  return combine(parts);
}

status check_timeline(const availability_timeline& t, const config::cluster& cluster, bool require_zones) {
  for (const auto& c : t.columns) {
    if (!cluster.gpus.find(c.gpu_type))
      return error::invalid_input(c.source, "column " + c.gpu_type + "_" + c.zone + ", tick 0",
                                  "unknown GPU type '" + c.gpu_type + "' (not in the cluster's catalog)");
    if (require_zones && !cluster.find_zone(c.zone))
      return error::invalid_input(c.source, "column " + c.gpu_type + "_" + c.zone + ", tick 0",
                                  "unknown zone '" + c.zone + "' (not in the cluster " + cluster.name + ")");
  }
  if (t.ticks() == 0) return error::invalid_input(t.columns.empty() ? "" : t.columns.front().source, "", "no ticks");
  if (t.total(0) == 0) {
    int first = -1;
    for (int i = 0; i < t.ticks() && first < 0; ++i)
      if (t.total(i) > 0) first = i;
    std::string files;
    for (const auto& c : t.columns)
      if (files.find(c.source) == std::string::npos) files += (files.empty() ? "" : ", ") + c.source;
    return error::invalid_input(files, "tick 0",
                                "no GPU available at the start" +
                                    (first < 0 ? std::string(" nor at any later tick")
                                               : " (the first tick with capacity is tick " + std::to_string(first) +
                                                     "; --skip-empty-start begins there)"));
  }
  return std::nullopt;
}

availability_timeline from_first_capacity(availability_timeline t, int* skipped) {
  int first = 0;
  while (first < t.ticks() && t.total(first) == 0) ++first;
  if (skipped) *skipped = first == t.ticks() ? 0 : first;
  if (first == 0 || first == t.ticks()) return t;
  const double shift = t.start_s[first];
  t.start_s.erase(t.start_s.begin(), t.start_s.begin() + first);
  t.counts.erase(t.counts.begin(), t.counts.begin() + first);
  for (auto& s : t.start_s) s -= shift;
  t.end_s -= shift;
  t.notes.push_back("started at tick " + std::to_string(first) + ", the first with capacity");
  return t;
}

config::cluster cluster_for(const availability_timeline& t, config::cluster base) {
  for (const auto& c : t.columns) base.add_zone(c.zone);
  return base;
}

int add_pool_columns(availability_timeline& t, const config::cluster& cluster) {
  int added = 0;
  for (const auto& z : cluster.zones)
    for (const auto& [type, count] : z.gpus) {
      if (config::pool_base_type(type).empty() || count <= 0) continue;
      t.columns.push_back({type, z.name, "cluster pool " + type + "@" + z.name});
      for (auto& row : t.counts) row.push_back(count);
      ++added;
    }
  if (added > 0) t.notes.push_back(std::to_string(added) + " pool column(s) of constant count from the cluster");
  return added;
}

}  // namespace sailor::planner
