// ccsb/policy.hpp — compile a SandboxSpec into one backend-neutral policy
// (P1-P8, T2, E1).
//
//   compile(spec, profile, host_facts) -> result<policy>
//
// is pure: the host is described by host_facts (home directory, a symlink
// resolver, the launcher's environment), so the result is deterministic and
// testable without touching the host. Both renderers (bubblewrap argv,
// Seatbelt profile) consume the same policy value.
//
// Conventions the renderers rely on:
//  * Every path is absolute and lexically normal. Every read- or write-
//    denied path appears in its literal and its symlink-resolved spelling
//    (P6); a path that does not resolve stays as written; globs are left
//    alone; no duplicates.
//  * `mounts` lists what is visible (bwrap); `write_allow` the writable roots.
//    A write_allow entry that lies inside a write_deny entry is a deliberate
//    exception (runner state dirs, P3) and wins: renderers apply write_allow
//    after write_deny. No write_allow entry ever lies inside a protected path
//    (compile refuses such a spec).
//  * Lists are sorted by path, then by reason, so output is stable.
#pragma once

#include "ccsb/egress.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"

#include <range/v3/action/sort.hpp>
#include <range/v3/action/unique.hpp>
#include <range/v3/algorithm/any_of.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

// The policy base a run starts from.
enum class profile {
  dispatch, // the spec + P4/P5 sets + the required P7 globs (default)
  terminal, // T2: $HOME and the workdir writable, network open, core secrets denied
  spec,     // the spec + P4/P5 sets, without the P7 globs (an explicit choice)
};

constexpr std::string_view to_string(profile p) noexcept {
  switch (p) {
  case profile::dispatch: return "dispatch";
  case profile::terminal: return "terminal";
  case profile::spec: return "spec";
  }
  return "dispatch";
}

inline result<profile> parse_profile(std::string_view s) {
  if (s == "dispatch") return profile::dispatch;
  if (s == "terminal") return profile::terminal;
  if (s == "spec") return profile::spec;
  return make_error(errc::invalid_argument, "profile", "expected dispatch, terminal or spec, got \"" + std::string(s) + "\"");
}

// What compile() needs to know about the host.
struct host_facts {
  std::string home; // absolute home directory of the user
  // Symlink resolution (realpath); nullopt when the path does not resolve.
  std::function<std::optional<std::string>(const std::string&)> resolve;
  // The launcher's own environment, name -> value (E1 passes a few of them).
  std::map<std::string, std::string> env;
};

struct path_rule {
  std::string path;
  std::string why;
  friend bool operator==(const path_rule&, const path_rule&) = default;
  friend auto operator<=>(const path_rule&, const path_rule&) = default;
};

struct mount_rule {
  std::string host_path;
  std::string guest_path;
  bool writable{false};
  friend bool operator==(const mount_rule&, const mount_rule&) = default;
  friend auto operator<=>(const mount_rule&, const mount_rule&) = default;
};

// A filename glob denied for writing at any depth of `root` (P7).
struct glob_rule {
  std::string root;
  std::string name; // ".env", "*.key", "*.pem"
  bool required{true};
  std::string why;
  std::string glob() const { return root + "/**/" + name; }
  friend bool operator==(const glob_rule&, const glob_rule&) = default;
  friend auto operator<=>(const glob_rule&, const glob_rule&) = default;
};

struct exec_rules {
  std::vector<path_rule> denied_binaries; // M5
  bool deny_in_writable{true};            // M5: no exec from writable dirs (macOS)
  std::vector<std::string> grant_roots;   // execGrantRoots (macOS; ignored on Linux, L5)
  friend bool operator==(const exec_rules&, const exec_rules&) = default;
};

enum class network_kind {
  proxied, // only through the session's egressd (N1-N7)
  open,    // terminal profile (T2): host network, no proxy
};

struct network_rule {
  network_kind kind{network_kind::proxied};
  bool enabled{true};               // networkEnabled (N6)
  std::vector<std::string> allow;   // session allowlist (baseline added by egressd)
  friend bool operator==(const network_rule&, const network_rule&) = default;
};

struct policy {
  ccsb::profile base{profile::dispatch};
  ccsb::mode mode{mode::chat};
  std::string session_id;
  std::string workdir;
  std::vector<mount_rule> mounts;
  std::vector<path_rule> read_deny;
  std::vector<path_rule> write_allow;
  std::vector<path_rule> write_deny;
  std::vector<glob_rule> write_deny_globs;
  exec_rules exec;
  network_rule network;
  env_list environment; // E1: the complete child environment, proxy variables excluded
  friend bool operator==(const policy&, const policy&) = default;

  bool requires_glob_denials() const {
    return ranges::any_of(write_deny_globs, [](const glob_rule& g) { return g.required; });
  }
};

namespace detail {

inline std::string expand_home(std::string_view p, const std::string& home) {
  if (p.substr(0, 2) == "~/") return home + std::string(p.substr(1));
  return std::string(p);
}

// P6: literal + resolved spellings, deduplicated later.
inline void add_spellings(std::vector<path_rule>& out, const std::string& path, std::string_view why,
                          const host_facts& facts) {
  if (is_glob(path)) {
    out.push_back({path, std::string(why)});
    return;
  }
  std::string lit = lexical_normal(path);
  out.push_back({lit, std::string(why)});
  if (facts.resolve) {
    if (auto r = facts.resolve(lit)) {
      std::string res = lexical_normal(*r);
      if (!res.empty() && res != lit) out.push_back({res, std::string(why)});
    }
  }
}

// Sort by path and keep the first reason for each path (no duplicates).
inline void dedupe(std::vector<path_rule>& v) {
  ranges::actions::sort(v);
  v |= ranges::actions::unique([](const path_rule& a, const path_rule& b) { return a.path == b.path; });
}

inline result<std::string> checked_abs(const std::string& p, std::string field) {
  if (p.empty() || p.front() != '/')
    return make_error(errc::invalid_argument, std::move(field), "path must be absolute: \"" + p + "\"");
  return lexical_normal(p);
}

} // namespace detail

// E1: variables passed from the launcher's environment unless policy says
// otherwise. Everything else is dropped; E3 sanitisation runs on top.
inline constexpr std::string_view kPassedEnvironment[] = {
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE",
    "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME", "TZ", "NO_COLOR",
};

inline result<policy> compile(const sandbox_spec& spec, profile base, const host_facts& facts) {
  using namespace detail;
  policy pol;
  pol.base = base;
  pol.mode = spec.mode;
  pol.session_id = spec.session_id;
  if (facts.home.empty() || facts.home.front() != '/')
    return make_error(errc::invalid_argument, "home", "host facts need an absolute home directory");
  const std::string home = lexical_normal(facts.home);

  // Protected checkouts (P2): normalised once, used for every check below.
  std::vector<std::string> protected_paths;
  for (std::size_t i = 0; i < spec.protected_paths.size(); ++i) {
    auto p = checked_abs(spec.protected_paths[i], "protectedPaths[" + std::to_string(i) + "]");
    if (!p) return std::move(p).err();
    protected_paths.push_back(*p);
  }
  auto in_protected = [&](const std::string& p) {
    return ranges::any_of(protected_paths, [&](const std::string& root) { return within(p, root); });
  };

  // Mounts and writable roots (P1, P3).
  const bool writable_mode = spec.mode == mode::chat;
  std::vector<std::string> writable_roots;
  for (std::size_t i = 0; i < spec.bind_mounts.size(); ++i) {
    const auto& m = spec.bind_mounts[i];
    std::string field = "bindMounts[" + std::to_string(i) + "]";
    auto host_path = checked_abs(m.host_path, field + ".hostPath");
    if (!host_path) return std::move(host_path).err();
    auto guest_path = checked_abs(m.guest_path.empty() ? m.host_path : m.guest_path, field + ".guestPath");
    if (!guest_path) return std::move(guest_path).err();
    if (*guest_path != *host_path)
      return make_error(errc::invalid_argument, field + ".guestPath",
                        "the native backend maps every path to itself; guestPath must equal hostPath");
    bool writable = writable_mode && !m.read_only && !in_protected(*host_path);
    pol.mounts.push_back({*host_path, *guest_path, writable});
    if (writable) writable_roots.push_back(*host_path);
  }
  std::vector<std::string> state_dirs;
  for (std::size_t i = 0; i < spec.runner_state_dirs.size(); ++i) {
    std::string field = "runnerStateDirs[" + std::to_string(i) + "]";
    auto p = checked_abs(spec.runner_state_dirs[i], field);
    if (!p) return std::move(p).err();
    if (in_protected(*p))
      return make_error(errc::invalid_argument, field,
                        "a runner state dir lies inside a protected path, which is never writable (P2)");
    pol.mounts.push_back({*p, *p, true});
    state_dirs.push_back(*p);
  }

  std::string workdir;
  if (spec.guest_workdir) {
    auto w = checked_abs(*spec.guest_workdir, "guestWorkdir");
    if (!w) return std::move(w).err();
    workdir = *w;
  } else if (!spec.bind_mounts.empty()) {
    workdir = pol.mounts.front().guest_path;
  } else {
    workdir = "/";
  }

  // Terminal profile (T2): $HOME and the workdir writable, open network, the
  // core secrets read-denied; nothing else from P4/P5/P7.
  if (base == profile::terminal) {
    pol.mounts.push_back({home, home, true});
    writable_roots.push_back(home);
    if (workdir != "/") {
      pol.mounts.push_back({workdir, workdir, true});
      writable_roots.push_back(workdir);
    }
    for (const auto& e : kTerminalReadDenyPaths) add_spellings(pol.read_deny, expand_home(e.path, home), e.why, facts);
    pol.network.kind = network_kind::open;
  } else {
    for (const auto& e : kReadDenyPaths) add_spellings(pol.read_deny, expand_home(e.path, home), e.why, facts);
    pol.network.kind = network_kind::proxied;
  }
  pol.network.enabled = spec.network_enabled;
  if (spec.network_enabled) pol.network.allow = spec.egress_allowlist;
  // Validate the allowlist here, so a bad pattern fails before anything runs.
  // (egressd compiles the full rule set; only the session's list can be bad.)
  auto allow_patterns = parse_patterns(spec.egress_allowlist, "egressAllowlist");
  if (!allow_patterns) return std::move(allow_patterns).err();

  ranges::actions::sort(writable_roots);
  writable_roots |= ranges::actions::unique;
  for (const auto& r : writable_roots) add_spellings(pol.write_allow, r, "writable root", facts);
  for (const auto& r : state_dirs) add_spellings(pol.write_allow, r, "runner state dir (P3)", facts);

  // Write denials (P2, P5).
  for (const auto& p : protected_paths) add_spellings(pol.write_deny, p, "protected checkout (P2)", facts);
  if (base != profile::terminal) {
    auto carved_out = [&](const std::string& p) {
      // P3: a P5 default inside a runner state dir yields to it.
      return ranges::any_of(state_dirs, [&](const std::string& s) { return within(p, s); });
    };
    for (const auto& e : kWriteDenyPaths) {
      std::string_view rel = e.path;
      if (rel.substr(0, 2) == "./") {
        for (const auto& root : writable_roots) {
          std::string_view sub = rel.substr(2);
          // A writable root that is itself a .git directory: its hooks and
          // config are denied directly; worktree files do not apply to it.
          if (root.size() >= 5 && std::string_view(root).substr(root.size() - 5) == "/.git") {
            if (sub.substr(0, 5) != ".git/") continue;
            sub.remove_prefix(5);
          }
          std::string p = lexical_normal(root + "/" + std::string(sub));
          if (!carved_out(p)) add_spellings(pol.write_deny, p, e.why, facts);
        }
      } else {
        std::string p = lexical_normal(expand_home(rel, home));
        if (!carved_out(p)) add_spellings(pol.write_deny, p, e.why, facts);
      }
    }
    // P7: required globs at any depth of every writable root.
    // Runner state dirs are writable roots too.
    if (base == profile::dispatch) {
      std::vector<std::string> roots = writable_roots;
      roots.insert(roots.end(), state_dirs.begin(), state_dirs.end());
      for (const auto& root : roots)
        for (const auto& g : kRequiredWriteDenyGlobs)
          pol.write_deny_globs.push_back({root, std::string(g.path), true, std::string(g.why)});
      ranges::actions::sort(pol.write_deny_globs);
    }
    for (const auto& b : kDangerousBinaries) pol.exec.denied_binaries.push_back({std::string(b.path), std::string(b.why)});
    pol.exec.deny_in_writable = true;
    for (std::size_t i = 0; i < spec.exec_grant_roots.size(); ++i) {
      auto g = checked_abs(spec.exec_grant_roots[i], "execGrantRoots[" + std::to_string(i) + "]");
      if (!g) return std::move(g).err();
      pol.exec.grant_roots.push_back(*g);
    }
  } else {
    pol.exec.deny_in_writable = false;
  }

  dedupe(pol.read_deny);
  dedupe(pol.write_allow);
  dedupe(pol.write_deny);
  // One mount per path; a path that is both a read-only bind and a runner
  // state dir (P3) or the terminal's home stays writable.
  ranges::actions::sort(pol.mounts);
  std::vector<mount_rule> merged;
  for (auto& m : pol.mounts) {
    if (!merged.empty() && merged.back().host_path == m.host_path)
      merged.back().writable = merged.back().writable || m.writable;
    else
      merged.push_back(std::move(m));
  }
  pol.mounts = std::move(merged);
  // A writable allow may never reach into a protected path (P2), also not via
  // its resolved spelling.
  for (const auto& a : pol.write_allow)
    if (in_protected(a.path))
      return make_error(errc::invalid_argument, "protectedPaths",
                        "writable path \"" + a.path + "\" lies inside a protected path");
  pol.workdir = workdir;

  // E1: explicit environment; E3 sanitisation on top.
  env_list env;
  for (auto name : kPassedEnvironment) {
    auto it = facts.env.find(std::string(name));
    if (it != facts.env.end()) env.push_back({it->first, it->second});
  }
  if (std::none_of(env.begin(), env.end(), [](const env_var& v) { return v.name == "PATH"; }))
    env.push_back({"PATH", "/usr/local/bin:/usr/bin:/bin"});
  if (std::none_of(env.begin(), env.end(), [](const env_var& v) { return v.name == "HOME"; })) env.push_back({"HOME", home});
  pol.environment = sanitize_environment(env).kept;
  return pol;
}

} // namespace ccsb
