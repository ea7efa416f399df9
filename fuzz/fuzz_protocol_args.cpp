// Fuzz target: the command lines of ccsb-init and egressd, the strict
// parsers each program reads its argv with and the writers the launcher
// spells them with (ccsb/protocol/init_args.hpp, egressd_args.hpp).
//
// Input: the first byte picks the parser (even: ccsb-init, odd: egressd);
// the rest, split at NUL bytes, is the argv after the program name.
//
// Properties:
//   * no input crashes, throws or hangs a parser;
//   * whatever parses, written back and parsed again, is the same value;
//   * ccsb-init's options descriptor (NUL-separated) splits back into the
//     same options the writer gives.
#include "ccsb/protocol/egressd_args.hpp"
#include "ccsb/protocol/init_args.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace P = ccsb::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!data || size == 0) return 0;
  const bool egressd = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> args;
  for (std::size_t start = 0; start <= text.size();) {
    const auto nul = text.find('\0', start);
    args.emplace_back(text.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start));
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  if (egressd) {
    auto a = P::parse_egressd_args(args);
    if (!a) return 0;
    auto back = P::parse_egressd_args(P::to_argv(*a));
    if (!back || !(*back == *a)) __builtin_trap();
    return 0;
  }
  auto a = P::parse_init_args(args);
  if (!a) return 0;
  const auto argv = P::to_argv(*a);
  auto back = P::parse_init_args(argv);
  if (!back || !(*back == *a)) __builtin_trap();
  auto blob = P::to_options_blob(*a);
  if (!blob) return 0; // larger than the descriptor's bound
  auto split = P::split_options_blob(*blob);
  if (!split || *split != argv) __builtin_trap();
  return 0;
}
