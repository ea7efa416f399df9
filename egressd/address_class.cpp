#include "address_class.hpp"

#include "ccsb/host.hpp"
#include "ccsb/net/metadata.hpp"

#include <algorithm>
#include <cstring>

namespace egressd {

ip_address ip_address::from_bytes(const std::uint8_t* p, bool is_v6) noexcept {
  ip_address a;
  a.v6 = is_v6;
  std::memcpy(a.b.data(), p, is_v6 ? 16 : 4);
  return a;
}

std::string ip_address::str() const {
  static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char buf[48];
  if (v6 && std::memcmp(b.data(), mapped, 12) == 0) // RFC 5952 section 5
    return "::ffff:" + std::string(buf, ccsb::format_ipv4(b.data() + 12, buf));
  std::size_t n = v6 ? ccsb::format_ipv6(b.data(), buf) : ccsb::format_ipv4(b.data(), buf);
  return std::string(buf, n);
}

ccsb::result<ip_address> parse_ip(std::string_view s) {
  auto bad = [&] { return ccsb::make_error(ccsb::errc::invalid_host, "address", "not an IP address: '" + std::string(s) + "'"); };
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  ip_address a;
  if (s.find(':') != std::string_view::npos) {
    if (!ccsb::parse_ipv6(s, a.b.data())) return bad();
    a.v6 = true;
    return a;
  }
  if (!ccsb::parse_ipv4_strict(s, a.b.data())) return bad();
  return a;
}

std::string_view to_string(addr_class c) noexcept {
  switch (c) {
  case addr_class::public_unicast: return "public";
  case addr_class::loopback: return "loopback";
  case addr_class::unspecified: return "unspecified";
  case addr_class::link_local: return "link-local";
  case addr_class::multicast: return "multicast";
  case addr_class::broadcast: return "broadcast";
  case addr_class::private_net: return "private";
  case addr_class::cgnat: return "cgnat";
  case addr_class::metadata: return "metadata";
  case addr_class::reserved: return "reserved";
  case addr_class::nat64: return "nat64";
  case addr_class::six_to_four: return "6to4";
  case addr_class::teredo: return "teredo";
  case addr_class::ipv4_mapped: return "ipv4-mapped";
  case addr_class::ipv4_compatible: return "ipv4-compatible";
  case addr_class::self: return "self";
  }
  return "unknown";
}

namespace {

bool prefix_match(const std::uint8_t* a, const std::uint8_t* net, unsigned bits) noexcept {
  unsigned full = bits / 8, rest = bits % 8;
  if (std::memcmp(a, net, full) != 0) return false;
  if (rest == 0) return true;
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (net[full] & mask);
}

struct range4 {
  std::uint8_t net[4];
  unsigned bits;
  addr_class cls;
};
struct range6 {
  std::uint8_t net[16];
  unsigned bits;
  addr_class cls;
};

// Most specific entries first: the first match decides (after the
// metadata endpoints, see classify()).
constexpr range4 kV4[] = {
    {{255, 255, 255, 255}, 32, addr_class::broadcast},
    {{0, 0, 0, 0}, 8, addr_class::unspecified},
    {{10, 0, 0, 0}, 8, addr_class::private_net},
    {{100, 64, 0, 0}, 10, addr_class::cgnat},
    {{127, 0, 0, 0}, 8, addr_class::loopback},
    {{169, 254, 0, 0}, 16, addr_class::link_local},
    {{172, 16, 0, 0}, 12, addr_class::private_net},
    {{192, 0, 0, 0}, 24, addr_class::reserved},
    {{192, 0, 2, 0}, 24, addr_class::reserved},
    {{192, 88, 99, 0}, 24, addr_class::reserved},
    {{192, 168, 0, 0}, 16, addr_class::private_net},
    {{198, 18, 0, 0}, 15, addr_class::reserved},
    {{198, 51, 100, 0}, 24, addr_class::reserved},
    {{203, 0, 113, 0}, 24, addr_class::reserved},
    {{224, 0, 0, 0}, 4, addr_class::multicast},
    {{240, 0, 0, 0}, 4, addr_class::reserved},
};

constexpr range6 kV6[] = {
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 128, addr_class::unspecified},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, addr_class::loopback},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}, 96, addr_class::ipv4_mapped},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, 96, addr_class::ipv4_mapped}, // SIIT
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96, addr_class::ipv4_compatible},
    {{0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96, addr_class::nat64},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 48, addr_class::nat64},
    {{0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 64, addr_class::reserved}, // discard
    {{0x20, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32, addr_class::teredo},
    {{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32, addr_class::reserved}, // documentation
    {{0x20, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 23, addr_class::reserved}, // IETF protocol assignments
    {{0x20, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 16, addr_class::six_to_four},
    {{0x3f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 20, addr_class::reserved}, // documentation
    {{0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 7, addr_class::private_net},
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 10, addr_class::link_local},
    {{0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 10, addr_class::private_net},
    {{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 8, addr_class::multicast},
};

} // namespace

addr_class classify(const ip_address& a) noexcept {
  // The metadata endpoints first (ccsb/net/metadata.hpp, shared with the
  // broker's T2 rules): more specific than any range below.
  if (!a.v6 && ccsb::net::is_metadata_v4(a.b[0], a.b[1], a.b[2], a.b[3])) return addr_class::metadata;
  if (a.v6 && ccsb::net::is_metadata_v6(a.b)) return addr_class::metadata;
  if (!a.v6) {
    for (const auto& r : kV4)
      if (prefix_match(a.b.data(), r.net, r.bits)) return r.cls;
    return addr_class::public_unicast;
  }
  for (const auto& r : kV6)
    if (prefix_match(a.b.data(), r.net, r.bits)) return r.cls;
  // Only 2000::/3 is global unicast; everything else is unassigned.
  if ((a.b[0] & 0xe0) != 0x20) return addr_class::reserved;
  return addr_class::public_unicast;
}

bool cidr::contains(const ip_address& a) const noexcept {
  if (a.v6 != net.v6) return false;
  return prefix_match(a.b.data(), net.b.data(), prefix);
}

ccsb::result<cidr> parse_cidr(std::string_view s) {
  auto bad = [&](std::string why) {
    return ccsb::make_error(ccsb::errc::invalid_argument, "allowUpstream",
                            "'" + std::string(s) + "': " + why + " (expected e.g. 127.0.0.0/8 or ::1/128)");
  };
  std::string_view addr = s, len;
  if (auto slash = s.find('/'); slash != std::string_view::npos) {
    addr = s.substr(0, slash);
    len = s.substr(slash + 1);
  }
  auto ip = parse_ip(addr);
  if (!ip) return bad("not an IP address");
  unsigned max = ip->v6 ? 128 : 32;
  unsigned bits = max;
  if (!len.empty() || s.find('/') != std::string_view::npos) {
    if (len.empty() || len.size() > 3 || (len.size() > 1 && len[0] == '0')) return bad("bad prefix length");
    bits = 0;
    for (char c : len) {
      if (c < '0' || c > '9') return bad("bad prefix length");
      bits = bits * 10 + static_cast<unsigned>(c - '0');
    }
    if (bits > max) return bad("prefix length too long");
  }
  cidr c{*ip, bits};
  // Host bits must be zero: "127.0.0.1/8" is a typo for "127.0.0.0/8".
  for (unsigned i = bits; i < max; ++i)
    if (c.net.b[i / 8] & (0x80 >> (i % 8))) return bad("host bits set after the prefix");
  return c;
}

std::string address_policy::check(const ip_address& a) const {
  for (const auto& c : allow_upstream)
    if (c.contains(a)) return {};
  addr_class cls = classify(a);
  if (cls == addr_class::public_unicast &&
      std::find(self.begin(), self.end(), a) != self.end())
    cls = addr_class::self;
  if (cls == addr_class::public_unicast) return {};
  std::string out = "address: ";
  out += to_string(cls);
  out += ' ';
  out += a.str();
  return out;
}

std::string address_policy::check(const ip_address& a, std::uint16_t port) const {
  for (const auto& [ip, p] : listeners)
    if (p == port && (ip == a || (ip.v6 == a.v6 && classify(ip) == addr_class::unspecified)))
      return "address: self " + a.str() + ":" + std::to_string(port) + " (egressd listener)";
  return check(a);
}

} // namespace egressd
