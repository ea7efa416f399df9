// ccsb/protocol/egressd_events.hpp: the lines egressd writes on --events and
// the launcher reads (N7, S6, X3). Both ends use these functions, so what
// one writes the other must parse, and nothing else.
#include "ccsb/launch/egressd.hpp"
#include "ccsb/protocol/egressd_events.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace ev = ccsb::protocol::egressd_events;
using ccsb::errc;

namespace {

ev::confinement full_confinement() {
  ev::confinement c;
  c.layers = "privileges,landlock,seccomp";
  c.how = "default";
  c.no_new_privs = true;
  c.uid = 65534;
  c.gid = 65534;
  c.switched_user = true;
  c.capabilities_dropped = true;
  c.landlock_abi = 7;
  c.landlock_status = "applied";
  c.landlock_tcp_bind = true;
  c.landlock_scoped = true;
  c.seccomp = "allowlist";
  c.seccomp_syscalls = 42;
  return c;
}

ev::confinement unconfined() {
  ev::confinement c;
  c.layers = "none";
  c.how = "--no-confine";
  c.uid = 1000;
  c.gid = 1000;
  c.landlock_status = "off";
  c.seccomp = "off";
  return c;
}

// The line without its newline, and that it is exactly one line.
std::string line_of(const ev::event& e) {
  std::string l = ev::write_line(e);
  REQUIRE(!l.empty());
  REQUIRE(l.back() == '\n');
  l.pop_back();
  REQUIRE(l.find('\n') == std::string::npos);
  return l;
}

void round_trip(const ev::event& e) {
  const std::string l = line_of(e);
  INFO(l);
  auto back = ev::parse_line(l);
  if (!back) FAIL(back.err().what());
  CHECK(*back == e);
  CHECK(line_of(*back) == l);
}

} // namespace

TEST_CASE("N7 X3: egressd's ready line, as the README shows it, is written and parsed back", "[N7][X3][egressd]") {
  ev::ready r;
  r.listen_channel = 4;
  r.confined = full_confinement();
  CHECK(line_of(r) ==
        R"({"event":"ready","listenChannel":4,"confinement":{"layers":"privileges,landlock,seccomp","how":"default",)"
        R"("noNewPrivs":true,"uid":65534,"gid":65534,"switchedUser":true,"capabilities":"none","landlock":7,)"
        R"("landlockStatus":"applied","landlockFs":"none","landlockTcpBind":"denied","landlockScoped":true,)"
        R"("seccomp":"allowlist","seccompSyscalls":42}})");
  round_trip(r);
}

TEST_CASE("N7 X3: every egressd event round-trips", "[N7][X3][S6][egressd]") {
  ev::ready own;
  own.http = "127.0.0.1:41000";
  own.socks = "[::1]:41001";
  own.confined = unconfined();
  round_trip(own);
  ev::ready unix_listeners;
  unix_listeners.http = "unix:/run/egress/http.sock";
  unix_listeners.confined = full_confinement();
  unix_listeners.confined.landlock_abi = 3;
  unix_listeners.confined.landlock_tcp_bind = false;
  unix_listeners.confined.landlock_scoped = false;
  round_trip(unix_listeners);
  ev::ready degraded;
  degraded.listen_channel = 0;
  degraded.confined = full_confinement();
  degraded.confined.how = "--confine privileges,seccomp";
  degraded.confined.layers = "privileges,seccomp";
  degraded.confined.landlock_abi = 0;
  degraded.confined.landlock_status = "unavailable: the kernel has no Landlock";
  degraded.confined.landlock_tcp_bind = false;
  degraded.confined.landlock_scoped = false;
  degraded.confined.seccomp = "unavailable: the kernel has no seccomp";
  degraded.confined.seccomp_syscalls = 0;
  round_trip(degraded);

  round_trip(ev::violation{"api.example.com:443", "not_allowlisted"});
  round_trip(ev::violation{"[2001:db8::1]:22", "address: documentation 2001:db8::1"});
  // A target egressd could not normalise is reported as the client wrote it,
  // quotes, control bytes and non-ASCII included.
  round_trip(ev::violation{"a\"b\\c\x01\t\xc3\xa9:80", "malformed"});

  ev::test_attack open{ev::attack_kind::open, "/etc/passwd", true, "open", 13, "Permission denied"};
  round_trip(open);
  round_trip(ev::test_attack{ev::attack_kind::exec, "/bin/true", true, "execve", 1, "Operation not permitted"});
  round_trip(ev::test_attack{ev::attack_kind::bind, "127.0.0.1:5999", false, "bind", 0, ""});
  round_trip(ev::test_attack{ev::attack_kind::bind, "[::1]:5999", true, "socket", 1, "Operation not permitted"});
}

TEST_CASE("N7: a violation's long or non-UTF-8 target is written so that it parses", "[N7][S6][egressd]") {
  const std::string long_target = std::string(3 * ev::kMaxText, 'a') + ":443";
  auto back = ev::parse_line(line_of(ev::violation{long_target, std::string(2 * ev::kMaxText, 'r')}));
  REQUIRE(back);
  const auto& v = std::get<ev::violation>(*back);
  CHECK(v.target.size() <= ev::kMaxText);
  CHECK(v.target.substr(v.target.size() - 3) == "...");
  CHECK(v.reason.size() <= ev::kMaxText);
  // Cut before a character, never inside one: a target of two-byte characters.
  std::string wide;
  while (wide.size() < 2 * ev::kMaxText) wide += "\xc3\xa9";
  auto w = ev::parse_line(line_of(ev::violation{wide, "malformed"}));
  REQUIRE(w);
  const std::string& wt = std::get<ev::violation>(*w).target;
  CHECK(wt.size() <= ev::kMaxText);
  CHECK(wt.substr(0, wt.size() - 3).size() % 2 == 0);
  // Bytes that are not UTF-8 become U+FFFD on the way out.
  auto bad = ev::parse_line(line_of(ev::violation{"\xff\xfe:80", "malformed"}));
  REQUIRE(bad);
  CHECK(std::get<ev::violation>(*bad).target == "\xef\xbf\xbd\xef\xbf\xbd:80");
}

TEST_CASE("N7 X3: the egressd event parser refuses every other line, naming the field", "[N7][X3][S6][egressd]") {
  // An unconfined egressd's confinement, field by field.
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"layers", R"("none")"},   {"how", R"("--no-confine")"},     {"noNewPrivs", "false"},
      {"uid", "0"},              {"gid", "0"},                     {"switchedUser", "false"},
      {"capabilities", R"("kept")"}, {"landlock", "0"},            {"landlockStatus", R"("off")"},
      {"seccomp", R"("off")"}};
  auto object_without = [&](const std::string& omit, const std::string& extra) {
    std::string o;
    for (const auto& [k, v] : fields)
      if (k != omit) o += (o.empty() ? "" : ",") + ("\"" + k + "\":" + v);
    return "{" + o + extra + "}";
  };
  const std::string conf = object_without("", "");
  auto ready_with = [&](const std::string& c) { return R"({"event":"ready","listenChannel":4,"confinement":)" + c + "}"; };
  auto conf_with = [&](const std::string& extra) { return ready_with(object_without("", extra)); };
  auto conf_without = [&](const std::string& field) { return ready_with(object_without(field, "")); };
  REQUIRE(ev::parse_line(ready_with(conf)));
  struct row {
    std::string line;
    errc code;
    std::string field;
  };
  const std::string applied =
      R"({"layers":"landlock","how":"default","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
      R"("capabilities":"kept","landlock":5,"landlockStatus":"applied","landlockFs":"none",)"
      R"("landlockTcpBind":"denied","landlockScoped":false,"seccomp":"off"})";
  REQUIRE(ev::parse_line(ready_with(applied)));
  const std::vector<row> rows = {
      // the line as a whole
      {"", errc::invalid_argument, "$"},
      {"not json", errc::invalid_argument, "$"},
      {R"({"event":"violation","action":"network-outbound","target":"a:1","reason":"r"} x)", errc::invalid_argument, "$"},
      {R"({"event":"violation","action":"network-outbound","target":"a:1","reason":"r"}{})", errc::invalid_argument, "$"},
      {"{\"event\":\"violation\",\"action\":\"network-outbound\",\"target\":\"\xff:1\",\"reason\":\"r\"}",
       errc::invalid_argument, "$"},
      {"{\"event\":\"violation\",\"action\":\"network-outbound\",\"target\":\"\xed\xa0\x80:1\",\"reason\":\"r\"}",
       errc::invalid_argument, "$"},
      {std::string(ev::kMaxLine + 1, ' '), errc::invalid_argument, "$"},
      {R"(["event","ready"])", errc::wrong_type, "$"},
      {R"("ready")", errc::wrong_type, "$"},
      {R"({"event":"violation","event":"ready"})", errc::invalid_argument, "event"},
      // the event
      {R"({})", errc::missing_field, "event"},
      {R"({"event":1})", errc::wrong_type, "event"},
      {R"({"event":""})", errc::invalid_argument, "event"},
      {R"({"event":"stdout"})", errc::invalid_argument, "event"},
      {R"({"event":"Ready"})", errc::invalid_argument, "event"},
      // violation
      {R"({"event":"violation","target":"a:1","reason":"r"})", errc::missing_field, "action"},
      {R"({"event":"violation","action":"file-write*","target":"a:1","reason":"r"})", errc::invalid_argument, "action"},
      {R"({"event":"violation","action":"network-outbound","reason":"r"})", errc::missing_field, "target"},
      {R"({"event":"violation","action":"network-outbound","target":"","reason":"r"})", errc::invalid_argument, "target"},
      {R"({"event":"violation","action":"network-outbound","target":null,"reason":"r"})", errc::wrong_type, "target"},
      {R"({"event":"violation","action":"network-outbound","target":["a:1"],"reason":"r"})", errc::wrong_type, "target"},
      {R"({"event":"violation","action":"network-outbound","target":"a:1"})", errc::missing_field, "reason"},
      {R"({"event":"violation","action":"network-outbound","target":"a:1","reason":""})", errc::invalid_argument, "reason"},
      {R"({"event":"violation","action":"network-outbound","target":"a:1","reason":"r","raw":"x"})",
       errc::invalid_argument, "raw"},
      // ready
      {R"({"event":"ready","confinement":)" + conf + "}", errc::missing_field, "listenChannel"},
      {R"({"event":"ready","listenChannel":4})", errc::missing_field, "confinement"},
      {R"({"event":"ready","listenChannel":4,"confinement":"confined"})", errc::wrong_type, "confinement"},
      {R"({"event":"ready","listenChannel":"4","confinement":)" + conf + "}", errc::wrong_type, "listenChannel"},
      {R"({"event":"ready","listenChannel":4.5,"confinement":)" + conf + "}", errc::wrong_type, "listenChannel"},
      {R"({"event":"ready","listenChannel":-1,"confinement":)" + conf + "}", errc::invalid_argument, "listenChannel"},
      {R"({"event":"ready","listenChannel":4294967296,"confinement":)" + conf + "}", errc::invalid_argument,
       "listenChannel"},
      {R"({"event":"ready","http":"","confinement":)" + conf + "}", errc::invalid_argument, "http"},
      {R"({"event":"ready","http":"localhost:3128","confinement":)" + conf + "}", errc::invalid_argument, "http"},
      {R"({"event":"ready","http":"127.0.0.1","confinement":)" + conf + "}", errc::invalid_argument, "http"},
      {R"({"event":"ready","http":"127.0.0.1:0","confinement":)" + conf + "}", errc::invalid_argument, "http"},
      {R"({"event":"ready","http":"::1:3128","confinement":)" + conf + "}", errc::invalid_argument, "http"},
      {R"({"event":"ready","socks":"unix:","confinement":)" + conf + "}", errc::invalid_argument, "socks"},
      {R"({"event":"ready","socks":"unix:relative","confinement":)" + conf + "}", errc::invalid_argument, "socks"},
      {R"({"event":"ready","listenChannel":4,"confinement":)" + conf + R"(,"ports":[1,2]})", errc::invalid_argument,
       "ports"},
      // the confinement
      {conf_without("layers"), errc::missing_field, "confinement.layers"},
      {conf_without("how"), errc::missing_field, "confinement.how"},
      {conf_without("noNewPrivs"), errc::missing_field, "confinement.noNewPrivs"},
      {conf_without("uid"), errc::missing_field, "confinement.uid"},
      {conf_without("gid"), errc::missing_field, "confinement.gid"},
      {conf_without("switchedUser"), errc::missing_field, "confinement.switchedUser"},
      {conf_without("capabilities"), errc::missing_field, "confinement.capabilities"},
      {conf_without("landlock"), errc::missing_field, "confinement.landlock"},
      {conf_without("landlockStatus"), errc::missing_field, "confinement.landlockStatus"},
      {conf_without("seccomp"), errc::missing_field, "confinement.seccomp"},
      {ready_with(R"({"layers":"seccomp,landlock"})"), errc::invalid_argument, "confinement.layers"},
      {ready_with(R"({"layers":"landlock,landlock"})"), errc::invalid_argument, "confinement.layers"},
      {ready_with(R"({"layers":"all"})"), errc::invalid_argument, "confinement.layers"},
      {ready_with(R"({"layers":"privileges,"})"), errc::invalid_argument, "confinement.layers"},
      {ready_with(R"({"layers":"none","how":""})"), errc::invalid_argument, "confinement.how"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":"true"})"), errc::wrong_type, "confinement.noNewPrivs"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":-1})"), errc::invalid_argument,
       "confinement.uid"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":4294967296})"),
       errc::invalid_argument, "confinement.gid"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":0})"),
       errc::wrong_type, "confinement.switchedUser"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"some"})"),
       errc::invalid_argument, "confinement.capabilities"},
      {conf_with(R"(,"landlockFs":"none")"), errc::invalid_argument, "confinement.landlockFs"},
      {conf_with(R"(,"seccompSyscalls":3)"), errc::invalid_argument, "confinement.seccompSyscalls"},
      {conf_with(R"(,"selinux":"off")"), errc::invalid_argument, "confinement.selinux"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":0,"landlockStatus":"applied"})"),
       errc::invalid_argument, "confinement.landlockStatus"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":0,"landlockStatus":"unavailable: "})"),
       errc::invalid_argument, "confinement.landlockStatus"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":2,"landlockStatus":"off"})"),
       errc::invalid_argument, "confinement.landlockStatus"},
      {ready_with(applied.substr(0, applied.find(",\"landlockFs\"")) + "}"), errc::missing_field,
       "confinement.landlockFs"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":4,"landlockStatus":"applied","landlockFs":"all"})"),
       errc::invalid_argument, "confinement.landlockFs"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":4,"landlockStatus":"applied","landlockFs":"none",)"
                  R"("landlockTcpBind":"allowed"})"),
       errc::invalid_argument, "confinement.landlockTcpBind"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":0,"landlockStatus":"off","seccomp":"on"})"),
       errc::invalid_argument, "confinement.seccomp"},
      {ready_with(R"({"layers":"none","how":"x","noNewPrivs":true,"uid":0,"gid":0,"switchedUser":false,)"
                  R"("capabilities":"kept","landlock":0,"landlockStatus":"off","seccomp":"allowlist"})"),
       errc::missing_field, "confinement.seccompSyscalls"},
      // testAttack
      {R"({"event":"testAttack","attack":"read","target":"/x","blocked":true,"step":"open"})", errc::invalid_argument,
       "attack"},
      {R"({"event":"testAttack","attack":"open","target":"","blocked":true,"step":"open"})", errc::invalid_argument,
       "target"},
      {R"({"event":"testAttack","attack":"open","target":"/x","step":"open"})", errc::missing_field, "blocked"},
      {R"({"event":"testAttack","attack":"open","target":"/x","blocked":false,"step":"execve"})",
       errc::invalid_argument, "step"},
      {R"({"event":"testAttack","attack":"bind","target":"127.0.0.1:1","blocked":false,"step":"open"})",
       errc::invalid_argument, "step"},
      {R"({"event":"testAttack","attack":"open","target":"/x","blocked":true,"step":"open"})", errc::missing_field,
       "errno"},
      {R"({"event":"testAttack","attack":"open","target":"/x","blocked":true,"step":"open","errno":0,"error":"e"})",
       errc::invalid_argument, "errno"},
      {R"({"event":"testAttack","attack":"open","target":"/x","blocked":true,"step":"open","errno":13})",
       errc::missing_field, "error"},
      {R"({"event":"testAttack","attack":"open","target":"/x","blocked":false,"step":"open","errno":13})",
       errc::invalid_argument, "errno"},
  };
  for (const auto& r : rows) {
    INFO(r.line);
    auto got = ev::parse_line(r.line);
    REQUIRE_FALSE(got);
    CHECK(got.err().code == r.code);
    CHECK(got.err().field == r.field);
  }
}

TEST_CASE("N7 X3: the launcher reads egressd's lines with the strict parser", "[N7][X3][S6][egressd]") {
  ev::ready r;
  r.listen_channel = 4;
  r.confined = full_confinement();
  std::string ready_line = line_of(r);
  auto parsed = ccsb::launch::parse_egressd_line(ready_line);
  REQUIRE(parsed);
  CHECK(parsed->event == "ready");
  CHECK_FALSE(parsed->violation);
  auto c = parsed->fields.find("confinement");
  REQUIRE(c != parsed->fields.end());
  REQUIRE(c->second.is<picojson::object>());
  CHECK(c->second.get<picojson::object>().at("seccompSyscalls").get<std::int64_t>() == 42);
  CHECK(std::get<ev::ready>(parsed->message) == r);

  std::string v_line = line_of(ev::violation{"evil.example:443", "not_allowlisted"});
  auto v = ccsb::launch::parse_egressd_line(v_line);
  REQUIRE(v);
  CHECK(v->event == "violation");
  REQUIRE(v->violation);
  CHECK(v->violation->action == "network-outbound");
  CHECK(v->violation->target == "evil.example:443");
  CHECK(v->violation->raw == v_line);
  CHECK(v->violation->reason == "not_allowlisted"); // a typed field of the S5 violation, not only inside raw

  // A violation without its action or target is no event at all (a
  // loose parser would make one up).
  CHECK_FALSE(ccsb::launch::parse_egressd_line(R"({"event":"violation"})"));
  CHECK_FALSE(ccsb::launch::parse_egressd_line(R"({"event":"violation","target":"a:1","reason":"r"})"));
  CHECK_FALSE(ccsb::launch::parse_egressd_line(ready_line + " trailing"));
  CHECK_FALSE(ccsb::launch::parse_egressd_line(R"({"event":"violation","action":"network-outbound","target":"a:1","reason":"r","n":1e999})"));
}
