#include "share_dir.hpp"

#include <cstdlib>
#include <system_error>

namespace sailor::app {

namespace fs = std::filesystem;

std::vector<share_dir_candidate> share_dir_candidates() {
  if (const char* env = std::getenv("SAILOR_SHARE_DIR"); env != nullptr && *env != '\0')
    return {{fs::path(env), "$SAILOR_SHARE_DIR"}};
  std::vector<share_dir_candidate> out;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    out.push_back({(exe.parent_path() / ".." / "share" / "sailor").lexically_normal(),
                   "beside the executable " + exe.string()});
#ifdef SAILOR_SOURCE_DIR
  out.push_back({fs::path(SAILOR_SOURCE_DIR), "the source tree it was built from"});
#endif
  return out;
}

result<fs::path> find_share_dir() {
  const auto candidates = share_dir_candidates();
  std::string looked;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_directory(c.path / "configs", ec))
      return c.path;
    looked += "\n  " + (c.path / "configs").string() + " (" + c.source + ")";
  }
  return sailor::error::not_found(
    "", "",
    "Sailor's shipped data (configs/) was not found; looked in:" + looked +
      "\ninstall Sailor (make install PREFIX=...), or set SAILOR_SHARE_DIR to the folder that "
      "holds configs/ (PREFIX/share/sailor, or a source tree)");
}

std::string shipped_file(const std::string& relative) {
  auto dir = find_share_dir();
  return dir ? (*dir / relative).string() : std::string();
}

status check_shipped_default(const std::string& value, const std::string& option) {
  if (!value.empty())
    return std::nullopt;
  auto dir = find_share_dir();
  if (dir)
    return std::nullopt;
  auto err = dir.error();
  err.field = option;
  return err;
}

}  // namespace sailor::app
