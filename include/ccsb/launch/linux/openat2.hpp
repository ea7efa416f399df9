// ccsb/launch/linux/openat2.hpp — openat2(2) with RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS: the kernel refuses (ELOOP) a symlink anywhere on the
// way, in one call (L8, rule 6). Linux-only (5.6+): included only where
// !CCSB_LAUNCH_MACOS (ccsb/sys/platform.hpp); the macOS equivalent is the
// per-component walk in ccsb/launch/safe_path.hpp.
#pragma once

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace ccsb::launch {

// openat2(dirfd, path, how) — glibc 2.36 has no wrapper.
inline int openat2_nofollow(int dirfd, const std::string& path, int flags, mode_t mode = 0) noexcept {
  open_how how{};
  how.flags = static_cast<__u64>(flags) | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long r;
  do r = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
  while (r < 0 && errno == EINTR);
  return static_cast<int>(r);
}

} // namespace ccsb::launch
