// ccsb/broker/net_decide.hpp — the network decision of the X1 broker for a
// profile whose network is the host's (T2, the terminal profile). Pure: no
// I/O, no kernel. The broker in ccsb-init (init/broker/notify_loop.cpp)
// reads the destination of a connect, sendto or sendmsg once from the
// caller's memory, asks the kernel one fact (is this one of the host's own
// addresses?) and asks this header:
//
//   endpoint_of(sockaddr bytes)                                   -> optional<endpoint>
//   decide_inet(rules, destination, protocol, host_local, own, receivers) -> verdict
//   parse_resolv_conf(text)                                        -> the nameservers
//
// T2 says the terminal's network is open except "the host's own loopback
// services, link-local and metadata addresses and abstract Unix sockets".
// With the host's network, a destination is denied (S6 action
// `network-outbound`, target `ADDR:PORT`, IPv6 as `[ADDR]:PORT`) when it is
//  * loopback: 127.0.0.0/8, ::1;
//  * unspecified: 0.0.0.0/8, :: (a connect there reaches the host itself);
//  * link-local: 169.254.0.0/16 (the cloud metadata services of AWS, GCP,
//    Azure, OpenStack, DigitalOcean, Oracle live at 169.254.169.254, ECS's
//    at 169.254.170.2), fe80::/10;
//  * metadata outside link-local: fd00:ec2::254 and fd00:ec2::23 (AWS IPv6),
//    100.100.100.200 (Alibaba), 168.63.129.16 (Azure's WireServer),
//    192.0.0.192 (Oracle Cloud Classic) — the one list in
//    ccsb/net/metadata.hpp, which egressd's N8 classes use too;
//  * any address of the host itself (`host_local`, the broker asks the
//    kernel): a service bound to 0.0.0.0 answers on the host's LAN address
//    too, through the loopback device and past a firewall that guards it
//    from outside;
//  * an IPv4 address carried in IPv6 that would be denied itself:
//    v4-mapped ::ffff:a.b.c.d, SIIT ::ffff:0:a.b.c.d, v4-compatible
//    ::a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
//    2002:AABB:CCDD::/48.
// Two exceptions, both narrow:
//  * DNS: port 53 of a nameserver the sandbox's /etc/resolv.conf names (the
//    host's file, bound read-only), e.g. systemd-resolved's 127.0.0.53 or
//    Azure's 168.63.129.16; any protocol (DNS uses UDP and TCP);
//  * the session's own services: a destination an earlier bind of the
//    session (through the broker) holds, same protocol (TCP and UDP ports
//    are separate spaces) and same port, at the same address or a wildcard
//    bind that covers it — and only while the session's sockets alone hold
//    it: every socket of the host's network that would receive the
//    connection (`receivers`, the broker asks the kernel at each connect:
//    TCP listeners, bound UDP sockets, any address that covers the
//    destination) is one the session bound (same socket inode), and there
//    is at least one. A host service of the same uid sharing the port
//    (SO_REUSEPORT, or SO_REUSEADDR for UDP, bound before or after the
//    session's socket, in any address spelling that covers it), or one that
//    took the port after the session's socket closed, makes it a host
//    service again. A terminal user's `python -m http.server` and `curl
//    localhost:8000` keep working.
// A profile whose network is private (dispatch, spec) never asks: its
// loopback is the sandbox's own.
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/net/metadata.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::broker {

// An IP address in IPv6 form; IPv4 as ::ffff:a.b.c.d.
using ip16 = std::array<std::uint8_t, 16>;

struct endpoint {
  ip16 addr{};
  std::uint16_t port{0};
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

// A socket the session bound through the broker (the address it holds).
struct own_binding {
  endpoint ep;       // a wildcard bind has the unspecified address
  int protocol{0};   // IPPROTO_TCP, IPPROTO_UDP, ...
  bool v6only{false}; // an IPv6 wildcard bind that does not cover IPv4
  std::uint64_t inode{0}; // the socket's inode (sock_diag's idiag_inode)
  friend bool operator==(const own_binding&, const own_binding&) = default;
};

// A socket of the host's network namespace that may receive a connection
// (a TCP listener, a bound UDP socket), as the kernel lists it.
struct receiver {
  endpoint ep;        // its local address and port
  bool v6only{false}; // an IPv6 socket that takes no IPv4
  std::uint64_t inode{0};
  friend bool operator==(const receiver&, const receiver&) = default;
};

enum class addr_class { ordinary, loopback, unspecified, link_local, metadata };

constexpr std::string_view to_string(addr_class c) noexcept {
  switch (c) {
  case addr_class::ordinary: return "ordinary";
  case addr_class::loopback: return "loopback";
  case addr_class::unspecified: return "unspecified";
  case addr_class::link_local: return "link-local";
  case addr_class::metadata: return "metadata";
  }
  return "ordinary";
}

// The IPv4-mapped IPv6 form (::ffff:a.b.c.d) every IPv4 endpoint is kept in.
constexpr ip16 v4_mapped(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

namespace detail {

constexpr bool prefix(const ip16& a, std::span<const std::uint8_t> p, unsigned bits) noexcept {
  for (unsigned i = 0; i < bits; ++i) {
    unsigned byte = i / 8, bit = 7 - i % 8;
    if (((a[byte] >> bit) & 1u) != ((p[byte] >> bit) & 1u)) return false;
  }
  return true;
}

constexpr bool is_v4_mapped(const ip16& a) noexcept {
  for (int i = 0; i < 10; ++i)
    if (a[i] != 0) return false;
  return a[10] == 0xff && a[11] == 0xff;
}

constexpr addr_class classify_v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  if (a == 127) return addr_class::loopback;
  if (a == 0) return addr_class::unspecified;
  if (a == 169 && b == 254) return addr_class::link_local; // the metadata endpoints there included
  if (net::is_metadata_v4(a, b, c, d)) return addr_class::metadata;
  return addr_class::ordinary;
}

} // namespace detail

// An IPv4 destination (a sockaddr_in, or an IPv4 address in v4-mapped form).
constexpr bool is_v4(const endpoint& e) noexcept { return detail::is_v4_mapped(e.addr); }

inline addr_class classify(const ip16& a) {
  using detail::prefix;
  if (detail::is_v4_mapped(a)) return detail::classify_v4(a[12], a[13], a[14], a[15]);
  static constexpr ip16 zero{};
  static constexpr ip16 loop6{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (a == zero) return addr_class::unspecified;
  if (a == loop6) return addr_class::loopback;
  static constexpr ip16 ll{0xfe, 0x80};
  if (prefix(a, ll, 10)) return addr_class::link_local;
  if (net::is_metadata_v6(a)) return addr_class::metadata;
  // IPv4 carried in IPv6: v4-compatible ::a.b.c.d (the first 96 bits zero),
  // NAT64 64:ff9b::/96 and 64:ff9b:1::/48 (the last 32 bits), 6to4 2002::/16
  // (bits 16..47).
  static constexpr ip16 nat64{0x00, 0x64, 0xff, 0x9b};
  static constexpr ip16 nat64_local{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
  static constexpr ip16 siit{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (prefix(a, zero, 96) || prefix(a, nat64, 96) || prefix(a, nat64_local, 48) || prefix(a, siit, 96))
    return detail::classify_v4(a[12], a[13], a[14], a[15]);
  static constexpr ip16 six_to_four{0x20, 0x02};
  if (prefix(a, six_to_four, 16)) return detail::classify_v4(a[2], a[3], a[4], a[5]);
  return addr_class::ordinary;
}

// sockaddr_in / sockaddr_in6 bytes (as read from the caller) to an endpoint;
// nullopt for another family or a short length.
inline std::optional<endpoint> endpoint_of(const void* sa, std::size_t len) {
  if (len < sizeof(sa_family_t)) return std::nullopt;
  sa_family_t fam;
  std::memcpy(&fam, sa, sizeof fam);
  endpoint e;
  if (fam == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof in);
    const auto* b = reinterpret_cast<const std::uint8_t*>(&in.sin_addr);
    e.addr = v4_mapped(b[0], b[1], b[2], b[3]);
    e.port = ntohs(in.sin_port);
    return e;
  }
  if (fam == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof in6);
    std::memcpy(e.addr.data(), &in6.sin6_addr, 16);
    e.port = ntohs(in6.sin6_port);
    return e;
  }
  return std::nullopt;
}

// "127.0.0.1:8080", "[::1]:8080" (a v4-mapped address prints as IPv4).
inline std::string to_string(const endpoint& e) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (detail::is_v4_mapped(e.addr)) {
    ::inet_ntop(AF_INET, e.addr.data() + 12, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(e.port);
  }
  ::inet_ntop(AF_INET6, e.addr.data(), buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(e.port);
}

// A numeric address (IPv4 or IPv6, an IPv6 "%scope" suffix ignored).
inline std::optional<ip16> parse_ip(std::string_view s) {
  std::string t(s.substr(0, s.find('%')));
  ip16 out{};
  in_addr v4{};
  if (::inet_pton(AF_INET, t.c_str(), &v4) == 1) {
    const auto* b = reinterpret_cast<const std::uint8_t*>(&v4);
    return v4_mapped(b[0], b[1], b[2], b[3]);
  }
  if (::inet_pton(AF_INET6, t.c_str(), out.data()) == 1) return out;
  return std::nullopt;
}

// The `nameserver ADDR` lines of a resolv.conf (comments, other keywords and
// unparsable addresses are skipped, as the resolver does).
inline std::vector<ip16> parse_resolv_conf(std::string_view text) {
  std::vector<ip16> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    constexpr std::string_view kw = "nameserver";
    if (line.substr(0, kw.size()) != kw || line.size() == kw.size() || (line[kw.size()] != ' ' && line[kw.size()] != '\t'))
      continue;
    line.remove_prefix(kw.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    auto end = line.find_first_of(" \t\r#;");
    if (auto a = parse_ip(line.substr(0, end))) out.push_back(*a);
  }
  return out;
}

namespace detail {

// An own binding that holds `dst` for `protocol`.
inline bool holds(const own_binding& b, const endpoint& dst, int protocol) {
  if (b.protocol != protocol || b.ep.port != dst.port || b.ep.port == 0) return false;
  if (b.ep.addr == dst.addr) return true;
  static constexpr ip16 any6{};
  static constexpr ip16 any4 = v4_mapped(0, 0, 0, 0);
  if (b.ep.addr == any4) return is_v4_mapped(dst.addr);
  if (b.ep.addr == any6) return !b.v6only || !is_v4_mapped(dst.addr);
  return false;
}

} // namespace detail

// The decision for an IP destination with the host's network (T2).
// `host_local`: the kernel says `dst` is one of the host's own addresses;
// `own`: the session's bindings; `receivers`: the sockets of `protocol`
// with `dst`'s port that the host's network has now (any address).
inline verdict decide_inet(const rule_set& rules, const endpoint& dst, int protocol, bool host_local,
                           std::span<const own_binding> own, std::span<const receiver> receivers = {}) {
  if (!rules.host_net) return verdict::allow();
  const addr_class c = classify(dst.addr);
  if (c == addr_class::ordinary && !host_local) return verdict::allow();
  if (dst.port == 53)
    for (const auto& ns : rules.dns)
      if (ns == dst.addr) return verdict::allow();
  if (std::any_of(own.begin(), own.end(), [&](const own_binding& b) { return detail::holds(b, dst, protocol); })) {
    bool any = false, alone = true;
    for (const auto& r : receivers) {
      if (!detail::holds(own_binding{r.ep, protocol, r.v6only, r.inode}, dst, protocol)) continue;
      any = true;
      alone = alone && std::any_of(own.begin(), own.end(), [&](const own_binding& b) {
                return b.inode != 0 && b.inode == r.inode && b.protocol == protocol;
              });
    }
    if (any && alone) return verdict::allow();
    return verdict::deny(kActionConnect, to_string(dst),
                         "T2: the session bound this address, but a socket it did not bind holds it too or holds it "
                         "now (a host service sharing the port: SO_REUSEPORT, SO_REUSEADDR)");
  }
  std::string why = c == addr_class::ordinary ? std::string("an address of the host itself")
                                              : std::string("a ") + std::string(to_string(c)) + " address";
  return verdict::deny(kActionConnect, to_string(dst),
                       "T2: " + why + " (the host's own services, link-local and metadata addresses are excepted "
                                      "from the terminal's open network)");
}

// An abstract AF_UNIX name with the host's network: reachable only when the
// session bound it (T2); `name` is without the leading NUL.
inline verdict decide_abstract(const rule_set& rules, std::string_view name, bool bound_by_session) {
  if (!rules.host_net || bound_by_session) return verdict::allow();
  std::string shown = "unix:@";
  for (char ch : name) shown += (ch == '\0') ? '@' : ch;
  return verdict::deny(kActionConnect, std::move(shown), "T2: an abstract Unix socket the session did not bind");
}

} // namespace ccsb::broker
