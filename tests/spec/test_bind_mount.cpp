// S2: bind mounts.
#include "ccsb/spec_json.hpp"
#include "spec_test_util.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using ccsb::errc;
using spec_test::with_field;
using spec_test::with_mount_field;

namespace {
std::string mounts(const std::string& array_json) { return with_field("bindMounts", array_json); }
} // namespace

TEST_CASE("S2: guestPath defaults to hostPath and readOnly to false", "[S2]") {
  auto r = ccsb::parse_spec(mounts(R"([{"hostPath":"/work/wt"}])"));
  REQUIRE(r);
  REQUIRE(r->bind_mounts.size() == 1);
  CHECK(r->bind_mounts[0].host_path == "/work/wt");
  CHECK(r->bind_mounts[0].guest_path == "/work/wt");
  CHECK(r->bind_mounts[0].read_only == false);
  // and the written form carries all three
  const auto v = ccsb::to_json(r->bind_mounts[0]);
  CHECK(v.get("guestPath").get<std::string>() == "/work/wt");
  CHECK(v.get("readOnly").get<bool>() == false);
}

TEST_CASE("S2: readOnly true is kept", "[S2]") {
  auto r = ccsb::parse_spec(with_mount_field("readOnly", "true"));
  REQUIRE(r);
  CHECK(r->bind_mounts.at(0).read_only);
}

TEST_CASE("S2: missing hostPath is an error naming bindMounts[i].hostPath", "[S2]") {
  auto r = ccsb::parse_spec(mounts(R"([{"hostPath":"/a"},{"guestPath":"/b","readOnly":true}])"));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::missing_field);
  CHECK(r.err().field == "bindMounts[1].hostPath");
}

TEST_CASE("S2: relative or malformed hostPath and guestPath are invalid_argument naming the path", "[S2]") {
  struct row {
    const char* array;
    const char* field;
  };
  const std::vector<row> rows{
      {R"([{"hostPath":"/a"},{"hostPath":"/b"},{"hostPath":"rel/c"}])", "bindMounts[2].hostPath"},
      {R"([{"hostPath":""}])", "bindMounts[0].hostPath"},
      {R"([{"hostPath":"./x"}])", "bindMounts[0].hostPath"},
      {R"([{"hostPath":"/a/../../etc"}])", "bindMounts[0].hostPath"},
      {R"([{"hostPath":"/a\u0000/b"}])", "bindMounts[0].hostPath"},
      {R"([{"hostPath":"/a","guestPath":"a"}])", "bindMounts[0].guestPath"},
      {R"([{"hostPath":"/a","guestPath":""}])", "bindMounts[0].guestPath"},
      {R"([{"hostPath":"/a","guestPath":"/g/.."}])", "bindMounts[0].guestPath"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.array);
    auto p = ccsb::parse_spec(mounts(r.array));
    REQUIRE_FALSE(p);
    CHECK(p.err().code == errc::invalid_argument);
    CHECK(p.err().field == r.field);
  }
  auto p = ccsb::parse_spec(mounts(R"([{"hostPath":"rel"}])"));
  REQUIRE_FALSE(p);
  CHECK(p.err().message.find("absolute") != std::string::npos);
  CHECK(p.err().what().rfind("bindMounts[0].hostPath: ", 0) == 0);
}

TEST_CASE("S2: a guestPath that differs from hostPath is kept by the model", "[S2]") {
  // Native requires guestPath == hostPath; the native policy compiler rejects
  // a difference. The model keeps it, so nothing is silently rewritten.
  auto r = ccsb::parse_spec(mounts(R"([{"hostPath":"/h","guestPath":"/g"}])"));
  REQUIRE(r);
  CHECK(r->bind_mounts.at(0).guest_path == "/g");
  CHECK(ccsb::to_json(r->bind_mounts.at(0)).get("guestPath").get<std::string>() == "/g");
}

TEST_CASE("S2: conflicting mounts of one guestPath are rejected, exact duplicates accepted", "[S2]") {
  auto conflict_ro = ccsb::parse_spec(mounts(R"([{"hostPath":"/a"},{"hostPath":"/b"},{"hostPath":"/a","readOnly":true}])"));
  REQUIRE_FALSE(conflict_ro);
  CHECK(conflict_ro.err().code == errc::invalid_argument);
  CHECK(conflict_ro.err().field == "bindMounts[2].guestPath");
  CHECK(conflict_ro.err().message.find("bindMounts[0]") != std::string::npos);

  auto conflict_host = ccsb::parse_spec(mounts(R"([{"hostPath":"/a","guestPath":"/g"},{"hostPath":"/b","guestPath":"/g"}])"));
  REQUIRE_FALSE(conflict_host);
  CHECK(conflict_host.err().field == "bindMounts[1].guestPath");

  auto same = ccsb::parse_spec(mounts(R"([{"hostPath":"/a","readOnly":true},{"hostPath":"/a","readOnly":true}])"));
  REQUIRE(same);
  CHECK(same->bind_mounts.size() == 2);
}

TEST_CASE("S2: validate applies the same rules to specs built in C++", "[S2]") {
  ccsb::sandbox_spec s;
  s.session_id = "s";
  s.workspace_id = "w";
  s.bind_mounts = {{"/ok", "/ok", false}, {"relative", "relative", false}};
  auto r = ccsb::validate(s);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().field == "bindMounts[1].hostPath");
  s.bind_mounts[1] = {"/abs", "/abs", true};
  CHECK(ccsb::validate(s));
}
