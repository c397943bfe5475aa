#include "sailor/config/log.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace sailor::log {

namespace {
constexpr const char* modules[] = {"config", "sim", "planner", "comm", "actors", "train"};

std::shared_ptr<spdlog::logger> make(const std::string& name) {
  auto existing = spdlog::get(name);
  if (existing) return existing;
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("%^[%H:%M:%S.%e] [%n] [%l]%$ %v");
  logger->set_level(spdlog::level::info);
  return logger;
}
}  // namespace

void setup() {
  for (const char* m : modules) make(m);
  spdlog::cfg::load_env_levels();
}

std::shared_ptr<spdlog::logger> get(const std::string& module) {
  auto logger = spdlog::get(module);
  if (logger) return logger;
  logger = make(module);
  spdlog::cfg::load_env_levels();
  return logger;
}

}  // namespace sailor::log
