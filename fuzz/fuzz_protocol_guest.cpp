// Fuzz target: the microvm host<->agent protocol (X4,
// ccsb/protocol/guest.hpp), both parsers and the framer.
//
// Properties:
//   * no input crashes, throws or hangs the parsers or the framer;
//   * whenever bytes parse as a message (either direction), encoding it
//     gives one frame whose payload parses back to an equal message;
//   * fed in two chunks at any split, the framer yields the same payloads as
//     fed at once, never an empty or oversized one, and stays failed after
//     an error.
#include "ccsb/protocol/guest.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace G = ccsb::protocol::guest;

namespace {

std::string payload_of(const std::string& frame) {
  G::frame_reader r;
  r.feed(frame);
  auto p = r.next();
  if (!p || !*p) __builtin_trap();
  auto rest = r.next();
  if (!rest || *rest) __builtin_trap();
  return **p;
}

std::vector<std::string> frames(std::string_view a, std::string_view b, bool& failed) {
  G::frame_reader r;
  std::vector<std::string> out;
  failed = false;
  for (std::string_view chunk : {a, b}) {
    r.feed(chunk);
    for (;;) {
      auto p = r.next();
      if (!p) {
        failed = true;
        if (r.next()) __builtin_trap(); // stays failed
        return out;
      }
      if (!*p) break;
      if ((*p)->empty() || (*p)->size() > G::kMaxFrame) __builtin_trap();
      out.push_back(**p);
    }
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), data ? size : 0);

  if (auto m = G::decode_agent(text)) {
    auto back = G::decode_agent(payload_of(G::encode(*m)));
    if (!back || !(*back == *m)) __builtin_trap();
  }
  if (auto m = G::decode_host(text)) {
    auto back = G::decode_host(payload_of(G::encode(*m)));
    if (!back || !(*back == *m)) __builtin_trap();
  }

  bool f1 = false, f2 = false;
  auto whole = frames(text, {}, f1);
  const std::size_t cut = size ? (static_cast<std::size_t>(data[0]) * 7) % (size + 1) : 0;
  auto split = frames(text.substr(0, cut), text.substr(cut), f2);
  if (whole != split || f1 != f2) __builtin_trap();
  return 0;
}
