// SOCKS5 listener with raw bytes: address types, hostile names, unsupported
// commands and protocol versions (N2, N7, N8).
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

socks::reply socks_request(egressd& e, uint8_t cmd, const std::string& atyp_addr, uint16_t port) {
  auto fd = tcp_connect(e.socks_port());
  if (socks::greet(fd.get()) != 0) return {};
  return socks::request(fd.get(), cmd, atyp_addr, port);
}
} // namespace

TEST_CASE("N2: SOCKS5 CONNECT by name relays bytes both ways", "[N2][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  auto fd = tcp_connect(e.socks_port());
  auto r = socks::connect_name(fd.get(), "allowed.test", up.port());
  REQUIRE(r.code == 0);
  std::string payload(100000, 'z');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  std::thread writer([&] { send_all(fd.get(), payload); });
  auto echoed = recv_n(fd.get(), payload.size());
  writer.join();
  CHECK(echoed == payload);
  CHECK(up.accepts() == 1);
}

TEST_CASE("N2: a SOCKS5 client offering only username/password gets 0xFF", "[N2][egressd]") {
  egressd e(std_args());
  auto fd = tcp_connect(e.socks_port());
  CHECK(socks::greet(fd.get(), std::string(1, '\x02')) == 0xff);
  CHECK(peer_closes(fd.get()));
}

TEST_CASE("N7: SOCKS5 ruleset denials reply 0x02, are reported, and never reach the upstream", "[N7][N8][egressd]") {
  upstream up(upstream::mode::echo);
  upstream up6(upstream::mode::echo, "::1");
  egressd e(std_args({"--deny", "bad.allowed.test", "--allow", "*.allowed.test"}));
  struct row {
    std::string what, addr;
    uint16_t port;
    std::string target; // expected event target
  };
  std::vector<row> rows{
      {"name not allowlisted", socks::domain_addr("other.test"), up.port(), "other.test:" + port_of(up)},
      {"name on the deny list", socks::domain_addr("bad.allowed.test"), up.port(), "bad.allowed.test:" + port_of(up)},
      {"IPv4 loopback, not listed", socks::ipv4_addr("127.0.0.1"), up.port(), "127.0.0.1:" + port_of(up)},
      {"IPv4 metadata", socks::ipv4_addr("169.254.169.254"), 80, "169.254.169.254:80"},
      {"IPv6 loopback, not listed", socks::ipv6_addr("::1"), up6.port(), ""},
      {"IPv6-mapped metadata", socks::ipv6_addr("::ffff:169.254.169.254"), 80, ""},
      {"NAT64 metadata", socks::ipv6_addr("64:ff9b::a9fe:a9fe"), 80, ""},
      {"IPv6 metadata (AWS)", socks::ipv6_addr("fd00:ec2::254"), 80, ""},
      {"numeric name spelling", socks::domain_addr("2130706433"), up.port(), ""},
      {"metadata name", socks::domain_addr("metadata.google.internal"), 80, ""},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    e.mark();
    auto rep = socks_request(e, socks::kConnect, r.addr, r.port);
    CHECK(rep.code == 0x02);
    auto v = r.target.empty() ? e.wait_any_violation() : e.wait_violation(r.target);
    INFO(e.seen_text());
    CHECK(v.has_value());
    if (v) CHECK(v->str("action") == "network-outbound");
  }
  CHECK(up.accepts() == 0);
  CHECK(up6.accepts() == 0);
}

TEST_CASE("N8: SOCKS5 ATYP IPv4 of an allowlisted address is let through", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--allow", "127.0.0.1"}));
  auto fd = tcp_connect(e.socks_port());
  REQUIRE(socks::greet(fd.get()) == 0);
  auto r = socks::request(fd.get(), socks::kConnect, socks::ipv4_addr("127.0.0.1"), up.port());
  CHECK(r.code == 0);
  send_all(fd.get(), "v4");
  CHECK(recv_n(fd.get(), 2) == "v4");
  CHECK(up.accepts() == 1);
}

TEST_CASE("N8: zero-length, NUL-containing and hostile SOCKS5 names are refused", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  std::vector<std::pair<std::string, std::string>> names{
      {"zero length", ""},
      {"NUL after an allowed name", std::string("allowed.test\0.evil.test", 23)},
      {"NUL before an allowed name", std::string("\0allowed.test", 13)},
      {"allowed name plus NUL padding", std::string("allowed.test\0\0\0", 15)},
      {"trailing space", "allowed.test "},
      {"bracketed name", "[allowed.test]"},
      {"name with a port", "allowed.test:" + port_of(up)},
      {"percent-encoded", "allowed%2etest"},
      {"non-ASCII", "allowed.te\xc5\x9bt"},
      {"255 bytes", std::string(255, 'a')},
      {"decimal IPv4", "2130706433"},
      {"short IPv4", "127.1"},
  };
  for (const auto& [what, name] : names) {
    INFO(what);
    auto fd = tcp_connect(e.socks_port());
    REQUIRE(socks::greet(fd.get()) == 0);
    auto r = socks::request(fd.get(), socks::kConnect, socks::domain_addr(name), up.port());
    INFO("reply " << r.code);
    CHECK(r.code != 0);
  }
  CHECK(up.accepts() == 0);
  // Still serving.
  auto fd = tcp_connect(e.socks_port());
  CHECK(socks::connect_name(fd.get(), "allowed.test", up.port()).code == 0);
}

TEST_CASE("N8: SOCKS5 BIND, UDP ASSOCIATE and unknown commands get 0x07", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  for (uint8_t cmd : {socks::kBind, socks::kUdpAssociate, uint8_t{0x09}, uint8_t{0x00}}) {
    INFO("command " << int(cmd));
    auto r = socks_request(e, cmd, socks::domain_addr("allowed.test"), up.port());
    CHECK(r.code == 0x07);
  }
  CHECK(up.accepts() == 0);
}

namespace {
// One SOCKS4/4a CONNECT over a fresh connection; returns the reply bytes and
// keeps the socket for relaying when `keep` is given.
std::string socks4_connect(const egressd& e, const std::string& host_or_ip, uint16_t port, unique_fd* keep = nullptr) {
  auto fd = tcp_connect(e.socks_port());
  std::string req{'\x04', '\x01'};
  req += socks::port_bytes(port);
  if (host_or_ip.find_first_not_of("0123456789.") == std::string::npos) {
    unsigned a, b, c, d;
    std::sscanf(host_or_ip.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
    req += std::string{char(a), char(b), char(c), char(d)};
    req += std::string("x\0", 2);
  } else {
    req += std::string{'\x00', '\x00', '\x00', '\x01'};
    req += std::string("x\0", 2) + host_or_ip + std::string(1, '\0');
  }
  send_all(fd.get(), req);
  std::string reply = recv_n(fd.get(), 8);
  if (keep) *keep = std::move(fd);
  return reply;
}
} // namespace

TEST_CASE("N2: SOCKS4a reaches an allowed name", "[N2][N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  unique_fd fd;
  auto reply = socks4_connect(e, "allowed.test", up.port(), &fd);
  REQUIRE(reply.size() == 8);
  CHECK(reply[1] == '\x5a');
  send_all(fd.get(), "v4a");
  CHECK(recv_n(fd.get(), 3) == "v4a");
  CHECK(up.accepts() == 1);
}

TEST_CASE("N7: SOCKS4 and SOCKS4a denials get 0x5b, are reported, and reach nothing", "[N7][N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--deny", "bad.allowed.test"}));
  struct row { std::string host; uint16_t port; std::string target; };
  std::vector<row> rows{
      {"other.test", up.port(), "other.test:" + port_of(up)},
      {"bad.allowed.test", up.port(), "bad.allowed.test:" + port_of(up)},
      {"127.0.0.1", up.port(), "127.0.0.1:" + port_of(up)},
      {"169.254.169.254", 80, "169.254.169.254:80"},
      {"2130706433", up.port(), ""},
  };
  for (const auto& r : rows) {
    INFO(r.host);
    e.mark();
    auto reply = socks4_connect(e, r.host, r.port);
    REQUIRE(reply.size() == 8);
    CHECK(reply[1] == '\x5b');
    auto v = r.target.empty() ? e.wait_any_violation() : e.wait_violation(r.target);
    INFO(e.seen_text());
    CHECK(v.has_value());
  }
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: SOCKS4 is refused when a SOCKS token is configured", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--socks-token", "s3cret"}));
  auto reply = socks4_connect(e, "allowed.test", up.port());
  REQUIRE(reply.size() == 8);
  CHECK(reply[1] == '\x5b');
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: malformed SOCKS5 requests are refused without a connection", "[N8][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args());
  std::vector<std::pair<std::string, std::string>> cases{
      {"unknown ATYP", std::string{'\x05', '\x01', '\x00', '\x07', '\x7f', '\x00', '\x00', '\x01'} +
                           socks::port_bytes(up.port())},
      {"wrong version in request", std::string{'\x04', '\x01', '\x00'} + socks::domain_addr("allowed.test") +
                                       socks::port_bytes(up.port())},
      {"non-zero RSV", std::string{'\x05', '\x01', '\x07'} + socks::domain_addr("allowed.test") +
                           socks::port_bytes(up.port())},
      {"port 0", std::string{'\x05', '\x01', '\x00'} + socks::domain_addr("allowed.test") + socks::port_bytes(0)},
  };
  for (const auto& [what, bytes] : cases) {
    INFO(what);
    auto fd = tcp_connect(e.socks_port());
    REQUIRE(socks::greet(fd.get()) == 0);
    send_all(fd.get(), bytes);
    auto reply = recv_to_eof(fd.get());
    // Refused: closed, possibly after a non-success reply.
    CHECK((reply.eof || reply.reset));
    CHECK((reply.data.size() < 2 || reply.data[1] != '\x00'));
  }
  {
    INFO("zero methods in greeting");
    auto fd = tcp_connect(e.socks_port());
    send_all(fd.get(), std::string{'\x05', '\x00'});
    auto reply = recv_to_eof(fd.get());
    CHECK((reply.eof || reply.reset));
    CHECK((reply.data.size() < 2 || static_cast<uint8_t>(reply.data[1]) == 0xff));
  }
  CHECK(up.accepts() == 0);
}

TEST_CASE("N8: the SOCKS5 success reply binds 0.0.0.0:0 and tells the sandbox nothing of egressd's own address",
          "[N8][L7][egressd]") {
  upstream up(upstream::mode::echo);
  egressd e(std_args({"--allow", "127.0.0.1"}));
  for (const std::string& addr : {socks::domain_addr("allowed.test"), socks::ipv4_addr("127.0.0.1")}) {
    auto fd = tcp_connect(e.socks_port());
    REQUIRE(socks::greet(fd.get()) == 0);
    auto r = socks::request(fd.get(), socks::kConnect, addr, up.port());
    REQUIRE(r.code == 0);
    CHECK(r.raw == std::string("\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00", 10));
    send_all(fd.get(), "ok");
    CHECK(recv_n(fd.get(), 2) == "ok");
  }
}
