// ccsb/protocol/supervisor.hpp — the lines ccsb-init (the session's
// supervisor inside the sandbox) writes on its status descriptor
// (kInitStatusFd) and the launcher (launch/session.hpp) reads. One typed
// header for both ends: write_line() on one side, parse_line() on the other.
// Pure: no I/O.
//
// One message per line, fields separated by one TAB, no field holds a TAB,
// a newline or a backslash unescaped (escape(): `\t` `\n` `\\` and `\xHH` for
// other control bytes), so a path chosen by the command cannot forge a line:
//
//   proxies-ready                      set up; egressd serves the proxy listeners (L3); handle -> warm
//   command-started                    the command was exec'd; handle -> active, `ready`
//   init-failed<TAB>REASON             ccsb-init could not set the sandbox up (exit 125)
//   exec-failed<TAB>REASON             the command could not be exec'd (exit 126/127)
//   violation<TAB>ACTION<TAB>TARGET    the broker denied a call (S6, X1)
//   landlock<TAB>SUMMARY               what of the Landlock layer applied (X2):
//                                      "abi N: ..." or "unavailable: REASON"
//
// The parser is strict: an unknown kind, a missing or extra field, an empty
// field, a bad escape or an action outside the S6 verbs the broker emits is
// an error (the launcher logs it and ignores the line; it never guesses).
#pragma once

#include "ccsb/result.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ccsb::protocol {

struct proxies_ready {
  friend bool operator==(const proxies_ready&, const proxies_ready&) = default;
};
struct command_started {
  friend bool operator==(const command_started&, const command_started&) = default;
};
struct init_failed {
  std::string reason;
  friend bool operator==(const init_failed&, const init_failed&) = default;
};
struct exec_failed {
  std::string reason;
  friend bool operator==(const exec_failed&, const exec_failed&) = default;
};
struct violation {
  std::string action; // file-write-create, file-write*, network-outbound
  std::string target; // full path, or unix:PATH
  friend bool operator==(const violation&, const violation&) = default;
};

struct landlock_applied {
  std::string summary;
  friend bool operator==(const landlock_applied&, const landlock_applied&) = default;
};

using supervisor_message =
    std::variant<proxies_ready, command_started, init_failed, exec_failed, violation, landlock_applied>;

// Longest line accepted (a path is at most PATH_MAX, escaped 4x, plus framing).
inline constexpr std::size_t kMaxLine = 4 * 4096 + 64;
inline constexpr std::string_view kViolationActions[] = {"file-write-create", "file-write*", "network-outbound"};

inline std::string escape(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else out += static_cast<char>(c);
  }
  return out;
}

inline result<std::string> unescape(std::string_view s) {
  std::string out;
  auto hexval = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return make_error(errc::invalid_argument, "supervisor", "raw control byte in a field");
    if (c != '\\') {
      out += static_cast<char>(c);
      continue;
    }
    if (++i >= s.size()) return make_error(errc::invalid_argument, "supervisor", "dangling backslash");
    switch (s[i]) {
    case '\\': out += '\\'; break;
    case 't': out += '\t'; break;
    case 'n': out += '\n'; break;
    case 'x': {
      if (i + 2 >= s.size()) return make_error(errc::invalid_argument, "supervisor", "short \\x escape");
      int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
      if (h < 0 || l < 0) return make_error(errc::invalid_argument, "supervisor", "bad \\x escape");
      int v = h * 16 + l;
      if (v >= 0x20 && v != 0x7f) return make_error(errc::invalid_argument, "supervisor", "needless \\x escape");
      out += static_cast<char>(v);
      i += 2;
      break;
    }
    default: return make_error(errc::invalid_argument, "supervisor", "unknown escape");
    }
  }
  return out;
}

namespace detail {
template <class... F> struct overload : F... { using F::operator()...; };
template <class... F> overload(F...) -> overload<F...>;
} // namespace detail

// The line for a message, with its trailing newline.
inline std::string write_line(const supervisor_message& m) {
  return std::visit(detail::overload{
                        [](const proxies_ready&) { return std::string("proxies-ready\n"); },
                        [](const command_started&) { return std::string("command-started\n"); },
                        [](const init_failed& x) { return "init-failed\t" + escape(x.reason) + "\n"; },
                        [](const exec_failed& x) { return "exec-failed\t" + escape(x.reason) + "\n"; },
                        [](const violation& x) { return "violation\t" + escape(x.action) + "\t" + escape(x.target) + "\n"; },
                        [](const landlock_applied& x) { return "landlock\t" + escape(x.summary) + "\n"; },
                    },
                    m);
}

// One line without its newline.
inline result<supervisor_message> parse_line(std::string_view line) {
  if (line.size() > kMaxLine) return make_error(errc::invalid_argument, "supervisor", "line too long");
  std::vector<std::string_view> f;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = line.find('\t', i);
    f.push_back(line.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  auto fields = [&](std::size_t n) -> result<void> {
    if (f.size() != n) return make_error(errc::invalid_argument, "supervisor", "wrong number of fields in \"" + std::string(f[0]) + "\"");
    for (std::size_t k = 1; k < n; ++k)
      if (f[k].empty()) return make_error(errc::invalid_argument, "supervisor", "empty field");
    return ok();
  };
  const std::string_view kind = f[0];
  if (kind == "proxies-ready" || kind == "command-started") {
    if (auto r = fields(1); !r) return std::move(r).err();
    if (kind == "proxies-ready") return supervisor_message{proxies_ready{}};
    return supervisor_message{command_started{}};
  }
  if (kind == "landlock") {
    if (auto r = fields(2); !r) return std::move(r).err();
    auto summary = unescape(f[1]);
    if (!summary) return std::move(summary).err();
    if (summary->rfind("abi ", 0) != 0 && summary->rfind("unavailable: ", 0) != 0)
      return make_error(errc::invalid_argument, "supervisor", "a landlock summary starts with \"abi \" or \"unavailable: \"");
    return supervisor_message{landlock_applied{*summary}};
  }
  if (kind == "init-failed" || kind == "exec-failed") {
    if (auto r = fields(2); !r) return std::move(r).err();
    auto reason = unescape(f[1]);
    if (!reason) return std::move(reason).err();
    if (kind == "init-failed") return supervisor_message{init_failed{*reason}};
    return supervisor_message{exec_failed{*reason}};
  }
  if (kind == "violation") {
    if (auto r = fields(3); !r) return std::move(r).err();
    auto action = unescape(f[1]);
    if (!action) return std::move(action).err();
    bool known = false;
    for (auto a : kViolationActions) known = known || a == *action;
    if (!known) return make_error(errc::invalid_argument, "supervisor", "unknown violation action \"" + *action + "\"");
    auto target = unescape(f[2]);
    if (!target) return std::move(target).err();
    return supervisor_message{violation{*action, *target}};
  }
  return make_error(errc::invalid_argument, "supervisor", "unknown message \"" + escape(kind.substr(0, 64)) + "\"");
}

} // namespace ccsb::protocol
