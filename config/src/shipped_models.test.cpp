#include "sailor/config/shipped_models.hpp"

#include <filesystem>

#include <doctest/doctest.h>

#include "sailor/config/load.hpp"

using namespace sailor::config;

TEST_CASE("shipped models: every file of configs/models is compiled in and loads as the file does") {
  const auto shipped = shipped_models();
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(SAILOR_SOURCE_DIR) + "/configs/models")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const std::string file = "configs/models/" + entry.path().filename().string();
    auto from_disk = load_model(entry.path().string());
    REQUIRE_MESSAGE(from_disk.ok(), file);
    const shipped_model* found = nullptr;
    for (const auto& m : shipped)
      if (m.file == file) found = &m;
    REQUIRE_MESSAGE(found != nullptr, file);
    CHECK(found->shape.name == from_disk->name);
    CHECK(found->shape.total_params() == from_disk->total_params());
  }
  CHECK(shipped.size() == files);
}

TEST_CASE("shipped models: found by name, Sailor's name or file name, case and punctuation ignored") {
  auto by_name = find_shipped_model("OPT-350M");
  REQUIRE(by_name);
  CHECK(by_name->arch == architecture::opt);
  CHECK(by_name->num_layers == 24);
  CHECK(find_shipped_model("opt_350")->name == "OPT-350M");
  CHECK(find_shipped_model("gpt-neo-2.7b")->heads == 20);
  CHECK_FALSE(find_shipped_model("OPT-1.3B"));
  // Sailor's names only: "tiny-gpt" has none.
  CHECK(find_shipped_sailor_model("llama_3_8")->kv_heads == 8);
  CHECK_FALSE(find_shipped_sailor_model("tiny-gpt"));
  CHECK(find_shipped_model("tiny-gpt"));
}
