#include "session_socks.hpp"

#include "dial.hpp"
#include "io_util.hpp"
#include "socks_parser.hpp"
#include "tunnel.hpp"

namespace egressd {

namespace {

// Reads until `parse` is not need_more (each SOCKS stage is small).
template <class Parse>
asio::awaitable<socks::parse_result> read_stage(connection& c, std::string& buf, Parse parse) {
  for (;;) {
    socks::parse_result r = parse(std::string_view(buf));
    if (r.st != socks::status::need_more) co_return r;
    if (buf.size() > socks::kMaxStage || !co_await read_some_into(c.client, buf, 1024))
      co_return socks::parse_result{socks::status::bad, 0, "client_closed"};
  }
}

std::uint8_t reply_for(const dial_result& r) {
  switch (r.st) {
  case dial_status::connected: return socks::succeeded;
  case dial_status::denied: return socks::not_allowed_by_ruleset;
  case dial_status::limit: return socks::general_failure;
  case dial_status::dns_failed: return socks::host_unreachable;
  case dial_status::refused: return socks::connection_refused;
  case dial_status::timed_out: return socks::host_unreachable;
  case dial_status::unreachable: return socks::network_unreachable;
  }
  return socks::general_failure;
}

// A request refused by the parser that names a target (BIND, UDP ASSOCIATE,
// port 0, ...) is reported like a denial (N7), before the reply goes out.
void report_refusal(connection& c, const socks::request& req, std::string_view reason) {
  c.state.events.violation(target{req.host, req.raw_host, req.port}.text(), reason);
}

asio::awaitable<void> fail(std::shared_ptr<connection> c, std::string reply) {
  c->close_upstream();
  c->release_slot();
  co_await write_all(c->client, reply);
  std::error_code ec;
  c->client.shutdown(asio::socket_base::shutdown_send, ec);
  c->close_all();
}

// SOCKS4/4a CONNECT (clients that speak nothing newer, N2): the same target, the same
// dial pipeline, SOCKS4 reply codes.
asio::awaitable<void> socks4_session(std::shared_ptr<connection> c, std::string buf, bool token) {
  if (token) { // SOCKS4 cannot carry the password
    co_await fail(c, socks::make_socks4_reply(socks::kSocks4Rejected));
    co_return;
  }
  socks::request req;
  for (;;) {
    auto r = socks::parse_socks4_request(buf, req);
    if (r.st == socks::status::good) {
      buf.erase(0, r.consumed);
      break;
    }
    if (r.st == socks::status::bad) {
      if (r.target_named) report_refusal(*c, req, r.reason);
      co_await fail(c, socks::make_socks4_reply(socks::kSocks4Rejected));
      co_return;
    }
    if (buf.size() > socks::kMaxSocks4 || !co_await read_some_into(c->client, buf, 1024)) {
      c->close_all();
      co_return;
    }
  }
  target t{req.host, req.raw_host, req.port};
  auto d = co_await dial(c, t);
  if (d.st != dial_status::connected) {
    co_await fail(c, socks::make_socks4_reply(socks::kSocks4Rejected));
    co_return;
  }
  buf += c->take_early(); // what the client sent while dial() watched it
  const bool granted = co_await write_all(c->client, socks::make_socks4_reply(socks::kSocks4Granted));
  if (!granted) {
    c->close_all();
    co_return;
  }
  c->set_deadline_ms(c->state.cfg.opts.idle_timeout_ms);
  start_tunnel(c, std::move(buf), t); // the early bytes go upstream once inspected
}

} // namespace

asio::awaitable<void> socks_session(std::shared_ptr<connection> c) {
  const auto& o = c->state.cfg.opts;
  c->ph = phase::head;
  c->set_deadline_ms(o.header_timeout_ms);
  std::string buf;
  const bool token = !o.socks_token.empty();

  std::uint8_t method = socks::kMethodNone;
  auto r = co_await read_stage(*c, buf, [&](std::string_view d) { return socks::parse_greeting(d, token, method); });
  if (r.st != socks::status::good && r.reason == "socks4") {
    co_await socks4_session(c, std::move(buf), token);
    co_return;
  }
  if (r.st != socks::status::good) {
    c->close_all();
    co_return;
  }
  buf.erase(0, r.consumed);
  // (Named strings: GCC 12 cannot keep an initializer_list alive across co_await.)
  std::string choice(1, '\x05');
  choice += static_cast<char>(method);
  if (!co_await write_all(c->client, choice) || method == socks::kMethodNone) {
    c->close_all();
    co_return;
  }

  if (method == socks::kMethodUserPass) {
    std::string_view user, pass;
    r = co_await read_stage(*c, buf, [&](std::string_view d) { return socks::parse_auth(d, user, pass); });
    if (r.st != socks::status::good) {
      c->close_all();
      co_return;
    }
    bool ok = socks::constant_time_equals(pass, o.socks_token);
    buf.erase(0, r.consumed);
    if (!ok) {
      co_await fail(c, std::string("\x01\x01", 2));
      co_return;
    }
    if (!co_await write_all(c->client, std::string_view("\x01\x00", 2))) {
      c->close_all();
      co_return;
    }
  }

  socks::request req;
  r = co_await read_stage(*c, buf, [&](std::string_view d) { return socks::parse_request(d, req); });
  if (r.st != socks::status::good) {
    if (r.reason == "client_closed") {
      c->close_all();
    } else {
      if (r.target_named) report_refusal(*c, req, r.reason);
      co_await fail(c, socks::make_reply(r.reply));
    }
    co_return;
  }
  buf.erase(0, r.consumed);

  target t{req.host, req.raw_host, req.port};
  auto d = co_await dial(c, t);
  if (d.st != dial_status::connected) {
    co_await fail(c, socks::make_reply(reply_for(d)));
    co_return;
  }
  buf += c->take_early(); // what the client sent while dial() watched it
  // BND.ADDR/BND.PORT 0.0.0.0:0: egressd's own outbound address and port
  // would tell the sandbox about the host (its addresses, its port use).
  const bool replied = co_await write_all(c->client, socks::make_reply(socks::succeeded));
  if (!replied) {
    c->close_all();
    co_return;
  }
  c->set_deadline_ms(o.idle_timeout_ms);
  start_tunnel(c, std::move(buf), t); // the early bytes go upstream once inspected
}

} // namespace egressd
