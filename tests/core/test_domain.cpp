#include "ccsb/egress.hpp"
#include <catch2/catch.hpp>
#include <string>

TEST_CASE("N3: paths compiled in", "[N3]") {
  REQUIRE(std::string(CCSB_BIN_DIR).size() > 0);
}
