// egressd/socks_parser.hpp — sans-I/O SOCKS server-side parser: SOCKS5
// (RFC 1928, RFC 1929 username/password) and SOCKS4/4a CONNECT.
//
// SOCKS4a is accepted for clients that speak nothing newer (socat 1.7.4's
// SOCKS client, for one; ccsb's own ssh ProxyCommand helper speaks SOCKS5).
// A SOCKS4/4a request goes through exactly the same
// checks as a SOCKS5 one: the host name (4a) or the IPv4 address (4) becomes
// the same `request` and is dialled by the same pipeline. SOCKS4 has no
// password, so it is refused when a SOCKS token is configured.
//
// Each stage is parsed from the bytes received so far; a stage is complete,
// needs more bytes, or is bad with the reply code to send. Sizes are bounded
// by the protocol (at most 515 bytes per stage), so callers need one small
// buffer. The result never depends on how the bytes were split.
#pragma once

#include "ccsb/host.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace egressd::socks {

inline constexpr std::size_t kMaxStage = 2 + 255 + 255 + 1; // the biggest stage

enum class status : std::uint8_t { need_more, good, bad };

// Reply codes (RFC 1928 section 6).
enum reply : std::uint8_t {
  succeeded = 0x00,
  general_failure = 0x01,
  not_allowed_by_ruleset = 0x02,
  network_unreachable = 0x03,
  host_unreachable = 0x04,
  connection_refused = 0x05,
  ttl_expired = 0x06,
  command_not_supported = 0x07,
  address_type_not_supported = 0x08,
};

inline constexpr std::uint8_t kMethodNoAuth = 0x00;
inline constexpr std::uint8_t kMethodUserPass = 0x02;
inline constexpr std::uint8_t kMethodNone = 0xff;

struct parse_result {
  status st{status::need_more};
  std::size_t consumed{0};
  std::string_view reason{};
  std::uint8_t reply{general_failure}; // when bad, in the request stage
  // Bad requests only: the request was complete and the `request` holds the
  // target it named (BIND, UDP ASSOCIATE, unknown commands, port 0, a
  // non-zero reserved byte), so the refusal can be reported (N7).
  bool target_named{false};
};

// Greeting: VER NMETHODS METHODS. `method` is the chosen method: user/pass
// when a token is configured, otherwise no-auth; 0xff if the client offers
// neither. A first byte other than 5 is bad ("not_socks5").
parse_result parse_greeting(std::string_view data, bool token_required, std::uint8_t& method);

// RFC 1929: VER(1) ULEN UNAME PLEN PASSWD. Views point into `data`.
parse_result parse_auth(std::string_view data, std::string_view& user, std::string_view& password);

struct request {
  std::uint8_t cmd{0};
  std::uint8_t atyp{0};
  std::string raw_host;           // as sent (domain) or the literal's text
  std::optional<ccsb::host> host; // set when raw_host normalises
  std::uint16_t port{0};
};

// VER CMD RSV ATYP DST.ADDR DST.PORT. Bad results carry the reply code:
// 0x07 for BIND/UDP ASSOCIATE/unknown commands, 0x08 for unknown address
// types, 0x01 for other malformed requests; `target_named` when the address
// and port were read.
parse_result parse_request(std::string_view data, request& out);

// The 10-byte reply with an IPv4 bind address of 0.0.0.0:0, or the given one.
std::string make_reply(std::uint8_t code);

// SOCKS4/4a: VER(4) CMD PORT(2) IP(4) USERID NUL [HOST NUL when IP is
// 0.0.0.x, x != 0]. The user id and the host are at most 255 bytes each.
// Only CONNECT (1) is accepted; `out.atyp` is 1 for SOCKS4, 3 for 4a.
inline constexpr std::size_t kMaxSocks4 = 8 + 256 + 256;
parse_result parse_socks4_request(std::string_view data, request& out);

// SOCKS4 replies are 8 bytes: 0x00, then 0x5a (granted) or 0x5b (rejected).
inline constexpr std::uint8_t kSocks4Granted = 0x5a;
inline constexpr std::uint8_t kSocks4Rejected = 0x5b;
std::string make_socks4_reply(std::uint8_t code);

// Compares without an early exit (the time depends on the lengths only).
bool constant_time_equals(std::string_view a, std::string_view b) noexcept;

} // namespace egressd::socks
