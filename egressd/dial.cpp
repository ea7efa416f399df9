#include "dial.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>

namespace egressd {

std::string target::text() const {
  if (host) return ccsb::format_host_port(*host, port);
  return raw + ":" + std::to_string(port);
}

std::string name_denial(const ccsb::egress_policy& policy, const target& t, ccsb::decision& d) {
  if (!t.host) {
    d = ccsb::decision{false, ccsb::decision_step::malformed, {}};
    return "malformed";
  }
  d = policy.decide(*t.host);
  if (d.allowed) return {};
  if (d.step == ccsb::decision_step::not_allowlisted && t.host->is_ip()) return "ip_literal_not_listed";
  return d.reason();
}

namespace {

asio::ip::tcp::endpoint to_endpoint(const ip_address& a, std::uint16_t port) {
  if (!a.v6) {
    asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), a.b.data(), 4);
    return {asio::ip::address_v4(b), port};
  }
  asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), a.b.data(), 16);
  return {asio::ip::address_v6(b), port};
}

// A non-blocking connect that looks once more before waiting: on loopback
// the handshake has usually completed by the time connect() returns
// EINPROGRESS, and a zero-timeout poll saves a trip through epoll. Only
// when it really waits does it watch the client for a hang-up.
asio::awaitable<std::error_code> connect_checked(connection& c, asio::ip::tcp::socket& s,
                                                 const asio::ip::tcp::endpoint& ep) {
  std::error_code ec;
  s.non_blocking(true, ec);
  if (ec) co_return ec;
  int fd = s.native_handle();
  if (::connect(fd, static_cast<const sockaddr*>(ep.data()), static_cast<socklen_t>(ep.size())) == 0)
    co_return std::error_code{};
  if (errno != EINPROGRESS) co_return std::error_code(errno, std::system_category());
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) != 1) {
    c.watch_client();
    auto [wec] = co_await s.async_wait(asio::socket_base::wait_write, use_tuple);
    if (wec) co_return wec;
    fd = s.native_handle();
    if (fd < 0) co_return asio::error::operation_aborted;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err) co_return std::error_code(err, std::system_category());
  co_return std::error_code{};
}

ip_address from_host(const ccsb::host& h) {
  return ip_address::from_bytes(h.address().data(), h.kind() == ccsb::host_kind::ipv6);
}

} // namespace

asio::awaitable<dial_result> dial(std::shared_ptr<connection> c, const target& t) {
  auto& st = c->state;
  const auto& cfg = st.cfg;
  auto deny = [&](std::string reason) {
    st.events.violation(t.text(), reason);
    return dial_result{dial_status::denied, std::move(reason)};
  };

  ccsb::decision d;
  if (auto why = name_denial(cfg.policy, t, d); !why.empty()) co_return deny(std::move(why));

  if (!c->acquire_slot()) {
    st.events.violation(t.text(), "too_many_tunnels");
    co_return dial_result{dial_status::limit, "too_many_tunnels"};
  }
  // Whenever dial() waits from here on (the lookup can take the whole DNS
  // timeout, a connect the connect timeout), a client that hangs up gives its
  // slot back at once; the watch ends when dial() returns.
  struct watch_guard {
    connection& conn;
    ~watch_guard() { conn.stop_watching(); }
  } guard{*c};
  const dial_result gone{dial_status::unreachable, "client closed"};

  // Addresses: the literal itself, a --resolve entry, or DNS.
  std::vector<ip_address> addrs;
  const ccsb::host& h = *t.host;
  if (h.is_ip()) {
    addrs.push_back(from_host(h));
  } else {
    auto it = std::find_if(cfg.resolve.begin(), cfg.resolve.end(), [&](const auto& e) { return e.first == h; });
    if (it != cfg.resolve.end()) {
      addrs.push_back(it->second);
    } else {
      c->ph = phase::dialing;
      c->deadline = clock::time_point::max();
      c->watch_client();
      c->begin_lookup();
      auto r = co_await st.dns.async_resolve(std::string(h.str()), asio::use_awaitable);
      c->end_lookup();
      if (!r.error.empty()) co_return dial_result{dial_status::dns_failed, r.error};
      addrs = std::move(r.addresses);
    }
  }

  // Classify every address: one denied address denies the name (a name
  // that mixes public and internal answers is a rebinding attempt).
  for (const auto& a : addrs) {
    std::string why = cfg.addresses.check(a, t.port);
    if (!why.empty()) co_return deny(std::move(why));
  }
  const std::vector<ip_address>& ok = addrs;
  if (!c->client.is_open()) { // hung up during the lookup: connect to nothing
    c->release_slot();
    co_return gone;
  }
  // A client that half-closed during the lookup gave its slot back; its
  // request still goes on when a slot is free.
  if (!c->acquire_slot()) {
    st.events.violation(t.text(), "too_many_tunnels");
    co_return dial_result{dial_status::limit, "too_many_tunnels"};
  }

  // Connect to exactly the checked addresses, in order; never look up again.
  c->ph = phase::dialing;
  dial_result last{dial_status::unreachable, "connect: no address"};
  for (const auto& a : ok) {
    auto ep = to_endpoint(a, t.port);
    std::error_code ec;
    c->upstream.close(ec);
    c->upstream.open(ep.protocol(), ec);
    if (ec) {
      last = dial_result{dial_status::unreachable, "connect: " + ec.message()};
      continue;
    }
    c->set_deadline_ms(cfg.opts.connect_timeout_ms);
    std::error_code cec = co_await connect_checked(*c, c->upstream, ep);
    c->deadline = clock::time_point::max();
    if (!cec) {
      c->upstream.set_option(asio::ip::tcp::no_delay(true), ec);
      co_return dial_result{dial_status::connected, {}};
    }
    if (c->timed_out) last = dial_result{dial_status::timed_out, "connect: timed out"};
    else if (cec.value() == ECONNREFUSED) last = dial_result{dial_status::refused, "connect: connection refused"};
    else if (cec.value() == ETIMEDOUT) last = dial_result{dial_status::timed_out, "connect: timed out"};
    else last = dial_result{dial_status::unreachable, "connect: " + cec.message()};
    if (!c->client.is_open()) break; // the client went away meanwhile
  }
  c->close_upstream();
  c->release_slot();
  co_return last;
}

} // namespace egressd
