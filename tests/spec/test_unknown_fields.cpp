// S1: unknown spec fields are ignored by the reader and listed, with their
// path and the closest known field, for the callers that warn or refuse.
#include <catch2/catch.hpp>

#include "ccsb/spec_json.hpp"

using ccsb::unknown_field;

namespace {
std::vector<unknown_field> unknown(std::string_view text, const std::string& prefix = "spec.") {
  auto v = ccsb::parse_json(text);
  REQUIRE(v);
  return ccsb::unknown_spec_fields(*v, prefix);
}
} // namespace

TEST_CASE("S1: a misspelt spec key is listed with its path and a close suggestion", "[S1]") {
  auto u = unknown(R"({"sessionId":"s","workspaceId":"w","protectedPath":["/x"]})");
  REQUIRE(u.size() == 1);
  CHECK(u[0] == unknown_field{"spec.protectedPath", "protectedPaths"});
  CHECK(ccsb::describe(u[0]) == "spec.protectedPath is not a spec field and is ignored (did you mean protectedPaths?)");
  // The reader itself still ignores it (S1): the path is NOT protected.
  auto s = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w","protectedPath":["/x"]})");
  REQUIRE(s);
  CHECK(s->protected_paths.empty());
}

TEST_CASE("S1: unknown keys are found in bind mounts too, case and transposition typos suggested", "[S1]") {
  auto u = unknown(R"({"sessionId":"s","workspaceId":"w","bindMounts":[{"hostPath":"/a"},{"hostPath":"/b","readonly":true}],
                       "egresAllowlist":[],"NetworkEnabled":false,"createalow":[],"zzz":{"nested":1}})");
  REQUIRE(u.size() == 5);
  // Key order (picojson objects are sorted), then the bind mounts.
  CHECK(u[0] == unknown_field{"spec.NetworkEnabled", "networkEnabled"});
  CHECK(u[1] == unknown_field{"spec.createalow", "createAllow"});
  CHECK(u[2] == unknown_field{"spec.egresAllowlist", "egressAllowlist"});
  CHECK(u[3] == unknown_field{"spec.zzz", ""});
  CHECK(u[4] == unknown_field{"spec.bindMounts[1].readonly", "readOnly"});
  CHECK(ccsb::describe(u[3]) == "spec.zzz is not a spec field and is ignored");
}

TEST_CASE("S1: a spec with only known fields has no unknown keys", "[S1]") {
  CHECK(unknown(R"({"sessionId":"s","workspaceId":"w","agentId":null,"bindMounts":[{"hostPath":"/a","guestPath":"/a",
                    "readOnly":false}],"networkEnabled":true,"egressAllowlist":[],"guestWorkdir":null,"mode":"chat",
                    "protectedPaths":[],"runnerStateDirs":[],"execGrantRoots":[],"createAllow":[]})")
            .empty());
  auto s = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w"})");
  REQUIRE(s);
  CHECK(ccsb::unknown_spec_fields(ccsb::to_json(*s)).empty()); // what the writer writes, the reader knows
}
