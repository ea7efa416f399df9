// ccsb/spec.hpp — the spec model of SPEC §2 (S1-S6): what a caller asks for
// (sandbox_spec), what it gets back (sandbox_handle and its S4 lifecycle) and
// what it hears (sandbox_event, sandbox_violation).
//
// Pure: no I/O, no host access, no exceptions for decisions. JSON reading and
// writing of the spec and the handle live in spec_json.hpp; the one-line event
// serialisation lives here (to_json_line) because every producer of events
// needs it and it needs no JSON library.
//
// Value rules (validate(), applied by spec_from_json after the type checks;
// every error names the field path, e.g. "bindMounts[2].hostPath"):
//   * sessionId, workspaceId: non-empty, no control characters (U+0000-U+001F,
//     U+007F). agentId (when present): no control characters.
//   * every path (bindMounts[].hostPath/guestPath, guestWorkdir, protectedPaths,
//     runnerStateDirs, execGrantRoots): non-empty, absolute (starts with '/'),
//     no NUL byte (it could not reach execve or a profile intact) and no ".."
//     component ("/work/wt/../../home/me/.ssh" starts with "/work" but is not
//     under it; lexical prefix checks downstream must be able to trust paths).
//   * two bind mounts with the same guestPath must agree on hostPath and
//     readOnly (an exact duplicate is harmless and accepted; a conflicting one
//     is ambiguous, so it is rejected).
//   * createAllow entries: the glob syntax of create_allow.hpp (the checks
//     that need the writable roots are compile()'s).
//   * egressAllowlist entries: non-empty, no control characters. Their N3 shape
//     is checked by the domain loader (domain.hpp) when the allowlist is built.
//   * guestPath for the native backend must equal hostPath (S2). The model keeps
//     a differing guestPath (another backend, e.g. microvm, may map it); the
//     native policy compiler rejects it. validate() does not.
#pragma once

#include "ccsb/backend_name.hpp"
#include "ccsb/create_allow.hpp"
#include "ccsb/result.hpp"

#include <picojson.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb {

// ---------------------------------------------------------------------------
// S1 mode
// ---------------------------------------------------------------------------

enum class mode { chat, review, plan, orchestrate };

inline constexpr std::array<mode, 4> kAllModes{mode::chat, mode::review, mode::plan,
                                               mode::orchestrate};

constexpr std::string_view to_string(mode m) noexcept {
  switch (m) {
  case mode::chat: return "chat";
  case mode::review: return "review";
  case mode::plan: return "plan";
  case mode::orchestrate: return "orchestrate";
  }
  return "chat";
}

// Appends `s` as the inside of a JSON string literal (no quotes). Output is
// always one line of valid UTF-8: control characters, U+007F and the JS line
// separators U+2028/U+2029 are escaped as \uXXXX; each byte that is not part
// of a well-formed UTF-8 sequence becomes \ufffd (JSON cannot carry raw bytes).
inline void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  auto u_escape = [&](unsigned cp) {
    out += "\\u";
    out += hex[(cp >> 12) & 0xf];
    out += hex[(cp >> 8) & 0xf];
    out += hex[(cp >> 4) & 0xf];
    out += hex[cp & 0xf];
  };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          u_escape(c);
        else
          out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Multi-byte sequence: validate per RFC 3629 (no overlongs, no
    // surrogates, nothing above U+10FFFF).
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xbf, cp = 0;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) {
      len = 3; cp = c & 0x0f;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4; cp = c & 0x07;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    }
    bool ok = len != 0 && i + len <= n;
    if (ok) {
      for (std::size_t k = 1; k < len; ++k) {
        const unsigned b = p[i + k];
        const unsigned blo = k == 1 ? lo : 0x80, bhi = k == 1 ? hi : 0xbf;
        if (b < blo || b > bhi) { ok = false; break; }
        cp = (cp << 6) | (b & 0x3f);
      }
    }
    if (!ok) {
      u_escape(0xfffd);
      ++i;
      continue;
    }
    if (cp == 0x2028 || cp == 0x2029)
      u_escape(cp);
    else
      out.append(s.substr(i, len));
    i += len;
  }
}

// A value quoted for an error message: JSON-escaped, bounded in length.
inline std::string quote(std::string_view s, std::size_t max = 120) {
  std::string out = "\"";
  if (s.size() > max) {
    append_json_escaped(out, s.substr(0, max));
    out += "...\"";
  } else {
    append_json_escaped(out, s);
    out += '"';
  }
  return out;
}

namespace detail {

template <class Enum, std::size_t N>
inline std::string list_names(const std::array<Enum, N>& all) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i) out += i + 1 == N ? " or " : ", ";
    out += to_string(all[i]);
  }
  return out;
}

} // namespace detail

// Exact, case-sensitive (the stored names are lowercase). The error has an
// empty field; callers nest it ("mode").
inline result<mode> parse_mode(std::string_view s) {
  for (mode m : kAllModes)
    if (to_string(m) == s) return m;
  return make_error(errc::invalid_argument, "",
                    "unknown mode " + quote(s) + "; expected one of " +
                        detail::list_names(kAllModes));
}

// ---------------------------------------------------------------------------
// S1/S2 the spec
// ---------------------------------------------------------------------------

// S2. JSON: {hostPath, guestPath, readOnly}. guestPath defaults to hostPath
// when absent from JSON.
struct bind_mount {
  std::string host_path;
  std::string guest_path;
  bool read_only = false;

  friend bool operator==(const bind_mount&, const bind_mount&) = default;
};

// S1. JSON names in comments.
struct sandbox_spec {
  std::string session_id;                   // sessionId (required)
  std::string workspace_id;                 // workspaceId (required)
  std::optional<std::string> agent_id;      // agentId: string|null
  std::vector<bind_mount> bind_mounts;      // bindMounts (default [])
  bool network_enabled = true;              // networkEnabled (default true)
  std::vector<std::string> egress_allowlist; // egressAllowlist (default [])
  std::optional<std::string> guest_workdir; // guestWorkdir: string|null
  ccsb::mode mode = ccsb::mode::chat;       // mode (default "chat")
  std::vector<std::string> protected_paths;   // protectedPaths (default [])
  std::vector<std::string> runner_state_dirs; // runnerStateDirs (default [])
  std::vector<std::string> exec_grant_roots;  // execGrantRoots (default [])
  std::vector<std::string> create_allow;      // createAllow (default []): P7 exceptions, create_allow.hpp

  friend bool operator==(const sandbox_spec&, const sandbox_spec&) = default;
};

namespace detail {

inline bool has_control(std::string_view s) noexcept {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// Identifier rule (sessionId, workspaceId). Field is left empty for nest().
inline result<void> check_id(std::string_view s, bool allow_empty) {
  if (s.empty() && !allow_empty)
    return make_error(errc::invalid_argument, "", "must not be empty");
  if (has_control(s))
    return make_error(errc::invalid_argument, "",
                      "contains a control character: " + quote(s));
  return ok();
}

// Path rule (see the header comment). Field is left empty for nest().
inline result<void> check_abs_path(std::string_view p) {
  if (p.empty())
    return make_error(errc::invalid_argument, "", "empty path; an absolute path is required");
  if (p.find('\0') != std::string_view::npos)
    return make_error(errc::invalid_argument, "", "path contains a NUL byte: " + quote(p));
  if (p.front() != '/')
    return make_error(errc::invalid_argument, "",
                      "relative path " + quote(p) + "; an absolute path (starting with '/') is required");
  std::size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == '/') ++i;
    std::size_t j = i;
    while (j < p.size() && p[j] != '/') ++j;
    if (p.substr(i, j - i) == "..")
      return make_error(errc::invalid_argument, "",
                        "path " + quote(p) + " has a \"..\" component; write the normalised path");
    i = j;
  }
  return ok();
}

inline std::string index_field(std::string_view list, std::size_t i) {
  std::string f(list);
  f += '[';
  f += std::to_string(i);
  f += ']';
  return f;
}

inline result<void> check_path_list(std::string_view name, const std::vector<std::string>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (auto r = check_abs_path(v[i]); !r) return nest(index_field(name, i), std::move(r).err());
  return ok();
}

} // namespace detail

// Value rules of the header comment. Types are already guaranteed by C++; the
// JSON reader calls this after its type checks. First error wins, in field
// order.
inline result<void> validate(const sandbox_spec& s) {
  if (auto r = detail::check_id(s.session_id, false); !r) return nest("sessionId", std::move(r).err());
  if (auto r = detail::check_id(s.workspace_id, false); !r) return nest("workspaceId", std::move(r).err());
  if (s.agent_id)
    if (auto r = detail::check_id(*s.agent_id, true); !r) return nest("agentId", std::move(r).err());
  std::map<std::string_view, std::size_t> by_guest;
  for (std::size_t i = 0; i < s.bind_mounts.size(); ++i) {
    const bind_mount& m = s.bind_mounts[i];
    const std::string at = detail::index_field("bindMounts", i);
    if (auto r = detail::check_abs_path(m.host_path); !r) return nest(at + ".hostPath", std::move(r).err());
    if (auto r = detail::check_abs_path(m.guest_path); !r) return nest(at + ".guestPath", std::move(r).err());
    auto [it, inserted] = by_guest.emplace(m.guest_path, i);
    if (!inserted && !(s.bind_mounts[it->second] == m))
      return make_error(errc::invalid_argument, at + ".guestPath",
                        "guestPath " + quote(m.guest_path) + " is also mounted by " +
                            detail::index_field("bindMounts", it->second) +
                            " with a different hostPath or readOnly; one guest path, one mount");
  }
  for (std::size_t i = 0; i < s.egress_allowlist.size(); ++i)
    if (auto r = detail::check_id(s.egress_allowlist[i], false); !r)
      return nest(detail::index_field("egressAllowlist", i), std::move(r).err());
  if (s.guest_workdir)
    if (auto r = detail::check_abs_path(*s.guest_workdir); !r) return nest("guestWorkdir", std::move(r).err());
  if (auto r = detail::check_path_list("protectedPaths", s.protected_paths); !r) return r;
  if (auto r = detail::check_path_list("runnerStateDirs", s.runner_state_dirs); !r) return r;
  if (auto r = detail::check_path_list("execGrantRoots", s.exec_grant_roots); !r) return r;
  for (std::size_t i = 0; i < s.create_allow.size(); ++i)
    if (auto r = create_allow::syntax(s.create_allow[i]); !r)
      return nest(detail::index_field("createAllow", i), std::move(r).err());
  return ok();
}

// ---------------------------------------------------------------------------
// S4 lifecycle
// ---------------------------------------------------------------------------

enum class sandbox_state { created, warm, active, suspended, destroyed, error };

inline constexpr std::array<sandbox_state, 6> kAllStates{
    sandbox_state::created,   sandbox_state::warm,      sandbox_state::active,
    sandbox_state::suspended, sandbox_state::destroyed, sandbox_state::error};

constexpr std::string_view to_string(sandbox_state s) noexcept {
  switch (s) {
  case sandbox_state::created: return "created";
  case sandbox_state::warm: return "warm";
  case sandbox_state::active: return "active";
  case sandbox_state::suspended: return "suspended";
  case sandbox_state::destroyed: return "destroyed";
  case sandbox_state::error: return "error";
  }
  return "error";
}

inline result<sandbox_state> parse_state(std::string_view s) {
  for (sandbox_state st : kAllStates)
    if (to_string(st) == s) return st;
  return make_error(errc::invalid_argument, "",
                    "unknown state " + quote(s) + "; expected one of " +
                        detail::list_names(kAllStates));
}

// The S4 transition table. Rows: from; columns: to. Everything not listed is
// illegal, including staying in the same state.
//
//   from \ to   created warm active suspended destroyed error
//   created        -     yes    -       -        yes      yes   (start / start failed)
//   warm           -      -    yes     yes       yes      yes   (exec / pause / fail)
//   active         -     yes    -       -        yes      yes   (exec done / fail)
//   suspended      -     yes    -       -        yes       -    (resume)
//   destroyed      -      -     -       -         -        -    (any use: handle_destroyed)
//   error          -      -     -       -        yes       -    (clean up)
constexpr bool is_legal_transition(sandbox_state from, sandbox_state to) noexcept {
  using S = sandbox_state;
  switch (from) {
  case S::created: return to == S::warm || to == S::destroyed || to == S::error;
  case S::warm:
    return to == S::active || to == S::suspended || to == S::destroyed || to == S::error;
  case S::active: return to == S::warm || to == S::destroyed || to == S::error;
  case S::suspended: return to == S::warm || to == S::destroyed;
  case S::destroyed: return false;
  case S::error: return to == S::destroyed;
  }
  return false;
}

// ---------------------------------------------------------------------------
// S6 violation
// ---------------------------------------------------------------------------

// JSON: {action, target, raw}; raw is string|null.
struct sandbox_violation {
  std::string action; // denied verb: "file-read*", "file-write-create", "network-outbound"
  std::string target; // path or host[:port]
  std::optional<std::string> raw; // raw log line
  std::string reason{};           // why the denier refused, when it says ("not_allowlisted", "P7: ..."); "" when not

  friend bool operator==(const sandbox_violation&, const sandbox_violation&) = default;
};

// ---------------------------------------------------------------------------
// S5 events
// ---------------------------------------------------------------------------

// stdout/stderr are macros in <cstdio>, hence the trailing underscore.
enum class event_kind { stdout_, stderr_, exit, starting, ready, killed, violation };

inline constexpr std::array<event_kind, 7> kAllEventKinds{
    event_kind::stdout_, event_kind::stderr_, event_kind::exit,     event_kind::starting,
    event_kind::ready,   event_kind::killed,  event_kind::violation};

constexpr std::string_view to_string(event_kind k) noexcept {
  switch (k) {
  case event_kind::stdout_: return "stdout";
  case event_kind::stderr_: return "stderr";
  case event_kind::exit: return "exit";
  case event_kind::starting: return "starting";
  case event_kind::ready: return "ready";
  case event_kind::killed: return "killed";
  case event_kind::violation: return "violation";
  }
  return "violation";
}

inline result<event_kind> parse_event_kind(std::string_view s) {
  for (event_kind k : kAllEventKinds)
    if (to_string(k) == s) return k;
  return make_error(errc::invalid_argument, "",
                    "unknown event " + quote(s) + "; expected one of " +
                        detail::list_names(kAllEventKinds));
}

// One event. Only the fields of its kind are meaningful (and serialised); the
// factories leave the others at their defaults so that == compares what
// matters.
//
// JSON line, keys in this order, one line, no trailing newline:
//   {"event":"stdout","sessionId":"s1","execId":1,"data":"..."}  (stderr alike)
//   {"event":"exit","sessionId":"s1","exitCode":0}
//   {"event":"starting","sessionId":"s1"}                    (ready alike)
//   {"event":"killed","sessionId":"s1","reason":"timeout","signal":9}
//   {"event":"violation","sessionId":"s1",
//    "violation":{"action":"file-read*","target":"/home/u/.ssh","raw":null}}
// "sessionId" is written only when known; "execId" (S7) only for the events
// of one exec (its output, exit, killed, and the violations its broker
// reported), as a JSON number. The fields of the kind are always
// written: "signal" and "raw" are null when unknown. `data` is written as
// UTF-8: bytes that are not valid UTF-8 become U+FFFD (a JSON string cannot
// carry raw bytes); producers should cut output chunks on UTF-8 boundaries.
struct sandbox_event {
  event_kind kind = event_kind::starting;
  std::optional<std::string> session_id; // sessionId
  std::optional<std::uint64_t> exec_id;  // execId (S7)
  std::string data;                      // stdout_/stderr_: data; exit: message (why it did not start)
  int exit_code = 0;                     // exit: exitCode
  std::string reason;                    // killed: reason ("timeout", "stop", "memory_limit", "destroyed", ...);
                                         // exit: "not_found", "not_executable", "start_failed" ("" when it ran)
  std::optional<int> signal;             // killed: signal (null when none/unknown)
  sandbox_violation violation;           // violation: violation

  static sandbox_event make_stdout(std::string d, std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::stdout_;
    e.data = std::move(d);
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_stderr(std::string d, std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::stderr_;
    e.data = std::move(d);
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_exit(int code, std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::exit;
    e.exit_code = code;
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_starting(std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::starting;
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_ready(std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::ready;
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_killed(std::string why, std::optional<int> sig = std::nullopt,
                               std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::killed;
    e.reason = std::move(why);
    e.signal = sig;
    e.session_id = std::move(sid);
    return e;
  }
  static sandbox_event make_violation(sandbox_violation v, std::optional<std::string> sid = std::nullopt) {
    sandbox_event e;
    e.kind = event_kind::violation;
    e.violation = std::move(v);
    e.session_id = std::move(sid);
    return e;
  }

  friend bool operator==(const sandbox_event&, const sandbox_event&) = default;
};

// S5: exactly one line of JSON (no '\n' or '\r' anywhere, no trailing
// newline; the caller appends the line terminator).
inline std::string to_json_line(const sandbox_event& e) {
  std::string out;
  auto key = [&](std::string_view k) {
    out += ",\"";
    out += k;
    out += "\":";
  };
  auto str = [&](std::string_view v) {
    out += '"';
    append_json_escaped(out, v);
    out += '"';
  };
  out += "{\"event\":\"";
  out += to_string(e.kind);
  out += '"';
  if (e.session_id) {
    key("sessionId");
    str(*e.session_id);
  }
  if (e.exec_id) {
    key("execId");
    out += std::to_string(*e.exec_id);
  }
  switch (e.kind) {
  case event_kind::stdout_:
  case event_kind::stderr_:
    key("data");
    str(e.data);
    break;
  case event_kind::exit:
    key("exitCode");
    out += std::to_string(e.exit_code);
    if (!e.reason.empty()) {
      key("reason");
      str(e.reason);
      key("message");
      str(e.data);
    }
    break;
  case event_kind::starting:
  case event_kind::ready: break;
  case event_kind::killed:
    key("reason");
    str(e.reason);
    key("signal");
    out += e.signal ? std::to_string(*e.signal) : std::string("null");
    break;
  case event_kind::violation:
    out += ",\"violation\":{\"action\":";
    str(e.violation.action);
    out += ",\"target\":";
    str(e.violation.target);
    out += ",\"raw\":";
    if (e.violation.raw)
      str(*e.violation.raw);
    else
      out += "null";
    if (!e.violation.reason.empty()) {
      out += ",\"reason\":";
      str(e.violation.reason);
    }
    out += '}';
    break;
  }
  out += '}';
  return out;
}

// ---------------------------------------------------------------------------
// S3 handle
// ---------------------------------------------------------------------------

// details: adapter bookkeeping, JSON object values (workdir, pid, profile
// path, proxy ports, ...). picojson::object is a std::map: sorted, so
// serialisation is deterministic.
using details_map = picojson::object;

namespace detail {

// JSON equality without picojson's operator==, which converts int64 values to
// double in place (through a const reference) and loses precision above 2^53.
// Numbers compare by value: int64 5 equals double 5.0 (the serialiser writes
// 5.0 as "5", which reads back as int64).
inline bool json_equal(const picojson::value& a, const picojson::value& b) {
  const bool ai = a.is<std::int64_t>(), bi = b.is<std::int64_t>();
  if (ai && bi) return a.get<std::int64_t>() == b.get<std::int64_t>();
  if (a.is<double>() && b.is<double>()) {
    const double x = ai ? static_cast<double>(a.get<std::int64_t>()) : a.get<double>();
    const double y = bi ? static_cast<double>(b.get<std::int64_t>()) : b.get<double>();
    return x == y;
  }
  if (a.is<picojson::null>()) return b.is<picojson::null>();
  if (a.is<bool>()) return b.is<bool>() && a.get<bool>() == b.get<bool>();
  if (a.is<std::string>()) return b.is<std::string>() && a.get<std::string>() == b.get<std::string>();
  if (a.is<picojson::array>()) {
    if (!b.is<picojson::array>()) return false;
    const auto& x = a.get<picojson::array>();
    const auto& y = b.get<picojson::array>();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!json_equal(x[i], y[i])) return false;
    return true;
  }
  if (a.is<picojson::object>()) {
    if (!b.is<picojson::object>()) return false;
    const auto& x = a.get<picojson::object>();
    const auto& y = b.get<picojson::object>();
    if (x.size() != y.size()) return false;
    for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
      if (i->first != j->first || !json_equal(i->second, j->second)) return false;
    return true;
  }
  return false;
}

inline bool details_equal(const details_map& x, const details_map& y) {
  if (x.size() != y.size()) return false;
  for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
    if (i->first != j->first || !json_equal(i->second, j->second)) return false;
  return true;
}

} // namespace detail

// S3/S4. A handle starts in `created`. Every mutating operation returns
// result<void>; after `destroyed` each of them fails with
// errc::handle_destroyed (the handle is no longer valid). Observers (state(),
// details(), ...) stay usable so a destroyed handle can still be reported.
//
// Invariant: error() has a value exactly when state() == error. fail(e) is the
// only way into the error state (transition(error) is rejected with
// invalid_argument: the state always carries its reason); leaving the error
// state (only to destroyed) clears it.
class sandbox_handle {
public:
  sandbox_handle(std::string session_id, ccsb::backend b)
      : session_id_(std::move(session_id)), backend_(b) {}

  // Rebuilds a handle read back from storage (spec_json.hpp), enforcing the
  // invariant above.
  static result<sandbox_handle> restore(std::string session_id, ccsb::backend b,
                                        sandbox_state s, std::optional<ccsb::error> err,
                                        details_map details) {
    if (s == sandbox_state::error && !err)
      return make_error(errc::missing_field, "error", "state is error but no error is set");
    if (s != sandbox_state::error && err)
      return make_error(errc::invalid_argument, "error",
                        "error is set only when state is error, but state is " +
                            std::string(to_string(s)));
    sandbox_handle h(std::move(session_id), b);
    h.state_ = s;
    h.error_ = std::move(err);
    h.details_ = std::move(details);
    return h;
  }

  const std::string& session_id() const noexcept { return session_id_; }
  ccsb::backend backend() const noexcept { return backend_; }
  sandbox_state state() const noexcept { return state_; }
  const std::optional<ccsb::error>& error() const noexcept { return error_; }
  const details_map& details() const noexcept { return details_; }
  bool valid() const noexcept { return state_ != sandbox_state::destroyed; }

  // Any S4 move except into `error` (use fail()).
  result<void> transition(sandbox_state to) {
    if (auto r = check_alive(to_string(to)); !r) return r;
    if (to == sandbox_state::error)
      return make_error(errc::invalid_argument, "state",
                        "enter the error state with fail(error), which records why");
    if (auto r = check_legal(to); !r) return r;
    state_ = to;
    error_.reset();
    return ok();
  }

  // created/warm/active -> error, recording why.
  result<void> fail(ccsb::error why) {
    if (auto r = check_alive("error"); !r) return r;
    if (auto r = check_legal(sandbox_state::error); !r) return r;
    state_ = sandbox_state::error;
    error_ = std::move(why);
    return ok();
  }

  result<void> destroy() { return transition(sandbox_state::destroyed); }

  result<void> set_detail(std::string key, picojson::value v) {
    if (auto r = check_alive("set detail " + key); !r) return r;
    details_[std::move(key)] = std::move(v);
    return ok();
  }

  result<void> erase_detail(const std::string& key) {
    if (auto r = check_alive("erase detail " + key); !r) return r;
    details_.erase(key);
    return ok();
  }

  friend bool operator==(const sandbox_handle& a, const sandbox_handle& b) {
    return a.session_id_ == b.session_id_ && a.backend_ == b.backend_ && a.state_ == b.state_ &&
           a.error_ == b.error_ && detail::details_equal(a.details_, b.details_);
  }

private:
  result<void> check_alive(std::string_view attempted) const {
    if (state_ != sandbox_state::destroyed) return ok();
    return make_error(errc::handle_destroyed, "state",
                      "sandbox handle of session " + quote(session_id_) +
                          " is destroyed; refusing " + std::string(attempted));
  }

  result<void> check_legal(sandbox_state to) const {
    if (is_legal_transition(state_, to)) return ok();
    std::string allowed;
    for (sandbox_state s : kAllStates)
      if (is_legal_transition(state_, s)) {
        if (!allowed.empty()) allowed += ", ";
        allowed += to_string(s);
      }
    return make_error(errc::illegal_transition, "state",
                      "illegal transition " + std::string(to_string(state_)) + " -> " +
                          std::string(to_string(to)) + " (from " +
                          std::string(to_string(state_)) + " only: " + allowed + ")");
  }

  std::string session_id_;
  ccsb::backend backend_ = ccsb::backend::none;
  sandbox_state state_ = sandbox_state::created;
  std::optional<ccsb::error> error_;
  details_map details_;
};

} // namespace ccsb
