// ccsb/resource_limits.hpp — what a session asks for as L7 limits,
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
//   cpu      always: an equal share. Every session gets a cgroup of its own
//            with the same weight (kCpuWeight on v2, kCpuShares on v1); the
//            kernel's group scheduler divides CPU time between cgroups
//            first, so a session of 128 busy processes gets no more than a
//            session of one, whatever their sessions or process groups.
//            Optionally a hard cap (cpu_millis, the --cpus flag): at most
//            that many CPUs' worth of time per period (1.5 -> cpu.max
//            "150000 100000"; v1 cpu.cfs_quota_us 150000 per
//            cpu.cfs_period_us 100000). Without a cgroup that takes the
//            cpu controller there is no CPU separation at all (said at
//            start-up and in details.cpu); a cap asked for there is refused.
#pragma once

#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ccsb {

inline constexpr std::uint64_t kCpuWeight = 100;       // cgroup v2 cpu.weight of every session (the kernel's default)
inline constexpr std::uint64_t kCpuShares = 1024;      // cgroup v1 cpu.shares of every session (the kernel's default)
inline constexpr std::uint64_t kCpuPeriodUs = 100000;  // the period of a hard cap (cpu.max's second number)
inline constexpr std::uint32_t kMinCpuMillis = 10;     // 0.01 CPU: a quota of 1 ms, the kernel's smallest
inline constexpr std::uint32_t kMaxCpuMillis = 1024000; // 1024 CPUs

struct resource_limits {
  std::uint64_t memory_bytes{8ull << 30}; // 8 GiB
  std::uint64_t pids{4096};
  std::uint64_t tmp_bytes{1ull << 30}; // 1 GiB
  std::uint32_t cpu_millis{0};         // hard cap in thousandths of a CPU (1500: 1.5 CPUs); 0: none, the equal share only
  friend bool operator==(const resource_limits&, const resource_limits&) = default;
};

// L7: the --max-tunnels a launcher gives the session's egressd, which runs
// in the session's cgroup: egressd's worst case (egressd/README.md "Memory":
// kEgressdBaseBytes idle and the early data of all pending dials, plus
// kEgressdTunnelBytes per tunnel inspecting a full head) stays within a
// quarter of the session's memory, so a flood of tunnels is refused by
// egressd (max_tunnels, a typed refusal) well before the cgroup's OOM
// killer picks a process. At least kMinEgressdTunnels, at most egressd's
// own default (4096: 8 MiB + 4096 x 48 KiB = 200 MiB, reached from 800 MiB
// of session memory; the default 8 GiB gets 4096).
inline constexpr std::uint64_t kEgressdBaseBytes = std::uint64_t{8} << 20;
inline constexpr std::uint64_t kEgressdTunnelBytes = std::uint64_t{48} << 10;
inline constexpr std::uint64_t kMinEgressdTunnels = 64;
inline constexpr std::uint64_t kMaxEgressdTunnels = 4096;
constexpr std::uint64_t egressd_max_tunnels(std::uint64_t memory_bytes) {
  const std::uint64_t share = memory_bytes / 4;
  const std::uint64_t n = share > kEgressdBaseBytes ? (share - kEgressdBaseBytes) / kEgressdTunnelBytes : 0;
  return n < kMinEgressdTunnels ? kMinEgressdTunnels : n > kMaxEgressdTunnels ? kMaxEgressdTunnels : n;
}

// The quota per kCpuPeriodUs of a cap of `millis` thousandths of a CPU
// (1500 -> 150000).
constexpr std::uint64_t cpu_quota_us(std::uint32_t millis) { return std::uint64_t{millis} * kCpuPeriodUs / 1000; }

// cpu.max as written for a cap of `millis` (0: "max 100000", no cap).
inline std::string cpu_max_text(std::uint32_t millis) {
  return (millis ? std::to_string(cpu_quota_us(millis)) : std::string("max")) + " " + std::to_string(kCpuPeriodUs);
}

// `millis` as the flag spells it: 1500 -> "1.5", 2000 -> "2", 10 -> "0.01".
inline std::string cpus_text(std::uint32_t millis) {
  std::string s = std::to_string(millis / 1000);
  if (std::uint32_t frac = millis % 1000) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

// Parses a number of CPUs: "2", "1.5", "0.25", "0.125" (decimal, at most
// three digits after the point, kMinCpuMillis..kMaxCpuMillis thousandths).
// nullopt when malformed or out of range: no sign, exponent, spaces, "0".
inline std::optional<std::uint32_t> parse_cpus(std::string_view s) {
  std::uint64_t whole = 0, frac = 0;
  std::size_t i = 0, digits = 0, frac_digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    whole = whole * 10 + static_cast<std::uint64_t>(s[i] - '0');
    if (whole > kMaxCpuMillis / 1000) return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size()) {
    if (s[i] != '.') return std::nullopt;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++frac_digits)
      frac = frac * 10 + static_cast<std::uint64_t>(s[i] - '0');
    if (i != s.size() || frac_digits == 0 || frac_digits > 3) return std::nullopt;
    for (std::size_t k = frac_digits; k < 3; ++k) frac *= 10;
  }
  const std::uint64_t millis = whole * 1000 + frac;
  if (millis < kMinCpuMillis || millis > kMaxCpuMillis) return std::nullopt;
  return static_cast<std::uint32_t>(millis);
}

// parse_cpus with the typed error the tools return: invalid_argument naming
// `field` (ccsb-run's "--cpus", ccsbd's "limits.cpus").
inline result<std::uint32_t> parse_cpus_field(std::string_view field, std::string_view s) {
  if (auto m = parse_cpus(s)) return *m;
  return make_error(errc::invalid_argument, std::string(field),
                    "expected a number of CPUs from 0.01 to " + std::to_string(kMaxCpuMillis / 1000) +
                        " with at most three decimals (e.g. 1.5), got \"" + std::string(s) + "\"");
}

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

} // namespace ccsb
