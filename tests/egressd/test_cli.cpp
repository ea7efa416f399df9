// The command-line contract: --check, bad input, config files, signals
// (N3, N4, N5, N6, S6).
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

run_result egressd_run(std::vector<std::string> args, int timeout_ms = 20000) {
  require_egressd();
  std::vector<std::string> argv{egressd_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, timeout_ms);
}

bool json_mentions(const picojson::object& o, const std::string& needle) {
  std::vector<std::string> all;
  collect_strings(picojson::value(o), all);
  for (const auto& s : all)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

// --check HOST with the usual test allowlist; returns the run and the parsed object.
std::pair<run_result, std::optional<picojson::object>> check(const std::string& target,
                                                             std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--no-baseline", "--allow", "allowed.test", "--allow", "*.wild.test", "--resolve",
                                "allowed.test=127.0.0.1", "--check", target};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = egressd_run(args);
  auto trimmed = r.out;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) trimmed.pop_back();
  return {r, parse_object(trimmed)};
}

} // namespace

TEST_CASE("N3: --check exits 0 for an allowed host and prints one JSON object naming the step", "[N3][egressd]") {
  for (std::string target : {"allowed.test", "allowed.test:443", "ALLOWED.TEST.", "a.b.wild.test:8443"}) {
    auto [r, obj] = check(target);
    INFO(target << "\n" << r.describe());
    CHECK(r.exit_code == 0);
    REQUIRE(obj.has_value());
    CHECK(json_mentions(*obj, "allowlist"));
    // Exactly one line of output.
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') <= 1);
  }
}

TEST_CASE("N3: --check exits 1 for denied hosts with the deciding step", "[N3][N5][egressd]") {
  struct row {
    std::string target, step;
  };
  for (const auto& c : std::vector<row>{{"other.test", "not_allowlisted"},
                                        {"wild.test:443", "not_allowlisted"},
                                        {"evilallowed.test", "not_allowlisted"},
                                        {"169.254.169.254", "deny_list"},
                                        {"metadata.google.internal:80", "deny_list"},
                                        {"localhost", "deny_list"},
                                        {"127.0.0.1:80", ""}}) {
    auto [r, obj] = check(c.target);
    INFO(c.target << "\n" << r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(obj.has_value());
    if (!c.step.empty()) CHECK(json_mentions(*obj, c.step));
  }
}

TEST_CASE("N6: --check with --network off denies allowlisted names as network_disabled", "[N6][egressd]") {
  auto [r, obj] = check("allowed.test:443", {"--network", "off"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  REQUIRE(obj.has_value());
  CHECK(json_mentions(*obj, "network_disabled"));
}

TEST_CASE("N4: --check uses the baseline allowlist by default", "[N4][egressd]") {
  for (std::string host : {"api.anthropic.com", "github.com:443", "bedrock-runtime.us-east-1.amazonaws.com"}) {
    auto r = egressd_run({"--check", host});
    INFO(host << "\n" << r.describe());
    CHECK(r.exit_code == 0);
  }
  auto r = egressd_run({"--check", "bedrock.evil.attacker.amazonaws.com"});
  CHECK(r.exit_code == 1);
  auto n = egressd_run({"--no-baseline", "--check", "api.anthropic.com"});
  CHECK(n.exit_code == 1);
}

TEST_CASE("N8: --check exits 2 on input that is not a host[:port]", "[N8][egressd]") {
  for (std::string target : {"", "allowed.test:0", "allowed.test:65536", "allowed.test:080", "allowed.test:http",
                             "http://allowed.test/", "allowed.test:443:443"}) {
    auto r = egressd_run({"--no-baseline", "--allow", "allowed.test", "--check", target});
    INFO("'" << target << "'\n" << r.describe());
    CHECK(r.exit_code == 2);
  }
}

TEST_CASE("N8: --check exits 2 for a host that does not normalise, and says malformed", "[N8][N3][egressd]") {
  for (std::string target : {"0x7f.1", "2130706433:80", "a..b.test", "exa mple.test", "[allowed.test]:443",
                             "allowed.test..", "a_b.test"}) {
    auto [r, obj] = check(target);
    INFO("'" << target << "'\n" << r.describe());
    CHECK(r.exit_code == 2);
    REQUIRE(obj.has_value());
    CHECK(json_mentions(*obj, "malformed"));
  }
}

TEST_CASE("N3: an invalid pattern is an error naming it, exit 2, nothing starts", "[N3][egressd]") {
  for (std::string opt : {"--allow", "--deny"}) {
    for (std::string pattern : {"*.com", "*", "foo.*", "a*.example.com", "*.*.example.com", "http://example.com",
                                "example.com/path", "example.com:443", "exa mple.com", "10.0.0.0/8", "*.10.0.0.1"}) {
      auto r = egressd_run({"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", opt, pattern});
      INFO(opt << " '" << pattern << "'\n" << r.describe());
      CHECK(r.exit_code == 2);
      CHECK(r.err.find(pattern) != std::string::npos);
      CHECK(r.out.find("\"ready\"") == std::string::npos);
    }
  }
}

TEST_CASE("N8: invalid options are errors with exit 2 and nothing starts", "[N8][egressd]") {
  std::vector<std::vector<std::string>> cases{
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--no-such-option"},
      {"--http-listen", "127.0.0.1:99999", "--socks-listen", "127.0.0.1:0"},
      {"--http-listen", "localhost-ish", "--socks-listen", "127.0.0.1:0"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--network", "maybe"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--allow-upstream", "127.0.0.1/33"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--allow-upstream", "not-a-cidr"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--resolve", "noequals"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--resolve", "a.test=999.1.1.1"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--dns-server", "127.0.0.1"},
      {"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--allow"},
  };
  for (const auto& args : cases) {
    auto r = egressd_run(args);
    INFO(args.back() << "\n" << r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
    CHECK(!r.err.empty());
  }
}

TEST_CASE("S1: an invalid config file is an error naming it, exit 2, nothing starts", "[S1][N3][egressd]") {
  temp_dir dir;
  std::string missing = dir.file("does-not-exist.json");
  std::string not_json = dir.file("not-json.json");
  write_file(not_json, "{ this is not json");
  std::string not_object = dir.file("array.json");
  write_file(not_object, "[1, 2, 3]");
  for (const auto& path : {missing, not_json, not_object}) {
    auto r = egressd_run({"--config", path, "--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0"});
    INFO(path << "\n" << r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(path) != std::string::npos);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
  }
}

TEST_CASE("N3: a config file with an invalid allowlist pattern names the pattern, exit 2", "[N3][S1][egressd]") {
  temp_dir dir;
  std::string path = dir.file("bad-pattern.json");
  write_file(path, R"({"allow": ["good.test", "*.com"]})");
  auto r = egressd_run({"--config", path, "--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0"});
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("*.com") != std::string::npos);
  CHECK(r.out.find("\"ready\"") == std::string::npos);
}

TEST_CASE("N7: SIGTERM with no connections exits 0", "[N7][egressd]") {
  egressd e(std_args());
  auto code = e.signal_and_wait(SIGTERM);
  INFO(e.describe());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}

TEST_CASE("N7: SIGINT exits 0", "[N7][egressd]") {
  egressd e(std_args());
  auto code = e.signal_and_wait(SIGINT);
  INFO(e.describe());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}

TEST_CASE("N7: SIGTERM stops accepting, lets an open tunnel finish, then exits 0", "[N7][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  auto fd = tcp_connect(e.http_port());
  auto r = http_connect(fd.get(), "allowed.test:" + std::to_string(up.port()));
  REQUIRE(r.status == 200);
  ::kill(e.pid(), SIGTERM);
  // The open tunnel keeps working during the drain.
  send_all(fd.get(), "still-here");
  CHECK(recv_n(fd.get(), 10) == "still-here");
  // New connections are no longer served: refused, or closed without a 200.
  {
    unique_fd late(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(e.http_port());
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (::connect(late.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      set_timeouts(late.get(), kWaitMs);
      auto lr = http_connect(late.get(), "allowed.test:" + std::to_string(up.port()));
      CHECK(lr.status != 200);
    }
  }
  fd.reset();
  auto code = e.wait_exit_status(60000);
  INFO(e.describe());
  REQUIRE(code.has_value());
  CHECK(*code == 0);
}

TEST_CASE("S1: a config file with the option fields configures egressd — the command line adds to it",
          "[S1][N3][egressd]") {
  upstream up(upstream::mode::echo);
  temp_dir dir;
  std::string path = dir.file("egressd.json");
  write_file(path, R"({"httpListen": "127.0.0.1:0", "socksListen": "127.0.0.1:0", "baseline": false,
                       "allow": ["allowed.test", "*.wild.test"], "allowUpstream": ["127.0.0.0/8"],
                       "resolve": {"allowed.test": "127.0.0.1", "a.wild.test": "127.0.0.1", "other.test": "127.0.0.1"}})");
  std::string p = std::to_string(up.port());
  {
    egressd e({"--config", path});
    auto a = tcp_connect(e.http_port());
    CHECK(http_connect(a.get(), "allowed.test:" + p).status == 200);
    auto b = tcp_connect(e.http_port());
    CHECK(http_connect(b.get(), "a.wild.test:" + p).status == 200);
    auto c = tcp_connect(e.http_port());
    CHECK(http_connect(c.get(), "other.test:" + p).status == 403);
    CHECK(e.wait_violation("other.test:" + p));
  }
  {
    egressd e({"--config", path, "--deny", "a.wild.test"});
    auto b = tcp_connect(e.http_port());
    auto r = http_connect(b.get(), "a.wild.test:" + p);
    CHECK(r.status == 403);
    CHECK(r.header("x-ccsb-deny-reason") == "deny_list: a.wild.test");
  }
}

TEST_CASE("N8: over the tunnel limit: 503 over HTTP, a SOCKS5 failure, and an event", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--max-tunnels", "2"}));
  std::string p = std::to_string(up.port());
  auto a = tcp_connect(e.http_port());
  REQUIRE(http_connect(a.get(), "allowed.test:" + p).status == 200);
  auto b = tcp_connect(e.socks_port());
  REQUIRE(socks::connect_name(b.get(), "allowed.test", up.port()).code == 0);
  e.mark();
  auto c = tcp_connect(e.http_port());
  auto r = http_connect(c.get(), "allowed.test:" + p);
  CHECK(r.status == 503);
  auto d = tcp_connect(e.socks_port());
  auto s = socks::connect_name(d.get(), "allowed.test", up.port());
  CHECK(s.code != 0);
  CHECK(e.count_until([](const event& ev) { return ev.is_json && ev.name() != "ready"; }, 2) >= 2);
  INFO(e.seen_text());
  // Existing tunnels are unaffected; closing one frees a slot.
  send_all(a.get(), "x");
  CHECK(recv_n(a.get(), 1) == "x");
  a.reset();
  bool again = false;
  for (int i = 0; i < 100 && !again; ++i) {
    auto f = tcp_connect(e.http_port());
    again = http_connect(f.get(), "allowed.test:" + p).status == 200;
    if (!again) std::this_thread::sleep_for(20ms);
  }
  CHECK(again);
}
