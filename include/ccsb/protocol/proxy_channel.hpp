// ccsb/protocol/proxy_channel.hpp — how the proxy listeners inside a sandbox
// reach the session's egressd (L3, B2): the messages on the proxy channel,
// one typed header for both ends (ccsb-init writes listeners/parses the
// reply; egressd parses listeners/writes the reply). Pure: no I/O.
//
// The channel is a SOCK_SEQPACKET socketpair the launcher creates for one
// session: one end goes to egressd (--listen-channel FD), the other through
// bwrap to ccsb-init (kProxyChannelFd). ccsb-init creates the listening TCP
// sockets (127.0.0.1:3128 and :1080) inside the sandbox's network namespace,
// hands them to egressd with SCM_RIGHTS, waits for the answer and closes its
// end and its copies before the command starts: the command never holds the
// channel, and egressd accepts on the sandbox's sockets directly (one relay
// hop, no bridge process).
//
// One message per datagram, ASCII, fields separated by one space:
//   sandbox -> egressd   "listeners" (SP ROLE){1,kMaxListeners}
//                        with exactly one SCM_RIGHTS descriptor per ROLE, in
//                        order; ROLE is "http" or "socks"
//   launcher -> egressd  "connection" SP ROLE
//                        with exactly one SCM_RIGHTS descriptor: one end of a
//                        connected AF_UNIX stream socketpair whose other end
//                        the launcher relays (the microvm backend's egress
//                        port, ccsb/launch/microvm_egress.hpp: the guest's
//                        connections have no socket on the host to accept)
//   egressd -> sandbox   "accepting"          every listener is being served
//                        "refused" SP REASON  none of them is (REASON: 1 to
//                                             kMaxReason printable ASCII bytes)
// The parsers are strict: an unknown kind, an unknown role, an empty field,
// a doubled space, a trailing byte, a control byte or an oversized message is
// an error; the receiver then refuses (egressd) or fails the start (ccsb-init).
// egressd also checks each received descriptor itself (a listening
// SOCK_STREAM socket bound to a loopback address) before it accepts on it.
#pragma once

#include "ccsb/result.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ccsb::protocol {

enum class proxy_role { http, socks };

inline constexpr std::size_t kMaxListeners = 8;
inline constexpr std::size_t kMaxReason = 200;
inline constexpr std::size_t kMaxChannelMessage = 512;

inline std::string_view to_string(proxy_role r) { return r == proxy_role::http ? "http" : "socks"; }

struct listeners_message {
  std::vector<proxy_role> roles; // one descriptor each, in this order
  friend bool operator==(const listeners_message&, const listeners_message&) = default;
};
struct connection_message {
  proxy_role role{proxy_role::http}; // one descriptor
  friend bool operator==(const connection_message&, const connection_message&) = default;
};
struct accepting_message {
  friend bool operator==(const accepting_message&, const accepting_message&) = default;
};
struct refused_message {
  std::string reason;
  friend bool operator==(const refused_message&, const refused_message&) = default;
};
using channel_reply = std::variant<accepting_message, refused_message>;

inline std::string write_message(const listeners_message& m) {
  std::string out = "listeners";
  for (auto r : m.roles) {
    out += ' ';
    out += to_string(r);
  }
  return out;
}

inline std::string write_message(const connection_message& m) { return "connection " + std::string(to_string(m.role)); }

// A reason is cut to kMaxReason bytes and every byte outside printable ASCII
// becomes '?', so any text can be sent and the result always parses.
inline std::string write_message(const channel_reply& m) {
  if (std::holds_alternative<accepting_message>(m)) return "accepting";
  std::string reason = std::get<refused_message>(m).reason.substr(0, kMaxReason);
  for (auto& c : reason)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  if (reason.empty()) reason = "?";
  return "refused " + reason;
}

namespace detail {
inline result<std::vector<std::string_view>> split_fields(std::string_view s, std::string_view what) {
  if (s.empty() || s.size() > kMaxChannelMessage)
    return make_error(errc::invalid_argument, std::string(what), "empty or longer than " +
                                                                     std::to_string(kMaxChannelMessage) + " bytes");
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c > 0x7e)
      return make_error(errc::invalid_argument, std::string(what), "byte " + std::to_string(i) + " is not printable ASCII");
  }
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    auto sp = s.find(' ', start);
    auto f = s.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start);
    if (f.empty()) return make_error(errc::invalid_argument, std::string(what), "empty field at byte " + std::to_string(start));
    out.push_back(f);
    if (sp == std::string_view::npos) return out;
    start = sp + 1;
  }
}
} // namespace detail

// `descriptors`: how many SCM_RIGHTS descriptors arrived with the datagram.
inline result<listeners_message> parse_listeners(std::string_view s, std::size_t descriptors) {
  auto f = detail::split_fields(s, "proxy channel");
  if (!f) return std::move(f).err();
  if ((*f)[0] != "listeners") return make_error(errc::invalid_argument, "proxy channel", "expected \"listeners\"");
  listeners_message m;
  for (std::size_t i = 1; i < f->size(); ++i) {
    if ((*f)[i] == "http") m.roles.push_back(proxy_role::http);
    else if ((*f)[i] == "socks") m.roles.push_back(proxy_role::socks);
    else return make_error(errc::invalid_argument, "proxy channel", "unknown role in field " + std::to_string(i));
  }
  if (m.roles.empty() || m.roles.size() > kMaxListeners)
    return make_error(errc::invalid_argument, "proxy channel",
                      "between 1 and " + std::to_string(kMaxListeners) + " roles expected");
  if (descriptors != m.roles.size())
    return make_error(errc::invalid_argument, "proxy channel",
                      std::to_string(m.roles.size()) + " roles but " + std::to_string(descriptors) + " descriptors");
  return m;
}

inline bool is_connection_message(std::string_view s) { return s.substr(0, 11) == "connection "; }

inline result<connection_message> parse_connection(std::string_view s, std::size_t descriptors) {
  auto f = detail::split_fields(s, "proxy channel");
  if (!f) return std::move(f).err();
  if ((*f)[0] != "connection" || f->size() != 2)
    return make_error(errc::invalid_argument, "proxy channel", "expected \"connection ROLE\"");
  connection_message m;
  if ((*f)[1] == "http") m.role = proxy_role::http;
  else if ((*f)[1] == "socks") m.role = proxy_role::socks;
  else return make_error(errc::invalid_argument, "proxy channel", "unknown role in field 1");
  if (descriptors != 1)
    return make_error(errc::invalid_argument, "proxy channel",
                      "a connection takes 1 descriptor, got " + std::to_string(descriptors));
  return m;
}

inline result<channel_reply> parse_reply(std::string_view s) {
  constexpr std::string_view kRefused = "refused ";
  if (s == "accepting") return channel_reply{accepting_message{}};
  if (s.substr(0, kRefused.size()) == kRefused) {
    auto reason = s.substr(kRefused.size());
    if (reason.empty() || reason.size() > kMaxReason)
      return make_error(errc::invalid_argument, "proxy channel reply", "a reason of 1 to " + std::to_string(kMaxReason) + " bytes expected");
    for (std::size_t i = 0; i < reason.size(); ++i) {
      auto c = static_cast<unsigned char>(reason[i]);
      if (c < 0x20 || c > 0x7e)
        return make_error(errc::invalid_argument, "proxy channel reply",
                          "byte " + std::to_string(kRefused.size() + i) + " is not printable ASCII");
    }
    return channel_reply{refused_message{std::string(reason)}};
  }
  return make_error(errc::invalid_argument, "proxy channel reply", "expected \"accepting\" or \"refused REASON\"");
}

} // namespace ccsb::protocol
