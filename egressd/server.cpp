#include "server.hpp"

#include "confine.hpp"
#include "connection.hpp"
#include "io_platform.hpp"
#include "resolver.hpp"
#include "session_http.hpp"
#include "session_socks.hpp"

#include "ccsb/protocol/proxy_channel.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <fcntl.h>
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

// The proxy channel (ccsb/protocol/proxy_channel.hpp, L3): a sandbox hands
// over the listening sockets it created in its own network namespace, and
// egressd accepts on them directly. Every descriptor is checked before it is
// served; a message that fails any check is refused as a whole.
std::string check_handed_listener(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return "a descriptor is not a socket";
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != SOCK_STREAM) return "a socket is not SOCK_STREAM";
  if (!io_platform::stream_is_tcp(fd)) return "a socket is not TCP";
  len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v != 1) return "a socket is not listening";
  sockaddr_storage ss{};
  len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "getsockname failed";
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) return "a listener is not bound to a loopback address";
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return "a listener is not bound to a loopback address";
  } else {
    return "a socket is neither IPv4 nor IPv6";
  }
  return {};
}

// A connection the launcher relays (the microvm backend's egress port): one
// end of a connected AF_UNIX stream socketpair, served like an accepted
// client.
std::string check_handed_connection(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return "the descriptor is not a socket";
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != SOCK_STREAM) return "the socket is not SOCK_STREAM";
  len = sizeof v;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v != 0) return "the socket is listening";
  sockaddr_storage ss{};
  len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_UNIX)
    return "the socket is not an AF_UNIX socket";
  return {};
}

struct received {
  std::string text;
  std::vector<int> fds; // owned: closed by the caller unless adopted
  bool truncated{false};
  bool eof{false};
  int error{0};
};

received receive_datagram(int fd) {
  received r;
  char buf[ccsb::protocol::kMaxChannelMessage + 1];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (ccsb::protocol::kMaxListeners + 1))];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = io_platform::recvmsg_cloexec(fd, &msg, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    r.error = errno;
    return r;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      r.fds.push_back(got);
    }
  }
  if (n == 0 && r.fds.empty()) r.eof = true;
  r.truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<std::size_t>(n) > ccsb::protocol::kMaxChannelMessage;
  r.text.assign(buf, static_cast<std::size_t>(n > 0 ? n : 0));
  return r;
}

void reply(int fd, const ccsb::protocol::channel_reply& m) {
  const std::string text = ccsb::protocol::write_message(m);
  if (io_platform::send_nosigpipe(fd, text.data(), text.size(), MSG_DONTWAIT) < 0)
    std::fprintf(stderr, "egressd: proxy channel: send: %s\n", std::strerror(errno));
}

asio::awaitable<void> channel_loop(server_state& st, int channel_fd, std::vector<listener>& listeners) {
  asio::posix::stream_descriptor channel(st.io, channel_fd);
  std::size_t adopted = 0;
  for (;;) {
    auto [ec] = co_await channel.async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
    if (ec) co_return;
    received r = receive_datagram(channel.native_handle());
    if (r.error == EAGAIN || r.error == EWOULDBLOCK) continue;
    if (r.error != 0) {
      std::fprintf(stderr, "egressd: proxy channel: recvmsg: %s\n", std::strerror(r.error));
      co_return;
    }
    if (r.eof) co_return; // the sandbox's supervisor closed its end: nothing more will come
    std::string why;
    if (!r.truncated && ccsb::protocol::is_connection_message(r.text)) {
      auto c = ccsb::protocol::parse_connection(r.text, r.fds.size());
      if (st.draining) why = "egressd is shutting down";
      else if (!c) why = c.err().what();
      else why = check_handed_connection(r.fds[0]);
      client_socket sock(st.io);
      if (why.empty()) {
        std::error_code aec;
        sock.assign(generic(AF_UNIX, 0), r.fds[0], aec);
        if (aec) why = "assign: " + aec.message();
      }
      if (!why.empty()) {
        for (int fd : r.fds) ::close(fd);
        std::fprintf(stderr, "egressd: proxy channel: connection refused: %s\n", why.c_str());
        reply(channel.native_handle(), ccsb::protocol::refused_message{why});
        continue;
      }
      auto conn = std::make_shared<connection>(st, std::move(sock));
      if (c->role == ccsb::protocol::proxy_role::http)
        asio::co_spawn(st.io, http_session(std::move(conn)), log_completion{"http session"});
      else
        asio::co_spawn(st.io, socks_session(std::move(conn)), log_completion{"socks session"});
      reply(channel.native_handle(), ccsb::protocol::accepting_message{});
      continue;
    }
    std::optional<ccsb::protocol::listeners_message> m;
    if (r.truncated) {
      why = "message or descriptors truncated";
    } else if (st.draining) {
      why = "egressd is shutting down";
    } else if (auto parsed = ccsb::protocol::parse_listeners(r.text, r.fds.size()); !parsed) {
      why = parsed.err().what();
    } else if (adopted + parsed->roles.size() > ccsb::protocol::kMaxListeners) {
      why = "more than " + std::to_string(ccsb::protocol::kMaxListeners) + " listeners on one channel";
    } else {
      m = std::move(*parsed);
      for (int fd : r.fds)
        if (why = check_handed_listener(fd); !why.empty()) break;
    }
    if (!why.empty()) {
      for (int fd : r.fds) ::close(fd);
      std::fprintf(stderr, "egressd: proxy channel: refused: %s\n", why.c_str());
      reply(channel.native_handle(), ccsb::protocol::refused_message{why});
      continue;
    }
    for (std::size_t i = 0; i < r.fds.size(); ++i) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(r.fds[i], reinterpret_cast<sockaddr*>(&ss), &len);
      listener l;
      l.http = m->roles[i] == ccsb::protocol::proxy_role::http;
      l.acceptor = std::make_unique<generic_acceptor>(st.io);
      std::error_code aec;
      l.acceptor->assign(generic(ss.ss_family, IPPROTO_TCP), r.fds[i], aec);
      if (aec) {
        // assign() failing leaves the descriptor ours; nothing was served yet
        // from this message, so close what is left and refuse it.
        for (std::size_t j = i; j < r.fds.size(); ++j) ::close(r.fds[j]);
        reply(channel.native_handle(), ccsb::protocol::refused_message{"assign: " + aec.message()});
        co_return;
      }
      l.bound = "channel";
      asio::co_spawn(st.io, accept_loop(st, *l.acceptor, l.http), log_completion{"accept"});
      listeners.push_back(std::move(l));
      ++adopted;
    }
    reply(channel.native_handle(), ccsb::protocol::accepting_message{});
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

int run_server(const settings& cfg_in, event_sink& events, std::function<void(event_sink&)> after_ready) {
  // First, before any socket is opened, accepted or written: a peer that is
  // gone makes a write fail with EPIPE, never kill egressd. On macOS the
  // relay's and the proxy channel's sends rely on it (io_platform.hpp).
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
  // Copied before the channel may add to `listeners`: the own listeners'
  // addresses (self-connection checks) and the ready line name only these.
  const std::size_t own_listeners = listeners.size();
  if (cfg.opts.listen_channel >= 0) {
    if (::fcntl(cfg.opts.listen_channel, F_SETFD, FD_CLOEXEC) != 0) {
      std::fprintf(stderr, "egressd: --listen-channel %d: %s\n", cfg.opts.listen_channel, std::strerror(errno));
      return 1;
    }
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(cfg.opts.listen_channel, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
      std::fprintf(stderr, "egressd: --listen-channel %d: not a SOCK_SEQPACKET socket\n", cfg.opts.listen_channel);
      return 1;
    }
    asio::co_spawn(io, channel_loop(st, cfg.opts.listen_channel, listeners), log_completion{"proxy channel"});
  }

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

  for (std::size_t i = 0; i < own_listeners; ++i) {
    const auto& l = listeners[i];
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

  ccsb::protocol::egressd_events::ready ready;
  for (std::size_t i = 0; i < own_listeners; ++i) (listeners[i].http ? ready.http : ready.socks) = listeners[i].bound;
  if (cfg.opts.listen_channel >= 0) ready.listen_channel = cfg.opts.listen_channel;

  // Everything that needs a file, a privilege or a set-up system call is
  // done: confine (X3, confine.hpp), then announce.
  auto confined = confine(cfg.opts);
  if (!confined) {
    std::fprintf(stderr, "egressd: %s\n", confined.err().what().c_str());
    return 1;
  }
  if (auto d = confined->degraded_line(); !d.empty()) std::fprintf(stderr, "egressd: %s\n", d.c_str());
  ready.confined = confined->reported();
  events.write(ready);
  if (confined->after_ready) asio::post(io, confined->after_ready);
  if (after_ready) asio::post(io, [&] { after_ready(events); });

  io.run();
  // A closed file system cannot unlink: the socket files stay, and the next
  // egressd on the same path replaces them (open_listener).
  if (!confined->filesystem_closed())
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
