// ccsb/protocol/pty_control.hpp — what the launcher tells the pseudo-terminal
// relay inside the sandbox (T4), one message per line on the control pipe
// (launcher -> ccsb-init). One typed header for both ends. Pure: no I/O.
//
//   resize<SP>ROWS<SP>COLS       the user's terminal has this size now
//
// ROWS and COLS are decimal 1-65535 without leading zeros. The parser is
// strict; a bad line is ignored by the relay (it never guesses a size).
#pragma once

#include "ccsb/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ccsb::protocol {

struct pty_resize {
  std::uint16_t rows{0};
  std::uint16_t cols{0};
  friend bool operator==(const pty_resize&, const pty_resize&) = default;
};

inline constexpr std::size_t kMaxPtyControlLine = 32;

inline std::string write_line(const pty_resize& r) {
  return "resize " + std::to_string(r.rows) + " " + std::to_string(r.cols) + "\n";
}

namespace detail {
inline bool parse_dimension(std::string_view s, std::uint16_t& out) {
  if (s.empty() || s.size() > 5 || s.front() == '0') return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}
} // namespace detail

// One line without its newline.
inline result<pty_resize> parse_pty_control(std::string_view line) {
  constexpr std::string_view kResize = "resize ";
  if (line.size() > kMaxPtyControlLine || line.substr(0, kResize.size()) != kResize)
    return make_error(errc::invalid_argument, "pty control", "expected \"resize ROWS COLS\"");
  auto rest = line.substr(kResize.size());
  auto sp = rest.find(' ');
  pty_resize r;
  if (sp == std::string_view::npos || !detail::parse_dimension(rest.substr(0, sp), r.rows) ||
      !detail::parse_dimension(rest.substr(sp + 1), r.cols))
    return make_error(errc::invalid_argument, "pty control", "ROWS and COLS: 1-65535, decimal, no leading zero");
  return r;
}

} // namespace ccsb::protocol
