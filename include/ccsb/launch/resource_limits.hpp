// ccsb/launch/resource_limits.hpp — what a session asks for as L7 limits,
// and the size syntax of the flags that set them. Platform-neutral (pure):
// session_request carries it on every platform; only Linux applies it
// (ccsb/launch/limits.hpp: cgroups, else rlimits). The macOS driver applies
// none and says so at start-up (Seatbelt has no cgroups).
//
//   memory   bytes the session's processes (and its /tmp, which is charged to
//            the writer) may use together
//   pids     processes and threads the session may have at once
//   tmp      size cap of the sandbox's private /tmp (bwrap --size, rendered
//            by render_bwrap from bwrap_facts.tmp_size_bytes)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ccsb::launch {

struct resource_limits {
  std::uint64_t memory_bytes{8ull << 30}; // 8 GiB
  std::uint64_t pids{4096};
  std::uint64_t tmp_bytes{1ull << 30}; // 1 GiB
};

// Parses "123", "64K", "512M", "8G" (binary units). nullopt when malformed.
inline std::optional<std::uint64_t> parse_size(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i + 1 == s.size()) {
    switch (s[i]) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    default: return std::nullopt;
    }
  } else if (i != s.size()) {
    return std::nullopt;
  }
  if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

} // namespace ccsb::launch
