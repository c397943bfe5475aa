#include "sailor/config/sailor_format.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

using namespace sailor::config;

namespace {
const std::string data_root = std::string(SAILOR_DATA_DIR) + "/sailor";
const std::string validation =
    data_root + "/sailor/Planner/simulations/validation/clariden/OPT-350";

std::string temp_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("sailor_format_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}
}  // namespace

TEST_CASE("sailor data: OPT-350 shape, profiles, sizes, network and catalog") {
  auto d = load_sailor_data(data_root, "OPT-350");
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().to_string()));
  CHECK(d->model.num_layers == 24);
  CHECK(d->model.hidden == 1024);
  CHECK(d->model.heads == 16);
  CHECK(d->model.sequence == 2048);
  CHECK(d->model.vocabulary == 50272);
  CHECK(d->model.num_all_layers() == 26);
  CHECK(d->default_global_batch == 1024);
  const gpu_profile* gh = d->profile.find("GH-96");
  REQUIRE(gh != nullptr);
  const auto* t = gh->find(8, 4);
  REQUIRE(t != nullptr);
  REQUIRE(t->size() == 26);
  CHECK((*t)[1].forward_s == doctest::Approx(0.003021));
  CHECK((*t)[1].backward_s == doctest::Approx(0.006469));
  CHECK((*t)[1].update_s == doctest::Approx(0.000479));
  // llm_info: tp 1 block parameters match the shape's formula.
  REQUIRE(d->profile.sizes_by_tp.count(1) == 1);
  CHECK(d->profile.sizes_by_tp.at(1)[1].params_floats == doctest::Approx(double(d->model.params_of_block())).epsilon(0.01));
  // Network: GH-96 inside us-central1-a, 4 GPUs per node, 1 GB message.
  const auto* fit = d->network.find({"us-central1-a", "GH-96", 4}, {"us-central1-a", "GH-96", 4});
  REQUIRE(fit != nullptr);
  double x = std::log2(1e9 / 1e6);
  double expect = std::min(-0.65351182 * x * x + 11.42553946 * x + 45.25031399, 92.5519);
  CHECK(fit->gbytes_per_s(1e9) == doctest::Approx(expect).epsilon(1e-4));
  CHECK(fit->gbytes_per_s(1e3) > 0);
  CHECK(d->network.egress_usd_per_gb.at({"us-central1-a", "us-west1-b"}) == doctest::Approx(0.02));
  CHECK(d->network.intra_node.count({"GH-96", 4}) == 1);
  const gpu_spec* g = d->gpus.find("GH-96");
  REQUIRE(g != nullptr);
  CHECK(g->memory_bytes == 102625181696ull);
  CHECK(g->gpus_per_node == 4);
}

TEST_CASE("sailor data: GPT-Neo-2.7 by file name, models without a training config") {
  auto neo = load_sailor_data(data_root, "GPT-Neo-2.7");
  REQUIRE(neo.ok());
  CHECK(neo->model.num_layers == 32);
  CHECK(neo->model.hidden == 2560);
  // The shipped shape wins over Sailor's training config (32 heads, Llama's vocabulary).
  CHECK(neo->model.heads == 20);
  CHECK(neo->model.vocabulary == 50257);
  CHECK(neo->model.tied_embeddings);
  // ... and agrees with llm_info, whose head holds only the final norm's 2 x 2560 floats.
  CHECK(neo->profile.sizes_by_tp.at(1).back().params_floats == doctest::Approx(double(neo->model.params_of_layer(33))));
  auto opt30 = load_sailor_data(data_root, "OPT-30");
  REQUIRE(opt30.ok());
  CHECK(opt30->model.num_layers == 48);
  CHECK(opt30->profile.find("A100-40") != nullptr);
  CHECK(opt30->model.arch == architecture::opt);
  auto llama = load_sailor_data(data_root, "LLAMA-3-8");
  REQUIRE(llama.ok());
  CHECK(llama->model.arch == architecture::llama);
  CHECK_FALSE(llama->model.bias);
  CHECK(llama->model.rope_theta == 500000);
  auto missing = load_sailor_data(data_root, "NO-SUCH-MODEL");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == sailor::error_kind::not_found);
  CHECK(missing.error().message.find("NO-SUCH-MODEL") != std::string::npos);
  CHECK(missing.error().message.find("GPT-Neo-2.7, LLAMA-3-8, OPT-30, OPT-350") != std::string::npos);
  auto bad_root = load_sailor_data("/nonexistent/dir", "OPT-350");
  REQUIRE_FALSE(bad_root.ok());
  CHECK(bad_root.error().file == "/nonexistent/dir");
}

TEST_CASE("sailor plan: the 4-stage validation plan loads, round-trips") {
  auto f = load_sailor_plan(validation + "/N16/plan_config_N16_D4.json");
  REQUIRE_MESSAGE(f.ok(), (f.ok() ? "" : f.error().to_string()));
  const plan& p = f->value;
  CHECK(p.micro_batch == 8);
  CHECK(p.global_batch == 1024);
  REQUIRE(p.num_stages() == 4);
  CHECK(p.stages[0].first_layer == 0);
  CHECK(p.stages[0].num_layers == 5);
  CHECK(p.stages[3].end_layer() == 26);
  CHECK(p.stages[1].replicas.size() == 4);
  CHECK(p.stages[1].replicas[0].gpu_type == "GH-96");
  CHECK(p.stages[1].replicas[0].zone == "us-central1-a");
  CHECK(p.stages[1].replicas[0].tp == 4);
  CHECK(f->measured_iteration_s == doctest::Approx(2.72578));
  CHECK(f->measured_peak_memory_bytes == doctest::Approx(25140658176.0));

  auto again = load_sailor_plan(temp_file("roundtrip.json", to_sailor_plan_json(p)));
  REQUIRE(again.ok());
  CHECK(again->value.num_stages() == 4);
  CHECK(again->value.stages[2].first_layer == p.stages[2].first_layer);
  CHECK(again->value.stages[2].replicas.size() == 4);
  CHECK(again->value.micro_batch == 8);
}

TEST_CASE("sailor plan: bad files name the field") {
  auto missing = load_sailor_plan(temp_file("nombs.json", R"({"gbs": 4, "pipeline_list": []})"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().field == "mbs");
  auto gap = load_sailor_plan(temp_file("gap.json", R"({"mbs": 1, "gbs": 4, "pipeline_list": [
    {"num_stages": 1, "layers_per_stage": [[0, 2]], "tmp_per_stage": [[[[["GH-96", 4, "z"]], 4]]], "dp": [1]}]})"));
  REQUIRE_FALSE(gap.ok());
  CHECK(gap.error().field.find("layers_per_stage[0]") != std::string::npos);
  auto bad_json = load_sailor_plan(temp_file("bad.json", "{"));
  REQUIRE_FALSE(bad_json.ok());
  CHECK(bad_json.error().kind == sailor::error_kind::invalid_input);
}

TEST_CASE("sailor quotas and the cluster built from them") {
  auto q = load_sailor_quotas(data_root + "/sailor/Planner/sailor_planner/dummy_quotas_dict.json");
  REQUIRE(q.ok());
  CHECK(q->at("A100-40").at("us-central1-a") == 150);
  auto d = load_sailor_data(data_root, "OPT-350");
  REQUIRE(d.ok());
  cluster c = cluster_from_quotas(*q, *d);
  CHECK(c.zones.size() == 5);
  CHECK(c.find_zone("us-west1-b")->region == "us-west1");
  CHECK(c.find_zone("us-central1-a")->region == "us-central1");
  zone_link far = c.link("us-central1-a", "us-west1-b");
  zone_link near = c.link("us-central1-a", "us-central1-a");
  CHECK(far.egress_usd_per_gb == doctest::Approx(0.02));
  CHECK(near.egress_usd_per_gb == doctest::Approx(0.0));
  CHECK(far.bytes_per_s(1e8) < near.bytes_per_s(1e8));
}
