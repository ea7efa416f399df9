// Differential fuzzer for N3: pattern parsing + the compiled matcher against
// the naive reference (naive_match over every pattern).
//
// Input: lines. Every line but the last is a pattern; the last line is the
// host. Properties checked on every input:
//  * the compiled matcher and the linear reference agree (match or not);
//  * a pattern's canonical text parses back to itself (round trip);
//  * host normalisation is idempotent: parse_host(h.str()) == h;
//  * nothing crashes, whatever the bytes.
#include "ccsb/domain.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= in.size(); ++i) {
    if (i == in.size() || in[i] == '\n') {
      lines.emplace_back(in.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string host_text = lines.back();
  lines.pop_back();

  std::vector<std::string> valid;
  for (const auto& l : lines) {
    auto p = ccsb::parse_pattern(l);
    if (!p) continue;
    auto again = ccsb::parse_pattern(p->text);
    if (!again || !(*again == *p)) __builtin_trap();
    valid.push_back(l);
  }
  auto set = ccsb::domain_set::compile(valid);
  if (!set) __builtin_trap(); // every line was validated above

  // Check the host as given, and every suffix/prefix variant derived from the
  // patterns themselves, so that matches are common enough to be explored.
  std::vector<std::string> hosts{host_text};
  for (const auto& p : set->patterns()) {
    std::string h = p.text;
    for (auto& c : h)
      if (c == '*') c = 'x';
    hosts.push_back(h);
    hosts.push_back(host_text + "." + h);
    hosts.push_back("a.b." + h);
  }
  for (const auto& text : hosts) {
    auto h = ccsb::parse_host(text);
    if (!h) continue;
    auto again = ccsb::parse_host(h->str());
    if (!again || !(*again == *h)) __builtin_trap();
    bool fast = set->match(*h) != nullptr;
    bool slow = set->match_linear(*h) != nullptr;
    if (fast != slow) __builtin_trap();
  }
  return 0;
}
