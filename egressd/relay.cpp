#include "relay.hpp"

#include "connection.hpp"
#include "io_platform.hpp"

#include <algorithm>
#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace egressd {

pipe_pool::~pipe_pool() { clear(); }

void pipe_pool::clear() {
  for (auto p : free_) {
    ::close(p.r);
    ::close(p.w);
  }
  free_.clear();
}

pipe_pool::pipe_pair pipe_pool::acquire() {
  if (!free_.empty()) {
    auto p = free_.back();
    free_.pop_back();
    return p;
  }
  int fds[2];
  if (io_platform::relay_pipe(fds) != 0) return {};
  return {fds[0], fds[1]};
}

void pipe_pool::release(pipe_pair p, bool empty) {
  if (!p) return;
  if (empty && free_.size() < 64) {
    free_.push_back(p);
    return;
  }
  ::close(p.r);
  ::close(p.w);
}

namespace {

// Fairness (N8: one busy tunnel cannot delay the others' bytes): a
// direction moves at most kChunk per splice and kTurnBytes per turn of the
// event loop, then lets every other ready connection run before it goes on
// (before: 1 MiB splices, 16 per turn, up to 16 MiB; an echo on another
// tunnel waited ~180 ms behind 20 bulk downloads, now ~10 ms). 256 KiB
// keeps the bulk throughput of 1 MiB splices; 128 KiB halved the echo's
// wait again but cost ~18 % of the throughput (bench_egressd, fairness).
constexpr std::size_t kChunk = std::size_t{256} << 10;
constexpr std::size_t kTurnBytes = std::size_t{256} << 10;
constexpr std::size_t kCopyBuffer = 16384;

enum class outcome { moved, again, eof, error };

template <class To>
asio::awaitable<bool> wait_writable(To& to) {
  auto [ec] = co_await to.async_wait(asio::socket_base::wait_write, use_tuple);
  co_return !ec;
}

template <class From, class To>
asio::awaitable<void> pump(std::shared_ptr<connection> c, From& from, To& to) {
  auto& pool = c->state.pipes;
  bool use_splice = true;
  std::unique_ptr<char[]> buf; // only for the copy fallback, allocated on first use
  bool need_wait = true;
  for (;;) {
    if (need_wait) {
      auto [ec] = co_await from.async_wait(asio::socket_base::wait_read, use_tuple);
      if (ec) co_return; // closed by the other direction or by the sweeper
    }
    need_wait = true;
    c->activity = true;
    for (std::size_t turn = 0;;) {
      if (turn >= kTurnBytes) { // let other tunnels run
        co_await asio::post(asio::use_awaitable);
        need_wait = false;
        break;
      }
      int in = from.native_handle();
      if (in < 0 || to.native_handle() < 0) co_return;
      outcome r = outcome::error;
      if (use_splice) {
        auto p = pool.acquire();
        if (!p) {
          use_splice = false;
          continue;
        }
        ssize_t n = io_platform::splice_move(in, p.w, kChunk);
        if (n < 0) {
          int e = errno;
          pool.release(p, true);
          if (e == EAGAIN || e == EINTR) {
            r = outcome::again;
          } else if (e == EINVAL || e == ENOSYS) {
            use_splice = false;
            continue;
          } else {
            r = outcome::error;
          }
        } else if (n == 0) {
          pool.release(p, true);
          r = outcome::eof;
        } else {
          std::size_t left = static_cast<std::size_t>(n);
          bool ok = true;
          while (left > 0) {
            int out = to.native_handle();
            if (out < 0) { ok = false; break; }
            ssize_t m = io_platform::splice_move(p.r, out, left);
            if (m > 0) {
              left -= static_cast<std::size_t>(m);
            } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
              if (!co_await wait_writable(to)) { ok = false; break; }
            } else {
              ok = false;
              break;
            }
          }
          pool.release(p, left == 0);
          r = ok ? outcome::moved : outcome::error;
          turn += static_cast<std::size_t>(n);
          // A short read almost always means the socket is drained: wait
          // (Asio re-arms epoll with EPOLL_CTL_MOD, which reports data that
          // is already there) instead of paying for a splice that says EAGAIN.
          if (ok && static_cast<std::size_t>(n) < kChunk / 2) r = outcome::again;
        }
      } else {
        if (!buf) buf.reset(new char[kCopyBuffer]);
        ssize_t n = ::recv(in, buf.get(), kCopyBuffer, 0);
        if (n < 0) {
          r = (errno == EAGAIN || errno == EINTR) ? outcome::again : outcome::error;
        } else if (n == 0) {
          r = outcome::eof;
        } else {
          std::size_t off = 0;
          r = outcome::moved;
          turn += static_cast<std::size_t>(n);
          while (off < static_cast<std::size_t>(n)) {
            int out = to.native_handle();
            if (out < 0) { r = outcome::error; break; }
            ssize_t m = io_platform::send_nosigpipe(out, buf.get() + off, static_cast<std::size_t>(n) - off, 0);
            if (m > 0) {
              off += static_cast<std::size_t>(m);
            } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
              if (!co_await wait_writable(to)) { r = outcome::error; break; }
            } else {
              r = outcome::error;
              break;
            }
          }
        }
      }
      if (r == outcome::moved) continue;
      if (r == outcome::again) break;
      if (r == outcome::eof) {
        // Half-close: pass the FIN on and keep the other direction going.
        std::error_code ec;
        to.shutdown(asio::socket_base::shutdown_send, ec);
        co_return;
      }
      c->close_all();
      co_return;
    }
  }
}

} // namespace

template <class From, class To>
asio::awaitable<bool> splice_exact(connection& c, From& from, To& to, std::uint64_t n, bool* to_failed) {
  auto fail_to = [&] {
    if (to_failed) *to_failed = true;
    return false;
  };
  auto& pool = c.state.pipes;
  bool use_splice = true;
  std::unique_ptr<char[]> buf;
  std::size_t turn = 0;
  while (n > 0) {
    if (turn >= kTurnBytes) { // a long body lets the other connections run too
      co_await asio::post(asio::use_awaitable);
      turn = 0;
    }
    const int in = from.native_handle();
    if (in < 0) co_return false;
    if (to.native_handle() < 0) co_return fail_to();
    c.activity = true;
    std::size_t got = 0;
    if (use_splice) {
      auto p = pool.acquire();
      if (!p) {
        use_splice = false;
        continue;
      }
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(n, kChunk));
      ssize_t r = io_platform::splice_move(in, p.w, want);
      if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
        pool.release(p, true);
        use_splice = false;
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        pool.release(p, true);
        auto [ec] = co_await from.async_wait(asio::socket_base::wait_read, use_tuple);
        if (ec) co_return false;
        continue;
      }
      if (r <= 0) {
        pool.release(p, true);
        co_return false; // an error, or the sender ended inside the body
      }
      std::size_t left = static_cast<std::size_t>(r);
      while (left > 0) {
        const int out = to.native_handle();
        if (out < 0) break;
        ssize_t m = io_platform::splice_move(p.r, out, left);
        if (m > 0) {
          left -= static_cast<std::size_t>(m);
        } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
          if (!co_await wait_writable(to)) break;
        } else {
          break;
        }
      }
      pool.release(p, left == 0);
      if (left != 0) co_return fail_to();
      got = static_cast<std::size_t>(r);
    } else {
      if (!buf) buf.reset(new char[kCopyBuffer]);
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(n, kCopyBuffer));
      ssize_t r = ::recv(in, buf.get(), want, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        auto [ec] = co_await from.async_wait(asio::socket_base::wait_read, use_tuple);
        if (ec) co_return false;
        continue;
      }
      if (r <= 0) co_return false;
      std::size_t off = 0;
      while (off < static_cast<std::size_t>(r)) {
        const int out = to.native_handle();
        if (out < 0) co_return fail_to();
        ssize_t m = io_platform::send_nosigpipe(out, buf.get() + off, static_cast<std::size_t>(r) - off, 0);
        if (m > 0) {
          off += static_cast<std::size_t>(m);
        } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
          const bool writable = co_await wait_writable(to);
          if (!writable) co_return fail_to();
        } else {
          co_return fail_to();
        }
      }
      got = static_cast<std::size_t>(r);
    }
    n -= got;
    turn += got;
  }
  co_return true;
}

template asio::awaitable<bool> splice_exact(connection&, client_socket&, asio::ip::tcp::socket&, std::uint64_t, bool*);
template asio::awaitable<bool> splice_exact(connection&, asio::ip::tcp::socket&, client_socket&, std::uint64_t, bool*);

void start_relay(const std::shared_ptr<connection>& c) {
  c->ph = phase::relaying;
  // Both sockets are already in non-blocking mode: Asio switches a socket to
  // it on its first asynchronous operation (the request read, the connect),
  // and splice/recv/send below rely on that.
  asio::co_spawn(c->client.get_executor(), pump(c, c->client, c->upstream), log_completion{"relay up"});
  asio::co_spawn(c->client.get_executor(), pump(c, c->upstream, c->client), log_completion{"relay down"});
}

void start_relay_down(const std::shared_ptr<connection>& c) {
  c->ph = phase::relaying;
  asio::co_spawn(c->client.get_executor(), pump(c, c->upstream, c->client), log_completion{"relay down"});
}

asio::awaitable<void> relay_up(std::shared_ptr<connection> c) {
  co_await pump(c, c->client, c->upstream);
}

} // namespace egressd
