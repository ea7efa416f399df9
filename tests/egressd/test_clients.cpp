// Real clients (curl) through egressd to loopback upstreams: what works, and
// what a denial looks like from the client, the event stream and the upstream
// (N1, N2, N6, N7).
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;


TEST_CASE("N1: ready event names both bound loopback listeners", "[N1][egressd]") {
  egressd e(std_args());
  CHECK(e.ready().name() == "ready");
  CHECK(e.http().host == "127.0.0.1");
  CHECK(e.http().port != 0);
  CHECK(e.socks().host == "127.0.0.1");
  CHECK(e.socks().port != 0);
  CHECK(e.http().port != e.socks().port);
  // Both accept connections once ready is out.
  auto h = tcp_connect(e.http_port());
  auto s = tcp_connect(e.socks_port());
  CHECK(h);
  CHECK(s);
}

TEST_CASE("N7: plain HTTP through the proxy reaches an allowlisted upstream", "[N7][N3][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  auto r = curl({"-x", http_proxy_url(e), "http://allowed.test:" + port_of(up) + "/hello"});
  INFO(r.describe());
  CHECK(r.exit_code() == 0);
  CHECK(r.http_code == 200);
  CHECK(r.body.find("upstream-ok GET /hello HTTP/1.1") != std::string::npos);
  CHECK(up.accepts() == 1);
  e.mark();
  CHECK(e.violations_since_mark() == 0);
}

TEST_CASE("N7: HTTPS via CONNECT reaches a TLS upstream and the certificate verifies", "[N7][N3][egressd]") {
  tls_upstream tls;
  egressd e(std_args());
  auto r = curl({"-x", http_proxy_url(e), "--cacert", tls.cert(),
                 "https://allowed.test:" + std::to_string(tls.port()) + "/"});
  INFO(r.describe());
  CHECK(r.exit_code() == 0);
  CHECK(r.connect_code == 200);
  CHECK(r.http_code == 200);
  CHECK(r.body.find("s_server") != std::string::npos);
}

TEST_CASE("N7: plain HTTP tunnelled with --proxytunnel reaches the upstream", "[N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  auto r = curl({"-p", "-x", http_proxy_url(e), "http://allowed.test:" + port_of(up) + "/tunnelled"});
  INFO(r.describe());
  CHECK(r.exit_code() == 0);
  CHECK(r.connect_code == 200);
  CHECK(r.http_code == 200);
  CHECK(r.body.find("upstream-ok GET /tunnelled") != std::string::npos);
  CHECK(up.accepts() == 1);
}

TEST_CASE("N2: SOCKS5 with remote name resolution reaches HTTP and TLS upstreams", "[N2][N7][egressd]") {
  upstream up(upstream::mode::http);
  tls_upstream tls;
  egressd e(std_args());
  auto r = curl({"--socks5-hostname", socks_proxy(e), "http://allowed.test:" + port_of(up) + "/via-socks"});
  INFO(r.describe());
  CHECK(r.exit_code() == 0);
  CHECK(r.http_code == 200);
  CHECK(r.body.find("upstream-ok GET /via-socks") != std::string::npos);
  CHECK(up.accepts() == 1);
  auto t = curl({"--socks5-hostname", socks_proxy(e), "--cacert", tls.cert(),
                 "https://allowed.test:" + std::to_string(tls.port()) + "/"});
  INFO(t.describe());
  CHECK(t.exit_code() == 0);
  CHECK(t.http_code == 200);
}

TEST_CASE("N7: denied plain HTTP gets 403, is reported, and never reaches the upstream", "[N7][N3][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  auto r = curl({"-i", "-x", http_proxy_url(e), "http://other.test:" + port_of(up) + "/secret"});
  INFO(r.describe());
  CHECK(r.http_code == 403);
  CHECK(lower(r.body).find("x-ccsb-deny-reason: not_allowlisted") != std::string::npos);
  auto v = e.wait_violation("other.test:" + port_of(up));
  INFO(e.seen_text());
  REQUIRE(v);
  CHECK(v->str("action") == "network-outbound");
  CHECK(v->str("reason").rfind("not_allowlisted", 0) == 0);
  CHECK(up.accepts() == 0);
}

TEST_CASE("N7: denied CONNECT is refused, reported, and never reaches the upstream", "[N7][N3][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  auto r = curl({"-p", "-x", http_proxy_url(e), "http://other.test:" + port_of(up) + "/"});
  INFO(r.describe());
  CHECK(r.exit_code() != 0);
  CHECK(r.connect_code == 403);
  auto v = e.wait_violation("other.test:" + port_of(up));
  INFO(e.seen_text());
  REQUIRE(v);
  CHECK(v->str("action") == "network-outbound");
  CHECK(v->str("reason").rfind("not_allowlisted", 0) == 0);
  CHECK(up.accepts() == 0);
}

TEST_CASE("N7: denied SOCKS5 connect is refused, reported, and never reaches the upstream", "[N7][N3][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  auto r = curl({"--socks5-hostname", socks_proxy(e), "http://other.test:" + port_of(up) + "/"});
  INFO(r.describe());
  CHECK(r.exit_code() != 0);
  CHECK(r.http_code != 200);
  auto v = e.wait_violation("other.test:" + port_of(up));
  INFO(e.seen_text());
  REQUIRE(v);
  CHECK(v->str("action") == "network-outbound");
  CHECK(up.accepts() == 0);
}

TEST_CASE("N7: the deny reason header and the event agree, and the event comes first", "[N7][S6][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args({"--deny", "bad.allowed.test", "--allow", "*.allowed.test", "--resolve",
                      "bad.allowed.test=127.0.0.1"}));
  e.mark();
  auto fd = tcp_connect(e.http_port());
  auto r = http_connect(fd.get(), "bad.allowed.test:" + port_of(up));
  INFO(r.raw);
  CHECK(r.status == 403);
  CHECK(r.header("x-ccsb-deny-reason") == "deny_list: bad.allowed.test");
  // Contract: the event is written before the client sees the refusal, so it
  // is already readable now (no waiting).
  auto v = e.wait_violation("bad.allowed.test:" + port_of(up), 0);
  CHECK(v.has_value());
  if (!v) v = e.wait_violation("bad.allowed.test:" + port_of(up));
  REQUIRE(v);
  CHECK(v->str("event") == "violation");
  CHECK(v->str("action") == "network-outbound");
  CHECK(v->str("reason") == "deny_list: bad.allowed.test");
  CHECK(up.accepts() == 0);
}

TEST_CASE("N5: deny beats every allow, baseline metadata names included", "[N5][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args({"--allow", "metadata.google.internal", "--resolve", "metadata.google.internal=127.0.0.1",
                      "--allow", "169.254.169.254"}));
  for (std::string target : {"metadata.google.internal", "METADATA.google.internal.", "169.254.169.254"}) {
    INFO(target);
    auto fd = tcp_connect(e.http_port());
    auto r = http_connect(fd.get(), target + ":" + port_of(up));
    CHECK(r.status == 403);
    CHECK(r.header("x-ccsb-deny-reason").rfind("deny_list: ", 0) == 0);
  }
  CHECK(e.wait_violation("metadata.google.internal:" + port_of(up)));
  CHECK(e.wait_violation("169.254.169.254:" + port_of(up)));
  CHECK(up.accepts() == 0);
}

TEST_CASE("N4: the baseline allowlist applies unless --no-baseline", "[N4][egressd]") {
  upstream up(upstream::mode::echo);
  // api.anthropic.com is in kBaselineAllowedDomains; map it to loopback.
  std::vector<std::string> common{"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--allow-upstream",
                                  "127.0.0.0/8", "--resolve", "api.anthropic.com=127.0.0.1"};
  {
    egressd e(common);
    auto fd = tcp_connect(e.http_port());
    auto r = http_connect(fd.get(), "api.anthropic.com:" + port_of(up));
    CHECK(r.status == 200);
  }
  {
    auto args = common;
    args.push_back("--no-baseline");
    egressd e(args);
    auto fd = tcp_connect(e.http_port());
    auto r = http_connect(fd.get(), "api.anthropic.com:" + port_of(up));
    CHECK(r.status == 403);
    CHECK(e.wait_violation("api.anthropic.com:" + port_of(up)));
  }
  CHECK(up.accepts() == 1);
}

TEST_CASE("N6: --network off starts the listeners and denies and reports everything", "[N6][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args({"--network", "off"}));
  auto t = "allowed.test:" + port_of(up);
  auto a = curl({"-x", http_proxy_url(e), "http://" + t + "/"});
  INFO(a.describe());
  CHECK(a.http_code == 403);
  auto b = curl({"-p", "-x", http_proxy_url(e), "http://" + t + "/"});
  INFO(b.describe());
  CHECK(b.connect_code == 403);
  auto c = curl({"--socks5-hostname", socks_proxy(e), "http://" + t + "/"});
  INFO(c.describe());
  CHECK(c.exit_code() != 0);
  auto reported = e.count_until(
      [&](const event& ev) {
        return ev.name() == "violation" && ev.str("target") == t && ev.str("reason").rfind("network_disabled", 0) == 0;
      },
      3);
  INFO(e.seen_text());
  CHECK(reported == 3);
  CHECK(up.accepts() == 0);
}

TEST_CASE("N1: unix socket listeners carry CONNECT and SOCKS5", "[N1][L3][egressd]") {
  temp_dir dir;
  upstream up(upstream::mode::echo);
  std::string hs = dir.file("http.sock"), ss = dir.file("socks.sock");
  egressd e({"--http-listen", "unix:" + hs, "--socks-listen", "unix:" + ss, "--no-baseline", "--allow-upstream",
             "127.0.0.0/8", "--allow", "allowed.test", "--resolve", "allowed.test=127.0.0.1"});
  CHECK(e.ready().str("http") == "unix:" + hs);
  CHECK(e.ready().str("socks") == "unix:" + ss);
  {
    auto fd = connect_to(e.http());
    auto r = http_connect(fd.get(), "allowed.test:" + port_of(up));
    REQUIRE(r.status == 200);
    send_all(fd.get(), "ping-unix-http");
    CHECK(recv_n(fd.get(), 14) == "ping-unix-http");
  }
  {
    auto fd = connect_to(e.socks());
    auto r = socks::connect_name(fd.get(), "allowed.test", up.port());
    REQUIRE(r.code == 0);
    send_all(fd.get(), "ping-unix-socks");
    CHECK(recv_n(fd.get(), 15) == "ping-unix-socks");
  }
  CHECK(up.accepts() == 2);
}

TEST_CASE("N1: IPv6 loopback listeners work with curl", "[N1][egressd]") {
  upstream up(upstream::mode::http);
  egressd e({"--http-listen", "[::1]:0", "--socks-listen", "[::1]:0", "--no-baseline", "--allow-upstream",
             "127.0.0.0/8", "--allow", "allowed.test", "--resolve", "allowed.test=127.0.0.1"});
  CHECK(e.http().host == "::1");
  REQUIRE(e.http().port != 0);
  auto r = curl({"-x", "http://[::1]:" + std::to_string(e.http().port), "http://allowed.test:" + port_of(up) + "/v6"});
  INFO(r.describe());
  CHECK(r.http_code == 200);
  auto s = curl({"--socks5-hostname", "[::1]:" + std::to_string(e.socks().port),
                 "http://allowed.test:" + port_of(up) + "/v6s"});
  INFO(s.describe());
  CHECK(s.http_code == 200);
}

TEST_CASE("N1: a non-loopback listener is refused and nothing starts", "[N1][egressd]") {
  require_egressd();
  for (std::string addr : {"0.0.0.0:0", "[::]:0"}) {
    INFO(addr);
    auto r = run({egressd_path(), "--http-listen", addr, "--socks-listen", "127.0.0.1:0", "--no-baseline"}, 20000);
    INFO(r.describe());
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != -1);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
  }
}

TEST_CASE("N7: --events FD sends events to an inherited descriptor, stdout stays clean", "[N7][S5][egressd]") {
  upstream up(upstream::mode::http);
  egressd::options o;
  o.events_on_fd3 = true;
  egressd e(std_args(), o);
  auto fd = tcp_connect(e.http_port());
  auto r = http_connect(fd.get(), "other.test:" + port_of(up));
  CHECK(r.status == 403);
  CHECK(e.wait_violation("other.test:" + port_of(up)));
  CHECK(e.stdout_text().find("violation") == std::string::npos);
  CHECK(up.accepts() == 0);
}

TEST_CASE("N7: --events PATH appends JSON lines to a file", "[N7][S5][egressd]") {
  require_egressd();
  upstream up(upstream::mode::http);
  temp_dir dir;
  std::string path = dir.file("events.jsonl");
  auto args = std_args({"--events", path});
  std::vector<std::string> argv{egressd_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = spawn(argv);
  std::string text;
  auto deadline = clock_type::now() + std::chrono::milliseconds(kWaitMs);
  while (text.find('\n') == std::string::npos && clock_type::now() < deadline) {
    text = read_file(path);
    std::this_thread::sleep_for(10ms);
  }
  INFO(text);
  auto first = parse_event(text.substr(0, text.find('\n')));
  CHECK(first.name() == "ready");
  auto http = parse_listen_addr(first.str("http"));
  if (http.port) {
    auto fd = tcp_connect(http.port);
    auto r = http_connect(fd.get(), "other.test:" + port_of(up));
    CHECK(r.status == 403);
    deadline = clock_type::now() + std::chrono::milliseconds(kWaitMs);
    while (text.find("\"violation\"") == std::string::npos && clock_type::now() < deadline) {
      text = read_file(path);
      std::this_thread::sleep_for(10ms);
    }
    CHECK(text.find("\"target\":\"other.test:" + port_of(up) + "\"") != std::string::npos);
  }
  kill_and_reap(pid);
}
