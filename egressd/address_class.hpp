// egressd/address_class.hpp — classify a resolved address (N8).
//
// Pure functions, no I/O. Every address a target resolves to goes through
// classify(); anything that is not a plain public unicast address is denied
// unless an --allow-upstream range covers it. Embeddings that smuggle an IPv4
// address inside IPv6 (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are
// denied outright: a forward proxy never needs them and they bypass IPv4
// range checks.
#pragma once

#include "ccsb/result.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace egressd {

struct ip_address {
  bool v6{false};
  std::array<std::uint8_t, 16> b{}; // IPv4 in b[0..3]

  static ip_address v4(std::uint8_t a, std::uint8_t b1, std::uint8_t c, std::uint8_t d) noexcept {
    ip_address x;
    x.b = {a, b1, c, d};
    return x;
  }
  static ip_address from_bytes(const std::uint8_t* p, bool is_v6) noexcept;
  std::string str() const;
  friend bool operator==(const ip_address&, const ip_address&) = default;
};

// Parses a canonical dotted quad or an IPv6 literal (bare or bracketed).
ccsb::result<ip_address> parse_ip(std::string_view s);

enum class addr_class : std::uint8_t {
  public_unicast, // allowed
  loopback,
  unspecified,
  link_local,
  multicast,
  broadcast,
  private_net,  // RFC 1918, ULA fc00::/7, site-local fec0::/10
  cgnat,        // 100.64.0.0/10
  metadata,     // cloud metadata endpoints
  reserved,     // documentation, benchmarking, IETF, 240/4, discard
  nat64,        // 64:ff9b::/96, 64:ff9b:1::/48
  six_to_four,  // 2002::/16
  teredo,       // 2001::/32
  ipv4_mapped,  // ::ffff:0:0/96 and ::ffff:0:0:0/96
  ipv4_compatible, // ::/96 other than :: and ::1
  self,         // one of this host's own addresses
};

std::string_view to_string(addr_class c) noexcept;

addr_class classify(const ip_address& a) noexcept;

struct cidr {
  ip_address net;
  unsigned prefix{0};
  bool contains(const ip_address& a) const noexcept;
};

// "127.0.0.0/8", "::1/128", or a bare address (full length). Host bits must
// be zero.
ccsb::result<cidr> parse_cidr(std::string_view s);

// The whole address check: allow-upstream first, then the class table, then
// the proxy's own addresses. Returns an empty string when allowed, else a
// reason such as "address: link-local 169.254.169.254".
class address_policy {
public:
  std::vector<cidr> allow_upstream;
  std::vector<ip_address> self;
  // The proxy's own listeners: never a target, whatever allow_upstream says
  // (a tunnel into egressd itself would only loop).
  std::vector<std::pair<ip_address, std::uint16_t>> listeners;

  std::string check(const ip_address& a) const;
  std::string check(const ip_address& a, std::uint16_t port) const;
};

} // namespace egressd
