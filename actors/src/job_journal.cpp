// The coordinator's journal: records written as CRC-checked JSON lines, read back up to the
// last whole record (job_journal.hpp).
#include "sailor/actors/job_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sailor/config/private_files.hpp"

namespace sailor::actors {
namespace {

using json = nlohmann::json;

std::string crc_hex(const std::string& text) {
  const auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(text.data()),
                           static_cast<uInt>(text.size()));
  char out[9];
  std::snprintf(out, sizeof out, "%08lx", static_cast<unsigned long>(crc));
  return out;
}

json iteration_json(const iteration_record& r) {
  json j{{"t", "iteration"},  {"i", r.iteration},       {"loss", r.loss},
         {"s", r.measured_s}, {"compute_s", r.compute_s}, {"tokens", r.tokens}};
  if (r.val_loss)
    j["val"] = *r.val_loss;
  return j;
}

iteration_record iteration_of(const json& j) {
  iteration_record r;
  r.iteration = j.at("i").get<std::int64_t>();
  // JSON has no NaN: a loss that was not finite is written as null.
  r.loss = j.at("loss").is_number() ? j.at("loss").get<double>()
                                    : std::numeric_limits<double>::quiet_NaN();
  r.measured_s = j.value("s", 0.0);
  r.compute_s = j.value("compute_s", 0.0);
  r.tokens = j.value("tokens", std::int64_t{0});
  if (j.contains("val"))
    r.val_loss = j.at("val").get<double>();
  return r;
}

json recovery_json(const recovery_record& r) {
  return json{{"t", "recovery"},
              {"cause", r.cause},
              {"plan", r.plan_version},
              {"start", r.start_iteration},
              {"lost", r.lost_iterations},
              {"source", r.state_source},
              {"bytes", r.bytes_restored},
              {"planning_s", r.planning_s},
              {"setup_s", r.setup_s},
              {"restore_s", r.restore_s},
              {"first_iteration_s", r.first_iteration_s},
              {"total_s", r.total_s}};
}

recovery_record recovery_of(const json& j) {
  recovery_record r;
  r.cause = j.at("cause").get<std::string>();
  r.plan_version = j.at("plan").get<std::int64_t>();
  r.start_iteration = j.at("start").get<int>();
  r.lost_iterations = j.at("lost").get<int>();
  r.state_source = j.at("source").get<std::string>();
  r.bytes_restored = j.at("bytes").get<std::int64_t>();
  r.planning_s = j.at("planning_s").get<double>();
  r.setup_s = j.at("setup_s").get<double>();
  r.restore_s = j.at("restore_s").get<double>();
  r.first_iteration_s = j.at("first_iteration_s").get<double>();
  r.total_s = j.at("total_s").get<double>();
  return r;
}

// Adds one record to what was read; throws (json's exceptions, or std::runtime_error) when it
// is not one this reader knows or comes out of order.
void add_record(journal_contents& c, const json& j) {
  const auto kind = j.at("t").get<std::string>();
  if (kind == "job") {
    if (c.identity)
      throw std::runtime_error("a second job record");
    c.identity = journal_identity{j.at("job").get<std::string>(), j.at("model").get<std::string>(),
                                  j.at("token").get<std::string>()};
    return;
  }
  if (!c.identity)
    throw std::runtime_error("a '" + kind + "' record before the job record");
  if (kind == "plan") {
    journal_plan p;
    p.version = j.at("version").get<std::int64_t>();
    p.start_iteration = j.at("start").get<int>();
    p.nodes = j.at("nodes").get<std::vector<std::string>>();
    p.plan_yaml = j.at("plan").get<std::string>();
    if (p.version <= c.plan_version())
      throw std::runtime_error("plan v" + std::to_string(p.version) + " after plan v" +
                               std::to_string(c.plan_version()));
    c.plans.push_back(std::move(p));
  } else if (kind == "iteration") {
    auto r = iteration_of(j);
    auto at = std::lower_bound(c.iterations.begin(), c.iterations.end(), r.iteration,
                               [](const iteration_record& a, std::int64_t i) { return a.iteration < i; });
    if (at != c.iterations.end() && at->iteration == r.iteration)
      *at = r;  // run again after a recovery: the record of the run that counts
    else
      c.iterations.insert(at, r);
  } else if (kind == "recovery") {
    c.recoveries.push_back(recovery_of(j));
  } else if (kind == "validation") {
    c.initial_val_loss = j.at("val").get<double>();
  } else if (kind == "checkpoint") {
    const int iterations = j.at("iterations").get<int>();
    if (iterations >= c.checkpoint_iterations) {
      c.checkpoint_iterations = iterations;
      c.checkpoint_folder = j.at("folder").get<std::string>();
    }
  } else {
    throw std::runtime_error("an unknown record '" + kind + "'");
  }
}

// One line: the record's JSON when its CRC matches, else why not.
std::optional<json> parse_line(const std::string& line, std::string& why) {
  if (line.size() < 10 || line[8] != ' ') {
    why = "not '<crc> <json>'";
    return std::nullopt;
  }
  const auto text = line.substr(9);
  if (crc_hex(text) != line.substr(0, 8)) {
    why = "its CRC does not match";
    return std::nullopt;
  }
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    why = "not a JSON object";
    return std::nullopt;
  }
  return j;
}

sailor::error refused(const std::string& path, int line, const std::string& why) {
  return sailor::error::invalid_input(path, "journal",
                                      "line " + std::to_string(line) + " " + why +
                                        " (the journal is left as it is; move it away to start "
                                        "the job's record afresh)")
    .at_line(line);
}

std::string identity_words(const journal_identity& id) {
  return "model " + id.model +
         (id.token_digest.empty() ? ", no job token" : ", token " + id.token_digest.substr(0, 12));
}

}  // namespace

int journal_contents::completed() const {
  int n = 0;
  for (const auto& r : iterations) {
    if (r.iteration != n)
      break;
    ++n;
  }
  return n;
}

result<journal_contents> read_journal(const std::string& path) {
  journal_contents c;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT)
      return c;
    return sailor::error::invalid_input(path, "journal", "cannot read it: " + std::string{std::strerror(errno)});
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string all = buffer.str();
  std::size_t at = 0;
  int line_number = 0;
  while (at < all.size()) {
    ++line_number;
    const auto end = all.find('\n', at);
    if (end == std::string::npos) {  // the last record, cut short
      c.cut = true;
      break;
    }
    const std::string line = all.substr(at, end - at);
    std::string why;
    auto j = parse_line(line, why);
    if (!j) {
      if (end + 1 == all.size()) {  // a torn last record: the end of the journal
        c.cut = true;
        break;
      }
      return refused(path, line_number, why);
    }
    try {
      add_record(c, *j);
    } catch (const std::exception& e) {
      return refused(path, line_number, std::string{"is not a record this journal can hold: "} + e.what());
    }
    ++c.records;
    at = end + 1;
    c.whole_bytes = at;
  }
  return c;
}

result<std::unique_ptr<job_journal>> job_journal::open(const std::string& path,
                                                       const journal_identity& who,
                                                       journal_contents& previous) {
  auto read = read_journal(path);
  if (!read)
    return read.error();
  if (read->identity &&
      (read->identity->model != who.model || read->identity->token_digest != who.token_digest))
    return sailor::error::invalid_input(
      path, "journal",
      "it belongs to another job (" + identity_words(*read->identity) + "; this one: " +
        identity_words(who) + "); it is left as it is: give this job another --train-dir, or "
        "move the journal away to start its record afresh");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, files::private_file_mode);
  if (fd < 0)
    return sailor::error::invalid_input(path, "journal", "cannot open it for writing: " +
                                                            std::string{std::strerror(errno)});
  // A record cut short is cut off, so that the next one starts on a line of its own.
  if (::ftruncate(fd, static_cast<off_t>(read->whole_bytes)) != 0 ||
      ::lseek(fd, 0, SEEK_END) < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return sailor::error::failed(path + ": cannot cut the record cut short off its end: " + why);
  }
  std::unique_ptr<job_journal> j{new job_journal{path, fd}};
  if (!read->identity) {
    auto err = j->append(json{{"t", "job"}, {"job", who.job}, {"model", who.model},
                              {"token", who.token_digest}}.dump(),
                         true);
    if (err)
      return *err;
  }
  previous = std::move(*read);
  return j;
}

job_journal::~job_journal() {
  if (fd_ >= 0) {
    if (dirty_)
      ::fdatasync(fd_);
    ::close(fd_);
  }
}

status job_journal::append(const std::string& text, bool durable) {
  const std::string line = crc_hex(text) + " " + text + "\n";
  // One write per record: a process killed mid-record leaves a prefix, which the reader cuts.
  std::size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return sailor::error::failed(path_ + ": cannot append to the journal: " + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  dirty_ = true;
  const auto now = std::chrono::steady_clock::now();
  if (durable || now - last_sync_ >= std::chrono::seconds{1})
    return sync();
  return {};
}

status job_journal::sync() {
  if (!dirty_)
    return {};
  if (::fdatasync(fd_) != 0)
    return sailor::error::failed(path_ + ": cannot sync the journal: " + std::strerror(errno));
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
  return {};
}

status job_journal::plan(const journal_plan& p) {
  return append(json{{"t", "plan"},
                     {"version", p.version},
                     {"start", p.start_iteration},
                     {"nodes", p.nodes},
                     {"plan", p.plan_yaml}}
                  .dump(),
                true);
}

status job_journal::iteration(const iteration_record& r) {
  return append(iteration_json(r).dump(), false);
}

status job_journal::recovery(const recovery_record& r) {
  return append(recovery_json(r).dump(), true);
}

status job_journal::initial_validation(double val_loss) {
  return append(json{{"t", "validation"}, {"val", val_loss}}.dump(), false);
}

status job_journal::checkpoint(int iterations, const std::string& folder) {
  return append(json{{"t", "checkpoint"}, {"iterations", iterations}, {"folder", folder}}.dump(),
                false);
}

}  // namespace sailor::actors
