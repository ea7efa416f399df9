// egressd/connection.hpp — one client connection and the state shared by
// all of them (the connection_manager of the Asio HTTP server example).
//
// A connection owns the client socket and at most one upstream socket. All
// connections sit in one intrusive list so that one sweeper timer can
// enforce every deadline (request-head, connect, idle) without a timer per
// connection, and so that shutdown can close them.
#pragma once

#include "config.hpp"
#include "events.hpp"
#include "relay.hpp"
#include "resolver.hpp"

#include "net.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace egressd {

using client_socket = asio::generic::stream_protocol::socket;
using clock = std::chrono::steady_clock;

class connection;

struct server_state {
  server_state(asio::io_context& io_, const settings& cfg_, event_sink& ev, resolver& dns_)
      : io(io_), cfg(cfg_), events(ev), dns(dns_) {}
  asio::io_context& io;
  const settings& cfg;
  event_sink& events;
  resolver& dns;
  pipe_pool pipes;
  std::uint32_t tunnels{0}; // connections holding an upstream slot
  // Lookups still running for clients that hung up (their slots went back
  // early); at most max_tunnels, so the tunnel limit still bounds lookups.
  std::uint32_t abandoned_lookups{0};
  // Early bytes held for all pending dials together (connection::early_),
  // at most kMaxEarlyTotal: the memory of pending dials stays bounded
  // whatever --max-tunnels allows (L7).
  static constexpr std::size_t kMaxEarlyTotal = std::size_t{4} << 20;
  std::size_t early_bytes{0};
  bool draining{false};
  std::function<void()> on_idle; // called when draining and the last connection goes

  // The intrusive list of live connections.
  connection* head{nullptr};
  std::size_t live{0};
};

enum class phase : std::uint8_t { head, dialing, relaying };

class connection : public std::enable_shared_from_this<connection> {
public:
  connection(server_state& s, client_socket sock);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  server_state& state;
  client_socket client;
  asio::ip::tcp::socket upstream;
  clock::time_point deadline{clock::time_point::max()};
  phase ph{phase::head};
  bool activity{false};  // set by the relay, cleared by the sweeper
  bool timed_out{false}; // the sweeper fired the deadline
  bool holds_slot{false};

  void set_deadline_ms(std::uint32_t ms) {
    deadline = ms ? clock::now() + std::chrono::milliseconds(ms) : clock::time_point::max();
    timed_out = false;
  }
  bool acquire_slot();
  void release_slot();
  void close_upstream();
  void close_all();

  // While dial() waits for DNS or a connect nothing reads from the client,
  // so a client that hangs up would keep its tunnel slot until the lookup or
  // the connect ends. watch_client() waits for the client meanwhile: bytes it
  // sends are kept for the upstream (at most kMaxEarly, and all pending
  // dials together at most server_state::kMaxEarlyTotal: past that the rest
  // waits in the socket; take_early() hands them over), and an error (a reset) gives the slot back and closes the
  // connection at once. EOF is a half-close, not a hang-up: the request
  // goes on (issue 30 item 4); during the lookup its slot goes back all the
  // same and dial() takes one again once the lookup has answered.
  // stop_watching() ends the watch.
  static constexpr std::size_t kMaxEarly = 65536;
  void watch_client();
  void stop_watching();
  // Around the DNS lookup: a client that hangs up (or half-closes) during it
  // gives its slot back only while fewer than max_tunnels lookups are
  // abandoned already (past that it keeps the slot until its lookup ends,
  // as a connected client would).
  void begin_lookup() { resolving_ = true; }
  void end_lookup();
  std::string take_early() {
    state.early_bytes -= early_.size();
    return std::exchange(early_, std::string());
  }
  // The sweeper: what to do when `now` is past the deadline.
  void on_tick(clock::time_point now);

  connection* prev{nullptr};
  connection* next{nullptr};

private:
  void arm_watch();
  void on_client_readable();
  std::string early_;
  std::uint32_t watch_gen_{0}; // a handler from an earlier watch does nothing
  bool watching_{false};
  bool resolving_{false};
  bool abandoned_lookup_{false}; // counted in server_state::abandoned_lookups
};

// The completion handler for co_spawn: never swallows an error silently.
struct log_completion {
  const char* what;
  void operator()(std::exception_ptr e) const;
};

} // namespace egressd
