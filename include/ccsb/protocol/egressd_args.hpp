// ccsb/protocol/egressd_args.hpp — egressd's command line as one typed
// value, with its writer (the launchers: launch/egressd.hpp, the Seatbelt
// driver) and its strict parser (egressd/config.cpp), used by both ends.
// Pure: no I/O (egressd reads --config and --socks-token-file itself, and
// checks what the values mean: listen addresses, patterns, ranges).
//
// Every option is `--name VALUE` or `--name=VALUE`, or a flag without a
// value (--no-baseline, --allow-non-loopback-listen, --no-confine, --help);
// -h is --help. The parser refuses, with an invalid_argument error whose
// field names the option: an unknown option or a bare word, a missing
// value, a value given to a flag, an option given twice that is not a list
// (lists: --allow, --deny, --allow-upstream, --resolve), a malformed
// number, descriptor, on|off or UID[:GID], root as --user, --confine with
// --no-confine, and --socks-token with --socks-token-file.
#pragma once

#include "ccsb/result.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::protocol {

struct egressd_user {
  std::uint32_t uid{0}, gid{0};
  friend bool operator==(const egressd_user&, const egressd_user&) = default;
};

struct egressd_args {
  std::optional<std::string> config;       // --config FILE.json (applied first; the command line overrides)
  std::optional<std::string> http_listen;  // --http-listen ADDR
  std::optional<std::string> socks_listen; // --socks-listen ADDR
  std::optional<int> listen_channel;       // --listen-channel FD (3-65535): listeners a sandbox hands over
  std::vector<std::string> allow;          // --allow PATTERN...
  std::vector<std::string> deny;           // --deny PATTERN...
  bool no_baseline{false};                 // --no-baseline
  bool open_network{false};                // --open-network: every host past the deny list (T2 in a microVM)
  std::optional<bool> network;             // --network on|off
  std::vector<std::string> allow_upstream; // --allow-upstream CIDR...
  std::vector<std::string> resolve;        // --resolve NAME=IP...
  std::optional<std::string> dns_server;   // --dns-server IP:PORT
  std::optional<std::string> events;       // --events FD|PATH|-
  std::optional<std::string> check;        // --check HOST[:PORT]
  std::optional<std::string> socks_token;      // --socks-token TOKEN
  std::optional<std::string> socks_token_file; // --socks-token-file PATH
  bool allow_non_loopback_listen{false};       // --allow-non-loopback-listen
  std::optional<std::uint32_t> max_tunnels;        // --max-tunnels N
  std::optional<std::uint32_t> max_header_bytes;   // --max-header-bytes N
  std::optional<std::uint32_t> connect_timeout_ms; // --connect-timeout-ms N
  std::optional<std::uint32_t> dns_timeout_ms;     // --dns-timeout-ms N
  std::optional<std::uint32_t> header_timeout_ms;  // --header-timeout-ms N
  std::optional<std::uint32_t> idle_timeout_ms;    // --idle-timeout-ms N
  std::optional<std::uint32_t> drain_seconds;      // --drain-seconds N
  std::optional<std::string> confine;              // --confine LAYERS
  bool no_confine{false};                          // --no-confine
  std::optional<egressd_user> user;                // --user UID[:GID]
  bool help{false};                                // --help, -h
  friend bool operator==(const egressd_args&, const egressd_args&) = default;
};

namespace detail {

using egressd_string = std::optional<std::string> egressd_args::*;
using egressd_list = std::vector<std::string> egressd_args::*;
using egressd_number = std::optional<std::uint32_t> egressd_args::*;
using egressd_flag = bool egressd_args::*;

inline constexpr std::pair<std::string_view, egressd_string> kEgressdStrings[] = {
    {"--config", &egressd_args::config},
    {"--http-listen", &egressd_args::http_listen},
    {"--socks-listen", &egressd_args::socks_listen},
    {"--dns-server", &egressd_args::dns_server},
    {"--events", &egressd_args::events},
    {"--check", &egressd_args::check},
    {"--socks-token", &egressd_args::socks_token},
    {"--socks-token-file", &egressd_args::socks_token_file},
    {"--confine", &egressd_args::confine},
};
inline constexpr std::pair<std::string_view, egressd_list> kEgressdLists[] = {
    {"--allow", &egressd_args::allow},
    {"--deny", &egressd_args::deny},
    {"--allow-upstream", &egressd_args::allow_upstream},
    {"--resolve", &egressd_args::resolve},
};
inline constexpr std::pair<std::string_view, egressd_number> kEgressdNumbers[] = {
    {"--max-tunnels", &egressd_args::max_tunnels},
    {"--max-header-bytes", &egressd_args::max_header_bytes},
    {"--connect-timeout-ms", &egressd_args::connect_timeout_ms},
    {"--dns-timeout-ms", &egressd_args::dns_timeout_ms},
    {"--header-timeout-ms", &egressd_args::header_timeout_ms},
    {"--idle-timeout-ms", &egressd_args::idle_timeout_ms},
    {"--drain-seconds", &egressd_args::drain_seconds},
};
inline constexpr std::pair<std::string_view, egressd_flag> kEgressdFlags[] = {
    {"--no-baseline", &egressd_args::no_baseline},
    {"--open-network", &egressd_args::open_network},
    {"--allow-non-loopback-listen", &egressd_args::allow_non_loopback_listen},
    {"--no-confine", &egressd_args::no_confine},
    {"--help", &egressd_args::help},
};

// Decimal, no sign, no leading zero, at most 2^32 - 1.
inline std::optional<std::uint32_t> egressd_uint(std::string_view s) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > 0xffffffffULL) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

inline error egressd_bad(std::string_view opt, std::string_view v, std::string_view why) {
  return make_error(errc::invalid_argument, std::string(opt), "'" + std::string(v) + "': " + std::string(why));
}

// The options whose value is more than a string: the channel, the network
// switch, the user.
inline result<void> parse_egressd_typed(egressd_args& a, std::string_view opt, std::string_view v) {
  if (opt == "--listen-channel") {
    auto fd = egressd_uint(v);
    if (!fd || *fd < 3 || *fd > 65535) return egressd_bad(opt, v, "expected a descriptor number from 3 to 65535");
    a.listen_channel = static_cast<int>(*fd);
    return ok();
  }
  if (opt == "--network") {
    if (v != "on" && v != "off") return egressd_bad(opt, v, "expected on or off");
    a.network = v == "on";
    return ok();
  }
  // --user UID[:GID]; egressd never serves as root, and -1 is no id.
  const auto colon = v.find(':');
  auto uid = egressd_uint(v.substr(0, colon));
  auto gid = colon == std::string_view::npos ? uid : egressd_uint(v.substr(colon + 1));
  if (!uid || !gid) return egressd_bad(opt, v, "expected UID[:GID], decimal");
  if (*uid == 0 || *gid == 0) return egressd_bad(opt, v, "egressd never serves as root");
  if (*uid == 0xffffffffu || *gid == 0xffffffffu) return egressd_bad(opt, v, "-1 is not an id");
  a.user = egressd_user{*uid, *gid};
  return ok();
}

// The options parse_egressd_typed reads.
inline constexpr std::string_view kEgressdTyped[] = {"--listen-channel", "--network", "--user"};

// The member `opt` names in one of the tables above, or nullptr.
template <class F, std::size_t N>
constexpr const F* egressd_field(const std::pair<std::string_view, F> (&table)[N], std::string_view opt) {
  for (const auto& [name, field] : table)
    if (opt == name) return &field;
  return nullptr;
}

// One option with a value into `a`; false when `opt` takes none or is unknown.
inline result<bool> parse_egressd_value(egressd_args& a, std::string_view opt, std::string_view v) {
  if (auto f = egressd_field(kEgressdStrings, opt)) {
    (a.**f).emplace(v);
    return true;
  }
  if (auto f = egressd_field(kEgressdLists, opt)) {
    (a.**f).emplace_back(v);
    return true;
  }
  if (auto f = egressd_field(kEgressdNumbers, opt)) {
    auto n = egressd_uint(v);
    if (!n) return egressd_bad(opt, v, "expected a non-negative integer");
    a.**f = *n;
    return true;
  }
  if (std::find(std::begin(kEgressdTyped), std::end(kEgressdTyped), opt) == std::end(kEgressdTyped)) return false;
  if (auto r = parse_egressd_typed(a, opt, v); !r) return std::move(r).err();
  return true;
}

inline bool egressd_takes_value(std::string_view opt) {
  return egressd_field(kEgressdStrings, opt) || egressd_field(kEgressdLists, opt) ||
         egressd_field(kEgressdNumbers, opt) ||
         std::find(std::begin(kEgressdTyped), std::end(kEgressdTyped), opt) != std::end(kEgressdTyped);
}

inline bool egressd_is_list(std::string_view opt) { return egressd_field(kEgressdLists, opt) != nullptr; }

inline result<void> check_egressd_pairs(const egressd_args& a) {
  if (a.confine && a.no_confine)
    return make_error(errc::invalid_argument, "--no-confine", "given with --confine: choose one");
  if (a.socks_token && a.socks_token_file)
    return make_error(errc::invalid_argument, "--socks-token-file", "given with --socks-token: choose one");
  return ok();
}

} // namespace detail

// egressd's options (without the program name), strictly.
inline result<egressd_args> parse_egressd_args(const std::vector<std::string>& args) {
  egressd_args a;
  std::set<std::string, std::less<>> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view opt = args[i];
    std::optional<std::string_view> value;
    if (opt == "-h") opt = "--help";
    if (const auto eq = opt.find('='); opt.starts_with("--") && eq != std::string_view::npos) {
      value = opt.substr(eq + 1);
      opt = opt.substr(0, eq);
    }
    if (!opt.starts_with("--")) return make_error(errc::invalid_argument, std::string(opt), "unknown option (see --help)");
    if (!seen.insert(std::string(opt)).second && !detail::egressd_is_list(opt))
      return make_error(errc::invalid_argument, std::string(opt), "given twice");
    if (auto f = detail::egressd_field(detail::kEgressdFlags, opt)) {
      if (value) return make_error(errc::invalid_argument, std::string(opt), "takes no value");
      a.**f = true;
      continue;
    }
    if (!value && i + 1 >= args.size())
      return make_error(errc::invalid_argument, std::string(opt),
                        detail::egressd_takes_value(opt) ? "needs a value" : "unknown option (see --help)");
    const std::string_view v = value ? *value : std::string_view(args[++i]);
    auto known = detail::parse_egressd_value(a, opt, v);
    if (!known) return std::move(known).err();
    if (!*known) return make_error(errc::invalid_argument, std::string(opt), "unknown option (see --help)");
  }
  if (auto r = detail::check_egressd_pairs(a); !r) return std::move(r).err();
  return a;
}

// The command line for `a`, in a fixed order (the parser takes any).
inline std::vector<std::string> to_argv(const egressd_args& a) {
  std::vector<std::string> o;
  for (const auto& [name, field] : detail::kEgressdStrings)
    if (a.*field && name != "--events") o.insert(o.end(), {std::string(name), *(a.*field)});
  if (a.listen_channel) o.insert(o.end(), {"--listen-channel", std::to_string(*a.listen_channel)});
  for (const auto& [name, field] : detail::kEgressdLists)
    for (const auto& v : a.*field) o.insert(o.end(), {std::string(name), v});
  if (a.network) o.insert(o.end(), {"--network", *a.network ? "on" : "off"});
  if (a.user) o.insert(o.end(), {"--user", std::to_string(a.user->uid) + ":" + std::to_string(a.user->gid)});
  for (const auto& [name, field] : detail::kEgressdNumbers)
    if (a.*field) o.insert(o.end(), {std::string(name), std::to_string(*(a.*field))});
  for (const auto& [name, field] : detail::kEgressdFlags)
    if (a.*field) o.emplace_back(name);
  if (a.events) o.insert(o.end(), {"--events", *a.events});
  return o;
}

} // namespace ccsb::protocol
