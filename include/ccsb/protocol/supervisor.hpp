// ccsb/protocol/supervisor.hpp — the messages between the launcher and the
// session's supervisor inside the sandbox (ccsb-init), both directions. One
// typed header for both ends: encode() on one side, decode_*() on the other.
// Pure: no I/O.
//
// Transport: the exec channel, a SOCK_SEQPACKET socketpair the launcher
// creates; ccsb-init inherits its end as kExecChannelFd and is the only
// process inside that holds it (commands it starts get nothing of it). One
// message per datagram, at most kMaxMessage bytes; descriptors travel as
// SCM_RIGHTS with the message that names them.
//
// A message is fields separated by one TAB; no field holds a TAB, a newline
// or a backslash unescaped (escape(): `\t` `\n` `\\` and `\xHH` for other
// control bytes), so a path or argument chosen by the command cannot forge a
// field or a message.
//
// Supervisor -> launcher (supervisor_message):
//   ready                              set up (the proxy listeners are egressd's, L3):
//                                      the session is warm, exec requests are served
//   init-failed<TAB>REASON             the sandbox could not be set up (ccsb-init exits 125)
//   landlock<TAB>SUMMARY               what of the Landlock layer applied (X2):
//                                      "abi N: ..." or "unavailable: REASON"
//   started<TAB>ID<TAB>PID             exec ID runs as PID (inside the sandbox's PID
//                                      namespace); with a terminal, the message carries
//                                      the pseudo-terminal's master (1 descriptor)
//   exec-failed<TAB>ID<TAB>CODE<TAB>REASON
//                                      exec ID did not start; CODE 126 (not executable),
//                                      127 (not found) or 125 (set-up failed)
//   exited<TAB>ID<TAB>exit|signal<TAB>N
//                                      exec ID's process ended
//   violation<TAB>ID<TAB>ACTION<TAB>TARGET<TAB>REASON
//                                      the broker denied a call of exec ID (S6, X1);
//                                      REASON: the rule that denied it ("P7: name
//                                      matches *.pem"), never empty
//
// Launcher -> supervisor (launcher_message):
//   exec<TAB>ID<TAB>WORKDIR<TAB>TERMINAL<TAB>ARGC<TAB>ARG...<TAB>ENVC<TAB>NAME=VALUE...
//                                      start a command. TERMINAL is "-" (the message
//                                      carries 3 descriptors: stdin, stdout, stderr) or
//                                      ROWS:COLS (no descriptors; the supervisor opens a
//                                      pseudo-terminal of that size). ENV entries are
//                                      added to, or replace, the session's environment.
//   kill<TAB>ID<TAB>SIGNAL             signal exec ID's process group
//
// The parsers are strict: an unknown kind, a missing or extra field, an
// empty field (an argument may be empty, nothing else), a bad escape, a
// number out of range, a descriptor count that does not match, or an action
// outside the S6 verbs the broker emits is an error naming what was wrong.
#pragma once

#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ccsb::protocol {

using exec_id = std::uint64_t;

// --- supervisor -> launcher ---
struct supervisor_ready {
  friend bool operator==(const supervisor_ready&, const supervisor_ready&) = default;
};
struct init_failed {
  std::string reason;
  friend bool operator==(const init_failed&, const init_failed&) = default;
};
struct landlock_applied {
  std::string summary;
  friend bool operator==(const landlock_applied&, const landlock_applied&) = default;
};
struct exec_started {
  exec_id id{0};
  std::int64_t pid{0};
  friend bool operator==(const exec_started&, const exec_started&) = default;
};
struct exec_failed {
  exec_id id{0};
  int code{127};
  std::string reason;
  friend bool operator==(const exec_failed&, const exec_failed&) = default;
};
struct exec_exited {
  exec_id id{0};
  bool signaled{false};
  int value{0}; // exit status, or the signal number
  friend bool operator==(const exec_exited&, const exec_exited&) = default;
};
struct violation {
  exec_id id{0};
  std::string action; // file-write-create, file-write*, network-outbound, process-limit
  std::string target; // full path, unix:PATH, or pid:N (process-limit)
  std::string reason; // the rule that denied it (rules::verdict::reason)
  friend bool operator==(const violation&, const violation&) = default;
};

using supervisor_message =
    std::variant<supervisor_ready, init_failed, landlock_applied, exec_started, exec_failed, exec_exited, violation>;

// --- launcher -> supervisor ---
struct terminal_size {
  std::uint16_t rows{24};
  std::uint16_t cols{80};
  friend bool operator==(const terminal_size&, const terminal_size&) = default;
};
struct exec_request {
  exec_id id{0};
  std::string workdir;                   // absolute, inside the sandbox
  std::optional<terminal_size> terminal; // nullopt: 3 descriptors come with the message
  std::vector<std::string> argv;         // argv[0] non-empty
  std::vector<std::string> env;          // NAME=VALUE
  friend bool operator==(const exec_request&, const exec_request&) = default;
};
struct kill_request {
  exec_id id{0};
  int signal{9};
  friend bool operator==(const kill_request&, const kill_request&) = default;
};

using launcher_message = std::variant<exec_request, kill_request>;

// Largest datagram either side sends or accepts (below the socket's default
// send buffer, so one sendmsg always carries it whole).
inline constexpr std::size_t kMaxMessage = 128 * 1024;
inline constexpr std::size_t kMaxArgs = 8192;
inline constexpr std::size_t kMaxEnv = 4096;
inline constexpr std::string_view kViolationActions[] = {"file-write-create", "file-write*", "network-outbound",
                                                         "process-limit"};

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

inline std::vector<std::string_view> split_tabs(std::string_view m) {
  std::vector<std::string_view> f;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = m.find('\t', i);
    f.push_back(m.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return f;
}

inline error bad(std::string what) { return error(errc::invalid_argument, "supervisor", std::move(what)); }

// Decimal, no sign, no leading zero, within [lo, hi].
inline result<std::uint64_t> number(std::string_view s, std::uint64_t lo, std::uint64_t hi, const char* field) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0'))
    return bad(std::string(field) + ": not a number");
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return bad(std::string(field) + ": not a number");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v < lo || v > hi) return bad(std::string(field) + ": out of range");
  return v;
}

inline result<terminal_size> parse_terminal(std::string_view s) {
  auto colon = s.find(':');
  if (colon == std::string_view::npos) return bad("terminal: expected - or ROWS:COLS");
  auto r = number(s.substr(0, colon), 1, 65535, "terminal rows");
  if (!r) return std::move(r).err();
  auto c = number(s.substr(colon + 1), 1, 65535, "terminal cols");
  if (!c) return std::move(c).err();
  return terminal_size{static_cast<std::uint16_t>(*r), static_cast<std::uint16_t>(*c)};
}

inline bool env_name_ok(std::string_view e) {
  auto eq = e.find('=');
  if (eq == 0 || eq == std::string_view::npos) return false;
  for (std::size_t i = 0; i < eq; ++i) {
    char c = e[i];
    bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}
} // namespace detail

inline constexpr std::uint64_t kMaxExecId = (1ULL << 53); // exact in a JSON number

inline std::string encode(const supervisor_message& m) {
  return std::visit(
      detail::overload{
          [](const supervisor_ready&) { return std::string("ready"); },
          [](const init_failed& x) { return "init-failed\t" + escape(x.reason); },
          [](const landlock_applied& x) { return "landlock\t" + escape(x.summary); },
          [](const exec_started& x) { return "started\t" + std::to_string(x.id) + "\t" + std::to_string(x.pid); },
          [](const exec_failed& x) {
            return "exec-failed\t" + std::to_string(x.id) + "\t" + std::to_string(x.code) + "\t" + escape(x.reason);
          },
          [](const exec_exited& x) {
            return "exited\t" + std::to_string(x.id) + (x.signaled ? "\tsignal\t" : "\texit\t") + std::to_string(x.value);
          },
          [](const violation& x) {
            return "violation\t" + std::to_string(x.id) + "\t" + escape(x.action) + "\t" + escape(x.target) + "\t" +
                   escape(x.reason);
          },
      },
      m);
}

inline std::string encode(const launcher_message& m) {
  return std::visit(detail::overload{
                        [](const exec_request& x) {
                          std::string out = "exec\t" + std::to_string(x.id) + "\t" + escape(x.workdir) + "\t";
                          out += x.terminal ? std::to_string(x.terminal->rows) + ":" + std::to_string(x.terminal->cols)
                                            : std::string("-");
                          out += "\t" + std::to_string(x.argv.size());
                          for (const auto& a : x.argv) out += "\t" + escape(a);
                          out += "\t" + std::to_string(x.env.size());
                          for (const auto& e : x.env) out += "\t" + escape(e);
                          return out;
                        },
                        [](const kill_request& x) { return "kill\t" + std::to_string(x.id) + "\t" + std::to_string(x.signal); },
                    },
                    m);
}

// How many descriptors travel with a message.
inline std::size_t descriptors_of(const launcher_message& m) {
  if (auto* e = std::get_if<exec_request>(&m)) return e->terminal ? 0 : 3;
  return 0;
}

// `fds`: how many descriptors came with the datagram (only `started` may carry one).
inline result<supervisor_message> decode_supervisor(std::string_view m, std::size_t fds = 0) {
  using detail::bad;
  if (m.size() > kMaxMessage) return bad("message too long");
  auto f = detail::split_tabs(m);
  const std::string_view kind = f[0];
  auto count = [&](std::size_t n) -> result<void> {
    if (f.size() != n) return bad("wrong number of fields in \"" + escape(kind.substr(0, 32)) + "\"");
    for (std::size_t k = 1; k < n; ++k)
      if (f[k].empty()) return bad("empty field in \"" + std::string(kind) + "\"");
    return ok();
  };
  auto id = [&]() { return detail::number(f[1], 1, kMaxExecId, "exec id"); };
  if (kind != "started" && fds != 0) return bad("descriptors with \"" + escape(kind.substr(0, 32)) + "\"");
  if (kind == "ready") {
    if (auto r = count(1); !r) return std::move(r).err();
    return supervisor_message{supervisor_ready{}};
  }
  if (kind == "init-failed" || kind == "landlock") {
    if (auto r = count(2); !r) return std::move(r).err();
    auto text = unescape(f[1]);
    if (!text) return std::move(text).err();
    if (kind == "init-failed") return supervisor_message{init_failed{*text}};
    if (text->rfind("abi ", 0) != 0 && text->rfind("unavailable: ", 0) != 0)
      return bad("a landlock summary starts with \"abi \" or \"unavailable: \"");
    return supervisor_message{landlock_applied{*text}};
  }
  if (kind == "started") {
    if (auto r = count(3); !r) return std::move(r).err();
    if (fds > 1) return bad("more than one descriptor with \"started\"");
    auto i = id();
    if (!i) return std::move(i).err();
    auto pid = detail::number(f[2], 1, 4194304, "pid");
    if (!pid) return std::move(pid).err();
    return supervisor_message{exec_started{*i, static_cast<std::int64_t>(*pid)}};
  }
  if (kind == "exec-failed") {
    if (auto r = count(4); !r) return std::move(r).err();
    auto i = id();
    if (!i) return std::move(i).err();
    auto code = detail::number(f[2], 125, 127, "exit code");
    if (!code) return std::move(code).err();
    auto reason = unescape(f[3]);
    if (!reason) return std::move(reason).err();
    return supervisor_message{exec_failed{*i, static_cast<int>(*code), *reason}};
  }
  if (kind == "exited") {
    if (auto r = count(4); !r) return std::move(r).err();
    auto i = id();
    if (!i) return std::move(i).err();
    if (f[2] != "exit" && f[2] != "signal") return bad("exited: expected \"exit\" or \"signal\"");
    const bool sig = f[2] == "signal";
    auto v = detail::number(f[3], sig ? 1 : 0, sig ? 64 : 255, sig ? "signal" : "exit status");
    if (!v) return std::move(v).err();
    return supervisor_message{exec_exited{*i, sig, static_cast<int>(*v)}};
  }
  if (kind == "violation") {
    if (auto r = count(5); !r) return std::move(r).err();
    auto i = id();
    if (!i) return std::move(i).err();
    auto action = unescape(f[2]);
    if (!action) return std::move(action).err();
    bool known = false;
    for (auto a : kViolationActions) known = known || a == *action;
    if (!known) return bad("unknown violation action \"" + escape(*action) + "\"");
    auto target = unescape(f[3]);
    if (!target) return std::move(target).err();
    auto reason = unescape(f[4]);
    if (!reason) return std::move(reason).err();
    return supervisor_message{violation{*i, *action, *target, *reason}};
  }
  return bad("unknown message \"" + escape(kind.substr(0, 64)) + "\"");
}

// The exec id of a message that starts as an exec request, whatever
// follows: the supervisor answers a refused one with exec-failed for that id
// (else its launcher would wait for the exec forever). nullopt for any other
// message, or an id that does not parse.
inline std::optional<std::uint64_t> exec_id_of(std::string_view m) {
  if (m.size() > kMaxMessage) m = m.substr(0, kMaxMessage);
  auto f = detail::split_tabs(m);
  if (f.size() < 2 || f[0] != "exec") return std::nullopt;
  auto i = detail::number(f[1], 1, kMaxExecId, "exec id");
  if (!i) return std::nullopt;
  return *i;
}

inline result<launcher_message> decode_launcher(std::string_view m, std::size_t fds) {
  using detail::bad;
  if (m.size() > kMaxMessage) return bad("message too long");
  auto f = detail::split_tabs(m);
  const std::string_view kind = f[0];
  if (kind == "kill") {
    if (f.size() != 3) return bad("wrong number of fields in \"kill\"");
    if (fds != 0) return bad("descriptors with \"kill\"");
    auto i = detail::number(f[1], 1, kMaxExecId, "exec id");
    if (!i) return std::move(i).err();
    auto s = detail::number(f[2], 1, 64, "signal");
    if (!s) return std::move(s).err();
    return launcher_message{kill_request{*i, static_cast<int>(*s)}};
  }
  if (kind != "exec") return bad("unknown message \"" + escape(kind.substr(0, 64)) + "\"");
  if (f.size() < 7) return bad("wrong number of fields in \"exec\"");
  exec_request x;
  auto i = detail::number(f[1], 1, kMaxExecId, "exec id");
  if (!i) return std::move(i).err();
  x.id = *i;
  auto wd = unescape(f[2]);
  if (!wd) return std::move(wd).err();
  if (wd->empty() || wd->front() != '/') return bad("workdir: not an absolute path");
  x.workdir = *wd;
  if (f[3] != "-") {
    auto t = detail::parse_terminal(f[3]);
    if (!t) return std::move(t).err();
    x.terminal = *t;
  }
  auto argc = detail::number(f[4], 1, kMaxArgs, "argc");
  if (!argc) return std::move(argc).err();
  std::size_t k = 5;
  if (f.size() < k + *argc + 1) return bad("fewer arguments than argc");
  for (std::size_t a = 0; a < *argc; ++a, ++k) {
    auto v = unescape(f[k]);
    if (!v) return std::move(v).err();
    x.argv.push_back(std::move(*v));
  }
  if (x.argv[0].empty()) return bad("argv[0] is empty");
  auto envc = detail::number(f[k], 0, kMaxEnv, "envc");
  if (!envc) return std::move(envc).err();
  ++k;
  if (f.size() != k + *envc) return bad("the environment does not have envc entries");
  for (std::size_t e = 0; e < *envc; ++e, ++k) {
    auto v = unescape(f[k]);
    if (!v) return std::move(v).err();
    if (!detail::env_name_ok(*v)) return bad("environment entry is not NAME=VALUE");
    x.env.push_back(std::move(*v));
  }
  const std::size_t want = x.terminal ? 0 : 3;
  if (fds != want) return bad("exec with " + std::to_string(fds) + " descriptors, expected " + std::to_string(want));
  return launcher_message{std::move(x)};
}

} // namespace ccsb::protocol
