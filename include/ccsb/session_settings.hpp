// ccsb/session_settings.hpp — the per-session settings a launcher
// takes besides the spec, validated in one place for ccsb-run's flags and
// ccsbd's launch fields (S8: the daemon says everything ccsb-run can). Pure:
// no I/O; build_session_request (request_builder.hpp) applies the checks
// that need the launcher (its uid, E3 on the values).
//
//   flag                      launch field               check here
//   --env NAME=VALUE          env {"NAME": "VALUE"}      env_addition: field env.NAME
//   --run-as UID[:GID]        runAs "UID[:GID]" | UID    parse_run_as: field runAs
//   --memory/--pids/          limits {memory, pids,      set_limit: field limits.KEY
//   --tmp-size/--cpus           tmpSize, cpus}
//   --egress-opt OPT          egress {allowUpstream,     egress_from_args / check_egress:
//                               resolve, dnsServer}        field egress.KEY[i]
//
// egressd options a session may set are the three that change what a
// session's traffic may reach: --allow-upstream CIDR (resolved addresses in
// that range pass the address check, N5), --resolve NAME=IP (NAME answered
// with IP without DNS), --dns-server IP:PORT. Every other egressd option is
// the launcher's own (listeners, events, confinement, user) and refused by
// name: a pass-through would let a request unset the proxy's confinement.
#pragma once

#include "ccsb/environment.hpp"
#include "ccsb/host.hpp"
#include "ccsb/resource_limits.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb {

// L1: the host ids a root launcher runs the sandbox as.
struct run_as_ids {
  std::uint32_t uid{0};
  std::uint32_t gid{0};
  friend bool operator==(const run_as_ids&, const run_as_ids&) = default;
};

// "UID[:GID]", decimal ids below 2^32-1; GID defaults to UID.
inline result<run_as_ids> parse_run_as(std::string_view field, std::string_view text) {
  auto id = [&](std::string_view v) -> result<std::uint32_t> {
    std::uint64_t n = 0;
    if (v.empty() || v.size() > 10 || (v.size() > 1 && v[0] == '0'))
      return make_error(errc::invalid_argument, std::string(field),
                        "expected UID[:GID] (decimal ids), got \"" + std::string(text) + "\"");
    for (char c : v) {
      if (c < '0' || c > '9')
        return make_error(errc::invalid_argument, std::string(field),
                          "expected UID[:GID] (decimal ids), got \"" + std::string(text) + "\"");
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (n >= 4294967295ull)
      return make_error(errc::invalid_argument, std::string(field), std::string(v) + " is not an id (at most 4294967294)");
    return static_cast<std::uint32_t>(n);
  };
  const auto colon = text.find(':');
  auto u = id(text.substr(0, colon));
  if (!u) return std::move(u).err();
  if (colon == std::string_view::npos) return run_as_ids{*u, *u};
  auto g = id(text.substr(colon + 1));
  if (!g) return std::move(g).err();
  return run_as_ids{*u, *g};
}

// L1: what a launcher of `euid`/`egid` may ask for (the driver's
// choose_identity makes the same decision; here it is made before anything
// starts).
inline result<void> check_run_as(const run_as_ids& asked, std::uint32_t euid, std::uint32_t egid) {
  if (euid != 0) {
    if (asked.uid != euid || asked.gid != egid)
      return make_error(errc::invalid_argument, "runAs",
                        "only a root launcher can run the sandbox as another uid (asked for " +
                            std::to_string(asked.uid) + ":" + std::to_string(asked.gid) + ", the launcher is " +
                            std::to_string(euid) + ")");
    return ok();
  }
  if (asked.uid == 0 || asked.gid == 0)
    return make_error(errc::invalid_argument, "runAs",
                      "the sandbox may not run as host uid or gid 0 (L1: its root must never be the host's)");
  return ok();
}

// E1/E3: one variable added to the session's environment. A name E3 would
// remove (credentials, injection, proxy overrides) is refused, never dropped.
inline result<env_var> env_addition(std::string name, std::string value) {
  const std::string field = "env." + name;
  if (name.empty() || name.find('=') != std::string::npos)
    return make_error(errc::invalid_argument, field, "a variable name is non-empty and has no '='");
  if ((name + value).find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, field, "contains a NUL byte");
  if (auto why = environment_removal_reason(name, value); !why.empty())
    return make_error(errc::invalid_argument, field, "refused: " + std::string(why));
  return env_var{std::move(name), std::move(value)};
}

// L7: one limit by its launch key ("memory", "pids", "tmpSize", "cpus") from
// the flags' text: sizes such as 123, 64K, 512M, 8G (at least 1); cpus 0.01
// to 1024 with at most three decimals. `field` names it in an error.
inline result<void> set_limit(resource_limits& l, std::string_view key, std::string_view text, std::string_view field) {
  if (key == "cpus") {
    auto m = parse_cpus_field(std::string(field), std::string(text));
    if (!m) return std::move(m).err();
    l.cpu_millis = *m;
    return ok();
  }
  auto n = parse_size(std::string(text));
  if (!n || *n == 0)
    return make_error(errc::invalid_argument, std::string(field),
                      "expected a size such as 512M or 8G (at least 1), got \"" + std::string(text) + "\"");
  if (key == "memory") l.memory_bytes = *n;
  else if (key == "pids") l.pids = *n;
  else if (key == "tmpSize") l.tmp_bytes = *n;
  else return make_error(errc::invalid_argument, std::string(field), "not a limit (memory, pids, tmpSize, cpus)");
  return ok();
}

// The egressd options of a session (see the header comment).
struct egress_settings {
  std::vector<std::string> allow_upstream; // CIDR: 127.0.0.0/8, ::1/128
  std::vector<std::string> resolve;        // NAME=IP
  std::optional<std::string> dns_server;   // IP:PORT
  bool empty() const { return allow_upstream.empty() && resolve.empty() && !dns_server; }
  friend bool operator==(const egress_settings&, const egress_settings&) = default;
};

namespace detail {

inline error egress_error(std::string_view field, std::string_view text, std::string_view why) {
  return make_error(errc::invalid_argument, std::string(field), "\"" + std::string(text) + "\": " + std::string(why));
}

} // namespace detail

// An address range as egressd takes it: an IP literal in canonical form,
// optionally /BITS, no bits set after the prefix ("127.0.0.1/8" is a typo
// for "127.0.0.0/8").
inline result<void> check_cidr(std::string_view field, std::string_view text) {
  const auto slash = text.find('/');
  auto h = parse_host(text.substr(0, slash));
  if (!h || !h->is_ip()) return detail::egress_error(field, text, "not an IP address or range (expected e.g. 127.0.0.0/8 or ::1/128)");
  const unsigned max = h->kind() == host_kind::ipv4 ? 32 : 128;
  unsigned bits = max;
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3 || (len.size() > 1 && len[0] == '0'))
      return detail::egress_error(field, text, "bad prefix length");
    bits = 0;
    for (char c : len) {
      if (c < '0' || c > '9') return detail::egress_error(field, text, "bad prefix length");
      bits = bits * 10 + static_cast<unsigned>(c - '0');
    }
    if (bits > max) return detail::egress_error(field, text, "prefix length too long");
  }
  const auto& b = h->address();
  for (unsigned i = bits; i < max; ++i)
    if (b[i / 8] & (0x80 >> (i % 8))) return detail::egress_error(field, text, "host bits set after the prefix");
  return ok();
}

// NAME=IP: a host name (not an address) and an IP literal.
inline result<void> check_resolve(std::string_view field, std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return detail::egress_error(field, text, "expected NAME=IP");
  auto name = parse_host(text.substr(0, eq));
  if (!name || name->is_ip()) return detail::egress_error(field, text, "not a host name before '='");
  auto ip = parse_host(text.substr(eq + 1));
  if (!ip || !ip->is_ip()) return detail::egress_error(field, text, "not an IP address after '='");
  return ok();
}

// IP:PORT ([V6]:PORT).
inline result<void> check_dns_server(std::string_view field, std::string_view text) {
  auto hp = parse_host_port(text);
  if (!hp || !hp->host.is_ip() || hp->port == 0) return detail::egress_error(field, text, "expected IP:PORT");
  return ok();
}

// Every value, named by its launch field (egress.allowUpstream[0], ...).
inline result<void> check_egress(const egress_settings& e) {
  for (std::size_t i = 0; i < e.allow_upstream.size(); ++i)
    if (auto c = check_cidr("egress.allowUpstream[" + std::to_string(i) + "]", e.allow_upstream[i]); !c) return c;
  for (std::size_t i = 0; i < e.resolve.size(); ++i)
    if (auto c = check_resolve("egress.resolve[" + std::to_string(i) + "]", e.resolve[i]); !c) return c;
  if (e.dns_server)
    if (auto c = check_dns_server("egress.dnsServer", *e.dns_server); !c) return c;
  return ok();
}

// ccsb-run's --egress-opt values, in order: "--allow-upstream" then the value
// in the next one, "--allow-upstream=CIDR", or "--allow-upstream CIDR" as one
// word. An option a session may not set is refused naming it.
inline result<egress_settings> egress_from_args(const std::vector<std::string>& args) {
  egress_settings e;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string opt = args[i], value;
    bool has_value = false;
    if (auto sep = opt.find_first_of("= "); sep != std::string::npos) {
      value = opt.substr(sep + 1);
      opt.resize(sep);
      has_value = true;
    }
    if (opt != "--allow-upstream" && opt != "--resolve" && opt != "--dns-server")
      return make_error(errc::invalid_argument, "--egress-opt",
                        "\"" + args[i] +
                            "\" is not an egressd option a session may set (--allow-upstream CIDR, --resolve NAME=IP, "
                            "--dns-server IP:PORT)");
    if (!has_value) {
      if (i + 1 >= args.size())
        return make_error(errc::invalid_argument, "--egress-opt", opt + " needs a value (the next --egress-opt)");
      value = args[++i];
    }
    if (opt == "--allow-upstream") e.allow_upstream.push_back(value);
    else if (opt == "--resolve") e.resolve.push_back(value);
    else e.dns_server = value;
  }
  return e;
}

} // namespace ccsb
