// Fuzz target: egressd's event lines (N7, S6, X3), the strict parser the
// launcher reads them with and the writer egressd writes them with
// (ccsb/protocol/egressd_events.hpp).
//
// Properties:
//   * no input crashes, throws or hangs the parser (picojson's own throw on
//     1e999 included: parse_json rejects such numbers first);
//   * whenever bytes parse as an event, write_line gives one line that
//     parses back; from then on the trip is exact (the first trip may cut a
//     string to kMaxText bytes);
//   * the writer's output always parses, whatever bytes a violation's target
//     and reason hold (not UTF-8, quotes, control bytes, any length).
#include "ccsb/protocol/egressd_events.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ev = ccsb::protocol::egressd_events;

namespace {

// The line without its newline; traps unless it is exactly one line.
std::string one_line(const ev::event& e) {
  std::string l = ev::write_line(e);
  if (l.empty() || l.back() != '\n') __builtin_trap();
  l.pop_back();
  if (l.find('\n') != std::string::npos || l.find('\r') != std::string::npos || l.size() > ev::kMaxLine)
    __builtin_trap();
  return l;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), data ? size : 0);

  if (auto e = ev::parse_line(text)) {
    auto e2 = ev::parse_line(one_line(*e));
    if (!e2) __builtin_trap();
    const std::string line2 = one_line(*e2);
    auto e3 = ev::parse_line(line2);
    if (!e3 || !(*e3 == *e2) || one_line(*e3) != line2) __builtin_trap();
  }

  const std::size_t half = text.size() / 2;
  const ev::violation v{std::string(text.substr(0, half)), std::string(text.substr(half))};
  auto back = ev::parse_line(one_line(v));
  // An empty target or reason is the only thing the writer passes through
  // that the parser refuses (egressd never reports one).
  if (!back && !v.target.empty() && !v.reason.empty()) __builtin_trap();
  return 0;
}
