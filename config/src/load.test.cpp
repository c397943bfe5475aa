#include "sailor/config/load.hpp"

#include <filesystem>

#include <doctest/doctest.h>

#include "error_of.hpp"
#include "temp_file.hpp"

using namespace sailor;
using namespace sailor::config;
using sailor::testing::error_of;

namespace {
const std::string configs = sailor::testing::configs_dir();

const char* valid_cluster = R"(name: c
zones:
  - {name: a, region: r1, gpus: {A100-40: 8}}
  - {name: b, region: r2, gpus: {V100-16: 4}}
links:
  - {from: a, to: b, latency_ms: 20, bandwidth_gbytes_per_s: 0.5, egress_usd_per_gb: 0.02}
)";

const char* valid_model = R"(name: m
layers: 4
hidden: 64
heads: 4
sequence: 32
vocabulary: 100
)";

// The error points at `field` on `line` and its message says `words`.
void check_points_at(const sailor::error& e, const std::string& field, int line, const std::string& words) {
  CHECK(e.field == field);
  CHECK(e.line == line);
  CHECK_MESSAGE(e.message.find(words) != std::string::npos, e.message);
}
}  // namespace

TEST_CASE("every shipped config loads") {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs + "/clusters")) {
    auto c = load_cluster(entry.path());
    CHECK_MESSAGE(c.ok(), (c.ok() ? "" : c.error().to_string()));
    ++loaded;
  }
  model_shape opt;
  for (const auto& entry : std::filesystem::directory_iterator(configs + "/models")) {
    auto m = load_model(entry.path());
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().to_string()));
    if (m->name == "OPT-350M") opt = *m;
    ++loaded;
  }
  for (const auto& entry : std::filesystem::directory_iterator(configs + "/jobs")) {
    auto j = load_job(entry.path());
    CHECK_MESSAGE(j.ok(), (j.ok() ? "" : j.error().to_string()));
    ++loaded;
  }
  REQUIRE(opt.num_layers == 24);
  for (const auto& entry : std::filesystem::directory_iterator(configs + "/plans")) {
    auto p = load_plan(entry.path(), opt);
    CHECK_MESSAGE(p.ok(), (p.ok() ? "" : p.error().to_string()));
    ++loaded;
  }
  CHECK(loaded >= 10);
}

TEST_CASE("shipped model shapes match their published parameter counts") {
  auto opt = load_model(configs + "/models/opt-350m.yaml");
  REQUIRE(opt.ok());
  // Sailor's llm_info: an OPT-350 block has 12,596,224 parameters (12h^2 + 13h).
  CHECK(opt->params_of_block() == 12596224);
  auto llama = load_model(configs + "/models/llama-3-8b.yaml");
  REQUIRE(llama.ok());
  // Llama-3-8B: 8.03 B parameters.
  CHECK(llama->total_params() == doctest::Approx(8.03e9).epsilon(0.01));
  auto neo = load_model(configs + "/models/gpt-neo-2.7b.yaml");
  REQUIRE(neo.ok());
  // GPT-Neo-2.7B as released: 2,651,307,520 parameters, the head sharing the token embedding
  // (2.78 B if it had its own). Our count is 245,760 higher: GPT-Neo's Q, K and V projections
  // have no biases, our GPT-2 blocks have them.
  CHECK(neo->tied_embeddings);
  CHECK(neo->total_params() == 2651307520 + 32 * 3 * 2560);
  // Hugging Face's "gpt2": 124,439,808 parameters, the head sharing the token embedding.
  auto gpt2 = load_model(configs + "/models/gpt2-small.yaml");
  REQUIRE(gpt2.ok());
  CHECK(gpt2->gelu_tanh);
  CHECK(gpt2->total_params() == 124439808);
}

TEST_CASE("a valid cluster gives links, defaults and prices") {
  testing::temp_dir dir;
  auto c = load_cluster(dir.write("c.yaml", valid_cluster));
  REQUIRE(c.ok());
  CHECK(c->zones.size() == 2);
  CHECK(c->regions.size() == 2);
  CHECK(c->total_gpus() == 12);
  auto ab = c->link("b", "a");  // listed as a->b; links are symmetric
  CHECK(ab.latency_s == doctest::Approx(0.020));
  CHECK(ab.transfer_s(1e9) == doctest::Approx(0.020 + 2.0));
  CHECK(c->link("a", "a").egress_usd_per_gb == 0.0);
  CHECK(c->usd_per_gpu_hour("A100-40") == doctest::Approx(3.673));
}

TEST_CASE("bad input names file, line and field") {
  testing::temp_dir dir;

  SUBCASE("missing file") {
    auto e = error_of(load_model(dir.path("nope.yaml")));
    CHECK(e.kind == error_kind::not_found);
    CHECK(e.to_string().find("nope.yaml") != std::string::npos);
  }
  SUBCASE("empty file") {
    auto e = error_of(load_job(dir.write("j.yaml", "\n")));
    CHECK(e.message.find("empty") != std::string::npos);
  }
  SUBCASE("syntax error") {
    auto path = dir.write("m.yaml", "name: m\nlayers: [4\nhidden: 64\n");
    auto e = error_of(load_model(path));
    CHECK(e.file == path);
    CHECK(e.line >= 2);
    CHECK(e.message.find("syntax error") != std::string::npos);
  }
  SUBCASE("missing field") {
    auto e = error_of(load_model(dir.write("m.yaml", "name: m\nlayers: 4\nheads: 4\nsequence: 8\nvocabulary: 10\n")));
    CHECK(e.field == "hidden");
    CHECK(e.message == "missing required field");
  }
  SUBCASE("unknown field (a typo)") {
    auto e = error_of(load_job(dir.write("j.yaml", "global_batch: 8\nobjectiv: min_cost\n")));
    CHECK(e.field == "objectiv");
    CHECK(e.line == 2);
  }
  SUBCASE("wrong type") {
    auto e = error_of(load_model(dir.write("m.yaml", "name: m\nlayers: four\nhidden: 64\nheads: 4\nsequence: 8\nvocabulary: 10\n")));
    check_points_at(e, "layers", 2, "integer");
  }
  SUBCASE("unknown GPU type") {
    auto e = error_of(load_cluster(dir.write("c.yaml", "name: c\nzones:\n  - {name: a, gpus: {B200: 8}}\n")));
    CHECK(e.kind == error_kind::not_found);
    check_points_at(e, "zones[0].gpus.B200", 3, "A100-40");  // lists the known ones
  }
  SUBCASE("negative count") {
    auto e = error_of(load_cluster(dir.write("c.yaml", "name: c\nzones:\n  - name: a\n    gpus: {A100-40: -2}\n")));
    check_points_at(e, "zones[0].gpus.A100-40", 4, "non-negative");
  }
  SUBCASE("link to a zone not declared") {
    auto e = error_of(load_cluster(dir.write(
        "c.yaml", "name: c\nzones:\n  - {name: a}\nlinks:\n  - {from: a, to: z, bandwidth_gbytes_per_s: 1}\n")));
    check_points_at(e, "links[0].to", 5, "'z'");
  }
  SUBCASE("heads that do not divide hidden") {
    auto e = error_of(load_model(dir.write("m.yaml", "name: m\nlayers: 2\nhidden: 65\nheads: 4\nsequence: 8\nvocabulary: 10\n")));
    CHECK(e.field == "heads");
  }
  SUBCASE("bad enum") {
    auto e = error_of(load_job(dir.write("j.yaml", "global_batch: 8\nobjective: fastest\n")));
    CHECK(e.field == "objective");
    CHECK(e.message.find("max_throughput or min_cost") != std::string::npos);
  }
}

TEST_CASE("plan layers must cover the model exactly once") {
  testing::temp_dir dir;
  auto model = load_model(dir.write("m.yaml", valid_model));  // 6 layers: 0..5
  REQUIRE(model.ok());
  auto stage = [](int first, int count) {
    return "  - layers: {first: " + std::to_string(first) + ", count: " + std::to_string(count) +
           "}\n    replicas: [{gpu: A100-40, zone: a, tp: 1}]\n";
  };
  auto plan_text = [&](std::string stages) { return "micro_batch: 1\nglobal_batch: 4\nstages:\n" + stages; };

  SUBCASE("exact cover loads") {
    auto p = load_plan(dir.write("p.yaml", plan_text(stage(0, 2) + stage(2, 4))), *model);
    REQUIRE(p.ok());
    CHECK(p->num_stages() == 2);
    CHECK(p->stages[1].end_layer() == 6);
  }
  SUBCASE("overlap") {
    auto e = error_of(load_plan(dir.write("p.yaml", plan_text(stage(0, 3) + stage(2, 4))), *model));
    check_points_at(e, "stages[1].layers", 6, "overlap");
  }
  SUBCASE("gap") {
    auto e = error_of(load_plan(dir.write("p.yaml", plan_text(stage(0, 2) + stage(3, 3))), *model));
    CHECK(e.field == "stages[1].layers");
    CHECK(e.message.find("gap: layers 2..2") != std::string::npos);
  }
  SUBCASE("layers missing at the end") {
    auto e = error_of(load_plan(dir.write("p.yaml", plan_text(stage(0, 2) + stage(2, 2))), *model));
    CHECK(e.field == "stages");
    CHECK(e.message.find("layers 4..5") != std::string::npos);
  }
  SUBCASE("too many layers") {
    auto e = error_of(load_plan(dir.write("p.yaml", plan_text(stage(0, 2) + stage(2, 5))), *model));
    CHECK(e.message.find("cover 7 layers") != std::string::npos);
  }
  SUBCASE("micro-batches are dealt to the replicas unevenly, but each replica gets one") {
    auto replicas = [](int n) {
      std::string r = "  - layers: {first: 0, count: 6}\n    replicas:\n";
      for (int i = 0; i < n; ++i) r += "      - {gpu: A100-40, zone: a, tp: 1}\n";
      return r;
    };
    // 4 micro-batches over 3 replicas: 2, 1, 1 (what `sailor plan` writes for 1024 over 3).
    CHECK(load_plan(dir.write("p.yaml", plan_text(replicas(3))), *model).ok());
    auto e = error_of(load_plan(dir.write("p.yaml", plan_text(replicas(5))), *model));
    CHECK(e.field == "stages[0].replicas");
    CHECK(e.line >= 4);
    CHECK_MESSAGE(e.message.find("5 replicas for 4 micro-batches") != std::string::npos, e.message);
    e = error_of(load_plan(dir.write("p.yaml", "micro_batch: 3\nglobal_batch: 4\nstages:\n" + stage(0, 6)), *model));
    CHECK(e.field == "global_batch");
    CHECK(e.message.find("not a multiple of micro_batch 3") != std::string::npos);
  }
  SUBCASE("a plan round-trips through YAML") {
    auto p = load_plan(dir.write("p.yaml", plan_text(stage(0, 2) + stage(2, 4))), *model);
    REQUIRE(p.ok());
    auto again = load_plan(dir.write("q.yaml", to_yaml(*p)), *model);
    REQUIRE(again.ok());
    CHECK(again->stages[1].first_layer == 2);
    CHECK(again->stages[0].replicas[0].gpu_type == "A100-40");
  }
}

TEST_CASE("a plan is checked against the cluster") {
  testing::temp_dir dir;
  auto c = load_cluster(dir.write("c.yaml", valid_cluster));
  auto m = load_model(dir.write("m.yaml", valid_model));
  REQUIRE(c.ok());
  REQUIRE(m.ok());
  plan p;
  p.global_batch = 4;
  p.stages.push_back({0, 6, false, {{"A100-40", "nowhere", 1, {}, {}}}});
  auto bad = validate_plan(p, *m, &*c, "p.yaml");
  REQUIRE(bad);
  CHECK(bad->field == "stages[0].replicas[0].zone");
  p.stages[0].replicas[0] = {"A100-40", "a", 8, {}, {}};
  bad = validate_plan(p, *m, &*c, "p.yaml");
  REQUIRE(bad);  // 8 > 4 GPUs per node, and 8 does not divide 4 heads
  CHECK(bad->field == "stages[0].replicas[0].tp");
  p.stages[0].replicas[0] = {"A100-40", "a", 4, {}, {}};
  CHECK_FALSE(validate_plan(p, *m, &*c, "p.yaml"));
  // Zone a has 8 A100-40: a third replica of TP 4 is one too many; zone a has no V100-16.
  p.stages[0].replicas = {{"A100-40", "a", 4, {}, {}}, {"A100-40", "a", 4, {}, {}}};
  CHECK_FALSE(validate_plan(p, *m, &*c, "p.yaml"));
  p.stages[0].replicas.push_back({"A100-40", "a", 4, {}, {}});
  p.global_batch = 3;
  bad = validate_plan(p, *m, &*c, "p.yaml");
  REQUIRE(bad);
  CHECK(bad->field == "stages[0].replicas[2].zone");
  CHECK(bad->message.find("places 12 A100-40 GPUs in zone 'a'") != std::string::npos);
  p.global_batch = 4;
  p.stages[0].replicas = {{"V100-16", "a", 1, {}, {}}};
  bad = validate_plan(p, *m, &*c, "p.yaml");
  REQUIRE(bad);
  CHECK(bad->message.find("zone 'a' has no V100-16") != std::string::npos);
}

TEST_CASE("a file's kind is told by its fields, misspelt ones too, a missing file is not found") {
  testing::temp_dir dir;
  CHECK(*config_kind(dir.write("c.yaml", valid_cluster)) == "cluster");
  CHECK(*config_kind(dir.write("m.yaml", valid_model)) == "model");
  CHECK(*config_kind(dir.write("j.yaml", "global_bacth: 8\nobjective: max_throughput\n")) == "job");
  CHECK(*config_kind(dir.write("p.yaml", "micro_batch: 1\nglobal_batch: 2\nstagse: []\n")) == "plan");
  auto none = config_kind(dir.write("x.yaml", "colour: blue\n"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("cannot tell what kind") != std::string::npos);
  auto missing = config_kind(dir.path("missing.yaml"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == error_kind::not_found);
}

TEST_CASE("a plan file's made_for round-trips, and the plan loads with it") {
  testing::temp_dir dir;
  auto m = load_model(dir.write("m.yaml", valid_model));
  REQUIRE(m.ok());
  plan p;
  p.micro_batch = 1;
  p.global_batch = 4;
  p.stages.push_back({0, 6, false, {{"A100-40", "a", 1, {}, {}}}});
  plan_origin o;
  o.model = "/models/m.yaml";
  o.quotas = "/q.json";
  auto path = dir.write("p.yaml", to_yaml(p) + to_yaml(o));
  auto back = load_plan_origin(path);
  REQUIRE(back.ok());
  CHECK(back->model == o.model);
  CHECK(back->quotas == o.quotas);
  CHECK(back->cluster.empty());
  CHECK(load_plan(path, *m).ok());
}
