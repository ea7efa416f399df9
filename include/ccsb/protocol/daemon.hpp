// ccsb/protocol/daemon.hpp — the JSON-line protocol of ccsbd, the sidecar
// daemon that offers sessions to servers in any language (S8). One typed
// header for both ends: parse_request() in the daemon, write_request() for a
// C++ client (and the round-trip tests); the reply writers for the daemon.
// Pure: no I/O. The protocol as a client sees it, with an example of every
// request and reply: docs/ccsbd-protocol.md.
//
// Framing (line_framer): one request per line, at most kMaxRequestLine bytes
// before the newline (a "\r" before it is accepted and counts). A longer
// line is answered with one error (field "$") and skipped up to its newline:
// the connection resynchronises at the next line. Empty lines are ignored.
//
// A request is a JSON object with "op" and the op's fields; "id" (a string or
// an integer, optional) is echoed on the request's direct replies; a reply to
// a line without a readable id has "id":null and the line's number ("line",
// put_id). launch's per-session settings (env, runAs, limits, egress) are
// read with ccsb-run's checks (ccsb/session_settings.hpp). The parser
// is strict and names the field of the first problem it finds:
//   * bytes that are not UTF-8 -> field "$" with the byte offset; anything
//     parse_json refuses (syntax, trailing data, duplicate keys, depth,
//     numbers out of range) -> its field;
//   * a top level that is not an object, a missing "op" or an unknown one ->
//     "$" / "op";
//   * a missing field (errc::missing_field), a wrong JSON type
//     (errc::wrong_type), a value out of range (errc::invalid_argument) ->
//     the field's path: "argv[2]", "pty.rows", "env.NAME", "spec.bindMounts[0].hostPath";
//   * a field the op does not have -> that field (a misspelt "timeout" must
//     not silently mean "no timeout"). The spec itself follows parse_spec
//     (S1: unknown spec fields are ignored, stored specs stay readable);
//     each is listed in launch_request::unknown ("spec.KEY") and comes back
//     in `ready`'s "warnings"; with launch's "strict":true (or ccsbd
//     --strict) the first one is refused, naming its path;
//   * a NUL byte in argv, env or workdir (it could not reach execve intact).
//
// Replies and events are one JSON object per line, "event" first; the
// daemon's own lines (the writers below) have the other fields in sorted
// order. Events of a session are the S5 lines (spec.hpp to_json_line, in its
// field order) with sessionId and, per exec, execId.
//
// A session is a capability (S8): launch's `ready` carries a token, and a
// request that names a session may carry "token"; the daemon serves a
// connection that launched the session or once presented its token. The
// pure checks the daemon makes around the socket (a peer in another
// namespace, a bind that exposes the socket's directory) are here too:
// peer_namespace_mismatch and bind_exposure.
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/resource_limits.hpp"  // launch's L7 "limits" (pure, platform-neutral)
#include "ccsb/session_settings.hpp" // launch's env, runAs, limits, egress: ccsb-run's checks
#include "ccsb/policy.hpp"
#include "ccsb/protocol/egressd_events.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"

#include <picojson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ccsb::protocol::daemon {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::size_t kMaxRequestLine = kMaxJsonBytes; // 1 MiB, the newline not counted
inline constexpr std::int64_t kMaxTimeoutMs = 30LL * 24 * 3600 * 1000;  // 30 days
inline constexpr std::size_t kMaxArgs = protocol::kMaxArgs;
inline constexpr std::size_t kMaxEnv = protocol::kMaxEnv;

// kill's "signal": the names a client may send (the "SIG" prefix optional),
// with Linux's numbers (the supervisor sends them inside the sandbox).
struct signal_name {
  std::string_view name;
  int number;
};
inline constexpr signal_name kKillSignals[] = {{"SIGKILL", 9}, {"SIGTERM", 15}, {"SIGINT", 2},
                                               {"SIGHUP", 1},  {"SIGQUIT", 3},  {"SIGUSR1", 10},
                                               {"SIGUSR2", 12}};
inline std::string_view signal_text(int number) {
  for (const auto& s : kKillSignals)
    if (s.number == number) return s.name;
  return "SIGKILL";
}

struct launch_request {
  sandbox_spec spec;
  ccsb::profile prof{ccsb::profile::dispatch};
  std::optional<ccsb::backend> requested; // "backend": an explicit request (B6); absent: the profile's default
  // "microvmAccel" (X4): "kvm" or "tcg", with "backend":"microvm" only;
  // absent: the daemon's CCSB_MICROVM_ACCEL, else KVM. "tcg" is the opt-in
  // into QEMU's emulated CPU where there is no KVM.
  std::optional<std::string> microvm_accel;
  ccsb::resource_limits limits;         // "limits" (L7): each field absent keeps its default
  env_list env;                           // "env" (E1): added to the session's environment, sorted by name
  std::optional<ccsb::run_as_ids> run_as; // "runAs" (L1): a root daemon only
  ccsb::egress_settings egress;         // "egress": the session's egressd options
  bool strict{false};                     // "strict": an unknown spec key is refused, not only warned about
  std::vector<unknown_field> unknown;     // the spec's unknown keys ("spec.KEY"), read, never written
  friend bool operator==(const launch_request&, const launch_request&) = default;
};

struct exec_request {
  std::string session_id;
  std::vector<std::string> argv;
  std::optional<std::string> workdir;
  env_list env; // sorted by name (a JSON object)
  std::optional<std::int64_t> timeout_ms;
  std::optional<terminal_size> pty;
  std::optional<std::string> stdin_data; // written, then end of input (a terminal: typed, no EOF)
  std::optional<std::string> token;      // the session's capability (absent: the connection holds it)
  friend bool operator==(const exec_request&, const exec_request&) = default;
};

struct stdin_request {
  std::string session_id;
  exec_id exec{0};
  std::string data;
  bool eof{false};
  std::optional<std::string> token;
  friend bool operator==(const stdin_request&, const stdin_request&) = default;
};

struct resize_request {
  std::string session_id;
  exec_id exec{0};
  terminal_size size;
  std::optional<std::string> token;
  friend bool operator==(const resize_request&, const resize_request&) = default;
};

struct kill_request {
  std::string session_id;
  exec_id exec{0};
  int signal{9}; // "signal": SIGKILL unless named (kKillSignals)
  std::optional<std::string> token;
  friend bool operator==(const kill_request&, const kill_request&) = default;
};

// The ops that name a session and nothing else.
enum class session_op { suspend, resume, destroy, handle, attach, detach };

struct session_op_request {
  session_op op{session_op::handle};
  std::string session_id;
  std::optional<std::string> token;
  friend bool operator==(const session_op_request&, const session_op_request&) = default;
};

struct list_request {
  friend bool operator==(const list_request&, const list_request&) = default;
};

using request_body =
    std::variant<launch_request, exec_request, stdin_request, resize_request, kill_request, session_op_request, list_request>;

struct request {
  picojson::value id; // null: none given
  request_body body;
  friend bool operator==(const request&, const request&) = default;
};

constexpr std::string_view to_string(session_op o) noexcept {
  switch (o) {
  case session_op::suspend: return "suspend";
  case session_op::resume: return "resume";
  case session_op::destroy: return "destroy";
  case session_op::handle: return "handle";
  case session_op::attach: return "attach";
  case session_op::detach: return "detach";
  }
  return "handle";
}

inline constexpr session_op kSessionOps[] = {session_op::suspend, session_op::resume, session_op::destroy,
                                             session_op::handle,  session_op::attach, session_op::detach};

inline std::string_view op_name(const request_body& b) {
  struct {
    std::string_view operator()(const launch_request&) const { return "launch"; }
    std::string_view operator()(const exec_request&) const { return "exec"; }
    std::string_view operator()(const stdin_request&) const { return "stdin"; }
    std::string_view operator()(const resize_request&) const { return "resize"; }
    std::string_view operator()(const kill_request&) const { return "kill"; }
    std::string_view operator()(const session_op_request& r) const { return to_string(r.op); }
    std::string_view operator()(const list_request&) const { return "list"; }
  } name;
  return std::visit(name, b);
}

// The session a request names (every op but launch and list).
inline const std::string* session_id_of(const request_body& b) {
  return std::visit(
      [](const auto& r) -> const std::string* {
        if constexpr (requires { r.session_id; }) return &r.session_id;
        else return nullptr;
      },
      b);
}

// The token a request presents (every op but launch and list; null when none).
inline const std::optional<std::string>* token_of(const request_body& b) {
  return std::visit(
      [](const auto& r) -> const std::optional<std::string>* {
        if constexpr (requires { r.token; }) return &r.token;
        else return nullptr;
      },
      b);
}

// A session's token: kTokenBytes random bytes (getrandom, in the daemon), as
// lowercase hex. A presented token longer than kMaxTokenText is refused
// before it is compared.
inline constexpr std::size_t kTokenBytes = 16;
inline constexpr std::size_t kMaxTokenText = 256;

// Compares a presented token with the session's in time that depends on the
// length only: the answer must not tell how many leading characters match.
inline bool token_matches(std::string_view presented, std::string_view expected) noexcept {
  if (presented.size() != expected.size() || expected.empty()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}

inline std::string token_text(const unsigned char (&bytes)[kTokenBytes]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// ---------------------------------------------------------------------------
// the daemon's own checks around its socket (decisions only; the I/O is in
// tools/ccsbd/)
// ---------------------------------------------------------------------------

// A file or namespace as the kernel names it.
struct node_id {
  std::uint64_t dev{0};
  std::uint64_t ino{0};
  friend bool operator==(const node_id&, const node_id&) = default;
};

// The peer's namespaces against the daemon's own, in the order given: the
// name of the first that differs ("user", "mnt", "pid"), or nullopt when the
// peer shares every one. A sandboxed command always lives in a mount and a
// PID namespace of its own (bwrap), with an unprivileged launcher in a user
// namespace too; a peer that shares them all is a host process.
struct ns_ids {
  std::string name;
  node_id daemon;
  node_id peer;
};
inline std::optional<std::string> peer_namespace_mismatch(const std::vector<ns_ids>& all) {
  for (const auto& n : all)
    if (!(n.daemon == n.peer)) return n.name;
  return std::nullopt;
}

// Whether a bind mount would show a session the daemon's socket.
// `socket_chain` is the socket's directory, then each ancestor up to "/";
// `bind_chain` is the bind's source (when it exists; else its deepest
// existing ancestor), then each ancestor up to "/". By identity, not by
// spelling, so a symlink or a second mount of the same directory is the
// same directory.
//   at_or_above: the source is the socket's directory or one of its
//                ancestors: the session sees the socket (and, writable, can
//                unlink it or rename a directory on its path);
//   below:       the source is inside the socket's directory.
enum class exposure { none, at_or_above, below };
inline exposure bind_exposure(const std::vector<node_id>& socket_chain, const std::vector<node_id>& bind_chain,
                              bool bind_exists) {
  if (socket_chain.empty() || bind_chain.empty()) return exposure::at_or_above; // unknown: refused
  if (bind_exists)
    for (const auto& a : socket_chain)
      if (a == bind_chain.front()) return exposure::at_or_above;
  for (const auto& b : bind_chain)
    if (b == socket_chain.front()) return exposure::below;
  return exposure::none;
}

// ---------------------------------------------------------------------------
// framing
// ---------------------------------------------------------------------------

// Cuts a byte stream into lines of at most `max` bytes. feed() calls
// on_line(std::string_view) for each complete line (without "\n" or
// "\r\n"; empty lines are skipped) and on_overflow(std::size_t seen) once per
// line that grew past `max`; the rest of that line, up to its newline, is
// dropped. Memory stays below max + one read.
class line_framer {
public:
  explicit line_framer(std::size_t max = kMaxRequestLine) : max_(max) {}

  template <class Line, class Overflow> void feed(std::string_view bytes, Line&& on_line, Overflow&& on_overflow) {
    while (!bytes.empty()) {
      const std::size_t nl = bytes.find('\n');
      const std::string_view part = bytes.substr(0, nl);
      if (skipping_) {
        skipped_ += part.size();
      } else if (buf_.size() + part.size() > max_) {
        skipping_ = true;
        skipped_ = buf_.size() + part.size();
        buf_.clear();
        buf_.shrink_to_fit();
      } else {
        buf_.append(part);
      }
      if (nl == std::string_view::npos) {
        if (skipping_ && !reported_) {
          reported_ = true;
          on_overflow(skipped_);
        }
        return;
      }
      bytes.remove_prefix(nl + 1);
      if (skipping_) {
        if (!reported_) on_overflow(skipped_);
        skipping_ = reported_ = false;
        skipped_ = 0;
        continue;
      }
      std::string_view line(buf_);
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!line.empty()) on_line(line);
      buf_.clear();
    }
  }

  // Bytes of an unfinished line are held (or being skipped).
  bool partial() const { return skipping_ || !buf_.empty(); }

private:
  std::size_t max_;
  std::string buf_;
  bool skipping_{false};
  bool reported_{false};
  std::size_t skipped_{0};
};

inline error line_too_long(std::size_t seen) {
  return make_error(errc::invalid_argument, "$",
                    "request line longer than " + std::to_string(kMaxRequestLine) + " bytes (" +
                        std::to_string(seen) + "+ before its newline); it was skipped up to its newline");
}

// ---------------------------------------------------------------------------
// parsing
// ---------------------------------------------------------------------------

namespace detail {

using reader = egressd_events::detail::object_reader;

inline result<void> no_nul(const std::string& field, std::string_view s) {
  if (s.find('\0') != std::string_view::npos) return make_error(errc::invalid_argument, field, "contains a NUL byte");
  return ok();
}

inline result<std::string> session_id(reader& r) {
  auto s = r.text("sessionId");
  if (!s) return std::move(s).err();
  if (auto c = no_nul("sessionId", *s); !c) return std::move(c).err();
  return s;
}

inline result<std::optional<std::string>> token_field(reader& r) {
  const picojson::value* v = r.find("token");
  if (!v || v->is<picojson::null>()) return std::optional<std::string>{};
  if (!v->is<std::string>()) return ccsb::detail::type_error("token", "a string or null", *v);
  const auto& s = v->get<std::string>();
  if (s.empty() || s.size() > kMaxTokenText)
    return make_error(errc::invalid_argument, "token",
                      "a token is 1.." + std::to_string(kMaxTokenText) + " characters, got " + std::to_string(s.size()));
  return std::optional<std::string>{s};
}

inline result<exec_id> exec_id_field(reader& r) {
  auto i = r.integer("execId", 1, std::numeric_limits<std::int64_t>::max());
  if (!i) return std::move(i).err();
  return static_cast<exec_id>(*i);
}

inline result<terminal_size> terminal_size_of(const picojson::object& o, const std::string& prefix) {
  reader r(o, prefix);
  auto rows = r.integer("rows", 1, 65535);
  if (!rows) return std::move(rows).err();
  auto cols = r.integer("cols", 1, 65535);
  if (!cols) return std::move(cols).err();
  if (auto u = r.unexpected(prefix.substr(0, prefix.size() - 1)); !u) return std::move(u).err();
  return terminal_size{static_cast<std::uint16_t>(*rows), static_cast<std::uint16_t>(*cols)};
}

// A string that may be empty (stdin data), absent -> nullopt when `optional`.
inline result<std::optional<std::string>> any_string(reader& r, std::string_view key, bool nullable) {
  const picojson::value* v = r.find(key);
  if (!v || (nullable && v->is<picojson::null>())) return std::optional<std::string>{};
  if (!v->is<std::string>()) return ccsb::detail::type_error(r.path(key), nullable ? "a string or null" : "a string", *v);
  return std::optional<std::string>{v->get<std::string>()};
}

// launch's "limits" (L7): {"memory", "pids", "tmpSize", "cpus"}, each
// optional. A value is an integer, or a string in the flags' syntax ("512M",
// "1.5"); cpus may be a number too (1.5), at most three decimals. Each goes
// through set_limit, ccsb-run's check of --memory, --pids, --tmp-size, --cpus.
inline result<ccsb::resource_limits> limits_of(const picojson::object& o) {
  reader r(o, "limits.");
  ccsb::resource_limits l;
  for (std::string_view key : {"memory", "pids", "tmpSize", "cpus"}) {
    const picojson::value* v = r.find(key);
    if (!v) continue;
    std::string text;
    if (v->is<std::string>()) text = v->get<std::string>();
    else if (v->is<std::int64_t>()) text = std::to_string(v->get<std::int64_t>());
    else if (key == "cpus" && v->is<double>()) {
      // In thousandths when the number has at most three decimals (1.5 ->
      // "1.5"); else its own spelling, which parse_cpus refuses by name.
      const double m = v->get<double>() * 1000;
      const bool whole = m >= 0 && m <= 1e9 && std::fabs(m - std::nearbyint(m)) < 1e-6;
      text = whole ? ccsb::cpus_text(static_cast<std::uint32_t>(std::nearbyint(m))) : v->to_str();
    } else
      return ccsb::detail::type_error(r.path(key),
                                      key == "cpus" ? "a number of CPUs such as 1.5" : "an integer or a size such as \"512M\"",
                                      *v);
    if (auto c = ccsb::set_limit(l, key, text, r.path(key)); !c) return std::move(c).err();
  }
  if (auto u = r.unexpected("limits"); !u) return std::move(u).err();
  return l;
}

// launch's "egress": {"allowUpstream": [CIDR], "resolve": ["NAME=IP"],
// "dnsServer": "IP:PORT"}, checked as ccsb-run's --egress-opt values.
inline result<ccsb::egress_settings> egress_of(const picojson::object& o) {
  reader r(o, "egress.");
  ccsb::egress_settings e;
  auto list = [&](std::string_view key, std::vector<std::string>& into) -> result<void> {
    const picojson::value* v = r.find(key);
    if (!v) return ok();
    if (!v->is<picojson::array>()) return ccsb::detail::type_error(r.path(key), "an array of strings", *v);
    for (std::size_t i = 0; i < v->get<picojson::array>().size(); ++i) {
      const auto& x = v->get<picojson::array>()[i];
      if (!x.is<std::string>()) return ccsb::detail::type_error(ccsb::detail::index_field(r.path(key), i), "a string", x);
      into.push_back(x.get<std::string>());
    }
    return ok();
  };
  if (auto c = list("allowUpstream", e.allow_upstream); !c) return std::move(c).err();
  if (auto c = list("resolve", e.resolve); !c) return std::move(c).err();
  if (const picojson::value* d = r.find("dnsServer"); d && !d->is<picojson::null>()) {
    if (!d->is<std::string>()) return ccsb::detail::type_error(r.path("dnsServer"), "a string or null", *d);
    e.dns_server = d->get<std::string>();
  }
  if (auto u = r.unexpected("egress (allowUpstream, resolve, dnsServer)"); !u) return std::move(u).err();
  if (auto c = ccsb::check_egress(e); !c) return std::move(c).err();
  return e;
}

// launch's "env": an object of strings; each through env_addition (E3
// refuses, naming env.NAME), as ccsb-run's --env.
inline result<env_list> env_of(const picojson::value& v) {
  env_list out;
  if (!v.is<picojson::object>()) return ccsb::detail::type_error("env", "an object of strings or null", v);
  const auto& o = v.get<picojson::object>();
  if (o.size() > kMaxEnv) return make_error(errc::invalid_argument, "env", "more than " + std::to_string(kMaxEnv) + " variables");
  for (const auto& [name, value] : o) {
    if (!value.is<std::string>()) return ccsb::detail::type_error("env." + name, "a string", value);
    auto a = ccsb::env_addition(name, value.get<std::string>());
    if (!a) return std::move(a).err();
    out.push_back(std::move(*a));
  }
  return out;
}

} // namespace detail

// S1 under "strict" (or ccsbd --strict): the first unknown spec key.
inline error strict_refusal(const unknown_field& u, std::string_view by) {
  return make_error(errc::invalid_argument, u.path, describe(u) + "; " + std::string(by) + " refuses unknown keys");
}

namespace detail {

inline result<launch_request> launch_of(reader& r) {
  launch_request q;
  auto spec = r.object("spec");
  if (!spec) return std::move(spec).err();
  const picojson::value spec_value(**spec);
  auto s = spec_from_json(spec_value);
  if (!s) return nest("spec", std::move(s).err());
  q.spec = std::move(*s);
  q.unknown = unknown_spec_fields(spec_value, "spec.");
  if (const picojson::value* st = r.find("strict")) {
    if (!st->is<bool>()) return ccsb::detail::type_error("strict", "a boolean", *st);
    q.strict = st->get<bool>();
  }
  if (q.strict && !q.unknown.empty()) return strict_refusal(q.unknown.front(), "\"strict\":true");
  if (const picojson::value* p = r.find("profile")) {
    if (!p->is<std::string>()) return ccsb::detail::type_error("profile", "a string", *p);
    auto prof = parse_profile(p->get<std::string>());
    if (!prof) return std::move(prof).err();
    q.prof = *prof;
  }
  if (const picojson::value* b = r.find("backend"); b && !b->is<picojson::null>()) {
    if (!b->is<std::string>()) return ccsb::detail::type_error("backend", "a string or null", *b);
    auto be = parse_backend_request(b->get<std::string>(), "backend");
    if (!be) return std::move(be).err();
    q.requested = *be;
  }
  if (const picojson::value* a = r.find("microvmAccel"); a && !a->is<picojson::null>()) {
    if (!a->is<std::string>()) return ccsb::detail::type_error("microvmAccel", "\"kvm\", \"tcg\" or null", *a);
    const std::string& v = a->get<std::string>();
    if (v != "kvm" && v != "tcg")
      return make_error(errc::invalid_argument, "microvmAccel", "expected kvm or tcg, got " + ccsb::quote(v));
    if (q.requested != ccsb::backend::microvm)
      return make_error(errc::invalid_argument, "microvmAccel",
                        "the accelerator is for \"backend\":\"microvm\" only; this launch asks for " +
                            (q.requested ? ccsb::quote(std::string(to_string(*q.requested))) : std::string("no backend")));
    q.microvm_accel = v;
  }
  if (const picojson::value* l = r.find("limits")) {
    if (!l->is<picojson::object>()) return ccsb::detail::type_error("limits", "an object", *l);
    auto lim = limits_of(l->get<picojson::object>());
    if (!lim) return std::move(lim).err();
    q.limits = *lim;
  }
  if (const picojson::value* e = r.find("env"); e && !e->is<picojson::null>()) {
    auto env = env_of(*e);
    if (!env) return std::move(env).err();
    q.env = std::move(*env);
  }
  if (const picojson::value* a = r.find("runAs"); a && !a->is<picojson::null>()) {
    std::string text;
    if (a->is<std::int64_t>()) text = std::to_string(a->get<std::int64_t>());
    else if (a->is<std::string>()) text = a->get<std::string>();
    else return ccsb::detail::type_error("runAs", "\"UID[:GID]\", a uid or null", *a);
    auto ids = ccsb::parse_run_as("runAs", text);
    if (!ids) return std::move(ids).err();
    q.run_as = *ids;
  }
  if (const picojson::value* e = r.find("egress"); e && !e->is<picojson::null>()) {
    if (!e->is<picojson::object>()) return ccsb::detail::type_error("egress", "an object or null", *e);
    auto eg = egress_of(e->get<picojson::object>());
    if (!eg) return std::move(eg).err();
    q.egress = std::move(*eg);
  }
  return q;
}

inline result<exec_request> exec_of(reader& r) {
  exec_request q;
  auto sid = session_id(r);
  if (!sid) return std::move(sid).err();
  q.session_id = std::move(*sid);
  auto argv = r.required("argv");
  if (!argv) return std::move(argv).err();
  if (!(*argv)->is<picojson::array>()) return ccsb::detail::type_error("argv", "an array of strings", **argv);
  const auto& a = (*argv)->get<picojson::array>();
  if (a.empty()) return make_error(errc::invalid_argument, "argv", "no command (an empty array)");
  if (a.size() > kMaxArgs) return make_error(errc::invalid_argument, "argv", "more than " + std::to_string(kMaxArgs) + " arguments");
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string f = ccsb::detail::index_field("argv", i);
    if (!a[i].is<std::string>()) return ccsb::detail::type_error(f, "a string", a[i]);
    const auto& s = a[i].get<std::string>();
    if (i == 0 && s.empty()) return make_error(errc::invalid_argument, f, "the command must not be empty");
    if (auto c = no_nul(f, s); !c) return std::move(c).err();
    q.argv.push_back(s);
  }
  if (const picojson::value* w = r.find("workdir"); w && !w->is<picojson::null>()) {
    if (!w->is<std::string>()) return ccsb::detail::type_error("workdir", "a string or null", *w);
    const auto& s = w->get<std::string>();
    if (s.empty() || s.front() != '/') return make_error(errc::invalid_argument, "workdir", "not an absolute path: " + ccsb::quote(s));
    if (auto c = no_nul("workdir", s); !c) return std::move(c).err();
    q.workdir = s;
  }
  if (const picojson::value* e = r.find("env"); e && !e->is<picojson::null>()) {
    if (!e->is<picojson::object>()) return ccsb::detail::type_error("env", "an object of strings or null", *e);
    const auto& o = e->get<picojson::object>();
    if (o.size() > kMaxEnv) return make_error(errc::invalid_argument, "env", "more than " + std::to_string(kMaxEnv) + " variables");
    for (const auto& [name, value] : o) {
      const std::string f = "env." + name;
      if (name.empty() || name.find('=') != std::string::npos)
        return make_error(errc::invalid_argument, f, "a variable name is non-empty and has no '='");
      if (!value.is<std::string>()) return ccsb::detail::type_error(f, "a string", value);
      if (auto c = no_nul(f, name + value.get<std::string>()); !c) return std::move(c).err();
      q.env.push_back({name, value.get<std::string>()});
    }
  }
  if (const picojson::value* t = r.find("timeoutMs"); t && !t->is<picojson::null>()) {
    if (!t->is<std::int64_t>()) return ccsb::detail::type_error("timeoutMs", "an integer or null", *t);
    const std::int64_t ms = t->get<std::int64_t>();
    if (ms < 1 || ms > kMaxTimeoutMs)
      return make_error(errc::invalid_argument, "timeoutMs", std::to_string(ms) + " is outside 1.." + std::to_string(kMaxTimeoutMs));
    q.timeout_ms = ms;
  }
  if (const picojson::value* p = r.find("pty"); p && !p->is<picojson::null>()) {
    if (!p->is<picojson::object>()) return ccsb::detail::type_error("pty", "an object or null", *p);
    auto size = terminal_size_of(p->get<picojson::object>(), "pty.");
    if (!size) return std::move(size).err();
    q.pty = *size;
  }
  auto in = any_string(r, "stdin", true);
  if (!in) return std::move(in).err();
  q.stdin_data = std::move(*in);
  auto t = token_field(r);
  if (!t) return std::move(t).err();
  q.token = std::move(*t);
  return q;
}

inline result<stdin_request> stdin_of(reader& r) {
  stdin_request q;
  auto sid = session_id(r);
  if (!sid) return std::move(sid).err();
  q.session_id = std::move(*sid);
  auto id = exec_id_field(r);
  if (!id) return std::move(id).err();
  q.exec = *id;
  auto data = any_string(r, "data", false);
  if (!data) return std::move(data).err();
  q.data = data->value_or("");
  if (const picojson::value* e = r.find("eof")) {
    if (!e->is<bool>()) return ccsb::detail::type_error("eof", "a boolean", *e);
    q.eof = e->get<bool>();
  }
  if (!r.find("data") && !q.eof) return make_error(errc::missing_field, "data", "required unless \"eof\" is true");
  auto t = token_field(r);
  if (!t) return std::move(t).err();
  q.token = std::move(*t);
  return q;
}

inline result<resize_request> resize_of(reader& r) {
  resize_request q;
  auto sid = session_id(r);
  if (!sid) return std::move(sid).err();
  q.session_id = std::move(*sid);
  auto id = exec_id_field(r);
  if (!id) return std::move(id).err();
  q.exec = *id;
  auto rows = r.integer("rows", 1, 65535);
  if (!rows) return std::move(rows).err();
  auto cols = r.integer("cols", 1, 65535);
  if (!cols) return std::move(cols).err();
  q.size = {static_cast<std::uint16_t>(*rows), static_cast<std::uint16_t>(*cols)};
  auto t = token_field(r);
  if (!t) return std::move(t).err();
  q.token = std::move(*t);
  return q;
}

inline result<kill_request> kill_of(reader& r) {
  kill_request q;
  auto sid = session_id(r);
  if (!sid) return std::move(sid).err();
  q.session_id = std::move(*sid);
  auto id = exec_id_field(r);
  if (!id) return std::move(id).err();
  q.exec = *id;
  if (const picojson::value* g = r.find("signal"); g && !g->is<picojson::null>()) {
    if (!g->is<std::string>()) return ccsb::detail::type_error("signal", "a signal name such as \"SIGTERM\"", *g);
    std::string name = g->get<std::string>();
    if (!name.starts_with("SIG")) name = "SIG" + name;
    bool known = false;
    for (const auto& k : kKillSignals)
      if (k.name == name) {
        q.signal = k.number;
        known = true;
      }
    if (!known)
      return make_error(errc::invalid_argument, "signal",
                        "unknown signal " + ccsb::quote(g->get<std::string>()) +
                            "; expected SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2");
  }
  auto t = token_field(r);
  if (!t) return std::move(t).err();
  q.token = std::move(*t);
  return q;
}

inline result<request_body> body_of(std::string_view op, reader& r) {
  auto wrap = [](auto res) -> result<request_body> {
    if (!res) return std::move(res).err();
    return request_body(std::move(*res));
  };
  if (op == "launch") return wrap(launch_of(r));
  if (op == "exec") return wrap(exec_of(r));
  if (op == "stdin") return wrap(stdin_of(r));
  if (op == "resize") return wrap(resize_of(r));
  if (op == "kill") return wrap(kill_of(r));
  if (op == "list") return request_body(list_request{});
  for (session_op s : kSessionOps)
    if (op == to_string(s)) {
      auto sid = session_id(r);
      if (!sid) return std::move(sid).err();
      auto t = token_field(r);
      if (!t) return std::move(t).err();
      return request_body(session_op_request{s, std::move(*sid), std::move(*t)});
    }
  return make_error(errc::invalid_argument, "op",
                    "unknown op " + ccsb::quote(op) +
                        "; expected launch, exec, stdin, resize, kill, suspend, resume, destroy, handle, attach, detach or list");
}

} // namespace detail

// What parse_request read: the id and op (for the reply, also when the rest
// is refused) and the request or the first problem.
struct parsed_request {
  picojson::value id; // null when absent or unreadable
  std::string op;     // "" when absent or unreadable
  result<request_body> body;
};

inline parsed_request parse_request(std::string_view line) {
  auto fail = [](error e) { return parsed_request{picojson::value(), std::string(), std::move(e)}; };
  if (line.size() > kMaxRequestLine) return fail(line_too_long(line.size()));
  if (auto at = egressd_events::invalid_utf8_at(line))
    return fail(make_error(errc::invalid_argument, "$", "byte " + std::to_string(*at) + " is not UTF-8"));
  auto v = parse_json(line);
  if (!v) return fail(std::move(v).err());
  if (!v->is<picojson::object>()) return fail(ccsb::detail::type_error("$", "a JSON object (a request)", *v));
  const auto& o = v->get<picojson::object>();
  detail::reader r(o, "");
  parsed_request out{picojson::value(), std::string(), make_error(errc::invalid_argument, "$", "unread")};
  if (const picojson::value* id = r.find("id"); id && !id->is<picojson::null>()) {
    if (!id->is<std::string>() && !id->is<std::int64_t>()) {
      out.body = ccsb::detail::type_error("id", "a string, an integer or null", *id);
      return out;
    }
    out.id = *id;
  }
  const picojson::value* op = r.find("op");
  if (!op) {
    out.body = make_error(errc::missing_field, "op", "required field is missing");
    return out;
  }
  if (!op->is<std::string>()) {
    out.body = ccsb::detail::type_error("op", "a string", *op);
    return out;
  }
  out.op = op->get<std::string>();
  auto body = detail::body_of(out.op, r);
  if (!body) {
    out.body = std::move(body).err();
    return out;
  }
  if (auto u = r.unexpected("a request of op " + ccsb::quote(out.op)); !u) {
    out.body = std::move(u).err();
    return out;
  }
  out.body = std::move(body);
  return out;
}

// ---------------------------------------------------------------------------
// writing
// ---------------------------------------------------------------------------

namespace detail {

// JSON text of `v` with ccsb's one string escaping (spec.hpp
// append_json_escaped): whatever bytes a string holds (a host path in a
// handle's details, say), the line is valid UTF-8; picojson's serialize()
// would copy bytes that are not UTF-8 through.
inline void append_value(std::string& out, const picojson::value& v) {
  if (v.is<std::string>()) {
    out += '"';
    ccsb::append_json_escaped(out, v.get<std::string>());
    out += '"';
  } else if (v.is<picojson::array>()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.get<picojson::array>()) {
      if (!std::exchange(first, false)) out += ',';
      append_value(out, e);
    }
    out += ']';
  } else if (v.is<picojson::object>()) {
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v.get<picojson::object>()) {
      if (!std::exchange(first, false)) out += ',';
      out += '"';
      ccsb::append_json_escaped(out, k);
      out += "\":";
      append_value(out, e);
    }
    out += '}';
  } else {
    out += v.serialize(); // null, true/false, a number
  }
}

} // namespace detail

// {"event":KIND, then the fields of `rest` (sorted)}: one line of valid
// UTF-8, no newline.
inline std::string event_object(std::string_view kind, const picojson::object& rest) {
  std::string out = "{\"event\":\"";
  ccsb::append_json_escaped(out, kind);
  out += '"';
  for (const auto& [k, v] : rest) {
    out += ",\"";
    ccsb::append_json_escaped(out, k);
    out += "\":";
    detail::append_value(out, v);
  }
  out += '}';
  return out;
}

inline std::string write_request(const request& q) {
  picojson::object o;
  if (!q.id.is<picojson::null>()) o["id"] = q.id;
  o["op"] = picojson::value(std::string(op_name(q.body)));
  auto target = [&o](const std::string& sid, std::optional<exec_id> x) {
    o["sessionId"] = picojson::value(sid);
    if (x) o["execId"] = picojson::value(static_cast<std::int64_t>(*x));
  };
  if (const auto* t = token_of(q.body); t && *t) o["token"] = picojson::value(**t);
  auto size_into = [](picojson::object& s, const terminal_size& t) {
    s["rows"] = picojson::value(static_cast<std::int64_t>(t.rows));
    s["cols"] = picojson::value(static_cast<std::int64_t>(t.cols));
  };
  if (const auto* l = std::get_if<launch_request>(&q.body)) {
    o["spec"] = to_json(l->spec);
    o["profile"] = picojson::value(std::string(to_string(l->prof)));
    if (l->requested) o["backend"] = picojson::value(std::string(to_string(*l->requested)));
    if (l->microvm_accel) o["microvmAccel"] = picojson::value(*l->microvm_accel);
    if (l->strict) o["strict"] = picojson::value(true);
    if (l->limits != ccsb::resource_limits{}) {
      picojson::object lim;
      lim["memory"] = picojson::value(static_cast<std::int64_t>(l->limits.memory_bytes));
      lim["pids"] = picojson::value(static_cast<std::int64_t>(l->limits.pids));
      lim["tmpSize"] = picojson::value(static_cast<std::int64_t>(l->limits.tmp_bytes));
      if (l->limits.cpu_millis) lim["cpus"] = picojson::value(ccsb::cpus_text(l->limits.cpu_millis));
      o["limits"] = picojson::value(std::move(lim));
    }
    if (!l->env.empty()) {
      picojson::object env;
      for (const auto& v : l->env) env[v.name] = picojson::value(v.value);
      o["env"] = picojson::value(std::move(env));
    }
    if (l->run_as)
      o["runAs"] = picojson::value(std::to_string(l->run_as->uid) + ":" + std::to_string(l->run_as->gid));
    if (!l->egress.empty()) {
      picojson::object eg;
      if (!l->egress.allow_upstream.empty()) eg["allowUpstream"] = ccsb::detail::string_array(l->egress.allow_upstream);
      if (!l->egress.resolve.empty()) eg["resolve"] = ccsb::detail::string_array(l->egress.resolve);
      if (l->egress.dns_server) eg["dnsServer"] = picojson::value(*l->egress.dns_server);
      o["egress"] = picojson::value(std::move(eg));
    }
  } else if (const auto* e = std::get_if<exec_request>(&q.body)) {
    target(e->session_id, std::nullopt);
    o["argv"] = ccsb::detail::string_array(e->argv);
    if (e->workdir) o["workdir"] = picojson::value(*e->workdir);
    if (!e->env.empty()) {
      picojson::object env;
      for (const auto& v : e->env) env[v.name] = picojson::value(v.value);
      o["env"] = picojson::value(std::move(env));
    }
    if (e->timeout_ms) o["timeoutMs"] = picojson::value(*e->timeout_ms);
    if (e->pty) {
      picojson::object s;
      size_into(s, *e->pty);
      o["pty"] = picojson::value(std::move(s));
    }
    if (e->stdin_data) o["stdin"] = picojson::value(*e->stdin_data);
  } else if (const auto* s = std::get_if<stdin_request>(&q.body)) {
    target(s->session_id, s->exec);
    o["data"] = picojson::value(s->data);
    o["eof"] = picojson::value(s->eof);
  } else if (const auto* r = std::get_if<resize_request>(&q.body)) {
    target(r->session_id, r->exec);
    size_into(o, r->size);
  } else if (const auto* k = std::get_if<kill_request>(&q.body)) {
    target(k->session_id, k->exec);
    if (k->signal != 9) o["signal"] = picojson::value(std::string(signal_text(k->signal)));
  } else if (const auto* so = std::get_if<session_op_request>(&q.body)) {
    target(so->session_id, std::nullopt);
  }
  std::string out;
  detail::append_value(out, picojson::value(std::move(o)));
  return out;
}

// The first line on every accepted connection: the protocol version, the
// daemon's B4 start-up line, whether the native backend is offered (B2) and
// the daemon's pid and uid. A client checks them against the socket's peer
// credentials (SO_PEERCRED): a process that took over the socket's path
// answers from another pid.
inline std::string hello_line(std::string_view startup, bool native_available, std::int64_t pid, std::int64_t uid) {
  picojson::object o;
  o["pid"] = picojson::value(pid);
  o["uid"] = picojson::value(uid);
  o["protocol"] = picojson::value(static_cast<std::int64_t>(kProtocolVersion));
  o["startup"] = picojson::value(std::string(startup));
  o["nativeAvailable"] = picojson::value(native_available);
  return event_object("hello", o);
}

// Direct replies. `line`: the request line's number on its connection
// (1-based); given, the reply always has "id" (null when the request had
// none, or none could be read) and, when the id is null, "line", so a
// pipelining client matches every reply: by its id, else by counting the
// lines it sent.
using reply_line = std::optional<std::uint64_t>;

namespace detail {
inline void put_id(picojson::object& o, const picojson::value& id, reply_line line = {}) {
  if (!id.is<picojson::null>()) o["id"] = id;
  else if (line) {
    o["id"] = id;
    o["line"] = picojson::value(static_cast<std::int64_t>(*line));
  }
}
} // namespace detail

// launch succeeded: the session is warm. `token` is the session's
// capability; it goes to the launching connection only.
// `warnings`: the spec's unknown keys, each {"field", "message"} (S1).
inline std::string ready_line(const picojson::value& id, const sandbox_handle& h, const std::string& token,
                              const std::vector<unknown_field>& warnings = {}, reply_line line = {}) {
  picojson::object o;
  detail::put_id(o, id, line);
  if (!warnings.empty()) {
    picojson::array a;
    for (const auto& u : warnings) {
      picojson::object w;
      w["field"] = picojson::value(u.path);
      w["message"] = picojson::value(describe(u));
      a.emplace_back(std::move(w));
    }
    o["warnings"] = picojson::value(std::move(a));
  }
  o["token"] = picojson::value(token);
  o["sessionId"] = picojson::value(h.session_id());
  o["handle"] = to_json(h);
  return event_object("ready", o);
}

// exec accepted: its events follow with this execId.
inline std::string exec_line(const picojson::value& id, const std::string& session_id, exec_id x,
                             reply_line line = {}) {
  picojson::object o;
  detail::put_id(o, id, line);
  o["sessionId"] = picojson::value(session_id);
  o["execId"] = picojson::value(static_cast<std::int64_t>(x));
  return event_object("exec", o);
}

// The handle after suspend, resume, destroy, handle or attach ("op" says which).
inline std::string handle_line(const picojson::value& id, std::string_view op, const sandbox_handle& h,
                               reply_line line = {}) {
  picojson::object o;
  detail::put_id(o, id, line);
  o["op"] = picojson::value(std::string(op));
  o["sessionId"] = picojson::value(h.session_id());
  o["handle"] = to_json(h);
  return event_object("handle", o);
}

// stdin, resize, kill, detach done.
inline std::string ok_line(const picojson::value& id, std::string_view op, const std::string& session_id,
                           std::optional<exec_id> x, reply_line line = {}) {
  picojson::object o;
  detail::put_id(o, id, line);
  o["op"] = picojson::value(std::string(op));
  o["sessionId"] = picojson::value(session_id);
  if (x) o["execId"] = picojson::value(static_cast<std::int64_t>(*x));
  return event_object("ok", o);
}

// list: every live session's handle, by session id.
inline std::string sessions_line(const picojson::value& id, const std::vector<sandbox_handle>& handles,
                                 reply_line line = {}) {
  picojson::object o;
  detail::put_id(o, id, line);
  picojson::array a;
  for (const auto& h : handles) a.push_back(to_json(h));
  o["sessions"] = picojson::value(std::move(a));
  return event_object("sessions", o);
}

struct error_context {
  picojson::value id;                    // the request's id (null: none)
  std::string op;                        // the request's op ("" when unreadable)
  std::optional<std::string> session_id; // the session it concerns
  std::optional<exec_id> exec;           // the exec it concerns
  reply_line line{};                     // the request line it answers (put_id); none: an unasked error
};

// A refused request, a failed launch, or a session that failed after ready:
// {"event":"error","error":{"code","field","message"}, ...context}; "id"
// and "line" as on every direct reply (put_id).
inline std::string error_line(const error_context& c, const error& e) {
  picojson::object o;
  detail::put_id(o, c.id, c.line);
  if (!c.op.empty()) o["op"] = picojson::value(c.op);
  if (c.session_id) o["sessionId"] = picojson::value(*c.session_id);
  if (c.exec) o["execId"] = picojson::value(static_cast<std::int64_t>(*c.exec));
  o["error"] = to_json(e);
  return event_object("error", o);
}

} // namespace ccsb::protocol::daemon
