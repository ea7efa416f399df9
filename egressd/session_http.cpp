#include "session_http.hpp"

#include "dial.hpp"
#include "http_parser.hpp"
#include "io_util.hpp"
#include "relay.hpp"
#include "tunnel.hpp"

#include <algorithm>

namespace egressd {

namespace {

constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";

std::string error_response(int code, std::string_view phrase, std::string_view header, std::string_view reason) {
  std::string body = "egressd: ";
  body += phrase;
  body += ": ";
  body += reason;
  body += '\n';
  std::string out = "HTTP/1.1 " + std::to_string(code) + " ";
  out += phrase;
  out += "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  out += header;
  out += ": ";
  out += reason;
  out += "\r\nConnection: close\r\n\r\n";
  out += body;
  return out;
}

// Answer, then close without resetting: stop sending, and read (and drop)
// what the client still sends for a short while so the kernel does not turn
// unread bytes into an RST that destroys the answer.
asio::awaitable<void> answer_and_close(std::shared_ptr<connection> c, std::string response) {
  c->close_upstream();
  c->release_slot();
  if (!co_await write_all(c->client, response)) co_return;
  std::error_code ec;
  c->client.shutdown(asio::socket_base::shutdown_send, ec);
  c->ph = phase::head;
  c->set_deadline_ms(2000);
  std::string sink;
  for (int i = 0; i < 16; ++i) {
    sink.clear();
    if (!co_await read_some_into(c->client, sink)) break;
  }
  c->close_all();
}

asio::awaitable<void> refuse(std::shared_ptr<connection> c, const dial_result& r) {
  switch (r.st) {
  case dial_status::denied:
    co_await answer_and_close(c, error_response(403, "Forbidden", "X-Ccsb-Deny-Reason", r.reason));
    break;
  case dial_status::limit:
    co_await answer_and_close(c, error_response(503, "Service Unavailable", "X-Ccsb-Deny-Reason", r.reason));
    break;
  case dial_status::timed_out:
    co_await answer_and_close(c, error_response(504, "Gateway Timeout", "X-Ccsb-Error", r.reason));
    break;
  default:
    co_await answer_and_close(c, error_response(502, "Bad Gateway", "X-Ccsb-Error", r.reason));
    break;
  }
}

// The request head sent upstream: origin-form target, Host set to the
// checked target, hop-by-hop fields and Expect removed, one connection per
// request.
std::string upstream_head(const http::request_head& req, const target& t) {
  std::string out;
  out.reserve(256);
  out += req.method;
  out += ' ';
  out += req.path;
  out += req.version_minor == 1 ? " HTTP/1.1\r\nHost: " : " HTTP/1.0\r\nHost: ";
  out += t.port == 80 ? std::string(t.host->kind() == ccsb::host_kind::ipv6 ? "[" + std::string(t.host->str()) + "]"
                                                                           : std::string(t.host->str()))
                      : ccsb::format_host_port(*t.host, t.port);
  out += "\r\n";
  for (const auto& h : req.headers) {
    if (http::iequals(h.name, "host") || http::iequals(h.name, "expect")) continue;
    if (http::is_hop_by_hop(h.name, req.headers)) continue;
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string client_response_head(const http::response_head& resp, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(resp.code) + " ";
  out += resp.reason;
  out += "\r\n";
  for (const auto& h : resp.headers) {
    if (http::is_hop_by_hop(h.name, resp.headers)) continue;
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

// peer_gone: `from` ended or failed; to_gone: writing to `to` failed (for a
// request body: the upstream stopped reading, and may have answered early).
enum class body_end { done, peer_gone, to_gone, bad };

// Copies exactly n bytes: first those already in `buf` (consumed from it),
// then straight from `from` (splice_exact: nothing past the body is read).
template <class From, class To>
asio::awaitable<body_end> copy_length(connection& c, From& from, To& to, std::string& buf, std::uint64_t n) {
  if (!buf.empty()) {
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, buf.size()));
    c.activity = true;
    if (!co_await write_all(to, std::string_view(buf).substr(0, take))) co_return body_end::to_gone;
    buf.erase(0, take);
    n -= take;
  }
  bool to_failed = false;
  if (n > 0 && !co_await splice_exact(c, from, to, n, &to_failed))
    co_return to_failed ? body_end::to_gone : body_end::peer_gone;
  co_return body_end::done;
}

template <class From, class To>
asio::awaitable<body_end> copy_chunked(connection& c, From& from, To& to, std::string& buf) {
  http::chunked_decoder dec;
  for (;;) {
    if (buf.empty() && !co_await read_some_into(from, buf, 16384)) co_return body_end::peer_gone;
    auto s = dec.feed(buf);
    if (s.st == http::status::bad) co_return body_end::bad;
    c.activity = true;
    if (!co_await write_all(to, std::string_view(buf).substr(0, s.consumed))) co_return body_end::to_gone;
    buf.erase(0, s.consumed);
    if (s.st == http::status::good) co_return body_end::done;
  }
}

// After an early response to a request whose body the client is still
// sending: stop sending, and read (and drop) what the client still sends for
// a while, so the close does not turn unread bytes into a reset that
// destroys the response before the client has read it.
asio::awaitable<void> linger_close(std::shared_ptr<connection> c) {
  std::error_code ec;
  c->client.shutdown(asio::socket_base::shutdown_send, ec);
  c->ph = phase::head;
  c->set_deadline_ms(2000);
  std::string sink;
  for (std::size_t total = 0; total < (std::size_t{4} << 20);) {
    sink.clear();
    const bool more = co_await read_some_into(c->client, sink, 65536);
    if (!more) break;
    total += sink.size();
  }
  c->close_all();
}

// A close-delimited body: everything until the upstream closes.
//
// GCC 12 note (the cause of a SIGILL here): a coroutine whose first frame
// variable would be the hoisted condition of `if (co_await ...)` or
// `while (co_await ...)` gets a frame that starts with that variable
// (`__ifcd_N`) instead of the resume and destroy pointers. The handle
// std::coroutine_handle derives from the promise then points 8 bytes into
// the frame, the first resumption reads a garbage resume index, and the
// dispatch switch's __builtin_unreachable executes ud2. Awaited results are
// therefore named before they are tested here;
// tests/egressd/test_build.cpp checks every frame of the built binary.
template <class From, class To>
asio::awaitable<body_end> copy_to_eof(connection& c, From& from, To& to, std::string& buf) {
  for (;;) {
    if (!buf.empty()) {
      c.activity = true;
      const bool sent = co_await write_all(to, buf);
      if (!sent) co_return body_end::peer_gone;
      buf.clear();
    }
    const bool more = co_await read_some_into(from, buf, 16384);
    if (!more) co_return body_end::done;
  }
}

// One absolute-form request. Returns true when the client connection can
// carry another request.
asio::awaitable<bool> forward(std::shared_ptr<connection> c, const http::request_head& req, std::size_t head_len,
                              std::string& buf, const target& t) {
  const auto& o = c->state.cfg.opts;
  auto r = co_await dial(c, t);
  if (r.st != dial_status::connected) {
    co_await refuse(c, r);
    co_return false;
  }
  std::string head = upstream_head(req, t);
  const bool head_request = req.method == "HEAD";
  const bool client_keep = req.keep_alive;
  const bool expect = req.expect_continue;
  const auto content_length = req.content_length;
  const bool chunked = req.chunked;
  buf.erase(0, head_len); // `req` refers to buf: not used below
  buf += c->take_early(); // what the client sent while dial() watched it

  c->ph = phase::relaying;
  c->activity = true;
  c->set_deadline_ms(o.idle_timeout_ms);
  if (expect && !co_await write_all(c->client, "HTTP/1.1 100 Continue\r\n\r\n")) co_return false;
  const bool head_sent = co_await write_all(c->upstream, head);
  body_end e = head_sent ? body_end::done : body_end::to_gone;
  if (head_sent && chunked) e = co_await copy_chunked(*c, c->client, c->upstream, buf);
  else if (head_sent && content_length) e = co_await copy_length(*c, c->client, c->upstream, buf, *content_length);
  if (e == body_end::bad) {
    c->state.events.violation(t.text(), "bad_chunk");
    co_await answer_and_close(c, error_response(400, "Bad Request", "X-Ccsb-Error", "bad_chunk"));
    co_return false;
  }
  if (e == body_end::peer_gone) co_return false;
  // to_gone: the upstream stopped reading the request and closed. What it
  // sent before closing (a 413, a redirect) is relayed (RFC 9112 9.5), then
  // the client connection closes; with nothing sent the client gets a 502.
  const bool early_response = e == body_end::to_gone;

  // The response: parse the head to learn its framing, pass it on.
  http::limits lim;
  lim.max_head = 65536;
  lim.max_line = 16384;
  lim.max_headers = 128;
  std::string rbuf;
  for (;;) {
    http::response_head resp;
    http::parse_result pr;
    for (;;) {
      pr = http::parse_response(rbuf, lim, resp);
      if (pr.st != http::status::need_more) break;
      if (!co_await read_some_into(c->upstream, rbuf, 16384)) {
        co_await answer_and_close(c, error_response(502, "Bad Gateway", "X-Ccsb-Error", "upstream_closed"));
        co_return false;
      }
    }
    if (pr.st == http::status::bad || resp.code == 101) {
      co_await answer_and_close(c, error_response(502, "Bad Gateway", "X-Ccsb-Error",
                                                  pr.st == http::status::bad ? pr.reason : "unexpected_upgrade"));
      co_return false;
    }
    if (resp.code < 200) { // interim response: pass it on, read the next head
      if (!co_await write_all(c->client, client_response_head(resp, false))) co_return false;
      rbuf.erase(0, pr.consumed);
      continue;
    }
    const bool no_body = head_request || resp.code == 204 || resp.code == 304;
    const bool framed = no_body || resp.chunked || resp.content_length.has_value();
    const bool keep = client_keep && framed && !c->state.draining && !early_response;
    std::string out = client_response_head(resp, !keep);
    const bool resp_chunked = resp.chunked;
    const auto resp_length = resp.content_length;
    rbuf.erase(0, pr.consumed);
    if (!co_await write_all(c->client, out)) co_return false;
    body_end be = body_end::done;
    if (no_body) be = body_end::done;
    else if (resp_chunked) be = co_await copy_chunked(*c, c->upstream, c->client, rbuf);
    else if (resp_length) be = co_await copy_length(*c, c->upstream, c->client, rbuf, *resp_length);
    else be = co_await copy_to_eof(*c, c->upstream, c->client, rbuf);
    c->close_upstream();
    c->release_slot();
    if (early_response && be == body_end::done) {
      co_await linger_close(c);
      co_return false;
    }
    if (be != body_end::done || !keep) {
      std::error_code ec;
      c->client.shutdown(asio::socket_base::shutdown_send, ec);
      c->close_all();
      co_return false;
    }
    co_return true;
  }
}

} // namespace

asio::awaitable<void> http_session(std::shared_ptr<connection> c) {
  const auto& o = c->state.cfg.opts;
  http::limits lim;
  lim.max_head = o.max_header_bytes;
  lim.max_line = std::min<std::size_t>(lim.max_line, o.max_header_bytes);
  std::string buf;
  for (;;) {
    if (c->state.draining) break;
    c->ph = phase::head;
    c->set_deadline_ms(o.header_timeout_ms);
    http::request_head req;
    http::parse_result pr;
    http::request_head_scanner scanner; // parse only when the answer can change
    for (;;) {
      if (scanner.worth_parsing(buf, lim)) {
        pr = http::parse_request(buf, lim, req);
        if (pr.st != http::status::need_more) break;
      }
      if (!co_await read_some_into(c->client, buf)) {
        c->close_all();
        co_return;
      }
    }
    if (pr.st == http::status::bad) {
      // A refusal that can name its target is reported like a denial (N7),
      // before the client sees it.
      if (!pr.target.empty()) c->state.events.violation(pr.target, pr.reason);
      co_await answer_and_close(c, error_response(400, "Bad Request", "X-Ccsb-Error", pr.reason));
      co_return;
    }
    const auto& a = req.target_authority;
    target t{a.host, std::string(a.host_text), a.port};
    if (!req.is_connect) {
      if (!co_await forward(c, req, pr.consumed, buf, t)) co_return;
      continue;
    }
    auto r = co_await dial(c, t);
    if (r.st != dial_status::connected) {
      co_await refuse(c, r);
      co_return;
    }
    // Bytes the client sent ahead: after the head, and while dial() watched it.
    // They go upstream once the tunnel inspector has read them (tunnel.hpp).
    std::string early = buf.substr(pr.consumed) + c->take_early();
    std::string().swap(buf);
    const bool established = co_await write_all(c->client, kEstablished);
    if (!established) {
      c->close_all();
      co_return;
    }
    c->set_deadline_ms(o.idle_timeout_ms);
    start_tunnel(c, std::move(early), t);
    co_return;
  }
  c->close_all();
}

} // namespace egressd
