// ccsb/render/seatbelt/render.hpp — render a compiled policy as a Seatbelt (SBPL)
// profile for /usr/bin/sandbox-exec (M1-M8, P4-P7, N1-N2, T2). Pure: no I/O.
// The host is described by injected seatbelt_facts (the session's egressd
// ports, its log tag, its private temp dir, a resolver for grant roots), so
// golden tests on Linux see exactly what a Mac would run.
//
//   render_seatbelt(policy, facts)      -> result<seatbelt_profile>
//   seatbelt_environment(policy, facts) -> env_list   (E1 + N2 for the child)
//   seatbelt_argv(sandbox_exec, profile, command) -> argv for execve
//   macos_resolve(path)                 -> the /private spelling (P6 facts)
//
// Layout of the profile, in order. Seatbelt evaluates a profile's rules for
// an operation so that a LATER matching rule overrides an earlier one; the
// order below is therefore the policy, and every denial that must win comes
// after the allow it narrows:
//   1. (version 1), (allow default) (M1): ccsb is allow-default by
//      requirement; everything below subtracts.
//   2. M2: (deny file-read* ...) for every read-deny path, both spellings
//      (P6, the policy carries them), as `subpath` (the path and everything
//      below it, whether it is a file or a directory today).
//   3. M3: (deny file-write*), then (allow file-write* ...) for the writable
//      roots (subpaths), the devices every program writes (kSeatbeltDevices),
//      the session's private temp dir (facts.temp_dir, TMPDIR) and its
//      scratch HOME (facts.scratch_home, E5: seatbelt_scratch_home_needed). Then the
//      write-deny paths P2/P5 (subpath), then their M4 unlink denials, then
//      the P3 exceptions: a writable root that lies INSIDE a write-deny path
//      is a runner state dir (policy.hpp: write_allow wins) and is allowed
//      again, followed by the write-deny paths that lie inside such an
//      exception (so a protected path or P5 path below a state dir stays
//      denied). Last, and winning over everything: the P7 glob denials as
//      anchored regexes (M7), every glob entry of the deny sets, and the
//      read-deny paths once more for writing (P4: a denied secret that does
//      not exist can not be created, and an existing one not replaced; a
//      Seatbelt rule names a path, not a file, so a missing path needs no
//      placeholder as it does on Linux).
//   4. M4: (deny file-write-unlink ...) on every denied path (subpath) and
//      on each of its ancestors (literal), for the read-deny and write-deny
//      sets and for each glob's fixed prefix: renaming or removing a parent
//      would otherwise carry a denied file out from under its rule, or let
//      the command build a fresh directory at the denied name. Ancestors
//      above a writable root are denied too (cheap and exact: `literal`
//      names only that directory).
//   4b. P7 exceptions (createAllow, policy::create_allow): after every file
//      denial above, (allow file-write* (regex E)) per exception, E the exact
//      translation sbpl::create_allow_regex (no wildcard matches `.git`),
//      so it wins over the P7 regexes and their unlink denials below it;
//      then every other write denial that can reach into an exception is
//      written again (the literal write- and read-deny paths at or below an
//      exception's fixed prefix, with their M4 unlink rules, and every
//      non-P7 glob): inside an exception only P7 is lifted, as on Linux. An
//      exception inside a denied path, or one without an exact regex, is
//      refused (unenforceable). Seatbelt decides on names: a directory
//      moved out of an exception carries its names along (a note says so;
//      the Linux broker refuses that move).
//   5. M5: (deny process-exec* (subpath W)) for every writable root, the
//      temp dir and the scratch HOME, (allow process-exec* (subpath G)) for execGrantRoots (both
//      spellings, facts.resolve), then (deny process-exec* (literal B)) for
//      the always-dangerous binaries (kDangerousBinaries, paths.hpp), last so
//      no grant can re-open them. process-exec* covers process-exec and
//      process-exec-interpreter (a script whose #! line names a file in a
//      writable root).
//   6. M6 (proxied): (deny network*), then outbound to the session's two
//      egressd ports on localhost only, then DNS when the network is enabled:
//      on macOS the resolver is the mDNSResponder Unix socket
//      (kMacDnsSocket), the only Unix socket allowed. No general loopback,
//      no other Unix socket, no UDP/53 to arbitrary servers (that would be a
//      direct channel to any host). With networkEnabled false (N6) egressd
//      still runs and denies everything; DNS is not allowed then.
//      Terminal (T2): the network is open except the host's loopback
//      services and every Unix socket but DNS. Seatbelt's address filter
//      accepts only `localhost` or `*` as host, so the T2 denial of
//      link-local and metadata addresses CANNOT be expressed here: it is
//      left to the host firewall, and docs/macos.md says so.
//   7. Each deny carries (with message "TAG"): the per-session tag
//      (facts.session_tag) the kernel appends to the denial it logs, so the
//      log reader attributes a denial to its session (M8,
//      ccsb/render/seatbelt/log.hpp). A tag is 8-64 bytes of [A-Za-z0-9._-].
//
// Decisions:
//  * What every renderer needs is decided by policy.hpp and consumed here:
//    the P7/L4 check (check_enforceable; Seatbelt enforces creation rules,
//    so a P7 policy always runs) and the write denials of `.git` files and
//    the git directories they name (plain write-deny entries, rendered as in
//    3 and 4).
//  * Paths are escaped by ccsb/render/seatbelt/sbpl.hpp (one string form,
//    control bytes and non-UTF-8 refused with the field named). No comment
//    line ever carries input text.
//  * P6 on macOS: /tmp, /var and /etc are symlinks into /private. The policy
//    already carries both spellings of every denied path when its resolver
//    knows that (on a Mac, realpath; on Linux, macos_resolve injected as the
//    resolver). The write roots are resolved spellings only: the kernel
//    checks resolved paths.
//  * Writable roots the policy lets through but macOS must not (P8 in the
//    /private spelling): a writable root at or below /private/etc or equal to
//    /private/tmp, /private/var, /private/var/tmp or /private itself is
//    refused here (policy.hpp decides on the Linux names).
//  * The profile names no mach services, sysctls or IOKit classes: allow-
//    default leaves them as they are (see the docs/macos.md table for what srt's and
//    Codex's deny-default profiles narrow there and ccsb does not).
//  * The proxies' environment (N2) points at 127.0.0.1:PORT (N1: on macOS
//    the sandbox shares the host loopback); GIT_SSH_COMMAND uses the BSD nc
//    that ships with macOS (-X 5 -x).
#pragma once

#include "ccsb/environment.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/seatbelt/sbpl.hpp"
#include "ccsb/result.hpp"
#include "ccsb/session_environment.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

inline constexpr std::string_view kSandboxExec = "/usr/bin/sandbox-exec";
// The macOS resolver's socket: DNS for every getaddrinfo (M6).
inline constexpr std::string_view kMacDnsSocket = "/private/var/run/mDNSResponder";
// The ports --print-profile uses when no egressd runs (issue 12).
inline constexpr std::uint16_t kDefaultHttpPort = 3128;
inline constexpr std::uint16_t kDefaultSocksPort = 1080;

// Devices every program writes; allowed after (deny file-write*) (M3).
inline constexpr listed_path kSeatbeltDevices[] = {
    {"/dev/null", "the bit bucket"},
    {"/dev/zero", "zeroes"},
    {"/dev/tty", "the controlling terminal"},
    {"/dev/stdout", "the process's own stdout"},
    {"/dev/stderr", "the process's own stderr"},
    {"/dev/dtracehelper", "dyld registers DTrace probes here at every start"},
    {"/dev/ptmx", "pseudo-terminal master (openpty, T4)"},
};
// Subtrees of /dev written through descriptors the process already holds.
inline constexpr listed_path kSeatbeltDeviceTrees[] = {
    {"/dev/fd", "the process's own descriptors (bash process substitution)"},
};
// Terminals: /dev/ttysNNN (the pty the session runs on, T4).
inline constexpr std::string_view kSeatbeltTtyRegex = "^/dev/ttys[0-9]+$";

// macOS's top-level symlinks into /private (P6).
inline constexpr std::string_view kMacPrivateLinks[] = {"/etc", "/tmp", "/var"};

// The macOS path facts: /tmp, /var and /etc live under /private. Lexical;
// every other path is returned as given.
inline std::string macos_resolve(const std::string& path) {
  for (auto l : kMacPrivateLinks)
    if (within(path, l)) return "/private" + path;
  return path;
}

struct seatbelt_facts {
  std::uint16_t http_port{0};  // egressd's HTTP proxy on 127.0.0.1 (proxied)
  std::uint16_t socks_port{0}; // egressd's SOCKS5 proxy on 127.0.0.1 (proxied)
  std::string session_tag;     // M8: appended by the kernel to each logged denial
  std::string temp_dir;        // the session's private TMPDIR (writable, no exec); empty: none
  std::string scratch_home;    // E5: the session's private HOME (writable, no exec, HOME); empty: none
  // The resolved spelling of a path (realpath on a Mac, macos_resolve on
  // Linux); used for execGrantRoots, which the policy keeps as written.
  std::function<std::string(const std::string&)> resolve;
};

// The log tag of a session (M8): "ccsb-" + the session id reduced to
// [A-Za-z0-9._-] (at most 32 bytes) + "-" + a nonce the launcher draws per
// launch (so two launches of one session id never share a tag).
inline std::string seatbelt_tag(std::string_view session_id, std::string_view nonce) {
  std::string t = "ccsb-";
  std::size_t n = 0;
  for (char c : session_id) {
    if (n == 32) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    t += ok ? c : '_';
    ++n;
  }
  t += '-';
  for (char c : nonce.substr(0, 16)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    t += ok ? c : '_';
  }
  return t;
}

// Where --print-profile, off a Mac, shows the session temp dir: a stand-in
// for the per-user temp dir (confstr _CS_DARWIN_USER_TEMP_DIR) the macOS
// driver uses (ccsb/sys/platform.hpp, user_temp_dir).
inline constexpr std::string_view kPrintTempBase = "/private/var/folders/ccsb/T";

struct seatbelt_profile {
  std::string text;               // the SBPL profile
  std::vector<std::string> notes; // what was decided and is worth a log line
};

namespace detail {

inline bool valid_tag(std::string_view t) {
  if (t.size() < 8 || t.size() > 64) return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// The fixed directory prefix of a glob: everything before the component
// that holds the first wildcard.
inline std::string glob_base(const std::string& g) {
  auto w = g.find_first_of("*?");
  auto slash = g.rfind('/', w);
  if (slash == std::string::npos || slash == 0) return "/";
  return g.substr(0, slash);
}

class sbpl_writer {
public:
  explicit sbpl_writer(std::string tag) : with_(" (with message \"" + tag + "\")") {}
  std::string text;

  void line(std::string_view s) {
    text += s;
    text += '\n';
  }
  void comment(std::string_view s) { line("; " + std::string(s)); }
  // (ACTION OPS FILTER... [with message]) on one line per filter group.
  // With regex, `arg` is a glob below the literal directory `prefix`.
  result<void> rule(std::string_view action, std::string_view ops, std::string_view filter, const std::string& arg,
                    const std::string& field, bool regex = false, const std::string& prefix = {}) {
    auto q = regex ? sbpl::sbpl_regex(prefix, arg, field) : sbpl::sbpl_string(arg, field);
    if (!q) return std::move(q).err();
    std::string r = "(" + std::string(action) + " " + std::string(ops) + " (" + std::string(filter) + " " + *q + ")";
    if (action == "deny") r += with_;
    r += ")";
    line(r);
    return ok();
  }
  void bare(std::string_view action, std::string_view ops) {
    line("(" + std::string(action) + " " + std::string(ops) + (action == "deny" ? with_ : std::string()) + ")");
  }
  void raw_deny(std::string_view ops, std::string_view filters) {
    line("(deny " + std::string(ops) + " " + std::string(filters) + with_ + ")");
  }

private:
  std::string with_;
};

// The inputs render_seatbelt refuses before writing anything: a policy no
// Seatbelt profile can enforce, facts that do not describe a session, paths
// that are not absolute (the policy's contract, checked, not assumed), and
// writable roots macOS must not have (see "Writable roots").
inline result<void> check_seatbelt_facts(const policy& pol, const seatbelt_facts& facts) {
  if (!valid_tag(facts.session_tag))
    return make_error(errc::invalid_argument, "facts.session_tag",
                      "the per-session log tag must be 8-64 characters of A-Z a-z 0-9 . _ - (M8)");
  const bool proxied = pol.network.kind == network_kind::proxied;
  if (proxied && (facts.http_port == 0 || facts.socks_port == 0 || facts.http_port == facts.socks_port))
    return make_error(errc::invalid_argument, "facts.http_port",
                      "a proxied profile needs egressd's two distinct TCP ports on 127.0.0.1 (M6): render after "
                      "egressd reported ready");
  if (!facts.temp_dir.empty() && (facts.temp_dir.front() != '/' || lexical_normal(facts.temp_dir) != facts.temp_dir))
    return make_error(errc::invalid_argument, "facts.temp_dir", "must be an absolute, normal path");
  if (!facts.scratch_home.empty() &&
      (facts.scratch_home.front() != '/' || lexical_normal(facts.scratch_home) != facts.scratch_home))
    return make_error(errc::invalid_argument, "facts.scratch_home", "must be an absolute, normal path");
  return ok();
}

inline result<void> check_seatbelt_paths(const policy& pol) {
  auto absolute = [](const std::vector<path_rule>& v, const char* name) -> result<void> {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i].path.empty() || v[i].path.front() != '/')
        return make_error(errc::invalid_argument, std::string(name) + "[" + std::to_string(i) + "]",
                          "the policy holds a path that is not absolute");
    return ok();
  };
  for (auto r : {absolute(pol.read_deny, "read_deny"), absolute(pol.write_deny, "write_deny"),
                 absolute(pol.write_allow, "write_allow")})
    if (!r) return r;
  for (std::size_t i = 0; i < pol.write_deny_globs.size(); ++i)
    if (pol.write_deny_globs[i].root.empty() || pol.write_deny_globs[i].root.front() != '/')
      return make_error(errc::invalid_argument, "write_deny_globs[" + std::to_string(i) + "]",
                        "the policy holds a glob root that is not absolute");
  for (std::size_t i = 0; i < pol.write_allow.size(); ++i) {
    const std::string& w = pol.write_allow[i].path;
    bool bad = w == "/" || w == "/private" || within(w, "/private/etc") || w == "/private/tmp" ||
               w == "/private/var" || w == "/private/var/tmp";
    for (const auto& t : kNeverWritableTrees) bad = bad || within(w, "/private" + std::string(t.path));
    if (bad)
      return make_error(errc::invalid_argument, "write_allow[" + std::to_string(i) + "]",
                        "writable root \"" + w + "\" is a shared macOS system directory (P8, /private spelling); "
                        "bind a directory below it");
  }
  return ok();
}

// One render: the policy's deny sets sorted into literal paths and globs,
// the writer, and the ancestors already denied unlink in the current block.
// Each step writes one block of the profile's layout (the header comment)
// and fails with the field of the input it could not write.
class seatbelt_renderer {
public:
  seatbelt_renderer(const policy& pol, const seatbelt_facts& facts)
      : pol_(pol), facts_(facts), w_(facts.session_tag) {
    for (const auto& r : pol.read_deny) (is_glob(r.path) ? read_glob_ : read_lit_).push_back(&r);
    for (const auto& r : pol.write_deny) (is_glob(r.path) ? write_glob_ : write_lit_).push_back(&r);
    // P3 exceptions: writable roots inside a literal write-deny path.
    for (const auto& a : pol.write_allow)
      if (std::any_of(write_lit_.begin(), write_lit_.end(),
                      [&](const path_rule* d) { return d->path != a.path && within(a.path, d->path); }))
        exceptions_.push_back(a.path);
  }

  result<seatbelt_profile> render() {
    using step = result<void> (seatbelt_renderer::*)();
    // The profile's blocks in the order Seatbelt must see them.
    static constexpr step kSteps[] = {
        &seatbelt_renderer::allow_default,          &seatbelt_renderer::read_denials,
        &seatbelt_renderer::writable_roots,         &seatbelt_renderer::write_denials,
        &seatbelt_renderer::state_dir_exceptions,   &seatbelt_renderer::glob_denials,
        &seatbelt_renderer::read_denied_unwritable, &seatbelt_renderer::unlink_denials,
        &seatbelt_renderer::create_allow_exceptions, &seatbelt_renderer::exec_rules,
        &seatbelt_renderer::network_rules};
    for (step s : kSteps)
      if (auto r = (this->*s)(); !r) return std::move(r).err();
    if (!pol_.exec.grant_roots.empty() && !pol_.exec.deny_in_writable)
      out_.notes.push_back("execGrantRoots have no effect: this profile does not deny exec from writable directories");
    out_.text = std::move(w_.text);
    return std::move(out_);
  }

private:
  // Fields name the input by position (never by its text: it may be what is refused).
  std::string rf(const path_rule* r) const { return "read_deny[" + std::to_string(r - pol_.read_deny.data()) + "]"; }
  std::string wf(const path_rule* r) const { return "write_deny[" + std::to_string(r - pol_.write_deny.data()) + "]"; }
  std::string gf(const glob_rule& g) const {
    return "write_deny_globs[" + std::to_string(&g - pol_.write_deny_globs.data()) + "]";
  }
  std::string af(const path_rule& r) const {
    return "write_allow[" + std::to_string(&r - pol_.write_allow.data()) + "]";
  }
  // glob_rule::glob() is root + "/**/" + name; the root is literal.
  static std::string glob_root(const glob_rule& g) { return g.root == "/" ? std::string() : g.root; }
  static std::string glob_tail(const glob_rule& g) { return "/**/" + g.name; }

  // M4 for a literal path: the path itself, then each ancestor literal once
  // per block (it would only repeat).
  result<void> unlink_rules(const std::string& p, const std::string& field) {
    if (auto r = w_.rule("deny", "file-write-unlink", "subpath", p, field); !r) return r;
    for (const auto& a : ancestors_of(p))
      if (unlink_seen_.insert(a).second)
        if (auto r = w_.rule("deny", "file-write-unlink", "literal", a, field); !r) return r;
    return ok();
  }
  // M4 for a glob below the literal directory `root` (P7), or a whole glob
  // (root empty): the regex, its fixed base and the base's ancestors.
  result<void> glob_unlink(const std::string& root, const std::string& glob, const std::string& field) {
    if (auto r = w_.rule("deny", "file-write-unlink", "regex", glob, field, true, root); !r) return r;
    std::string base = root.empty() ? glob_base(glob) : lexical_normal(root);
    if (unlink_seen_.insert(base).second)
      if (auto r = w_.rule("deny", "file-write-unlink", "literal", base, field); !r) return r;
    for (const auto& a : ancestors_of(base))
      if (unlink_seen_.insert(a).second)
        if (auto r = w_.rule("deny", "file-write-unlink", "literal", a, field); !r) return r;
    return ok();
  }
  // A literal path denied for writing, with its M4 unlink rules.
  result<void> deny_write_and_unlink(const std::string& p, const std::string& field) {
    if (auto r = w_.rule("deny", "file-write*", "subpath", p, field); !r) return r;
    return unlink_rules(p, field);
  }
  // A glob denied for writing (below `root` when not empty), with its M4 unlink rules.
  result<void> deny_glob_and_unlink(const std::string& root, const std::string& glob, const std::string& field) {
    if (auto r = w_.rule("deny", "file-write*", "regex", glob, field, true, root); !r) return r;
    return glob_unlink(root, glob, field);
  }

  // 1. M1
  result<void> allow_default() {
    w_.line("(version 1)");
    w_.comment("ccsb Seatbelt profile (render/seatbelt/render.hpp). Later rules override earlier ones.");
    w_.comment("profile " + std::string(to_string(pol_.base)) + ", mode " + std::string(to_string(pol_.mode)) +
               ", log tag " + facts_.session_tag);
    w_.comment("M1: allow by default; everything below subtracts");
    w_.line("(allow default)");
    return ok();
  }

  // 2. M2
  result<void> read_denials() {
    w_.comment("M2: read-deny set (P4), both spellings (P6)");
    for (const auto* d : read_lit_)
      if (auto r = w_.rule("deny", "file-read*", "subpath", d->path, rf(d)); !r) return r;
    for (const auto* g : read_glob_)
      if (auto r = w_.rule("deny", "file-read*", "regex", g->path, rf(g), true); !r) return r;
    return ok();
  }

  // 3. M3, the allows
  result<void> writable_roots() {
    w_.comment("M3: writes denied, then the writable roots, devices and the session temp dir");
    w_.bare("deny", "file-write*");
    for (const auto& a : pol_.write_allow)
      if (auto r = w_.rule("allow", "file-write*", "subpath", a.path, af(a)); !r) return r;
    for (const auto& d : kSeatbeltDevices)
      if (auto r = w_.rule("allow", "file-write*", "literal", std::string(d.path), "devices"); !r) return r;
    for (const auto& d : kSeatbeltDeviceTrees)
      if (auto r = w_.rule("allow", "file-write*", "subpath", std::string(d.path), "devices"); !r) return r;
    w_.line("(allow file-write* (regex \"" + sbpl::escape_body(kSeatbeltTtyRegex) + "\"))");
    if (!facts_.temp_dir.empty())
      if (auto r = w_.rule("allow", "file-write*", "subpath", facts_.temp_dir, "facts.temp_dir"); !r) return r;
    if (!facts_.scratch_home.empty())
      if (auto r = w_.rule("allow", "file-write*", "subpath", facts_.scratch_home, "facts.scratch_home"); !r)
        return r;
    return ok();
  }

  // 3. M3 P2/P5, then their M4 unlink denials
  result<void> write_denials() {
    w_.comment("M3: write-deny set inside the writable roots (P2 protected checkouts, P5)");
    for (const auto* d : write_lit_)
      if (auto r = w_.rule("deny", "file-write*", "subpath", d->path, wf(d)); !r) return r;
    w_.comment("M4: no unlink or rename of a write-denied path or of any of its ancestors");
    for (const auto* d : write_lit_)
      if (auto r = unlink_rules(d->path, wf(d)); !r) return r;
    return ok();
  }

  // 3. P3: the state dirs allowed again, the denials inside them again; the
  // unlink set starts over (the re-allow must be overridden once more).
  result<void> state_dir_exceptions() {
    if (exceptions_.empty()) return ok();
    w_.comment("P3: runner state dirs inside a write-deny path stay writable");
    for (const auto& e : exceptions_)
      if (auto r = w_.rule("allow", "file-write*", "subpath", e, "write_allow"); !r) return r;
    unlink_seen_.clear();
    w_.comment("P2/P5 paths inside those state dirs stay denied");
    for (const auto* d : write_lit_)
      if (std::any_of(exceptions_.begin(), exceptions_.end(), [&](const std::string& e) { return within(d->path, e); }))
        if (auto r = deny_write_and_unlink(d->path, wf(d)); !r) return r;
    return ok();
  }

  // 3. M7
  result<void> glob_denials() {
    if (pol_.write_deny_globs.empty() && write_glob_.empty() && read_glob_.empty()) return ok();
    w_.comment("M7: glob denials as anchored regexes (P7 at any depth of every writable root)");
    for (const auto& g : pol_.write_deny_globs)
      if (auto r = w_.rule("deny", "file-write*", "regex", glob_tail(g), gf(g), true, glob_root(g)); !r) return r;
    for (const auto* g : write_glob_)
      if (auto r = w_.rule("deny", "file-write*", "regex", g->path, wf(g), true); !r) return r;
    for (const auto* g : read_glob_)
      if (auto r = w_.rule("deny", "file-write*", "regex", g->path, rf(g), true); !r) return r;
    return ok();
  }

  // 3. P4 for writing
  result<void> read_denied_unwritable() {
    unlink_seen_.clear();
    w_.comment("P4: read-denied paths can be neither written nor created");
    for (const auto* d : read_lit_)
      if (auto r = w_.rule("deny", "file-write*", "subpath", d->path, rf(d)); !r) return r;
    return ok();
  }

  // 4. M4 for the read-deny set and the globs
  result<void> unlink_denials() {
    w_.comment("M4: no unlink or rename of a read-denied path, a glob match, or any of their ancestors");
    for (const auto* d : read_lit_)
      if (auto r = unlink_rules(d->path, rf(d)); !r) return r;
    for (const auto& g : pol_.write_deny_globs)
      if (auto r = glob_unlink(glob_root(g), glob_tail(g), gf(g)); !r) return r;
    for (const auto* g : write_glob_)
      if (auto r = glob_unlink({}, g->path, wf(g)); !r) return r;
    for (const auto* g : read_glob_)
      if (auto r = glob_unlink({}, g->path, rf(g)); !r) return r;
    return ok();
  }

  // 4b. P7 exceptions: the exact regex of each, refused inside a denied path.
  result<void> create_allow_regexes(std::vector<std::string>& regexes, std::vector<std::string>& prefixes) const {
    for (std::size_t i = 0; i < pol_.create_allow.size(); ++i) {
      const std::string field = "createAllow[" + std::to_string(i) + "]";
      auto re = sbpl::create_allow_regex(pol_.create_allow[i], field);
      if (!re) return std::move(re).err();
      regexes.push_back(std::move(*re));
      prefixes.push_back(glob_base(pol_.create_allow[i] + "/*"));
      for (const auto* d : write_lit_)
        if (within(prefixes.back(), d->path))
          return make_error(errc::unenforceable, field,
                            "createAllow pattern \"" + pol_.create_allow[i] + "\" lies inside the write-denied " +
                                wf(d) + "; the exception would be void there");
      for (const auto* d : read_lit_)
        if (within(prefixes.back(), d->path))
          return make_error(errc::unenforceable, field,
                            "createAllow pattern \"" + pol_.create_allow[i] + "\" lies inside the read-denied " +
                                rf(d) + "; the exception would be void there");
    }
    return ok();
  }

  // 4b. The allow, then every other file denial that can reach into an
  // exception written again (see "createAllow").
  result<void> create_allow_exceptions() {
    if (pol_.create_allow.empty()) return ok();
    std::vector<std::string> regexes, prefixes;
    if (auto r = create_allow_regexes(regexes, prefixes); !r) return r;
    auto reaches = [&](const std::string& p) {
      return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& x) { return within(p, x); });
    };
    w_.comment("P7 exceptions (createAllow): the P7 names may be created, written, renamed and removed below each");
    for (const auto& re : regexes) w_.line("(allow file-write* (regex \"" + sbpl::escape_body(re) + "\"))");
    w_.comment("every other write denial reaching into an exception, again: only P7 is lifted there");
    unlink_seen_.clear();
    for (const auto* d : write_lit_)
      if (reaches(d->path))
        if (auto r = deny_write_and_unlink(d->path, wf(d)); !r) return r;
    for (const auto* d : read_lit_)
      if (reaches(d->path))
        if (auto r = deny_write_and_unlink(d->path, rf(d)); !r) return r;
    for (const auto& g : pol_.write_deny_globs)
      if (!g.required)
        if (auto r = deny_glob_and_unlink(glob_root(g), glob_tail(g), gf(g)); !r) return r;
    for (const auto* g : write_glob_)
      if (auto r = deny_glob_and_unlink({}, g->path, wf(g)); !r) return r;
    for (const auto* g : read_glob_)
      if (auto r = deny_glob_and_unlink({}, g->path, rf(g)); !r) return r;
    out_.notes.push_back("createAllow: the P7 names may be created below " + std::to_string(regexes.size()) +
                         " exception(s); a directory moved out of one carries its names along (Seatbelt decides on "
                         "names, not on what a moved directory holds)");
    return ok();
  }

  // 5. M5: the exec grant roots, both spellings, sorted and once each.
  result<std::vector<std::string>> exec_grants() const {
    std::vector<std::string> grants;
    for (const auto& g : pol_.exec.grant_roots) {
      std::string n = lexical_normal(g);
      if (n.empty()) return make_error(errc::invalid_argument, "execGrantRoots", "not absolute: \"" + g + "\"");
      grants.push_back(n);
      if (facts_.resolve) {
        std::string res = lexical_normal(facts_.resolve(n));
        if (!res.empty() && res != n) grants.push_back(res);
      }
    }
    std::sort(grants.begin(), grants.end());
    grants.erase(std::unique(grants.begin(), grants.end()), grants.end());
    return grants;
  }

  // 5. M5: no exec from what the command can write, except beneath the grants.
  result<void> exec_from_writable() {
    for (const auto& a : pol_.write_allow)
      if (auto r = w_.rule("deny", "process-exec*", "subpath", a.path, af(a)); !r) return r;
    if (!facts_.temp_dir.empty())
      if (auto r = w_.rule("deny", "process-exec*", "subpath", facts_.temp_dir, "facts.temp_dir"); !r) return r;
    if (!facts_.scratch_home.empty())
      if (auto r = w_.rule("deny", "process-exec*", "subpath", facts_.scratch_home, "facts.scratch_home"); !r)
        return r;
    auto grants = exec_grants();
    if (!grants) return std::move(grants).err();
    for (const auto& g : *grants)
      if (auto r = w_.rule("allow", "process-exec*", "subpath", g, "execGrantRoots"); !r) return r;
    return ok();
  }

  // 5. M5: the dangerous binaries last, so no grant re-opens them.
  result<void> exec_rules() {
    if (!pol_.exec.deny_in_writable && pol_.exec.denied_binaries.empty()) return ok();
    w_.comment("M5: no exec from writable directories except beneath execGrantRoots; never the dangerous binaries");
    if (pol_.exec.deny_in_writable)
      if (auto r = exec_from_writable(); !r) return r;
    for (const auto& b : pol_.exec.denied_binaries) {
      std::vector<std::string> sp{b.path};
      if (facts_.resolve) sp.push_back(lexical_normal(facts_.resolve(b.path)));
      std::sort(sp.begin(), sp.end());
      sp.erase(std::unique(sp.begin(), sp.end()), sp.end());
      for (const auto& p : sp)
        if (!p.empty())
          if (auto r = w_.rule("deny", "process-exec*", "literal", p, "exec.denied_binaries"); !r) return r;
    }
    return ok();
  }

  // 6. M6 / T2
  result<void> network_rules() {
    const std::string dns = "(remote unix-socket (path-literal \"" + sbpl::escape_body(kMacDnsSocket) + "\"))";
    if (pol_.network.kind == network_kind::proxied) {
      w_.comment("M6: only the session's egressd ports on localhost, plus DNS; no other loopback, no Unix sockets");
      w_.bare("deny", "network*");
      w_.line("(allow network-outbound (remote ip \"localhost:" + std::to_string(facts_.http_port) + "\"))");
      w_.line("(allow network-outbound (remote ip \"localhost:" + std::to_string(facts_.socks_port) + "\"))");
      if (pol_.network.enabled)
        w_.line("(allow network-outbound " + dns + ")");
      else
        out_.notes.push_back("networkEnabled is false: DNS is not allowed either (N6)");
    } else {
      w_.comment("T2: open network, except the host's loopback services and Unix sockets other than DNS");
      w_.raw_deny("network-outbound", "(remote ip \"localhost:*\")");
      w_.raw_deny("network-outbound", "(remote unix-socket (path-regex \"^/\"))");
      w_.line("(allow network-outbound " + dns + ")");
      out_.notes.push_back(
          "T2: Seatbelt cannot name link-local or metadata addresses; they are not denied by the profile");
    }
    return ok();
  }

  const policy& pol_;
  const seatbelt_facts& facts_;
  sbpl_writer w_;
  seatbelt_profile out_;
  std::vector<const path_rule*> read_lit_, read_glob_, write_lit_, write_glob_;
  std::vector<std::string> exceptions_;
  std::set<std::string> unlink_seen_;
};

} // namespace detail

inline result<seatbelt_profile> render_seatbelt(const policy& pol, const seatbelt_facts& facts) {
  // P7/L4 (policy.hpp): Seatbelt forbids creating a name itself (M7 regexes).
  if (auto e = check_enforceable(pol, {.creation_rules = true}); !e) return std::move(e).err();
  if (auto e = detail::check_seatbelt_facts(pol, facts); !e) return std::move(e).err();
  if (auto e = detail::check_seatbelt_paths(pol); !e) return std::move(e).err();
  return detail::seatbelt_renderer(pol, facts).render();
}

// E5 on macOS: whether the session gets a scratch HOME (a private directory
// in its run dir, removed with it: the macOS driver makes it). The same rule
// as Linux's (render/bwrap/render.hpp scratch_home): unless a writable root covers
// the host's HOME (the terminal profile, a spec binding HOME writable).
// Seatbelt cannot mount, so HOME itself points at the directory, always.
inline bool seatbelt_scratch_home_needed(const policy& pol) {
  if (pol.home.empty() || pol.home == "/" || pol.home.front() != '/') return false;
  return std::none_of(pol.write_allow.begin(), pol.write_allow.end(),
                      [&](const path_rule& a) { return within(pol.home, a.path); });
}

// The command's environment (session_environment.hpp): TMPDIR at the
// session temp dir, HOME at the scratch HOME (E5), the proxies at
// 127.0.0.1:PORT (proxied), ssh through BSD nc (SOCKS5 with -X 5 -x), which
// macOS ships.
inline env_list seatbelt_environment(const policy& pol, const seatbelt_facts& facts) {
  environment_facts f;
  if (!facts.temp_dir.empty()) f.tmpdir = facts.temp_dir + "/";
  f.home = facts.scratch_home;
  if (pol.network.kind == network_kind::proxied) {
    const std::string socks = "127.0.0.1:" + std::to_string(facts.socks_port);
    f.proxy = proxy_endpoints{.http = "127.0.0.1:" + std::to_string(facts.http_port),
                              .socks = socks,
                              .ssh_proxy_command = "/usr/bin/nc -X 5 -x " + socks + " %h %p",
                              .known_hosts = {}};
  }
  return session_environment(pol, f);
}

// sandbox-exec -p PROFILE -- COMMAND...: the profile travels as one argv
// string, never through a shell.
inline std::vector<std::string> seatbelt_argv(std::string_view sandbox_exec, const seatbelt_profile& p,
                                              const std::vector<std::string>& command) {
  std::vector<std::string> argv{std::string(sandbox_exec), "-p", p.text, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

} // namespace ccsb
