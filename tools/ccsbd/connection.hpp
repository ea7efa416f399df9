// ccsbd/connection.hpp — one client connection: request lines in (framed,
// bounded), reply and event lines out (buffered, bounded).
//
// Reading: the descriptor is non-blocking; each readiness reads what is
// there (at most kReadBudget bytes per round, so one busy client cannot
// starve the others) and hands complete lines to the server through
// line_framer (ccsb/protocol/daemon.hpp: 1 MiB per line, resync at the next
// newline). Writing: send() appends to a buffer that is written as the
// socket accepts (MSG_NOSIGNAL, SO_NOSIGPIPE on macOS: platform.hpp; POLLOUT watched only while something is
// pending). A client that lets more than kMaxPending bytes pile up (it does
// not read its events) is disconnected; its sessions go on (S8: sessions
// belong to the daemon, not to a connection).
#pragma once

#include "ccsb/launch/reactor.hpp"
#include "ccsb/protocol/daemon.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace ccsbd {

class connection {
public:
  static constexpr std::size_t kMaxPending = 64u << 20; // 64 MiB of unread replies and events
  static constexpr std::size_t kReadBudget = 256u << 10;

  // `n`: the line's number on this connection (1-based; every non-empty
  // line counts, an overlong one too), for replies that cannot echo an id.
  struct hooks {
    std::function<void(std::string_view line, std::uint64_t n)> line;
    std::function<void(std::size_t seen, std::uint64_t n)> overflow;
    std::function<void(const std::string& why)> closed; // EOF, a read/write error, or too much pending
  };

  connection(ccsb::launch::reactor& r, std::uint64_t id, ccsb::launch::unique_fd fd, hooks h)
      : r_(r), id_(id), fd_(std::move(fd)), hooks_(std::move(h)) {
    token_ = r_.watch(fd_.get(), [this](short ev) { on_ready(ev); });
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    if (token_) r_.unwatch(token_);
  }

  std::uint64_t id() const { return id_; }
  bool open() const { return !dead_; }

  // One line (the newline is added).
  void send(std::string_view line) {
    if (dead_) return;
    out_.append(line);
    out_ += '\n';
    if (out_.size() > kMaxPending) return fail("more than " + std::to_string(kMaxPending) + " bytes of replies unread");
    flush();
  }

  // Writes what is pending, waiting at most `budget` for the socket (on the way out).
  void drain(std::chrono::milliseconds budget) {
    const auto end = std::chrono::steady_clock::now() + budget;
    while (!dead_ && !out_.empty() && std::chrono::steady_clock::now() < end) {
      flush();
      if (out_.empty() || dead_) break;
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 50);
    }
  }

private:
  void on_ready(short ev) {
    if (dead_) return;
    if (ev & POLLOUT) flush();
    if (dead_) return;
    if (ev & (POLLIN | POLLHUP | POLLERR)) read_some();
  }

  void read_some() {
    char buf[65536];
    std::size_t budget = kReadBudget;
    while (!dead_ && budget > 0) {
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n < 0) return fail(std::string("read: ") + std::strerror(errno));
      if (n == 0) return fail("the client closed the connection");
      budget -= std::min(budget, static_cast<std::size_t>(n));
      framer_.feed(std::string_view(buf, static_cast<std::size_t>(n)),
                   [this](std::string_view line) {
                     ++lines_;
                     if (!dead_) hooks_.line(line, lines_);
                   },
                   [this](std::size_t seen) {
                     ++lines_;
                     if (!dead_) hooks_.overflow(seen, lines_);
                   });
    }
  }

  void flush() {
    while (!dead_ && !out_.empty()) {
      ssize_t n = ::send(fd_.get(), out_.data(), out_.size(),
                         ccsb::sys::this_platform::send_flags() | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return fail(std::string("send: ") + std::strerror(errno));
      out_.erase(0, static_cast<std::size_t>(n));
    }
    if (!dead_) r_.set_events(token_, out_.empty() ? POLLIN : POLLIN | POLLOUT);
  }

  // Marks the connection dead; the server removes it (never from inside
  // this object's own callbacks).
  void fail(const std::string& why) {
    if (dead_) return;
    dead_ = true;
    out_.clear();
    r_.unwatch(token_);
    token_ = 0;
    ::shutdown(fd_.get(), SHUT_RDWR);
    hooks_.closed(why);
  }

  ccsb::launch::reactor& r_;
  std::uint64_t id_;
  ccsb::launch::unique_fd fd_;
  hooks hooks_;
  ccsb::launch::reactor::token token_{0};
  ccsb::protocol::daemon::line_framer framer_;
  std::string out_;
  std::uint64_t lines_{0};
  bool dead_{false};
};

} // namespace ccsbd
