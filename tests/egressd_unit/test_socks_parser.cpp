#include "socks_parser.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace egressd::socks;

namespace {
std::string bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += static_cast<char>(b);
  return s;
}
} // namespace

TEST_CASE("N1: SOCKS5 greeting picks no-auth, or user/pass when a token is set", "[N1]") {
  std::uint8_t m = 0;
  auto r = parse_greeting(bytes({5, 1, 0}), false, m);
  CHECK(r.st == status::good);
  CHECK(r.consumed == 3);
  CHECK(m == kMethodNoAuth);
  r = parse_greeting(bytes({5, 2, 0, 2}), true, m);
  CHECK(r.st == status::good);
  CHECK(m == kMethodUserPass);
  r = parse_greeting(bytes({5, 1, 0}), true, m);
  CHECK(r.st == status::good);
  CHECK(m == kMethodNone);
  CHECK(parse_greeting(bytes({5, 2, 0}), false, m).st == status::need_more);
  CHECK(parse_greeting(bytes({5}), false, m).st == status::need_more);
}

TEST_CASE("N1: other SOCKS versions are refused", "[N1]") {
  std::uint8_t m = 0;
  auto r = parse_greeting(bytes({4, 1, 0, 80, 127, 0, 0, 1, 0}), false, m);
  CHECK(r.st == status::bad);
  CHECK(r.reason == "socks4"); // handed to parse_socks4_request
  CHECK(parse_greeting("GET / HTTP/1.1\r\n", false, m).st == status::bad);
  CHECK(parse_greeting(bytes({5, 0}), false, m).st == status::bad);
}

TEST_CASE("N8: SOCKS5 request address types all yield a host to check", "[N8]") {
  request req;
  auto r = parse_request(bytes({5, 1, 0, 1, 169, 254, 169, 254, 0, 80}), req);
  REQUIRE(r.st == status::good);
  REQUIRE(req.host);
  CHECK(req.host->str() == "169.254.169.254");
  CHECK(req.port == 80);

  std::string d = bytes({5, 1, 0, 3, 11}) + "Example.COM" + bytes({1, 187});
  r = parse_request(d, req);
  REQUIRE(r.st == status::good);
  CHECK(r.consumed == d.size());
  REQUIRE(req.host);
  CHECK(req.host->str() == "example.com");
  CHECK(req.port == 443);

  std::string v6 = bytes({5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 22});
  r = parse_request(v6, req);
  REQUIRE(r.st == status::good);
  CHECK(req.host->str() == "::1");

  // A domain that does not normalise is kept raw and left unset (denied later).
  std::string bad = bytes({5, 1, 0, 3, 10}) + "2852039166" + bytes({0, 80});
  r = parse_request(bad, req);
  REQUIRE(r.st == status::good);
  CHECK_FALSE(req.host);
  CHECK(req.raw_host == "2852039166");
}

TEST_CASE("N1: BIND and UDP ASSOCIATE get reply 0x07, unknown address types 0x08", "[N1]") {
  request req;
  auto r = parse_request(bytes({5, 2, 0, 1, 1, 2, 3, 4, 0, 80}), req);
  CHECK(r.st == status::bad);
  CHECK(r.reply == command_not_supported);
  r = parse_request(bytes({5, 3, 0, 1, 1, 2, 3, 4, 0, 80}), req);
  CHECK(r.reply == command_not_supported);
  r = parse_request(bytes({5, 1, 0, 9, 1, 2, 3, 4, 0, 80}), req);
  CHECK(r.st == status::bad);
  CHECK(r.reply == address_type_not_supported);
  r = parse_request(bytes({5, 1, 0, 1, 1, 2, 3, 4, 0, 0}), req);
  CHECK(r.st == status::bad); // port 0
}

TEST_CASE("N1: username/password auth parses and compares in constant time", "[N1]") {
  std::string_view u, p;
  std::string msg = bytes({1, 3}) + "bob" + bytes({6}) + "secret";
  auto r = parse_auth(msg, u, p);
  REQUIRE(r.st == status::good);
  CHECK(u == "bob");
  CHECK(p == "secret");
  CHECK(parse_auth(msg.substr(0, 7), u, p).st == status::need_more);
  CHECK(constant_time_equals("secret", "secret"));
  CHECK_FALSE(constant_time_equals("secret", "secreT"));
  CHECK_FALSE(constant_time_equals("secret", "secret2"));
  CHECK_FALSE(constant_time_equals("", "x"));
}

TEST_CASE("N8: SOCKS5 parsing does not depend on how bytes are split", "[N8]") {
  std::string d = bytes({5, 1, 0, 3, 11}) + "example.com" + bytes({1, 187});
  for (std::size_t cut = 0; cut < d.size(); ++cut) {
    request req;
    CHECK(parse_request(d.substr(0, cut), req).st == status::need_more);
  }
}

TEST_CASE("N2: SOCKS4a and SOCKS4 CONNECT requests yield the same host to check", "[N2][N8]") {
  request req;
  std::string v4a = bytes({4, 1, 0, 22, 0, 0, 0, 1}) + std::string("git\0Git.Example.COM\0", 20);
  auto r = parse_socks4_request(v4a, req);
  REQUIRE(r.st == status::good);
  CHECK(r.consumed == v4a.size());
  CHECK(req.atyp == 3);
  CHECK(req.port == 22);
  REQUIRE(req.host);
  CHECK(req.host->str() == "git.example.com");
  // The result does not depend on how the bytes arrive.
  for (std::size_t cut = 0; cut < v4a.size(); ++cut) {
    INFO(cut);
    CHECK(parse_socks4_request(v4a.substr(0, cut), req).st == status::need_more);
  }
  std::string v4 = bytes({4, 1, 0, 80, 169, 254, 169, 254, 0});
  r = parse_socks4_request(v4, req);
  REQUIRE(r.st == status::good);
  REQUIRE(req.host);
  CHECK(req.host->str() == "169.254.169.254");
  CHECK(req.atyp == 1);
  // A malformed 4a name parses but carries no host: the dial denies it.
  r = parse_socks4_request(bytes({4, 1, 0, 80, 0, 0, 0, 9, 0}) + std::string("0x7f.1\0", 7), req);
  REQUIRE(r.st == status::good);
  CHECK_FALSE(req.host);
}

TEST_CASE("N8: hostile SOCKS4 requests are rejected", "[N8]") {
  request req;
  auto bind = parse_socks4_request(bytes({4, 2, 0, 80, 1, 2, 3, 4, 0}), req);
  CHECK(bind.st == status::bad);
  CHECK(bind.reply == kSocks4Rejected);
  CHECK(parse_socks4_request(bytes({4, 1, 0, 0, 1, 2, 3, 4, 0}), req).st == status::bad); // port 0
  std::string long_uid = bytes({4, 1, 0, 80, 1, 2, 3, 4}) + std::string(300, 'u');
  CHECK(parse_socks4_request(long_uid, req).st == status::bad);
  std::string long_host = bytes({4, 1, 0, 80, 0, 0, 0, 1, 0}) + std::string(300, 'h');
  CHECK(parse_socks4_request(long_host, req).st == status::bad);
  CHECK(make_socks4_reply(kSocks4Rejected) == bytes({0, 0x5b, 0, 0, 0, 0, 0, 0}));
}

TEST_CASE("N7: SOCKS requests refused by the parser keep the target they named", "[N7][N8]") {
  request req;
  auto r = parse_request(bytes({5, 2, 0, 1, 169, 254, 169, 254, 0, 80}), req); // BIND
  CHECK(r.st == status::bad);
  CHECK(r.target_named);
  REQUIRE(req.host);
  CHECK(req.host->str() == "169.254.169.254");
  CHECK(req.port == 80);
  r = parse_request(bytes({5, 3, 0, 3, 8}) + "dns.test" + bytes({0, 53}), req); // UDP ASSOCIATE
  CHECK(r.target_named);
  CHECK(req.raw_host == "dns.test");
  CHECK(req.port == 53);
  r = parse_request(bytes({5, 1, 0, 1, 1, 2, 3, 4, 0, 0}), req); // port 0
  CHECK(r.reason == "port_zero");
  CHECK(r.target_named);
  r = parse_request(bytes({5, 1, 7, 1, 1, 2, 3, 4, 0, 80}), req); // reserved byte
  CHECK(r.reason == "reserved_byte_not_zero");
  CHECK(r.target_named);
  CHECK(req.port == 80);
  // Nothing to name: an unknown address type, a wrong version.
  CHECK_FALSE(parse_request(bytes({5, 1, 0, 9, 1, 2, 3, 4, 0, 80}), req).target_named);
  CHECK_FALSE(parse_request(bytes({4, 1, 0, 1, 1, 2, 3, 4, 0, 80}), req).target_named);
  // SOCKS4 and 4a BIND.
  r = parse_socks4_request(bytes({4, 2, 0, 80, 169, 254, 169, 254, 0}), req);
  CHECK(r.st == status::bad);
  CHECK(r.target_named);
  CHECK(req.host->str() == "169.254.169.254");
  r = parse_socks4_request(bytes({4, 2, 1, 187, 0, 0, 0, 1, 0}) + std::string("a.test\0", 7), req);
  CHECK(r.target_named);
  CHECK(req.raw_host == "a.test");
  CHECK(req.port == 443);
  // A user id over 255 bytes: the fixed header still names the address (issue 30 item 3).
  CHECK(parse_socks4_request(bytes({4, 1, 0, 80, 1, 2, 3, 4}) + std::string(300, 'u'), req).target_named);
  CHECK(req.raw_host == "1.2.3.4");
  CHECK(req.port == 80);
  // SOCKS4a: 0.0.0.x names nothing; a host over 255 bytes is named by its first 256.
  CHECK_FALSE(parse_socks4_request(bytes({4, 1, 0, 80, 0, 0, 0, 1}) + std::string(300, 'u'), req).target_named);
  r = parse_socks4_request(bytes({4, 1, 0, 80, 0, 0, 0, 1, 0}) + std::string(300, 'h'), req);
  CHECK(r.target_named);
  CHECK(req.raw_host == std::string(256, 'h'));
}
