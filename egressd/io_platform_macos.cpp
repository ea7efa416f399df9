// egressd/io_platform_macos.cpp — egressd's I/O calls on macOS
// (io_platform.hpp, N1, L3): no zero-copy path, so the relay copies every
// byte through its 16 KiB buffer (relay.cpp); send is plain send(2), SIGPIPE
// being ignored process-wide (io_platform.hpp says where); received
// descriptors are made close-on-exec after recvmsg(2); a stream socket of
// AF_INET or AF_INET6 is taken as TCP. Plain POSIX: built instead of
// io_platform_linux.cpp on macOS (egressd/CMakeLists.txt) and compiled on
// Linux CI with the Linux-only calls poisoned
// (tests/macos/poisoned_headers.py); no Mac has built or run it.
#include "io_platform.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

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

ssize_t recvmsg_cloexec(int fd, msghdr* m, int flags) noexcept {
  const ssize_t n = ::recvmsg(fd, m, flags);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      ::fcntl(got, F_SETFD, FD_CLOEXEC);
    }
  }
  return n;
}

bool stream_is_tcp(int fd) noexcept {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

} // namespace egressd::io_platform
