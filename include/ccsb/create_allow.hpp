// ccsb/create_allow.hpp — the per-session exceptions to the P7 creation rule
// (spec field `createAllow`, ccsb-run --allow-create, ccsbd launch's spec):
// globs below a writable root where the names `.env`, `*.key` and `*.pem`
// may be created, written, renamed and removed. Pure: no I/O.
//
// Why: real installs ship such names (pip's vendored certifi/cacert.pem in
// every venv, npm packages with test certificates) and a plain `cp
// .env.example .env` is one. P7 stays the default; an exception is named by
// the caller, never implied, and reported (handle details `createAllow`,
// ccsb-run's start-up lines).
//
// The glob language, deliberately small so that what a pattern covers can
// be decided without the file system:
//   * components separated by '/'; in a component `*` matches any run of
//     characters and `?` one character (never '/'); a LAST component `**`
//     means "everything below" (at least one more component);
//   * relative patterns apply below every writable root; an absolute one
//     names its root literally and applies below that root only (the
//     spelling of the root is the bind's, or its resolved one);
//   * the path is matched byte for byte and case-sensitively on every
//     platform (a case variant or a Unicode lookalike is another name, so it
//     is not excepted: P7 holds there);
//   * neither a wildcard nor `**` ever matches a component named `.git`:
//     nothing in a git directory is excepted, whatever the pattern.
// Refused with errc::invalid_pattern (the caller names the field,
// createAllow[i]) — syntax(): empty, control characters or NUL, any of
// `[ ] { } \` (another glob dialect: it would not mean what it says here),
// an empty, "." or ".." component (`a//b`, `./a`, `../x`: write the normal
// form; ".." would leave the root), `**` anywhere but as the whole last
// component, a component that names `.git` (`.git`, `.g*`, `*git`; a bare
// `*` or `?` never matches `.git`, see above), no component without a
// wildcard (`*`, `**`, `*/**`, `*.pem`: that covers the whole root, or a
// whole level of it, and P7 would be gone), and a literal component naming
// a tool configuration the P5 lists deny at any depth (`.vscode`, `.cargo`,
// `.npmrc`, `.bashrc`...: the exception is for secrets-shaped names only;
// P5 and the git rules stay in force below every exception). compile() adds the
// checks that need the roots (an absolute pattern outside every writable
// root, or equal to one; one that reaches into a protected path).
//
// Moving things out: a rename of a DIRECTORY whose subtree an exception may
// cover to a place where it would not be covered in the same way is denied
// (moves_out): `mv .venv/certs ./certs` would bring `*.pem` names out of the
// exception without naming them. Names are decided one by one as always
// (`.venv/x.pem` renamed to `./x.pem` is a P7 creation of `./x.pem`).
#pragma once

#include "ccsb/paths.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::create_allow {

inline constexpr std::string_view kSubtree = "**";

namespace detail {

// fnmatch without flags for `*` and `?` within one component.
constexpr bool name_match(std::string_view g, std::string_view s) noexcept {
  std::size_t gi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (gi < g.size() && (g[gi] == '?' || g[gi] == s[si])) {
      ++gi;
      ++si;
    } else if (gi < g.size() && g[gi] == '*') {
      star = gi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      gi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (gi < g.size() && g[gi] == '*') ++gi;
  return gi == g.size();
}

inline bool wild(std::string_view c) { return c.find_first_of("*?") != std::string_view::npos; }

// Components of a path or pattern; a leading '/' is dropped. Empty
// components are kept (syntax() refuses them).
inline std::vector<std::string_view> split(std::string_view p) {
  std::vector<std::string_view> out;
  if (!p.empty() && p.front() == '/') p.remove_prefix(1);
  if (p.empty()) return out;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) {
      out.push_back(p.substr(i));
      return out;
    }
    out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
}

// Pattern component `g` matches path component `c`: `.git` only literally,
// and syntax() refuses a literal `.git`.
inline bool comp_match(std::string_view g, std::string_view c) { return c != ".git" && name_match(g, c); }

// The first name of a tool configuration P5 denies at any depth (`.cargo`
// of `.cargo/config.toml`, `.npmrc`, `.bashrc`).
inline bool is_p5_head(std::string_view c) {
  auto head = [](std::string_view p) {
    if (p.substr(0, 2) == "./") p.remove_prefix(2);
    return p.substr(0, p.find('/'));
  };
  for (const auto& e : kRootWriteDenyPaths)
    if (head(e.path) == c) return true;
  for (const auto& e : kNestedWriteDenyPaths)
    if (head(e.path) == c) return true;
  for (const auto& e : kShellStartupPaths)
    if (head(e.path) == c) return true;
  return false;
}

} // namespace detail

// The structure every pattern has, relative or absolute (what ccsb-init
// checks of the absolute forms it is given); errors carry no field.
inline result<void> shape(std::string_view p) {
  auto bad = [&](std::string why) {
    return make_error(errc::invalid_pattern, "", "createAllow pattern \"" + std::string(p) + "\": " + why);
  };
  if (p.empty()) return bad("empty");
  for (char ch : p) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return bad("contains a control character");
    if (ch == '[' || ch == ']' || ch == '{' || ch == '}' || ch == '\\')
      return bad(std::string("'") + ch + "' is not part of this glob language (only *, ? and a final /**)");
  }
  const auto comps = detail::split(p);
  if (comps.empty()) return bad("names no path below a writable root");
  for (std::size_t i = 0; i < comps.size(); ++i) {
    const std::string_view c = comps[i];
    if (c.empty()) return bad("has an empty component (\"//\" or a trailing \"/\"); write the normal form");
    if (c == "." || c == "..")
      return bad("has a \"" + std::string(c) + "\" component; write the normal form (it may not leave its root)");
    if (c.find("**") != std::string_view::npos && (c != kSubtree || i + 1 != comps.size()))
      return bad("** is understood only as the whole last component (DIR/**)");
    if (c != kSubtree && detail::name_match(c, ".git") && c.find_first_not_of("*?") != std::string_view::npos)
      return bad("component \"" + std::string(c) + "\" could name a .git directory; nothing in one is ever excepted");
  }
  return ok();
}

// A pattern as the caller writes it (shape, plus: a component without a
// wildcard, no tool-configuration name); errors carry no field.
inline result<void> syntax(std::string_view p) {
  if (auto r = shape(p); !r) return r;
  auto bad = [&](std::string why) {
    return make_error(errc::invalid_pattern, "", "createAllow pattern \"" + std::string(p) + "\": " + why);
  };
  bool literal = false;
  for (auto c : detail::split(p)) {
    if (c == kSubtree || detail::wild(c)) continue;
    literal = true;
    if (detail::is_p5_head(c))
      return bad("component \"" + std::string(c) +
                 "\" names a tool configuration (P5); the exception is for .env, *.key and *.pem names only");
  }
  if (!literal)
    return bad("has no component without a wildcard: it would cover a whole writable root, or a whole level of one "
               "(name the directory, e.g. .venv/** or node_modules/**)");
  return ok();
}

// `pattern` (absolute) matches the absolute, lexically normal `path`.
inline bool matches(std::string_view pattern, std::string_view path) {
  const auto g = detail::split(pattern);
  const auto c = detail::split(path);
  const bool subtree = !g.empty() && g.back() == kSubtree;
  const std::size_t n = subtree ? g.size() - 1 : g.size();
  if (subtree ? c.size() <= n : c.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (!detail::comp_match(g[i], c[i])) return false;
  for (std::size_t i = n; i < c.size(); ++i)
    if (c[i] == ".git") return false;
  return true;
}

// Any pattern matches `path`.
inline bool allowed(const std::vector<std::string>& patterns, std::string_view path) {
  for (const auto& p : patterns)
    if (matches(p, path)) return true;
  return false;
}

// Something strictly below the directory `dir` may match `pattern`.
inline bool reaches_below(std::string_view pattern, std::string_view dir) {
  const auto g = detail::split(pattern);
  const auto c = detail::split(dir);
  const bool subtree = !g.empty() && g.back() == kSubtree;
  const std::size_t n = subtree ? g.size() - 1 : g.size();
  const std::size_t k = std::min(c.size(), n);
  if (!subtree && c.size() >= n) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (!detail::comp_match(g[i], c[i])) return false;
  for (std::size_t i = k; i < c.size(); ++i)
    if (c[i] == ".git") return false;
  return true;
}

// Every name strictly below `dir` (outside a `.git`) matches `pattern`.
inline bool covers_below(std::string_view pattern, std::string_view dir) {
  const auto g = detail::split(pattern);
  const auto c = detail::split(dir);
  if (g.empty() || g.back() != kSubtree || c.size() < g.size() - 1) return false;
  for (std::size_t i = 0; i + 1 < g.size(); ++i)
    if (!detail::comp_match(g[i], c[i])) return false;
  for (std::size_t i = g.size() - 1; i < c.size(); ++i)
    if (c[i] == ".git") return false;
  return true;
}

// A rename moves the directory `from` to `to`: true when a name below
// `from` that an exception covers would not be covered below `to` (see the
// header). Sufficient for staying covered: everything below `to` is covered
// by one pattern, or `to` has the same depth as `from` and matches the
// same leading components of each pattern that reaches below `from`.
inline bool moves_out(const std::vector<std::string>& patterns, std::string_view from, std::string_view to) {
  for (const auto& p : patterns)
    if (covers_below(p, to)) return false;
  const auto f = detail::split(from);
  const auto t = detail::split(to);
  for (const auto& p : patterns) {
    if (!reaches_below(p, from)) continue;
    if (f.size() != t.size() || !reaches_below(p, to)) return true;
  }
  return false;
}

// The absolute form of a relative pattern below `root`.
inline std::string below(std::string_view root, std::string_view rel) {
  return (root == "/" ? std::string() : std::string(root)) + "/" + std::string(rel);
}

// The pattern covers `root` itself or every name in it (`/ws/**` for the
// root /ws; syntax() refuses the relative spellings).
inline bool covers_root(std::string_view pattern, std::string_view root) {
  const auto g = detail::split(pattern);
  const auto r = detail::split(root);
  if (g.size() > r.size() + 1) return false;
  return matches(pattern, root) || covers_below(pattern, root);
}

// The P7 name rule's globs (kRequiredWriteDenyGlobs) match the last
// component of `path`.
inline bool p7_name(std::string_view path) {
  const std::string_view last = path.substr(path.rfind('/') + 1);
  for (const auto& g : kRequiredWriteDenyGlobs)
    if (detail::name_match(g.path, last)) return true;
  return false;
}

// For ccsb-run's summary at exit: the exception that would have allowed
// creating `path` below `root` (the top directory below the root and
// everything in it, or the name itself at the root's top).
inline std::string suggestion(std::string_view root, std::string_view path) {
  std::string_view rel = path.substr(root == "/" ? 1 : root.size() + 1);
  const auto slash = rel.find('/');
  if (slash == std::string_view::npos) return std::string(rel);
  return std::string(rel.substr(0, slash)) + "/**";
}

} // namespace ccsb::create_allow
