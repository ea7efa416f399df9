// ccsb/host.hpp — strict host-name and address-literal normalisation (N3, N8).
//
// Everything that names a network destination passes through parse_host()
// first. It accepts exactly:
//   * DNS names made of LDH labels (letters, digits, hyphen; no leading or
//     trailing hyphen), 1..63 bytes per label, at most 253 bytes in all,
//     lower-cased, with at most one trailing dot (stripped);
//   * IPv4 in canonical dotted-quad form only (four decimal parts 0..255, no
//     leading zeros). A name whose last label is numeric (all digits, or 0x
//     followed by hex digits: the WHATWG "ends in a number" rule) but is not a
//     canonical dotted quad is rejected, never sent to DNS: this closes the
//     decimal/octal/hex spellings of addresses such as 2852039166 or 0xA9FEA9FE;
//   * IPv6 literals, bare or in brackets, rendered in RFC 5952 canonical form;
//     an IPv4-mapped address (::ffff:a.b.c.d) becomes the IPv4 address. Zone
//     identifiers (%eth0) are rejected.
// Non-ASCII input is rejected (no IDNA: use the xn-- A-label form), as are
// control bytes, whitespace, '%', '_', brackets around a name and empty labels.
//
// A parsed host lives in fixed storage: parsing a valid host never allocates.
#pragma once

#include "ccsb/result.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ccsb {

enum class host_kind : std::uint8_t { name, ipv4, ipv6 };

constexpr std::size_t kMaxHostName = 253;
constexpr std::size_t kMaxLabel = 63;

class host {
public:
  host() = default;

  std::string_view str() const noexcept { return {buf_.data(), len_}; }
  // The same bytes, with at least 8 readable zero bytes after the end, so
  // matchers may load whole 64-bit words (domain_set::prepare).
  const char* padded_data() const noexcept { return buf_.data(); }
  host_kind kind() const noexcept { return kind_; }
  bool is_ip() const noexcept { return kind_ != host_kind::name; }
  // Network-order address bytes: 4 for ipv4, 16 for ipv6, none for names.
  const std::array<std::uint8_t, 16>& address() const noexcept { return addr_; }

  friend bool operator==(const host& a, const host& b) noexcept {
    return a.kind_ == b.kind_ && a.str() == b.str();
  }

  // Builders used by the parsers below.
  static host from_name(std::string_view lower) noexcept {
    host h;
    h.kind_ = host_kind::name;
    h.set(lower);
    return h;
  }
  static host from_ipv4(const std::uint8_t* b) noexcept;
  static host from_ipv6(const std::uint8_t* b) noexcept; // unmaps ::ffff:0:0/96

private:
  void set(std::string_view s) noexcept {
    len_ = static_cast<std::uint8_t>(s.size() > kMaxHostName ? kMaxHostName : s.size());
    std::memcpy(buf_.data(), s.data(), len_);
  }
  std::array<char, kMaxHostName + 11> buf_{}; // zero past len_ (see padded_data)
  std::uint8_t len_{0};
  host_kind kind_{host_kind::name};
  std::array<std::uint8_t, 16> addr_{};
};

namespace detail {

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr char to_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline error host_error(std::string message) {
  return make_error(errc::invalid_host, "host", std::move(message));
}

} // namespace detail

// A hexadecimal digit, either case, and its value (IPv6 groups, chunk sizes).
constexpr bool is_hex_digit(char c) noexcept {
  return detail::is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
constexpr int hex_digit_value(char c) noexcept {
  if (detail::is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
// Strict canonical dotted quad. Returns false on any other spelling.
constexpr bool parse_ipv4_strict(std::string_view s, std::uint8_t out[4]) noexcept {
  int part = 0;
  std::size_t i = 0;
  while (part < 4) {
    std::size_t start = i;
    unsigned value = 0;
    while (i < s.size() && detail::is_digit(s[i])) {
      value = value * 10 + static_cast<unsigned>(s[i] - '0');
      if (i - start >= 3) return false;
      ++i;
    }
    std::size_t len = i - start;
    if (len == 0 || value > 255) return false;
    if (len > 1 && s[start] == '0') return false; // leading zero (octal trap)
    out[part++] = static_cast<std::uint8_t>(value);
    if (part < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  return i == s.size();
}

// RFC 4291 text forms, strict: hex groups of 1..4 digits, at most one "::",
// an optional trailing canonical dotted quad, no zone id.
constexpr bool parse_ipv6(std::string_view s, std::uint8_t out[16]) noexcept {
  std::uint16_t groups[8] = {};
  int n = 0;          // groups written
  int gap = -1;       // index where "::" stands
  std::size_t i = 0;
  if (s.size() < 2) return false;
  if (s[0] == ':') {
    if (s[1] != ':') return false;
    gap = 0;
    i = 2;
    if (i == s.size()) { // "::"
      for (int k = 0; k < 16; ++k) out[k] = 0;
      return true;
    }
  }
  while (i < s.size()) {
    if (n >= 8) return false;
    // Trailing IPv4?
    std::size_t j = i;
    while (j < s.size() && is_hex_digit(s[j])) ++j;
    if (j < s.size() && s[j] == '.') {
      std::uint8_t v4[4];
      if (n > 6 || !parse_ipv4_strict(s.substr(i), v4)) return false;
      groups[n++] = static_cast<std::uint16_t>(v4[0] << 8 | v4[1]);
      groups[n++] = static_cast<std::uint16_t>(v4[2] << 8 | v4[3]);
      i = s.size();
      break;
    }
    std::size_t len = j - i;
    if (len == 0 || len > 4) return false;
    std::uint16_t v = 0;
    for (std::size_t k = i; k < j; ++k) v = static_cast<std::uint16_t>(v << 4 | hex_digit_value(s[k]));
    groups[n++] = v;
    i = j;
    if (i == s.size()) break;
    if (s[i] != ':') return false;
    ++i;
    if (i < s.size() && s[i] == ':') {
      if (gap >= 0) return false; // second "::"
      gap = n;
      ++i;
      if (i == s.size()) break;
    } else if (i == s.size()) {
      return false; // trailing single ':'
    }
  }
  if (gap < 0 && n != 8) return false;
  if (gap >= 0 && n > 7) return false;
  std::uint16_t full[8] = {};
  if (gap < 0) {
    for (int k = 0; k < 8; ++k) full[k] = groups[k];
  } else {
    int tail = n - gap;
    for (int k = 0; k < gap; ++k) full[k] = groups[k];
    for (int k = 0; k < tail; ++k) full[8 - tail + k] = groups[gap + k];
  }
  for (int k = 0; k < 8; ++k) {
    out[2 * k] = static_cast<std::uint8_t>(full[k] >> 8);
    out[2 * k + 1] = static_cast<std::uint8_t>(full[k] & 0xff);
  }
  return true;
}

// Writes the RFC 5952 form into buf (at least 40 bytes); returns its length.
inline std::size_t format_ipv6(const std::uint8_t* b, char* buf) noexcept {
  std::uint16_t g[8];
  for (int k = 0; k < 8; ++k) g[k] = static_cast<std::uint16_t>(b[2 * k] << 8 | b[2 * k + 1]);
  int best = -1, best_len = 0;
  for (int k = 0; k < 8;) {
    if (g[k] != 0) { ++k; continue; }
    int start = k;
    while (k < 8 && g[k] == 0) ++k;
    if (k - start > best_len) { best = start; best_len = k - start; }
  }
  if (best_len < 2) best = -1;
  static constexpr char digits[] = "0123456789abcdef";
  std::size_t n = 0;
  for (int k = 0; k < 8; ++k) {
    if (k == best) {
      buf[n++] = ':';
      if (k == 0) buf[n++] = ':';
      k += best_len - 1;
      continue;
    }
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      int d = (g[k] >> shift) & 0xf;
      if (d || started || shift == 0) { buf[n++] = digits[d]; started = true; }
    }
    if (k != 7) buf[n++] = ':';
  }
  return n;
}

// Writes the dotted quad into buf (at least 16 bytes); returns its length.
inline std::size_t format_ipv4(const std::uint8_t* b, char* buf) noexcept {
  std::size_t n = 0;
  for (int k = 0; k < 4; ++k) {
    unsigned v = b[k];
    if (v >= 100) buf[n++] = static_cast<char>('0' + v / 100);
    if (v >= 10) buf[n++] = static_cast<char>('0' + (v / 10) % 10);
    buf[n++] = static_cast<char>('0' + v % 10);
    if (k != 3) buf[n++] = '.';
  }
  return n;
}

namespace detail {

// WHATWG URL "ends in a number": the last label is all digits, or 0x/0X
// followed by hex digits only.
constexpr bool label_is_numeric(std::string_view label) noexcept {
  if (label.empty()) return false;
  if (label.size() >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
    for (std::size_t i = 2; i < label.size(); ++i)
      if (!is_hex_digit(label[i])) return false;
    return true;
  }
  for (char c : label)
    if (!is_digit(c)) return false;
  return true;
}

} // namespace detail

inline host host::from_ipv4(const std::uint8_t* b) noexcept {
  host h;
  h.kind_ = host_kind::ipv4;
  std::memcpy(h.addr_.data(), b, 4);
  h.len_ = static_cast<std::uint8_t>(format_ipv4(b, h.buf_.data()));
  return h;
}

inline host host::from_ipv6(const std::uint8_t* b) noexcept {
  static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(b, mapped, 12) == 0) return from_ipv4(b + 12);
  host h;
  h.kind_ = host_kind::ipv6;
  std::memcpy(h.addr_.data(), b, 16);
  h.len_ = static_cast<std::uint8_t>(format_ipv6(b, h.buf_.data()));
  return h;
}

// Parses and normalises a host (no port). Accepts "[v6]" and bare v6.
inline result<host> parse_host(std::string_view in) {
  using namespace detail;
  if (in.empty()) return host_error("empty host");
  for (char c : in) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) return host_error("non-ASCII byte in host (use the xn-- form)");
    if (u < 0x20 || u == 0x7f) return host_error("control byte in host");
    if (c == ' ' || c == '\t') return host_error("whitespace in host");
    if (c == '%') return host_error("'%' in host (percent-encoding and zone ids are not accepted)");
  }
  if (in.front() == '[') {
    if (in.size() < 3 || in.back() != ']') return host_error("unbalanced '[' in host");
    std::string_view inner = in.substr(1, in.size() - 2);
    std::uint8_t b[16];
    if (inner.find(':') == std::string_view::npos || !parse_ipv6(inner, b))
      return host_error("brackets hold something that is not an IPv6 address");
    return host::from_ipv6(b);
  }
  if (in.find(':') != std::string_view::npos) {
    std::uint8_t b[16];
    if (!parse_ipv6(in, b)) return host_error("malformed IPv6 address");
    return host::from_ipv6(b);
  }
  if (in.find_first_of("[]") != std::string_view::npos) return host_error("bracket in host name");

  std::string_view s = in;
  if (s.back() == '.') s.remove_suffix(1); // one trailing dot only
  if (s.empty()) return host_error("host is only a dot");
  if (s.size() > kMaxHostName) return host_error("host name longer than 253 bytes");

  // Numeric tail: canonical IPv4 or reject.
  std::string_view last = s.substr(s.rfind('.') == std::string_view::npos ? 0 : s.rfind('.') + 1);
  if (label_is_numeric(last)) {
    std::uint8_t b[4];
    if (parse_ipv4_strict(s, b)) return host::from_ipv4(b);
    return host_error("numeric host is not a canonical dotted-quad IPv4 address");
  }

  std::array<char, kMaxHostName> lower{};
  std::size_t label_len = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = to_lower(s[i]);
    if (c == '.') {
      if (label_len == 0) return host_error("empty label in host name");
      if (lower[i - 1] == '-') return host_error("label ends with '-'");
      label_len = 0;
    } else if ((c >= 'a' && c <= 'z') || is_digit(c) || c == '-') {
      if (label_len == 0 && c == '-') return host_error("label starts with '-'");
      if (++label_len > kMaxLabel) return host_error("label longer than 63 bytes");
    } else if (c == '_') {
      return host_error("'_' in host name (only letters, digits and '-' are allowed)");
    } else {
      return host_error(std::string("byte '") + c + "' not allowed in host name");
    }
    lower[i] = c;
  }
  if (label_len == 0) return host_error("empty label in host name");
  if (lower[s.size() - 1] == '-') return host_error("label ends with '-'");
  return host::from_name(std::string_view(lower.data(), s.size()));
}

// Port: plain decimal 1..65535, no sign, no leading zeros.
inline result<std::uint16_t> parse_port(std::string_view s) {
  auto bad = [] { return make_error(errc::invalid_host, "port", "port must be decimal 1-65535 without leading zeros"); };
  if (s.empty() || s.size() > 5 || s[0] == '0') return bad();
  unsigned v = 0;
  for (char c : s) {
    if (!detail::is_digit(c)) return bad();
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return bad();
  return static_cast<std::uint16_t>(v);
}

struct host_port {
  ccsb::host host;
  std::uint16_t port{0};
};

// "name:443", "1.2.3.4:80", "[v6]:443". A bare IPv6 literal with a port is
// ambiguous and rejected; the port is required.
inline result<host_port> parse_host_port(std::string_view s) {
  std::size_t colon;
  if (!s.empty() && s.front() == '[') {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) return detail::host_error("unbalanced '[' in host");
    if (close + 1 >= s.size() || s[close + 1] != ':') return make_error(errc::invalid_host, "port", "missing port after ']'");
    colon = close + 1;
  } else {
    colon = s.rfind(':');
    if (colon == std::string_view::npos) return make_error(errc::invalid_host, "port", "missing port");
    if (s.substr(0, colon).find(':') != std::string_view::npos)
      return detail::host_error("IPv6 literal must be in brackets when a port follows");
  }
  auto h = parse_host(s.substr(0, colon));
  if (!h) return std::move(h).err();
  auto p = parse_port(s.substr(colon + 1));
  if (!p) return std::move(p).err();
  return host_port{*h, *p};
}

// "host:port" with brackets around IPv6.
inline std::string format_host_port(const host& h, std::uint16_t port) {
  std::string out;
  if (h.kind() == host_kind::ipv6) {
    out += '[';
    out += h.str();
    out += ']';
  } else {
    out += h.str();
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

} // namespace ccsb
