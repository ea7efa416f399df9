// egressd/relay.hpp — bidirectional byte relay with half-close (N1).
//
// Each direction is one small coroutine that waits for readability without
// holding a buffer, then moves bytes with splice(2) through a pipe borrowed
// from a shared pool (returned as soon as it is empty), so an idle tunnel
// costs no buffer memory and no pipe descriptors. When splice is not
// possible it falls back to a lazily allocated copy buffer. EOF on one side
// becomes shutdown(SHUT_WR) on the other; an error closes both.
#pragma once

#include "net.hpp"

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

} // namespace egressd
