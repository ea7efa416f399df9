// egressd/io_platform_linux.cpp — egressd's Linux-only I/O calls
// (io_platform.hpp, N1, L3): the relay's pooled pipes and splice(2), send
// with MSG_NOSIGNAL, the proxy channel's MSG_CMSG_CLOEXEC and SO_PROTOCOL.
// Built instead of io_platform_macos.cpp on Linux (egressd/CMakeLists.txt);
// each of these calls is on the seccomp allowlist (seccomp_allowlist.hpp).
#include "io_platform.hpp"

#include <fcntl.h>
#include <netinet/in.h>
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

ssize_t recvmsg_cloexec(int fd, msghdr* m, int flags) noexcept {
  return ::recvmsg(fd, m, flags | MSG_CMSG_CLOEXEC);
}

bool stream_is_tcp(int fd) noexcept {
  int v = 0;
  socklen_t len = sizeof v;
  return ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) == 0 && v == IPPROTO_TCP;
}

} // namespace egressd::io_platform
