// ccsb/confine/landlock.hpp — the Landlock ruleset the session's supervisor
// applies to the command (X2), derived from the compiled policy, and the
// ccsb-init options that carry it. Pure: no I/O; init/confine/apply_landlock.cpp
// opens the paths and makes the syscalls.
//
// Defence in depth under the mount namespace (L1/L2): if a bwrap plan ever
// made a host path visible that the policy does not list, or bound a path
// writable that the policy says is read-only, this layer still refuses the
// read or the write, because it is computed from the policy, not from the
// plan. What it grants, beneath each path as the sandbox sees it:
//   read + execute   the system tree (render/bwrap/layout.hpp kSystemTop), /etc,
//                    ccsb's own files (/run/ccsb), every read-only mount;
//   read + write     every writable mount (all rights of the ABI: create,
//                    remove, rename within, truncate, device ioctls), the
//                    private /tmp and /dev (bwrap's minimal device tree);
//   read, write      /proc (procfs applies its own checks; /proc/sys is a
//   to files         read-only mount);
//   list names       everywhere (READ_DIR on /), so `ls /` and `find /`
//                    work; a listing shows names, never contents.
// Nothing else: a path outside these is neither readable nor writable.
//
// What Landlock cannot express stays with the other layers: denials INSIDE
// a granted tree (P4 read-deny masks, P5 write-deny masks and placeholders,
// P7 creation globs in the X1 broker, protected checkouts) need "allow
// beneath A except B", and Landlock only adds rights. So the mounts and the
// broker remain the enforcement of P4/P5/P7; Landlock bounds the whole.
//
// Network (ABI 4) is port-based only: a rule allows TCP connect/bind to a
// port on any address. In a session with its own network namespace (every
// proxied or offline run) the namespace already holds nothing but loopback,
// and restricting ports would break every local test server an agent
// starts, so no network rule is applied there. When the namespace is shared
// with the host and the network is proxied (network_namespace_shared: a
// test-only layout today), TCP bind is denied and TCP connect is allowed
// only to the proxy ports. The terminal profile's open network (T2) gets no
// TCP rule either.
// Scoping (ABI 6): abstract Unix sockets and signals are limited to the
// command's own Landlock domain (it cannot reach a host service's abstract
// socket). ccsb-init shares the domain; as the sandbox's PID 1 it gets no
// signal from inside it has no handler for (render/bwrap/render.hpp, --as-pid-1).
#pragma once

#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/layout.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::confine {

struct landlock_rules {
  std::vector<std::string> read_exec;   // read files, list, execute
  std::vector<std::string> read_write;  // every right of the ABI
  std::vector<std::string> proc_like;   // read, list, write existing files
  bool list_everywhere{true};           // READ_DIR beneath "/"
  bool restrict_tcp{false};             // handle TCP bind+connect (ABI 4)
  std::vector<std::uint16_t> connect_ports; // allowed TCP connect ports when restrict_tcp
  bool scope_abstract_unix{true};       // ABI 6
  bool scope_signal{true};              // ABI 6
  friend bool operator==(const landlock_rules&, const landlock_rules&) = default;
};

inline landlock_rules landlock_rules_for(const policy& pol, bool network_namespace_shared,
                                         std::vector<std::uint16_t> proxy_ports = {3128, 1080}) {
  landlock_rules r;
  // The same system tree the renderer binds (render/bwrap/layout.hpp kSystemTop;
  // the supervisor skips what does not exist), /etc and ccsb's own files.
  for (auto p : kSystemTop) r.read_exec.emplace_back(p);
  r.read_exec.emplace_back("/etc");
  r.read_exec.emplace_back(kGuestRunDir);
  for (const auto& m : pol.mounts) (m.writable ? r.read_write : r.read_exec).push_back(m.guest_path);
  r.read_write.emplace_back("/tmp");
  if (auto home = scratch_home(pol)) r.read_write.push_back(*home); // E5: the scratch HOME (render/bwrap/render.hpp)
  r.read_write.emplace_back("/dev");
  r.proc_like.emplace_back("/proc");
  for (auto* v : {&r.read_exec, &r.read_write}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  if (network_namespace_shared && pol.network.kind == network_kind::proxied) {
    r.restrict_tcp = true;
    r.connect_ports = std::move(proxy_ports);
  }
  return r;
}

// ccsb-init's options for a ruleset (one per path or port; paths may hold
// any byte but NUL, and argv carries them as they are).
inline std::vector<std::string> to_init_args(const landlock_rules& r) {
  std::vector<std::string> a{"--landlock", "on"};
  for (const auto& p : r.read_exec) a.insert(a.end(), {"--landlock-rx", p});
  for (const auto& p : r.read_write) a.insert(a.end(), {"--landlock-rw", p});
  for (const auto& p : r.proc_like) a.insert(a.end(), {"--landlock-proc", p});
  if (r.restrict_tcp) {
    a.insert(a.end(), {"--landlock-tcp", "restrict"});
    for (auto port : r.connect_ports) a.insert(a.end(), {"--landlock-connect", std::to_string(port)});
  }
  return a;
}

inline bool is_landlock_option(std::string_view a) {
  return a == "--landlock" || a == "--landlock-rx" || a == "--landlock-rw" || a == "--landlock-proc" ||
         a == "--landlock-tcp" || a == "--landlock-connect";
}

// One option and its value, as ccsb-init parses them; errors name the option.
inline result<void> parse_init_arg(landlock_rules& r, std::string_view opt, std::string_view value) {
  auto path = [&](std::vector<std::string>& into) -> result<void> {
    if (value.empty() || value.front() != '/')
      return make_error(errc::invalid_argument, std::string(opt), "expected an absolute path");
    into.emplace_back(value);
    return ok();
  };
  if (opt == "--landlock") {
    if (value != "on") return make_error(errc::invalid_argument, "--landlock", "expected on");
    return ok();
  }
  if (opt == "--landlock-rx") return path(r.read_exec);
  if (opt == "--landlock-rw") return path(r.read_write);
  if (opt == "--landlock-proc") return path(r.proc_like);
  if (opt == "--landlock-tcp") {
    if (value != "restrict") return make_error(errc::invalid_argument, "--landlock-tcp", "expected restrict");
    r.restrict_tcp = true;
    return ok();
  }
  if (opt == "--landlock-connect") {
    unsigned v = 0;
    for (char c : value) {
      if (c < '0' || c > '9' || v > 65535) return make_error(errc::invalid_argument, "--landlock-connect", "expected a port");
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (value.empty() || v == 0 || v > 65535 || value.front() == '0')
      return make_error(errc::invalid_argument, "--landlock-connect", "expected a port from 1 to 65535");
    r.connect_ports.push_back(static_cast<std::uint16_t>(v));
    return ok();
  }
  return make_error(errc::invalid_argument, std::string(opt), "not a Landlock option");
}

} // namespace ccsb::confine
