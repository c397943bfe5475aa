#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sailor/actors/job_journal.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sailor::actors;

struct journal_dir {
  fs::path dir = fs::temp_directory_path() / ("sailor-journal-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  journal_dir() { fs::create_directories(dir); }
  ~journal_dir() { fs::remove_all(dir); }
  std::string path() const { return (dir / "journal").string(); }
};

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

const journal_identity job_a{"job-a", "tiny", "digest-a"};

iteration_record it(int i, double loss) {
  iteration_record r;
  r.iteration = i;
  r.loss = loss;
  r.measured_s = 0.1;
  r.tokens = 64;
  return r;
}

// A journal of plan v1 (iterations 0-4, a validation after 4), a recovery, plan v2
// (iterations 3-5, run again from a checkpoint after 3).
void write_sample(const std::string& path) {
  journal_contents previous;
  auto j = job_journal::open(path, job_a, previous);
  REQUIRE(j);
  CHECK(previous.records == 0);
  REQUIRE_FALSE((*j)->plan({1, 0, {"n1", "n2"}, "stages: []\n"}));
  REQUIRE_FALSE((*j)->initial_validation(4.5));
  for (int i = 0; i < 5; ++i) {
    auto r = it(i, 4.0 - 0.1 * i);
    if (i == 4)
      r.val_loss = 3.7;
    REQUIRE_FALSE((*j)->iteration(r));
  }
  REQUIRE_FALSE((*j)->checkpoint(3, "checkpoints/j/v1"));
  REQUIRE_FALSE((*j)->plan({2, 3, {"n1"}, "stages: []\n"}));
  recovery_record rec;
  rec.cause = "loss";
  rec.plan_version = 2;
  rec.start_iteration = 3;
  rec.lost_iterations = 2;
  rec.state_source = "checkpoint";
  rec.total_s = 1.25;
  REQUIRE_FALSE((*j)->recovery(rec));
  for (int i = 3; i < 6; ++i)
    REQUIRE_FALSE((*j)->iteration(it(i, 3.0 - 0.1 * i)));
}

}  // namespace

TEST_CASE("journal: what a coordinator wrote is read back, an iteration run again counted once") {
  journal_dir d;
  write_sample(d.path());
  auto c = read_journal(d.path());
  REQUIRE(c);
  REQUIRE(c->identity);
  CHECK(c->identity->job == "job-a");
  CHECK(c->identity->token_digest == "digest-a");
  CHECK(c->plan_version() == 2);
  REQUIRE(c->plans.size() == 2);
  CHECK(c->plans[0].nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(c->plans[1].start_iteration == 3);
  REQUIRE(c->iterations.size() == 6);
  CHECK(c->completed() == 6);
  CHECK(c->iterations[2].loss == doctest::Approx(3.8));
  CHECK(c->iterations[4].loss == doctest::Approx(2.6));  // the run after the recovery
  CHECK_FALSE(c->iterations[4].val_loss);
  REQUIRE(c->initial_val_loss);
  CHECK(*c->initial_val_loss == 4.5);
  CHECK(c->checkpoint_iterations == 3);
  CHECK(c->checkpoint_folder == "checkpoints/j/v1");
  REQUIRE(c->recoveries.size() == 1);
  CHECK(c->recoveries[0].lost_iterations == 2);
  CHECK(c->recoveries[0].total_s == 1.25);
  CHECK_FALSE(c->cut);
}

TEST_CASE("journal: a record cut short ends it, and is cut off before the next append") {
  journal_dir d;
  write_sample(d.path());
  const auto whole = file_text(d.path());
  for (std::size_t cut : {std::size_t{1}, std::size_t{7}, std::size_t{20}}) {
    CAPTURE(cut);
    // Half a record more: a process killed mid-write.
    const std::string half = "0123abcd {\"t\":\"iteration\",\"i\":6,\"lo";
    write_text(d.path(), whole + half.substr(0, cut));
    auto c = read_journal(d.path());
    REQUIRE(c);
    CHECK(c->cut);
    CHECK(c->iterations.size() == 6);
    CHECK(c->whole_bytes == whole.size());
  }
  // A torn last line that has its newline (the CRC finds it) is the end too.
  write_text(d.path(), whole + "0123abcd {\"t\":\"iteration\",\"i\":6}\n");
  auto torn = read_journal(d.path());
  REQUIRE(torn);
  CHECK(torn->cut);
  journal_contents previous;
  auto j = job_journal::open(d.path(), job_a, previous);
  REQUIRE(j);
  CHECK(previous.iterations.size() == 6);
  REQUIRE_FALSE((*j)->iteration(it(6, 2.0)));
  j->reset();
  auto after = read_journal(d.path());
  REQUIRE(after);
  CHECK_FALSE(after->cut);
  CHECK(after->completed() == 7);
}

TEST_CASE("journal: one of another model or token, or damaged inside, is refused and left as it is") {
  journal_dir d;
  write_sample(d.path());
  const auto whole = file_text(d.path());
  journal_contents previous;
  // The job's folder name is not compared: a run folder that moved keeps its journal.
  CHECK(job_journal::open(d.path(), journal_identity{"job-moved", "tiny", "digest-a"}, previous));
  CHECK(file_text(d.path()) == whole);
  for (const auto& other : {journal_identity{"job-a", "tiny", "digest-b"},
                            journal_identity{"job-a", "tiny", ""},
                            journal_identity{"job-a", "gpt2", "digest-a"}}) {
    auto j = job_journal::open(d.path(), other, previous);
    REQUIRE_FALSE(j);
    CHECK(j.error().file == d.path());
    CHECK(j.error().message.find("another job") != std::string::npos);
    CHECK(file_text(d.path()) == whole);
  }
  // One byte changed in the second record: its CRC no longer matches.
  auto damaged = whole;
  const auto second = damaged.find('\n') + 12;
  damaged[second] = damaged[second] == 'x' ? 'y' : 'x';
  write_text(d.path(), damaged);
  auto j = job_journal::open(d.path(), job_a, previous);
  REQUIRE_FALSE(j);
  CHECK(j.error().file == d.path());
  CHECK(j.error().line == 2);
  CHECK(j.error().message.find("CRC") != std::string::npos);
  CHECK(file_text(d.path()) == damaged);
  // Not a journal at all.
  write_text(d.path(), "stages:\n  - layers: 3\n");
  CHECK_FALSE(job_journal::open(d.path(), job_a, previous));
  CHECK(file_text(d.path()) == "stages:\n  - layers: 3\n");
}

TEST_CASE("journal: plan versions only go up, and a new journal starts with the job") {
  journal_dir d;
  journal_contents previous;
  {
    auto j = job_journal::open(d.path(), job_a, previous);
    REQUIRE(j);
    REQUIRE_FALSE((*j)->plan({3, 0, {}, ""}));
    REQUIRE_FALSE((*j)->plan({2, 0, {}, ""}));  // written; the reader refuses it
  }
  auto c = read_journal(d.path());
  REQUIRE_FALSE(c);
  CHECK(c.error().line == 3);
  CHECK(c.error().message.find("plan v2 after plan v3") != std::string::npos);
}

TEST_CASE("journal: a thousand iterations take about a hundred kilobytes") {
  journal_dir d;
  journal_contents previous;
  {
    auto j = job_journal::open(d.path(), job_a, previous);
    REQUIRE(j);
    REQUIRE_FALSE((*j)->plan({1, 0, {"n1"}, "stages: []\n"}));
    for (int i = 0; i < 1000; ++i)
      REQUIRE_FALSE((*j)->iteration(it(i, 4.0 / (1 + i))));
  }
  const auto bytes = fs::file_size(d.path());
  MESSAGE("journal of 1,000 iterations: " << bytes << " bytes");
  CHECK(bytes < 200'000);
  auto c = read_journal(d.path());
  REQUIRE(c);
  CHECK(c->completed() == 1000);
  CHECK(c->iterations[999].loss == 4.0 / 1000);  // doubles written to round-trip
}
