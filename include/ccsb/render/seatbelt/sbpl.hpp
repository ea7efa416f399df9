// ccsb/render/seatbelt/sbpl.hpp — the SBPL escaper, the glob -> regex
// translation and a strict s-expression reader (M7). Pure: no I/O.
//
//   sbpl_string(text, field)  -> result<std::string>   a quoted string literal
//   glob_regex(glob, field)   -> result<std::string>   an anchored regex (unquoted)
//   sbpl_regex(glob, field)   -> result<std::string>   glob_regex, quoted
//   glob_match(glob, path)    -> bool                  the reference matcher
//   create_allow_regex(pattern, field) -> result<std::string>  a createAllow
//                                         exception as an anchored regex (unquoted)
//   parse_sbpl(profile)       -> result<std::vector<sbpl_node>>
//
// Decisions:
//  * One literal form. Every path, regex and tag is written as an ordinary
//    SBPL string "..." (never the #"..." regex reader form), so one escaper
//    covers them all: a backslash becomes \\ and a double quote \", nothing
//    else is rewritten. Parentheses, semicolons and spaces are inert inside
//    a string; a quote or backslash can no longer end it.
//  * Refused, with a typed error naming the field (fail closed): NUL, every
//    other control byte (0x01-0x1f, 0x7f; a newline included) and bytes that
//    are not well-formed UTF-8 (overlong forms, surrogates, > U+10FFFF).
//    APFS stores only UTF-8 names, so such a path cannot exist on a Mac; and
//    the profile reader's escape sequences for control bytes (\n, \x..) are
//    not a documented contract of sandbox-exec, so ccsb never relies on them.
//    A NUL would end the C string the kernel compiles, silently shortening a
//    rule. The refusal names the offending byte offset.
//  * Globs (M7). `**/` is any number of whole directories (also none), `**`
//    elsewhere any characters, `*` any characters but `/`, `?` one byte but
//    `/` (bytes, not characters: a non-ASCII character is two to four bytes
//    and needs as many `?`; the profile never carries a raw non-UTF-8 byte,
//    so the regex cannot name a byte range). Every other character matches itself:
//    the POSIX ERE metacharacters . ^ $ | ( ) [ { * + ? \ are escaped with a
//    backslash; `]` and `}` are ordinary outside a bracket or an interval
//    (none is ever opened) and escaping them is undefined in POSIX, so they
//    stay as they are. A denial covers the matched path and everything below it,
//    like `subpath` does for a literal path, so the regex ends in `(/.*)?$`;
//    it starts with `^`: anchored at both ends, a glob can neither match a
//    longer name (`x.pem.txt`) nor a path that merely contains it.
//    glob_match is the plain reference implementation (recursive, no regex)
//    the fuzzer compares the regexes against.
//  * createAllow exceptions (P7, ccsb/create_allow.hpp) are another
//    language than the M7 globs, so they have their own translation,
//    exact against create_allow::matches (the matcher the Linux broker
//    uses): components split at '/'; a literal component matches itself
//    (every ERE metacharacter escaped); `*` within a component is
//    `[^/]*`; a last component `**` is one or more further components.
//    No wildcard ever matches a component named `.git`: a component of
//    stars only (`*`, and each component `**` stands for) is
//    kNotGitComponent, every name but `.git` spelled as an alternation by
//    length (POSIX ERE has no negative lookahead); a component with a
//    literal byte that could still match `.git` (`.g*`, `*git`) is refused.
//    Refused as not translatable exactly, with the field named: `?` (one
//    byte in create_allow, one character in a regex engine reading UTF-8),
//    `**` anywhere but as the whole last component, `[ ] { } \`, empty,
//    "." and ".." components, a relative pattern (the policy holds them
//    absolute), and what check_text refuses.
//  * parse_sbpl is a strict reader of the profile ccsb writes: lists,
//    symbols, numbers, strings (escapes \\ and \" only, anything else is an
//    error), `;` comments to end of line. Tests and the fuzzer use it to
//    prove that a rendered profile is balanced and that every string atom
//    decodes back to exactly the path it was made from.
#pragma once

#include "ccsb/create_allow.hpp"
#include "ccsb/result.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::sbpl {

namespace detail {

// Length of the well-formed UTF-8 sequence at s[i], or 0.
inline std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  if (n == 3 && c == 0xe0 && b(i + 1) < 0xa0) return 0; // overlong
  if (n == 3 && c == 0xed && b(i + 1) >= 0xa0) return 0; // surrogate
  if (n == 4 && c == 0xf0 && b(i + 1) < 0x90) return 0; // overlong
  if (n == 4 && c == 0xf4 && b(i + 1) >= 0x90) return 0; // > U+10FFFF
  return n;
}

inline result<void> check_text(std::string_view s, const std::string& field) {
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      return make_error(errc::invalid_argument, field,
                        "control byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                            std::string(1, "0123456789abcdef"[c & 15]) + " at offset " + std::to_string(i) +
                            ": a Seatbelt profile cannot carry it safely (M7); rename the path");
    std::size_t n = utf8_len(s, i);
    if (n == 0)
      return make_error(errc::invalid_argument, field,
                        "bytes that are not UTF-8 at offset " + std::to_string(i) +
                            ": macOS file names are UTF-8, and the profile is refused rather than guessed (M7)");
    i += n;
  }
  return ok();
}

inline bool is_regex_meta(char c) {
  switch (c) {
  case '.': case '^': case '$': case '|': case '(': case ')': case '[':
  case '{': case '*': case '+': case '?': case '\\':
    return true;
  default: return false;
  }
}

} // namespace detail

// The escaped body of a string literal (no quotes), for text already checked.
inline std::string escape_body(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

// A quoted SBPL string literal for `text`, or a typed error naming `field`.
inline result<std::string> sbpl_string(std::string_view text, const std::string& field) {
  if (auto r = detail::check_text(text, field); !r) return std::move(r).err();
  return "\"" + escape_body(text) + "\"";
}

// The anchored regex for a glob (see "Globs"), unquoted. `literal_prefix`
// (a directory such as a writable root) is matched as written: a `*` in it
// is a character, not a wildcard.
inline result<std::string> glob_regex(std::string_view literal_prefix, std::string_view glob,
                                      const std::string& field) {
  if (auto r = detail::check_text(literal_prefix, field); !r) return std::move(r).err();
  if (auto r = detail::check_text(glob, field); !r) return std::move(r).err();
  std::string re = "^";
  for (char c : literal_prefix) {
    if (detail::is_regex_meta(c)) re += '\\';
    re += c;
  }
  for (std::size_t i = 0; i < glob.size();) {
    char c = glob[i];
    if (c == '*' && i + 1 < glob.size() && glob[i + 1] == '*') {
      if (i + 2 < glob.size() && glob[i + 2] == '/') {
        re += "(.*/)?";
        i += 3;
      } else {
        re += ".*";
        i += 2;
      }
      continue;
    }
    if (c == '*') {
      re += "[^/]*";
      ++i;
      continue;
    }
    if (c == '?') {
      re += "[^/]";
      ++i;
      continue;
    }
    std::size_t n = detail::utf8_len(glob, i);
    if (n == 1 && detail::is_regex_meta(c)) re += '\\';
    re.append(glob.substr(i, n));
    i += n;
  }
  re += "(/.*)?$";
  return re;
}

inline result<std::string> glob_regex(std::string_view glob, const std::string& field) {
  return glob_regex({}, glob, field);
}

inline result<std::string> sbpl_regex(std::string_view literal_prefix, std::string_view glob,
                                      const std::string& field) {
  auto re = glob_regex(literal_prefix, glob, field);
  if (!re) return std::move(re).err();
  return "\"" + escape_body(*re) + "\"";
}

// Any one (non-empty) path component but `.git`, never a '/': one to
// three bytes, five or more, or four that differ from ".git" at the first
// position where they differ. Spelled without intervals ({m,n}), which the
// profile's other regexes never needed either.
inline constexpr std::string_view kNotGitComponent =
    "([^/]|[^/][^/]|[^/][^/][^/]|[^/][^/][^/][^/][^/]+|[^/.][^/][^/][^/]|\\.[^/g][^/][^/]|\\.g[^/i][^/]|"
    "\\.gi[^/t])";

// A createAllow pattern in its absolute form (policy::create_allow) as an
// anchored regex matching exactly the paths create_allow::matches accepts
// (see "createAllow exceptions"), unquoted; refused when that cannot be said
// exactly.
inline result<std::string> create_allow_regex(std::string_view pattern, const std::string& field) {
  if (auto r = detail::check_text(pattern, field); !r) return std::move(r).err();
  auto refuse = [&](const std::string& why) {
    return make_error(errc::unenforceable, field,
                      "createAllow pattern \"" + std::string(pattern) + "\" cannot be rendered exactly as a Seatbelt "
                      "regex: " + why);
  };
  if (pattern.empty() || pattern.front() != '/') return refuse("it is not absolute");
  std::vector<std::string_view> comps;
  for (std::size_t i = 1; i <= pattern.size();) {
    std::size_t j = pattern.find('/', i);
    if (j == std::string_view::npos) j = pattern.size();
    comps.push_back(pattern.substr(i, j - i));
    i = j + 1;
  }
  std::string re = "^";
  for (std::size_t k = 0; k < comps.size(); ++k) {
    const std::string_view c = comps[k];
    if (c.empty() || c == "." || c == "..") return refuse("it is not in normal form (an empty, . or .. component)");
    if (c == "**") {
      if (k + 1 != comps.size()) return refuse("** is understood only as the whole last component");
      re += "(/" + std::string(kNotGitComponent) + ")+";
      continue;
    }
    if (c.find("**") != std::string_view::npos) return refuse("** inside a component");
    if (c.find('?') != std::string_view::npos)
      return refuse("? is one byte in createAllow and one character in a regex (non-ASCII names would differ)");
    if (c.find_first_of("[]{}\\") != std::string_view::npos) return refuse("[ ] { } \\ are not part of createAllow");
    if (c == ".git") return refuse("a .git component is never excepted");
    re += '/';
    if (c == "*") {
      re += kNotGitComponent;
      continue;
    }
    if (c.find('*') != std::string_view::npos && create_allow::detail::name_match(c, ".git"))
      return refuse("component \"" + std::string(c) + "\" could match .git");
    for (std::size_t i = 0; i < c.size();) {
      if (c[i] == '*') {
        re += "[^/]*";
        ++i;
        continue;
      }
      std::size_t n = detail::utf8_len(c, i);
      if (n == 1 && detail::is_regex_meta(c[i])) re += '\\';
      re.append(c.substr(i, n));
      i += n;
    }
  }
  re += "$";
  return re;
}

namespace detail {
inline bool glob_match_at(std::string_view g, std::string_view p) {
  if (g.empty()) return p.empty();
  if (g.substr(0, 3) == "**/") {
    // zero directories, or one more directory and try again
    if (glob_match_at(g.substr(3), p)) return true;
    for (std::size_t k = 0; k < p.size(); ++k)
      if (p[k] == '/' && glob_match_at(g.substr(3), p.substr(k + 1))) return true;
    return false;
  }
  if (g.substr(0, 2) == "**") {
    for (std::size_t k = 0; k <= p.size(); ++k)
      if (glob_match_at(g.substr(2), p.substr(k))) return true;
    return false;
  }
  if (g[0] == '*') {
    for (std::size_t k = 0; k <= p.size(); ++k) {
      if (glob_match_at(g.substr(1), p.substr(k))) return true;
      if (k < p.size() && p[k] == '/') break;
    }
    return false;
  }
  if (g[0] == '?') {
    if (p.empty() || p[0] == '/') return false;
    return glob_match_at(g.substr(1), p.substr(1));
  }
  return !p.empty() && p[0] == g[0] && glob_match_at(g.substr(1), p.substr(1));
}
} // namespace detail

// Reference matcher: does the glob deny `path`, i.e. match it or one of its
// ancestors at a `/` boundary (a denial covers everything below, like
// subpath)? No regex; the fuzzer compares glob_regex against it.
inline bool glob_match(std::string_view glob, std::string_view path) {
  if (detail::glob_match_at(glob, path)) return true;
  for (std::size_t k = path.size(); k-- > 0;)
    if (path[k] == '/' && detail::glob_match_at(glob, path.substr(0, k))) return true;
  return false;
}

// ---------------------------------------------------------------------------
// The reader.

struct sbpl_node {
  enum class kind { list, symbol, string } k{kind::list};
  std::string text;              // symbol name or decoded string
  std::vector<sbpl_node> items;  // list items
};

namespace detail {
struct reader {
  std::string_view s;
  std::size_t i{0};
  std::size_t depth{0};

  void skip() {
    while (i < s.size()) {
      if (s[i] == ';') {
        while (i < s.size() && s[i] != '\n') ++i;
      } else if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
        ++i;
      } else {
        return;
      }
    }
  }
  result<sbpl_node> fail(const std::string& why) {
    return make_error(errc::invalid_argument, "profile", why + " at offset " + std::to_string(i));
  }
  result<sbpl_node> node() {
    skip();
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '(') {
      if (++depth > 64) return fail("nesting too deep");
      ++i;
      sbpl_node n;
      for (;;) {
        skip();
        if (i >= s.size()) return fail("unbalanced '('");
        if (s[i] == ')') {
          ++i;
          --depth;
          return n;
        }
        auto child = node();
        if (!child) return child;
        n.items.push_back(std::move(*child));
      }
    }
    if (c == ')') return fail("unbalanced ')'");
    if (c == '"') {
      ++i;
      sbpl_node n;
      n.k = sbpl_node::kind::string;
      for (;;) {
        if (i >= s.size()) return fail("unterminated string");
        char d = s[i++];
        if (d == '"') return n;
        if (d == '\\') {
          if (i >= s.size() || (s[i] != '\\' && s[i] != '"')) return fail("unknown escape");
          d = s[i++];
        } else if (static_cast<unsigned char>(d) < 0x20 || d == 0x7f) {
          return fail("raw control byte in a string");
        }
        n.text += d;
      }
    }
    sbpl_node n;
    n.k = sbpl_node::kind::symbol;
    while (i < s.size() && s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '(' && s[i] != ')' &&
           s[i] != '"' && s[i] != ';')
      n.text += s[i++];
    if (n.text.empty()) return fail("empty atom");
    return n;
  }
};
} // namespace detail

// Every top-level form of a profile; an error unless the whole text is
// balanced forms, comments and whitespace.
inline result<std::vector<sbpl_node>> parse_sbpl(std::string_view profile) {
  detail::reader r{profile};
  std::vector<sbpl_node> out;
  for (;;) {
    r.skip();
    if (r.i >= profile.size()) return out;
    auto n = r.node();
    if (!n) return std::move(n).err();
    if (n->k != sbpl_node::kind::list)
      return make_error(errc::invalid_argument, "profile", "a top-level form must be a list");
    out.push_back(std::move(*n));
  }
}

} // namespace ccsb::sbpl
