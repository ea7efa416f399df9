// T2 / X1: the broker's network decision with the host's network (the
// terminal profile), without a kernel: which destinations are the host's
// own services, link-local or metadata addresses, the DNS and own-service
// exceptions, and the resolv.conf reader.
#include <catch2/catch.hpp>

#include "ccsb/broker/net_decide.hpp"

#include <netinet/in.h>

using namespace ccsb::broker;

namespace {

rule_set host_net_rules() {
  rule_set r = rule_set::none();
  r.host_net = true;
  return r;
}

endpoint ep(const char* ip, std::uint16_t port) {
  auto a = parse_ip(ip);
  REQUIRE(a);
  endpoint e;
  e.addr = *a;
  e.port = port;
  return e;
}

} // namespace

TEST_CASE("T2: loopback, unspecified, link-local and metadata addresses in every spelling", "[T2][X1]") {
  struct row {
    const char* ip;
    addr_class c;
  };
  const row rows[] = {
      {"127.0.0.1", addr_class::loopback},          {"127.255.255.254", addr_class::loopback},
      {"0.0.0.0", addr_class::unspecified},         {"0.1.2.3", addr_class::unspecified},
      {"169.254.169.254", addr_class::link_local},  {"169.254.170.2", addr_class::link_local},
      {"100.100.100.200", addr_class::metadata},    {"168.63.129.16", addr_class::metadata},
      {"::1", addr_class::loopback},                {"::", addr_class::unspecified},
      {"fe80::1", addr_class::link_local},          {"febf:ffff::1", addr_class::link_local},
      {"fd00:ec2::254", addr_class::metadata},      {"::ffff:127.0.0.1", addr_class::loopback},
      {"::ffff:169.254.169.254", addr_class::link_local}, {"::127.0.0.1", addr_class::loopback},
      {"64:ff9b::169.254.169.254", addr_class::link_local}, {"64:ff9b:1::7f00:1", addr_class::loopback},
      {"2002:7f00:1::", addr_class::loopback},      {"2002:a9fe:a9fe::1", addr_class::link_local},
      {"::ffff:0:127.0.0.1", addr_class::loopback}, {"fd00:ec2::23", addr_class::metadata},
      {"192.0.0.192", addr_class::metadata},
      // ordinary
      {"10.0.0.1", addr_class::ordinary},           {"8.8.8.8", addr_class::ordinary},
      {"100.100.100.201", addr_class::ordinary},    {"169.253.255.255", addr_class::ordinary},
      {"128.0.0.1", addr_class::ordinary},          {"fec0::1", addr_class::ordinary},
      {"fd00:ec2::253", addr_class::ordinary},      {"2001:db8::1", addr_class::ordinary},
      {"::ffff:8.8.8.8", addr_class::ordinary},     {"2002:808:808::", addr_class::ordinary},
      {"64:ff9b::808:808", addr_class::ordinary},
  };
  for (const auto& r : rows) {
    INFO(r.ip);
    auto a = parse_ip(r.ip);
    REQUIRE(a);
    CHECK(classify(*a) == r.c);
  }
}

TEST_CASE("T2: a denied destination names the address and port, an ordinary one passes", "[T2][X1]") {
  auto r = host_net_rules();
  auto v = decide_inet(r, ep("127.0.0.1", 5432), IPPROTO_TCP, false, {});
  CHECK_FALSE(v.allowed);
  CHECK(v.action == "network-outbound");
  CHECK(v.target == "127.0.0.1:5432");
  CHECK(v.reason.find("loopback") != std::string::npos);
  auto v6 = decide_inet(r, ep("::1", 80), IPPROTO_TCP, false, {});
  CHECK(v6.target == "[::1]:80");
  CHECK(decide_inet(r, ep("::ffff:169.254.169.254", 80), IPPROTO_TCP, false, {}).target == "169.254.169.254:80");
  CHECK(decide_inet(r, ep("93.184.216.34", 443), IPPROTO_TCP, false, {}).allowed);
  // The host's own LAN address (the kernel said so): denied like loopback.
  auto lan = decide_inet(r, ep("192.0.2.2", 22), IPPROTO_TCP, true, {});
  CHECK_FALSE(lan.allowed);
  CHECK(lan.reason.find("the host itself") != std::string::npos);
  // A private network never asks.
  rule_set priv = rule_set::none();
  CHECK(decide_inet(priv, ep("127.0.0.1", 3128), IPPROTO_TCP, true, {}).allowed);
}

TEST_CASE("T2: DNS reaches a resolv.conf nameserver on port 53 only", "[T2][X1]") {
  auto r = host_net_rules();
  r.dns = parse_resolv_conf("# stub\nnameserver 127.0.0.53\noptions edns0\n");
  CHECK(decide_inet(r, ep("127.0.0.53", 53), IPPROTO_UDP, false, {}).allowed);
  CHECK(decide_inet(r, ep("127.0.0.53", 53), IPPROTO_TCP, false, {}).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.53", 54), IPPROTO_UDP, false, {}).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 53), IPPROTO_UDP, false, {}).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.53", 5353), IPPROTO_UDP, false, {}).allowed);
}

namespace {
// The kernel's view while the session's own sockets alone hold their ports.
std::vector<receiver> alone(const std::vector<own_binding>& own) {
  std::vector<receiver> v;
  for (const auto& b : own) v.push_back({b.ep, b.v6only, b.inode});
  return v;
}
} // namespace

TEST_CASE("T2: the session's own bindings, exactly: address, port and protocol", "[T2][X1]") {
  auto r = host_net_rules();
  std::vector<own_binding> own{{ep("127.0.0.1", 8000), IPPROTO_TCP, false, 11}};
  CHECK(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, own, alone(own)).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 8001), IPPROTO_TCP, false, own, alone(own)).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_UDP, false, own, alone(own)).allowed); // another port space
  CHECK_FALSE(decide_inet(r, ep("127.0.0.2", 8000), IPPROTO_TCP, false, own, alone(own)).allowed); // another address
  // A bind of 127.0.0.2:5432 does not open 127.0.0.1:5432 (the host's database).
  std::vector<own_binding> side{{ep("127.0.0.2", 5432), IPPROTO_TCP, false, 12}};
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 5432), IPPROTO_TCP, false, side, alone(side)).allowed);
  // Wildcards: 0.0.0.0 covers IPv4 only; :: covers both unless IPV6_V6ONLY.
  std::vector<own_binding> any4{{ep("0.0.0.0", 9000), IPPROTO_TCP, false, 13}};
  CHECK(decide_inet(r, ep("127.0.0.1", 9000), IPPROTO_TCP, false, any4, alone(any4)).allowed);
  CHECK_FALSE(decide_inet(r, ep("::1", 9000), IPPROTO_TCP, false, any4, alone(any4)).allowed);
  std::vector<own_binding> any6{{ep("::", 9000), IPPROTO_TCP, false, 14}};
  CHECK(decide_inet(r, ep("::1", 9000), IPPROTO_TCP, false, any6, alone(any6)).allowed);
  CHECK(decide_inet(r, ep("127.0.0.1", 9000), IPPROTO_TCP, false, any6, alone(any6)).allowed);
  std::vector<own_binding> only6{{ep("::", 9000), IPPROTO_TCP, true, 15}};
  CHECK(decide_inet(r, ep("::1", 9000), IPPROTO_TCP, false, only6, alone(only6)).allowed);
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 9000), IPPROTO_TCP, false, only6, alone(only6)).allowed);
  // Port 0 is never a binding (the kernel picks; the broker records the real one).
  std::vector<own_binding> zero{{ep("127.0.0.1", 0), IPPROTO_TCP, false, 16}};
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 0), IPPROTO_TCP, false, zero, alone(zero)).allowed);
}

TEST_CASE("T2: an own binding counts only while the session's sockets alone hold it", "[T2][X1]") {
  auto r = host_net_rules();
  std::vector<own_binding> own{{ep("127.0.0.1", 8000), IPPROTO_TCP, false, 21}};
  // Nothing listens any more (the socket closed), or the kernel was not asked.
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, own, {}).allowed);
  // A host socket on the same address and port (SO_REUSEPORT), in every
  // spelling that covers the destination.
  for (const char* a : {"127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1"}) {
    INFO(a);
    std::vector<receiver> shared{{ep("127.0.0.1", 8000), false, 21}, {ep(a, 8000), false, 99}};
    auto v = decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, own, shared);
    CHECK_FALSE(v.allowed);
    CHECK(v.target == "127.0.0.1:8000");
    CHECK_THAT(v.reason, Catch::Contains("did not bind"));
    // The same socket after the session's closed: replaced.
    CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, own,
                            std::vector<receiver>{{ep(a, 8000), false, 99}}).allowed);
  }
  // Sockets that cannot take this destination do not count: another
  // address, an IPv6-only wildcard for an IPv4 destination.
  std::vector<receiver> beside{{ep("127.0.0.1", 8000), false, 21}, {ep("127.0.0.2", 8000), false, 98},
                               {ep("::", 8000), true, 97}, {ep("::1", 8000), false, 96}};
  CHECK(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, own, beside).allowed);
  // Two sockets of the session sharing a port between them stay its own.
  std::vector<own_binding> two{{ep("127.0.0.1", 8000), IPPROTO_TCP, false, 21},
                               {ep("127.0.0.1", 8000), IPPROTO_TCP, false, 22}};
  CHECK(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, two, alone(two)).allowed);
  // An inode of a UDP binding does not make a TCP listener the session's.
  std::vector<own_binding> mixed{{ep("127.0.0.1", 8000), IPPROTO_TCP, false, 21},
                                 {ep("127.0.0.1", 8000), IPPROTO_UDP, false, 99}};
  CHECK_FALSE(decide_inet(r, ep("127.0.0.1", 8000), IPPROTO_TCP, false, mixed,
                          std::vector<receiver>{{ep("127.0.0.1", 8000), false, 21}, {ep("127.0.0.1", 8000), false, 99}})
                  .allowed);
}

TEST_CASE("T2: abstract Unix names only when the session bound them", "[T2][X1]") {
  auto r = host_net_rules();
  auto v = decide_abstract(r, std::string("/tmp/.X11-unix/X0"), false);
  CHECK_FALSE(v.allowed);
  CHECK(v.target == "unix:@/tmp/.X11-unix/X0");
  CHECK(decide_abstract(r, "mine", true).allowed);
  CHECK(decide_abstract(rule_set::none(), "anything", false).allowed); // private network: its own namespace
  CHECK(decide_abstract(r, std::string("a\0b", 3), false).target == "unix:@a@b");
}

TEST_CASE("T2: sockaddr bytes and resolv.conf lines are read strictly", "[T2][X1]") {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(443);
  in.sin_addr.s_addr = htonl(0x7f000001);
  auto e = endpoint_of(&in, sizeof in);
  REQUIRE(e);
  CHECK(to_string(*e) == "127.0.0.1:443");
  CHECK(is_v4(*e));
  CHECK_FALSE(endpoint_of(&in, sizeof in - 1));
  CHECK_FALSE(endpoint_of(&in, 1));
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(80);
  in6.sin6_addr = in6addr_loopback;
  CHECK(to_string(*endpoint_of(&in6, sizeof in6)) == "[::1]:80");
  CHECK_FALSE(endpoint_of(&in6, sizeof in6 - 4));
  sockaddr_in bad = in;
  bad.sin_family = AF_UNIX;
  CHECK_FALSE(endpoint_of(&bad, sizeof bad));

  auto ns = parse_resolv_conf("nameserver\t10.0.0.2 # comment\n#nameserver 127.0.0.1\nnameserver fe80::1%eth0\n"
                              "nameserverX 1.1.1.1\nnameserver not-an-ip\nnameserver 127.0.0.53\r\n  nameserver 9.9.9.9\n"
                              "search example\nnameserver");
  REQUIRE(ns.size() == 3);
  CHECK(ns[0] == *parse_ip("10.0.0.2"));
  CHECK(ns[1] == *parse_ip("fe80::1"));
  CHECK(ns[2] == *parse_ip("127.0.0.53"));
}

TEST_CASE("T2: --broker-net survives ccsb-init's arguments, strictly", "[T2][X1]") {
  rule_set r;
  r.roots = {"/w"};
  r.host_net = true;
  auto args = to_args(r);
  REQUIRE(args.size() >= 2);
  CHECK(args[args.size() - 2] == "--broker-net");
  CHECK(args.back() == "host");
  rule_set back = rule_set::none();
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) REQUIRE(parse_arg(back, args[i], args[i + 1]));
  CHECK(back == r);
  // A private network writes nothing (the dispatch goldens stay as they are).
  rule_set priv;
  for (const auto& a : to_args(priv)) CHECK(a != "--broker-net");
  rule_set x = rule_set::none();
  auto e = parse_arg(x, "--broker-net", "open");
  REQUIRE_FALSE(e);
  CHECK(e.err().field == "--broker-net");
}

TEST_CASE("T2 N8: every endpoint of the shared metadata list is denied to the terminal, in every spelling", "[T2][N8]") {
  rule_set r;
  r.host_net = true;
  for (const auto& m : ccsb::net::kMetadataV4) {
    const ip16 a = v4_mapped(m[0], m[1], m[2], m[3]);
    INFO(to_string(endpoint{a, 80}));
    // 169.254.0.0/16 is reported as link-local, the rest as metadata.
    CHECK(classify(a) == (m[0] == 169 && m[1] == 254 ? addr_class::link_local : addr_class::metadata));
    CHECK_FALSE(decide_inet(r, endpoint{a, 80}, IPPROTO_TCP, false, {}).allowed);
    ip16 nat64{0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, m[0], m[1], m[2], m[3]};
    CHECK_FALSE(decide_inet(r, endpoint{nat64, 80}, IPPROTO_TCP, false, {}).allowed);
  }
  for (const auto& m : ccsb::net::kMetadataV6) {
    CHECK(classify(m) == addr_class::metadata);
    CHECK_FALSE(decide_inet(r, endpoint{m, 80}, IPPROTO_TCP, false, {}).allowed);
  }
}
