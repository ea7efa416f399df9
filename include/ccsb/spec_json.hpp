// ccsb/spec_json.hpp — JSON <-> spec model (SPEC §2), with picojson.
//
// Field names are exactly the stored ones (SPEC §2):
//   spec:      sessionId, workspaceId, agentId, bindMounts[{hostPath, guestPath,
//              readOnly}], networkEnabled, egressAllowlist, guestWorkdir, mode,
//              protectedPaths, runnerStateDirs, execGrantRoots, createAllow
//   handle:    sessionId, backend, state, error{code, field, message}, details
//   violation: action, target, raw
//   events:    see to_json_line in spec.hpp
//
// Reading (spec_from_json / parse_spec):
//   * unknown fields are ignored (S1: stored specs stay readable);
//     unknown_spec_fields() lists them, with the closest known field, for
//     the callers that warn about them or refuse them (--strict);
//   * a missing required field (sessionId, workspaceId, bindMounts[i].hostPath)
//     -> errc::missing_field naming its path;
//   * a value of the wrong JSON type -> errc::wrong_type naming its path, e.g.
//     "bindMounts[2].hostPath". JSON null is accepted only for the nullable
//     fields (agentId, guestWorkdir); null anywhere else is a wrong type. An
//     absent optional field takes its default;
//   * guestPath, when absent, is hostPath (S2);
//   * the value rules of validate() (spec.hpp) follow: relative/empty paths,
//     ".." components, empty ids... -> errc::invalid_argument naming the path;
//   * a top level that is not an object -> errc::wrong_type, field "$".
//
// Text (parse_json / parse_spec / parse_handle / parse_event_line) is read
// strictly, failing closed with errc::invalid_argument, field "$" unless said:
//   * at most kMaxJsonBytes bytes and kMaxJsonDepth levels of nesting. picojson
//     parses recursively and does not count object nesting, so a bracket-depth
//     pre-scan rejects deep input (naming the byte offset) before picojson
//     sees it, and the parse context enforces the same limit again;
//   * DUPLICATE KEYS ARE REJECTED, at any depth, naming the key's path (e.g.
//     "bindMounts[0].hostPath"). picojson's own context keeps the last value
//     silently; another reader may keep the first, and that difference would
//     let one document mean two specs (say, a different readOnly). We parse
//     with our own picojson parse context, which sees every key;
//   * numbers out of double range (1e999) are rejected (picojson would throw);
//   * anything but whitespace after the value is rejected.
//
// Writing (to_json / to_json_string) emits every field, null for an absent
// nullable one; picojson::object is a std::map, so keys are sorted and the
// output is deterministic and on one line. to_json(parse(x)) re-parses to an
// equal struct (tested, and fuzzed by fuzz/fuzz_spec_json.cpp).
#pragma once

#include "ccsb/backend_name.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"

#include <picojson.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb {

inline constexpr std::size_t kMaxJsonDepth = 64;          // nested arrays/objects
inline constexpr std::size_t kMaxJsonBytes = 1024 * 1024; // one spec, handle or event line

namespace detail {

struct strict_parse_state {
  std::size_t depth_left = kMaxJsonDepth;
  std::string path;           // JSON path of the value being parsed
  std::string duplicate_path; // set when a duplicate key was met
  std::string bad_number_path;
  bool too_deep = false;
};

// A picojson parse context (the interface of picojson::default_parse_context)
// that rejects duplicate keys and non-finite numbers and counts the depth of
// objects as well as arrays.
class strict_parse_context {
public:
  strict_parse_context(picojson::value* out, strict_parse_state* st) : out_(out), st_(st) {}
  strict_parse_context(const strict_parse_context&) = delete;
  strict_parse_context& operator=(const strict_parse_context&) = delete;

  bool set_null() { *out_ = picojson::value(); return true; }
  bool set_bool(bool b) { *out_ = picojson::value(b); return true; }
  bool set_int64(std::int64_t i) { *out_ = picojson::value(i); return true; }
  bool set_number(double f) {
    if (!std::isfinite(f)) { // picojson::value(double) would throw
      if (st_->bad_number_path.empty()) st_->bad_number_path = st_->path.empty() ? "$" : st_->path;
      return false; // picojson ignores this; parse_json checks bad_number_path
    }
    *out_ = picojson::value(f);
    return true;
  }
  template <class Iter> bool parse_string(picojson::input<Iter>& in) {
    *out_ = picojson::value(picojson::string_type, false);
    return picojson::_parse_string(out_->get<std::string>(), in);
  }
  bool parse_array_start() {
    if (!enter()) return false;
    *out_ = picojson::value(picojson::array_type, false);
    return true;
  }
  template <class Iter> bool parse_array_item(picojson::input<Iter>& in, std::size_t idx) {
    auto& a = out_->get<picojson::array>();
    a.push_back(picojson::value());
    const std::size_t mark = st_->path.size();
    st_->path += '[';
    st_->path += std::to_string(idx);
    st_->path += ']';
    strict_parse_context child(&a.back(), st_);
    const bool good = picojson::_parse(child, in);
    if (good) st_->path.resize(mark);
    return good;
  }
  bool parse_array_stop(std::size_t) { ++st_->depth_left; return true; }
  bool parse_object_start() {
    if (!enter()) return false;
    *out_ = picojson::value(picojson::object_type, false);
    return true;
  }
  template <class Iter> bool parse_object_item(picojson::input<Iter>& in, const std::string& key) {
    auto& o = out_->get<picojson::object>();
    const std::size_t mark = st_->path.size();
    if (!st_->path.empty()) st_->path += '.';
    st_->path += key;
    auto [it, inserted] = o.emplace(key, picojson::value());
    if (!inserted) {
      st_->duplicate_path = st_->path;
      return false;
    }
    strict_parse_context child(&it->second, st_);
    const bool good = picojson::_parse(child, in);
    if (good) st_->path.resize(mark);
    return good;
  }
  bool parse_object_stop() { ++st_->depth_left; return true; }

private:
  bool enter() {
    if (st_->depth_left == 0) { st_->too_deep = true; return false; }
    --st_->depth_left;
    return true;
  }
  picojson::value* out_;
  strict_parse_state* st_;
};

inline error depth_error(std::size_t offset) {
  return make_error(errc::invalid_argument, "$",
                    "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels at byte offset " + std::to_string(offset));
}

// Iterative bracket-depth scan (strings and escapes skipped). Returns the
// offset of the first bracket that goes past the limit, if any.
inline std::optional<std::size_t> find_too_deep(std::string_view s) noexcept {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return std::nullopt;
}

inline std::string_view type_name(const picojson::value& v) {
  if (v.is<picojson::null>()) return "null";
  if (v.is<bool>()) return "boolean";
  if (v.is<std::string>()) return "string";
  if (v.is<picojson::array>()) return "array";
  if (v.is<picojson::object>()) return "object";
  return "number";
}

inline error type_error(std::string field, std::string_view expected, const picojson::value& got) {
  return make_error(errc::wrong_type, std::move(field),
                    "expected " + std::string(expected) + ", got " + std::string(type_name(got)));
}

inline const picojson::value* find(const picojson::object& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->second;
}

inline result<std::string> required_string(const picojson::object& o, const char* key) {
  const picojson::value* v = find(o, key);
  if (!v) return make_error(errc::missing_field, key, "required field is missing");
  if (!v->is<std::string>()) return type_error(key, "a string", *v);
  return v->get<std::string>();
}

// Absent or null -> nullopt.
inline result<std::optional<std::string>> nullable_string(const picojson::object& o, const char* key) {
  const picojson::value* v = find(o, key);
  if (!v || v->is<picojson::null>()) return std::optional<std::string>{};
  if (!v->is<std::string>()) return type_error(key, "a string or null", *v);
  return std::optional<std::string>{v->get<std::string>()};
}

// Absent -> default; null is a wrong type.
inline result<bool> optional_bool(const picojson::object& o, const char* key, bool dflt) {
  const picojson::value* v = find(o, key);
  if (!v) return dflt;
  if (!v->is<bool>()) return type_error(key, "a boolean", *v);
  return v->get<bool>();
}

inline result<std::optional<std::string>> optional_string(const picojson::object& o, const char* key) {
  const picojson::value* v = find(o, key);
  if (!v) return std::optional<std::string>{};
  if (!v->is<std::string>()) return type_error(key, "a string", *v);
  return std::optional<std::string>{v->get<std::string>()};
}

// Absent -> []; null or a non-array is a wrong type; so is a non-string item.
inline result<std::vector<std::string>> string_list(const picojson::object& o, const char* key) {
  std::vector<std::string> out;
  const picojson::value* v = find(o, key);
  if (!v) return out;
  if (!v->is<picojson::array>()) return type_error(key, "an array of strings", *v);
  const auto& a = v->get<picojson::array>();
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is<std::string>()) return type_error(index_field(key, i), "a string", a[i]);
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

// A JSON integer that fits in int (picojson reads integers as int64).
inline result<std::optional<int>> optional_int(const picojson::object& o, const char* key, bool nullable) {
  const picojson::value* v = find(o, key);
  if (!v || (nullable && v->is<picojson::null>())) return std::optional<int>{};
  if (!v->is<std::int64_t>()) return type_error(key, nullable ? "an integer or null" : "an integer", *v);
  const std::int64_t i = v->get<std::int64_t>();
  if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
    return make_error(errc::invalid_argument, key, "integer " + std::to_string(i) + " is out of range");
  return std::optional<int>{static_cast<int>(i)};
}

inline picojson::value nullable(const std::optional<std::string>& s) {
  return s ? picojson::value(*s) : picojson::value();
}

inline picojson::value string_array(const std::vector<std::string>& v) {
  picojson::array a;
  a.reserve(v.size());
  for (const auto& s : v) a.emplace_back(s);
  return picojson::value(std::move(a));
}

inline result<errc> parse_errc(std::string_view s) {
  // to_string(errc) names every code and says "unknown" past the last one.
  for (int i = 0; i < 256; ++i) {
    const auto c = static_cast<errc>(i);
    const std::string_view n = to_string(c);
    if (n == "unknown") break;
    if (n == s) return c;
  }
  return make_error(errc::invalid_argument, "code", "unknown error code " + quote(s));
}

} // namespace detail

// Strict text -> JSON value (rules in the header comment).
inline result<picojson::value> parse_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes)
    return make_error(errc::invalid_argument, "$",
                      "input is " + std::to_string(text.size()) + " bytes; the limit is " +
                          std::to_string(kMaxJsonBytes));
  if (auto at = detail::find_too_deep(text)) return detail::depth_error(*at);
  picojson::value v;
  detail::strict_parse_state st;
  detail::strict_parse_context ctx(&v, &st);
  const char* const first = text.data();
  const char* const last = first + text.size();
  picojson::input<const char*> in(first, last);
  const bool good = picojson::_parse(ctx, in);
  const char* pos = in.cur();
  // picojson ignores set_number's answer, so an out-of-range number is seen
  // here, whatever `good` says.
  if (!st.bad_number_path.empty())
    return make_error(errc::invalid_argument, st.bad_number_path, "number is out of range");
  if (!good) {
    if (!st.duplicate_path.empty())
      return make_error(errc::invalid_argument, st.duplicate_path,
                        "duplicate key in JSON object; each key may appear once");
    const auto offset = static_cast<std::size_t>(pos - first);
    if (st.too_deep) return detail::depth_error(offset);
    return make_error(errc::invalid_argument, "$",
                      "not valid JSON: syntax error at byte offset " + std::to_string(offset) +
                          (offset < text.size() ? " near " + quote(text.substr(offset), 24)
                                                : std::string(" (unexpected end of input)")));
  }
  while (pos != last && (*pos == ' ' || *pos == '\t' || *pos == '\n' || *pos == '\r')) ++pos;
  if (pos != last)
    return make_error(errc::invalid_argument, "$",
                      "trailing data after the JSON value at byte offset " +
                          std::to_string(pos - first));
  return v;
}

// ---------------------------------------------------------------------------
// bind mount / spec
// ---------------------------------------------------------------------------

inline picojson::value to_json(const bind_mount& m) {
  picojson::object o;
  o["hostPath"] = picojson::value(m.host_path);
  o["guestPath"] = picojson::value(m.guest_path);
  o["readOnly"] = picojson::value(m.read_only);
  return picojson::value(std::move(o));
}

// Types only; value rules are validate()'s. Field paths are relative.
inline result<bind_mount> bind_mount_from_json(const picojson::value& v) {
  if (!v.is<picojson::object>()) return detail::type_error("", "an object", v);
  const auto& o = v.get<picojson::object>();
  bind_mount m;
  auto host = detail::required_string(o, "hostPath");
  if (!host) return std::move(host).err();
  m.host_path = std::move(*host);
  auto guest = detail::optional_string(o, "guestPath");
  if (!guest) return std::move(guest).err();
  m.guest_path = guest->value_or(m.host_path);
  auto ro = detail::optional_bool(o, "readOnly", false);
  if (!ro) return std::move(ro).err();
  m.read_only = *ro;
  return m;
}

inline result<sandbox_spec> spec_from_json(const picojson::value& v) {
  if (!v.is<picojson::object>())
    return detail::type_error("$", "a JSON object (a sandbox spec)", v);
  const auto& o = v.get<picojson::object>();
  sandbox_spec s;

  auto sid = detail::required_string(o, "sessionId");
  if (!sid) return std::move(sid).err();
  s.session_id = std::move(*sid);
  auto wid = detail::required_string(o, "workspaceId");
  if (!wid) return std::move(wid).err();
  s.workspace_id = std::move(*wid);
  auto aid = detail::nullable_string(o, "agentId");
  if (!aid) return std::move(aid).err();
  s.agent_id = std::move(*aid);

  if (const picojson::value* bm = detail::find(o, "bindMounts")) {
    if (!bm->is<picojson::array>()) return detail::type_error("bindMounts", "an array of objects", *bm);
    const auto& a = bm->get<picojson::array>();
    s.bind_mounts.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      auto m = bind_mount_from_json(a[i]);
      if (!m) return nest(detail::index_field("bindMounts", i), std::move(m).err());
      s.bind_mounts.push_back(std::move(*m));
    }
  }

  auto net = detail::optional_bool(o, "networkEnabled", true);
  if (!net) return std::move(net).err();
  s.network_enabled = *net;
  auto egress = detail::string_list(o, "egressAllowlist");
  if (!egress) return std::move(egress).err();
  s.egress_allowlist = std::move(*egress);
  auto wd = detail::nullable_string(o, "guestWorkdir");
  if (!wd) return std::move(wd).err();
  s.guest_workdir = std::move(*wd);

  if (const picojson::value* m = detail::find(o, "mode")) {
    if (!m->is<std::string>()) return detail::type_error("mode", "a string", *m);
    auto md = parse_mode(m->get<std::string>());
    if (!md) return nest("mode", std::move(md).err());
    s.mode = *md;
  }

  auto pp = detail::string_list(o, "protectedPaths");
  if (!pp) return std::move(pp).err();
  s.protected_paths = std::move(*pp);
  auto rs = detail::string_list(o, "runnerStateDirs");
  if (!rs) return std::move(rs).err();
  s.runner_state_dirs = std::move(*rs);
  auto eg = detail::string_list(o, "execGrantRoots");
  if (!eg) return std::move(eg).err();
  s.exec_grant_roots = std::move(*eg);
  auto ca = detail::string_list(o, "createAllow");
  if (!ca) return std::move(ca).err();
  s.create_allow = std::move(*ca);

  if (auto r = validate(s); !r) return std::move(r).err();
  return s;
}

// ---------------------------------------------------------------------------
// unknown fields (S1: ignored by the reader; reported to the caller)
// ---------------------------------------------------------------------------

// The fields a spec and a bind mount have (the reader's, in SPEC order).
inline constexpr std::string_view kSpecFields[] = {
    "sessionId",   "workspaceId", "agentId",        "bindMounts",      "networkEnabled", "egressAllowlist",
    "guestWorkdir", "mode",       "protectedPaths", "runnerStateDirs", "execGrantRoots", "createAllow"};
inline constexpr std::string_view kBindMountFields[] = {"hostPath", "guestPath", "readOnly"};

// A key the reader ignored: its path (`prefix` + "protectedPath",
// "bindMounts[0].readonly") and the known field it is closest to, if any.
struct unknown_field {
  std::string path;
  std::string suggestion; // "" when nothing is close
  friend bool operator==(const unknown_field&, const unknown_field&) = default;
};

namespace detail {

inline char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Optimal string alignment distance (insertions, deletions, substitutions,
// adjacent transpositions), case-insensitive; keys are short.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The known field within a third of its length (at least 1, at most 3 edits).
template <std::size_t N>
inline std::string closest(std::string_view key, const std::string_view (&known)[N]) {
  std::string best;
  std::size_t best_d = 0;
  for (auto k : known) {
    const std::size_t limit = std::clamp<std::size_t>(k.size() / 3, 1, 3);
    const std::size_t dist = edit_distance(key, k);
    if (dist <= limit && (best.empty() || dist < best_d)) {
      best = std::string(k);
      best_d = dist;
    }
  }
  return best;
}

template <std::size_t N>
inline void unknown_keys(const picojson::object& o, const std::string_view (&known)[N], const std::string& prefix,
                         std::vector<unknown_field>& out) {
  for (const auto& [k, _] : o) {
    bool found = false;
    for (auto f : known) found = found || f == k;
    if (!found) out.push_back({prefix + k, closest(k, known)});
  }
}

} // namespace detail

// Every key of a spec document that spec_from_json ignores, in key order,
// each with its path below `prefix` ("spec." in ccsb-run's messages and in
// ccsbd's launch). A value that is not an object yields none (the reader
// refuses it anyway).
inline std::vector<unknown_field> unknown_spec_fields(const picojson::value& v, const std::string& prefix = "") {
  std::vector<unknown_field> out;
  if (!v.is<picojson::object>()) return out;
  const auto& o = v.get<picojson::object>();
  detail::unknown_keys(o, kSpecFields, prefix, out);
  if (const picojson::value* bm = detail::find(o, "bindMounts"); bm && bm->is<picojson::array>()) {
    const auto& a = bm->get<picojson::array>();
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].is<picojson::object>())
        detail::unknown_keys(a[i].get<picojson::object>(), kBindMountFields,
                             prefix + detail::index_field("bindMounts", i) + ".", out);
  }
  return out;
}

// One line about an ignored key, e.g. "spec.protectedPath is not a spec
// field and is ignored (did you mean protectedPaths?)".
inline std::string describe(const unknown_field& u) {
  std::string s = u.path + " is not a spec field and is ignored";
  if (!u.suggestion.empty()) s += " (did you mean " + u.suggestion + "?)";
  return s;
}

inline result<sandbox_spec> parse_spec(std::string_view json_text) {
  auto v = parse_json(json_text);
  if (!v) return std::move(v).err();
  return spec_from_json(*v);
}

inline picojson::value to_json(const sandbox_spec& s) {
  picojson::object o;
  o["sessionId"] = picojson::value(s.session_id);
  o["workspaceId"] = picojson::value(s.workspace_id);
  o["agentId"] = detail::nullable(s.agent_id);
  picojson::array mounts;
  mounts.reserve(s.bind_mounts.size());
  for (const auto& m : s.bind_mounts) mounts.push_back(to_json(m));
  o["bindMounts"] = picojson::value(std::move(mounts));
  o["networkEnabled"] = picojson::value(s.network_enabled);
  o["egressAllowlist"] = detail::string_array(s.egress_allowlist);
  o["guestWorkdir"] = detail::nullable(s.guest_workdir);
  o["mode"] = picojson::value(std::string(to_string(s.mode)));
  o["protectedPaths"] = detail::string_array(s.protected_paths);
  o["runnerStateDirs"] = detail::string_array(s.runner_state_dirs);
  o["execGrantRoots"] = detail::string_array(s.exec_grant_roots);
  o["createAllow"] = detail::string_array(s.create_allow);
  return picojson::value(std::move(o));
}

// One line, sorted keys, deterministic.
inline std::string to_json_string(const sandbox_spec& s) { return to_json(s).serialize(); }

// ---------------------------------------------------------------------------
// violation / error / handle
// ---------------------------------------------------------------------------

inline picojson::value to_json(const sandbox_violation& v) {
  picojson::object o;
  o["action"] = picojson::value(v.action);
  o["target"] = picojson::value(v.target);
  o["raw"] = detail::nullable(v.raw);
  if (!v.reason.empty()) o["reason"] = picojson::value(v.reason);
  return picojson::value(std::move(o));
}

inline result<sandbox_violation> violation_from_json(const picojson::value& v) {
  if (!v.is<picojson::object>()) return detail::type_error("", "an object", v);
  const auto& o = v.get<picojson::object>();
  sandbox_violation out;
  auto action = detail::required_string(o, "action");
  if (!action) return std::move(action).err();
  out.action = std::move(*action);
  auto target = detail::required_string(o, "target");
  if (!target) return std::move(target).err();
  out.target = std::move(*target);
  auto raw = detail::nullable_string(o, "raw");
  if (!raw) return std::move(raw).err();
  out.raw = std::move(*raw);
  if (detail::find(o, "reason")) {
    auto reason = detail::required_string(o, "reason");
    if (!reason) return std::move(reason).err();
    out.reason = std::move(*reason);
  }
  return out;
}

// error as {"code": "<errc name>", "field": "...", "message": "..."}.
inline picojson::value to_json(const error& e) {
  picojson::object o;
  o["code"] = picojson::value(std::string(to_string(e.code)));
  o["field"] = picojson::value(e.field);
  o["message"] = picojson::value(e.message);
  return picojson::value(std::move(o));
}

// result<error> cannot exist (the value and the error would be one type), so
// the decoded error is written to `out`.
inline result<void> error_from_json(const picojson::value& v, error& out) {
  if (!v.is<picojson::object>()) return detail::type_error("", "an object", v);
  const auto& o = v.get<picojson::object>();
  auto code = detail::required_string(o, "code");
  if (!code) return std::move(code).err();
  auto c = detail::parse_errc(*code);
  if (!c) return std::move(c).err();
  auto field = detail::optional_string(o, "field");
  if (!field) return std::move(field).err();
  auto message = detail::required_string(o, "message");
  if (!message) return std::move(message).err();
  out = error{*c, field->value_or(""), std::move(*message)};
  return ok();
}

inline picojson::value to_json(const sandbox_handle& h) {
  picojson::object o;
  o["sessionId"] = picojson::value(h.session_id());
  o["backend"] = picojson::value(std::string(to_string(h.backend())));
  o["state"] = picojson::value(std::string(to_string(h.state())));
  o["error"] = h.error() ? to_json(*h.error()) : picojson::value();
  o["details"] = picojson::value(h.details());
  return picojson::value(std::move(o));
}

inline std::string to_json_string(const sandbox_handle& h) { return to_json(h).serialize(); }

// backend is read with from_name (B1): absent, null or unrecognised -> none,
// "docker" -> native; a non-string is a wrong type. state is required.
inline result<sandbox_handle> handle_from_json(const picojson::value& v) {
  if (!v.is<picojson::object>()) return detail::type_error("$", "a JSON object (a sandbox handle)", v);
  const auto& o = v.get<picojson::object>();
  auto sid = detail::required_string(o, "sessionId");
  if (!sid) return std::move(sid).err();
  auto b = detail::nullable_string(o, "backend");
  if (!b) return std::move(b).err();
  const backend be = *b ? from_name(std::string_view(**b)) : from_name(std::nullopt);
  auto st = detail::required_string(o, "state");
  if (!st) return std::move(st).err();
  auto state = parse_state(*st);
  if (!state) return nest("state", std::move(state).err());
  std::optional<error> err;
  if (const picojson::value* e = detail::find(o, "error"); e && !e->is<picojson::null>()) {
    error decoded;
    if (auto pe = error_from_json(*e, decoded); !pe) return nest("error", std::move(pe).err());
    err = std::move(decoded);
  }
  details_map details;
  if (const picojson::value* d = detail::find(o, "details")) {
    if (!d->is<picojson::object>()) return detail::type_error("details", "an object", *d);
    details = d->get<picojson::object>();
  }
  return sandbox_handle::restore(std::move(*sid), be, *state, std::move(err), std::move(details));
}

inline result<sandbox_handle> parse_handle(std::string_view json_text) {
  auto v = parse_json(json_text);
  if (!v) return std::move(v).err();
  return handle_from_json(*v);
}

// ---------------------------------------------------------------------------
// events (the writer is to_json_line in spec.hpp)
// ---------------------------------------------------------------------------

inline result<sandbox_event> event_from_json(const picojson::value& v) {
  if (!v.is<picojson::object>()) return detail::type_error("$", "a JSON object (an event)", v);
  const auto& o = v.get<picojson::object>();
  auto name = detail::required_string(o, "event");
  if (!name) return std::move(name).err();
  auto kind = parse_event_kind(*name);
  if (!kind) return nest("event", std::move(kind).err());
  sandbox_event e;
  e.kind = *kind;
  auto sid = detail::nullable_string(o, "sessionId");
  if (!sid) return std::move(sid).err();
  e.session_id = std::move(*sid);
  if (const picojson::value* x = detail::find(o, "execId"); x && !x->is<picojson::null>()) {
    if (!x->is<std::int64_t>() || x->get<std::int64_t>() < 1)
      return detail::type_error("execId", "a positive integer or null", *x);
    e.exec_id = static_cast<std::uint64_t>(x->get<std::int64_t>());
  }
  switch (e.kind) {
  case event_kind::stdout_:
  case event_kind::stderr_: {
    auto d = detail::required_string(o, "data");
    if (!d) return std::move(d).err();
    e.data = std::move(*d);
    break;
  }
  case event_kind::exit: {
    if (!detail::find(o, "exitCode")) return make_error(errc::missing_field, "exitCode", "required field is missing");
    auto c = detail::optional_int(o, "exitCode", false);
    if (!c) return std::move(c).err();
    e.exit_code = **c;
    if (detail::find(o, "reason")) {
      auto r = detail::required_string(o, "reason");
      if (!r) return std::move(r).err();
      e.reason = std::move(*r);
      auto m = detail::required_string(o, "message");
      if (!m) return std::move(m).err();
      e.data = std::move(*m);
    }
    break;
  }
  case event_kind::starting:
  case event_kind::ready: break;
  case event_kind::killed: {
    auto r = detail::required_string(o, "reason");
    if (!r) return std::move(r).err();
    e.reason = std::move(*r);
    auto sig = detail::optional_int(o, "signal", true);
    if (!sig) return std::move(sig).err();
    e.signal = *sig;
    break;
  }
  case event_kind::violation: {
    const picojson::value* vv = detail::find(o, "violation");
    if (!vv) return make_error(errc::missing_field, "violation", "required field is missing");
    auto viol = violation_from_json(*vv);
    if (!viol) return nest("violation", std::move(viol).err());
    e.violation = std::move(*viol);
    break;
  }
  }
  return e;
}

inline result<sandbox_event> parse_event_line(std::string_view line) {
  auto v = parse_json(line);
  if (!v) return std::move(v).err();
  return event_from_json(*v);
}

} // namespace ccsb
