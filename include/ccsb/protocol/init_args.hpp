// ccsb/protocol/init_args.hpp — ccsb-init's command line: what the launcher
// (render/bwrap/plan.hpp, through bwrap) tells the session's supervisor, as
// one typed value with its writer and its strict parser, used by both ends.
// Pure: no I/O (ccsb-init reads the options descriptor itself).
//
//   ccsb-init --exec-channel FD
//             [--proxy-channel FD --proxy-listen ROLE=IPv4:PORT...]     (L3)
//             [--broker-root PATH... --broker-name GLOB... --broker-allow-create GLOB...
//              --broker-deny PATH... --broker-git on|off --broker-unix on|off
//              [--broker-net host|private] --broker-linked REF:ADMIN...] (X1)
//             [--landlock on --landlock-rx PATH... --landlock-rw PATH... --landlock-proc PATH...
//              [--landlock-tcp restrict --landlock-connect PORT...]]    (X2)
//   ccsb-init --options-fd FD
//
// The second form is the one the launcher runs: the options (the X2 ruleset
// names host paths, which must never be on an argv the sandbox can read as
// /proc/1/cmdline, L1) are NUL-separated in the descriptor FD
// (to_options_blob / split_options_blob), and --options-fd goes alone.
//
// Every option takes exactly one value (the next argument). The parser is
// strict; each refusal is an invalid_argument error whose field names the
// option: an unknown option, a missing value, a malformed value (the broker's
// and Landlock's own parsers: broker/decide.hpp parse_arg,
// confine/landlock.hpp parse_init_arg), an option given twice that takes one
// value (--exec-channel, --proxy-channel, --options-fd, --landlock,
// --landlock-tcp, --broker-git, --broker-unix, --broker-net), a
// --landlock-* or --broker-* option without its group's switches
// (--landlock on; --broker-git and --broker-unix, which the writer always
// writes), --landlock-connect without --landlock-tcp restrict,
// --exec-channel missing, and --proxy-channel without --proxy-listen or the
// reverse.
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/confine/landlock.hpp"
#include "ccsb/protocol/proxy_channel.hpp"
#include "ccsb/result.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::protocol {

// One proxy listener ccsb-init creates in the sandbox's network namespace
// and hands to egressd (L3): an IPv4 loopback address and a port.
struct init_listen {
  proxy_role role{proxy_role::http};
  std::array<std::uint8_t, 4> address{127, 0, 0, 1};
  std::uint16_t port{0};
  friend bool operator==(const init_listen&, const init_listen&) = default;
};

struct init_args {
  int exec_channel{-1};
  std::optional<int> proxy_channel;
  std::vector<init_listen> listeners;             // with proxy_channel, never without
  std::optional<broker::rule_set> broker;         // X1: commands run under the broker
  std::optional<confine::landlock_rules> landlock; // X2
  friend bool operator==(const init_args&, const init_args&) = default;
};

// The bound on the options descriptor's contents.
inline constexpr std::size_t kMaxInitOptionBytes = 4U << 20;

inline std::string to_string(const init_listen& l) {
  std::string out = std::string(to_string(l.role)) + "=";
  for (std::size_t i = 0; i < 4; ++i) out += (i ? "." : "") + std::to_string(l.address[i]);
  return out + ":" + std::to_string(l.port);
}

// The options, in a fixed order (the parser takes any).
inline std::vector<std::string> to_argv(const init_args& a) {
  std::vector<std::string> o{"--exec-channel", std::to_string(a.exec_channel)};
  if (a.proxy_channel) o.insert(o.end(), {"--proxy-channel", std::to_string(*a.proxy_channel)});
  for (const auto& l : a.listeners) o.insert(o.end(), {"--proxy-listen", to_string(l)});
  if (a.broker)
    for (auto& x : broker::to_args(*a.broker)) o.push_back(std::move(x));
  if (a.landlock)
    for (auto& x : confine::to_init_args(*a.landlock)) o.push_back(std::move(x));
  return o;
}

// to_argv, each followed by a NUL; an option holding a NUL would split into
// options of its own: refused, naming it.
inline result<std::string> to_options_blob(const init_args& a) {
  std::string out;
  const auto argv = to_argv(a);
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].find('\0') != std::string::npos)
      return make_error(errc::invalid_argument, i % 2 ? argv[i - 1] : argv[i], "contains a NUL byte");
    out += argv[i];
    out += '\0';
  }
  if (out.size() > kMaxInitOptionBytes)
    return make_error(errc::invalid_argument, "--options-fd", "more than " + std::to_string(kMaxInitOptionBytes) + " bytes");
  return out;
}

// The options of an --options-fd descriptor: every one ends with a NUL.
inline result<std::vector<std::string>> split_options_blob(std::string_view blob) {
  if (blob.size() > kMaxInitOptionBytes)
    return make_error(errc::invalid_argument, "--options-fd", "more than " + std::to_string(kMaxInitOptionBytes) + " bytes");
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < blob.size()) {
    const auto nul = blob.find('\0', start);
    if (nul == std::string_view::npos)
      return make_error(errc::invalid_argument, "--options-fd", "the last option does not end with a NUL");
    out.emplace_back(blob.substr(start, nul - start));
    start = nul + 1;
  }
  return out;
}

namespace detail {

inline result<int> parse_init_fd(std::string_view opt, std::string_view v) {
  int fd = 0;
  if (v.empty() || v.size() > 5 || (v.size() > 1 && v[0] == '0'))
    return make_error(errc::invalid_argument, std::string(opt), "not a descriptor number: \"" + std::string(v) + "\"");
  for (char c : v) {
    if (c < '0' || c > '9')
      return make_error(errc::invalid_argument, std::string(opt), "not a descriptor number: \"" + std::string(v) + "\"");
    fd = fd * 10 + (c - '0');
  }
  if (fd > 65535) return make_error(errc::invalid_argument, std::string(opt), "descriptor above 65535");
  return fd;
}

// A decimal number of at most `max`, no sign, no leading zero.
inline std::optional<unsigned> parse_bounded(std::string_view s, unsigned max) {
  if (s.empty() || s.size() > 5 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

// ROLE=IPv4:PORT, the address in 127.0.0.0/8, the port 1-65535.
inline result<init_listen> parse_init_listen(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "--proxy-listen", why + ": \"" + std::string(text) + "\"");
  };
  init_listen l;
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) return bad("expected ROLE=IPv4:PORT");
  const auto role = text.substr(0, eq);
  if (role == "http") l.role = proxy_role::http;
  else if (role == "socks") l.role = proxy_role::socks;
  else return bad("unknown role (http or socks)");
  std::string_view rest = text.substr(eq + 1);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return bad("expected IPv4:PORT after the role");
  std::string_view addr = rest.substr(0, colon);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto dot = i < 3 ? addr.find('.') : addr.size();
    if (dot == std::string_view::npos) return bad("not an IPv4 address");
    auto octet = parse_bounded(addr.substr(0, dot), 255);
    if (!octet || addr.substr(0, dot).size() > 3) return bad("not an IPv4 address");
    l.address[i] = static_cast<std::uint8_t>(*octet);
    addr.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  if (l.address[0] != 127) return bad("not an IPv4 loopback address");
  auto port = parse_bounded(rest.substr(colon + 1), 65535);
  if (!port || *port == 0) return bad("bad port");
  l.port = static_cast<std::uint16_t>(*port);
  return l;
}

// Options that take one value, so may appear once.
inline bool init_option_single(std::string_view o) {
  return o == "--exec-channel" || o == "--proxy-channel" || o == "--options-fd" || o == "--landlock" ||
         o == "--landlock-tcp" || o == "--broker-git" || o == "--broker-unix" || o == "--broker-net";
}

inline result<void> parse_init_option(init_args& a, std::string_view opt, std::string_view v) {
  if (opt == "--exec-channel" || opt == "--proxy-channel") {
    auto fd = parse_init_fd(opt, v);
    if (!fd) return std::move(fd).err();
    (opt == "--exec-channel" ? a.exec_channel : a.proxy_channel.emplace()) = *fd;
    return ok();
  }
  if (opt == "--proxy-listen") {
    auto l = parse_init_listen(v);
    if (!l) return std::move(l).err();
    a.listeners.push_back(*l);
    return ok();
  }
  if (confine::is_landlock_option(opt)) {
    if (!a.landlock) a.landlock.emplace();
    return confine::parse_init_arg(*a.landlock, opt, v);
  }
  if (broker::is_broker_option(opt)) {
    if (!a.broker) a.broker.emplace();
    return broker::parse_arg(*a.broker, opt, v);
  }
  if (opt == "--options-fd")
    return make_error(errc::invalid_argument, "--options-fd", "goes alone, not with other options");
  return make_error(errc::invalid_argument, std::string(opt), "unknown option");
}

inline result<void> check_init_groups(const init_args& a, const std::set<std::string, std::less<>>& seen) {
  if (a.exec_channel < 0) return make_error(errc::invalid_argument, "--exec-channel", "is required");
  if (a.proxy_channel.has_value() != !a.listeners.empty())
    return make_error(errc::invalid_argument, a.proxy_channel ? "--proxy-listen" : "--proxy-channel",
                      "--proxy-channel and --proxy-listen go together");
  if (a.listeners.size() > kMaxListeners)
    return make_error(errc::invalid_argument, "--proxy-listen", "at most " + std::to_string(kMaxListeners));
  if (a.landlock && !seen.contains("--landlock"))
    return make_error(errc::invalid_argument, "--landlock", "a --landlock-* option without --landlock on");
  if (a.landlock && !a.landlock->restrict_tcp && !a.landlock->connect_ports.empty())
    return make_error(errc::invalid_argument, "--landlock-connect", "without --landlock-tcp restrict");
  if (a.broker && (!seen.contains("--broker-git") || !seen.contains("--broker-unix")))
    return make_error(errc::invalid_argument, seen.contains("--broker-git") ? "--broker-unix" : "--broker-git",
                      "a --broker-* option without --broker-git and --broker-unix");
  return ok();
}

} // namespace detail

// The descriptor of `--options-fd FD` when that is the whole command line;
// nullopt when the options are inline. --options-fd among other options is
// refused.
inline result<std::optional<int>> options_fd_of(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "--options-fd") {
    auto fd = detail::parse_init_fd("--options-fd", args[1]);
    if (!fd) return std::move(fd).err();
    return std::optional<int>(*fd);
  }
  return std::optional<int>{};
}

// ccsb-init's options (without the program name), strictly.
inline result<init_args> parse_init_args(const std::vector<std::string>& args) {
  init_args a;
  std::set<std::string, std::less<>> seen;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string& opt = args[i];
    if (i + 1 >= args.size())
      return make_error(errc::invalid_argument, opt, opt.starts_with("--") ? "needs a value" : "unknown option");
    if (!seen.insert(opt).second && detail::init_option_single(opt))
      return make_error(errc::invalid_argument, opt, "given twice");
    if (auto r = detail::parse_init_option(a, opt, args[i + 1]); !r) return std::move(r).err();
  }
  if (auto r = detail::check_init_groups(a, seen); !r) return std::move(r).err();
  return a;
}

} // namespace ccsb::protocol
