#include "proxy/ssh_proxy.hpp"

#include "io.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace ccsb::init {

namespace {

int say(const std::string& s, int code) {
  std::fprintf(stderr, "ccsb: %s\n", s.c_str());
  return code;
}

// Both directions until each has ended (stdin EOF -> shutdown(SHUT_WR) on
// the tunnel; tunnel EOF -> done: ssh has nothing more to read).
int relay(int tunnel) {
  bool in_open = true;
  char buf[65536];
  for (;;) {
    pollfd p[2] = {{tunnel, POLLIN, 0}, {0, static_cast<short>(in_open ? POLLIN : 0), 0}};
    int r = ::poll(p, in_open ? 2 : 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return say(std::string("poll: ") + std::strerror(errno), 1);
    if (p[0].revents) {
      ssize_t n = ::read(tunnel, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      if (!write_all(1, buf, static_cast<std::size_t>(n))) return 0; // ssh went away
    }
    if (in_open && p[1].revents) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        in_open = false;
        ::shutdown(tunnel, SHUT_WR);
      } else if (!write_all(tunnel, buf, static_cast<std::size_t>(n))) {
        return 0;
      }
    }
  }
}

} // namespace

std::string socks_refusal_text(unsigned code, const std::string& target) {
  switch (code) {
  case 0x02: return "egress to " + target + " is denied by this session's network allowlist";
  case 0x03: return target + ": network unreachable";
  case 0x04: return target + ": host unreachable, or its name did not resolve";
  case 0x05: return target + " refused the connection";
  case 0x06: return target + ": timed out";
  case 0x07: return "the session's SOCKS proxy does not support CONNECT (unexpected)";
  case 0x08: return "the session's SOCKS proxy does not accept this address type for " + target;
  default: return "the session's SOCKS proxy could not connect to " + target + " (reply code " + std::to_string(code) + ")";
  }
}

int run_ssh_proxy(const std::string& proxy, const std::string& host, const std::string& port_text) {
  // Arguments.
  auto colon = proxy.rfind(':');
  in_addr pa{};
  unsigned pport = 0, port = 0;
  if (colon == std::string::npos || ::inet_pton(AF_INET, proxy.substr(0, colon).c_str(), &pa) != 1)
    return say("--ssh-proxy: expected IPv4:PORT of the SOCKS proxy, got \"" + proxy + "\"", 2);
  {
    std::string_view v(proxy.c_str() + colon + 1);
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), pport);
    if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || pport == 0 || pport > 65535)
      return say("--ssh-proxy: bad proxy port in \"" + proxy + "\"", 2);
  }
  {
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc{} || p != port_text.data() + port_text.size() || port == 0 || port > 65535)
      return say("--ssh-proxy: bad port \"" + port_text + "\"", 2);
  }
  if (host.empty() || host.size() > 255) return say("--ssh-proxy: the host name must be 1 to 255 bytes", 2);
  const std::string target = host + ":" + port_text;

  // The SOCKS5 handshake (RFC 1928): no authentication, CONNECT by name.
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return say(std::string("socket: ") + std::strerror(errno), 1);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = pa;
  a.sin_port = htons(static_cast<std::uint16_t>(pport));
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return say("cannot reach the session's SOCKS proxy at " + proxy + ": " + std::strerror(errno), 1);
  const unsigned char hello[] = {0x05, 0x01, 0x00};
  unsigned char got[2];
  if (!write_all(s, reinterpret_cast<const char*>(hello), sizeof hello) || !read_exact(s, got, 2))
    return say("the session's SOCKS proxy closed the connection during the greeting", 1);
  if (got[0] != 0x05 || got[1] != 0x00) return say("the session's SOCKS proxy wants an authentication ccsb does not use", 1);
  std::string req = {0x05, 0x01, 0x00, 0x03, static_cast<char>(host.size())};
  req += host;
  req += static_cast<char>(port >> 8);
  req += static_cast<char>(port & 0xff);
  unsigned char head[4];
  if (!write_all(s, req.data(), req.size()) || !read_exact(s, head, 4))
    return say("the session's SOCKS proxy closed the connection before answering for " + target, 1);
  if (head[0] != 0x05) return say("the session's SOCKS proxy answered with a bad version", 1);
  if (head[1] != 0x00) return say(socks_refusal_text(head[1], target), 1);
  // The bound address: 4 (IPv4), 16 (IPv6) or a length-prefixed name, then the port.
  std::size_t rest = 0;
  if (head[3] == 0x01) rest = 4 + 2;
  else if (head[3] == 0x04) rest = 16 + 2;
  else if (head[3] == 0x03) {
    unsigned char len;
    if (!read_exact(s, &len, 1)) return say("short SOCKS reply", 1);
    rest = len + 2u;
  } else return say("the session's SOCKS proxy answered with an unknown address type", 1);
  unsigned char skip[300];
  if (!read_exact(s, skip, rest)) return say("short SOCKS reply", 1);
  return relay(s);
}

} // namespace ccsb::init
