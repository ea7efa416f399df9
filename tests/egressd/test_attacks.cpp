// Attack classes against the HTTP proxy, table-driven, with raw bytes (curl
// would normalise many of these spellings before egressd saw them).
// For every denied row: the client is refused, and the upstream that the
// trick aims at sees no connection (N3, N5, N7, N8).
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

struct row {
  std::string host;  // as written in the request target (no port)
  bool allowed;      // expected decision
  std::string why;   // documentation of the row
};

// Sends CONNECT host:port and returns the reply status.
int connect_status(egressd& e, const std::string& authority, std::string* reason = nullptr) {
  auto fd = tcp_connect(e.http_port());
  auto r = http_connect(fd.get(), authority);
  if (reason) *reason = r.header("x-ccsb-deny-reason");
  return r.status;
}

// Runs a table: each allowed row must give 200 and one upstream connection,
// each denied row a refusal (403, or 400 when the spelling is malformed) and
// no upstream connection. Denials answered with 403 must carry a reason and
// be reported.
void run_connect_table(egressd& e, upstream& up, const std::vector<row>& rows) {
  for (const auto& r : rows) {
    int before = up.accepts();
    std::string reason;
    std::string authority = r.host + ":" + port_of(up);
    int status = connect_status(e, authority, &reason);
    INFO("CONNECT " << authority << " (" << r.why << ") -> " << status << " reason=" << reason);
    if (r.allowed) {
      CHECK(status == 200);
      // The tunnel was made (bounded wait for the upstream's accept).
      auto deadline = clock_type::now() + 5s;
      while (up.accepts() == before && clock_type::now() < deadline) std::this_thread::sleep_for(2ms);
      CHECK(up.accepts() == before + 1);
    } else {
      CHECK((status == 403 || status == 400));
      if (status == 403) {
        CHECK(!reason.empty());
        auto v = e.wait_any_violation();
        CHECK(v.has_value());
        if (v) CHECK(v->str("action") == "network-outbound");
        e.mark();
      }
      CHECK(up.accepts() == before);
    }
  }
}

} // namespace

TEST_CASE("N3: case and one trailing dot keep an allowed name allowed — look-alikes are denied", "[N3][N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--resolve", "xallowed.test=127.0.0.1", "--resolve", "allowed.test.evil.test=127.0.0.1",
                      "--resolve", "allowed.tes=127.0.0.1", "--resolve", "allowed-test=127.0.0.1"}));
  run_connect_table(e, up,
                    {
                        {"allowed.test", true, "exact"},
                        {"ALLOWED.TEST", true, "upper case"},
                        {"Allowed.Test", true, "mixed case"},
                        {"allowed.test.", true, "one trailing dot"},
                        {"ALLOWED.TEST.", true, "upper case and trailing dot"},
                        {"allowed.test..", false, "two trailing dots"},
                        {".allowed.test", false, "leading dot"},
                        {"xallowed.test", false, "prefix look-alike"},
                        {"allowed.test.evil.test", false, "allowed name as a subdomain of another"},
                        {"allowed.tes", false, "truncated"},
                        {"allowed-test", false, "dot replaced"},
                        {"allowed.test%2e", false, "percent-encoded dot"},
                        {"allowed.test\\", false, "backslash"},
                        {"allowed_test.test", false, "underscore"},
                        {"a llowed.test", false, "space inside"},
                    });
}

TEST_CASE("N3: look-alike suffixes of an allowed domain are denied as not allowlisted", "[N3][N7][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--allow", "example.com", "--resolve", "example.com=127.0.0.1", "--resolve",
                      "evilexample.com=127.0.0.1", "--resolve", "example.com.evil.net=127.0.0.1", "--resolve",
                      "www.example.com=127.0.0.1", "--resolve", "example.co=127.0.0.1"}));
  run_connect_table(e, up,
                    {
                        {"example.com", true, "exact"},
                        {"evilexample.com", false, "suffix without a dot boundary"},
                        {"example.com.evil.net", false, "allowed name as prefix"},
                        {"www.example.com", false, "exact pattern does not cover subdomains"},
                        {"example.co", false, "shorter TLD"},
                    });
  for (std::string name : {"evilexample.com", "example.com.evil.net"}) {
    std::string reason;
    CHECK(connect_status(e, name + ":" + port_of(up), &reason) == 403);
    CHECK(reason == "not_allowlisted");
  }
}

TEST_CASE("N3: wildcard forms match the documented depth only", "[N3][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--allow", "*.wild.test", "--allow", "api.*.mid.test", "--resolve", "wild.test=127.0.0.1",
                      "--resolve", "a.wild.test=127.0.0.1", "--resolve", "a.b.wild.test=127.0.0.1", "--resolve",
                      "api.x.mid.test=127.0.0.1", "--resolve", "api.x.y.mid.test=127.0.0.1", "--resolve",
                      "api.mid.test=127.0.0.1", "--resolve", "xapi.x.mid.test=127.0.0.1", "--resolve",
                      "awild.test=127.0.0.1"}));
  run_connect_table(e, up,
                    {
                        {"a.wild.test", true, "leading wildcard, one level"},
                        {"a.b.wild.test", true, "leading wildcard, two levels"},
                        {"wild.test", false, "leading wildcard never matches the apex"},
                        {"awild.test", false, "no label boundary"},
                        {"api.x.mid.test", true, "middle wildcard, one label"},
                        {"api.x.y.mid.test", false, "middle wildcard never spans two labels"},
                        {"api.mid.test", false, "middle wildcard needs one label"},
                        {"xapi.x.mid.test", false, "label before the wildcard differs"},
                    });
}

TEST_CASE("N8: numeric IPv4 spellings never reach the address they spell", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  // 127.0.0.1 itself is allowlisted (and let through the address check), so
  // any spelling that egressd canonicalised loosely would be let in.
  egressd e(std_args({"--allow", "127.0.0.1"}));
  run_connect_table(e, up,
                    {
                        {"127.0.0.1", true, "canonical dotted quad (control)"},
                        {"2130706433", false, "decimal integer"},
                        {"0x7f000001", false, "hex integer"},
                        {"0x7f.1", false, "hex first part, short form"},
                        {"0x7f.0.0.1", false, "hex first part"},
                        {"017700000001", false, "octal integer"},
                        {"0177.0.0.1", false, "octal first part"},
                        {"127.1", false, "short form"},
                        {"127.0.1", false, "three-part form"},
                        {"127.000.000.001", false, "zero padded"},
                        {"127.0.0.01", false, "leading zero in last part"},
                        {"127.0.0.256", false, "part out of range"},
                        {"0", false, "zero"},
                        {"[127.0.0.1]", false, "bracketed IPv4"},
                    });
}

TEST_CASE("N8: an IP literal is allowed only when the allowlist names that IP", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  std::string reason;
  CHECK(connect_status(e, "127.0.0.1:" + port_of(up), &reason) == 403);
  CHECK(reason.rfind("ip_literal_not_listed", 0) == 0);
  CHECK(connect_status(e, "127.0.0.2:" + port_of(up), &reason) == 403);
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: bracketed names and unbracketed IPv6 are rejected", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  for (std::string authority :
       {"[allowed.test]:" + port_of(up), "[allowed.test:" + port_of(up) + "]", "::1:" + port_of(up),
        "::ffff:127.0.0.1:" + port_of(up), "[::1:" + port_of(up), "allowed.test]:" + port_of(up)}) {
    INFO(authority);
    int status = connect_status(e, authority);
    CHECK((status == 400 || status == 403));
  }
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: IPv6 embeddings of the metadata address are denied", "[N8][N5][egressd]") {
  upstream up(upstream::mode::echo);
  // Even an allowlist that names the embedding does not let it through: the
  // address check classifies the embedded IPv4 address.
  egressd e(std_args({"--allow", "64:ff9b::a9fe:a9fe", "--allow", "2002:a9fe:a9fe::1", "--allow",
                      "::a9fe:a9fe", "--allow", "2001::5601:5601"}));
  for (std::string host : {"[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[0:0:0:0:0:ffff:a9fe:a9fe]",
                           "[64:ff9b::a9fe:a9fe]", "[64:ff9b::169.254.169.254]", "[2002:a9fe:a9fe::1]",
                           "[::a9fe:a9fe]", "[::169.254.169.254]", "[2001::5601:5601]", "[fd00:ec2::254]"}) {
    std::string reason;
    int status = connect_status(e, host + ":80", &reason);
    INFO(host << " -> " << status << " " << reason);
    CHECK(status == 403);
    CHECK(!reason.empty());
  }
  // The allowlisted NAT64 form is denied by the address check, not the name check.
  std::string reason;
  CHECK(connect_status(e, "[64:ff9b::a9fe:a9fe]:80", &reason) == 403);
  CHECK(reason.rfind("address", 0) == 0);
  CHECK(connect_status(e, "[2002:a9fe:a9fe::1]:80", &reason) == 403);
  CHECK(reason.rfind("address", 0) == 0);
}

TEST_CASE("N8: allowlisted literals in denied address classes are refused by the address check", "[N8][egressd]") {
  // No --allow-upstream here: loopback is denied like every other class.
  egressd e({"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--no-baseline", "--allow", "10.1.2.3",
             "--allow", "192.168.1.1", "--allow", "172.16.0.1", "--allow", "100.64.0.1", "--allow", "169.254.1.1",
             "--allow", "0.0.0.0", "--allow", "224.0.0.1", "--allow", "255.255.255.255", "--allow", "127.0.0.1",
             "--allow", "::1", "--allow", "fe80::1", "--allow", "fc00::1", "--allow", "ff02::1", "--allow", "::"});
  for (std::string host : {"10.1.2.3", "192.168.1.1", "172.16.0.1", "100.64.0.1", "169.254.1.1", "0.0.0.0",
                           "224.0.0.1", "255.255.255.255", "127.0.0.1", "[::1]", "[fe80::1]", "[fc00::1]", "[ff02::1]",
                           "[::]"}) {
    std::string reason;
    int status = connect_status(e, host + ":80", &reason);
    INFO(host << " -> " << status << " " << reason);
    CHECK(status == 403);
    CHECK(reason.rfind("address", 0) == 0);
  }
}

TEST_CASE("N8: a name that resolves to the metadata address is denied by the address check (--resolve)",
          "[N8][N7][egressd]") {
  egressd e(std_args({"--allow", "sneaky.test", "--resolve", "sneaky.test=169.254.169.254", "--allow",
                      "private.test", "--resolve", "private.test=10.0.0.7"}));
  for (std::string name : {"sneaky.test", "private.test"}) {
    std::string reason;
    CHECK(connect_status(e, name + ":80", &reason) == 403);
    INFO(name << " " << reason);
    CHECK(reason.rfind("address", 0) == 0);
    auto v = e.wait_violation(name + ":80");
    INFO(e.seen_text());
    REQUIRE(v);
    CHECK(v->str("reason").rfind("address", 0) == 0);
  }
}

TEST_CASE("N8: a name that resolves to the metadata address is denied by the address check (DNS)",
          "[N8][N7][egressd]") {
  upstream up(upstream::mode::http);
  dns_server dns({{"sneaky.test", {"169.254.169.254"}},
                  {"mixed.test", {"127.0.0.1", "169.254.169.254"}},
                  {"good.test", {"127.0.0.1"}}});
  egressd e({"--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0", "--no-baseline", "--allow-upstream",
             "127.0.0.0/8", "--dns-server", dns.addr(), "--allow", "sneaky.test", "--allow", "good.test", "--allow",
             "mixed.test"});
  // Control: the DNS path works for a loopback answer.
  auto ok = curl({"-x", http_proxy_url(e), "http://good.test:" + port_of(up) + "/dns"});
  INFO(ok.describe());
  CHECK(ok.http_code == 200);
  CHECK(up.accepts() == 1);
  CHECK(dns.queries() > 0);
  std::string reason;
  CHECK(connect_status(e, "sneaky.test:" + port_of(up), &reason) == 403);
  INFO(reason);
  CHECK(reason.rfind("address", 0) == 0);
  auto v = e.wait_violation("sneaky.test:" + port_of(up));
  REQUIRE(v);
  CHECK(v->str("reason").rfind("address", 0) == 0);
  // Every resolved address is classified: one bad answer among good ones denies.
  CHECK(connect_status(e, "mixed.test:" + port_of(up), &reason) == 403);
  CHECK(reason.rfind("address", 0) == 0);
  CHECK(up.accepts() == 1);
}

TEST_CASE("N8: ports must be plain decimal 1-65535 without leading zeros", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  std::string p = port_of(up);
  for (const std::string& authority : std::vector<std::string>{"allowed.test", "allowed.test:", "allowed.test:0", "allowed.test:65536",
                                "allowed.test:0" + p, "allowed.test:+" + p, "allowed.test:-1", "allowed.test: " + p,
                                "allowed.test:" + p + "x", "allowed.test:0x50", "allowed.test:" + p + ":" + p,
                                "allowed.test:99999999999999999999"}) {
    INFO(authority);
    CHECK(connect_status(e, authority) == 400);
  }
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: userinfo in the target is rejected", "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  {
    auto fd = tcp_connect(e.http_port());
    auto r = http_connect(fd.get(), "user@allowed.test:" + p, "allowed.test:" + p);
    CHECK(r.status == 400);
  }
  {
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), "GET http://user:pass@allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n\r\n");
    auto r = read_response(fd.get());
    CHECK(r.status == 400);
  }
  {
    // The classic confusion: the part after '@' is the real host.
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), "GET http://allowed.test:" + p + "@other.test:" + p + "/ HTTP/1.1\r\nHost: other.test:" + p +
                           "\r\n\r\n");
    auto r = read_response(fd.get());
    CHECK((r.status == 400 || r.status == 403));
  }
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: the Host header never redirects an absolute-form request", "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  {
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), "GET http://allowed.test:" + p + "/path?q=1 HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n");
    auto r = read_response(fd.get());
    INFO(r.raw << r.body);
    CHECK(r.status == 200);
  }
  auto reqs = up.requests();
  REQUIRE(reqs.size() == 1);
  INFO(reqs[0]);
  CHECK(reqs[0].rfind("GET /path?q=1 HTTP/1.1\r\n", 0) == 0);
  std::string l = lower(reqs[0]);
  CHECK(l.find("evil") == std::string::npos);
  CHECK((l.find("\r\nhost: allowed.test:" + p + "\r\n") != std::string::npos ||
         l.find("\r\nhost: allowed.test\r\n") != std::string::npos));
  // The reverse: a denied absolute-form target with an allowed Host header.
  {
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), "GET http://other.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n\r\n");
    auto r = read_response(fd.get());
    CHECK(r.status == 403);
  }
  CHECK(e.wait_violation("other.test:" + p));
  CHECK(up.accepts() == 1);
}

TEST_CASE("N8: hop-by-hop headers are removed before forwarding", "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  auto fd = tcp_connect(e.http_port());
  send_all(fd.get(), "GET http://allowed.test:" + p +
                         "/h HTTP/1.1\r\nHost: allowed.test:" + p +
                         "\r\nProxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\nProxy-Connection: keep-alive\r\n"
                         "Connection: X-Drop-Me\r\nX-Drop-Me: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
                         "X-Keep-Me: yes\r\n\r\n");
  auto r = read_response(fd.get());
  CHECK(r.status == 200);
  auto reqs = up.requests();
  REQUIRE(reqs.size() == 1);
  std::string l = lower(reqs[0]);
  INFO(reqs[0]);
  CHECK(l.find("proxy-authorization") == std::string::npos);
  CHECK(l.find("proxy-connection") == std::string::npos);
  CHECK(l.find("x-drop-me") == std::string::npos);
  CHECK(l.find("keep-alive: timeout") == std::string::npos);
  CHECK(l.find("\r\nte:") == std::string::npos);
  CHECK(l.find("x-keep-me: yes") != std::string::npos);
}

TEST_CASE("N8: each request on a kept-alive connection is checked again", "[N8][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  auto fd = tcp_connect(e.http_port());
  send_all(fd.get(), "GET http://allowed.test:" + p + "/one HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n\r\n");
  auto r1 = read_response(fd.get());
  CHECK(r1.status == 200);
  CHECK(r1.body.find("/one") != std::string::npos);
  send_all(fd.get(), "GET http://other.test:" + p + "/two HTTP/1.1\r\nHost: other.test:" + p + "\r\n\r\n");
  auto r2 = read_response(fd.get());
  CHECK(r2.status == 403);
  CHECK(e.wait_violation("other.test:" + p));
  auto reqs = up.requests();
  CHECK(reqs.size() == 1);
  for (const auto& q : reqs) CHECK(q.find("/two") == std::string::npos);
}

TEST_CASE("N8: malformed requests get 400 and the connection closes", "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  std::string target = "http://allowed.test:" + p + "/";
  std::string host = "Host: allowed.test:" + p + "\r\n";
  struct bad {
    std::string name, bytes;
  };
  // The forms the contract names: 400 and close, nothing forwarded.
  std::vector<bad> strict{
      {"duplicate Host", "GET " + target + " HTTP/1.1\r\n" + host + host + "\r\n"},
      {"duplicate Host, different values", "GET " + target + " HTTP/1.1\r\n" + host + "Host: other.test\r\n\r\n"},
      {"missing Host", "GET " + target + " HTTP/1.1\r\nAccept: */*\r\n\r\n"},
      {"CONNECT with duplicate Host",
       "CONNECT allowed.test:" + p + " HTTP/1.1\r\n" + host + "Host: other.test:" + p + "\r\n\r\n"},
      {"Content-Length and Transfer-Encoding",
       "POST " + target + " HTTP/1.1\r\n" + host + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"Transfer-Encoding and Content-Length",
       "POST " + target + " HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"obs-fold", "GET " + target + " HTTP/1.1\r\n" + host + "X-Folded: a\r\n b\r\n\r\n"},
      {"obs-fold with tab", "GET " + target + " HTTP/1.1\r\n" + host + "X-Folded: a\r\n\tb\r\n\r\n"},
      {"obs-fold of Host", "GET " + target + " HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n other.test\r\n\r\n"},
  };
  for (const auto& c : strict) {
    INFO(c.name);
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), c.bytes);
    auto r = read_response(fd.get(), true);
    INFO(r.raw);
    CHECK(r.status == 400);
    CHECK(peer_closes(fd.get()));
  }
  // Other malformed shapes: some 4xx/5xx refusal, never forwarded.
  std::vector<bad> lenient{
      {"two different Content-Length", "POST " + target + " HTTP/1.1\r\n" + host +
                                            "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
      {"space before colon", "GET " + target + " HTTP/1.1\r\nHost : allowed.test:" + p + "\r\n\r\n"},
      {"NUL in header", "GET " + target + " HTTP/1.1\r\n" + host + "X-A: a" + std::string(1, '\0') + "b\r\n\r\n"},
      {"NUL in target", "GET http://allowed.test:" + p + "/" + std::string(1, '\0') + " HTTP/1.1\r\n" + host + "\r\n"},
      {"unknown transfer coding", "POST " + target + " HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n"},
      {"double space in request line", "GET  " + target + " HTTP/1.1\r\n" + host + "\r\n"},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
      {"origin-form to a proxy", "GET / HTTP/1.1\r\n" + host + "\r\n"},
      {"unsupported scheme", "GET ftp://allowed.test:" + p + "/ HTTP/1.1\r\n" + host + "\r\n"},
      {"https scheme in absolute form", "GET https://allowed.test:" + p + "/ HTTP/1.1\r\n" + host + "\r\n"},
      {"control byte in target", "GET http://allowed.test:" + p + "/\x01 HTTP/1.1\r\n" + host + "\r\n"},
      {"HTTP/0.9", "GET " + target + "\r\n\r\n"},
      {"HTTP/1.2", "GET " + target + " HTTP/1.2\r\n" + host + "\r\n"},
      {"lower-case method CONNECT", "connect allowed.test:" + p + " HTTP/1.1\r\n" + host + "\r\n"},
  };
  for (const auto& c : lenient) {
    INFO(c.name);
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), c.bytes);
    auto r = read_response(fd.get(), true);
    INFO(r.raw);
    CHECK(((r.status >= 400 && r.status < 600) || (r.status == -1 && r.closed)));
  }
  CHECK(up.accepts() == 0);
  CHECK(proxy_still_serves(e, up));
}

TEST_CASE("N8: a bad chunk in a forwarded body gets 400 and the connection closes", "[N8][egressd]") {
  // The upstream never answers, so the only response the client can see is egressd's.
  upstream up(upstream::mode::silent);
  egressd e(std_args());
  std::string p = port_of(up);
  for (const std::string& body : std::vector<std::string>{"zz\r\nhi\r\n0\r\n\r\n", "2\r\nhiXX0\r\n\r\n", "-1\r\n\r\n",
                           "ffffffffffffffffffff\r\n", "2;" + std::string(100000, 'e') + "\r\nhi\r\n0\r\n\r\n"}) {
    INFO(body.substr(0, 40));
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), "POST http://allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p +
                           "\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
    auto r = read_response(fd.get(), true);
    INFO(r.raw);
    CHECK((r.status == 400 || (r.status == -1 && r.closed)));
    CHECK(peer_closes(fd.get()));
  }
}

TEST_CASE("N8: overlong request lines and headers are refused", "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string p = port_of(up);
  std::string host = "Host: allowed.test:" + p + "\r\n";
  std::vector<std::pair<std::string, std::string>> cases{
      {"256 KiB header value", "GET http://allowed.test:" + p + "/ HTTP/1.1\r\n" + host + "X-Big: " +
                                    std::string(256 * 1024, 'a') + "\r\n\r\n"},
      {"10,000 headers", [&] {
         std::string s = "GET http://allowed.test:" + p + "/ HTTP/1.1\r\n" + host;
         for (int i = 0; i < 10000; ++i) s += "X-" + std::to_string(i) + ": v\r\n";
         return s + "\r\n";
       }()},
      {"256 KiB request target", "GET http://allowed.test:" + p + "/" + std::string(256 * 1024, 'a') +
                                      " HTTP/1.1\r\n" + host + "\r\n"},
      {"endless header, no blank line", "GET http://allowed.test:" + p + "/ HTTP/1.1\r\n" + host + "X-Endless: " +
                                            std::string(2 * 1024 * 1024, 'b')},
  };
  for (const auto& [name, bytes] : cases) {
    INFO(name);
    auto fd = tcp_connect(e.http_port());
    // The proxy may close before everything is written; that is fine.
    send_all(fd.get(), bytes);
    auto r = read_response(fd.get(), true);
    INFO(r.status_line);
    CHECK((r.status == 400 || r.status == 431 || r.status == 414 || (r.status == -1 && r.closed)));
    CHECK(peer_closes(fd.get()));
  }
  CHECK(up.accepts() == 0);
  CHECK(proxy_still_serves(e, up));
}
