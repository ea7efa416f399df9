// S1: the sandbox spec and its JSON form.
#include "ccsb/spec_json.hpp"
#include "spec_test_util.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

using ccsb::errc;
using spec_test::with_field;

namespace {

const char* const kFull = R"({
  "sessionId": "room-42",
  "workspaceId": "ws-7",
  "agentId": "claude",
  "bindMounts": [
    {"hostPath": "/work/wt/a", "guestPath": "/work/wt/a", "readOnly": false},
    {"hostPath": "/opt/tools", "readOnly": true}
  ],
  "networkEnabled": false,
  "egressAllowlist": ["*.example.com", "bedrock.*.amazonaws.com"],
  "guestWorkdir": "/work/wt/a",
  "mode": "review",
  "protectedPaths": ["/src/repo"],
  "runnerStateDirs": ["/home/u/.cc/claude"],
  "execGrantRoots": ["/home/u/bin"],
  "someFutureField": {"ignored": [1, 2, 3]}
})";

ccsb::error parse_err(const std::string& text) {
  auto r = ccsb::parse_spec(text);
  REQUIRE_FALSE(r);
  return r.err();
}

} // namespace

TEST_CASE("S1: a full spec reads every field", "[S1]") {
  auto r = ccsb::parse_spec(kFull);
  REQUIRE(r);
  const auto& s = *r;
  CHECK(s.session_id == "room-42");
  CHECK(s.workspace_id == "ws-7");
  CHECK(s.agent_id == std::optional<std::string>("claude"));
  REQUIRE(s.bind_mounts.size() == 2);
  CHECK(s.bind_mounts[0] == ccsb::bind_mount{"/work/wt/a", "/work/wt/a", false});
  CHECK(s.bind_mounts[1] == ccsb::bind_mount{"/opt/tools", "/opt/tools", true});
  CHECK_FALSE(s.network_enabled);
  CHECK(s.egress_allowlist == std::vector<std::string>{"*.example.com", "bedrock.*.amazonaws.com"});
  CHECK(s.guest_workdir == std::optional<std::string>("/work/wt/a"));
  CHECK(s.mode == ccsb::mode::review);
  CHECK(s.protected_paths == std::vector<std::string>{"/src/repo"});
  CHECK(s.runner_state_dirs == std::vector<std::string>{"/home/u/.cc/claude"});
  CHECK(s.exec_grant_roots == std::vector<std::string>{"/home/u/bin"});
}

TEST_CASE("S1: a minimal spec takes every default", "[S1]") {
  auto r = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w"})");
  REQUIRE(r);
  const auto& s = *r;
  CHECK(s.session_id == "s");
  CHECK(s.workspace_id == "w");
  CHECK_FALSE(s.agent_id.has_value());
  CHECK(s.bind_mounts.empty());
  CHECK(s.network_enabled == true);
  CHECK(s.egress_allowlist.empty());
  CHECK_FALSE(s.guest_workdir.has_value());
  CHECK(s.mode == ccsb::mode::chat);
  CHECK(s.protected_paths.empty());
  CHECK(s.runner_state_dirs.empty());
  CHECK(s.exec_grant_roots.empty());
  // And the C++ defaults are the same as the JSON defaults.
  ccsb::sandbox_spec d;
  d.session_id = "s";
  d.workspace_id = "w";
  CHECK(s == d);
}

TEST_CASE("S1: missing sessionId is an error naming the field", "[S1]") {
  for (const char* key : {"sessionId", "workspaceId"}) {
    CAPTURE(key);
    auto e = parse_err(spec_test::without_field(kFull, key));
    CHECK(e.code == errc::missing_field);
    CHECK(e.field == key);
  }
}

TEST_CASE("S1: every field's wrong type is an error naming the field", "[S1]") {
  struct row {
    const char* key;
    const char* value;
    const char* field;
  };
  const std::vector<row> rows{
      {"sessionId", "5", "sessionId"},
      {"sessionId", "null", "sessionId"},
      {"sessionId", "[\"s\"]", "sessionId"},
      {"workspaceId", "true", "workspaceId"},
      {"workspaceId", "null", "workspaceId"},
      {"agentId", "5", "agentId"},
      {"agentId", "{}", "agentId"},
      {"bindMounts", "{}", "bindMounts"},
      {"bindMounts", "\"/h\"", "bindMounts"},
      {"bindMounts", "null", "bindMounts"},
      {"bindMounts", "[\"/h\"]", "bindMounts[0]"},
      {"bindMounts", "[{\"hostPath\":\"/a\"},{\"hostPath\":\"/b\"},{\"hostPath\":7}]", "bindMounts[2].hostPath"},
      {"bindMounts", "[{\"hostPath\":null}]", "bindMounts[0].hostPath"},
      {"bindMounts", "[{\"hostPath\":\"/a\",\"guestPath\":null}]", "bindMounts[0].guestPath"},
      {"bindMounts", "[{\"hostPath\":\"/a\",\"guestPath\":1}]", "bindMounts[0].guestPath"},
      {"bindMounts", "[{\"hostPath\":\"/a\",\"readOnly\":\"true\"}]", "bindMounts[0].readOnly"},
      {"bindMounts", "[{\"hostPath\":\"/a\",\"readOnly\":1}]", "bindMounts[0].readOnly"},
      {"bindMounts", "[{\"hostPath\":\"/a\",\"readOnly\":null}]", "bindMounts[0].readOnly"},
      {"networkEnabled", "\"yes\"", "networkEnabled"},
      {"networkEnabled", "1", "networkEnabled"},
      {"networkEnabled", "null", "networkEnabled"},
      {"egressAllowlist", "\"a.com\"", "egressAllowlist"},
      {"egressAllowlist", "null", "egressAllowlist"},
      {"egressAllowlist", "[\"a.com\", 1]", "egressAllowlist[1]"},
      {"guestWorkdir", "7", "guestWorkdir"},
      {"guestWorkdir", "[]", "guestWorkdir"},
      {"mode", "1", "mode"},
      {"mode", "null", "mode"},
      {"mode", "[\"chat\"]", "mode"},
      {"protectedPaths", "\"/x\"", "protectedPaths"},
      {"protectedPaths", "null", "protectedPaths"},
      {"protectedPaths", "[\"/x\", null]", "protectedPaths[1]"},
      {"runnerStateDirs", "{}", "runnerStateDirs"},
      {"runnerStateDirs", "[true]", "runnerStateDirs[0]"},
      {"execGrantRoots", "false", "execGrantRoots"},
      {"execGrantRoots", "[\"/a\", \"/b\", 3.5]", "execGrantRoots[2]"},
  };
  for (const auto& r : rows) {
    const std::string text = with_field(r.key, r.value);
    CAPTURE(text);
    auto e = parse_err(text);
    CHECK(e.code == errc::wrong_type);
    CHECK(e.field == r.field);
    CHECK(e.message.find("expected") != std::string::npos);
  }
}

TEST_CASE("S1: JSON null is accepted for agentId and guestWorkdir", "[S1]") {
  for (const char* key : {"agentId", "guestWorkdir"}) {
    CAPTURE(key);
    auto r = ccsb::parse_spec(with_field(key, "null"));
    REQUIRE(r);
    CHECK_FALSE(r->agent_id.has_value());
    CHECK_FALSE(r->guest_workdir.has_value());
  }
}

TEST_CASE("S1: mode accepts exactly the four names and an error lists them", "[S1]") {
  const std::vector<std::pair<const char*, ccsb::mode>> good{
      {"chat", ccsb::mode::chat}, {"review", ccsb::mode::review},
      {"plan", ccsb::mode::plan}, {"orchestrate", ccsb::mode::orchestrate}};
  for (const auto& [name, m] : good) {
    auto r = ccsb::parse_spec(with_field("mode", std::string("\"") + name + "\""));
    REQUIRE(r);
    CHECK(r->mode == m);
    CHECK(ccsb::to_string(m) == name);
  }
  for (const char* bad : {"\"Chat\"", "\"\"", "\"admin\"", "\"chat \"", "\"REVIEW\""}) {
    CAPTURE(bad);
    auto e = parse_err(with_field("mode", bad));
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.field == "mode");
    for (const char* name : {"chat", "review", "plan", "orchestrate"})
      CHECK(e.message.find(name) != std::string::npos);
  }
}

TEST_CASE("S1: a top level that is not an object is a wrong type at $", "[S1]") {
  for (const char* text : {"[]", "\"spec\"", "null", "1", "true"}) {
    CAPTURE(text);
    auto e = parse_err(text);
    CHECK(e.code == errc::wrong_type);
    CHECK(e.field == "$");
  }
}

TEST_CASE("S1: unknown fields are ignored", "[S1]") {
  auto a = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w","x":1,"bindMounts":[{"hostPath":"/h","extra":{"y":[null]}}]})");
  auto b = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w","bindMounts":[{"hostPath":"/h"}]})");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
}

TEST_CASE("S1: duplicate keys are rejected naming the key path", "[S1]") {
  struct row {
    const char* text;
    const char* field;
  };
  const std::vector<row> rows{
      {R"({"sessionId":"a","workspaceId":"w","sessionId":"b"})", "sessionId"},
      {R"({"sessionId":"a","workspaceId":"w","bindMounts":[{"hostPath":"/h","readOnly":true,"readOnly":false}]})",
       "bindMounts[0].readOnly"},
      {R"({"sessionId":"a","workspaceId":"w","x":{"y":1,"y":2}})", "x.y"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.text);
    auto e = parse_err(r.text);
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.field == r.field);
    CHECK(e.message.find("duplicate") != std::string::npos);
  }
}

TEST_CASE("S1: malformed JSON, trailing data and out-of-range numbers fail closed", "[S1]") {
  static const char kRawNul[] = "{\"sessionId\":\"s\0\",\"workspaceId\":\"w\"}";
  struct row {
    std::string text;
    const char* field;
  };
  const std::vector<row> rows{
      {"", "$"},
      {"   ", "$"},
      {"{", "$"},
      {R"({"sessionId":"s","workspaceId":"w"} x)", "$"},
      {R"({"sessionId":"s","workspaceId":"w"}{})", "$"},
      {R"({"sessionId":"s","workspaceId":"w",})", "$"},
      {R"({'sessionId':'s'})", "$"},
      {R"({"sessionId":"s","workspaceId":"w","n":1e999})", "n"},
      {R"({"sessionId":"s","workspaceId":"w","n":[-1e999]})", "n[0]"},
      {std::string(kRawNul, sizeof kRawNul - 1), "$"}, // a raw NUL byte inside a string
  };
  for (const auto& r : rows) {
    CAPTURE(r.text);
    auto e = parse_err(r.text);
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.field == r.field);
  }
  // Whitespace around the value is fine.
  CHECK(ccsb::parse_spec(" \n\t{\"sessionId\":\"s\",\"workspaceId\":\"w\"}\r\n "));
}

TEST_CASE("S1: nesting deeper than 64 levels is rejected before picojson recurses", "[S1]") {
  auto nested_arrays = [](std::size_t levels) {
    // the spec object is level 1, the unknown field holds levels-1 arrays
    return R"({"sessionId":"s","workspaceId":"w","x":)" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  CHECK(ccsb::parse_spec(nested_arrays(64)));
  auto e = parse_err(nested_arrays(65));
  CHECK(e.code == errc::invalid_argument);
  CHECK(e.field == "$");
  CHECK(e.message.find("64") != std::string::npos);
  CHECK(e.message.find("byte offset") != std::string::npos);

  // Huge nesting of arrays and of objects (picojson does not count objects).
  std::string arrays(200000, '[');
  CHECK(parse_err(arrays).field == "$");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  auto eo = parse_err(objects);
  CHECK(eo.code == errc::invalid_argument);
  CHECK(eo.message.find("nested deeper") != std::string::npos);

  // Brackets inside strings do not count.
  auto ok = ccsb::parse_spec(with_field("x", "\"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\""));
  CHECK(ok);
}

TEST_CASE("S1: input over the size limit is rejected", "[S1]") {
  std::string big = with_field("x", "\"" + std::string(ccsb::kMaxJsonBytes, 'a') + "\"");
  auto e = parse_err(big);
  CHECK(e.code == errc::invalid_argument);
  CHECK(e.field == "$");
}

TEST_CASE("S1: path lists reject empty, relative, NUL and '..' entries naming the index", "[S1]") {
  struct row {
    const char* value;
    const char* index;
  };
  const std::vector<row> rows{
      {R"(["/ok", ""])", "[1]"},
      {R"(["/ok", "relative/dir"])", "[1]"},
      {R"(["./x"])", "[0]"},
      {R"(["~/repo"])", "[0]"},
      {R"(["/ok", "/a/../b"])", "[1]"},
      {R"(["/a/.."])", "[0]"},
      {R"(["/ok", "/ok2", "/a\u0000b"])", "[2]"},
  };
  for (const char* list : {"protectedPaths", "runnerStateDirs", "execGrantRoots"}) {
    for (const auto& r : rows) {
      CAPTURE(list, r.value);
      auto e = parse_err(with_field(list, r.value));
      CHECK(e.code == errc::invalid_argument);
      CHECK(e.field == std::string(list) + r.index);
    }
    // Dots that are not a ".." component are fine.
    auto good = ccsb::parse_spec(with_field(list, R"(["/a/..b/c", "/a/b..", "/.../x", "/a/./b/"])"));
    CHECK(good);
  }
}

TEST_CASE("S1: guestWorkdir must be an absolute path", "[S1]") {
  for (const char* bad : {"\"\"", "\"work\"", "\"/a/../b\""}) {
    CAPTURE(bad);
    auto e = parse_err(with_field("guestWorkdir", bad));
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.field == "guestWorkdir");
  }
  CHECK(ccsb::parse_spec(with_field("guestWorkdir", "\"/work\"")));
}

TEST_CASE("S1: ids must be non-empty and free of control characters", "[S1]") {
  struct row {
    const char* key;
    const char* value;
  };
  const std::vector<row> rows{
      {"sessionId", "\"\""},        {"workspaceId", "\"\""},
      {"sessionId", "\"a\\nb\""},   {"workspaceId", "\"a\\u0000\""},
      {"agentId", "\"a\\u001b[0m\""},
  };
  for (const auto& r : rows) {
    CAPTURE(r.key, r.value);
    auto e = parse_err(with_field(r.key, r.value));
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.field == r.key);
  }
  auto ok = ccsb::parse_spec(with_field("agentId", "\"\""));
  REQUIRE(ok);
  CHECK(ok->agent_id == std::optional<std::string>(""));
}

TEST_CASE("S1: egressAllowlist entries must be non-empty", "[S1]") {
  auto e = parse_err(with_field("egressAllowlist", R"(["a.com", ""])"));
  CHECK(e.code == errc::invalid_argument);
  CHECK(e.field == "egressAllowlist[1]");
}

TEST_CASE("S1: serialisation writes exactly the SPEC field names", "[S1]") {
  auto r = ccsb::parse_spec(kFull);
  REQUIRE(r);
  const picojson::value v = ccsb::to_json(*r);
  std::set<std::string> keys;
  for (const auto& [k, _] : v.get<picojson::object>()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"sessionId", "workspaceId", "agentId", "bindMounts",
                                      "networkEnabled", "egressAllowlist", "guestWorkdir",
                                      "mode", "protectedPaths", "runnerStateDirs",
                                      "execGrantRoots", "createAllow"});
  std::set<std::string> mkeys;
  for (const auto& [k, _] : v.get("bindMounts").get<picojson::array>()[0].get<picojson::object>())
    mkeys.insert(k);
  CHECK(mkeys == std::set<std::string>{"hostPath", "guestPath", "readOnly"});
  CHECK(v.get("mode").get<std::string>() == "review");
  CHECK(v.get("networkEnabled").get<bool>() == false);

  // Absent nullable fields are written as null.
  auto m = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w"})");
  REQUIRE(m);
  const picojson::value mv = ccsb::to_json(*m);
  CHECK(mv.get("agentId").is<picojson::null>());
  CHECK(mv.get("guestWorkdir").is<picojson::null>());
  CHECK(mv.get("networkEnabled").get<bool>() == true);
  CHECK(mv.get("mode").get<std::string>() == "chat");
}

TEST_CASE("S1: round trip is lossless and deterministic", "[S1]") {
  std::vector<ccsb::sandbox_spec> specs;
  {
    ccsb::sandbox_spec s;
    s.session_id = "s";
    s.workspace_id = "w";
    specs.push_back(s);
  }
  {
    auto r = ccsb::parse_spec(kFull);
    REQUIRE(r);
    specs.push_back(*r);
  }
  for (ccsb::mode m : ccsb::kAllModes) {
    ccsb::sandbox_spec s;
    s.session_id = "sess \"quoted\" \xc3\xa9\xe2\x80\xa8 \xf0\x9f\x94\x92";
    s.workspace_id = "ws/\\back";
    s.agent_id = "";
    s.bind_mounts = {{"/a b/c", "/guest/differs", true}, {"/x", "/x", false}, {"/x", "/x", false}};
    s.network_enabled = m == ccsb::mode::plan;
    s.egress_allowlist = {"*.a.com", "b.com"};
    s.guest_workdir = "/w\xff\xfe"; // not UTF-8: paths are bytes
    s.mode = m;
    s.protected_paths = {"/p1", "/p2/"};
    s.runner_state_dirs = {"/r"};
    s.exec_grant_roots = {"/e\ttab"};
    specs.push_back(s);
  }
  for (const auto& s : specs) {
    REQUIRE(ccsb::validate(s));
    const std::string text = ccsb::to_json_string(s);
    CAPTURE(text);
    CHECK(text.find('\n') == std::string::npos);
    auto back = ccsb::parse_spec(text);
    REQUIRE(back);
    CHECK(*back == s);
    CHECK(ccsb::to_json_string(*back) == text);
  }
  // Text -> struct -> text -> struct.
  auto a = ccsb::parse_spec(kFull);
  REQUIRE(a);
  auto b = ccsb::parse_spec(ccsb::to_json_string(*a));
  REQUIRE(b);
  CHECK(*a == *b);
  // Keys come out sorted (picojson::object is a std::map).
  const std::string t = ccsb::to_json_string(*a);
  CHECK(t.find("\"agentId\"") < t.find("\"bindMounts\""));
  CHECK(t.find("\"runnerStateDirs\"") < t.find("\"sessionId\""));
}
