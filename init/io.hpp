// init/io.hpp — the few descriptor helpers ccsb-init's modules share.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace ccsb::init {

inline std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// All of [p, p+n), retrying EINTR and waiting out EAGAIN; false when the
// descriptor fails or closes.
inline bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, -1);
      continue;
    }
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Exactly n bytes; false on EOF or an error first.
inline bool read_exact(int fd, unsigned char* p, std::size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

} // namespace ccsb::init
