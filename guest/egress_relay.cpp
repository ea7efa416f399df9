// guest/egress_relay.cpp — the guest's proxy listeners, multiplexed over the
// ccsb.egress port (ccsb/protocol/guest_egress.hpp) to the host's relay and
// the session's egressd (ccsb/launch/microvm_egress.hpp).
//
// One process, one poll loop. Each accepted connection is a stream: its
// bytes go out as data frames within the stream's credit, what the host
// sends is written to it (at most kWindow bytes held per stream, credited
// back as they are written), EOF either way is a half-close. At most
// kMaxStreams connections are served at once: past that the listeners are
// not polled and new connections wait in their backlog. A connection is
// closed once the host's close arrived and everything the host sent is
// written (the slot is held until then). A frame from the host the strict
// reader refuses or that breaks the protocol's rules ends the relay: every
// connection closes, the listeners close, and the guest has no network.
#include "egress_relay.hpp"
#include "ports.hpp"

#include "ccsb/protocol/guest_egress.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace ge = ccsb::protocol::guest_egress;

namespace ccsb::guest {

namespace {

void say(const std::string& line) { std::fprintf(stderr, "ccsb-egress: %s\n", line.c_str()); }

int listen_on(std::uint16_t port, std::string& why) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 128) != 0) {
    why = "127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(s);
    return -1;
  }
  return s;
}

class relay {
public:
  relay(int port, int http, int socks) : port_(port), http_(http), socks_(socks) {}

  [[noreturn]] void run() {
    for (;;) {
      std::vector<pollfd> p;
      std::vector<ge::stream_id> who;
      short pev = POLLIN;
      if (out_pos_ < out_.size()) pev |= POLLOUT;
      p.push_back({port_, pev, 0});
      const bool room = streams_.size() < ge::kMaxStreams;
      p.push_back({room ? http_ : -1, POLLIN, 0});
      p.push_back({room ? socks_ : -1, POLLIN, 0});
      for (auto& [id, s] : streams_) {
        const auto* t = table_.find(id);
        short ev = 0;
        if (s.fd >= 0 && t && !t->eof_out && !t->close_sent && t->send_credit > 0 && below_high()) ev |= POLLIN;
        if (s.fd >= 0 && !s.to_sock.empty()) ev |= POLLOUT;
        if (!ev) continue;
        p.push_back({s.fd, ev, 0});
        who.push_back(id);
      }
      if (::poll(p.data(), p.size(), -1) < 0) {
        if (errno == EINTR) continue;
        fail(std::string("poll: ") + std::strerror(errno));
      }
      for (std::size_t i = 3; i < p.size(); ++i)
        if (p[i].revents) on_stream(who[i - 3], p[i].revents);
      if (p[1].revents) accept_from(http_, ccsb::protocol::proxy_role::http);
      if (p[2].revents) accept_from(socks_, ccsb::protocol::proxy_role::socks);
      if (p[0].revents & POLLIN) on_port();
      else if (p[0].revents & (POLLHUP | POLLERR)) ::usleep(10000); // the host end is not connected
      flush_port();
    }
  }

private:
  struct stream {
    int fd{-1};
    std::string to_sock; // from the host, for the client: at most kWindow
    bool shut{false};
    bool host_closed{false};
  };

  [[noreturn]] void fail(const std::string& why) {
    say(why + "; the guest has no network from now on");
    for (auto& [id, s] : streams_)
      if (s.fd >= 0) ::close(s.fd);
    ::close(http_);
    ::close(socks_);
    ::close(port_);
    ::_exit(1);
  }

  bool below_high() const { return out_.size() - out_pos_ < (std::size_t{1} << 20); }

  void send_frame(const ge::frame& f) { out_ += ge::encode(f); }

  void flush_port() {
    while (out_pos_ < out_.size()) {
      ssize_t w = ::write(port_, out_.data() + out_pos_, out_.size() - out_pos_);
      if (w > 0) {
        out_pos_ += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      fail(std::string("writing the egress port: ") + (w < 0 ? std::strerror(errno) : "closed"));
    }
    if (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
    } else if (out_pos_ > (std::size_t{1} << 20)) {
      out_.erase(0, out_pos_);
      out_pos_ = 0;
    }
  }

  void accept_from(int l, ccsb::protocol::proxy_role role) {
    while (streams_.size() < ge::kMaxStreams) {
      int c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) return;
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto id = table_.open_local(role);
      if (!id) {
        ::close(c);
        return;
      }
      streams_[*id].fd = c;
      send_frame(ge::open{*id, role});
    }
  }

  // The client is gone (or broke): the host is asked to end the stream; the
  // slot stays held until its close arrives.
  void abort(ge::stream_id id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    if (it->second.fd >= 0) ::close(it->second.fd);
    it->second.fd = -1;
    it->second.to_sock.clear();
    const auto* t = table_.find(id);
    if (t && !t->close_sent) {
      table_.sent_close(id);
      send_frame(ge::close{id});
    }
    if (it->second.host_closed) streams_.erase(it);
  }

  void flush_sock(ge::stream_id id) {
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.fd < 0) return;
    auto& s = it->second;
    std::size_t wrote = 0;
    while (wrote < s.to_sock.size()) {
      ssize_t w = ::send(s.fd, s.to_sock.data() + wrote, s.to_sock.size() - wrote, MSG_NOSIGNAL);
      if (w > 0) {
        wrote += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      return abort(id);
    }
    s.to_sock.erase(0, wrote);
    if (wrote && !s.host_closed)
      if (auto c = table_.consumed(id, static_cast<std::uint32_t>(wrote), s.to_sock.size()))
        send_frame(ge::credit{id, c});
    if (!s.to_sock.empty()) return;
    const auto* t = table_.find(id);
    if (s.host_closed) {
      ::close(s.fd);
      streams_.erase(it);
      return;
    }
    if (t && t->eof_in && !s.shut) {
      ::shutdown(s.fd, SHUT_WR);
      s.shut = true;
    }
  }

  // Nothing waits for the client: the frame's bytes go out without a copy
  // into to_sock, what the client does not take now waits there.
  void send_direct(ge::stream_id id, stream& s, const std::string& bytes) {
    ssize_t w;
    do w = ::send(s.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0 && errno != EAGAIN) return abort(id);
    const std::size_t wrote = w > 0 ? static_cast<std::size_t>(w) : 0;
    s.to_sock.assign(bytes, wrote);
    if (wrote)
      if (auto c = table_.consumed(id, static_cast<std::uint32_t>(wrote), s.to_sock.size()))
        send_frame(ge::credit{id, c});
  }

  void on_stream(ge::stream_id id, short ev) {
    if (ev & POLLOUT) flush_sock(id);
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.fd < 0) return;
    const auto* t = table_.find(id);
    if (!t || t->eof_out || t->close_sent || t->send_credit == 0) return;
    if (!(ev & (POLLIN | POLLHUP | POLLERR))) return;
    char buf[ge::kMaxData];
    const std::size_t want = std::min<std::size_t>(t->send_credit, sizeof buf);
    ssize_t n = ::recv(it->second.fd, buf, want, 0);
    if (n > 0) {
      out_ += ge::header(ge::frame_type::data, id, static_cast<std::uint32_t>(n));
      out_.append(buf, static_cast<std::size_t>(n));
      table_.sent_data(id, static_cast<std::uint32_t>(n));
    } else if (n == 0) {
      send_frame(ge::eof{id});
      table_.sent_eof(id);
    } else if (errno != EINTR && errno != EAGAIN) {
      abort(id);
    }
  }

  // A read of a virtio-serial port returns at most one of its page-sized
  // buffers: read until it is empty (at most kPortBurst) before framing.
  void on_port() {
    static constexpr std::size_t kPortBurst = 256 * 1024;
    std::size_t got = 0;
    while (got < kPortBurst) {
      char* at = reader_.write_area(16384);
      ssize_t n = ::read(port_, at, 16384);
      reader_.commit(n > 0 ? static_cast<std::size_t>(n) : 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {
        if (got == 0) ::usleep(10000); // the host end is not connected
        break;
      }
      got += static_cast<std::size_t>(n);
    }
    for (;;) {
      auto f = reader_.next();
      if (!f) fail("bad frame from the host: " + f.err().message);
      if (!*f) return;
      handle(**f);
    }
  }

  void handle(const ge::frame& f) {
    auto v = table_.receive(f);
    if (!v) fail("the host broke the egress protocol: " + v.err().message);
    if (*v == ge::mux_table::verdict::stale) return;
    const ge::stream_id id = ge::id_of(f);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    auto& s = it->second;
    if (const auto* d = std::get_if<ge::data>(&f)) {
      if (s.fd < 0) return; // the client is gone: dropped
      if (s.to_sock.empty()) return send_direct(id, s, d->bytes);
      s.to_sock += d->bytes;
      return flush_sock(id);
    }
    if (std::holds_alternative<ge::eof>(f)) return flush_sock(id);
    if (std::holds_alternative<ge::close>(f)) {
      s.host_closed = true;
      if (s.fd < 0 || s.to_sock.empty()) {
        if (s.fd >= 0) ::close(s.fd);
        streams_.erase(it);
        return;
      }
      return flush_sock(id);
    }
  }

  int port_, http_, socks_;
  ge::frame_reader reader_{ge::sender::host};
  ge::mux_table table_{ge::sender::guest};
  std::map<ge::stream_id, stream> streams_;
  std::string out_;
  std::size_t out_pos_{0};
};

} // namespace

bool egress_enabled() {
  const std::string c = " " + read_small("/proc/cmdline") + " ";
  return c.find(" ccsb.egress=1 ") != std::string::npos;
}

std::string start_egress_relay(std::initializer_list<int> close_in_child) {
  std::string why;
  int http = listen_on(3128, why);
  if (http < 0) return "egress listener: " + why;
  int socks = listen_on(1080, why);
  if (socks < 0) {
    ::close(http);
    return "egress listener: " + why;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(http);
    ::close(socks);
    return std::string("fork (egress relay): ") + std::strerror(errno);
  }
  if (pid > 0) {
    ::close(http);
    ::close(socks);
    return {};
  }
  for (int fd : close_in_child)
    if (fd >= 0) ::close(fd);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_NAME, "ccsb-egress", 0, 0, 0);
  const std::string dev = find_port(ge::kEgressPort, 1000);
  if (dev.empty()) {
    say("no virtio-serial port named " + std::string(ge::kEgressPort));
    ::_exit(1);
  }
  int port = ::open(dev.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (port < 0) {
    say("open " + dev + ": " + std::strerror(errno));
    ::_exit(1);
  }
  relay(port, http, socks).run();
}

} // namespace ccsb::guest
