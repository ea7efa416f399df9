// The macOS no-symlink directory open of ccsb/launch/safe_path.hpp (L8, B2):
// open_dir_walk_nofollow(), one openat(O_NOFOLLOW | O_DIRECTORY) per
// component from "/", each fstat-checked. Plain POSIX, so it runs here on
// Linux exactly as written; a Mac's openat/fstat semantics for O_NOFOLLOW on
// a symlink (ELOOP) are the same by POSIX, but only a Mac shows it
// (mac_only/). ccsb-run-macsim takes this walk for --events and --handle
// (test_macsim.cpp).
#include "ccsb/launch/safe_path.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

using namespace ccsb;
namespace fs = std::filesystem;

namespace {

// errno of a walk that must fail, or 0 when it opened (and it is closed).
int walk_errno(const std::string& p) {
  errno = 0;
  int fd = launch::open_dir_walk_nofollow(p);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  return errno;
}

struct tree {
  fs::path d = fs::temp_directory_path() / ("ccsb-walk-" + std::to_string(::getpid()));
  tree() {
    fs::remove_all(d);
    fs::create_directories(d / "a" / "b");
    std::ofstream(d / "a" / "file") << "x";
    fs::create_directory_symlink(d / "a", d / "link");
    fs::create_directory_symlink("b", d / "a" / "rel");
  }
  ~tree() { fs::remove_all(d); }
  std::string operator/(const std::string& rel) const { return (d / rel).string(); }
};

} // namespace

TEST_CASE("L8: the macOS directory walk opens real directories, the same one stat sees", "[L8][B2]") {
  tree t;
  int fd = launch::open_dir_walk_nofollow(t / "a/b");
  REQUIRE(fd >= 0);
  struct stat by_fd{}, by_path{};
  REQUIRE(::fstat(fd, &by_fd) == 0);
  ::close(fd);
  REQUIRE(::stat((t / "a/b").c_str(), &by_path) == 0);
  CHECK(by_fd.st_ino == by_path.st_ino);
  CHECK(by_fd.st_dev == by_path.st_dev);
  CHECK(walk_errno("/") == 0);
  CHECK(walk_errno(t / "a//./b/") == 0); // empty and "." components are skipped
}

TEST_CASE("L8: the macOS directory walk refuses a symlink anywhere on the way with ELOOP", "[L8][B2]") {
  tree t;
  CHECK(walk_errno(t / "link") == ELOOP);   // the last component
  CHECK(walk_errno(t / "link/b") == ELOOP); // a middle one
  CHECK(walk_errno(t / "a/rel") == ELOOP);  // a relative link
}

TEST_CASE("L8: the macOS directory walk refuses files, '..' and relative paths", "[L8][B2]") {
  tree t;
  CHECK(walk_errno(t / "a/file") == ENOTDIR);
  CHECK(walk_errno(t / "a/file/x") == ENOTDIR);
  CHECK(walk_errno(t / "a/missing") == ENOENT);
  CHECK(walk_errno(t / "a/../a") == EINVAL);
  CHECK(walk_errno("a/b") == EINVAL);
  CHECK(walk_errno("") == EINVAL);
}
