#include "sailor/config/log.hpp"

#include <filesystem>
#include <mutex>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "sailor/config/private_files.hpp"

namespace sailor::log {

namespace {
constexpr const char* modules[] = {"config", "sim", "planner", "comm", "actors", "train"};

// spdlog's registry is process-wide and refuses a second logger of the same name, so creation
// is serialised: threads of one process (actors, transports, tests) may ask at the same time.
std::mutex& creation_mutex() {
  static std::mutex m;
  return m;
}

// Callers hold creation_mutex().
std::shared_ptr<spdlog::logger> make_locked(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("%^[%H:%M:%S.%e] [%n] [%l]%$ %v");
  logger->set_level(spdlog::level::info);
  return logger;
}
}  // namespace

void setup() {
  std::lock_guard<std::mutex> lock(creation_mutex());
  for (const char* m : modules) make_locked(m);
  spdlog::cfg::load_env_levels();
}

bool add_file(const std::string& path) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  try {
    const auto folder = std::filesystem::path(path).parent_path();
    if (!folder.empty() && files::make_private_folder(folder)) return false;
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    if (files::make_private(path)) return false;
    sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  } catch (const spdlog::spdlog_ex&) {
    return false;
  }
  std::lock_guard<std::mutex> lock(creation_mutex());
  for (const char* m : modules) make_locked(m)->sinks().push_back(sink);
  return true;
}

std::shared_ptr<spdlog::logger> get(const std::string& module) {
  if (auto logger = spdlog::get(module)) return logger;
  std::lock_guard<std::mutex> lock(creation_mutex());
  auto logger = make_locked(module);
  spdlog::cfg::load_env_levels();
  return logger;
}

}  // namespace sailor::log
