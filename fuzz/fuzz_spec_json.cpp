// Fuzz target: the spec JSON reader (S1, S2) and the event line reader (S5).
//
// Properties:
//   * no input crashes, hangs on deep nesting, or throws (picojson recursion is
//     bounded by the depth pre-scan; non-finite numbers are rejected);
//   * round trip: whenever bytes parse as a spec, serialising and re-parsing
//     gives an equal spec, and serialising that gives the same text;
//   * an accepted spec always satisfies validate();
//   * whenever bytes parse as an event line, to_json_line is one line that
//     parses back; from then on the trip is exact (the first trip may replace
//     bytes that are not UTF-8 with U+FFFD, written as "\ufffd", which the
//     second writes as raw UTF-8).
#include "ccsb/spec_json.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), data ? size : 0);

  if (auto spec = ccsb::parse_spec(text)) {
    if (!ccsb::validate(*spec)) __builtin_trap();
    const std::string once = ccsb::to_json_string(*spec);
    auto again = ccsb::parse_spec(once);
    if (!again || !(*again == *spec)) __builtin_trap();
    if (ccsb::to_json_string(*again) != once) __builtin_trap();
  }

  if (auto ev = ccsb::parse_event_line(text)) {
    const std::string line1 = ccsb::to_json_line(*ev);
    if (line1.find('\n') != std::string::npos || line1.find('\r') != std::string::npos) __builtin_trap();
    auto ev2 = ccsb::parse_event_line(line1);
    if (!ev2) __builtin_trap();
    const std::string line2 = ccsb::to_json_line(*ev2);
    auto ev3 = ccsb::parse_event_line(line2);
    if (!ev3 || !(*ev3 == *ev2) || ccsb::to_json_line(*ev3) != line2) __builtin_trap();
  }

  if (auto h = ccsb::parse_handle(text)) {
    auto h2 = ccsb::parse_handle(ccsb::to_json_string(*h));
    if (!h2 || !(*h2 == *h)) __builtin_trap();
  }
  return 0;
}
