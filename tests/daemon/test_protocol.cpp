// ccsb/protocol/daemon.hpp: ccsbd's request lines and replies (S8). Pure:
// the framer, the strict parser (every refusal names its field), the
// request writer (round trip) and the reply writers.
#include "ccsb/protocol/daemon.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace D = ccsb::protocol::daemon;
using ccsb::errc;

namespace {

const std::string kSpec = R"({"sessionId":"s1","workspaceId":"w","bindMounts":[{"hostPath":"/work/wt"}]})";

D::request_body body_of(const std::string& line) {
  auto p = D::parse_request(line);
  INFO(line << " -> " << (p.body ? std::string("ok") : p.body.err().what()));
  REQUIRE(p.body);
  return *p.body;
}

ccsb::error error_of(const std::string& line) {
  auto p = D::parse_request(line);
  INFO(line);
  REQUIRE(!p.body);
  return p.body.err();
}

void refused(const std::string& line, const std::string& field, errc code) {
  const auto e = error_of(line);
  INFO(line << " -> " << e.what());
  CHECK(e.field == field);
  CHECK(e.code == code);
}

picojson::object reply_object(const std::string& line) {
  REQUIRE(line.find('\n') == std::string::npos);
  REQUIRE(line.rfind("{\"event\":\"", 0) == 0); // "event" first
  auto v = ccsb::parse_json(line);
  REQUIRE(v);
  REQUIRE(v->is<picojson::object>());
  return v->get<picojson::object>();
}

struct framed {
  std::vector<std::string> lines;
  std::vector<std::size_t> overflows;
};

framed feed_all(D::line_framer& f, const std::vector<std::string>& chunks) {
  framed out;
  for (const auto& c : chunks)
    f.feed(c, [&](std::string_view l) { out.lines.emplace_back(l); }, [&](std::size_t n) { out.overflows.push_back(n); });
  return out;
}

} // namespace

TEST_CASE("S8: every op parses into its typed request", "[S8]") {
  auto l = std::get<D::launch_request>(body_of(R"({"op":"launch","spec":)" + kSpec + R"(,"profile":"spec"})"));
  CHECK(l.spec.session_id == "s1");
  CHECK(l.prof == ccsb::profile::spec);
  CHECK(!l.requested);
  CHECK(std::get<D::launch_request>(body_of(R"({"op":"launch","spec":)" + kSpec + "}")).prof == ccsb::profile::dispatch);
  CHECK(std::get<D::launch_request>(body_of(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"native"})")).requested ==
        ccsb::backend::native);
  auto vm = std::get<D::launch_request>(
      body_of(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"microvm","microvmAccel":"tcg"})"));
  CHECK(vm.requested == ccsb::backend::microvm);
  CHECK(vm.microvm_accel == "tcg");
  CHECK(!l.microvm_accel);

  auto e = std::get<D::exec_request>(body_of(
      R"({"op":"exec","sessionId":"s1","argv":["sh","-c",""],"workdir":"/work/wt/sub","env":{"B":"2","A":"1"},)"
      R"("timeoutMs":1500,"pty":{"rows":30,"cols":100},"stdin":""})"));
  CHECK(e.argv == std::vector<std::string>{"sh", "-c", ""});
  CHECK(e.workdir == std::optional<std::string>("/work/wt/sub"));
  REQUIRE(e.env.size() == 2);
  CHECK(e.env[0].name == "A"); // sorted by name
  CHECK(e.timeout_ms == std::optional<std::int64_t>(1500));
  CHECK(e.pty == std::optional<ccsb::protocol::terminal_size>({30, 100}));
  CHECK(e.stdin_data == std::optional<std::string>(""));
  auto bare = std::get<D::exec_request>(
      body_of(R"({"op":"exec","sessionId":"s1","argv":["true"],"workdir":null,"env":null,"timeoutMs":null,"pty":null,"stdin":null})"));
  CHECK(!bare.workdir);
  CHECK(!bare.pty);
  CHECK(!bare.stdin_data);
  CHECK(!bare.timeout_ms);

  auto in = std::get<D::stdin_request>(body_of(R"({"op":"stdin","sessionId":"s1","execId":3,"data":"x\u0000y"})"));
  CHECK(in.data == std::string("x\0y", 3)); // stdin may carry any byte JSON can
  CHECK(!in.eof);
  CHECK(std::get<D::stdin_request>(body_of(R"({"op":"stdin","sessionId":"s1","execId":3,"eof":true})")).eof);
  auto rs = std::get<D::resize_request>(body_of(R"({"op":"resize","sessionId":"s1","execId":2,"rows":40,"cols":120})"));
  CHECK(rs.size == ccsb::protocol::terminal_size{40, 120});
  CHECK(std::get<D::kill_request>(body_of(R"({"op":"kill","sessionId":"s1","execId":9})")).exec == 9);
  for (auto op : D::kSessionOps) {
    auto so = std::get<D::session_op_request>(body_of(R"({"op":")" + std::string(D::to_string(op)) + R"(","sessionId":"s1"})"));
    CHECK(so.op == op);
    CHECK(so.session_id == "s1");
  }
  CHECK(std::holds_alternative<D::list_request>(body_of(R"({"op":"list"})")));
}

TEST_CASE("S8: the id is echoed, a string or an integer", "[S8]") {
  auto p = D::parse_request(R"({"op":"list","id":"abc"})");
  CHECK(p.id.get<std::string>() == "abc");
  CHECK(p.op == "list");
  p = D::parse_request(R"({"op":"exec","id":7,"sessionId":"s"})"); // refused, id still read
  REQUIRE(!p.body);
  CHECK(p.id.get<std::int64_t>() == 7);
  CHECK(p.op == "exec");
  CHECK(p.body.err().field == "argv");
  refused(R"({"op":"list","id":1.5})", "id", errc::wrong_type);
  refused(R"({"op":"list","id":{}})", "id", errc::wrong_type);
  CHECK(D::parse_request(R"({"op":"list","id":null})").id.is<picojson::null>());
}

TEST_CASE("S8: a refused request names its field", "[S8]") {
  refused("not json", "$", errc::invalid_argument);
  refused("\xff", "$", errc::invalid_argument);
  refused("{\"op\":\"list\",\"x\":\"\xc3\x28\"}", "$", errc::invalid_argument); // broken UTF-8
  refused("[1]", "$", errc::wrong_type);
  refused(R"({"op":"list"} x)", "$", errc::invalid_argument);
  refused(R"({"op":"list","op":"list"})", "op", errc::invalid_argument); // duplicate key
  refused(std::string(100, '[') + std::string(100, ']'), "$", errc::invalid_argument);
  refused(R"({})", "op", errc::missing_field);
  refused(R"({"op":3})", "op", errc::wrong_type);
  refused(R"({"op":"fly"})", "op", errc::invalid_argument);
  refused(R"({"op":"list","sessionId":"s"})", "sessionId", errc::invalid_argument); // not a field of list

  refused(R"({"op":"launch"})", "spec", errc::missing_field);
  refused(R"({"op":"launch","spec":[]})", "spec", errc::wrong_type);
  refused(R"({"op":"launch","spec":{"workspaceId":"w"}})", "spec.sessionId", errc::missing_field);
  refused(R"({"op":"launch","spec":{"sessionId":"s","workspaceId":"w","bindMounts":[{"hostPath":"rel"}]}})",
          "spec.bindMounts[0].hostPath", errc::invalid_argument);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"profile":"bogus"})", "profile", errc::invalid_argument);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"profile":1})", "profile", errc::wrong_type);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"docker"})", "backend", errc::invalid_argument);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"readOnly":true})", "readOnly", errc::invalid_argument);
  // X4: the accelerator is kvm or tcg, and only for backend microvm.
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"microvm","microvmAccel":"fast"})", "microvmAccel",
          errc::invalid_argument);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"microvm","microvmAccel":1})", "microvmAccel",
          errc::wrong_type);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"microvmAccel":"tcg"})", "microvmAccel", errc::invalid_argument);
  refused(R"({"op":"launch","spec":)" + kSpec + R"(,"backend":"native","microvmAccel":"tcg"})", "microvmAccel",
          errc::invalid_argument);

  const std::string x = R"({"op":"exec","sessionId":"s","argv":["ls"])";
  refused(R"({"op":"exec","argv":["ls"]})", "sessionId", errc::missing_field);
  refused(R"({"op":"exec","sessionId":"","argv":["ls"]})", "sessionId", errc::invalid_argument);
  refused(R"({"op":"exec","sessionId":"s"})", "argv", errc::missing_field);
  refused(R"({"op":"exec","sessionId":"s","argv":"ls"})", "argv", errc::wrong_type);
  refused(R"({"op":"exec","sessionId":"s","argv":[]})", "argv", errc::invalid_argument);
  refused(R"({"op":"exec","sessionId":"s","argv":[""]})", "argv[0]", errc::invalid_argument);
  refused(R"({"op":"exec","sessionId":"s","argv":["ls",3]})", "argv[1]", errc::wrong_type);
  refused(R"({"op":"exec","sessionId":"s","argv":["ls","a\u0000b"]})", "argv[1]", errc::invalid_argument);
  refused(x + R"(,"workdir":"rel"})", "workdir", errc::invalid_argument);
  refused(x + R"(,"workdir":3})", "workdir", errc::wrong_type);
  refused(x + R"(,"env":[]})", "env", errc::wrong_type);
  refused(x + R"(,"env":{"A":1}})", "env.A", errc::wrong_type);
  refused(x + R"(,"env":{"A=B":"1"}})", "env.A=B", errc::invalid_argument);
  refused(x + R"(,"env":{"":"1"}})", "env.", errc::invalid_argument);
  refused(x + R"(,"env":{"A":"x\u0000"}})", "env.A", errc::invalid_argument);
  refused(x + R"(,"timeoutMs":0})", "timeoutMs", errc::invalid_argument);
  refused(x + R"(,"timeoutMs":"5"})", "timeoutMs", errc::wrong_type);
  refused(x + R"(,"timeoutMs":99999999999999})", "timeoutMs", errc::invalid_argument);
  refused(x + R"(,"pty":true})", "pty", errc::wrong_type);
  refused(x + R"(,"pty":{"rows":24}})", "pty.cols", errc::missing_field);
  refused(x + R"(,"pty":{"rows":0,"cols":80}})", "pty.rows", errc::invalid_argument);
  refused(x + R"(,"pty":{"rows":24,"cols":80,"x":1}})", "pty.x", errc::invalid_argument);
  refused(x + R"(,"stdin":5})", "stdin", errc::wrong_type);
  refused(x + R"(,"timeout":5})", "timeout", errc::invalid_argument);

  refused(R"({"op":"stdin","sessionId":"s","data":"x"})", "execId", errc::missing_field);
  refused(R"({"op":"stdin","sessionId":"s","execId":0,"data":"x"})", "execId", errc::invalid_argument);
  refused(R"({"op":"stdin","sessionId":"s","execId":"1","data":"x"})", "execId", errc::wrong_type);
  refused(R"({"op":"stdin","sessionId":"s","execId":1})", "data", errc::missing_field);
  refused(R"({"op":"stdin","sessionId":"s","execId":1,"data":"x","eof":1})", "eof", errc::wrong_type);
  refused(R"({"op":"resize","sessionId":"s","execId":1,"rows":70000,"cols":1})", "rows", errc::invalid_argument);
  refused(R"({"op":"resize","sessionId":"s","execId":1,"rows":1})", "cols", errc::missing_field);
  refused(R"({"op":"kill","sessionId":"s"})", "execId", errc::missing_field);
  refused(R"({"op":"destroy"})", "sessionId", errc::missing_field);
  refused(R"({"op":"attach","sessionId":7})", "sessionId", errc::wrong_type);
}

TEST_CASE("S8: write_request round-trips through parse_request", "[S8]") {
  const std::vector<std::string> lines = {
      R"({"op":"launch","id":"a","spec":)" + kSpec + R"(,"profile":"terminal","backend":"native"})",
      R"({"op":"launch","id":"m","spec":)" + kSpec + R"(,"backend":"microvm","microvmAccel":"tcg"})",
      R"({"op":"exec","id":2,"sessionId":"s","argv":["a","b"],"workdir":"/w","env":{"X":"1"},"timeoutMs":9,"pty":{"rows":3,"cols":4},"stdin":"in"})",
      R"({"op":"exec","sessionId":"s","argv":["a"]})",
      R"({"op":"stdin","sessionId":"s","execId":1,"data":"d","eof":true})",
      R"({"op":"resize","sessionId":"s","execId":1,"rows":5,"cols":6})",
      R"({"op":"kill","sessionId":"s","execId":4})",
      R"({"op":"detach","sessionId":"s"})",
      R"({"op":"attach","sessionId":"s","token":"0123abcd"})",
      R"({"op":"exec","sessionId":"s","argv":["a"],"token":"t"})",
      R"({"op":"stdin","sessionId":"s","execId":1,"data":"d","eof":false,"token":"t"})",
      R"({"op":"resize","sessionId":"s","execId":1,"rows":5,"cols":6,"token":"t"})",
      R"({"op":"kill","sessionId":"s","execId":4,"token":"t"})",
      R"({"op":"list","id":"z"})",
  };
  for (const auto& line : lines) {
    auto p = D::parse_request(line);
    INFO(line);
    REQUIRE(p.body);
    const D::request q{p.id, *p.body};
    const std::string once = D::write_request(q);
    auto back = D::parse_request(once);
    INFO(once);
    REQUIRE(back.body);
    CHECK(D::request{back.id, *back.body} == q);
    CHECK(D::write_request(D::request{back.id, *back.body}) == once);
  }
}

TEST_CASE("S8: replies are one line, event first, with the request's id", "[S8]") {
  ccsb::sandbox_handle h("s1", ccsb::backend::native);
  auto o = reply_object(D::ready_line(picojson::value("r1"), h, "00ff"));
  CHECK(o["event"].get<std::string>() == "ready");
  CHECK(o["token"].get<std::string>() == "00ff");
  CHECK(o["id"].get<std::string>() == "r1");
  CHECK(o["sessionId"].get<std::string>() == "s1");
  CHECK(ccsb::handle_from_json(o["handle"]));

  o = reply_object(D::exec_line(picojson::value(std::int64_t{4}), "s1", 12));
  CHECK(o["execId"].get<std::int64_t>() == 12);
  CHECK(o["id"].get<std::int64_t>() == 4);
  o = reply_object(D::exec_line(picojson::value(), "s1", 1));
  CHECK(!o.count("id")); // no id asked, none sent

  o = reply_object(D::handle_line(picojson::value(), "suspend", h));
  CHECK(o["op"].get<std::string>() == "suspend");
  o = reply_object(D::ok_line(picojson::value(), "kill", "s1", 3));
  CHECK(o["event"].get<std::string>() == "ok");
  CHECK(o["execId"].get<std::int64_t>() == 3);
  o = reply_object(D::sessions_line(picojson::value(), {h, h}));
  CHECK(o["sessions"].get<picojson::array>().size() == 2);
  o = reply_object(D::hello_line("agent sandbox ON (x)", true, 4242, 1000));
  CHECK(o["protocol"].get<std::int64_t>() == D::kProtocolVersion);
  CHECK(o["pid"].get<std::int64_t>() == 4242);
  CHECK(o["uid"].get<std::int64_t>() == 1000);
  CHECK(o["nativeAvailable"].get<bool>());

  // The error object is spec_json.hpp's error shape.
  const auto err = ccsb::make_error(errc::wrong_type, "argv[1]", "expected a string, got number");
  o = reply_object(D::error_line({picojson::value("q"), "exec", std::string("s1"), 2}, err));
  CHECK(o["event"].get<std::string>() == "error");
  CHECK(o["op"].get<std::string>() == "exec");
  CHECK(o["execId"].get<std::int64_t>() == 2);
  ccsb::error back;
  REQUIRE(ccsb::error_from_json(o["error"], back));
  CHECK(back == err);
  // Whatever a client sent, the reply is valid UTF-8 JSON on one line.
  const auto nasty = ccsb::make_error(errc::invalid_argument, "env.\xff\n", "line\nbreak \xc3");
  o = reply_object(D::error_line({}, nasty));
  CHECK(o["error"].get<picojson::object>().at("field").get<std::string>() == "env.\xef\xbf\xbd\n");
}

TEST_CASE("S8: the framer cuts lines, skips an overlong one and resynchronises", "[S8]") {
  D::line_framer f(8);
  auto got = feed_all(f, {"ab", "c\nde\r\n\n", "f"});
  CHECK(got.lines == std::vector<std::string>{"abc", "de"});
  CHECK(f.partial());
  got = feed_all(f, {"\n"});
  CHECK(got.lines == std::vector<std::string>{"f"});
  CHECK(!f.partial());

  // 8 bytes is the limit; 9 is one error, reported at once, then the rest
  // of that line is dropped up to its newline.
  got = feed_all(f, {"12345678\n", "123456789", "more", "\nnext\n"});
  CHECK(got.lines == std::vector<std::string>{"12345678", "next"});
  REQUIRE(got.overflows.size() == 1);
  CHECK(got.overflows[0] == 9);
  got = feed_all(f, {"123456789\nok\n"}); // the newline in the same chunk
  CHECK(got.lines == std::vector<std::string>{"ok"});
  CHECK(got.overflows.size() == 1);
  auto e = D::line_too_long(9);
  CHECK(e.field == "$");
}

TEST_CASE("S8: a line over the limit is refused by the parser too", "[S8]") {
  const std::string big = R"({"op":"list","pad":")" + std::string(D::kMaxRequestLine, 'a') + "\"}";
  refused(big, "$", errc::invalid_argument);
}

TEST_CASE("S8: a session's token is a field of every op that names a session, bounded and typed", "[S8]") {
  for (auto op : D::kSessionOps) {
    auto b = body_of(R"({"op":")" + std::string(D::to_string(op)) + R"(","sessionId":"s1","token":"abc"})");
    REQUIRE(D::token_of(b));
    CHECK(*D::token_of(b) == std::optional<std::string>("abc"));
  }
  auto e = body_of(R"({"op":"exec","sessionId":"s1","argv":["true"]})");
  CHECK(!*D::token_of(e));
  CHECK(!D::token_of(body_of(R"({"op":"list"})")));
  CHECK(!D::token_of(body_of(R"({"op":"launch","spec":)" + kSpec + "}")));
  refused(R"({"op":"kill","sessionId":"s","execId":1,"token":5})", "token", errc::wrong_type);
  refused(R"({"op":"attach","sessionId":"s","token":""})", "token", errc::invalid_argument);
  refused(R"({"op":"attach","sessionId":"s","token":")" + std::string(D::kMaxTokenText + 1, 'a') + R"("})", "token",
          errc::invalid_argument);
  refused(R"({"op":"list","token":"a"})", "token", errc::invalid_argument); // list names no session

  const unsigned char bytes[D::kTokenBytes] = {0x00, 0x01, 0xab, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::string t = D::token_text(bytes);
  CHECK(t == "0001abff0102030405060708090a0b0c");
  CHECK(D::token_matches(t, t));
  CHECK(!D::token_matches(t.substr(0, 31), t));
  CHECK(!D::token_matches(t.substr(0, 31) + "d", t));
  CHECK(!D::token_matches("", ""));
}

TEST_CASE("S8: a bind exposes the socket at, above or below its directory, by identity", "[S8]") {
  using N = D::node_id;
  // "/" = {1,2}, "/home" = {1,3}, "/home/u" = {1,4}, "/home/u/.ccsbd" = {5,6} (another filesystem).
  const std::vector<N> sock = {{5, 6}, {1, 4}, {1, 3}, {1, 2}};
  CHECK(D::bind_exposure(sock, {{5, 6}, {1, 4}, {1, 3}, {1, 2}}, true) == D::exposure::at_or_above); // the directory
  CHECK(D::bind_exposure(sock, {{1, 4}, {1, 3}, {1, 2}}, true) == D::exposure::at_or_above);         // HOME
  CHECK(D::bind_exposure(sock, {{1, 2}}, true) == D::exposure::at_or_above);                         // "/"
  CHECK(D::bind_exposure(sock, {{5, 6}, {9, 9}}, true) == D::exposure::at_or_above); // a second mount of it
  CHECK(D::bind_exposure(sock, {{5, 7}, {5, 6}, {1, 4}, {1, 3}, {1, 2}}, true) == D::exposure::below);
  CHECK(D::bind_exposure(sock, {{5, 6}, {1, 4}, {1, 3}, {1, 2}}, false) == D::exposure::below); // missing, inside
  CHECK(D::bind_exposure(sock, {{1, 8}, {1, 4}, {1, 3}, {1, 2}}, true) == D::exposure::none);   // a sibling
  CHECK(D::bind_exposure(sock, {{1, 4}, {1, 3}, {1, 2}}, false) == D::exposure::none); // missing, a sibling-to-be
  CHECK(D::bind_exposure(sock, {}, true) == D::exposure::at_or_above);                 // unknown: refused
  CHECK(D::bind_exposure({}, {{1, 2}}, true) == D::exposure::at_or_above);
}

TEST_CASE("S8: a peer that does not share every namespace of the daemon is named by the first that differs", "[S8]") {
  const D::node_id a{4, 1}, b{4, 2};
  CHECK(!D::peer_namespace_mismatch({{"user", a, a}, {"mnt", b, b}, {"pid", a, a}}));
  CHECK(D::peer_namespace_mismatch({{"user", a, a}, {"mnt", a, b}, {"pid", a, b}}) == std::optional<std::string>("mnt"));
  CHECK(D::peer_namespace_mismatch({{"user", a, b}, {"mnt", a, a}}) == std::optional<std::string>("user"));
}

TEST_CASE("L7 S8: launch takes limits (memory, pids, tmpSize, cpus), each optional, and names a bad one's field",
          "[L7][S8]") {
  const std::string l = R"({"op":"launch","spec":)" + kSpec + R"(,"limits":)";
  {
    auto p = D::parse_request(l + R"({"memory":"512M","pids":64,"tmpSize":33554432,"cpus":1.5}})");
    REQUIRE(p.body);
    const auto& q = std::get<D::launch_request>(*p.body);
    CHECK(q.limits.memory_bytes == 512ull << 20);
    CHECK(q.limits.pids == 64);
    CHECK(q.limits.tmp_bytes == 32ull << 20);
    CHECK(q.limits.cpu_millis == 1500);
  }
  for (const auto& [cpus, millis] : std::vector<std::pair<std::string, std::uint32_t>>{
           {"0.5", 500}, {"\"0.25\"", 250}, {"2", 2000}, {"\"2\"", 2000}, {"0.1", 100}, {"0.125", 125}, {"1024", 1024000}}) {
    INFO(cpus);
    auto p = D::parse_request(l + R"({"cpus":)" + cpus + "}}");
    REQUIRE(p.body);
    CHECK(std::get<D::launch_request>(*p.body).limits.cpu_millis == millis);
  }
  { // absent: the defaults (no cap)
    auto p = D::parse_request(l + "{}}");
    REQUIRE(p.body);
    CHECK(std::get<D::launch_request>(*p.body).limits == ccsb::resource_limits{});
  }
  for (const char* bad : {"0", "-1", "0.0001", "1.2345", "2000", "\"1.5x\"", "\"\"", "\"1e3\""})
    refused(l + R"({"cpus":)" + bad + "}}", "limits.cpus", errc::invalid_argument);
  refused(l + R"({"cpus":true}})", "limits.cpus", errc::wrong_type);
  refused(l + R"({"memory":"lots"}})", "limits.memory", errc::invalid_argument);
  refused(l + R"({"memory":0}})", "limits.memory", errc::invalid_argument);
  refused(l + R"({"tmpSize":[]}})", "limits.tmpSize", errc::wrong_type);
  refused(l + R"({"pids":0}})", "limits.pids", errc::invalid_argument);
  refused(l + R"({"pids":[]}})", "limits.pids", errc::wrong_type);
  { // the flags' syntax, as ccsb-run --pids 1K
    auto p = D::parse_request(l + R"({"pids":"1K","memory":1048576}})");
    REQUIRE(p.body);
    CHECK(std::get<D::launch_request>(*p.body).limits.pids == 1024);
    CHECK(std::get<D::launch_request>(*p.body).limits.memory_bytes == 1ull << 20);
  }
  refused(l + R"({"cpu":1}})", "limits.cpu", errc::invalid_argument); // a misspelt cap is never ignored
  refused(l + R"(1.5})", "limits", errc::wrong_type);
  // And back: write_request keeps every limit.
  auto p = D::parse_request(l + R"({"pids":64,"cpus":0.5}})");
  REQUIRE(p.body);
  const D::request q{p.id, *p.body};
  auto back = D::parse_request(D::write_request(q));
  REQUIRE(back.body);
  CHECK(D::request{back.id, *back.body} == q);
}

TEST_CASE("S1 S8: launch lists unknown spec keys, strict refuses the first naming its path, ready carries warnings",
          "[S1][S8]") {
  const std::string typo =
      R"({"sessionId":"s1","workspaceId":"w","bindMounts":[{"hostPath":"/work/wt","readonly":true}],"protectedPath":[]})";
  auto b = body_of(R"({"op":"launch","spec":)" + typo + "}");
  const auto& l = std::get<D::launch_request>(b);
  CHECK_FALSE(l.strict);
  REQUIRE(l.unknown.size() == 2);
  CHECK(l.unknown[0] == ccsb::unknown_field{"spec.protectedPath", "protectedPaths"});
  CHECK(l.unknown[1] == ccsb::unknown_field{"spec.bindMounts[0].readonly", "readOnly"});
  const auto e = error_of(R"({"op":"launch","strict":true,"spec":)" + typo + "}");
  CHECK(e.field == "spec.protectedPath");
  CHECK(e.code == errc::invalid_argument);
  CHECK(e.message.find("did you mean protectedPaths?") != std::string::npos);
  refused(R"({"op":"launch","strict":1,"spec":)" + kSpec + "}", "strict", errc::wrong_type);
  refused(R"({"op":"launch","strcit":true,"spec":)" + kSpec + "}", "strcit", errc::invalid_argument);
  // A strict launch with known keys round-trips ("strict" is written).
  auto s = body_of(R"({"op":"launch","strict":true,"spec":)" + kSpec + "}");
  const D::request q{picojson::value(), s};
  auto back = D::parse_request(D::write_request(q));
  REQUIRE(back.body);
  CHECK(std::get<D::launch_request>(*back.body).strict);

  ccsb::sandbox_handle h("s1", ccsb::backend::native);
  auto o = reply_object(D::ready_line(picojson::value("r"), h, "00ff", l.unknown));
  const auto& w = o["warnings"].get<picojson::array>();
  REQUIRE(w.size() == 2);
  CHECK(w[0].get("field").get<std::string>() == "spec.protectedPath");
  CHECK(w[0].get("message").get<std::string>() ==
        "spec.protectedPath is not a spec field and is ignored (did you mean protectedPaths?)");
  CHECK_FALSE(reply_object(D::ready_line(picojson::value("r"), h, "00ff")).count("warnings"));
}

TEST_CASE("P7 S8: launch's spec carries createAllow, a bad pattern is refused naming spec.createAllow[i]", "[P7][S8]") {
  const std::string spec = R"({"sessionId":"s1","workspaceId":"w","createAllow":[".venv/**","**"]})";
  refused(R"({"op":"launch","spec":)" + spec + "}", "spec.createAllow[1]", errc::invalid_pattern);
  auto b = body_of(R"({"op":"launch","spec":{"sessionId":"s1","workspaceId":"w","createAllow":[".venv/**"]}})");
  CHECK(std::get<D::launch_request>(b).spec.create_allow == std::vector<std::string>{".venv/**"});
}

TEST_CASE("S8 E1 L1 (issue 28 item 5): launch takes env, runAs and egress with ccsb-run's checks, naming the field",
          "[S8][E1][L1]") {
  const std::string l = R"({"op":"launch","spec":)" + kSpec;
  auto p = D::parse_request(l + R"(,"env":{"AGENT_NAME":"A","B":""},"runAs":"65534:65533",)"
                                R"("egress":{"allowUpstream":["127.0.0.0/8","::1/128"],"resolve":["reg.test=127.0.0.1"],)"
                                R"("dnsServer":"127.0.0.1:53"}})");
  REQUIRE(p.body);
  const auto& q = std::get<D::launch_request>(*p.body);
  CHECK(q.env == ccsb::env_list{{"AGENT_NAME", "A"}, {"B", ""}});
  REQUIRE(q.run_as);
  CHECK(*q.run_as == ccsb::run_as_ids{65534, 65533});
  CHECK(q.egress.allow_upstream == std::vector<std::string>{"127.0.0.0/8", "::1/128"});
  CHECK(q.egress.resolve == std::vector<std::string>{"reg.test=127.0.0.1"});
  CHECK(q.egress.dns_server == std::optional<std::string>("127.0.0.1:53"));
  const D::request w{p.id, *p.body};
  auto back = D::parse_request(D::write_request(w));
  REQUIRE(back.body);
  CHECK(D::request{back.id, *back.body} == w);
  auto one = D::parse_request(l + R"(,"runAs":1000})");
  REQUIRE(one.body);
  CHECK(*std::get<D::launch_request>(*one.body).run_as == ccsb::run_as_ids{1000, 1000});

  refused(l + R"(,"env":{"LD_PRELOAD":"/x.so"}})", "env.LD_PRELOAD", errc::invalid_argument);
  refused(l + R"(,"env":{"GIT_AUTHOR_NAME":"x"}})", "env.GIT_AUTHOR_NAME", errc::invalid_argument);
  refused(l + R"(,"env":{"A":1}})", "env.A", errc::wrong_type);
  refused(l + R"(,"env":{"A=B":"x"}})", "env.A=B", errc::invalid_argument);
  refused(l + R"(,"env":[]})", "env", errc::wrong_type);
  for (const char* bad : {R"("x")", R"("1:")", R"(":1")", R"("01")", R"("4294967295")", "-1", "1.5"})
    refused(l + R"(,"runAs":)" + bad + "}", "runAs", std::string(bad) == "1.5" ? errc::wrong_type : errc::invalid_argument);
  refused(l + R"(,"egress":{"allowUpstream":["127.0.0.1/8"]}})", "egress.allowUpstream[0]", errc::invalid_argument);
  refused(l + R"(,"egress":{"allowUpstream":["10.0.0.0/8","10.0.0.0/33"]}})", "egress.allowUpstream[1]",
          errc::invalid_argument);
  refused(l + R"(,"egress":{"allowUpstream":[1]}})", "egress.allowUpstream[0]", errc::wrong_type);
  refused(l + R"(,"egress":{"resolve":["a.test"]}})", "egress.resolve[0]", errc::invalid_argument);
  refused(l + R"(,"egress":{"resolve":["a.test=b.test"]}})", "egress.resolve[0]", errc::invalid_argument);
  refused(l + R"(,"egress":{"dnsServer":"127.0.0.1"}})", "egress.dnsServer", errc::invalid_argument);
  refused(l + R"(,"egress":{"maxTunnels":5}})", "egress.maxTunnels", errc::invalid_argument);
  refused(l + R"(,"egress":{"noConfine":true}})", "egress.noConfine", errc::invalid_argument);
}

TEST_CASE("S8 (issue 28 item 5): ccsb-run's --egress-opt values become the same typed settings, others refused",
          "[S8]") {
  using ccsb::egress_from_args;
  for (const auto& args : std::vector<std::vector<std::string>>{{"--allow-upstream", "127.0.0.0/8", "--resolve", "a.test=127.0.0.1"},
                                                                {"--allow-upstream 127.0.0.0/8", "--resolve=a.test=127.0.0.1"}}) {
    auto e = egress_from_args(args);
    REQUIRE(e);
    CHECK(e->allow_upstream == std::vector<std::string>{"127.0.0.0/8"});
    CHECK(e->resolve == std::vector<std::string>{"a.test=127.0.0.1"});
  }
  for (const auto& args : std::vector<std::vector<std::string>>{{"--max-tunnels", "5"}, {"--no-confine"},
                                                                {"--user", "0:0"}, {"--allow-upstream"}}) {
    auto e = egress_from_args(args);
    REQUIRE(!e);
    CHECK(e.err().field == "--egress-opt");
  }
  auto bad = ccsb::check_egress(*egress_from_args({"--allow-upstream", "127.0.0.1/8"}));
  REQUIRE(!bad);
  CHECK(bad.err().field == "egress.allowUpstream[0]");
}

TEST_CASE("S8 (issue 28 item 6): kill takes a signal by name, a reply to a line without an id has id null and its line",
          "[S8]") {
  const std::string k = R"({"op":"kill","sessionId":"s","execId":1)";
  CHECK(std::get<D::kill_request>(body_of(k + "}")).signal == 9);
  for (const auto& [name, number] : std::vector<std::pair<std::string, int>>{
           {"SIGTERM", 15}, {"TERM", 15}, {"SIGINT", 2}, {"INT", 2}, {"SIGKILL", 9}, {"SIGHUP", 1}}) {
    INFO(name);
    auto q = std::get<D::kill_request>(body_of(k + R"(,"signal":")" + name + R"("})"));
    CHECK(q.signal == number);
    const std::string once = D::write_request(D::request{picojson::value(), q});
    CHECK(std::get<D::kill_request>(body_of(once)).signal == number);
  }
  refused(k + R"(,"signal":"SIGSTOP"})", "signal", errc::invalid_argument);
  refused(k + R"(,"signal":9})", "signal", errc::wrong_type);

  ccsb::sandbox_handle h("s1", ccsb::backend::native);
  auto o = reply_object(D::sessions_line(picojson::value(), {h}, 7));
  CHECK(o.at("id").is<picojson::null>());
  CHECK(o.at("line").get<std::int64_t>() == 7);
  o = reply_object(D::sessions_line(picojson::value("a"), {h}, 7));
  CHECK(o.at("id").get<std::string>() == "a");
  CHECK(!o.count("line"));
  const auto err = ccsb::make_error(errc::invalid_argument, "$", "not JSON");
  o = reply_object(D::error_line({picojson::value(), "", std::nullopt, std::nullopt, 3}, err));
  CHECK(o.at("id").is<picojson::null>());
  CHECK(o.at("line").get<std::int64_t>() == 3);
  o = reply_object(D::error_line({}, err)); // unasked: neither
  CHECK(!o.count("id"));
  CHECK(!o.count("line"));
}
