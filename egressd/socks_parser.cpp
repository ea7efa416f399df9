#include "socks_parser.hpp"

namespace egressd::socks {

namespace {
std::uint8_t byte(std::string_view d, std::size_t i) noexcept { return static_cast<std::uint8_t>(d[i]); }
parse_result more() { return {status::need_more, 0, {}, general_failure}; }
parse_result bad(std::string_view why, std::uint8_t code = general_failure) { return {status::bad, 0, why, code}; }
// Both versions: only CONNECT to a non-zero port is a good request. Called
// once the whole request is read, so a refusal names its target.
parse_result check_connect(const request& req, std::size_t consumed, std::uint8_t bad_command,
                           std::uint8_t bad_port) {
  if (req.cmd != 1)
    return {status::bad, consumed,
            req.cmd == 2 ? "bind_not_supported" : req.cmd == 3 ? "udp_associate_not_supported" : "unknown_command",
            bad_command, true};
  if (req.port == 0) return {status::bad, consumed, "port_zero", bad_port, true};
  return {status::good, consumed, {}, succeeded};
}
} // namespace

parse_result parse_greeting(std::string_view d, bool token_required, std::uint8_t& method) {
  method = kMethodNone;
  if (d.empty()) return more();
  if (byte(d, 0) != 5) return bad(byte(d, 0) == 4 ? "socks4" : "not_socks5");
  if (d.size() < 2) return more();
  std::size_t n = byte(d, 1);
  if (n == 0) return bad("no_methods");
  if (d.size() < 2 + n) return more();
  bool no_auth = false, user_pass = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (byte(d, 2 + i) == kMethodNoAuth) no_auth = true;
    if (byte(d, 2 + i) == kMethodUserPass) user_pass = true;
  }
  if (token_required ? user_pass : no_auth) method = token_required ? kMethodUserPass : kMethodNoAuth;
  return {status::good, 2 + n, {}, succeeded};
}

parse_result parse_auth(std::string_view d, std::string_view& user, std::string_view& password) {
  if (d.empty()) return more();
  if (byte(d, 0) != 1) return bad("bad_auth_version");
  if (d.size() < 2) return more();
  std::size_t ulen = byte(d, 1);
  if (d.size() < 2 + ulen + 1) return more();
  std::size_t plen = byte(d, 2 + ulen);
  if (d.size() < 3 + ulen + plen) return more();
  user = d.substr(2, ulen);
  password = d.substr(3 + ulen, plen);
  return {status::good, 3 + ulen + plen, {}, succeeded};
}

parse_result parse_request(std::string_view d, request& out) {
  out = request{};
  if (d.empty()) return more();
  if (byte(d, 0) != 5) return bad("bad_request_version");
  if (d.size() < 4) return more();
  out.cmd = byte(d, 1);
  out.atyp = byte(d, 3);
  std::size_t addr_len = 0, addr_off = 4;
  switch (out.atyp) {
  case 1: addr_len = 4; break;
  case 4: addr_len = 16; break;
  case 3:
    if (d.size() < 5) return more();
    addr_len = byte(d, 4);
    addr_off = 5;
    break;
  default:
    return bad("address_type_not_supported", address_type_not_supported);
  }
  std::size_t total = addr_off + addr_len + 2;
  if (d.size() < total) return more();
  const auto* a = reinterpret_cast<const std::uint8_t*>(d.data() + addr_off);
  if (out.atyp == 1) {
    out.host = ccsb::host::from_ipv4(a);
    out.raw_host = std::string(out.host->str());
  } else if (out.atyp == 4) {
    out.host = ccsb::host::from_ipv6(a);
    out.raw_host = std::string(out.host->str());
  } else {
    out.raw_host.assign(d.substr(addr_off, addr_len));
    if (auto h = ccsb::parse_host(out.raw_host)) out.host = *h;
  }
  out.port = static_cast<std::uint16_t>(byte(d, addr_off + addr_len) << 8 | byte(d, addr_off + addr_len + 1));
  if (byte(d, 2) != 0) return {status::bad, 0, "reserved_byte_not_zero", general_failure, true};
  return check_connect(out, total, command_not_supported, general_failure);
}

parse_result parse_socks4_request(std::string_view d, request& out) {
  out = request{};
  if (d.empty()) return more();
  if (byte(d, 0) != 4) return bad("not_socks4");
  if (d.size() < 8) return more();
  out.cmd = byte(d, 1);
  out.port = static_cast<std::uint16_t>(byte(d, 2) << 8 | byte(d, 3));
  const auto* ip = reinterpret_cast<const std::uint8_t*>(d.data() + 4);
  const bool socks4a = ip[0] == 0 && ip[1] == 0 && ip[2] == 0 && ip[3] != 0;
  // Refusals past the fixed header still name what it names (N7): the
  // address of a SOCKS4 request, the first 256 bytes of a SOCKS4a host
  // (always there when the host is too long, however the bytes came).
  auto named = [&](std::string_view why) {
    parse_result r = bad(why, kSocks4Rejected);
    if (!socks4a) {
      out.atyp = 1;
      out.host = ccsb::host::from_ipv4(ip);
      out.raw_host = std::string(out.host->str());
      r.target_named = true;
    }
    return r;
  };
  // The user id: NUL-terminated, at most 255 bytes.
  std::size_t uid_end = d.find('\0', 8);
  if (uid_end == std::string_view::npos) return d.size() - 8 > 255 ? named("socks4_userid_too_long") : more();
  if (uid_end - 8 > 255) return named("socks4_userid_too_long");
  std::size_t total = uid_end + 1;
  if (socks4a) {
    std::size_t host_end = d.find('\0', total);
    if (host_end == std::string_view::npos || host_end - total > 255) {
      if (host_end == std::string_view::npos && d.size() - total <= 255) return more();
      parse_result r = bad("socks4a_host_too_long", kSocks4Rejected);
      out.atyp = 3;
      out.raw_host.assign(d.substr(total, 256));
      r.target_named = true;
      return r;
    }
    out.atyp = 3;
    out.raw_host.assign(d.substr(total, host_end - total));
    if (auto h = ccsb::parse_host(out.raw_host)) out.host = *h;
    total = host_end + 1;
  } else {
    out.atyp = 1;
    out.host = ccsb::host::from_ipv4(ip);
    out.raw_host = std::string(out.host->str());
  }
  return check_connect(out, total, kSocks4Rejected, kSocks4Rejected);
}

std::string make_socks4_reply(std::uint8_t code) {
  return std::string{0, static_cast<char>(code), 0, 0, 0, 0, 0, 0};
}

std::string make_reply(std::uint8_t code) {
  return std::string{5, static_cast<char>(code), 0, 1, 0, 0, 0, 0, 0, 0};
}

bool constant_time_equals(std::string_view a, std::string_view b) noexcept {
  // Compare over the longer length so the time does not depend on where the
  // first difference is.
  std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (std::size_t i = 0; i < n; ++i) {
    auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

} // namespace egressd::socks
