// ccsb/policy.hpp — compile a SandboxSpec into one backend-neutral policy
// (P1-P8, T2, E1).
//
//   compile(spec, profile, host_facts) -> result<policy>
//
// is pure: the host is described by host_facts (home directory, a symlink
// resolver, a path lookup, `.git` file resolution, the launcher's
// environment), so the result is deterministic and testable without
// touching the host. Both renderers (bubblewrap argv, Seatbelt profile)
// consume the same policy value, and decide nothing that one of them would
// have to decide again:
//
//   check_enforceable(policy, enforcement) -> result<void>
//
// is the P7/L4 refusal every renderer applies first with what its backend
// enforces (see "P7/L4"), so the rule and its message exist once.
//
// Conventions the renderers rely on:
//  * Every path is absolute and lexically normal, and every decision is
//    taken on RESOLVED paths (facts.resolve, the injected realpath): bind
//    mounts, runner state dirs, the terminal's HOME and workdir, protected
//    paths and the denied sets are resolved before anything is compared, so
//    `--bind LINK/ws`, `D/.`, `D//` or a symlink to HOME decide exactly what
//    `/real/ws`, `D` or HOME decide. `mounts` and `write_allow` hold only the
//    resolved spelling (guest = host = resolved: the sandbox sees a bind at
//    its resolved path). A path that does not exist resolves through its
//    deepest existing ancestor (realpath of the ancestor + the missing
//    names, which cannot be symlinks yet).
//  * Every read- or write-denied path appears in its literal and its
//    resolved spelling (P6); globs are left alone; no duplicates. Each
//    carries its path_shape (paths.hpp): what it is by nature, so a renderer
//    knows which placeholder occupies it when it is missing.
//  * `mounts` lists what is visible (bwrap), one entry per resolved path; a
//    path bound twice with different flags is read-only (read-only wins),
//    except that a runner state dir is writable (P3) and the terminal's HOME
//    and workdir are writable unless a bind mount of the same path says
//    otherwise. `write_allow` holds the writable roots. A write_allow entry
//    that lies inside a write_deny entry is a deliberate exception (runner
//    state dirs, P3) and wins: renderers apply write_allow after write_deny.
//    No write_allow entry ever lies inside a protected path (a bind there is
//    read-only, a state dir there is refused).
//  * Refused with a typed error naming the field (P8): a bind source or
//    state dir that does not resolve; a bind of "/" or of anything at or
//    below /proc, /sys, /dev (kNeverBoundTrees); a writable bind, state dir
//    or terminal root at or below kNeverWritableTrees or equal to
//    kNeverWritableItself; a runner state dir that is HOME, or an ancestor
//    of a P5 path (it would silently make that path writable).
//  * Lists are sorted by path, then by reason, so output is stable.
//  * Toolchains on PATH (E4, compile_options::path_toolchains, on by
//    default, not in the terminal profile whose HOME is bound anyway). The
//    caller's PATH is a fact (host_facts::env["PATH"]); no directory is
//    listed. Every PATH entry inside HOME that resolves (inside HOME too)
//    is made visible READ-ONLY, or, when it lies inside a known toolchain
//    home (kToolchainHomes: ~/.cargo, ~/.pyenv, ~/.nvm, ...), that whole
//    home and the one it needs beside it (~/.cargo needs ~/.rustup). Never
//    added, with a note saying why: HOME itself or anything above it, a
//    path inside a read-denied (P4) path, a path that contains a whole P4
//    credential store (a read-denied directory such as ~/.ssh; P4 files
//    inside an added home, ~/.cargo/credentials.toml, are masked by the
//    renderer like everywhere else), a bind P8 refuses, anything a bind
//    mount or state dir already makes visible (the caller's own flags
//    decide there), and a toolchain the sandbox's host uid cannot reach
//    (host_facts::reach, probed by the launcher). Entries outside HOME are
//    not added (the system tree is visible anyway; bind other trees
//    explicitly). policy::toolchains lists
//    what was added, policy::notes every decision, for the start-up
//    details.
//  * SSH known hosts (E4, N2). policy::ssh_known_hosts names the user's
//    ~/.ssh/known_hosts (resolved spelling) for the renderer to hand ssh a
//    read-only copy of; ~/.ssh itself stays read-denied (P4). Known host
//    keys are public keys; the file says which hosts the user connects to.
//  * `.git` as a file (worktrees, submodules: "gitdir: PATH"), in every
//    profile. When a writable mount holds a `.git` FILE (facts.kind), the
//    file itself is write-denied (rewriting it would point git at a
//    directory of the command's choosing) and, for each git directory
//    facts.gitdirs reports (the gitdir and its commondir), the git lists of
//    paths.hpp apply: hooks and config in the common dir, commondir and
//    config.worktree in each, gitdir in the worktree's administrative
//    directory. These entries are exactly as the file and the directories
//    are spelled (no P6 second spelling: the mount and git's own paths are
//    resolved already).
//  * P7/L4, P5/L3 (check_enforceable). A policy with required filename-glob
//    denials can run only on a backend that forbids creating a file by its
//    name inside a writable root: Seatbelt does (M7 regexes); bubblewrap
//    alone cannot, only with the X1 broker where the kernel has its
//    features (ccsb/broker/kernel_probe.hpp). The same holds for P5 below
//    the writable roots and L3 in every profile but the terminal one (the
//    spec profile drops only the P7 globs): policy::requires_broker().
//    Otherwise: errc::unenforceable, field "backend", naming the rule. It is a
//    step of its own, not part of compile(), because it depends on the
//    backend and compile() does not (P8: one backend-neutral policy; the
//    same policy also drives a `none` run, B8, which enforces nothing and is
//    not refused).
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/create_allow.hpp"
#include "ccsb/egress.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"

#include <range/v3/action/sort.hpp>
#include <range/v3/action/unique.hpp>
#include <range/v3/algorithm/any_of.hpp>

#include <algorithm>
#include <cstdint>
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

enum class path_kind { missing, file, dir, symlink, other };

constexpr std::string_view to_string(path_kind k) noexcept {
  switch (k) {
  case path_kind::missing: return "missing";
  case path_kind::file: return "file";
  case path_kind::dir: return "dir";
  case path_kind::symlink: return "symlink";
  case path_kind::other: return "other";
  }
  return "other";
}

// What compile() needs to know about the host.
struct host_facts {
  std::string home; // absolute home directory of the user
  // Symlink resolution (realpath: every component resolved, the path must
  // exist); nullopt when the path does not resolve. Required: compile()
  // decides on resolved paths and refuses to run without a resolver.
  std::function<std::optional<std::string>(const std::string&)> resolve;
  // lstat-like: what is at a host path (not following a final symlink).
  // Required: compile() looks for `.git` files in the writable mounts.
  std::function<path_kind(const std::string&)> kind;
  // For a `.git` FILE: the absolute git directories it leads to (the gitdir
  // named in "gitdir: ..." and its commondir, if any). Empty when unknown;
  // unset: unknown for every file (only the file itself is then denied).
  std::function<std::vector<std::string>(const std::string&)> gitdirs;
  // The text of a linked worktree's administrative directory's HEAD (a
  // regular file; nullopt when missing or anything else). Unset: unknown,
  // so no ref of that worktree may move (see "Linked worktrees").
  std::function<std::optional<std::string>(const std::string&)> git_head;
  // The names in a host directory (no "." or ".."; empty when it is not a
  // readable directory). Expands the `*` of kToolchainReadDenyPaths; unset:
  // a launch where a toolchain home with such files exists is refused.
  std::function<std::vector<std::string>(const std::string&)> list_dir;
  // The launcher's own environment, name -> value (E1 passes a few of them).
  std::map<std::string, std::string> env;
  // L1, E4: the host uid the sandbox runs as when it may not reach what the
  // launcher reaches (a root launcher running it as a uid it shares: asked
  // for, or no uid of its own on this host), and whether that uid can search
  // every ancestor of a path and read and execute it. A toolchain it cannot
  // reach is not made visible: bwrap, running as that uid, would fail the
  // whole run on it. Unset: it reaches what the launcher reaches (a non-root
  // launcher; a root launcher's session uid, its binds idmapped to it).
  struct sandbox_reach {
    std::uint32_t uid{0};
    std::function<bool(const std::string&)> reaches;
  };
  std::optional<sandbox_reach> reach;
};

// Choices of the caller that are not facts about the host.
struct compile_options {
  // E4: make the toolchains on the caller's PATH inside HOME visible
  // read-only (see "Toolchains on PATH"); ccsb-run --no-path-toolchains
  // turns it off.
  bool path_toolchains{true};
};

struct path_rule {
  std::string path;
  std::string why;
  path_shape shape{path_shape::file}; // what the name is by nature (its placeholder when missing)
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

// A writable bind that is a linked worktree of a protected checkout (see
// "Linked worktrees"): its common dir becomes a writable mount whose names
// the X1 broker decides one by one (broker::decide_linked).
struct linked_worktree_rule {
  std::string worktree; // the bind (resolved)
  std::string admin;    // COMMON/worktrees/NAME
  std::string common;   // the common git directory
  std::string branch;   // "refs/heads/B" checked out at launch; empty: detached (no ref moves)
  friend bool operator==(const linked_worktree_rule&, const linked_worktree_rule&) = default;
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
  std::string home; // the host user's HOME (host_facts::home, normalised): where E5's scratch HOME goes when unbound
  std::vector<mount_rule> mounts;
  std::vector<path_rule> read_deny;
  std::vector<path_rule> write_allow;
  std::vector<path_rule> write_deny;
  std::vector<glob_rule> write_deny_globs;
  // P7 exceptions (createAllow, create_allow.hpp): absolute globs below a
  // writable root where the names of write_deny_globs may be created.
  std::vector<std::string> create_allow;
  exec_rules exec;
  network_rule network;
  env_list environment; // E1: the passed variables, E3-sanitised (session_environment.hpp completes it)
  env_list environment_additions; // the caller's additions (request_builder.hpp), E3-checked
  std::vector<path_rule> toolchains;        // E4: read-only mounts added from PATH, and why (also in `mounts`)
  std::vector<std::string> ssh_known_hosts; // E4: host files ssh gets a read-only copy of as known hosts
  std::vector<std::string> notes;           // decisions worth a start-up line (toolchains added or not)
  // Each writable mount as spelled through a symlink (P6 resolves it): the
  // launcher refuses to hand a root-owned one to a session uid of its own
  // (ccsb/launch/linux/session_uid.hpp check_symlinked_binds).
  struct symlinked_spelling {
    std::string resolved, written, field;
    friend bool operator==(const symlinked_spelling&, const symlinked_spelling&) = default;
  };
  std::vector<symlinked_spelling> symlinked_writable;
  std::vector<linked_worktree_rule> linked_worktrees; // their common dirs are in `mounts`, writable
  friend bool operator==(const policy&, const policy&) = default;

  bool requires_glob_denials() const {
    return ranges::any_of(write_deny_globs, [](const glob_rule& g) { return g.required; });
  }
  // What only a creation-rule backend (X1) enforces on Linux: in every
  // profile but the terminal one, P5 below the writable roots (the git rules
  // of nested repositories, submodules and linked worktrees, no `.git`
  // entry created or replaced, the absent write-denied names) and L3 (no
  // connect to a host Unix socket inside a bind), plus the P7 globs where
  // the profile has them; with the host's network (T2), the excepted
  // destinations (the host's own services, link-local and metadata
  // addresses, abstract sockets).
  bool requires_broker() const { return base != profile::terminal || network.kind == network_kind::open; }
};

namespace detail {

inline std::string expand_home(std::string_view p, const std::string& home) {
  if (p.substr(0, 2) == "~/") return (home == "/" ? std::string() : home) + std::string(p.substr(1));
  return std::string(p);
}

// The resolved spelling of an absolute, lexically normal path: realpath of
// the deepest ancestor-or-self that resolves, plus the names below it that
// do not exist (they cannot be symlinks yet). The literal path when nothing
// resolves (not even "/").
inline std::string resolved_spelling(const std::string& lit, const host_facts& facts) {
  if (!facts.resolve || lit.empty() || lit.front() != '/') return lit;
  std::string head = lit, tail;
  for (;;) {
    if (auto r = facts.resolve(head)) {
      std::string n = lexical_normal(*r);
      if (n.empty()) return lit; // a resolver that answers with a relative path is ignored
      if (tail.empty()) return n;
      return (n == "/" ? std::string() : n) + tail;
    }
    if (head == "/") return lit;
    auto slash = head.rfind('/');
    tail = head.substr(slash) + tail;
    head = slash == 0 ? std::string("/") : head.substr(0, slash);
  }
}

// P6: literal + resolved spellings, deduplicated later.
inline void add_spellings(std::vector<path_rule>& out, const std::string& path, std::string_view why,
                          path_shape shape, const host_facts& facts) {
  if (is_glob(path)) {
    out.push_back({path, std::string(why), shape});
    return;
  }
  std::string lit = lexical_normal(path);
  out.push_back({lit, std::string(why), shape});
  std::string res = resolved_spelling(lit, facts);
  if (res != lit) out.push_back({res, std::string(why), shape});
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

// "LINK" (resolves to "/real"), or just "/real".
inline std::string spelled(const std::string& lit, const std::string& res) {
  if (lit == res) return "\"" + res + "\"";
  return "\"" + lit + "\" (resolves to \"" + res + "\")";
}

// P8: why a bind of `res` (resolved; `lit` as written) is refused, if it is.
inline std::optional<std::string> refused_bind(const std::string& lit, const std::string& res, bool writable) {
  const std::string what = spelled(lit, res);
  for (const std::string& p : {lit, res}) {
    if (p == "/")
      return "a bind of / would replace the sandbox's own /proc, /dev, /tmp and /etc with the host's: " + what +
             "; bind the directories the command needs instead";
    for (const auto& t : kNeverBoundTrees)
      if (within(p, t.path))
        return "a bind at or below " + std::string(t.path) + " is never allowed (" + std::string(t.why) + "): " + what;
    if (!writable) continue;
    for (const auto& t : kNeverWritableTrees)
      if (within(p, t.path))
        return "a writable bind at or below " + std::string(t.path) + " is never allowed (" + std::string(t.why) +
               "): " + what + "; bind it read-only (readOnly, --bind PATH:ro)";
    for (const auto& t : kNeverWritableItself)
      if (p == t.path)
        return "a writable bind of " + std::string(t.path) + " itself is never allowed (" + std::string(t.why) +
               "): " + what + "; bind the directory below it that the command needs";
  }
  return std::nullopt;
}

} // namespace detail

// P4 inside toolchain homes (kToolchainReadDenyPaths): every `*` expanded
// over what the host has, each match read-denied in both spellings. Only
// existing files are listed: the homes are never writable inside.
inline result<void> deny_toolchain_secrets(std::vector<path_rule>& read_deny, const std::string& home,
                                           const host_facts& facts) {
  using namespace detail;
  for (const auto& e : kToolchainReadDenyPaths) {
    const std::string pattern = expand_home(e.path, home);
    std::vector<std::string> found{std::string()};
    std::size_t i = 1;
    while (i <= pattern.size() && !found.empty()) {
      std::size_t j = pattern.find('/', i);
      if (j == std::string::npos) j = pattern.size();
      const std::string name = pattern.substr(i, j - i);
      std::vector<std::string> next;
      for (const auto& dir : found) {
        if (name != "*") {
          if (facts.kind(dir + "/" + name) != path_kind::missing) next.push_back(dir + "/" + name);
          continue;
        }
        if (!facts.list_dir)
          return make_error(errc::invalid_argument, "list_dir",
                            "host facts need a directory listing: \"" + dir + "\" may hold " + std::string(e.why) +
                                " (P4)");
        for (const auto& n : facts.list_dir(dir))
          if (!n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos) next.push_back(dir + "/" + n);
      }
      found = std::move(next);
      i = j + 1;
    }
    for (const auto& f : found) add_spellings(read_deny, f, std::string(e.why), e.shape, facts);
  }
  return ok();
}

namespace detail {

// P7 exceptions (createAllow, see create_allow.hpp and "P7 exceptions"):
// each pattern in its absolute form below the resolved writable roots. A
// relative one applies below every writable root and runner state dir; an
// absolute one must lie strictly below one of them, spelled as the root is
// bound or resolved (nothing below the root is resolved: a `.venv` that is
// a symlink leads elsewhere, where the exception does not apply). Refused,
// naming createAllow[i]: an absolute pattern below no writable root, one
// that covers a root (`/ws/**`), one that reaches into a protected path.
// Outside the dispatch profile there is no P7 rule to except from: a note.
inline result<void> compile_create_allow(policy& pol, const sandbox_spec& spec, profile base,
                                         const std::vector<std::string>& writable_roots,
                                         const std::vector<std::string>& state_dirs,
                                         const std::map<std::string, std::vector<std::string>>& written,
                                         const std::vector<std::string>& state_literals,
                                         const std::vector<std::string>& protected_paths) {
  std::vector<std::pair<std::string, std::string>> spellings; // spelling -> resolved root
  for (const auto& r : writable_roots) {
    spellings.emplace_back(r, r);
    if (auto it = written.find(r); it != written.end())
      for (const auto& w : it->second) spellings.emplace_back(lexical_normal(w), r);
  }
  for (std::size_t i = 0; i < state_dirs.size(); ++i) {
    spellings.emplace_back(state_dirs[i], state_dirs[i]);
    if (i < state_literals.size()) spellings.emplace_back(lexical_normal(state_literals[i]), state_dirs[i]);
  }
  std::vector<std::string> roots = writable_roots;
  roots.insert(roots.end(), state_dirs.begin(), state_dirs.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < spec.create_allow.size(); ++i) {
    const std::string field = "createAllow[" + std::to_string(i) + "]";
    const std::string& p = spec.create_allow[i];
    if (auto r = create_allow::syntax(p); !r) return nest(field, std::move(r).err());
    std::vector<std::string> forms;
    if (p.front() == '/') {
      const std::pair<std::string, std::string>* best = nullptr;
      for (const auto& sp : spellings)
        if (p.size() > sp.first.size() && p.compare(0, sp.first.size(), sp.first) == 0 &&
            (sp.first == "/" || p[sp.first.size()] == '/') &&
            (!best || sp.first.size() > best->first.size()))
          best = &sp;
      if (!best)
        return make_error(errc::invalid_pattern, field,
                          "createAllow pattern \"" + p + "\" lies below no writable root; an absolute pattern names "
                          "its root as it is bound");
      const std::string rel = p.substr(best->first == "/" ? 1 : best->first.size() + 1);
      if (auto r = create_allow::syntax(rel); !r)
        return make_error(errc::invalid_pattern, field,
                          "createAllow pattern \"" + p + "\" below the writable root \"" + best->first +
                              "\": " + r.err().message);
      forms.push_back(create_allow::below(best->second, rel));
    } else {
      for (const auto& r : roots)
        if (create_allow::shape(r + "/x")) forms.push_back(create_allow::below(r, p)); // not in a git directory root
    }
    for (const auto& f : forms) {
      for (const auto& r : roots)
        if (create_allow::covers_root(f, r))
          return make_error(errc::invalid_pattern, field,
                            "createAllow pattern \"" + p + "\" covers the writable root \"" + r + "\" itself");
      for (const auto& pp : protected_paths)
        if (create_allow::matches(f, pp) || create_allow::reaches_below(f, pp))
          return make_error(errc::invalid_pattern, field,
                            "createAllow pattern \"" + p + "\" reaches into the protected path \"" + pp +
                                "\" (P2), which is never writable");
      out.push_back(f);
    }
  }
  if (spec.create_allow.empty()) return ok();
  if (base != profile::dispatch) {
    pol.notes.push_back("createAllow has no effect in the " + std::string(to_string(base)) +
                        " profile: it has no P7 rule to except from");
    return ok();
  }
  ranges::actions::sort(out);
  out |= ranges::actions::unique;
  pol.create_allow = std::move(out);
  return ok();
}

} // namespace detail

namespace detail {

// What every step of compile reads: the spec, the profile, the host facts
// and HOME in both spellings.
struct compile_context {
  const sandbox_spec& spec;
  profile base;
  const host_facts& facts;
  std::string home, home_res;

  // Resolves a path that must exist (a bind source): nullopt when it does not.
  std::optional<std::string> must_resolve(const std::string& lit) const {
    auto r = facts.resolve(lit);
    if (!r) return std::nullopt;
    std::string n = lexical_normal(*r);
    if (n.empty()) return std::nullopt;
    return n;
  }
};

// Protected checkouts (P2): both spellings, used for every check after.
struct protected_set {
  std::vector<std::string> paths;
  bool covers(const std::string& p) const {
    return ranges::any_of(paths, [&](const std::string& root) { return within(p, root); });
  }
};

inline result<protected_set> protected_checkouts(const compile_context& cx) {
  protected_set out;
  for (std::size_t i = 0; i < cx.spec.protected_paths.size(); ++i) {
    auto p = checked_abs(cx.spec.protected_paths[i], "protectedPaths[" + std::to_string(i) + "]");
    if (!p) return std::move(p).err();
    out.paths.push_back(*p);
    out.paths.push_back(resolved_spelling(*p, cx.facts));
  }
  return out;
}

// What is bound, by resolved path, and how it was spelled.
struct bind_set {
  std::map<std::string, bool> binds;                        // resolved path -> writable
  std::map<std::string, std::vector<std::string>> written;  // resolved path -> its literal spellings
  std::vector<policy::symlinked_spelling> symlinked;        // spellings that are not the resolved path
  std::string first_bind;
};

// Bind mounts (S2, P1), by resolved path. A path bound twice with different
// flags is read-only (read-only wins); a bind inside a protected path is
// read-only (P2), whichever spelling lands there.
inline result<bind_set> spec_binds(const compile_context& cx, const protected_set& prot) {
  bind_set out;
  const bool writable_mode = cx.spec.mode == mode::chat;
  for (std::size_t i = 0; i < cx.spec.bind_mounts.size(); ++i) {
    const auto& m = cx.spec.bind_mounts[i];
    std::string field = "bindMounts[" + std::to_string(i) + "]";
    auto host_path = checked_abs(m.host_path, field + ".hostPath");
    if (!host_path) return std::move(host_path).err();
    auto guest_path = checked_abs(m.guest_path.empty() ? m.host_path : m.guest_path, field + ".guestPath");
    if (!guest_path) return std::move(guest_path).err();
    if (*guest_path != *host_path)
      return make_error(errc::invalid_argument, field + ".guestPath",
                        "the native backend maps every path to itself; guestPath must equal hostPath");
    auto res = cx.must_resolve(*host_path);
    if (!res)
      return make_error(errc::invalid_argument, field + ".hostPath",
                        "bind source does not resolve (missing, or a symlink to nothing): \"" + *host_path + "\"");
    bool writable = writable_mode && !m.read_only && !prot.covers(*res) && !prot.covers(*host_path);
    if (auto why = refused_bind(*host_path, *res, writable))
      return make_error(errc::invalid_argument, field + ".hostPath", *why);
    auto [it, fresh] = out.binds.emplace(*res, writable);
    if (!fresh) it->second = it->second && writable;
    out.written[*res].push_back(*host_path);
    if (*res != *host_path) out.symlinked.push_back({*res, *host_path, field + ".hostPath"});
    if (i == 0) out.first_bind = *res;
  }
  return out;
}

// Runner state dirs (P3): resolved, writable in every mode.
struct state_dir_set {
  std::vector<std::string> dirs, fields, literals;
  std::vector<policy::symlinked_spelling> symlinked;
};

inline result<state_dir_set> runner_state_dirs(const compile_context& cx, const protected_set& prot) {
  state_dir_set out;
  for (std::size_t i = 0; i < cx.spec.runner_state_dirs.size(); ++i) {
    std::string field = "runnerStateDirs[" + std::to_string(i) + "]";
    auto p = checked_abs(cx.spec.runner_state_dirs[i], field);
    if (!p) return std::move(p).err();
    auto res = cx.must_resolve(*p);
    if (!res)
      return make_error(errc::invalid_argument, field,
                        "runner state dir does not resolve (missing, or a symlink to nothing): \"" + *p + "\"");
    if (prot.covers(*res) || prot.covers(*p))
      return make_error(errc::invalid_argument, field,
                        "a runner state dir lies inside a protected path, which is never writable (P2)");
    if (auto why = refused_bind(*p, *res, true)) return make_error(errc::invalid_argument, field, *why);
    if (*res == cx.home || *res == cx.home_res || *p == cx.home)
      return make_error(errc::invalid_argument, field,
                        "a runner state dir may not be HOME (" + spelled(*p, *res) +
                            "): it would make every P5 start-up file and tool config in HOME writable; name the "
                            "directory below HOME that the runner owns");
    out.dirs.push_back(*res);
    out.fields.push_back(field);
    if (*res != *p) out.symlinked.push_back({*res, *p, field});
  }
  out.literals = cx.spec.runner_state_dirs;
  return out;
}

inline result<std::string> workdir_of(const compile_context& cx, const bind_set& b) {
  if (cx.spec.guest_workdir) {
    auto w = checked_abs(*cx.spec.guest_workdir, "guestWorkdir");
    if (!w) return std::move(w).err();
    return resolved_spelling(*w, cx.facts);
  }
  return b.first_bind.empty() ? std::string("/") : b.first_bind;
}

// Terminal profile (T2): $HOME and the workdir writable unless a bind
// mount of the same path decides instead (read-only wins). Adds to `b`.
inline result<void> terminal_defaults(const compile_context& cx, const protected_set& prot, const std::string& workdir,
                                      bind_set& b, std::vector<policy::symlinked_spelling>& symlinked) {
  auto add_default = [&](const std::string& lit, const std::string& field) -> result<void> {
    auto res = cx.must_resolve(lit);
    if (!res) return make_error(errc::invalid_argument, field, "does not resolve (missing?): \"" + lit + "\"");
    if (b.binds.count(*res)) return ok();
    bool writable = !prot.covers(*res) && !prot.covers(lit);
    if (auto why = refused_bind(lit, *res, writable)) return make_error(errc::invalid_argument, field, *why);
    b.binds.emplace(*res, writable);
    b.written[*res].push_back(lit);
    if (*res != lit) symlinked.push_back({*res, lit, field});
    return ok();
  };
  if (auto r = add_default(cx.home, "home"); !r) return r;
  if (workdir != "/")
    if (auto r = add_default(workdir, "guestWorkdir"); !r) return r;
  return ok();
}

// P4 read denials and the network of the profile: the terminal's core
// secrets and open network (T2), else every P4 set, the toolchain secrets
// and the proxied network; the system's secrets always. The session's
// allowlist is validated here, so a bad pattern fails before anything runs
// (egressd compiles the full rule set; only the session's list can be bad).
struct denial_defaults {
  std::vector<path_rule> read_deny;
  network_rule network;
};

inline result<denial_defaults> read_denials_and_network(const compile_context& cx) {
  denial_defaults out;
  if (cx.base == profile::terminal) {
    for (const auto& e : kTerminalReadDenyPaths)
      add_spellings(out.read_deny, expand_home(e.path, cx.home), e.why, e.shape, cx.facts);
    out.network.kind = network_kind::open;
  } else {
    for (const auto& e : kReadDenyPaths)
      add_spellings(out.read_deny, expand_home(e.path, cx.home), e.why, e.shape, cx.facts);
    if (auto r = deny_toolchain_secrets(out.read_deny, cx.home, cx.facts); !r) return std::move(r).err();
    out.network.kind = network_kind::proxied;
  }
  for (const auto& e : kSystemReadDenyPaths)
    add_spellings(out.read_deny, std::string(e.path), e.why, e.shape, cx.facts);
  out.network.enabled = cx.spec.network_enabled;
  if (cx.spec.network_enabled) out.network.allow = cx.spec.egress_allowlist;
  auto allow_patterns = parse_patterns(cx.spec.egress_allowlist, "egressAllowlist");
  if (!allow_patterns) return std::move(allow_patterns).err();
  return out;
}

// E4: the toolchains on PATH to make visible read-only (see "Toolchains on
// PATH"), and a note for every decision. Reads what is bound already;
// the caller adds the chosen ones to the binds.
struct toolchain_choice {
  std::vector<path_rule> toolchains; // sorted
  std::vector<std::string> notes;
};

// Why the toolchain `res` (spelled `lit`) is not added, if it is not.
inline std::optional<std::string> toolchain_refusal(const compile_context& cx, const std::string& lit,
                                                    const std::string& res, const std::vector<path_rule>& read_deny,
                                                    const std::function<std::optional<std::string>(const std::string&)>& covered) {
  if (!within(res, cx.home) && !within(res, cx.home_res)) return "it resolves outside HOME";
  if (res == cx.home || res == cx.home_res || within(cx.home, res) || within(cx.home_res, res))
    return "it is HOME, and HOME is not made visible from PATH";
  for (const auto& rd : read_deny) {
    if (is_glob(rd.path)) continue;
    if (within(res, rd.path) || within(lit, rd.path))
      return "it lies inside the read-denied \"" + rd.path + "\" (" + rd.why + ", P4)";
    if (rd.shape == path_shape::dir && (within(rd.path, res) || within(rd.path, lit)))
      return "it contains the read-denied \"" + rd.path + "\" (" + rd.why + ", P4)";
  }
  if (auto why_not = refused_bind(lit, res, false)) return *why_not;
  if (auto by = covered(res)) return "the bind \"" + *by + "\" already makes it visible";
  return std::nullopt;
}

inline toolchain_choice path_toolchains(const compile_context& cx, const bind_set& b, const state_dir_set& sd,
                                        const std::vector<path_rule>& read_deny) {
  toolchain_choice out;
  auto in_home = [&](const std::string& p) { return within(p, cx.home) || within(p, cx.home_res); };
  std::vector<std::string> added; // every toolchain decided so far, made visible or not
  std::map<std::string, bool> visible = b.binds; // and every toolchain added so far
  auto covered = [&](const std::string& p) -> std::optional<std::string> {
    for (const auto& [bp, w] : visible)
      if (within(p, bp)) return bp;
    for (const auto& sdir : sd.dirs)
      if (within(p, sdir)) return sdir;
    return std::nullopt;
  };
  auto consider = [&](const std::string& lit, const std::string& why, const std::string& on_path) {
    auto r = cx.must_resolve(lit);
    if (!r) return; // a toolchain home that is not there
    const std::string& res = *r;
    if (std::find(added.begin(), added.end(), res) != added.end()) return;
    const std::string what = spelled(lit, res) + " (PATH has \"" + on_path + "\")";
    if (auto why_not = toolchain_refusal(cx, lit, res, read_deny, covered)) {
      out.notes.push_back("toolchain " + what + " not added: " + *why_not);
      return;
    }
    if (const auto& r = cx.facts.reach; r && r->reaches && !r->reaches(res)) {
      added.push_back(res); // decided: one note, however many PATH entries lead here
      out.notes.push_back("toolchain " + res + " not made visible: the sandbox's host uid " + std::to_string(r->uid) +
                          " cannot reach it");
      return;
    }
    added.push_back(res);
    visible.emplace(res, false);
    out.toolchains.push_back({res, why, path_shape::dir});
    out.notes.push_back("toolchain " + what + " visible read-only: " + why);
  };
  auto path_it = cx.facts.env.find("PATH");
  const std::string path_var = path_it == cx.facts.env.end() ? std::string() : path_it->second;
  std::size_t start = 0;
  while (start <= path_var.size()) {
    std::size_t colon = path_var.find(':', start);
    std::string entry = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? path_var.size() + 1 : colon + 1;
    if (entry.empty() || entry.front() != '/') continue; // never the current directory
    const std::string lit = lexical_normal(entry);
    if (!in_home(lit)) continue; // outside HOME: the system tree, or another tree the caller binds
    auto res = cx.must_resolve(lit);
    if (!res) continue; // not there
    const toolchain_home* tc = nullptr;
    for (const auto& t : kToolchainHomes) {
      const std::string th = expand_home(t.path, cx.home);
      if (within(lit, th) || within(*res, th) || within(*res, resolved_spelling(th, cx.facts))) {
        tc = &t;
        break;
      }
    }
    if (!tc) {
      consider(lit, "a directory on PATH", lit);
      continue;
    }
    consider(expand_home(tc->path, cx.home), std::string(tc->why), lit);
    if (!tc->also.empty()) consider(expand_home(tc->also, cx.home), std::string(tc->why), lit);
  }
  ranges::actions::sort(out.toolchains);
  return out;
}

// One mount per resolved path; a runner state dir is writable (P3). Fills
// mounts, write_allow and symlinked_writable; returns the writable roots
// (the binds, before the state dirs join them).
inline std::vector<std::string> mounts_and_roots(policy& pol, bind_set& b, const state_dir_set& sd,
                                                 std::vector<policy::symlinked_spelling> symlinked) {
  std::vector<std::string> writable_roots;
  for (const auto& [p, w] : b.binds)
    if (w) writable_roots.push_back(p);
  for (const auto& sdir : sd.dirs) b.binds[sdir] = true;
  for (const auto& [p, w] : b.binds) pol.mounts.push_back({p, p, w});
  for (auto& sp : symlinked)
    if (auto it = b.binds.find(sp.resolved); it != b.binds.end() && it->second)
      pol.symlinked_writable.push_back(std::move(sp));
  for (const auto& r : writable_roots) pol.write_allow.push_back({r, "writable root", path_shape::dir});
  for (const auto& r : sd.dirs) pol.write_allow.push_back({r, "runner state dir (P3)", path_shape::dir});
  return writable_roots;
}

// P5 below HOME and below every writable root in each of its spellings
// (P6); a runner state dir wins over a P5 default it IS (a managed
// ~/.claude), but one that contains P5 paths would silently drop them.
inline result<std::vector<path_rule>> p5_denials(const compile_context& cx, const std::vector<std::string>& writable_roots,
                                                 const bind_set& b, const state_dir_set& sd) {
  std::vector<path_rule> p5;
  auto add_p5 = [&](const std::string& p, const denied_path& e) { add_spellings(p5, p, e.why, e.shape, cx.facts); };
  auto add_git_dir = [&](const std::string& gd) {
    for (const auto& e : kGitCommonDirWriteDenyPaths) add_p5(gd + "/" + std::string(e.path), e);
    for (const auto& e : kGitDirWriteDenyPaths) add_p5(gd + "/" + std::string(e.path), e);
  };
  const std::string home_prefix = cx.home == "/" ? std::string() : cx.home;
  for (const auto& e : kShellStartupPaths) add_p5(home_prefix + "/" + std::string(e.path), e);
  for (const auto& e : kHomeWriteDenyPaths) add_p5(expand_home(e.path, cx.home), e);
  for (const auto& root : writable_roots) {
    std::vector<std::string> spellings;
    if (auto it = b.written.find(root); it != b.written.end()) spellings = it->second;
    spellings.push_back(root);
    for (const auto& sp : spellings) {
      const std::string prefix = sp == "/" ? std::string() : sp;
      // A writable root that is itself a .git directory: its git paths
      // are denied directly; worktree files do not apply to it.
      if (sp.size() >= 5 && std::string_view(sp).substr(sp.size() - 5) == "/.git") {
        add_git_dir(sp);
        continue;
      }
      for (const auto& e : kShellStartupPaths) add_p5(prefix + "/" + std::string(e.path), e);
      for (const auto& e : kRootWriteDenyPaths) add_p5(prefix + std::string(e.path).substr(1), e);
      add_git_dir(prefix + "/.git");
    }
  }
  for (std::size_t i = 0; i < sd.dirs.size(); ++i)
    for (const auto& x : p5)
      if (x.path != sd.dirs[i] && within(x.path, sd.dirs[i]))
        return make_error(errc::invalid_argument, sd.fields[i],
                          "runner state dir \"" + sd.dirs[i] + "\" contains the P5 path \"" + x.path + "\" (" +
                              x.why + "), which it would make writable; name a directory that holds none");
  std::vector<path_rule> out;
  for (auto& x : p5)
    if (std::find(sd.dirs.begin(), sd.dirs.end(), x.path) == sd.dirs.end()) out.push_back(std::move(x));
  return out;
}

// Write denials (P2 in every profile; P5, the P7 globs of the dispatch
// profile and the M5 exec rules outside the terminal profile).
inline result<void> write_denials(const compile_context& cx, const std::vector<std::string>& writable_roots,
                                  const bind_set& b, const state_dir_set& sd, policy& pol) {
  for (const auto& p : cx.spec.protected_paths)
    add_spellings(pol.write_deny, lexical_normal(p), "protected checkout (P2)", path_shape::dir, cx.facts);
  if (cx.base == profile::terminal) {
    pol.exec.deny_in_writable = false;
    return ok();
  }
  auto p5 = p5_denials(cx, writable_roots, b, sd);
  if (!p5) return std::move(p5).err();
  for (auto& x : *p5) pol.write_deny.push_back(std::move(x));
  // P7: required globs at any depth of every writable root; runner state
  // dirs are writable roots too.
  if (cx.base == profile::dispatch) {
    std::vector<std::string> roots = writable_roots;
    roots.insert(roots.end(), sd.dirs.begin(), sd.dirs.end());
    ranges::actions::sort(roots);
    roots |= ranges::actions::unique;
    for (const auto& root : roots)
      for (const auto& g : kRequiredWriteDenyGlobs)
        pol.write_deny_globs.push_back({root, std::string(g.path), true, std::string(g.why)});
    ranges::actions::sort(pol.write_deny_globs);
  }
  for (const auto& bin : kDangerousBinaries) pol.exec.denied_binaries.push_back({std::string(bin.path), std::string(bin.why)});
  pol.exec.deny_in_writable = true;
  for (std::size_t i = 0; i < cx.spec.exec_grant_roots.size(); ++i) {
    auto g = checked_abs(cx.spec.exec_grant_roots[i], "execGrantRoots[" + std::to_string(i) + "]");
    if (!g) return std::move(g).err();
    pol.exec.grant_roots.push_back(*g);
  }
  return ok();
}

// The write denials of a `.git` FILE's git directories: [gitdir,
// commondir?]: hooks and config live in the common dir (the gitdir itself
// when there is none); commondir and config.worktree in each; gitdir in a
// worktree's administrative directory.
inline void deny_git_dirs(const std::vector<std::string>& dirs, std::vector<path_rule>& write_deny) {
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    std::string gd = lexical_normal(dirs[i]);
    if (gd.empty()) continue;
    auto add_git = [&](const denied_path& e) {
      write_deny.push_back({gd + "/" + std::string(e.path), std::string(e.why) + " (P5)", e.shape});
    };
    if (i + 1 == dirs.size())
      for (const auto& e : kGitCommonDirWriteDenyPaths) add_git(e);
    else
      for (const auto& e : kGitWorktreeAdminWriteDenyPaths) add_git(e);
    for (const auto& e : kGitDirWriteDenyPaths) add_git(e);
  }
}

// Linked worktrees (see "Linked worktrees"): the writable mount `m` whose
// `.git` file names [admin, common], a common dir no writable bind reaches
// at COMMON/worktrees/NAME's grandparent, becomes a rule of the broker and
// a writable mount of its own (added to `linked_mounts`).
inline void link_worktree(const compile_context& cx, const protected_set& prot, const mount_rule& m,
                          const std::vector<std::string>& dirs, policy& pol, std::vector<mount_rule>& linked_mounts) {
  const std::string admin = lexical_normal(dirs[0]), common = lexical_normal(dirs[1]);
  if (admin.empty() || common.empty() || admin != common + "/worktrees/" + admin.substr(admin.rfind('/') + 1)) return;
  const mount_rule* c = nullptr;
  for (const auto& x : pol.mounts)
    if (within(common, x.guest_path) && (!c || x.guest_path.size() > c->guest_path.size())) c = &x;
  if (c && c->guest_path == common) return;                 // bound as the user said
  if (c && c->writable && !prot.covers(common)) return;      // writable already: the generic git rules hold
  if (cx.facts.kind(common) != path_kind::dir || cx.facts.kind(admin) != path_kind::dir) return;
  if (auto why = refused_bind(common, common, true)) {
    pol.notes.push_back("linked worktree " + m.guest_path + ": its common git directory stays unwritable (" + *why + ")");
    return;
  }
  std::string branch;
  const auto head = cx.facts.git_head ? cx.facts.git_head(admin) : std::nullopt;
  if (head && head->rfind("ref: ", 0) == 0) {
    std::string ref = head->substr(5);
    while (!ref.empty() && (ref.back() == '\n' || ref.back() == '\r')) ref.pop_back();
    if (broker::is_branch_ref(ref)) branch = ref;
  }
  pol.linked_worktrees.push_back({m.guest_path, admin, common, branch});
  if (std::none_of(linked_mounts.begin(), linked_mounts.end(), [&](const mount_rule& x) { return x.guest_path == common; }))
    linked_mounts.push_back({common, common, true});
  pol.notes.push_back("linked worktree " + m.guest_path + ": in its common git directory " + common + " only worktrees/" +
                      admin.substr(admin.rfind('/') + 1) + "/, new objects and " +
                      (branch.empty() ? std::string("refs/stash (HEAD detached at launch: no branch moves)")
                                      : branch + " and refs/stash") +
                      " may be written (X1)");
}

// `.git` files in writable mounts, every profile (see "`.git` as a file").
inline void git_files(const compile_context& cx, const protected_set& prot, policy& pol) {
  std::vector<mount_rule> linked_mounts;
  for (const auto& m : pol.mounts) {
    if (!m.writable) continue;
    std::string dotgit = m.guest_path == "/" ? "/.git" : m.guest_path + "/.git";
    if (cx.facts.kind(dotgit) != path_kind::file) continue;
    pol.write_deny.push_back({dotgit, "a .git file names the git directory (rewriting it redirects hooks and config)",
                              path_shape::file});
    if (!cx.facts.gitdirs) continue;
    auto dirs = cx.facts.gitdirs(dotgit);
    deny_git_dirs(dirs, pol.write_deny);
    if (cx.base == profile::terminal || dirs.size() != 2) continue;
    link_worktree(cx, prot, m, dirs, pol, linked_mounts);
  }
  pol.mounts.insert(pol.mounts.end(), linked_mounts.begin(), linked_mounts.end());
}

inline result<void> check_host_facts(const host_facts& facts) {
  if (facts.home.empty() || facts.home.front() != '/')
    return make_error(errc::invalid_argument, "home", "host facts need an absolute home directory");
  if (!facts.resolve)
    return make_error(errc::invalid_argument, "resolve",
                      "host facts need a symlink resolver (realpath): every decision is taken on resolved paths");
  if (!facts.kind)
    return make_error(errc::invalid_argument, "kind",
                      "host facts need a path lookup (lstat): a .git file in a writable mount is decided on what is "
                      "there");
  return ok();
}

} // namespace detail

// The checklist: each step names what it reads and what it adds, so a
// decision cannot depend on the order of the steps by accident.
inline result<policy> compile(const sandbox_spec& spec, profile base, const host_facts& facts,
                              const compile_options& opts = {}) {
  using namespace detail;
  if (auto r = check_host_facts(facts); !r) return std::move(r).err();
  const std::string home = lexical_normal(facts.home);
  const compile_context cx{spec, base, facts, home, resolved_spelling(home, facts)};
  policy pol;
  pol.base = base;
  pol.mode = spec.mode;
  pol.session_id = spec.session_id;

  // 1. protected checkouts, binds, runner state dirs, the workdir (P1-P3)
  auto prot = protected_checkouts(cx);
  if (!prot) return std::move(prot).err();
  auto binds = spec_binds(cx, *prot);
  if (!binds) return std::move(binds).err();
  auto state = runner_state_dirs(cx, *prot);
  if (!state) return std::move(state).err();
  auto workdir = workdir_of(cx, *binds);
  if (!workdir) return std::move(workdir).err();
  std::vector<policy::symlinked_spelling> symlinked = binds->symlinked;
  symlinked.insert(symlinked.end(), state->symlinked.begin(), state->symlinked.end());
  // 2. the terminal's HOME and workdir (T2)
  if (base == profile::terminal)
    if (auto r = terminal_defaults(cx, *prot, *workdir, *binds, symlinked); !r) return std::move(r).err();
  // 3. read denials and the network (P4, T2, N1)
  auto denials = read_denials_and_network(cx);
  if (!denials) return std::move(denials).err();
  pol.read_deny = std::move(denials->read_deny);
  pol.network = std::move(denials->network);
  // 4. toolchains on PATH (E4), read-only binds of their own
  if (opts.path_toolchains && base != profile::terminal) {
    auto tc = path_toolchains(cx, *binds, *state, pol.read_deny);
    for (const auto& t : tc.toolchains) binds->binds.emplace(t.path, false);
    pol.toolchains = std::move(tc.toolchains);
    pol.notes.insert(pol.notes.end(), tc.notes.begin(), tc.notes.end());
  }
  // E4, N2: ssh's known hosts (see "SSH known hosts").
  if (base != profile::terminal)
    pol.ssh_known_hosts.push_back(resolved_spelling(expand_home("~/.ssh/known_hosts", home), facts));
  // 5. mounts and writable roots, then what is denied below them (P2, P5, P7, M5)
  const auto writable_roots = mounts_and_roots(pol, *binds, *state, std::move(symlinked));
  if (auto r = write_denials(cx, writable_roots, *binds, *state, pol); !r) return std::move(r).err();
  if (auto r = compile_create_allow(pol, spec, base, writable_roots, state->dirs, binds->written, state->literals,
                                    prot->paths);
      !r)
    return std::move(r).err();
  // 6. `.git` files and linked worktrees in the writable mounts
  git_files(cx, *prot, pol);
  ranges::actions::sort(pol.mounts);
  dedupe(pol.read_deny);
  dedupe(pol.write_allow);
  dedupe(pol.write_deny);
  // A writable allow may never reach into a protected path (P2). The steps
  // above make this unreachable; it stays as the last word.
  for (const auto& a : pol.write_allow)
    if (prot->covers(a.path))
      return make_error(errc::invalid_argument, "protectedPaths",
                        "writable path \"" + a.path + "\" lies inside a protected path");
  pol.workdir = *workdir;
  pol.home = home;
  // 7. the environment (E1, E3)
  pol.environment = passed_environment(cx.facts.env, cx.home);
  return pol;
}

// What a backend enforces beyond mounts (see "P7/L4").
struct enforcement {
  bool creation_rules{false}; // it can forbid creating a file by its name inside a writable root
};

// P7/L4: fail closed before anything is rendered.
inline result<void> check_enforceable(const policy& pol, const enforcement& backend) {
  if (backend.creation_rules) return ok();
  if (pol.network.kind == network_kind::open)
    return make_error(errc::unenforceable, "backend",
                      "T2: the terminal profile's network is the host's except its own loopback services, "
                      "link-local and metadata addresses and abstract Unix sockets, and plain bubblewrap cannot "
                      "except them; refusing instead of opening the host's services (T3). A backend that "
                      "enforces creation rules (X1: seccomp user notification with ADDFD and pidfd_getfd) "
                      "would allow it");
  if (pol.requires_glob_denials()) {
    std::string names;
    for (const auto& g : kRequiredWriteDenyGlobs) {
      if (!names.empty()) names += ", ";
      names += g.path;
    }
    return make_error(errc::unenforceable, "backend",
                      "P7/L4: this policy requires filename-glob write denials (" + names +
                          ") inside writable roots, and plain bubblewrap cannot forbid creating a new file "
                          "with such a name; refusing instead of running with a weaker policy. A backend "
                          "that enforces creation rules (X1: seccomp user notification with ADDFD and "
                          "pidfd_getfd) would allow it");
  }
  if (!pol.requires_broker()) return ok();
  return make_error(errc::unenforceable, "backend",
                    "P5/L3: below a writable root, the git directories of nested repositories, submodules and "
                    "linked worktrees, `.git` entries and absent write-denied names stay unwritable, and host "
                    "Unix sockets inside a bind unreachable, only under the X1 creation-rule broker (seccomp "
                    "user notification with ADDFD and pidfd_getfd), which this kernel lacks; plain bubblewrap "
                    "cannot pin a name that does not exist yet. Refusing instead of running with a weaker policy");
}

} // namespace ccsb
