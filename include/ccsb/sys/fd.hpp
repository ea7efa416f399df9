// ccsb/sys/fd.hpp — descriptor ownership and the close-on-exec sweep, shared
// by the launcher (ccsb/launch/), the supervisor (init/) and egressd: the
// system layer all three stand on, so none of them stands on another.
//
//   unique_fd                 a descriptor that closes itself
//   make_pipe()               a pipe, both ends close-on-exec
//   mark_cloexec_from(low)    every descriptor >= low close-on-exec
//   write_all(fd, data)       all of data, waiting out EAGAIN
//   sys_error(call)           an io_error naming the call and errno
//
// mark_cloexec_from() runs in a child between fork and execve, where a
// multithreaded parent (an embedder's server, ccsbd) may have left malloc's
// lock held by a thread that does not exist in the child: it allocates
// nothing and calls only async-signal-safe functions. Its chain (nsjail's
// containMakeFdsCOE habit): close_range(low, ~0, CLOSE_RANGE_CLOEXEC)
// (Linux 5.11), else the numbers in /proc/self/fd read with getdents64 into
// a buffer on the stack (opendir would allocate), else false; on macOS every
// descriptor below the limit.
#pragma once

#include "ccsb/result.hpp"
#include "ccsb/sys/platform.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#if !CCSB_LAUNCH_MACOS
#include <linux/close_range.h>
#include <sys/syscall.h>
#endif

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb::sys {

inline error sys_error(const std::string& call) {
  return make_error(errc::io_error, "", call + ": " + std::strerror(errno));
}

// A file descriptor that closes itself.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_{-1};
};

struct pipe_pair {
  unique_fd read;
  unique_fd write;
};

inline result<pipe_pair> make_pipe() {
  int p[2];
  if (this_platform::pipe_cloexec(p) != 0) return sys_error("pipe2(O_CLOEXEC)");
  return pipe_pair{unique_fd(p[0]), unique_fd(p[1])};
}

// Writes all of `data`; false on error (EPIPE included).
inline bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    if (w <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

namespace detail {

#if !CCSB_LAUNCH_MACOS
// The fallback of mark_cloexec_from: the numbers listed in /proc/self/fd,
// read with getdents64 into a buffer on the stack.
inline bool mark_cloexec_listed(unsigned low) noexcept {
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(dir);
      errno = e;
      return n == 0;
    }
    for (long off = 0; off < n;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type
      // (1), then the NUL-terminated name.
      unsigned short reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      off += reclen;
      if (*name < '0' || *name > '9') continue;
      unsigned fd = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + static_cast<unsigned>(*c - '0');
      if (fd >= low && static_cast<int>(fd) != dir) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    }
  }
}
#endif

} // namespace detail

// Every descriptor numbered `low` or more close-on-exec. True when done;
// false (errno set) when neither close_range nor /proc/self/fd was there.
// Allocation-free and async-signal-safe (see the header comment).
inline bool mark_cloexec_from(unsigned low) noexcept {
#if CCSB_LAUNCH_MACOS
  long max = ::sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (long fd = low; fd < max; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return true;
#else
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, low, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
#endif
  return detail::mark_cloexec_listed(low);
#endif
}

} // namespace ccsb::sys
