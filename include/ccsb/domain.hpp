// ccsb/domain.hpp — domain patterns, the compiled matcher and the egress
// decision (N3, N4, N5, N6).
//
// Pattern forms (checked when a list is loaded; anything else is an error that
// says why and suggests the fix):
//   exact            api.example.com, 203.0.113.7, [2001:db8::1]
//   leading wildcard *.example.com       any subdomain at any depth, never the apex
//   middle wildcard  bedrock.*.amazonaws.com   exactly one label in place of '*'
// A wildcard is a whole label, there is exactly one, and at least two labels
// follow it (so "*.com" or "api.*.com" cannot allow a whole top-level domain).
// A wildcard never matches an IP literal; IP literals match exactly (in their
// canonical spelling) and only when listed as such.
//
// domain_set compiles a list once. A lookup hashes the labels of the host once
// and probes one flat open-addressing table for the exact name, for each
// suffix that some leading pattern could cover, and for each position that
// some middle pattern could hold, so its cost depends on the number of labels
// of the host, not on the number of patterns, and it never allocates.
#pragma once

#include "ccsb/host.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

enum class pattern_kind : std::uint8_t { exact, leading_wildcard, middle_wildcard };

struct domain_pattern {
  std::string text;        // canonical spelling ("*.example.com", "bedrock.*.amazonaws.com")
  pattern_kind kind{pattern_kind::exact};
  host_kind literal_kind{host_kind::name}; // exact patterns may be IP literals
  std::uint8_t labels{0};  // number of labels including '*'
  std::uint8_t star{0};    // position of '*' counted from the right (0 = last label)

  friend bool operator==(const domain_pattern&, const domain_pattern&) = default;
};

namespace detail {

inline error pattern_error(std::string_view input, std::string message) {
  std::string m = "\"";
  m += input;
  m += "\": ";
  m += message;
  return make_error(errc::invalid_pattern, "", std::move(m));
}

// Labels of a canonical name, right to left (index 0 = last label).
// Left uninitialised on purpose: only the first `count` entries are written
// and read, and this lives on the stack of every lookup.
struct label_split {
  std::array<std::uint16_t, 128> begin;
  std::array<std::uint8_t, 128> len;
  std::size_t count{0};
};

inline bool split_labels(std::string_view s, label_split& out) noexcept {
  out.count = 0;
  std::size_t end = s.size();
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == '.') {
      if (out.count == out.begin.size()) return false;
      out.begin[out.count] = static_cast<std::uint16_t>(i + 1);
      out.len[out.count] = static_cast<std::uint8_t>(end - i - 1);
      ++out.count;
      end = i;
    }
  }
  if (out.count == out.begin.size()) return false;
  out.begin[out.count] = 0;
  out.len[out.count] = static_cast<std::uint8_t>(end);
  ++out.count;
  return true;
}

} // namespace detail

// Parses one pattern. `input` may be mixed case and carry one trailing dot.
inline result<domain_pattern> parse_pattern(std::string_view input) {
  using detail::pattern_error;
  if (input.empty()) return pattern_error(input, "empty pattern");
  if (input.find("://") != std::string_view::npos)
    return pattern_error(input, "a pattern names a host, not a URL; drop the scheme and path");
  if (input.find('/') != std::string_view::npos)
    return pattern_error(input, "a pattern names a host; '/' (paths, CIDR ranges) is not allowed");
  if (input.find('@') != std::string_view::npos)
    return pattern_error(input, "a pattern names a host; drop the user name and '@'");

  auto stars = std::count(input.begin(), input.end(), '*');
  if (stars == 0) {
    if (input.find('?') != std::string_view::npos)
      return pattern_error(input, "'?' is not a pattern form; use \"*.domain\" or an exact name");
    // An IPv6 literal contains ':'; for anything else ':' is a port.
    bool v6 = input.front() == '[' || std::count(input.begin(), input.end(), ':') > 1;
    if (!v6 && input.find(':') != std::string_view::npos)
      return pattern_error(input, "patterns name hosts, not ports; drop \":port\"");
    auto h = parse_host(input);
    if (!h) return pattern_error(input, h.err().message);
    domain_pattern p;
    p.text = std::string(h->str());
    p.kind = pattern_kind::exact;
    p.literal_kind = h->kind();
    detail::label_split ls;
    detail::split_labels(p.text, ls);
    p.labels = static_cast<std::uint8_t>(h->is_ip() ? 1 : ls.count);
    return p;
  }
  if (stars > 1)
    return pattern_error(input, "more than one '*'; a pattern has exactly one wildcard label");

  std::string_view s = input;
  if (s.back() == '.') s.remove_suffix(1);
  if (s == "*") return pattern_error(input, "a lone '*' would allow every host; list the domains instead");
  // Locate the '*' label and check that it is a whole label.
  std::size_t star = s.find('*');
  bool whole = (star == 0 || s[star - 1] == '.') && (star + 1 == s.size() || s[star + 1] == '.');
  if (!whole)
    return pattern_error(input, "'*' must be a whole label, as in \"*.example.com\" or \"api.*.example.com\"");
  if (star + 1 == s.size())
    return pattern_error(input, "a trailing wildcard is not a pattern form; name the domain, as in \"*.example.com\"");
  // Validate the rest as a host name by replacing '*' with a plain label.
  std::string probe(s);
  probe[star] = 'x';
  auto h = parse_host(probe);
  if (!h) return pattern_error(input, h.err().message);
  if (h->is_ip()) return pattern_error(input, "a wildcard never matches an IP address; list the address exactly");
  std::string canon(h->str());
  canon[star] = '*';

  detail::label_split ls;
  detail::split_labels(canon, ls);
  std::size_t star_pos = 0; // from the right
  for (std::size_t i = 0; i < ls.count; ++i)
    if (ls.begin[i] == star) star_pos = i;
  if (star_pos < 2)
    return pattern_error(input, "a wildcard must be followed by at least two labels (\"*.com\" would allow a whole top-level domain)");

  domain_pattern p;
  p.text = std::move(canon);
  p.kind = star == 0 ? pattern_kind::leading_wildcard : pattern_kind::middle_wildcard;
  p.labels = static_cast<std::uint8_t>(ls.count);
  p.star = static_cast<std::uint8_t>(star_pos);
  return p;
}

// The reference semantics, one pattern at a time. The compiled matcher must
// agree with this on every input (fuzz/fuzz_domain_match.cpp checks it).
namespace detail {
inline bool pattern_matches(pattern_kind kind, host_kind literal_kind, std::string_view text, const host& h) noexcept {
  std::string_view name = h.str();
  switch (kind) {
  case pattern_kind::exact:
    return h.kind() == literal_kind && name == text;
  case pattern_kind::leading_wildcard: {
    if (h.is_ip()) return false;
    std::string_view suffix = text.substr(1); // ".example.com"
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  }
  case pattern_kind::middle_wildcard: {
    if (h.is_ip()) return false;
    std::size_t star = text.find('*');
    std::string_view before = text.substr(0, star);      // "bedrock."
    std::string_view after = text.substr(star + 1);      // ".amazonaws.com"
    if (name.size() < before.size() + after.size() + 1) return false;
    if (name.substr(0, before.size()) != before) return false;
    if (name.substr(name.size() - after.size()) != after) return false;
    std::string_view middle = name.substr(before.size(), name.size() - before.size() - after.size());
    return !middle.empty() && middle.find('.') == std::string_view::npos;
  }
  }
  return false;
}
} // namespace detail

inline bool naive_match(const domain_pattern& p, const host& h) noexcept {
  return detail::pattern_matches(p.kind, p.literal_kind, p.text, h);
}

// A compiled, immutable set of patterns.
class domain_set {
public:
  domain_set() = default;

  // Compiles `patterns`; an invalid entry is an error whose field is
  // "<field>[i]". Duplicates (after canonicalisation) are merged.
  template <class Range>
  static result<domain_set> compile(const Range& patterns, std::string_view field = "patterns");

  // Builds the set from patterns that are already parsed.
  static domain_set from_patterns(std::vector<domain_pattern> patterns) {
    domain_set set;
    set.patterns_ = std::move(patterns);
    set.build();
    return set;
  }

  std::size_t size() const noexcept { return patterns_.size(); }
  bool empty() const noexcept { return patterns_.empty(); }
  const std::vector<domain_pattern>& patterns() const noexcept { return patterns_; }

  // A host prepared for lookups: labels split and hashed once, so one
  // decision can probe several sets (deny list, allowlist) without redoing it.
  struct key {
    const host* h{nullptr};
    detail::label_split ls;
    std::array<std::uint64_t, 128> term; // per-label contribution, uninitialised past ls.count
    std::uint64_t total{0};
    bool valid{false};
  };

  static void prepare(const host& h, key& k) noexcept {
    k.h = &h;
    k.total = 0;
    if (h.is_ip()) {
      k.ls.count = 1;
      k.total = label_hash<true>(h.padded_data(), h.str().size()) ^ kIpTag;
      k.valid = true;
      return;
    }
    // Find the dots a word at a time (the name is LDH-validated, so the
    // SWAR zero-byte test has no false positives), then hash each label.
    const char* s = h.padded_data();
    const std::size_t n = h.str().size();
    std::array<std::uint8_t, 128> dots;
    std::size_t d = 0;
    if constexpr (std::endian::native == std::endian::little) {
      for (std::size_t i = 0; i < n; i += 8) {
        std::uint64_t x = load8(s + i) ^ 0x2e2e2e2e2e2e2e2eULL;
        std::uint64_t t = (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
        if (n - i < 8) t &= (std::uint64_t{1} << (8 * (n - i))) - 1;
        while (t) {
          if (d == dots.size()) { k.valid = false; return; }
          dots[d++] = static_cast<std::uint8_t>(i + static_cast<std::size_t>(std::countr_zero(t)) / 8);
          t &= t - 1;
        }
      }
    } else {
      for (std::size_t i = 0; i < n; ++i)
        if (s[i] == '.') {
          if (d == dots.size()) { k.valid = false; return; }
          dots[d++] = static_cast<std::uint8_t>(i);
        }
    }
    const std::size_t count = d + 1;
    k.ls.count = count;
    for (std::size_t r = 0; r < count; ++r) {
      std::size_t j = count - 1 - r; // label index from the left
      std::size_t begin = j == 0 ? 0 : dots[j - 1] + 1u;
      std::size_t end = j == count - 1 ? n : dots[j];
      k.term[r] = label_hash<true>(s + begin, end - begin) * kPowers[r];
      k.total += k.term[r];
    }
    k.valid = true;
  }

  // The matching pattern, most specific first (exact, then the longest
  // leading suffix, then middle), or nullptr. Never allocates.
  const domain_pattern* match(const host& h) const noexcept {
    if (patterns_.empty()) return nullptr;
    key k;
    prepare(h, k);
    return match(k);
  }

  const domain_pattern* match(const key& k) const noexcept {
    if (patterns_.empty() || !k.valid) return nullptr;
    const host& h = *k.h;
    const std::size_t count = k.ls.count;
    if (h.is_ip()) return has_exact_ ? find(mix(k.total, 1, pattern_kind::exact), h, pattern_kind::exact) : nullptr;
    if (has_exact_) {
      if (auto* p = find(mix(k.total, count, pattern_kind::exact), h, pattern_kind::exact)) return p;
    }
    if (leading_mask_[0] | leading_mask_[1]) {
      // Suffix of m labels for every m < count with a leading pattern of m
      // labels; the longest suffix wins, so walk from the longest down.
      std::uint64_t suffix = k.total;
      for (std::size_t m = count - 1; m >= 1; --m) {
        suffix -= k.term[m];
        if (!bit(leading_mask_, m)) continue;
        if (auto* p = find(mix(suffix, m, pattern_kind::leading_wildcard), h, pattern_kind::leading_wildcard))
          return p;
      }
    }
    if (bit(middle_mask_, count)) {
      for (std::size_t r = 2; r + 1 < count; ++r) {
        std::uint64_t x = k.total - k.term[r] + kStarHash * kPowers[r];
        if (auto* p = find(mix(x, count, pattern_kind::middle_wildcard), h, pattern_kind::middle_wildcard))
          return p;
      }
    }
    return nullptr;
  }

  // Naive linear scan with the reference semantics (bench and fuzz baseline).
  const domain_pattern* match_linear(const host& h) const noexcept {
    for (const auto& p : patterns_)
      if (naive_match(p, h)) return &p;
    return nullptr;
  }

private:
  static constexpr std::uint64_t kIpTag = 0x9e3779b97f4a7c15ULL;
  static constexpr std::uint64_t kStarHash = 0x2a2a2a2a2a2a2a2bULL;
  static constexpr std::uint64_t kPrime = 0x100000001b3ULL * 2 + 1;

  static constexpr bool bit(const std::array<std::uint64_t, 2>& m, std::size_t i) noexcept {
    return i < 128 && (m[i / 64] >> (i % 64) & 1);
  }
  static constexpr void set_bit(std::array<std::uint64_t, 2>& m, std::size_t i) noexcept {
    if (i < 128) m[i / 64] |= std::uint64_t{1} << (i % 64);
  }
  static constexpr std::array<std::uint64_t, 128> kPowers = [] {
    std::array<std::uint64_t, 128> t{};
    t[0] = 1;
    for (std::size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] * kPrime;
    return t;
  }();
  static std::uint64_t load8(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  // Eight bytes at a time; labels are at most 63 bytes (253 for IP text).
  // Padded: the caller guarantees 8 readable bytes past the end (host
  // buffers); otherwise the tail is copied. Both give the same value.
  template <bool Padded> static std::uint64_t label_hash(const char* s, std::size_t n) noexcept {
    std::uint64_t h = 0x9ae16a3b2f90404fULL ^ (static_cast<std::uint64_t>(n) << 56);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      h = (h ^ load8(s + i)) * 0x9fb21c651e98df25ULL;
      h ^= h >> 29;
    }
    if (i < n) {
      std::uint64_t w = 0;
      if constexpr (Padded) {
        w = load8(s + i);
        std::size_t rest = n - i;
        if constexpr (std::endian::native == std::endian::little)
          w &= (std::uint64_t{1} << (8 * rest)) - 1;
        else
          w &= ~std::uint64_t{0} << (8 * (8 - rest));
      } else {
        char tail[8] = {};
        std::memcpy(tail, s + i, n - i);
        w = load8(tail);
      }
      h = (h ^ w) * 0x9fb21c651e98df25ULL;
    }
    // No finaliser: mix() avalanches the combined key, and a collision only
    // costs one more verification (every candidate is compared exactly).
    return h | 1; // odd: a label's contribution is never zero
  }
  static std::uint64_t label_hash(std::string_view s) noexcept { return label_hash<false>(s.data(), s.size()); }
  static std::uint64_t mix(std::uint64_t k, std::size_t labels, pattern_kind kind) noexcept {
    k ^= (static_cast<std::uint64_t>(labels) << 56) ^ (static_cast<std::uint64_t>(kind) << 48);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
  }

  std::uint64_t key_of(const domain_pattern& p) const noexcept {
    if (p.kind == pattern_kind::exact && p.literal_kind != host_kind::name)
      return mix(label_hash(p.text) ^ kIpTag, 1, pattern_kind::exact);
    // Names: the same sum prepare() computes, with kStarHash for '*'.
    detail::label_split ls;
    detail::split_labels(p.text, ls);
    std::uint64_t total = 0;
    // A leading pattern is keyed by its suffix (the labels right of '*').
    std::size_t count = p.kind == pattern_kind::leading_wildcard ? ls.count - 1 : ls.count;
    for (std::size_t r = 0; r < count; ++r) {
      std::string_view label = std::string_view(p.text).substr(ls.begin[r], ls.len[r]);
      total += (label == "*" ? kStarHash : label_hash(label)) * kPowers[r];
    }
    return mix(total, count, p.kind);
  }

  void build() {
    // Merge duplicates (after canonicalisation), keeping the first spelling.
    {
      std::vector<std::size_t> order(patterns_.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return patterns_[a].text < patterns_[b].text;
      });
      std::vector<bool> drop(patterns_.size(), false);
      for (std::size_t i = 1; i < order.size(); ++i)
        if (patterns_[order[i]].text == patterns_[order[i - 1]].text) drop[order[i]] = true;
      std::vector<domain_pattern> kept;
      kept.reserve(patterns_.size());
      for (std::size_t i = 0; i < patterns_.size(); ++i)
        if (!drop[i]) kept.push_back(std::move(patterns_[i]));
      patterns_ = std::move(kept);
    }
    // Load factor <= 1/4: a miss usually ends at the first slot.
    std::size_t cap = 16;
    while (cap < patterns_.size() * 4) cap <<= 1;
    slots_.assign(cap, slot{});
    occupied_.assign((cap + 63) / 64, 0);
    mask_ = cap - 1;
    texts_.clear();
    for (std::uint32_t i = 0; i < patterns_.size(); ++i) {
      const auto& p = patterns_[i];
      std::uint64_t k = key_of(p);
      std::size_t pos = k & mask_;
      while (slots_[pos].index != kEmpty) pos = (pos + 1) & mask_;
      occupied_[pos / 64] |= std::uint64_t{1} << (pos % 64);
      slots_[pos] = slot{static_cast<std::uint32_t>(k >> 32), i, static_cast<std::uint32_t>(texts_.size()),
                         static_cast<std::uint8_t>(p.text.size()), p.kind, p.literal_kind};
      texts_ += p.text;
      switch (p.kind) {
      case pattern_kind::exact: has_exact_ = true; break;
      case pattern_kind::leading_wildcard: set_bit(leading_mask_, p.labels - 1u); break;
      case pattern_kind::middle_wildcard: set_bit(middle_mask_, p.labels); break;
      }
    }
  }

  // Verifies every tag match against the pattern text held in one arena, so
  // a probe touches the slot and the text and nothing else.
  const domain_pattern* find(std::uint64_t k, const host& h, pattern_kind kind) const noexcept {
    auto tag = static_cast<std::uint32_t>(k >> 32);
    for (std::size_t pos = k & mask_;; pos = (pos + 1) & mask_) {
      // The occupancy bits (1/128 of the table, cache-resident) answer most
      // misses without touching the slots.
      if (!(occupied_[pos / 64] >> (pos % 64) & 1)) return nullptr;
      const slot& s = slots_[pos];
      if (s.tag == tag && s.kind == kind &&
          detail::pattern_matches(s.kind, s.literal_kind, std::string_view(texts_).substr(s.text_off, s.text_len), h))
        return &patterns_[s.index];
    }
  }

  static constexpr std::uint32_t kEmpty = 0xffffffffu;
  struct slot {
    std::uint32_t tag{0};
    std::uint32_t index{kEmpty};
    std::uint32_t text_off{0};
    std::uint8_t text_len{0};
    pattern_kind kind{pattern_kind::exact};
    host_kind literal_kind{host_kind::name};
  };
  std::vector<domain_pattern> patterns_;
  std::vector<slot> slots_;
  std::vector<std::uint64_t> occupied_; // one bit per slot
  std::string texts_; // every pattern's text, back to back
  std::size_t mask_{0};
  bool has_exact_{false};
  std::array<std::uint64_t, 2> leading_mask_{}; // suffix label counts of leading patterns
  std::array<std::uint64_t, 2> middle_mask_{};  // total label counts of middle patterns
};

// Parses every pattern of a list; an invalid entry is an error whose field is
// "<field>[i]".
template <class Range>
inline result<std::vector<domain_pattern>> parse_patterns(const Range& patterns, std::string_view field) {
  std::vector<domain_pattern> out;
  std::size_t i = 0;
  for (const auto& raw : patterns) {
    auto p = parse_pattern(std::string_view(raw));
    if (!p) {
      error e = std::move(p).err();
      e.field = std::string(field) + "[" + std::to_string(i) + "]";
      return e;
    }
    out.push_back(std::move(*p));
    ++i;
  }
  return out;
}

template <class Range>
result<domain_set> domain_set::compile(const Range& patterns, std::string_view field) {
  auto parsed = parse_patterns(patterns, field);
  if (!parsed) return std::move(parsed).err();
  return from_patterns(std::move(*parsed));
}

// ---------------------------------------------------------------------------
// The decision (N4, N5, N6): normalise -> deny list -> allowlist.

enum class decision_step : std::uint8_t {
  malformed,        // the host failed normalisation: denied
  network_disabled, // networkEnabled: false (N6): denied
  deny_list,        // matched the deny list (always wins, N5): denied
  allowlist,        // matched the allowlist: allowed
  not_allowlisted,  // matched nothing: denied
};

constexpr std::string_view to_string(decision_step s) noexcept {
  switch (s) {
  case decision_step::malformed: return "malformed";
  case decision_step::network_disabled: return "network_disabled";
  case decision_step::deny_list: return "deny_list";
  case decision_step::allowlist: return "allowlist";
  case decision_step::not_allowlisted: return "not_allowlisted";
  }
  return "unknown";
}

struct decision {
  bool allowed{false};
  decision_step step{decision_step::not_allowlisted};
  std::string_view pattern; // the pattern that decided (deny_list/allowlist)

  // One human-readable reason, e.g. "deny_list: 169.254.169.254".
  std::string reason() const {
    std::string out(to_string(step));
    if (!pattern.empty()) {
      out += ": ";
      out += pattern;
    }
    return out;
  }
};

} // namespace ccsb
