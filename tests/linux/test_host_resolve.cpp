// The launcher's resolver (ccsb/launch/host.hpp path_resolver) against
// realpath(3): compile() takes every decision on resolved paths (P6), so
// the remembering resolver must answer exactly as realpath does, for every
// kind of path: symlinks absolute and relative, chains, loops, dangling
// links, "..", ".", trailing slashes, a file used as a directory, more than
// 40 links on the way.
#include "ccsb/launch/host.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

struct scratch_tree {
  ccsb_test::temp_dir tmp{"ccsb-resolve"};
  std::string root;
  scratch_tree() {
    root = tmp.path();
    auto dir = [&](const std::string& p) { REQUIRE(::mkdir((root + p).c_str(), 0755) == 0); };
    auto file = [&](const std::string& p) {
      FILE* f = std::fopen((root + p).c_str(), "w");
      REQUIRE(f);
      std::fclose(f);
    };
    auto link = [&](const std::string& target, const std::string& p) {
      REQUIRE(::symlink(target.c_str(), (root + p).c_str()) == 0);
    };
    const std::string base = root.substr(root.rfind('/') + 1);
    dir("/d");
    dir("/d/sub");
    file("/d/sub/x");
    file("/f");
    link(root + "/d", "/l_abs");
    link("d", "/l_rel");
    link("../" + base + "/d", "/l_up");
    link("loop2", "/loop1");
    link("loop1", "/loop2");
    link("nothing-here", "/dang");
    link("f", "/l_file");
    link("d/sub/..", "/l_dotdot");
    link("d/", "/l_trail");
    link("f/", "/l_trail_file");
    link("f/..", "/l_file_up");
    link("/", "/l_root");
    link("l_rel/sub", "/l_two");
    // 45 links in a row: realpath gives up after 40 (ELOOP)
    for (int i = 0; i < 45; ++i) link("c" + std::to_string(i + 1), "/c" + std::to_string(i));
    link("d", "/c45");
    // 30 in a row: fine
    for (int i = 0; i < 30; ++i) link("s" + std::to_string(i + 1), "/s" + std::to_string(i));
    link("d", "/s30");
  }
};

std::optional<std::string> libc_realpath(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

} // namespace

TEST_CASE("P6 (issue 9): the launcher's remembering resolver answers every path exactly as realpath", "[P6][launcher]") {
  scratch_tree t;
  const std::vector<std::string> words{"d",      "f",   "sub",        "x",         "l_abs",     "l_rel",  "l_up",
                                       "loop1",  "dang", "l_file",    "l_dotdot",  "l_trail",   "l_trail_file",
                                       "l_file_up", "l_root", "l_two", "c0",       "s0",        ".",      "..",
                                       "missing", ""};
  ccsb::launch::path_resolver shared; // one resolver for every query, as in one launch
  std::size_t compared = 0, resolved = 0;
  auto check = [&](const std::string& p) {
    ccsb::launch::path_resolver fresh;
    const auto want = libc_realpath(p);
    INFO(p << " -> realpath " << want.value_or("(fails)"));
    CHECK(fresh(p) == want);
    CHECK(shared(p) == want);
    ++compared;
    if (want) ++resolved;
  };
  for (const auto& a : words)
    for (const auto& b : words)
      for (const auto& c : words)
        for (const char* tail : {"", "/"}) check(t.root + "/" + a + "/" + b + "/" + c + tail);
  check("/");
  check("//");
  check(t.root);
  check(t.root + "/");
  check("/proc/self/cwd");
  check("/etc/os-release");
  // Both answers occur (the tree is not all failures, not all successes).
  CHECK(resolved > 500);
  CHECK(compared - resolved > 1000);
}

TEST_CASE("P6 (issue 9): a relative path goes to realpath itself", "[P6][launcher]") {
  ccsb::launch::path_resolver r;
  CHECK(r(".") == libc_realpath("."));
  CHECK(r("no-such-name-here") == libc_realpath("no-such-name-here"));
}
