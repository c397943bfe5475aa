#include "sailor/config/private_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sailor::files {

namespace fs = std::filesystem;

void restrict_new_files() { ::umask(077); }

fs::path cache_folder() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path{xdg} / "sailor";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path{home} / ".cache" / "sailor";
  return fs::temp_directory_path() / ("sailor-" + std::to_string(::getuid()));
}

status make_private_folder(const fs::path& folder) {
  // Missing parents are made one by one with the folder mode (mkdir's mode is only narrowed by
  // the umask); a folder that exists is the user's and keeps its mode.
  std::error_code ec;
  fs::path made;
  for (const auto& part : folder) {
    made /= part;
    if (fs::is_directory(made, ec))
      continue;
    if (::mkdir(made.c_str(), private_folder_mode) != 0 && errno != EEXIST)
      return error::failed("cannot create the folder " + made.string() + ": " + std::strerror(errno));
  }
  if (!fs::is_directory(folder, ec))
    return error::failed("cannot create the folder " + folder.string() + ": not a folder");
  return {};
}

status make_private(const fs::path& file) {
  if (::chmod(file.c_str(), private_file_mode) != 0)
    return error::failed("cannot make " + file.string() + " private (0600): " + std::strerror(errno));
  return {};
}

status write_private_file(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, private_file_mode);
  if (fd < 0)
    return error::failed("cannot write " + file.string() + ": " + std::strerror(errno));
  // A file that existed keeps its mode through open(): made private before the text goes in.
  status st;
  if (::fchmod(fd, private_file_mode) != 0)
    st = error::failed("cannot make " + file.string() + " private (0600): " + std::strerror(errno));
  std::size_t done = 0;
  while (!st && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      st = error::failed("cannot write " + file.string() + ": " + std::strerror(errno));
    else
      done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && !st)
    st = error::failed("cannot write " + file.string() + ": " + std::strerror(errno));
  return st;
}

}  // namespace sailor::files
