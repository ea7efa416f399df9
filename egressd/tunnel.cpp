#include "tunnel.hpp"

#include "io_util.hpp"
#include "relay.hpp"
#include "tunnel_check.hpp"

namespace egressd {

namespace {

// TLS alert record: fatal (2), unrecognized_name (112).
constexpr std::string_view kUnrecognizedName{"\x15\x03\x03\x00\x02\x02\x70", 7};

// A plain-HTTP tunnel is read for its whole life (every request head is
// checked): it reads in pieces this large, allocated only once the client
// has sent something, and holds no buffer while idle between requests.
constexpr std::size_t kReadSize = 16384;

std::string forbidden(std::string_view reason) {
  std::string body = "egressd: Forbidden: " + std::string(reason) + "\n";
  return "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

asio::awaitable<void> inspect_then_relay(std::shared_ptr<connection> c, std::string buf, target t) {
  tunnel_inspector insp(*t.host, t.port, c->state.cfg.policy);
  std::size_t sent = 0;
  for (;;) {
    auto st = insp.feed(buf);
    if (st.v == tunnel_inspector::verdict::refuse) {
      c->state.events.violation(t.text(), st.reason);
      if (insp.requests() > 0) {
        // A later request: the complete ones before it still go, then the
        // upstream sees the end of the stream and its answers to them come
        // back (relay_down ends the client's side after them). No 403: it
        // would land among those answers.
        if (st.release > sent &&
            !co_await write_all(c->upstream, std::string_view(buf).substr(sent, st.release - sent))) {
          c->close_all();
          co_return;
        }
        std::error_code ec;
        c->upstream.shutdown(asio::socket_base::shutdown_send, ec);
        co_return;
      }
      c->close_upstream();
      const bool tls = !buf.empty() && static_cast<unsigned char>(buf[0]) == 0x16;
      std::string answer = tls ? std::string(kUnrecognizedName) : forbidden(st.reason);
      const bool written = co_await write_all(c->client, answer);
      if (written) {
        std::error_code ec;
        c->client.shutdown(asio::socket_base::shutdown_send, ec);
      }
      c->close_all();
      co_return;
    }
    const std::size_t upto = st.v == tunnel_inspector::verdict::pass ? buf.size() : st.release;
    if (upto > sent) {
      c->activity = true;
      const bool ok = co_await write_all(c->upstream, std::string_view(buf).substr(sent, upto - sent));
      if (!ok) {
        c->close_all();
        co_return;
      }
      sent = upto;
    }
    if (st.v == tunnel_inspector::verdict::pass) break;
    if (const std::size_t n = insp.drop(sent); n > 0) {
      buf.erase(0, n);
      sent -= n;
      if (buf.empty()) std::string().swap(buf);
    }
    if (buf.empty()) {
      auto [wec] = co_await c->client.async_wait(asio::socket_base::wait_read, use_tuple);
      if (wec) {
        c->close_all();
        co_return;
      }
    }
    std::size_t old = buf.size();
    buf.resize(old + kReadSize);
    auto [ec, n] = co_await c->client.async_read_some(asio::buffer(buf.data() + old, kReadSize), use_tuple);
    buf.resize(old + (ec ? 0 : n));
    if (ec == asio::error::eof && sent == buf.size()) {
      // A half-close with nothing held back: pass it on, the upstream's
      // answer still comes back.
      std::error_code sec;
      c->upstream.shutdown(asio::socket_base::shutdown_send, sec);
      co_return;
    }
    if (ec) { // gone, or ended inside what was held back: none of it goes upstream
      c->close_all();
      co_return;
    }
  }
  std::string().swap(buf);
  co_await relay_up(c);
}

} // namespace

void start_tunnel(const std::shared_ptr<connection>& c, std::string early, const target& t) {
  start_relay_down(c);
  asio::co_spawn(c->client.get_executor(), inspect_then_relay(c, std::move(early), t), log_completion{"tunnel up"});
}

} // namespace egressd
