// ccsb/protocol/guest_egress.hpp — the egress port of a microVM (N1-N8, X4;
// docs/microvm.md "Egress"): the guest's proxy connections multiplexed over
// one virtio-serial port (named ccsb.egress) into the session's egressd on
// the host. One typed header for both ends: the guest's relay
// (guest/egress_relay.cpp) and the launcher's (ccsb/launch/microvm_egress.hpp).
// Pure: no I/O.
//
// Transport: a byte stream (the port; its host end is a socketpair QEMU
// inherits). Every frame is a fixed 9-byte header, then its payload:
//
//   TYPE (1 byte) | STREAM ID (4 bytes, big-endian, >= 1) | LENGTH (4 bytes, big-endian) | PAYLOAD
//
//   open    1   guest -> host only. PAYLOAD: one role byte, 1 (http: the
//               guest's 127.0.0.1:3128) or 2 (socks: 127.0.0.1:1080). The
//               guest numbers its streams 1, 2, 3, ... and never reuses one.
//   data    2   both ways. 1..kMaxData bytes of the stream.
//   eof     3   both ways, empty: the sender's direction has ended (a
//               half-close); the other direction goes on.
//   close   4   both ways, empty. From the guest: abort the stream (its
//               client went away); the host answers with its own close.
//               From the host: the stream is over (egressd ended it, or the
//               host finished or aborted it); the guest frees its slot only
//               then, so the guest never has more streams than the host
//               counts.
//   credit  5   both ways. PAYLOAD: 4 bytes big-endian, 1..kWindow: the
//               receiver wrote that many more bytes of the stream to its
//               socket, and the sender may send that many more.
//
// Flow control, and why every buffer is bounded: a side may send at most
// kWindow data bytes of a stream beyond what the other side has credited
// (both start with kWindow). So a side holds at most kWindow bytes per
// stream waiting for its socket, and at most kMaxStreams streams are open:
// a fast upstream (or a flood from the guest) cannot make either side buffer
// more than kWindow * kMaxStreams bytes of data. A side that sends past its
// credit, opens a stream beyond kMaxStreams, names a stream it never
// opened, sends data after its eof, a second eof, or a credit past the
// window, breaks the protocol: mux_table::receive says why, and the egress
// channel ends (fail closed; the guest has no network from then on).
//
// Frames for a stream that was open once and is gone (ids at or below the
// highest opened) are stale, not errors: the two sides close concurrently
// (data the guest sent before it saw the host's close) and such frames are
// dropped unread.
//
// frame_reader is strict: an unknown type, id 0, a length over kMaxData (seen
// in the header: nothing of such a frame is buffered), a payload of the
// wrong size for its type, an unknown role, a credit of 0 or past kWindow,
// and an open coming from the host are errors; after one the reader stays
// failed (a byte stream cannot be resynchronised).
#pragma once

#include "ccsb/protocol/proxy_channel.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace ccsb::protocol::guest_egress {

inline constexpr std::string_view kEgressPort = "ccsb.egress";
inline constexpr std::size_t kHeader = 9;
inline constexpr std::size_t kMaxData = 64 * 1024;
inline constexpr std::uint32_t kWindow = 256 * 1024;
inline constexpr std::size_t kMaxStreams = 64;
// A receiver credits back once this much of a stream was written out (or
// sooner, when it is all it holds): fewer frames than one per write, and
// never a stall (a sender out of credit means kWindow bytes are unconsumed
// or uncredited on the other side, and once written they reach this).
inline constexpr std::uint32_t kCreditStep = kWindow / 4;

using stream_id = std::uint32_t;

enum class sender { host, guest };

struct open {
  stream_id id{0};
  proxy_role role{proxy_role::http};
  friend bool operator==(const open&, const open&) = default;
};
struct data {
  stream_id id{0};
  std::string bytes;
  friend bool operator==(const data&, const data&) = default;
};
struct eof {
  stream_id id{0};
  friend bool operator==(const eof&, const eof&) = default;
};
struct close {
  stream_id id{0};
  friend bool operator==(const close&, const close&) = default;
};
struct credit {
  stream_id id{0};
  std::uint32_t bytes{0};
  friend bool operator==(const credit&, const credit&) = default;
};
using frame = std::variant<open, data, eof, close, credit>;

enum class frame_type : std::uint8_t { open = 1, data = 2, eof = 3, close = 4, credit = 5 };

inline stream_id id_of(const frame& f) {
  return std::visit([](const auto& m) { return m.id; }, f);
}

namespace detail {
inline error bad(std::string what) { return error(errc::invalid_argument, "guest egress", std::move(what)); }

inline void put32(std::string& out, std::uint32_t v) {
  out += static_cast<char>((v >> 24) & 0xff);
  out += static_cast<char>((v >> 16) & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
  out += static_cast<char>(v & 0xff);
}
inline std::uint32_t get32(std::string_view s, std::size_t at) {
  auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}
} // namespace detail

// The header of a frame of `type` for stream `id` with `length` payload
// bytes: a data frame's bytes can follow it without being copied first.
inline std::string header(frame_type type, stream_id id, std::uint32_t length) {
  std::string out;
  out.reserve(kHeader);
  out += static_cast<char>(type);
  detail::put32(out, id);
  detail::put32(out, length);
  return out;
}

inline std::string encode(const frame& f) {
  return std::visit(
      [](const auto& m) -> std::string {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, open>) {
          std::string out = header(frame_type::open, m.id, 1);
          out += static_cast<char>(m.role == proxy_role::http ? 1 : 2);
          return out;
        } else if constexpr (std::is_same_v<T, data>) {
          return header(frame_type::data, m.id, static_cast<std::uint32_t>(m.bytes.size())) + m.bytes;
        } else if constexpr (std::is_same_v<T, eof>) {
          return header(frame_type::eof, m.id, 0);
        } else if constexpr (std::is_same_v<T, close>) {
          return header(frame_type::close, m.id, 0);
        } else {
          std::string out = header(frame_type::credit, m.id, 4);
          detail::put32(out, m.bytes);
          return out;
        }
      },
      f);
}

// Cuts the bytes `from` sends into frames. Holds at most one incomplete
// frame (kHeader + kMaxData bytes) beyond what next() has not yet taken.
class frame_reader {
public:
  explicit frame_reader(sender from) : from_(from) {}
  void feed(std::string_view bytes) { buf_.append(bytes); }
  // Reading straight into the reader: write_area(n) gives room for n bytes,
  // commit(k) keeps the first k of them (k <= n).
  char* write_area(std::size_t n) {
    tail_ = buf_.size();
    buf_.resize(tail_ + n);
    return buf_.data() + tail_;
  }
  void commit(std::size_t k) { buf_.resize(tail_ + k); }
  // The next complete frame, nothing while one is incomplete, or an error.
  result<std::optional<frame>> next() {
    if (failed_) return detail::bad("the stream failed earlier");
    if (buf_.size() - pos_ < kHeader) return compact(), std::optional<frame>();
    const std::string_view b(buf_);
    const auto type = static_cast<unsigned char>(b[pos_]);
    const stream_id id = detail::get32(b, pos_ + 1);
    const std::uint32_t n = detail::get32(b, pos_ + 5);
    if (auto why = check_header(type, id, n); !why.empty()) return fail(std::move(why));
    if (buf_.size() - pos_ - kHeader < n) return compact(), std::optional<frame>();
    const std::string_view p = b.substr(pos_ + kHeader, n);
    std::optional<frame> out;
    switch (static_cast<frame_type>(type)) {
    case frame_type::open: {
      const auto r = static_cast<unsigned char>(p[0]);
      if (r != 1 && r != 2) return fail("open: unknown role " + std::to_string(r));
      out = open{id, r == 1 ? proxy_role::http : proxy_role::socks};
      break;
    }
    case frame_type::data: out = data{id, std::string(p)}; break;
    case frame_type::eof: out = eof{id}; break;
    case frame_type::close: out = close{id}; break;
    case frame_type::credit: {
      const std::uint32_t c = detail::get32(p, 0);
      if (c == 0 || c > kWindow) return fail("credit of " + std::to_string(c) + " bytes (1.." + std::to_string(kWindow) + ")");
      out = credit{id, c};
      break;
    }
    }
    pos_ += kHeader + n;
    return out;
  }
  bool failed() const { return failed_; }
  // Bytes held (for the bound above).
  std::size_t buffered() const { return buf_.size() - pos_; }

private:
  std::string check_header(unsigned char type, stream_id id, std::uint32_t n) const {
    if (type < 1 || type > 5) return "unknown frame type " + std::to_string(type);
    if (id == 0) return "stream id 0";
    switch (static_cast<frame_type>(type)) {
    case frame_type::open:
      if (from_ == sender::host) return "open from the host";
      return n == 1 ? "" : "open: payload of " + std::to_string(n) + " bytes (1)";
    case frame_type::data:
      return n >= 1 && n <= kMaxData ? "" : "data: payload of " + std::to_string(n) + " bytes (1.." + std::to_string(kMaxData) + ")";
    case frame_type::eof:
    case frame_type::close: return n == 0 ? "" : "eof/close: payload of " + std::to_string(n) + " bytes (0)";
    case frame_type::credit: return n == 4 ? "" : "credit: payload of " + std::to_string(n) + " bytes (4)";
    }
    return "unknown frame type";
  }
  result<std::optional<frame>> fail(std::string why) {
    failed_ = true;
    buf_.clear();
    pos_ = 0;
    return detail::bad(std::move(why));
  }
  void compact() {
    if (pos_ == 0) return;
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  sender from_;
  std::string buf_;
  std::size_t pos_{0};
  std::size_t tail_{0};
  bool failed_{false};
};

// One side's view of the streams and their credit: the protocol's rules,
// checked for what arrives and kept for what is sent. `self` is the side
// that owns the table.
class mux_table {
public:
  struct stream {
    proxy_role role{proxy_role::http};
    std::uint32_t send_credit{kWindow}; // data bytes this side may still send
    std::uint32_t recv_left{kWindow};   // data bytes the peer may still send
    std::uint32_t uncredited{0};        // written out, not yet credited back
    bool eof_in{false}, eof_out{false};
    bool close_sent{false}; // guest: its close is out, the host's not yet in
  };
  enum class verdict { apply, stale };

  explicit mux_table(sender self) : self_(self) {}

  // The guest's next stream, or an error when kMaxStreams are held.
  result<stream_id> open_local(proxy_role r) {
    if (self_ != sender::guest) return detail::bad("only the guest opens streams");
    if (streams_.size() >= kMaxStreams) return detail::bad("more than " + std::to_string(kMaxStreams) + " streams");
    if (last_ == 0xffffffffu) return detail::bad("stream ids exhausted");
    streams_[++last_] = stream{r};
    return last_;
  }

  // Checks a frame that arrived and applies it to the counters. stale: a
  // frame for a stream that is gone (drop it). An error breaks the channel.
  result<verdict> receive(const frame& f) {
    const stream_id id = id_of(f);
    if (const auto* o = std::get_if<open>(&f)) {
      if (self_ != sender::host) return detail::bad("open from the host");
      if (id != last_ + 1)
        return detail::bad("open " + std::to_string(id) + ": the next stream is " + std::to_string(last_ + 1));
      if (streams_.size() >= kMaxStreams) return detail::bad("more than " + std::to_string(kMaxStreams) + " streams");
      last_ = id;
      streams_[id] = stream{o->role};
      return verdict::apply;
    }
    if (id > last_) return detail::bad("stream " + std::to_string(id) + " was never opened");
    auto it = streams_.find(id);
    if (it == streams_.end()) return verdict::stale;
    auto& s = it->second;
    if (const auto* d = std::get_if<data>(&f)) {
      if (s.eof_in) return detail::bad("data on stream " + std::to_string(id) + " after its eof");
      if (d->bytes.size() > s.recv_left)
        return detail::bad("stream " + std::to_string(id) + ": " + std::to_string(d->bytes.size()) +
                           " bytes past a window of " + std::to_string(s.recv_left));
      s.recv_left -= static_cast<std::uint32_t>(d->bytes.size());
      return verdict::apply;
    }
    if (std::holds_alternative<eof>(f)) {
      if (s.eof_in) return detail::bad("a second eof on stream " + std::to_string(id));
      s.eof_in = true;
      return verdict::apply;
    }
    if (const auto* c = std::get_if<credit>(&f)) {
      if (static_cast<std::uint64_t>(s.send_credit) + c->bytes > kWindow)
        return detail::bad("stream " + std::to_string(id) + ": credit past the window");
      s.send_credit += c->bytes;
      return verdict::apply;
    }
    streams_.erase(it); // close: the guest's slot frees with the host's close
    return verdict::apply;
  }

  const stream* find(stream_id id) const {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return streams_.size(); }
  stream_id last() const { return last_; }

  // What this side sends. sent_data's n is at most find(id)->send_credit.
  void sent_data(stream_id id, std::uint32_t n) {
    if (auto* s = get(id)) s->send_credit -= std::min(n, s->send_credit);
  }
  void sent_eof(stream_id id) {
    if (auto* s = get(id)) s->eof_out = true;
  }
  // The host forgets the stream at once (the guest frees its slot when this
  // close arrives); the guest keeps it until the host's close.
  void sent_close(stream_id id) {
    if (self_ == sender::host) streams_.erase(id);
    else if (auto* s = get(id)) s->close_sent = true;
  }
  // `n` more bytes of the stream were written out: the credit to send now
  // (0: not yet). `holding`: bytes of the stream still waiting to be
  // written.
  std::uint32_t consumed(stream_id id, std::uint32_t n, std::size_t holding) {
    auto* s = get(id);
    if (!s) return 0;
    s->uncredited += n;
    if (s->uncredited == 0 || (s->uncredited < kCreditStep && holding > 0)) return 0;
    const std::uint32_t c = std::min(s->uncredited, kWindow - s->recv_left);
    s->uncredited -= c;
    s->recv_left += c;
    return c;
  }

private:
  stream* get(stream_id id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }
  sender self_;
  std::map<stream_id, stream> streams_;
  stream_id last_{0};
};

} // namespace ccsb::protocol::guest_egress
