// ccsb/protocol/egressd_events.hpp — the lines egressd writes on its
// --events descriptor (N7, S6, X3) and the launcher reads
// (launch/egressd.hpp). One typed header for both ends: write_line() in
// egressd (events.cpp), parse_line() in the launcher. Pure: no I/O.
//
// One JSON object per line, "event" first, in this order of fields:
//
//   {"event":"ready"[,"http":L][,"socks":L][,"listenChannel":FD],"confinement":C}
//       egressd serves. L is where a listener of its own is bound
//       ("127.0.0.1:PORT", "[::1]:PORT" or "unix:/PATH"), FD the
//       --listen-channel descriptor it accepts sandboxes' listeners on; at
//       least one of the three. C is how egressd confined itself (X3):
//       {"layers":"privileges,landlock,seccomp" (those asked for, in that
//        order, or "none"),"how":TEXT,"noNewPrivs":B,"uid":N,"gid":N,
//        "switchedUser":B,"capabilities":"none"|"kept","landlock":ABI,
//        "landlockStatus":"applied"|"off"|"unavailable: WHY"
//        [,"landlockFs":"none","landlockTcpBind":"denied"|"not restricted (ABI < 4)",
//          "landlockScoped":B   exactly when landlock > 0, i.e. "applied"],
//        "seccomp":"allowlist"|"off"|"unavailable: WHY"
//        [,"seccompSyscalls":N  exactly when seccomp is "allowlist"]}
//   {"event":"violation","action":"network-outbound","target":"HOST:PORT","reason":TEXT}
//       a denial, or a refusal at parse time that names a target (N7)
//   {"event":"testAttack","attack":"open"|"exec"|"bind","target":ARG,"blocked":B,
//    "step":"open"|"execve"|"socket"|"bind"[,"errno":N,"error":TEXT  exactly when blocked]}
//       --test-attack (tests only): what a compromised egressd tried after
//       ready, and whether the confinement stopped it
//
// Strings are written with ccsb's one JSON escaping (spec.hpp
// append_json_escaped: the line is valid UTF-8 whatever a client sent; a byte
// that is not UTF-8 becomes U+FFFD). A string longer than kMaxText bytes (a
// client's junk host in a violation's target) is cut at a character boundary
// and ends in "...", so every line write_line() produces stays below
// kMaxLine and parses.
//
// The parser is strict and names the field of the first problem it finds
// (error.field: "event", "target", "confinement.uid", "$" for the line as a
// whole): more than kMaxLine bytes, bytes that are not UTF-8, anything
// parse_json refuses (syntax, trailing data, duplicate keys, depth, numbers
// out of range), a top level that is not an object, an unknown event, a
// missing field (errc::missing_field), a field of the wrong JSON type
// (errc::wrong_type), an empty string where text is required, a value
// outside the forms above (errc::invalid_argument), and a field the event
// does not have. Unexpected fields are refused, not ignored: egressd and the
// launcher are built from one tree, so a field this parser does not know
// means the two ends disagree, and the launcher must not guess what the line
// meant: it ignores a refused line (launch/egressd.hpp parse_egressd_line
// gives nullopt).
#pragma once

#include "ccsb/host.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"

#include <picojson.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ccsb::protocol::egressd_events {

inline constexpr std::size_t kMaxLine = 64 * 1024; // the launcher's line_reader cuts there too
inline constexpr std::size_t kMaxText = 1024;      // any string, as written (escaped: at most 6x)
inline constexpr std::string_view kViolationAction = "network-outbound"; // the only verb egressd denies

// How egressd confined itself (X3, egressd/confine.hpp confine_report).
struct confinement {
  std::string layers;               // "privileges,landlock,seccomp" (those asked for, in order) or "none"
  std::string how;                  // "default", "--no-confine", "--confine LAYERS"
  bool no_new_privs{false};
  std::uint32_t uid{0}, gid{0};     // after confinement
  bool switched_user{false};        // was root, now uid/gid
  bool capabilities_dropped{false}; // "capabilities": "none" (true) or "kept"
  int landlock_abi{0};              // the ABI applied; 0: not applied
  std::string landlock_status;      // "applied" (exactly when landlock_abi > 0), "off", "unavailable: WHY"
  bool landlock_tcp_bind{false};    // TCP bind denied (ABI >= 4); written only when applied
  bool landlock_scoped{false};      // abstract sockets and signals scoped (ABI >= 6); written only when applied
  std::string seccomp;              // "allowlist", "off", "unavailable: WHY"
  std::size_t seccomp_syscalls{0};  // written only for "allowlist"
  friend bool operator==(const confinement&, const confinement&) = default;
};

struct ready {
  std::optional<std::string> http;  // egressd's own HTTP listener, as bound
  std::optional<std::string> socks; // egressd's own SOCKS5 listener, as bound
  std::optional<int> listen_channel; // --listen-channel FD
  confinement confined;
  friend bool operator==(const ready&, const ready&) = default;
};

struct violation { // action: always kViolationAction
  std::string target; // "host:port" (the raw host when it does not normalise)
  std::string reason; // "not_allowlisted", "address: loopback 127.0.0.1", "bad_chunk", ...
  friend bool operator==(const violation&, const violation&) = default;
};

enum class attack_kind { open, exec, bind };

struct test_attack {
  attack_kind attack{attack_kind::open};
  std::string target;   // the path (open, exec) or ADDR:PORT (bind)
  bool blocked{false};
  std::string step;     // the call that was tried last: open; execve; socket or bind
  int error_number{0};  // errno, when blocked
  std::string error;    // strerror, when blocked
  friend bool operator==(const test_attack&, const test_attack&) = default;
};

using event = std::variant<ready, violation, test_attack>;

constexpr std::string_view to_string(attack_kind k) noexcept {
  switch (k) {
  case attack_kind::open: return "open";
  case attack_kind::exec: return "exec";
  case attack_kind::bind: return "bind";
  }
  return "open";
}

namespace detail {

inline constexpr std::string_view kLayerNames[] = {"privileges", "landlock", "seccomp"};

inline void append_key(std::string& out, std::string_view key) {
  out += ",\"";
  out += key;
  out += "\":";
}

// A JSON string of at most kMaxText bytes before escaping: longer text is
// cut before a character (never inside a UTF-8 sequence) and ends in "...".
inline void append_string(std::string& out, std::string_view s) {
  out += '"';
  if (s.size() <= kMaxText) {
    ccsb::append_json_escaped(out, s);
  } else {
    std::size_t n = kMaxText - 3;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
    ccsb::append_json_escaped(out, s.substr(0, n));
    out += "...";
  }
  out += '"';
}

} // namespace detail

// The offset of the first byte that is not part of well-formed UTF-8 (RFC
// 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
inline std::optional<std::size_t> invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    }
    if (len == 0 || i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned b = p[i + k];
      if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xbfu)) return i;
    }
    i += len;
  }
  return std::nullopt;
}

namespace detail {

// Reads the fields of one JSON object, remembering which were read, so that
// the rest can be refused (unexpected()).
class object_reader {
public:
  object_reader(const picojson::object& o, std::string prefix) : o_(o), prefix_(std::move(prefix)) {}

  std::string path(std::string_view key) const { return prefix_ + std::string(key); }

  const picojson::value* find(std::string_view key) {
    seen_.insert(std::string(key));
    auto it = o_.find(std::string(key));
    return it == o_.end() ? nullptr : &it->second;
  }
  result<const picojson::value*> required(std::string_view key) {
    const picojson::value* v = find(key);
    if (!v) return make_error(errc::missing_field, path(key), "required field is missing");
    return v;
  }
  // A non-empty string.
  result<std::string> text(std::string_view key) {
    auto v = required(key);
    if (!v) return std::move(v).err();
    return text_value(key, **v);
  }
  result<std::optional<std::string>> optional_text(std::string_view key) {
    const picojson::value* v = find(key);
    if (!v) return std::optional<std::string>{};
    auto t = text_value(key, *v);
    if (!t) return std::move(t).err();
    return std::optional<std::string>{std::move(*t)};
  }
  result<bool> boolean(std::string_view key) {
    auto v = required(key);
    if (!v) return std::move(v).err();
    if (!(*v)->is<bool>()) return ccsb::detail::type_error(path(key), "a boolean", **v);
    return (*v)->get<bool>();
  }
  result<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max) {
    auto v = required(key);
    if (!v) return std::move(v).err();
    return integer_value(key, **v, min, max);
  }
  result<std::optional<std::int64_t>> optional_integer(std::string_view key, std::int64_t min, std::int64_t max) {
    const picojson::value* v = find(key);
    if (!v) return std::optional<std::int64_t>{};
    auto i = integer_value(key, *v, min, max);
    if (!i) return std::move(i).err();
    return std::optional<std::int64_t>{*i};
  }
  result<const picojson::object*> object(std::string_view key) {
    auto v = required(key);
    if (!v) return std::move(v).err();
    if (!(*v)->is<picojson::object>()) return ccsb::detail::type_error(path(key), "an object", **v);
    return &(*v)->get<picojson::object>();
  }
  // A field that must be absent (it belongs to another state of the event).
  result<void> absent(std::string_view key, std::string_view unless) {
    if (find(key)) return make_error(errc::invalid_argument, path(key), "present, but only allowed " + std::string(unless));
    return ok();
  }
  // Every field of the object was read.
  result<void> unexpected(std::string_view what) const {
    for (const auto& [k, v] : o_)
      if (!seen_.count(k))
        return make_error(errc::invalid_argument, path(k), "unexpected field in " + std::string(what));
    return ok();
  }

private:
  result<std::string> text_value(std::string_view key, const picojson::value& v) const {
    if (!v.is<std::string>()) return ccsb::detail::type_error(path(key), "a string", v);
    if (v.get<std::string>().empty()) return make_error(errc::invalid_argument, path(key), "must not be empty");
    return v.get<std::string>();
  }
  result<std::int64_t> integer_value(std::string_view key, const picojson::value& v, std::int64_t min,
                                     std::int64_t max) const {
    if (!v.is<std::int64_t>()) return ccsb::detail::type_error(path(key), "an integer", v);
    const std::int64_t i = v.get<std::int64_t>();
    if (i < min || i > max)
      return make_error(errc::invalid_argument, path(key),
                        std::to_string(i) + " is outside " + std::to_string(min) + ".." + std::to_string(max));
    return i;
  }

  const picojson::object& o_;
  std::string prefix_;
  std::set<std::string> seen_;
};

// A listener as egressd reports it: an address literal with a port
// ("127.0.0.1:3128", "[::1]:1080"; never a name), or "unix:/PATH".
inline result<void> check_listener(const std::string& field, const std::string& s) {
  constexpr std::string_view kUnix = "unix:";
  if (s.rfind(kUnix, 0) == 0) {
    if (s.size() == kUnix.size() || s[kUnix.size()] != '/')
      return make_error(errc::invalid_argument, field, "a unix listener is \"unix:/ABSOLUTE/PATH\"");
    return ok();
  }
  auto hp = parse_host_port(s);
  if (!hp || hp->host.kind() == host_kind::name)
    return make_error(errc::invalid_argument, field,
                      "expected ADDRESS:PORT (an IPv4 literal, or an IPv6 literal in brackets) or unix:/PATH, got " +
                          ccsb::quote(s, 64));
  return ok();
}

// "none", or one or more of kLayerNames, comma-separated, each once, in order.
inline bool valid_layers(std::string_view s) {
  if (s == "none") return true;
  std::size_t next = 0; // index into kLayerNames the following name may start at
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = s.find(',', start);
    std::string_view name = s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::size_t i = next;
    while (i < std::size(kLayerNames) && kLayerNames[i] != name) ++i;
    if (i == std::size(kLayerNames)) return false;
    next = i + 1;
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

// "off", "unavailable: WHY", or `applied` (the state in which the layer runs).
inline result<void> check_layer_status(const std::string& field, const std::string& s, std::string_view applied) {
  constexpr std::string_view kUnavailable = "unavailable: ";
  if (s == "off" || s == applied) return ok();
  if (s.rfind(kUnavailable, 0) == 0 && s.size() > kUnavailable.size()) return ok();
  return make_error(errc::invalid_argument, field,
                    "expected \"" + std::string(applied) + "\", \"off\" or \"unavailable: WHY\", got " +
                        ccsb::quote(s, 64));
}

inline result<confinement> parse_confinement(const picojson::object& o) {
  object_reader r(o, "confinement.");
  confinement c;
  auto layers = r.text("layers");
  if (!layers) return std::move(layers).err();
  if (!valid_layers(*layers))
    return make_error(errc::invalid_argument, r.path("layers"),
                      "expected \"none\" or privileges,landlock,seccomp (a subset, in that order), got " +
                          ccsb::quote(*layers, 64));
  c.layers = std::move(*layers);
  auto how = r.text("how");
  if (!how) return std::move(how).err();
  c.how = std::move(*how);
  auto nnp = r.boolean("noNewPrivs");
  if (!nnp) return std::move(nnp).err();
  c.no_new_privs = *nnp;
  constexpr std::int64_t kMaxId = std::numeric_limits<std::uint32_t>::max();
  auto uid = r.integer("uid", 0, kMaxId);
  if (!uid) return std::move(uid).err();
  c.uid = static_cast<std::uint32_t>(*uid);
  auto gid = r.integer("gid", 0, kMaxId);
  if (!gid) return std::move(gid).err();
  c.gid = static_cast<std::uint32_t>(*gid);
  auto switched = r.boolean("switchedUser");
  if (!switched) return std::move(switched).err();
  c.switched_user = *switched;
  auto caps = r.text("capabilities");
  if (!caps) return std::move(caps).err();
  if (*caps != "none" && *caps != "kept")
    return make_error(errc::invalid_argument, r.path("capabilities"), "expected \"none\" or \"kept\"");
  c.capabilities_dropped = *caps == "none";
  auto abi = r.integer("landlock", 0, std::numeric_limits<int>::max());
  if (!abi) return std::move(abi).err();
  c.landlock_abi = static_cast<int>(*abi);
  auto status = r.text("landlockStatus");
  if (!status) return std::move(status).err();
  if (auto s = check_layer_status(r.path("landlockStatus"), *status, "applied"); !s) return std::move(s).err();
  if ((c.landlock_abi > 0) != (*status == "applied"))
    return make_error(errc::invalid_argument, r.path("landlockStatus"),
                      "\"applied\" exactly when landlock (the ABI) is above 0");
  c.landlock_status = std::move(*status);
  constexpr std::string_view kApplied = "when Landlock is applied (landlock > 0)";
  if (c.landlock_abi > 0) {
    auto fs = r.text("landlockFs");
    if (!fs) return std::move(fs).err();
    if (*fs != "none") return make_error(errc::invalid_argument, r.path("landlockFs"), "expected \"none\"");
    auto tcp = r.text("landlockTcpBind");
    if (!tcp) return std::move(tcp).err();
    if (*tcp != "denied" && *tcp != "not restricted (ABI < 4)")
      return make_error(errc::invalid_argument, r.path("landlockTcpBind"),
                        "expected \"denied\" or \"not restricted (ABI < 4)\"");
    c.landlock_tcp_bind = *tcp == "denied";
    auto scoped = r.boolean("landlockScoped");
    if (!scoped) return std::move(scoped).err();
    c.landlock_scoped = *scoped;
  } else {
    for (auto key : {"landlockFs", "landlockTcpBind", "landlockScoped"})
      if (auto a = r.absent(key, kApplied); !a) return std::move(a).err();
  }
  auto seccomp = r.text("seccomp");
  if (!seccomp) return std::move(seccomp).err();
  if (auto s = check_layer_status(r.path("seccomp"), *seccomp, "allowlist"); !s) return std::move(s).err();
  c.seccomp = std::move(*seccomp);
  if (c.seccomp == "allowlist") {
    auto n = r.integer("seccompSyscalls", 0, std::numeric_limits<std::int32_t>::max());
    if (!n) return std::move(n).err();
    c.seccomp_syscalls = static_cast<std::size_t>(*n);
  } else if (auto a = r.absent("seccompSyscalls", "when seccomp is \"allowlist\""); !a) {
    return std::move(a).err();
  }
  if (auto u = r.unexpected("the confinement"); !u) return std::move(u).err();
  return c;
}

inline result<event> parse_ready(object_reader& r) {
  ready m;
  auto http = r.optional_text("http");
  if (!http) return std::move(http).err();
  if (*http)
    if (auto c = check_listener(r.path("http"), **http); !c) return std::move(c).err();
  m.http = std::move(*http);
  auto socks = r.optional_text("socks");
  if (!socks) return std::move(socks).err();
  if (*socks)
    if (auto c = check_listener(r.path("socks"), **socks); !c) return std::move(c).err();
  m.socks = std::move(*socks);
  auto channel = r.optional_integer("listenChannel", 0, std::numeric_limits<int>::max());
  if (!channel) return std::move(channel).err();
  if (*channel) m.listen_channel = static_cast<int>(**channel);
  if (!m.http && !m.socks && !m.listen_channel)
    return make_error(errc::missing_field, "listenChannel",
                      "a ready event names at least one listener: http, socks or listenChannel");
  auto conf = r.object("confinement");
  if (!conf) return std::move(conf).err();
  auto c = parse_confinement(**conf);
  if (!c) return std::move(c).err();
  m.confined = std::move(*c);
  return event{std::move(m)};
}

inline result<event> parse_violation(object_reader& r) {
  violation m;
  auto action = r.text("action");
  if (!action) return std::move(action).err();
  if (*action != kViolationAction)
    return make_error(errc::invalid_argument, "action",
                      "egressd denies only \"" + std::string(kViolationAction) + "\", got " +
                          ccsb::quote(*action, 64));
  auto target = r.text("target");
  if (!target) return std::move(target).err();
  m.target = std::move(*target);
  auto reason = r.text("reason");
  if (!reason) return std::move(reason).err();
  m.reason = std::move(*reason);
  return event{std::move(m)};
}

inline result<event> parse_test_attack(object_reader& r) {
  test_attack m;
  auto attack = r.text("attack");
  if (!attack) return std::move(attack).err();
  if (*attack == "open") m.attack = attack_kind::open;
  else if (*attack == "exec") m.attack = attack_kind::exec;
  else if (*attack == "bind") m.attack = attack_kind::bind;
  else return make_error(errc::invalid_argument, "attack", "expected open, exec or bind");
  auto target = r.text("target");
  if (!target) return std::move(target).err();
  m.target = std::move(*target);
  auto blocked = r.boolean("blocked");
  if (!blocked) return std::move(blocked).err();
  m.blocked = *blocked;
  auto step = r.text("step");
  if (!step) return std::move(step).err();
  const bool step_ok = m.attack == attack_kind::open   ? *step == "open"
                       : m.attack == attack_kind::exec ? *step == "execve"
                                                       : (*step == "socket" || *step == "bind");
  if (!step_ok)
    return make_error(errc::invalid_argument, "step",
                      "not a step of the " + std::string(to_string(m.attack)) + " attack: " +
                          ccsb::quote(*step, 64));
  m.step = std::move(*step);
  if (m.blocked) {
    auto no = r.integer("errno", 1, 4095);
    if (!no) return std::move(no).err();
    m.error_number = static_cast<int>(*no);
    auto error = r.text("error");
    if (!error) return std::move(error).err();
    m.error = std::move(*error);
  } else {
    for (auto key : {"errno", "error"})
      if (auto a = r.absent(key, "when the attack was blocked"); !a) return std::move(a).err();
  }
  return event{std::move(m)};
}

} // namespace detail

// The line for an event, with its trailing newline.
inline std::string write_line(const event& e) {
  using namespace detail;
  std::string out = "{\"event\":";
  if (const auto* r = std::get_if<ready>(&e)) {
    out += "\"ready\"";
    if (r->http) {
      append_key(out, "http");
      append_string(out, *r->http);
    }
    if (r->socks) {
      append_key(out, "socks");
      append_string(out, *r->socks);
    }
    if (r->listen_channel) {
      append_key(out, "listenChannel");
      out += std::to_string(*r->listen_channel);
    }
    const confinement& c = r->confined;
    out += ",\"confinement\":{\"layers\":";
    append_string(out, c.layers);
    append_key(out, "how");
    append_string(out, c.how);
    append_key(out, "noNewPrivs");
    out += c.no_new_privs ? "true" : "false";
    append_key(out, "uid");
    out += std::to_string(c.uid);
    append_key(out, "gid");
    out += std::to_string(c.gid);
    append_key(out, "switchedUser");
    out += c.switched_user ? "true" : "false";
    append_key(out, "capabilities");
    out += c.capabilities_dropped ? "\"none\"" : "\"kept\"";
    append_key(out, "landlock");
    out += std::to_string(c.landlock_abi);
    append_key(out, "landlockStatus");
    append_string(out, c.landlock_status);
    if (c.landlock_abi > 0) {
      out += ",\"landlockFs\":\"none\"";
      append_key(out, "landlockTcpBind");
      out += c.landlock_tcp_bind ? "\"denied\"" : "\"not restricted (ABI < 4)\"";
      append_key(out, "landlockScoped");
      out += c.landlock_scoped ? "true" : "false";
    }
    append_key(out, "seccomp");
    append_string(out, c.seccomp);
    if (c.seccomp == "allowlist") {
      append_key(out, "seccompSyscalls");
      out += std::to_string(c.seccomp_syscalls);
    }
    out += '}';
  } else if (const auto* v = std::get_if<violation>(&e)) {
    out += "\"violation\"";
    append_key(out, "action");
    append_string(out, kViolationAction);
    append_key(out, "target");
    append_string(out, v->target);
    append_key(out, "reason");
    append_string(out, v->reason);
  } else {
    const auto& a = std::get<test_attack>(e);
    out += "\"testAttack\"";
    append_key(out, "attack");
    append_string(out, to_string(a.attack));
    append_key(out, "target");
    append_string(out, a.target);
    append_key(out, "blocked");
    out += a.blocked ? "true" : "false";
    append_key(out, "step");
    append_string(out, a.step);
    if (a.blocked) {
      append_key(out, "errno");
      out += std::to_string(a.error_number);
      append_key(out, "error");
      append_string(out, a.error);
    }
  }
  out += "}\n";
  return out;
}

// One line without its newline (rules in the header comment). `object`, when
// given, receives the line's JSON object, every field of it checked.
inline result<event> parse_line(std::string_view line, picojson::object* object = nullptr) {
  if (line.size() > kMaxLine)
    return make_error(errc::invalid_argument, "$",
                      "line of " + std::to_string(line.size()) + " bytes; the limit is " + std::to_string(kMaxLine));
  if (auto at = invalid_utf8_at(line))
    return make_error(errc::invalid_argument, "$", "byte " + std::to_string(*at) + " is not UTF-8");
  auto v = parse_json(line);
  if (!v) return std::move(v).err();
  if (!v->is<picojson::object>()) return ccsb::detail::type_error("$", "an object", *v);
  const picojson::object& o = v->get<picojson::object>();
  detail::object_reader r(o, "");
  auto name = r.text("event");
  if (!name) return std::move(name).err();
  result<event> e = make_error(errc::invalid_argument, "event",
                               "unknown event " + ccsb::quote(*name, 64) + "; expected ready, violation or testAttack");
  if (*name == "ready") e = detail::parse_ready(r);
  else if (*name == "violation") e = detail::parse_violation(r);
  else if (*name == "testAttack") e = detail::parse_test_attack(r);
  if (!e) return e;
  if (auto u = r.unexpected("a \"" + *name + "\" event"); !u) return std::move(u).err();
  if (object) *object = o;
  return e;
}

} // namespace ccsb::protocol::egressd_events
