#include "sailor/actors/status_board.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace sailor::actors {
namespace {

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The word after `prefix` at the start of `text` ("node n3 lost" -> "n3").
std::string word_after(const std::string& text, const std::string& prefix) {
  if (!starts_with(text, prefix))
    return {};
  auto end = text.find(' ', prefix.size());
  return text.substr(prefix.size(), end == std::string::npos ? std::string::npos
                                                             : end - prefix.size());
}

// N of the first "plan vN" in `text`; 0 when there is none.
std::int64_t plan_version_in(const std::string& text) {
  auto at = text.find("plan v");
  if (at == std::string::npos)
    return 0;
  std::int64_t v = 0;
  bool any = false;
  for (auto k = at + 6; k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]));
       ++k) {
    v = v * 10 + (text[k] - '0');
    any = true;
  }
  return any ? v : 0;
}

template <class T>
void bound(std::deque<T>& q, std::size_t limit) {
  while (q.size() > limit)
    q.pop_front();
}

}  // namespace

board_event classify_event(const std::string& text) {
  board_event e;
  e.text = text;
  e.plan_version = plan_version_in(text);
  auto node = word_after(text, "node ");
  if (!node.empty() && text.find(" joined", 5 + node.size()) == 5 + node.size()) {
    e.kind = "join";
    e.node = node;
  } else if (!node.empty() && starts_with(text.substr(5 + node.size()), " lost: preempted")) {
    e.kind = "preempted";
    e.node = node;
  } else if (!node.empty() && starts_with(text.substr(5 + node.size()), " lost")) {
    e.kind = "lost";
    e.node = node;
  } else if (starts_with(text, "refused")) {
    e.kind = "refused";
    auto quoted = text.find('\'');
    auto end = quoted == std::string::npos ? quoted : text.find('\'', quoted + 1);
    if (end != std::string::npos)
      e.node = text.substr(quoted + 1, end - quoted - 1);
  } else if (starts_with(text, "plan v") && text.find(" resumes training") != std::string::npos) {
    e.kind = "resume";
  } else if (starts_with(text, "plan v")) {
    e.kind = "plan";
  } else if (starts_with(text, "no plan") || starts_with(text, "plan rejected")) {
    e.kind = "no_plan";
  } else if (starts_with(text, "all roles assigned")) {
    e.kind = "ready";
  } else if (starts_with(text, "stage ") && text.find(" failed on ") != std::string::npos) {
    e.kind = "failure";
  } else if (starts_with(text, "training ")) {
    e.kind = "training";
  } else {
    e.kind = "other";
  }
  return e;
}

std::string plan_cause(const std::string& reason) {
  const auto has = [&reason](const char* words) { return reason.find(words) != std::string::npos; };
  if (starts_with(reason, "node ") && has(" lost"))
    return "node_lost";
  if (starts_with(reason, "node ") && has(" joined"))
    return "node_joined";
  if (has(" drained") || has("placement rules changed") || has(" changed to ") ||
      has("the scheduler asked"))
    return "scheduler";
  if (starts_with(reason, "the checkpoint after iteration"))
    return "restore_failed";
  if (starts_with(reason, "iteration ") && has(" is not finite"))
    return "non_finite";
  if (starts_with(reason, "every node missed"))
    return "startup_failed";
  if (starts_with(reason, "quorum of") || starts_with(reason, "settle time over"))
    return "start";
  return "other";
}

status_board::status_board() : status_board(limits{}) {}

status_board::status_board(limits l)
    : limits_(l), snapshot_(std::make_shared<const board_snapshot>()) {}

void status_board::publish(board_snapshot s) {
  s.published = std::chrono::steady_clock::now();
  auto fresh = std::make_shared<const board_snapshot>(std::move(s));
  std::shared_ptr<const board_snapshot> old;
  {
    std::lock_guard lock{snapshot_mu_};
    old = std::exchange(snapshot_, std::move(fresh));
  }
  // `old` is released here, outside the lock (its last reader may be long gone).
}

std::shared_ptr<const board_snapshot> status_board::snapshot() const {
  std::lock_guard lock{snapshot_mu_};
  return snapshot_;
}

void status_board::planning(const std::string& reason) {
  std::lock_guard lock{mu_};
  planning_reason_ = reason;
  // A drift re-plan's reason is the drift watch's own words: the event line before it says.
  planning_cause_ = pending_cause_.empty() ? plan_cause(reason) : std::exchange(pending_cause_, {});
  board_event e;
  e.seq = next_seq_++;
  e.unix_ms = unix_now_ms();
  e.kind = "planning";
  e.reason = reason;
  e.text = "planning: " + reason;
  events_.push_back(std::move(e));
  bound(events_, limits_.events);
}

void status_board::add_event(const std::string& text, std::int64_t current_plan_version) {
  auto e = classify_event(text);
  std::lock_guard lock{mu_};
  e.seq = next_seq_++;
  e.unix_ms = unix_now_ms();
  if (e.plan_version == 0)
    e.plan_version = current_plan_version;
  if (starts_with(text, "re-planning on drift"))
    pending_cause_ = "drift";
  if (e.kind == "plan") {
    e.reason = std::exchange(planning_reason_, std::string{});
    const auto cause = std::exchange(planning_cause_, std::string{});
    if (std::exchange(planned_, true))
      ++counters_.replans[cause.empty() ? "other" : cause];
  }
  if ((e.kind == "lost" || e.kind == "preempted") && loss_unix_ms_ == 0)
    loss_unix_ms_ = e.unix_ms;
  events_.push_back(std::move(e));
  bound(events_, limits_.events);
}

void status_board::add_report(const train_report& r) {
  std::lock_guard lock{mu_};
  reports_.push_back(board_rank_report{r, unix_now_ms()});
  bound(reports_, limits_.reports);
}

void status_board::add_iteration(const iteration_record& r, std::int64_t plan_version,
                                 double predicted_s) {
  std::lock_guard lock{mu_};
  const auto now = unix_now_ms();
  if (!points_.empty() && r.iteration <= points_.back().iteration) {
    while (!points_.empty() && points_.back().iteration >= r.iteration)
      points_.pop_back();
    ++curve_id_;
  }
  if (marks_.empty() || marks_.back().plan_version != plan_version) {
    board_plan_mark mark{plan_version, r.iteration, now, {}, -1};
    for (auto e = events_.rbegin(); e != events_.rend(); ++e)
      if (e->kind == "plan" && e->plan_version == plan_version) {
        mark.reason = e->reason;
        if (loss_unix_ms_ != 0)
          e->recovery_s = static_cast<double>(now - loss_unix_ms_) / 1000.0;
        break;
      }
    if (loss_unix_ms_ != 0)
      mark.recovery_s = static_cast<double>(now - loss_unix_ms_) / 1000.0;
    loss_unix_ms_ = 0;
    marks_.push_back(std::move(mark));
    bound(marks_, limits_.marks);
  }
  points_.push_back(board_point{r.iteration, plan_version, now, r, predicted_s});
  bound(points_, limits_.points);
}

void status_board::add_recovery(const std::string& cause, double total_s) {
  std::lock_guard lock{mu_};
  ++counters_.recoveries[cause.empty() ? "other" : cause];
  counters_.last_recovery_s = total_s;
}

board_counters status_board::counters() const {
  std::lock_guard lock{mu_};
  return counters_;
}

status_board::metrics_page status_board::metrics(std::int64_t since, std::size_t limit) const {
  metrics_page page;
  std::lock_guard lock{mu_};
  page.curve_id = curve_id_;
  page.newest = points_.empty() ? -1 : points_.back().iteration;
  page.plans.assign(marks_.begin(), marks_.end());
  // Iterations on the curve increase: find the first one >= since by bisection.
  auto first = std::lower_bound(points_.begin(), points_.end(), since,
                                [](const board_point& p, std::int64_t v) {
                                  return p.iteration < v;
                                });
  for (auto p = first; p != points_.end(); ++p) {
    if (page.points.size() >= limit) {
      page.more = true;
      break;
    }
    page.points.push_back(*p);
  }
  return page;
}

std::vector<board_event> status_board::events() const {
  std::lock_guard lock{mu_};
  return {events_.begin(), events_.end()};
}

std::vector<board_rank_report> status_board::reports(std::int64_t iterations) const {
  std::lock_guard lock{mu_};
  std::vector<board_rank_report> out;
  if (reports_.empty())
    return out;
  const auto version = reports_.back().report.plan_version;
  std::int64_t newest = 0;
  for (auto& r : reports_)
    if (r.report.plan_version == version)
      newest = std::max(newest, r.report.iteration);
  for (auto& r : reports_)
    if (r.report.plan_version == version && r.report.error.empty() &&
        r.report.iteration > newest - iterations)
      out.push_back(r);
  return out;
}

}  // namespace sailor::actors
