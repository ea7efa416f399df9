// S5 events, S6 violations.
#include "ccsb/spec_json.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

using ccsb::errc;
using ccsb::event_kind;
using ccsb::sandbox_event;

namespace {

picojson::value parse_plain(const std::string& line) {
  picojson::value v;
  const std::string err = picojson::parse(v, line);
  REQUIRE(err.empty());
  return v;
}

std::set<std::string> keys_of(const picojson::value& v) {
  std::set<std::string> out;
  for (const auto& [k, _] : v.get<picojson::object>()) out.insert(k);
  return out;
}

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == std::string::npos && s.find('\r') == std::string::npos;
}

} // namespace

TEST_CASE("S5: every event kind serialises to one line that parses back with its fields", "[S5]") {
  struct row {
    sandbox_event ev;
    std::set<std::string> keys;
  };
  const ccsb::sandbox_violation v{"file-read*", "/home/u/.ssh/id_ed25519", std::string("deny(1) file-read-data /home/u/.ssh")};
  const std::vector<row> rows{
      {sandbox_event::make_stdout("hello\nworld\n", "s1"), {"event", "sessionId", "data"}},
      {sandbox_event::make_stderr("oops\r\n", "s1"), {"event", "sessionId", "data"}},
      {sandbox_event::make_exit(3, "s1"), {"event", "sessionId", "exitCode"}},
      {sandbox_event::make_starting("s1"), {"event", "sessionId"}},
      {sandbox_event::make_ready("s1"), {"event", "sessionId"}},
      {sandbox_event::make_killed("timeout", 9, "s1"), {"event", "sessionId", "reason", "signal"}},
      {sandbox_event::make_violation(v, "s1"), {"event", "sessionId", "violation"}},
  };
  std::set<event_kind> covered;
  for (const auto& r : rows) {
    const std::string line = ccsb::to_json_line(r.ev);
    CAPTURE(line);
    CHECK(one_line(line));
    const picojson::value j = parse_plain(line);
    CHECK(keys_of(j) == r.keys);
    CHECK(j.get("event").get<std::string>() == ccsb::to_string(r.ev.kind));
    CHECK(j.get("sessionId").get<std::string>() == "s1");
    auto back = ccsb::parse_event_line(line);
    REQUIRE(back);
    CHECK(*back == r.ev);
    covered.insert(r.ev.kind);
  }
  CHECK(covered.size() == ccsb::kAllEventKinds.size());

  // Field values, per kind.
  CHECK(parse_plain(ccsb::to_json_line(rows[0].ev)).get("data").get<std::string>() == "hello\nworld\n");
  CHECK(parse_plain(ccsb::to_json_line(rows[2].ev)).get("exitCode").get<std::int64_t>() == 3);
  const auto killed = parse_plain(ccsb::to_json_line(rows[5].ev));
  CHECK(killed.get("reason").get<std::string>() == "timeout");
  CHECK(killed.get("signal").get<std::int64_t>() == 9);
  const auto viol = parse_plain(ccsb::to_json_line(rows[6].ev)).get("violation");
  CHECK(keys_of(viol) == std::set<std::string>{"action", "target", "raw"});
  CHECK(viol.get("action").get<std::string>() == "file-read*");
  CHECK(viol.get("target").get<std::string>() == "/home/u/.ssh/id_ed25519");
}

TEST_CASE("S5: the exact line format is stable", "[S5]") {
  CHECK(ccsb::to_json_line(sandbox_event::make_exit(0)) == R"({"event":"exit","exitCode":0})");
  CHECK(ccsb::to_json_line(sandbox_event::make_exit(-1, "s")) == R"({"event":"exit","sessionId":"s","exitCode":-1})");
  CHECK(ccsb::to_json_line(sandbox_event::make_ready()) == R"({"event":"ready"})");
  CHECK(ccsb::to_json_line(sandbox_event::make_killed("oom")) == R"({"event":"killed","reason":"oom","signal":null})");
  CHECK(ccsb::to_json_line(sandbox_event::make_stdout("a\"b\\c\n")) == R"({"event":"stdout","data":"a\"b\\c\n"})");
  CHECK(ccsb::to_json_line(sandbox_event::make_violation({"network-outbound", "evil.test:443", std::nullopt})) ==
        R"({"event":"violation","violation":{"action":"network-outbound","target":"evil.test:443","raw":null}})");
}

TEST_CASE("S5: output data is escaped: quotes, controls, unicode line separators", "[S5]") {
  std::string data = "q\" b\\ nl\n cr\r tab\t nul";
  data += '\0';
  data += " esc\x1b[31m del\x7f ls\xe2\x80\xa8 ps\xe2\x80\xa9 e\xc3\xa9 lock\xf0\x9f\x94\x92";
  const auto ev = sandbox_event::make_stdout(data, "s");
  const std::string line = ccsb::to_json_line(ev);
  CAPTURE(line);
  CHECK(one_line(line));
  CHECK(line.find('\0') == std::string::npos);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find("\xe2\x80\xa8") == std::string::npos); // U+2028 escaped
  CHECK(line.find("\\u2028") != std::string::npos);
  CHECK(line.find("\xc3\xa9") != std::string::npos);     // valid UTF-8 kept as is
  auto back = ccsb::parse_event_line(line);
  REQUIRE(back);
  CHECK(back->data == data);
}

TEST_CASE("S5: bytes that are not UTF-8 become U+FFFD and the line stays valid", "[S5]") {
  const std::vector<std::string> bad{
      "\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80x",
  };
  for (const auto& b : bad) {
    const std::string line = ccsb::to_json_line(sandbox_event::make_stderr("<" + b + ">"));
    CAPTURE(line);
    CHECK(one_line(line));
    CHECK(line.find("\\ufffd") != std::string::npos);
    auto back = ccsb::parse_event_line(line);
    REQUIRE(back);
    CHECK(back->data.rfind("<\xef\xbf\xbd", 0) == 0);
    CHECK(back->data.back() == '>');
  }
}

TEST_CASE("S5: sessionId is written only when known", "[S5]") {
  const auto without = ccsb::to_json_line(sandbox_event::make_starting());
  CHECK(without.find("sessionId") == std::string::npos);
  const auto with = ccsb::to_json_line(sandbox_event::make_starting("room"));
  CHECK(with.find(R"("sessionId":"room")") != std::string::npos);
}

TEST_CASE("S7: execId is written for an exec's events only, as a number, and parses back", "[S5][S7]") {
  auto e = sandbox_event::make_stdout("x", "room");
  CHECK(ccsb::to_json_line(e).find("execId") == std::string::npos);
  e.exec_id = 42;
  const auto line = ccsb::to_json_line(e);
  CHECK(line == R"({"event":"stdout","sessionId":"room","execId":42,"data":"x"})");
  auto back = ccsb::parse_event_line(line);
  REQUIRE(back);
  CHECK(*back == e);
  for (const char* bad : {R"({"event":"exit","execId":"1","exitCode":0})", R"({"event":"exit","execId":0,"exitCode":0})",
                          R"({"event":"exit","execId":-3,"exitCode":0})", R"({"event":"exit","execId":1.5,"exitCode":0})"}) {
    INFO(bad);
    auto p = ccsb::parse_event_line(bad);
    REQUIRE_FALSE(p);
    CHECK(p.err().field == "execId");
  }
  auto null_id = ccsb::parse_event_line(R"({"event":"exit","execId":null,"exitCode":0})");
  REQUIRE(null_id);
  CHECK_FALSE(null_id->exec_id);
}

TEST_CASE("S5: event kinds parse and print, and bad event lines are clear errors", "[S5]") {
  for (event_kind k : ccsb::kAllEventKinds) {
    auto p = ccsb::parse_event_kind(ccsb::to_string(k));
    REQUIRE(p);
    CHECK(*p == k);
  }
  CHECK(ccsb::to_string(event_kind::stdout_) == "stdout");
  CHECK(ccsb::to_string(event_kind::stderr_) == "stderr");
  struct row {
    const char* line;
    errc code;
    const char* field;
  };
  const std::vector<row> rows{
      {R"({"event":"explode"})", errc::invalid_argument, "event"},
      {R"({"data":"x"})", errc::missing_field, "event"},
      {R"({"event":"stdout"})", errc::missing_field, "data"},
      {R"({"event":"stdout","data":1})", errc::wrong_type, "data"},
      {R"({"event":"exit"})", errc::missing_field, "exitCode"},
      {R"({"event":"exit","exitCode":1.5})", errc::wrong_type, "exitCode"},
      {R"({"event":"exit","exitCode":"0"})", errc::wrong_type, "exitCode"},
      {R"({"event":"exit","exitCode":99999999999})", errc::invalid_argument, "exitCode"},
      {R"({"event":"killed"})", errc::missing_field, "reason"},
      {R"({"event":"killed","reason":"stop","signal":"KILL"})", errc::wrong_type, "signal"},
      {R"({"event":"violation"})", errc::missing_field, "violation"},
      {R"({"event":"violation","violation":{"target":"/x"}})", errc::missing_field, "violation.action"},
      {R"({"event":"violation","violation":{"action":"file-read*"}})", errc::missing_field, "violation.target"},
      {R"({"event":"violation","violation":{"action":"a","target":"t","raw":5}})", errc::wrong_type, "violation.raw"},
      {R"({"event":"ready","sessionId":5})", errc::wrong_type, "sessionId"},
      {R"({"event":"ready"} {"event":"ready"})", errc::invalid_argument, "$"},
      {R"("ready")", errc::wrong_type, "$"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.line);
    auto e = ccsb::parse_event_line(r.line);
    REQUIRE_FALSE(e);
    CHECK(e.err().code == r.code);
    CHECK(e.err().field == r.field);
  }
}

TEST_CASE("S6: violation JSON has action, target, raw and round-trips", "[S6]") {
  const std::vector<ccsb::sandbox_violation> vs{
      {"file-read*", "/home/u/.aws/credentials", std::string("Sandbox: cat(123) deny(1) file-read-data /home/u/.aws/credentials")},
      {"file-write-create", "/work/wt/.env", std::nullopt},
      {"network-outbound", "169.254.169.254:80", std::string("")},
  };
  for (const auto& v : vs) {
    const picojson::value j = ccsb::to_json(v);
    CHECK(keys_of(j) == std::set<std::string>{"action", "target", "raw"});
    CHECK(j.get("action").get<std::string>() == v.action);
    CHECK(j.get("target").get<std::string>() == v.target);
    CHECK(j.get("raw").is<picojson::null>() == !v.raw.has_value());
    auto back = ccsb::violation_from_json(j);
    REQUIRE(back);
    CHECK(*back == v);
    // and inside an event line
    auto ev = ccsb::parse_event_line(ccsb::to_json_line(sandbox_event::make_violation(v)));
    REQUIRE(ev);
    CHECK(ev->violation == v);
  }
}

TEST_CASE("S6: a violation without action or target is a missing field", "[S6]") {
  picojson::value j;
  REQUIRE(picojson::parse(j, std::string(R"({"target":"/x","raw":null})")).empty());
  auto r = ccsb::violation_from_json(j);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::missing_field);
  CHECK(r.err().field == "action");
}

TEST_CASE("S5 S6 (issue 28 item 6): an exit that did not start says why, a violation's reason is its own field, "
          "both round-trip",
          "[S5][S6]") {
  auto ex = sandbox_event::make_exit(127, "s1");
  ex.exec_id = 4;
  ex.reason = "not_found";
  ex.data = "nosuch: No such file or directory";
  const std::string line = ccsb::to_json_line(ex);
  CHECK(line == R"({"event":"exit","sessionId":"s1","execId":4,"exitCode":127,"reason":"not_found",)"
                R"("message":"nosuch: No such file or directory"})");
  auto back = ccsb::parse_event_line(line);
  REQUIRE(back);
  CHECK(*back == ex);

  ccsb::sandbox_violation v{"network-outbound", "a.test:443", std::string(R"({"event":"violation"})"), "not_allowlisted"};
  const picojson::value j = ccsb::to_json(v);
  CHECK(keys_of(j) == std::set<std::string>{"action", "target", "raw", "reason"});
  CHECK(j.get("reason").get<std::string>() == "not_allowlisted");
  auto vb = ccsb::violation_from_json(j);
  REQUIRE(vb);
  CHECK(*vb == v);
  const std::string vl = ccsb::to_json_line(sandbox_event::make_violation(v, "s1"));
  CHECK_THAT(vl, Catch::Contains(R"("raw":"{\"event\":\"violation\"}","reason":"not_allowlisted"})"));
  auto ev = ccsb::parse_event_line(vl);
  REQUIRE(ev);
  CHECK(ev->violation == v);
}
