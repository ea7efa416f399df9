#include "connection.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <sys/socket.h>

namespace egressd {

connection::connection(server_state& s, client_socket sock)
    : state(s), client(std::move(sock)), upstream(s.io) {
  next = state.head;
  if (next) next->prev = this;
  state.head = this;
  ++state.live;
}

connection::~connection() {
  state.early_bytes -= early_.size();
  release_slot();
  end_lookup();
  if (prev) prev->next = next;
  else state.head = next;
  if (next) next->prev = prev;
  --state.live;
  if (state.draining && state.live == 0 && state.on_idle) state.on_idle();
}

bool connection::acquire_slot() {
  if (holds_slot) return true;
  if (state.tunnels >= state.cfg.opts.max_tunnels) return false;
  ++state.tunnels;
  holds_slot = true;
  return true;
}

void connection::release_slot() {
  if (!holds_slot) return;
  --state.tunnels;
  holds_slot = false;
}

void connection::close_upstream() {
  std::error_code ec;
  upstream.close(ec);
}

void connection::close_all() {
  std::error_code ec;
  client.close(ec);
  upstream.close(ec);
}

void connection::watch_client() {
  if (watching_ || !client.is_open()) return;
  watching_ = true;
  ++watch_gen_;
  arm_watch();
}

void connection::stop_watching() {
  if (!watching_) return;
  watching_ = false;
  ++watch_gen_;
  std::error_code ec;
  client.cancel(ec); // the pending wait completes with operation_aborted
}

void connection::end_lookup() {
  resolving_ = false;
  if (!abandoned_lookup_) return;
  abandoned_lookup_ = false;
  --state.abandoned_lookups;
}

void connection::arm_watch() {
  client.async_wait(asio::socket_base::wait_read,
                    [self = shared_from_this(), gen = watch_gen_](std::error_code ec) {
                      if (ec || !self->watching_ || self->watch_gen_ != gen) return;
                      self->on_client_readable();
                    });
}

void connection::on_client_readable() {
  const int fd = client.native_handle();
  if (fd < 0) {
    watching_ = false;
    return;
  }
  char chunk[4096];
  for (;;) {
    std::size_t room = std::min(sizeof chunk, kMaxEarly - early_.size());
    room = std::min(room, server_state::kMaxEarlyTotal - state.early_bytes);
    // With no room left, one byte is peeked so that a hang-up is still seen.
    ssize_t n = ::recv(fd, chunk, room ? room : 1, MSG_DONTWAIT | (room ? 0 : MSG_PEEK));
    if (n > 0 && room == 0) break; // it keeps sending: not gone, the rest waits in the socket
    if (n > 0) {
      early_.append(chunk, static_cast<std::size_t>(n));
      state.early_bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      arm_watch(); // still there: wait for more
      return;
    }
    watching_ = false;
    if (n == 0) {
      // EOF: a half-close, not a hang-up (a client may shut its write side
      // once its request is out). The request goes on; the EOF stays in the
      // socket for whoever reads the client next. During the lookup the slot
      // still goes back now (within the abandoned-lookup budget) and dial()
      // takes one again when the lookup ends.
      if (resolving_ && holds_slot && state.abandoned_lookups < state.cfg.opts.max_tunnels) {
        ++state.abandoned_lookups;
        abandoned_lookup_ = true;
        release_slot();
      }
      return;
    }
    // A reset or another error: the client is gone. Its slot goes back now
    // (unless too many lookups are abandoned already); dial() sees the
    // closed client when its lookup or connect returns.
    if (!resolving_) {
      release_slot();
    } else if (holds_slot && state.abandoned_lookups < state.cfg.opts.max_tunnels) {
      ++state.abandoned_lookups;
      abandoned_lookup_ = true;
      release_slot();
    }
    close_all();
    return;
  }
  // It keeps sending: it is not gone, and the rest waits in the socket.
  watching_ = false;
}

void connection::on_tick(clock::time_point now) {
  if (ph == phase::relaying) {
    if (state.cfg.opts.idle_timeout_ms == 0) return;
    if (activity) {
      activity = false;
      deadline = now + std::chrono::milliseconds(state.cfg.opts.idle_timeout_ms);
      return;
    }
  }
  if (now < deadline) return;
  deadline = clock::time_point::max();
  timed_out = true;
  if (ph == phase::dialing) close_upstream(); // connect timeout: the client gets an answer
  else close_all();
}

void log_completion::operator()(std::exception_ptr e) const {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "egressd: %s: %s\n", what, x.what());
  } catch (...) {
    std::fprintf(stderr, "egressd: %s: unknown exception\n", what);
  }
}

} // namespace egressd
