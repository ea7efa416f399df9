// ccsb/render/seatbelt/log.hpp — M8: the unified log's Seatbelt denial lines for
// one session -> `violation` events. Pure: the launcher feeds lines read
// from `log stream` (seatbelt_log_argv) and emits what comes back.
//
//   seatbelt_log_argv(log, tag)          -> argv of the log reader
//   parse_seatbelt_denial(line, tag)     -> optional<sandbox_violation>
//
// What a denial looks like. The kernel logs one message per denial (rate
// limited, duplicates folded), e.g.
//   Sandbox: cat(4711) deny(1) file-read-data /Users/u/.ssh/id_rsa
//   Sandbox: curl(4712) deny(1) network-outbound 93.184.216.34:443
//   Sandbox: 3 duplicate reports for touch deny(1) file-write-create /w/.env
// and, because every deny rule ccsb writes carries (with message "TAG")
// (render/seatbelt/render.hpp), the session's tag at the END of the message (on a
// line of its own in current releases; after a space in older ones). The
// reader asks for `--style ndjson`, one JSON object per event whose
// "eventMessage" holds the whole message; compact or syslog-style text lines
// ("2024-05-01 10:00:00.1 E kernel[0:1f2] (Sandbox) Sandbox: ...") are
// accepted too, so the same parser reads a saved log.
//
// Decisions:
//  * Attribution: a line counts only when its message ends with the tag as
//    a whole token (preceded by whitespace). Denials of other sandboxes,
//    other ccsb sessions (another tag), and everything else the predicate
//    lets through are ignored. The tag alone is the proof: process names and
//    pids are reported but never trusted (a sandboxed process names itself).
//  * action = the operation as the kernel names it (file-read-data,
//    file-write-create, file-write-unlink, process-exec, network-outbound,
//    ...); target = the rest of the denial line: a path, host:port, or for
//    a Unix socket "unix:PATH" (the L3 form). An "allow" report, a line
//    without "Sandbox:" or without a deny token, an operation that is not
//    [a-z0-9*-], and any line longer than kMaxLogLine bytes are ignored.
//  * Malformed input (bad JSON, deep nesting, truncated escapes, binary
//    bytes) returns nullopt; it never throws and never crashes (fuzzed:
//    fuzz/fuzz_seatbelt_log.cpp). JSON nesting deeper than 8 levels is
//    refused before picojson (recursive) sees it.
#pragma once

#include "ccsb/spec.hpp"

#include <picojson.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

inline constexpr std::size_t kMaxLogLine = 64 * 1024;
inline constexpr std::string_view kLogTool = "/usr/bin/log";

// `log stream` for one session's denials, one JSON object per line.
inline std::vector<std::string> seatbelt_log_argv(std::string_view log_tool, std::string_view tag) {
  return {std::string(log_tool), "stream", "--style", "ndjson", "--predicate",
          "eventMessage ENDSWITH \"" + std::string(tag) + "\""};
}

namespace detail {

inline bool log_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && log_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && log_space(s.back())) s.remove_suffix(1);
  return s;
}

// JSON nesting depth outside strings, or SIZE_MAX when a string is unterminated.
inline std::size_t json_depth(std::string_view s) {
  std::size_t depth = 0, max = 0;
  bool in_str = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_str) {
      if (c == '\\') ++i;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') max = std::max(max, ++depth);
    else if ((c == '}' || c == ']') && depth > 0) --depth;
  }
  return in_str ? static_cast<std::size_t>(-1) : max;
}

} // namespace detail

// A Seatbelt operation name as the kernel logs it: lowercase letters, digits, - and *.
inline bool valid_operation_name(std::string_view op) {
  if (op.empty() || op.size() > 64) return false;
  bool letter = false;
  for (char c : op) {
    if (c >= 'a' && c <= 'z') letter = true;
    else if (!((c >= '0' && c <= '9') || c == '-' || c == '*')) return false;
  }
  return letter;
}

namespace detail {

// "deny" or "deny(N)".
inline bool deny_token(std::string_view t) {
  if (t == "deny") return true;
  if (t.size() < 7 || t.substr(0, 5) != "deny(" || t.back() != ')') return false;
  for (char c : t.substr(5, t.size() - 6))
    if (c < '0' || c > '9') return false;
  return true;
}

} // namespace detail

// The violation a log line reports for the session tagged `tag`, if any.
inline std::optional<sandbox_violation> parse_seatbelt_denial(std::string_view line, std::string_view tag) {
  using namespace detail;
  if (tag.empty() || line.size() > kMaxLogLine) return std::nullopt;
  std::string message;
  std::string_view t = trim(line);
  if (!t.empty() && t.front() == '{') {
    if (json_depth(t) > 8) return std::nullopt;
    picojson::value v;
    std::string err;
    const char* end = nullptr;
    try {
      end = picojson::parse(v, t.data(), t.data() + t.size(), &err);
    } catch (const std::exception&) { // picojson throws on a number that overflows a double (fuzz finding)
      return std::nullopt;
    }
    if (!err.empty() || end != t.data() + t.size() || !v.is<picojson::object>()) return std::nullopt;
    const auto& o = v.get<picojson::object>();
    auto it = o.find("eventMessage");
    if (it == o.end() || !it->second.is<std::string>()) return std::nullopt;
    message = it->second.get<std::string>();
  } else {
    message = std::string(t);
  }
  std::string_view m = trim(message);
  // The tag, as the last whole token.
  if (m.size() <= tag.size() || m.substr(m.size() - tag.size()) != tag) return std::nullopt;
  m.remove_suffix(tag.size());
  if (m.empty() || !log_space(m.back())) return std::nullopt;
  m = trim(m);
  auto sb = m.find("Sandbox: ");
  if (sb == std::string_view::npos) return std::nullopt;
  m.remove_prefix(sb + 9);
  // The denial is the first line after "Sandbox: ".
  if (auto nl = m.find('\n'); nl != std::string_view::npos) m = m.substr(0, nl);
  // Tokens up to the deny token; the operation after it; the rest is the target.
  std::size_t i = 0;
  auto next = [&]() -> std::string_view {
    while (i < m.size() && log_space(m[i])) ++i;
    std::size_t s = i;
    while (i < m.size() && !log_space(m[i])) ++i;
    return m.substr(s, i - s);
  };
  for (;;) {
    std::string_view tok = next();
    if (tok.empty()) return std::nullopt;
    if (deny_token(tok)) break;
  }
  std::string_view op = next();
  if (!valid_operation_name(op)) return std::nullopt;
  std::string_view target = trim(m.substr(i));
  sandbox_violation v;
  v.action = std::string(op);
  if (op.substr(0, 7) == "network" && !target.empty() && target.front() == '/')
    v.target = "unix:" + std::string(target);
  else
    v.target = std::string(target);
  v.raw = std::string(line);
  return v;
}

} // namespace ccsb
