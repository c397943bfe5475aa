// Mixed pools: one GPU type as spot and as on-demand in a zone, each at its own price, and a
// pool of a type the catalog lacks refused with the file and field named.
#include "sailor/config/pools.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <doctest/doctest.h>

#include "sailor/config/load.hpp"
#include "sailor/config/profile.hpp"

using namespace sailor;
using namespace sailor::config;

namespace {
std::string write_cluster(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}
}  // namespace

TEST_CASE("a zone holds V100-16 as spot and as on-demand, each priced as its pool") {
  auto path = write_cluster("mixed-pools", R"(name: mixed
pricing: spot
zones:
  - {name: us-east-2b, region: us-east-2, gpus: {V100-16: 8, V100-16/on-demand: 2}}
  - {name: us-west-2a, region: us-west-2, gpus: {V100-16/spot: 3}}
)");
  auto c = load_cluster(path);
  std::filesystem::remove(path);
  REQUIRE(c);
  const auto* v100 = c->gpus.find("V100-16");
  REQUIRE(v100);
  CHECK(c->zones[0].gpus.at("V100-16") == 8);
  CHECK(c->zones[0].gpus.at("V100-16/on-demand") == 2);
  CHECK(c->usd_per_gpu_hour("V100-16") == doctest::Approx(v100->spot_usd_per_hour));
  CHECK(c->usd_per_gpu_hour("V100-16/on-demand") == doctest::Approx(v100->on_demand_usd_per_hour));
  CHECK(c->usd_per_gpu_hour("V100-16/spot") == doctest::Approx(v100->spot_usd_per_hour));
  // The same hardware.
  CHECK(c->gpus.find("V100-16/on-demand")->memory_bytes == v100->memory_bytes);
  CHECK(c->gpus.find("V100-16/on-demand")->peak_fp16_tflops == v100->peak_fp16_tflops);
  // On-demand pricing for the cluster leaves a spot pool at spot prices.
  c->use_spot_prices = false;
  CHECK(c->usd_per_gpu_hour("V100-16") == doctest::Approx(v100->on_demand_usd_per_hour));
  CHECK(c->usd_per_gpu_hour("V100-16/spot") == doctest::Approx(v100->spot_usd_per_hour));
}

TEST_CASE("a pool of a type the catalog lacks is refused with the file and field named") {
  auto path = write_cluster("bad-pool", "name: bad\nzones:\n  - {name: z, gpus: {Z100/on-demand: 2}}\n");
  auto c = load_cluster(path);
  std::filesystem::remove(path);
  REQUIRE_FALSE(c);
  CHECK(c.error().file == path);
  CHECK(c.error().field == "zones[0].gpus.Z100/on-demand");
  CHECK(c.error().message.find("<type>/on-demand") != std::string::npos);
  gpu_catalog catalog = gpu_catalog::builtin();
  CHECK_FALSE(add_pool_type("V100-16", catalog));        // no pool name
  CHECK_FALSE(add_pool_type("Z100/on-demand", catalog));  // no such base
  CHECK_FALSE(catalog.find("Z100/on-demand"));
}

TEST_CASE("a pool is profiled as its base type") {
  model_profile p;
  p.by_gpu["V100-16"].gpu_type = "V100-16";
  CHECK(pool_base_type("V100-16/on-demand") == "V100-16");
  CHECK(pool_base_type("V100-16/spot") == "V100-16");
  CHECK(pool_base_type("V100-16").empty());
  CHECK(p.find("V100-16/on-demand") == p.find("V100-16"));
  CHECK(p.find("A100-40/on-demand") == nullptr);
}
