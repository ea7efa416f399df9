#include "ccsb/backend_name.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

using ccsb::backend;

// from_name is constexpr: the mapping is fixed at compile time too.
static_assert(ccsb::from_name(std::nullopt) == backend::none);
static_assert(ccsb::from_name("docker") == backend::native);
static_assert(ccsb::to_string(backend::microvm) == "microvm");

TEST_CASE("B1: from_name maps docker to native and unknown to none", "[B1]") {
  struct row {
    std::optional<std::string_view> name;
    backend want;
  };
  const std::vector<row> rows{
      {std::nullopt, backend::none},
      {"microvm", backend::microvm},
      {"native", backend::native},
      {"none", backend::none},
      {"docker", backend::native},
      // Unrecognised, including other spellings of real names (case-sensitive).
      {"", backend::none},
      {"Native", backend::none},
      {"NATIVE", backend::none},
      {"Docker", backend::none},
      {"MicroVM", backend::none},
      {" native", backend::none},
      {"native ", backend::none},
      {"nativ", backend::none},
      {"natives", backend::none},
      {"seatbelt", backend::none},
      {"bwrap", backend::none},
      {std::string_view("native\0", 7), backend::none},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name ? std::string(*r.name) : std::string("<absent>"));
    CHECK(ccsb::from_name(r.name) == r.want);
  }
}

TEST_CASE("B1: from_name accepts std::string and optional<string_view> alike", "[B1]") {
  const std::string s = "docker";
  CHECK(ccsb::from_name(s) == backend::native);
  const std::optional<std::string_view> absent;
  CHECK(ccsb::from_name(absent) == backend::none);
}

TEST_CASE("B1: to_string gives the stored lowercase names and from_name inverts it", "[B1]") {
  CHECK(ccsb::to_string(backend::microvm) == "microvm");
  CHECK(ccsb::to_string(backend::native) == "native");
  CHECK(ccsb::to_string(backend::none) == "none");
  for (backend b : {backend::microvm, backend::native, backend::none})
    CHECK(ccsb::from_name(ccsb::to_string(b)) == b);
}
