// ccsb/broker/git_object.hpp — the name a git loose object must have (X1,
// linked worktrees of a protected checkout). Pure: no I/O. The broker
// (init/broker/notify_loop.cpp) inflates the file a session links or renames
// to `objects/XX/<hash>` in a linked worktree's common dir and feeds the
// inflated bytes here; the name is allowed only when it is their SHA-1
// (git's object id: the hash of "TYPE SIZE\0" and the content, which is
// exactly what a loose object holds once inflated). So a session can add
// objects but never give a name content of its choosing: an object the
// original writes later under that name would otherwise be the session's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ccsb::broker {

// SHA-1 (FIPS 180-4), streamed.
class sha1 {
public:
  void update(const unsigned char* p, std::size_t n) {
    total_ += n;
    while (n > 0) {
      const std::size_t take = std::min(n, sizeof block_ - used_);
      for (std::size_t i = 0; i < take; ++i) block_[used_ + i] = p[i];
      used_ += take;
      p += take;
      n -= take;
      if (used_ == sizeof block_) {
        compress();
        used_ = 0;
      }
    }
  }
  // The digest as 40 lower-case hex digits; the object is spent.
  std::string hex() {
    const std::uint64_t bits = total_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (used_ != 56) update(&zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len, 8);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : h_)
      for (int s = 28; s >= 0; s -= 4) out += digits[(w >> s) & 0xf];
    return out;
  }

private:
  static std::uint32_t rol(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
  void compress() {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t{block_[4 * i]} << 24) | (std::uint32_t{block_[4 * i + 1]} << 16) |
             (std::uint32_t{block_[4 * i + 2]} << 8) | std::uint32_t{block_[4 * i + 3]};
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f, k;
      if (i < 20) f = (b & c) | (~b & d), k = 0x5a827999;
      else if (i < 40) f = b ^ c ^ d, k = 0x6ed9eba1;
      else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
      else f = b ^ c ^ d, k = 0xca62c1d6;
      const std::uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e;
  }
  std::array<std::uint32_t, 5> h_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  unsigned char block_[64]{};
  std::size_t used_{0};
  std::uint64_t total_{0};
};

// The inflated bytes of a loose object start with a valid header
// ("blob|tree|commit|tag SIZE\0"), and SIZE is what follows it.
inline bool loose_object_header_ok(std::string_view head, std::uint64_t inflated_total) {
  const std::size_t sp = head.find(' '), nul = head.find('\0');
  if (sp == std::string_view::npos || nul == std::string_view::npos || nul < sp + 2) return false;
  const std::string_view type = head.substr(0, sp);
  if (type != "blob" && type != "tree" && type != "commit" && type != "tag") return false;
  std::uint64_t size = 0;
  for (char c : head.substr(sp + 1, nul - sp - 1)) {
    if (c < '0' || c > '9' || size > (UINT64_MAX - 9) / 10) return false;
    size = size * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return inflated_total == nul + 1 + size;
}

} // namespace ccsb::broker
