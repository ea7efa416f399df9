// P7 exceptions (createAllow): the spec field, its JSON, and compile()'s
// checks against the writable roots.
#include "ccsb/policy.hpp"
#include "ccsb/spec_json.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>

using namespace ccsb;

namespace {

host_facts fake_facts() {
  host_facts f;
  f.home = "/home/u";
  f.resolve = [](const std::string& p) -> std::optional<std::string> {
    if (p == "/link-ws" || p.rfind("/link-ws/", 0) == 0) return "/ws" + p.substr(8);
    return p;
  };
  f.kind = [](const std::string&) { return path_kind::missing; };
  f.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}};
  return f;
}

sandbox_spec spec_with(std::vector<std::string> allow) {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/link-ws", "/link-ws", false}, {"/ref", "/ref", true}};
  s.protected_paths = {"/ws/orig"};
  s.runner_state_dirs = {"/home/u/state"};
  s.create_allow = std::move(allow);
  return s;
}

error refused(std::vector<std::string> allow) {
  auto pol = compile(spec_with(std::move(allow)), profile::dispatch, fake_facts());
  REQUIRE_FALSE(pol);
  return pol.err();
}

} // namespace

TEST_CASE("P7: createAllow is a spec field, read and written as JSON, syntax checked naming createAllow[i]",
          "[P7][S1][createAllow]") {
  auto s = parse_spec(R"({"sessionId":"s","workspaceId":"w","createAllow":[".venv/**","node_modules/**"]})");
  REQUIRE(s);
  CHECK(s->create_allow == std::vector<std::string>{".venv/**", "node_modules/**"});
  auto back = parse_spec(to_json_string(*s));
  REQUIRE(back);
  CHECK(*back == *s);
  auto bad = parse_spec(R"({"sessionId":"s","workspaceId":"w","createAllow":[".venv/**","node_modules/**","**"]})");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::invalid_pattern);
  CHECK(bad.err().field == "createAllow[2]");
  auto typed = parse_spec(R"({"sessionId":"s","workspaceId":"w","createAllow":".venv/**"})");
  REQUIRE_FALSE(typed);
  CHECK(typed.err().field == "createAllow");
}

TEST_CASE("P7: createAllow is never a default, and compiles below every writable root", "[P7][createAllow]") {
  auto none = compile(spec_with({}), profile::dispatch, fake_facts());
  REQUIRE(none);
  CHECK(none->create_allow.empty());
  auto pol = compile(spec_with({".venv/**"}), profile::dispatch, fake_facts());
  REQUIRE(pol);
  CHECK(pol->create_allow == std::vector<std::string>{"/home/u/state/.venv/**", "/ws/.venv/**"});
  // An absolute pattern names its root as bound or resolved; nothing below
  // the root is resolved.
  for (const char* p : {"/link-ws/.venv/**", "/ws/.venv/**"}) {
    auto a = compile(spec_with({p}), profile::dispatch, fake_facts());
    REQUIRE(a);
    CHECK(a->create_allow == std::vector<std::string>{"/ws/.venv/**"});
  }
}

TEST_CASE("P7: createAllow is refused for a root, outside every root, into a protected path", "[P7][createAllow]") {
  auto e = refused({".env", "/ws/**"});
  CHECK(e.code == errc::invalid_pattern);
  CHECK(e.field == "createAllow[1]");
  e = refused({"/link-ws/*"});
  CHECK(e.field == "createAllow[0]");
  e = refused({"/ref/x/**"}); // read-only bind
  CHECK(e.field == "createAllow[0]");
  CHECK(e.message.find("below no writable root") != std::string::npos);
  e = refused({"/elsewhere/.env"});
  CHECK(e.message.find("below no writable root") != std::string::npos);
  e = refused({"orig/**"});
  CHECK(e.message.find("protected path") != std::string::npos);
  e = refused({"/ws/orig/.env"});
  CHECK(e.message.find("protected path") != std::string::npos);
  e = refused({".git/**"});
  CHECK(e.field == "createAllow[0]");
}

TEST_CASE("P7: createAllow outside the dispatch profile is a note, not an exception", "[P7][createAllow]") {
  auto pol = compile(spec_with({".venv/**"}), profile::spec, fake_facts());
  REQUIRE(pol);
  CHECK(pol->create_allow.empty());
  CHECK(std::find_if(pol->notes.begin(), pol->notes.end(), [](const std::string& n) {
          return n.find("createAllow has no effect in the spec profile") != std::string::npos;
        }) != pol->notes.end());
}
