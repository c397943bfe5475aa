#pragma once
// A file in a fresh temporary directory, removed with the object; the repository's configs/.
// For tests only.

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace sailor::testing {

class temp_dir {
public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("sailor-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// Writes `text` to `name` inside the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    auto p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& root() const { return path_; }

private:
  std::filesystem::path path_;
};

/// The repository's configs/ folder.
inline std::string configs_dir() { return std::string(SAILOR_SOURCE_DIR) + "/configs"; }

/// The job token of a test job, written to `job.token` in `dir` (every process of the job is
/// given the file with --token-file and proves the token in the transport handshake).
inline std::string job_token_file(const temp_dir& dir) {
  return dir.write("job.token", "test-job-token-5e1f0c\n");
}

}  // namespace sailor::testing
