#include "sailor/config/profile.hpp"

#include <fstream>

#include <doctest/doctest.h>

#include "temp_file.hpp"

using namespace sailor;
using namespace sailor::config;

TEST_CASE("a profile survives writing and reading in profiles_tmp.json layout") {
  model_profile p;
  p.model = "tiny-gpt";
  auto& gp = p.by_gpu["CPU"];
  gp.gpu_type = "CPU";
  gp.times[2][1] = {{0.001, 0.002, 0.0001}, {0.003, 0.006, 0.0002}, {0.004, 0.008, 0.0003}};
  gp.times[4][2] = {{0.5, 1.5, 0.25}};
  testing::temp_dir dir;
  auto file = dir.write("p.json", to_profile_json(p));
  auto back = load_profile_json(file);
  REQUIRE(back);
  CHECK(back->model == "tiny-gpt");
  const auto* layers = back->find("CPU") ? back->find("CPU")->find(2, 1) : nullptr;
  REQUIRE(layers != nullptr);
  REQUIRE(layers->size() == 3);
  CHECK((*layers)[1].forward_s == 0.003);
  CHECK((*layers)[2].backward_s == 0.008);
  CHECK((*layers)[0].update_s == 0.0001);
  REQUIRE(back->find("CPU")->find(4, 2) != nullptr);
  CHECK(back->find("CPU")->find(4, 2)->at(0).backward_s == 1.5);
  auto named = load_profile_json(file, "tiny-gpt");
  CHECK(named.ok());
  auto missing = load_profile_json(file, "opt-350m");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == error_kind::not_found);
}

TEST_CASE("a bad profile file names the field") {
  testing::temp_dir dir;
  auto file = dir.write("bad.json", R"({"m": {"CPU": {"2": {"1": {"0": [0.1, 0.2], "1": [0.1, 0.2, 0.3]}}}}})");
  auto r = load_profile_json(file);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().file == file);
  CHECK(r.error().field == "m.CPU.2.1.0");
  auto gap = load_profile_json(dir.write("gap.json", R"({"m": {"CPU": {"2": {"1": {"0": [1, 1, 1], "2": [1, 1, 1]}}}}})"));
  REQUIRE_FALSE(gap.ok());
  CHECK(gap.error().field == "m.CPU.2.1.2");
  CHECK(load_profile_json(dir.path("nothing.json")).error().kind == error_kind::not_found);
}
