#include "address_class.hpp"

#include "ccsb/net/metadata.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace egressd;

namespace {
std::string check(const char* ip, const address_policy& p = {}) {
  auto a = parse_ip(ip);
  REQUIRE(a);
  return p.check(*a);
}
addr_class cls(const char* ip) {
  auto a = parse_ip(ip);
  REQUIRE(a);
  return classify(*a);
}
} // namespace

TEST_CASE("N8: resolved addresses are classified by range", "[N8]") {
  struct row {
    const char* ip;
    addr_class want;
  };
  const row rows[] = {
      {"127.0.0.1", addr_class::loopback},
      {"127.255.0.9", addr_class::loopback},
      {"0.0.0.0", addr_class::unspecified},
      {"10.1.2.3", addr_class::private_net},
      {"172.16.0.1", addr_class::private_net},
      {"172.31.255.255", addr_class::private_net},
      {"192.168.1.1", addr_class::private_net},
      {"100.64.0.1", addr_class::cgnat},
      {"100.127.255.255", addr_class::cgnat},
      {"169.254.1.1", addr_class::link_local},
      {"169.254.169.254", addr_class::metadata},
      {"169.254.170.2", addr_class::metadata},
      {"168.63.129.16", addr_class::metadata},
      {"100.100.100.200", addr_class::metadata},
      {"224.0.0.1", addr_class::multicast},
      {"239.255.255.250", addr_class::multicast},
      {"255.255.255.255", addr_class::broadcast},
      {"240.0.0.1", addr_class::reserved},
      {"::1", addr_class::loopback},
      {"::", addr_class::unspecified},
      {"fe80::1", addr_class::link_local},
      {"febf::1", addr_class::link_local},
      {"fc00::1", addr_class::private_net},
      {"fd12:3456::1", addr_class::private_net},
      {"ff02::1", addr_class::multicast},
      {"::ffff:169.254.169.254", addr_class::ipv4_mapped},
      {"::ffff:93.184.216.34", addr_class::ipv4_mapped},
      {"::169.254.169.254", addr_class::ipv4_compatible},
      {"64:ff9b::a9fe:a9fe", addr_class::nat64},
      {"64:ff9b:1::1", addr_class::nat64},
      {"2002:a9fe:a9fe::", addr_class::six_to_four},
      {"2001:0:4136:e378::1", addr_class::teredo},
      {"fd00:ec2::254", addr_class::metadata},
      {"fd00:ec2::23", addr_class::metadata},
      {"2001:db8::1", addr_class::reserved},
      {"93.184.216.34", addr_class::public_unicast},
      {"8.8.8.8", addr_class::public_unicast},
      {"2606:4700::1111", addr_class::public_unicast},
  };
  for (const auto& r : rows) {
    INFO(r.ip);
    CHECK(cls(r.ip) == r.want);
  }
}

TEST_CASE("N8: a denied address names its class and the address", "[N8]") {
  CHECK(check("169.254.169.254") == "address: metadata 169.254.169.254");
  CHECK(check("169.254.1.1") == "address: link-local 169.254.1.1");
  CHECK(check("127.0.0.1") == "address: loopback 127.0.0.1");
  CHECK(check("64:ff9b::a9fe:a9fe") == "address: nat64 64:ff9b::a9fe:a9fe");
  CHECK(check("93.184.216.34").empty());
}

TEST_CASE("N8: --allow-upstream lets a covered range through and nothing else", "[N8]") {
  address_policy p;
  auto c = parse_cidr("127.0.0.0/8");
  REQUIRE(c);
  p.allow_upstream.push_back(*c);
  CHECK(check("127.0.0.1", p).empty());
  CHECK(check("127.9.9.9", p).empty());
  CHECK(check("169.254.169.254", p) == "address: metadata 169.254.169.254");
  CHECK(check("::1", p) == "address: loopback ::1");
  CHECK(check("::ffff:127.0.0.1", p) == "address: ipv4-mapped ::ffff:127.0.0.1");
}

TEST_CASE("N8: the proxy's own addresses are denied", "[N8]") {
  address_policy p;
  p.self.push_back(*parse_ip("93.184.216.34"));
  CHECK(check("93.184.216.34", p) == "address: self 93.184.216.34");
  CHECK(check("93.184.216.35", p).empty());
}

TEST_CASE("N8: CIDR parsing is strict", "[N8]") {
  CHECK(parse_cidr("127.0.0.0/8"));
  CHECK(parse_cidr("::1/128"));
  CHECK(parse_cidr("10.0.0.1"));
  CHECK(parse_cidr("fd00::/8"));
  CHECK_FALSE(parse_cidr("127.0.0.1/8"));  // host bits set
  CHECK_FALSE(parse_cidr("127.0.0.0/33"));
  CHECK_FALSE(parse_cidr("127.0.0.0/"));
  CHECK_FALSE(parse_cidr("127.0.0.0/08"));
  CHECK_FALSE(parse_cidr("127.1/8"));
  CHECK_FALSE(parse_cidr("0x7f.0.0.0/8"));
  CHECK_FALSE(parse_cidr("localhost/8"));
  CHECK_FALSE(parse_cidr(""));
}

TEST_CASE("N8: egressd's own listeners are never a target, even inside --allow-upstream", "[N8]") {
  address_policy p;
  p.allow_upstream.push_back(*parse_cidr("127.0.0.0/8"));
  p.listeners.emplace_back(*parse_ip("127.0.0.1"), std::uint16_t{3128});
  CHECK(p.check(*parse_ip("127.0.0.1"), 3128) == "address: self 127.0.0.1:3128 (egressd listener)");
  CHECK(p.check(*parse_ip("127.0.0.1"), 3129).empty());
  CHECK(p.check(*parse_ip("127.0.0.2"), 3128).empty());
}

TEST_CASE("N8 T2: every endpoint of the shared metadata list is metadata to egressd", "[N8][T2]") {
  for (const auto& m : ccsb::net::kMetadataV4) {
    auto a = ip_address::v4(m[0], m[1], m[2], m[3]);
    INFO(a.str());
    CHECK(classify(a) == addr_class::metadata);
  }
  for (const auto& m : ccsb::net::kMetadataV6) {
    auto a = ip_address::from_bytes(m.data(), true);
    INFO(a.str());
    CHECK(classify(a) == addr_class::metadata);
  }
}
