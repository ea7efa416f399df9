// ccsb_test/golden.hpp — golden files compared byte for byte.
//
// A golden file is the reviewed text form of a renderer's output. With
// CCSB_UPDATE_GOLDEN=1 the test first writes what it produced (regenerate
// after a deliberate change, then review the diff like code); a missing file
// fails the test.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace ccsb_test {

// The golden files of one renderer: <source>/<dir>/<name><extension>.
struct golden_dir {
  std::string dir;       // relative to the source tree, e.g. "tests/linux/golden"
  std::string extension; // e.g. ".txt"

  std::string path(const std::string& name) const {
    return std::string(CCSB_SOURCE_DIR) + "/" + dir + "/" + name + extension;
  }

  void check(const std::string& name, const std::string& actual) const {
    const std::string file = path(name);
    if (const char* u = std::getenv("CCSB_UPDATE_GOLDEN"); u && std::string(u) == "1")
      std::ofstream(file, std::ios::trunc | std::ios::binary) << actual;
    std::ifstream f(file, std::ios::binary);
    INFO("golden file " << file << " (CCSB_UPDATE_GOLDEN=1 regenerates)");
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(ss.str() == actual);
  }
};

} // namespace ccsb_test
