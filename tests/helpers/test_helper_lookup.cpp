// S8 T4 (issue 28 item 9): the helper lookup order of helpers.hpp
// (next to the program, then ../libexec/ccsb from it, then the compiled-in
// helper directory; the flag and the environment variable before all of
// them), on real files in a scratch tree.
#include "ccsb/launch/request_builder.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace {

struct tree {
  ccsb_test::temp_dir tmp{"ccsb-helper-lookup"};
  std::string root;
  tree() {
    root = tmp.path();
    for (const char* d : {"/prefix", "/prefix/bin", "/prefix/libexec", "/prefix/libexec/ccsb", "/other"})
      REQUIRE(::mkdir((root + d).c_str(), 0755) == 0);
  }
  void program(const std::string& rel, mode_t mode = 0755) const {
    std::ofstream(root + rel) << "#!/bin/sh\n";
    REQUIRE(::chmod((root + rel).c_str(), mode) == 0);
  }
};

} // namespace

TEST_CASE("S8 T4: a helper is found next to the program, then in ../libexec/ccsb, then in the compiled-in directory",
          "[S8][T4]") {
  namespace L = ccsb::launch;
  tree t;
  const std::string bin = t.root + "/prefix/bin", other = t.root + "/other";

  // Nowhere: the first candidate, so the launch names where it looked first.
  CHECK(L::find_helper("ccsb-init", bin, other) == bin + "/ccsb-init");

  // The compiled-in directory (a program built against an installed package).
  t.program("/other/ccsb-init");
  CHECK(L::find_helper("ccsb-init", bin, other) == other + "/ccsb-init");

  // An installed package's libexec/ccsb wins over it.
  t.program("/prefix/libexec/ccsb/ccsb-init");
  CHECK(L::find_helper("ccsb-init", bin, other) == t.root + "/prefix/libexec/ccsb/ccsb-init");

  // A file that is not executable is passed over; one next to the program wins.
  t.program("/prefix/bin/ccsb-init", 0644);
  CHECK(L::find_helper("ccsb-init", bin, other) == t.root + "/prefix/libexec/ccsb/ccsb-init");
  t.program("/prefix/bin/ccsb-init", 0755);
  CHECK(L::find_helper("ccsb-init", bin, other) == bin + "/ccsb-init");

  // A directory of that name is no helper.
  REQUIRE(::mkdir((t.root + "/prefix/libexec/ccsb/egressd").c_str(), 0755) == 0);
  t.program("/other/egressd");
  CHECK(L::find_helper("egressd", bin, other) == other + "/egressd");

  // Without a compiled-in directory there are two candidates.
  CHECK(L::helper_candidates("egressd", bin, "") ==
        std::vector<std::string>{bin + "/egressd", t.root + "/prefix/libexec/ccsb/egressd"});
}

TEST_CASE("S8 T4: the flag and then the environment variable name a helper before any lookup", "[S8][T4]") {
  namespace L = ccsb::launch;
  ::setenv("CCSB_TEST_HELPER", "/from/env/egressd", 1);
  CHECK(L::helper_path(std::string("/from/flag/egressd"), "CCSB_TEST_HELPER", "egressd") == "/from/flag/egressd");
  CHECK(L::helper_path(std::nullopt, "CCSB_TEST_HELPER", "egressd") == "/from/env/egressd");
  ::setenv("CCSB_TEST_HELPER", "", 1);
  // Empty: the lookup, whose first candidate lies next to this test program.
  CHECK(L::helper_path(std::nullopt, "CCSB_TEST_HELPER", "no-such-helper") == L::self_dir() + "/no-such-helper");
  ::unsetenv("CCSB_TEST_HELPER");
}
