#include "sailor/config/private_files.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {
unsigned mode_of(const fs::path& p) {
  struct stat s {};
  return ::stat(p.c_str(), &s) == 0 ? (s.st_mode & 0777) : 0xffff;
}
}  // namespace

TEST_CASE("private files: folders made 0700 (parents too) and files written 0600, whatever the umask") {
  const auto old = ::umask(022);
  std::random_device rd;
  const auto root = fs::temp_directory_path() / ("sailor-private-" + std::to_string(rd()));
  const auto folder = root / "a" / "b";
  REQUIRE_FALSE(sailor::files::make_private_folder(folder));
  CHECK(mode_of(root) == 0700);
  CHECK(mode_of(root / "a") == 0700);
  CHECK(mode_of(folder) == 0700);
  // An existing file of another mode is made private before its new text goes in.
  { std::ofstream(folder / "token") << "old\n"; }
  ::chmod((folder / "token").c_str(), 0644);
  REQUIRE_FALSE(sailor::files::write_private_file(folder / "token", "secret\n"));
  CHECK(mode_of(folder / "token") == 0600);
  std::ifstream in(folder / "token");
  std::string line;
  std::getline(in, line);
  CHECK(line == "secret");
  // A folder that exists is the user's: it keeps its mode. A file in place of a folder is an
  // error naming it.
  ::chmod(folder.c_str(), 0755);
  CHECK_FALSE(sailor::files::make_private_folder(folder));
  CHECK(mode_of(folder) == 0755);
  auto err = sailor::files::make_private_folder(folder / "token" / "x");
  REQUIRE(err);
  CHECK(err->message.find((folder / "token").string()) != std::string::npos);
  ::umask(old);
  fs::remove_all(root);
}

TEST_CASE("private files: restrict_new_files leaves group and others out of what is created next") {
  const auto old = ::umask(022);
  sailor::files::restrict_new_files();
  const auto now = ::umask(old);
  CHECK(now == 077);
}
