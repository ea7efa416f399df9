// egressd/relay.hpp — bidirectional byte relay with half-close (N1).
//
// Each direction is one small coroutine that waits for readability without
// holding a buffer, then, on Linux, moves bytes with splice(2) through a pipe
// borrowed from a shared pool (returned as soon as it is empty), so an idle
// tunnel costs no buffer memory and no pipe descriptors. Where splice is not
// possible it falls back to copying through a 16 KiB buffer allocated on
// first use: on Linux when the kernel refuses the pair (EINVAL, ENOSYS) or
// no pipe can be made, on macOS always (no splice: the pool never gets a
// pipe). The calls that differ are behind io_platform.hpp. EOF on one side
// becomes shutdown(SHUT_WR) on the other; an error closes both.
#pragma once

#include "net.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace egressd {

class pipe_pool {
public:
  struct pipe_pair {
    int r{-1};
    int w{-1};
    explicit operator bool() const noexcept { return r >= 0; }
  };
  pipe_pool() = default;
  ~pipe_pool();
  pipe_pool(const pipe_pool&) = delete;
  pipe_pool& operator=(const pipe_pool&) = delete;

  pipe_pair acquire();                  // {-1,-1} when no pipe can be made
  void release(pipe_pair p, bool empty); // a non-empty pipe is closed
  void clear();                          // closes the idle pipes (descriptors are short)

private:
  std::vector<pipe_pair> free_;
};

class connection;

// Starts both directions; each holds the connection until it finishes, so
// the caller's coroutine frame can end right away.
void start_relay(const std::shared_ptr<connection>& c);
// The two halves, for a tunnel whose first client bytes are inspected
// before they go upstream (tunnel.hpp): start_relay_down spawns the
// upstream -> client direction, relay_up is the client -> upstream one.
void start_relay_down(const std::shared_ptr<connection>& c);
asio::awaitable<void> relay_up(std::shared_ptr<connection> c);

// Moves exactly `n` bytes from `from` to `to` (a body whose length the
// framing already fixed): splice(2) through a pooled pipe, each splice
// asking for at most what is left, so nothing past the n bytes is ever read
// (the next request or response stays in the socket for the parser); a copy
// through the 16 KiB buffer, each read asking for at most what is left,
// where splice is not possible (always on macOS). false when a side
// fails or `from` ends before n bytes; `to_failed`, when given, is set when
// it was `to` that failed (an upstream that stopped reading and closed: its
// early response may be waiting, RFC 9112 9.5). Instantiated for both
// directions (client_socket <-> asio::ip::tcp::socket).
template <class From, class To>
asio::awaitable<bool> splice_exact(connection& c, From& from, To& to, std::uint64_t n, bool* to_failed = nullptr);

} // namespace egressd
