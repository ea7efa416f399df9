// Refusals at parse time that can name a target are reported like any other
// denial (N7: "also a refusal at parse time whenever a target can be named
// (bad scheme, BIND/UDP, port 0, …)"): exactly one violation line with
// action network-outbound and the target as host:port, written before the
// client sees the refusal, and nothing reaches an upstream.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

struct row {
  std::string name;
  std::string bytes;  // sent on a fresh connection (SOCKS rows include the greeting)
  std::string target; // the violation's target
};

// Sends the bytes, reads until egressd closes, then checks the events that
// arrived before the close: exactly one violation, for `target`.
void expect_one_violation(egressd& e, uint16_t port, const row& r, int* refused_replies) {
  INFO(r.name);
  e.mark();
  auto fd = tcp_connect(port);
  send_all(fd.get(), r.bytes);
  auto got = recv_to_eof(fd.get());
  INFO("reply bytes: " << got.data.size());
  CHECK((got.eof || got.reset));
  if (!got.data.empty()) ++*refused_replies;
  // The event is written before the refusal, so it is in the pipe by now.
  std::size_t n = e.violations_since_mark();
  INFO(e.seen_text());
  CHECK(n == 1);
  auto v = e.wait_violation(r.target, 0);
  CHECK(v.has_value());
  if (!v) return;
  CHECK(v->str("action") == "network-outbound");
  CHECK(!v->str("reason").empty());
}

std::string socks5(uint8_t cmd, const std::string& atyp_addr, uint16_t port) {
  std::string s{'\x05', '\x01', '\x00'}; // greeting: no auth
  s += std::string{'\x05', static_cast<char>(cmd), '\x00'};
  s += atyp_addr;
  s += socks::port_bytes(port);
  return s;
}

std::string socks4(uint8_t cmd, const std::string& dotted, uint16_t port, const std::string& host4a = "") {
  std::string s{'\x04', static_cast<char>(cmd)};
  s += socks::port_bytes(port);
  s += socks::ipv4_addr(dotted).substr(1);
  s += std::string("u\0", 2);
  if (!host4a.empty()) s += host4a + std::string(1, '\0');
  return s;
}

} // namespace

TEST_CASE("N7: HTTP requests refused at parse time report the target they name", "[N7][N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args({"--deny", "denied.test"}));
  std::string p = std::to_string(up.port());
  std::vector<row> rows{
      {"absolute-form with the https scheme", "GET https://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
       "denied.test:443"},
      {"https scheme with a port", "GET https://allowed.test:" + p + "/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
       "allowed.test:" + p},
      {"ftp scheme to the metadata address", "GET ftp://169.254.169.254/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
       "169.254.169.254:21"},
      {"CONNECT with userinfo", "CONNECT u@denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
       "denied.test:443"},
      {"absolute-form with userinfo", "GET http://u:pw@denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
       "denied.test:80"},
      {"userinfo hiding the real host",
       "GET http://allowed.test:" + p + "@169.254.169.254/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
       "169.254.169.254:80"},
      {"CONNECT to port 0", "CONNECT allowed.test:0 HTTP/1.1\r\nHost: allowed.test:0\r\n\r\n", "allowed.test:0"},
      {"absolute-form to port 0", "GET http://allowed.test:0/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
       "allowed.test:0"},
      {"CONNECT with an unbracketed IPv6 literal", "CONNECT ::1:443 HTTP/1.1\r\nHost: localhost\r\n\r\n",
       "[::1]:443"},
      {"origin-form with a metadata Host", "GET / HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "169.254.169.254:80"},
      {"origin-form with Host and port", "GET /latest/meta-data HTTP/1.1\r\nHost: 169.254.169.254:8080\r\n\r\n",
       "169.254.169.254:8080"},
      {"a port with a leading zero", "CONNECT allowed.test:0" + p + " HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
       "allowed.test:0" + p},
      {"a malformed header after a good request line",
       "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nX-A: a\r\n folded\r\n\r\n", "denied.test:80"},
  };
  // Refusals before the request line was read to its end (issue 30 item 3):
  // the bytes read so far name the target all the same.
  const std::string fw = "allowed\xef\xbc\x8etest"; // U+FF0E FULLWIDTH FULL STOP
  rows.push_back({"an absolute-form URL over the line limit (header_too_large)",
                  "GET http://denied.test/" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: denied.test\r\n\r\n",
                  "denied.test:80"});
  rows.push_back({"an absolute-form request line that never ends, over the line limit",
                  "GET http://denied.test:8080/?q=" + std::string(20000, 'b'), "denied.test:8080"});
  rows.push_back({"bare LF line ends (bare_lf)", "GET http://denied.test/ HTTP/1.1\nHost: denied.test\n\n",
                  "denied.test:80"});
  rows.push_back({"CONNECT with bare LF", "CONNECT denied.test:443 HTTP/1.1\nHost: denied.test:443\n\n",
                  "denied.test:443"});
  rows.push_back({"CONNECT with full-width dots (bad_target)",
                  "CONNECT " + fw + ":443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", fw + ":443"});
  rows.push_back({"absolute-form with full-width dots (bad_target)",
                  "GET http://" + fw + "/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", fw + ":80"});
  int replies = 0;
  for (const auto& r : rows) expect_one_violation(e, e.http_port(), r, &replies);
  CHECK(replies == static_cast<int>(rows.size())); // each got an HTTP refusal
  CHECK(up.accepts() == 0);
  CHECK(proxy_still_serves(e, up));
}

TEST_CASE("N7: SOCKS requests refused at parse time report the target they name", "[N7][N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  std::vector<row> rows{
      {"SOCKS5 BIND", socks5(socks::kBind, socks::ipv4_addr("169.254.169.254"), 80), "169.254.169.254:80"},
      {"SOCKS5 BIND by name", socks5(socks::kBind, socks::domain_addr("allowed.test"), up.port()),
       "allowed.test:" + std::to_string(up.port())},
      {"SOCKS5 UDP ASSOCIATE", socks5(socks::kUdpAssociate, socks::ipv4_addr("0.0.0.0"), 0), "0.0.0.0:0"},
      {"SOCKS5 UDP ASSOCIATE to a name", socks5(socks::kUdpAssociate, socks::domain_addr("dns.test"), 53),
       "dns.test:53"},
      {"SOCKS5 unknown command", socks5(0x09, socks::ipv6_addr("::1"), 22), "[::1]:22"},
      {"SOCKS5 CONNECT to port 0", socks5(socks::kConnect, socks::domain_addr("allowed.test"), 0),
       "allowed.test:0"},
      {"SOCKS4 BIND", socks4(2, "169.254.169.254", 80), "169.254.169.254:80"},
      {"SOCKS4a BIND", socks4(2, "0.0.0.1", 443, "allowed.test"), "allowed.test:443"},
      {"SOCKS4 CONNECT to port 0", socks4(1, "127.0.0.1", 0), "127.0.0.1:0"},
  };
  // A SOCKS4 user id over 255 bytes (issue 30 item 3): the address in the
  // fixed header is the target all the same.
  std::string long_uid = socks4(1, "169.254.169.254", 80);
  long_uid.insert(8, std::string(300, 'u'));
  rows.push_back({"SOCKS4 CONNECT with a 300-byte user id", long_uid, "169.254.169.254:80"});
  int replies = 0;
  for (const auto& r : rows) expect_one_violation(e, e.socks_port(), r, &replies);
  CHECK(replies == static_cast<int>(rows.size()));
  CHECK(up.accepts() == 0);
  auto fd = tcp_connect(e.socks_port());
  CHECK(socks::connect_name(fd.get(), "allowed.test", up.port()).code == 0);
}

TEST_CASE("N7: a refusal that names no target writes no violation", "[N7][N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  // Nothing here names a host: no event, just the refusal.
  for (const std::string& bytes :
       {std::string("GARBAGE\r\n\r\n"), std::string("GET / HTTP/1.1\r\n\r\n"), std::string("PRI * HTTP/2.0\r\n\r\n"),
        std::string("GET http:/// HTTP/1.1\r\nHost: a.test\r\n\r\n")}) {
    INFO(bytes);
    e.mark();
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), bytes);
    CHECK(peer_closes(fd.get()));
    CHECK(e.violations_since_mark() == 0);
  }
  {
    e.mark();
    auto fd = tcp_connect(e.socks_port());
    send_all(fd.get(), std::string{'\x05', '\x01', '\x00', '\x05', '\x01', '\x00', '\x07', '\x01'});
    CHECK(peer_closes(fd.get()));
    CHECK(e.violations_since_mark() == 0);
  }
  CHECK(up.accepts() == 0);
}
