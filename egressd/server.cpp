#include "server.hpp"

#include "connection.hpp"
#include "resolver.hpp"
#include "session_http.hpp"
#include "session_socks.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace egressd {

namespace {

using generic = asio::generic::stream_protocol;
using generic_acceptor = asio::basic_socket_acceptor<generic>;

struct listener {
  std::unique_ptr<generic_acceptor> acceptor;
  std::string bound; // "127.0.0.1:PORT", "[::1]:PORT" or "unix:/path"
  std::string unix_path;
  bool http{true};
};

ccsb::result<listener> open_listener(asio::io_context& io, const listen_spec& spec, bool http, std::string_view field) {
  listener l;
  l.http = http;
  l.acceptor = std::make_unique<generic_acceptor>(io);
  std::error_code ec;
  auto fail = [&](const char* what) {
    return ccsb::make_error(ccsb::errc::io_error, std::string(field), std::string(what) + ": " + ec.message());
  };
  if (spec.is_unix) {
    // Replace a stale socket file, never anything else.
    struct stat st {};
    if (::lstat(spec.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return ccsb::make_error(ccsb::errc::io_error, std::string(field), "'" + spec.path + "' exists and is not a socket");
      ::unlink(spec.path.c_str());
    }
    asio::local::stream_protocol::endpoint lep(spec.path);
    generic::endpoint ep(lep);
    l.acceptor->open(ep.protocol(), ec);
    if (ec) return fail("socket");
    l.acceptor->bind(ep, ec);
    if (ec) return fail("bind");
    l.bound = "unix:" + spec.path;
    l.unix_path = spec.path;
  } else {
    asio::ip::address addr;
    if (spec.address.v6) {
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), spec.address.b.data(), 16);
      addr = asio::ip::address_v6(b);
    } else {
      asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), spec.address.b.data(), 4);
      addr = asio::ip::address_v4(b);
    }
    generic::endpoint ep(asio::ip::tcp::endpoint(addr, spec.port));
    l.acceptor->open(ep.protocol(), ec);
    if (ec) return fail("socket");
    l.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    l.acceptor->bind(ep, ec);
    if (ec) return fail("bind");
  }
  l.acceptor->listen(4096, ec);
  if (ec) return fail("listen");
  if (!spec.is_unix) {
    auto ep = l.acceptor->local_endpoint(ec);
    if (ec) return fail("getsockname");
    const auto* sa = static_cast<const sockaddr*>(ep.data());
    if (sa->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      l.bound = ip_address::from_bytes(reinterpret_cast<const std::uint8_t*>(&in->sin_addr), false).str() + ":" +
                std::to_string(ntohs(in->sin_port));
    } else {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      l.bound = "[" + ip_address::from_bytes(in6->sin6_addr.s6_addr, true).str() + "]:" +
                std::to_string(ntohs(in6->sin6_port));
    }
  }
  return l;
}

// Asio 1.22 reports errno values in its own system category, whose
// default_error_condition maps nothing to std::errc (that mapping is compiled
// only under ASIO_HAS_STD_ERROR_CODE, which 1.22 never defines), so
// `ec == std::errc::too_many_files_open` is false for EMFILE. Compare the
// errno value itself.
bool is_errno(const std::error_code& ec) {
  return ec.category() == asio::error::get_system_category() || ec.category() == std::system_category() ||
         ec.category() == std::generic_category();
}

bool out_of_descriptors(const std::error_code& ec) {
  if (!is_errno(ec)) return false;
  switch (ec.value()) {
  case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM: return true;
  default: return false;
  }
}

// Accepting again right away after EMFILE fails again at once (the pending
// connection is still in the backlog), so the loop waits before retrying.
// Other accept errors (a client that gave up, ECONNABORTED, EPROTO) concern
// one connection; a short pause still keeps a persistent one from spinning.
constexpr auto kDescriptorBackoff = std::chrono::milliseconds(100);
constexpr auto kErrorBackoff = std::chrono::milliseconds(10);
// While accept keeps failing, one line when it starts, a reminder at most this
// often, and one line when it recovers.
constexpr auto kAcceptLogInterval = std::chrono::seconds(60);

asio::awaitable<void> accept_loop(server_state& st, generic_acceptor& acc, bool http) {
  std::error_code lec;
  const int family = acc.local_endpoint(lec).protocol().family();
  const bool tcp = family == AF_INET || family == AF_INET6;
  asio::steady_timer backoff(st.io);
  std::uint64_t failures = 0; // consecutive failed accepts
  clock::time_point last_log{};
  for (;;) {
    auto [ec, sock] = co_await acc.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acc.is_open()) co_return;
      const bool descriptors = out_of_descriptors(ec);
      const auto now = clock::now();
      if (failures == 0 || now - last_log >= kAcceptLogInterval) {
        if (failures == 0)
          std::fprintf(stderr, "egressd: accept: %s; %s\n", ec.message().c_str(),
                       descriptors ? "pausing 100 ms between accepts until descriptors are free"
                                   : "pausing 10 ms before the next accept");
        else
          std::fprintf(stderr, "egressd: accept: %s (%llu failed accepts so far)\n", ec.message().c_str(),
                       static_cast<unsigned long long>(failures));
        last_log = now;
      }
      ++failures;
      // Idle pooled pipes hold descriptors that clients need more.
      if (descriptors) st.pipes.clear();
      backoff.expires_after(descriptors ? kDescriptorBackoff : kErrorBackoff);
      auto [wec] = co_await backoff.async_wait(use_tuple);
      if (wec || !acc.is_open()) co_return;
      continue;
    }
    if (failures > 0) {
      std::fprintf(stderr, "egressd: accept: working again after %llu failed accepts\n",
                   static_cast<unsigned long long>(failures));
      failures = 0;
    }
    if (st.draining) continue; // sock closes here
    if (tcp) {
      int one = 1;
      ::setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    auto c = std::make_shared<connection>(st, std::move(sock));
    if (http) asio::co_spawn(st.io, http_session(std::move(c)), log_completion{"http session"});
    else asio::co_spawn(st.io, socks_session(std::move(c)), log_completion{"socks session"});
  }
}

asio::awaitable<void> sweeper(server_state& st) {
  asio::steady_timer t(st.io);
  for (;;) {
    t.expires_after(std::chrono::milliseconds(250));
    auto [ec] = co_await t.async_wait(use_tuple);
    if (ec) co_return;
    auto now = clock::now();
    for (connection* c = st.head; c; c = c->next) c->on_tick(now);
  }
}

std::vector<ip_address> own_addresses() {
  std::vector<ip_address> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.push_back(ip_address::from_bytes(reinterpret_cast<const std::uint8_t*>(&in->sin_addr), false));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      out.push_back(ip_address::from_bytes(in6->sin6_addr.s6_addr, true));
    }
  }
  ::freeifaddrs(list);
  return out;
}

void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

} // namespace

int run_server(const settings& cfg_in, event_sink& events) {
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  settings cfg = cfg_in;
  cfg.addresses.self = own_addresses();

  asio::io_context io(1);
  resolver dns(io);
  if (auto r = dns.init(cfg.dns_servers_csv, cfg.opts.dns_timeout_ms); !r) {
    std::fprintf(stderr, "egressd: %s\n", r.err().what().c_str());
    return 2;
  }
  server_state st(io, cfg, events, dns);

  std::vector<listener> listeners;
  for (int i = 0; i < 2; ++i) {
    const auto& spec = i == 0 ? cfg.http : cfg.socks;
    if (!spec) continue;
    auto l = open_listener(io, *spec, i == 0, i == 0 ? "httpListen" : "socksListen");
    if (!l) {
      std::fprintf(stderr, "egressd: %s\n", l.err().what().c_str());
      return 1;
    }
    listeners.push_back(std::move(*l));
  }

  for (auto& l : listeners)
    asio::co_spawn(io, accept_loop(st, *l.acceptor, l.http), log_completion{"accept"});
  asio::co_spawn(io, sweeper(st), log_completion{"sweeper"});

  // SIGTERM/SIGINT: stop accepting, close connections that are between
  // requests, let tunnels run until the drain deadline, then exit 0. The
  // handler is in place before "ready" is announced.
  asio::signal_set signals(io, SIGTERM, SIGINT);
  asio::steady_timer drain_deadline(io);
  signals.async_wait([&](std::error_code ec, int) {
    if (ec) return;
    st.draining = true;
    for (auto& l : listeners) {
      std::error_code e;
      l.acceptor->close(e);
    }
    for (connection* c = st.head; c; c = c->next)
      if (c->ph == phase::head) c->close_all();
    st.on_idle = [&] { io.stop(); };
    if (st.live == 0) {
      io.stop();
      return;
    }
    drain_deadline.expires_after(std::chrono::seconds(cfg.opts.drain_seconds));
    drain_deadline.async_wait([&](std::error_code e) {
      if (e) return;
      for (connection* c = st.head; c; c = c->next) c->close_all();
      io.stop();
    });
  });

  for (const auto& l : listeners) {
    std::error_code ec;
    auto ep = l.acceptor->local_endpoint(ec);
    const auto* sa = static_cast<const sockaddr*>(ep.data());
    if (ec || l.unix_path.size()) continue;
    if (sa->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      cfg.addresses.listeners.emplace_back(
          ip_address::from_bytes(reinterpret_cast<const std::uint8_t*>(&in->sin_addr), false), ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      cfg.addresses.listeners.emplace_back(ip_address::from_bytes(in6->sin6_addr.s6_addr, true), ntohs(in6->sin6_port));
    }
  }

  std::string http_bound, socks_bound;
  for (const auto& l : listeners) (l.http ? http_bound : socks_bound) = l.bound;
  events.ready(http_bound, socks_bound);

  io.run();
  for (const auto& l : listeners)
    if (!l.unix_path.empty()) ::unlink(l.unix_path.c_str());
  // Leave without unwinding: coroutine frames still owned by the io_context
  // refer to the server state, the resolver and each other, and there is no
  // destruction order that suits them all. Events went out with write(2), so
  // nothing is buffered; the kernel closes every descriptor.
  std::fflush(nullptr);
  std::_Exit(0);
}

} // namespace egressd
