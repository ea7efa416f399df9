// egressd/io_platform_macos.cpp — the relay's calls on macOS (io_platform.hpp,
// N1): no zero-copy path, so the relay copies every byte through its 16 KiB
// buffer (relay.cpp); send is plain send(2), SIGPIPE being ignored
// process-wide (io_platform.hpp says where). Plain POSIX: built instead of
// io_platform_linux.cpp on macOS (egressd/CMakeLists.txt) and compiled on
// Linux CI with the Linux-only calls poisoned
// (tests/macos/poisoned_headers.py); no Mac has built or run it.
#include "io_platform.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace egressd::io_platform {

int relay_pipe(int[2]) noexcept {
  errno = ENOSYS;
  return -1;
}

ssize_t splice_move(int, int, std::size_t) noexcept {
  errno = ENOSYS;
  return -1;
}

ssize_t send_nosigpipe(int fd, const void* data, std::size_t n, int flags) noexcept {
  return ::send(fd, data, n, flags);
}

} // namespace egressd::io_platform
