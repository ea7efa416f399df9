// egressd/io_platform_linux.cpp — the relay's zero-copy calls on Linux
// (io_platform.hpp, N1): pooled pipes and splice(2), send with MSG_NOSIGNAL.
// Built instead of io_platform_macos.cpp on Linux (egressd/CMakeLists.txt);
// each of these calls is on the seccomp allowlist (seccomp_allowlist.hpp).
#include "io_platform.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace egressd::io_platform {

namespace {
constexpr int kPipeSize = 1 << 20;
}

int relay_pipe(int fds[2]) noexcept {
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
  // A bigger pipe means fewer splice calls per megabyte; it only holds page
  // references while data is in flight, and idle pipes are few (pooled).
  ::fcntl(fds[1], F_SETPIPE_SZ, kPipeSize);
  return 0;
}

ssize_t splice_move(int from, int to, std::size_t n) noexcept {
  return ::splice(from, nullptr, to, nullptr, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

ssize_t send_nosigpipe(int fd, const void* data, std::size_t n, int flags) noexcept {
  return ::send(fd, data, n, flags | MSG_NOSIGNAL);
}

} // namespace egressd::io_platform
