#include "connection.hpp"

#include <cstdio>
#include <exception>

namespace egressd {

connection::connection(server_state& s, client_socket sock)
    : state(s), client(std::move(sock)), upstream(s.io) {
  next = state.head;
  if (next) next->prev = this;
  state.head = this;
  ++state.live;
}

connection::~connection() {
  release_slot();
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
