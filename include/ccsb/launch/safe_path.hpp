// ccsb/launch/safe_path.hpp — host file operations that never follow a link
// (launcher only; does I/O). L8 / rule 6: anything the launcher creates,
// writes or removes after a sandbox could have touched the file system is
// done through these.
//
// Every path the policy hands the launcher is absolute and resolved
// (policy.hpp resolves binds, HOME and denied paths), so a symlink found on
// the way to one of them was planted: open_dir() walks with openat2
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS and fails (ELOOP) instead of
// following it. The entry itself is then handled relative to that directory
// descriptor (fstatat/unlinkat/openat with O_NOFOLLOW), so a rename of a
// parent after the check cannot redirect the operation.
#pragma once

#include "ccsb/launch/process.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

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

// The parent directory of an absolute path, opened O_PATH without following
// any symlink, and the last component. {fd < 0, ""} on error (errno set).
struct parent_handle {
  unique_fd dir;
  std::string name;
};

inline std::pair<std::string, std::string> split_parent(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// strict: no symlink anywhere on the way (paths inside a sandbox's writable
// area); otherwise the directory part may follow links (a path the user
// named outside every writable area, opened before any command ran).
inline result<parent_handle> open_parent(const std::string& path, bool strict = true) {
  if (path.empty() || path.front() != '/' || path == "/")
    return make_error(errc::invalid_argument, path, "expected an absolute path below /");
  auto [dir, name] = split_parent(path);
  if (name.empty() || name == "." || name == "..")
    return make_error(errc::invalid_argument, path, "expected a normal last component");
  unique_fd fd(strict ? openat2_nofollow(AT_FDCWD, dir, O_PATH | O_DIRECTORY)
                      : ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error(std::string(strict ? "openat2(RESOLVE_NO_SYMLINKS) " : "open ") + dir);
  return parent_handle{std::move(fd), name};
}

// Opens (creating if needed) a regular file for writing at `path` without
// following a final symlink; an existing entry must be a regular file with
// one link owned by this uid (a hard link to another file, a FIFO or a
// device is refused), and it is truncated only after those checks. `strict`
// as for open_parent. The caller writes only through the descriptor.
inline result<unique_fd> open_output_file(const std::string& path, const std::string& field, bool strict) {
  auto parent = open_parent(path, strict);
  if (!parent) return make_error(errc::io_error, field, parent.err().message);
  unique_fd dirfd(::openat(parent->dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd) return make_error(errc::io_error, field, "open " + split_parent(path).first + ": " + std::strerror(errno));
  int fd = ::openat(dirfd.get(), parent->name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    return make_error(errc::io_error, field,
                      "cannot open \"" + path + "\" without following a link: " + std::strerror(errno));
  unique_fd f(fd);
  struct stat st{};
  if (::fstat(f.get(), &st) != 0) return make_error(errc::io_error, field, "fstat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error(errc::invalid_argument, field, "\"" + path + "\" is not a regular file");
  if (st.st_nlink != 1)
    return make_error(errc::invalid_argument, field, "\"" + path + "\" has " + std::to_string(st.st_nlink) +
                                                        " hard links; refusing to write through one");
  if (st.st_uid != ::geteuid())
    return make_error(errc::invalid_argument, field, "\"" + path + "\" belongs to another user");
  if (::ftruncate(f.get(), 0) != 0) return make_error(errc::io_error, field, "ftruncate " + path + ": " + std::strerror(errno));
  int fl = ::fcntl(f.get(), F_GETFL);
  ::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK);
  return f;
}

} // namespace ccsb::launch
