// Fuzzer for the M8 log-line parser (ccsb/render/seatbelt/log.hpp).
//
// Input: "TAG\nLINE". Properties: nothing crashes or hangs; a violation is
// only ever returned for a line whose message ends with the tag; its action
// is an operation name ([a-z0-9*-], with a letter) and its raw is the line.
#include "ccsb/render/seatbelt/log.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 2 * ccsb::kMaxLogLine) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view tag = nl == std::string_view::npos ? std::string_view("ccsb-s1-0123abcd") : in.substr(0, nl);
  std::string_view line = nl == std::string_view::npos ? in : in.substr(nl + 1);
  auto v = ccsb::parse_seatbelt_denial(line, tag);
  if (!v) return 0;
  if (tag.empty() || line.find(tag) == std::string_view::npos) {
    // An ndjson line may spell the tag with JSON escapes; only a decoded match counts.
    if (line.empty() || line.find('{') == std::string_view::npos) __builtin_trap();
  }
  if (!v->raw || *v->raw != line) __builtin_trap();
  if (!ccsb::valid_operation_name(v->action)) __builtin_trap();
  return 0;
}
