#include "sailor/config/log.hpp"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

TEST_CASE("loggers asked for by many threads at once are created once") {
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<spdlog::logger>> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&got, i] { got[i] = sailor::log::get("race-" + std::to_string(i % 2)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    REQUIRE(got[i] != nullptr);
    CHECK(got[i] == got[i % 2]);
  }
  CHECK(got[0]->name() == "race-0");
}
