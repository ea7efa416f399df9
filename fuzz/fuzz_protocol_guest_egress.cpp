// Fuzz target: the microVM's egress port (N1-N8, X4,
// ccsb/protocol/guest_egress.hpp): the frame reader of both directions and
// the stream table's rules.
//
// Properties:
//   * no input crashes, throws or hangs the reader or the table;
//   * every frame the reader yields encodes back to the exact bytes it was
//     read from;
//   * fed in two chunks at any split, the reader yields the same frames and
//     the same failure as fed at once, and stays failed after an error;
//   * nothing of a refused frame is buffered, and the reader never holds
//     more than the bytes fed to it;
//   * the table, fed the frames, never lets a stream exceed its window or
//     kMaxStreams streams be open, whatever it accepted.
#include "ccsb/protocol/guest_egress.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ge = ccsb::protocol::guest_egress;

namespace {

std::vector<ge::frame> frames(ge::sender from, std::string_view a, std::string_view b, bool& failed) {
  ge::frame_reader r(from);
  std::vector<ge::frame> out;
  failed = false;
  for (std::string_view chunk : {a, b}) {
    r.feed(chunk);
    for (;;) {
      auto f = r.next();
      if (!f) {
        failed = true;
        if (r.buffered() != 0) __builtin_trap();
        if (r.next()) __builtin_trap(); // stays failed
        return out;
      }
      if (!*f) break;
      out.push_back(**f);
    }
    if (r.buffered() > a.size() + b.size()) __builtin_trap();
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), data ? size : 0);
  for (ge::sender from : {ge::sender::guest, ge::sender::host}) {
    bool f1 = false, f2 = false;
    auto whole = frames(from, text, {}, f1);
    const std::size_t cut = size ? (static_cast<std::size_t>(data[0]) * 7) % (size + 1) : 0;
    auto split = frames(from, text.substr(0, cut), text.substr(cut), f2);
    if (whole != split || f1 != f2) __builtin_trap();
    std::string again;
    for (const auto& f : whole) again += ge::encode(f);
    if (text.substr(0, again.size()) != again) __builtin_trap();

    ge::mux_table t(from == ge::sender::guest ? ge::sender::host : ge::sender::guest);
    for (const auto& f : whole) {
      if (from == ge::sender::host && std::holds_alternative<ge::data>(f) && t.size() < ge::kMaxStreams)
        (void)t.open_local(ccsb::protocol::proxy_role::http);
      auto v = t.receive(f);
      if (!v) break;
      if (t.size() > ge::kMaxStreams) __builtin_trap();
      if (const auto* s = t.find(ge::id_of(f)))
        if (s->recv_left > ge::kWindow || s->send_credit > ge::kWindow) __builtin_trap();
    }
  }
  return 0;
}
