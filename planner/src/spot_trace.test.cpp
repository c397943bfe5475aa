// Availability traces: both formats read, combined into one timeline, and bad input refused
// with the file and the tick named.
#include "sailor/planner/spot_trace.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <doctest/doctest.h>

#include "strings.hpp"

#include "sailor/config/pools.hpp"

using namespace sailor;
using namespace sailor::planner;

namespace {

// A folder of its own per test, removed at the end.
struct scratch {
  std::filesystem::path dir;
  scratch() {
    static std::atomic<int> n{0};
    dir = std::filesystem::temp_directory_path() /
          ("sailor-spot-trace-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(dir);
  }
  ~scratch() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

using sailor::testing::contains;

const config::gpu_catalog catalog = config::gpu_catalog::builtin();

}  // namespace

TEST_CASE("Sailor's CSV trace: columns, ticks from the timestamps, counts") {
  scratch s;
  auto path = s.write("t.csv", ",Timestamp,A100-40_us-central1-a,V100-16_us-central1-b\n"
                               "0,1000,8,4\n1,1120,0,4\n2,1240,8,2\n");
  auto t = read_sailor_trace_csv(path);
  REQUIRE(t.ok());
  REQUIRE(t->columns.size() == 2);
  CHECK(t->columns[0].gpu_type == "A100-40");
  CHECK(t->columns[0].zone == "us-central1-a");
  CHECK(t->columns[1].zone == "us-central1-b");
  REQUIRE(t->ticks() == 3);
  CHECK(t->start_s[2] == doctest::Approx(240));
  CHECK(t->tick_s == doctest::Approx(120));
  CHECK(t->end_s == doctest::Approx(360));
  CHECK(t->counts[1] == std::vector<int>{0, 4});
  CHECK(t->at(1).count("A100-40") == 0);
  CHECK(t->at(2).at("V100-16").at("us-central1-b") == 2);
}

TEST_CASE("the real spot traces read: zone and GPU type from the file name, 5-minute ticks") {
  const std::string dir = std::string(SAILOR_DATA_DIR) + "/spot-traces/aws-16-node-v100/";
  auto t = read_spot_trace_json(dir + "us-west-2a_v100_1.json", catalog);
  REQUIRE(t.ok());
  REQUIRE(t->columns.size() == 1);
  CHECK(t->columns[0].zone == "us-west-2a");
  CHECK(t->columns[0].gpu_type == "V100-16");
  CHECK(t->tick_s == 300);
  CHECK(t->ticks() == 4736);  // as the data's README says
  CHECK(t->end_s == doctest::Approx(4736 * 300.0));
}

TEST_CASE("combining three zones: the union of columns over the common span") {
  const std::string dir = std::string(SAILOR_DATA_DIR) + "/spot-traces/aws-16-node-v100/";
  auto t = read_traces({dir + "us-east-2b_v100_1.json", dir + "us-west-2a_v100_1.json", dir + "us-west-2c_v100_1.json"},
                       catalog);
  REQUIRE(t.ok());
  CHECK(t->columns.size() == 3);
  CHECK(t->ticks() == 3247);  // us-east-2b is the shortest
  CHECK(t->end_s == doctest::Approx(3247 * 300.0));
  CHECK(t->notes.size() == 2);  // the two longer traces were cut
  int max_total = 0;
  for (int i = 0; i < t->ticks(); ++i) max_total = std::max(max_total, t->total(i));
  CHECK(max_total == 48);
}

TEST_CASE("combining ticks of different lengths holds each part's count until its next tick") {
  scratch s;
  auto a = s.write("a.csv", ",Timestamp,A100-40_z1-a\n0,0,4\n1,100,2\n2,200,6\n");
  auto b = s.write("z1-b_v100_x.json", R"({"metadata": {"gap_seconds": 50}, "data": [1, 2, 3, 4, 5, 6, 7]})");
  auto t = read_traces({a, b}, catalog);
  REQUIRE(t.ok());
  // b's ticks at 0, 50, ..., 300 and a's at 0, 100, 200; a ends at 300, b at 350.
  REQUIRE(t->ticks() == 6);
  CHECK(t->counts[1] == std::vector<int>{4, 2});  // t = 50
  CHECK(t->counts[2] == std::vector<int>{2, 3});  // t = 100
  CHECK(t->counts[5] == std::vector<int>{6, 6});  // t = 250
  CHECK(t->end_s == doctest::Approx(300));
}

TEST_CASE("bad traces are refused with the file and the tick") {
  scratch s;
  auto negative = s.write("neg.json", R"({"metadata": {"gap_seconds": 300}, "data": [4, 3, -1]})");
  auto r = read_trace(negative, catalog);
  REQUIRE_FALSE(r.ok());
  // No zone or GPU type in its name: that is said first.
  CHECK(contains(r.error().to_string(), negative));

  auto neg2 = s.write("z-a_v100_1.json", R"({"metadata": {"gap_seconds": 300}, "data": [4, 3, -1]})");
  r = read_trace(neg2, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().to_string(), neg2));
  CHECK(contains(r.error().to_string(), "tick 2"));
  CHECK(contains(r.error().to_string(), "negative count -1"));

  auto order = s.write("order.csv", ",Timestamp,A100-40_z-a\n0,100,4\n1,200,4\n2,150,4\n");
  r = read_trace(order, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().to_string(), order + ":4"));
  CHECK(contains(r.error().to_string(), "tick 2"));
  CHECK(contains(r.error().to_string(), "out of order"));

  auto neg_csv = s.write("negc.csv", ",Timestamp,A100-40_z-a\n0,100,4\n1,200,-3\n");
  r = read_trace(neg_csv, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().to_string(), "tick 1, column A100-40_z-a"));

  auto gpu = s.write("z-a_b200_1.json", R"({"metadata": {"gap_seconds": 300}, "data": [4]})");
  r = read_trace(gpu, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().to_string(), "unknown GPU type 'b200'"));

  auto no_gap = s.write("z-a_v100_2.json", R"({"data": [4]})");
  r = read_trace(no_gap, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().to_string(), "gap_seconds"));
}

TEST_CASE("a timeline is checked against the cluster and for capacity at the start") {
  scratch s;
  auto csv = s.write("t.csv", ",Timestamp,A100-40_us-central1-a,X900_us-central1-a\n0,1,0,0\n1,2,3,0\n");
  auto t = read_trace(csv, catalog);
  REQUIRE(t.ok());
  config::cluster cluster;
  cluster.name = "one-zone";
  cluster.add_zone("us-central1-b");
  auto err = check_timeline(*t, cluster, false);
  REQUIRE(err);
  CHECK(contains(err->to_string(), csv));
  CHECK(contains(err->to_string(), "unknown GPU type 'X900'"));

  auto csv2 = s.write("t2.csv", ",Timestamp,A100-40_us-central1-a\n0,1,0\n1,2,3\n");
  t = read_trace(csv2, catalog);
  REQUIRE(t.ok());
  err = check_timeline(*t, cluster, true);
  REQUIRE(err);
  CHECK(contains(err->to_string(), "unknown zone 'us-central1-a'"));
  err = check_timeline(*t, cluster_for(*t, cluster), true);
  REQUIRE(err);
  CHECK(contains(err->to_string(), csv2));
  CHECK(contains(err->to_string(), "tick 0"));
  CHECK(contains(err->to_string(), "no GPU available at the start"));
  CHECK(contains(err->to_string(), "first tick with capacity is tick 1"));

  int skipped = 0;
  auto from = from_first_capacity(*t, &skipped);
  CHECK(skipped == 1);
  CHECK(from.ticks() == 1);
  CHECK(from.start_s[0] == 0);
  CHECK_FALSE(check_timeline(from, cluster_for(from, cluster), true));
}

TEST_CASE("a spot trace's GPU type matches the catalog's type, not its on-demand pool") {
  auto c = catalog;
  REQUIRE(config::add_pool_type("V100-16/on-demand", c));
  scratch s;
  auto path = s.write("us-west-2a_v100_1.json", R"({"metadata": {"gap_seconds": 300}, "data": [2, 1]})");
  auto t = read_spot_trace_json(path, c);
  REQUIRE(t);
  CHECK(t->columns.front().gpu_type == "V100-16");
}
