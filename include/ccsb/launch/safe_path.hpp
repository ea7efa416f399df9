// ccsb/launch/safe_path.hpp — host file operations that never follow a link
// (launcher only; does I/O). L8 / rule 6: anything the launcher creates,
// writes or removes after a sandbox could have touched the file system is
// done through these.
//
// Every path the policy hands the launcher is absolute and resolved
// (policy.hpp resolves binds, HOME and denied paths), so a symlink found on
// the way to one of them was planted: open_dir_nofollow() fails (ELOOP)
// instead of following it. The entry itself is then handled relative to
// that directory descriptor (fstatat/unlinkat/openat with O_NOFOLLOW), so a
// rename of a parent after the check cannot redirect the operation.
//
// How the directory is opened is a platform choice (platform.hpp):
//   Linux   openat2 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, O_PATH: one
//           call, the kernel checks every component (linux/openat2.hpp);
//   macOS   open_dir_walk_nofollow(): from "/", one openat(O_NOFOLLOW |
//           O_DIRECTORY) per component, each result fstat-checked to be a
//           directory; each step is relative to the descriptor of the one
//           before, so no component is ever looked up by name twice. Plain
//           POSIX: the Linux build compiles and tests it too. It opens
//           directories O_RDONLY (macOS has no O_PATH), so a directory on
//           the way that its owner made unreadable (search without read)
//           fails with EACCES where Linux's O_PATH would pass.
#pragma once

#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/process.hpp"
#if !CCSB_LAUNCH_MACOS
#include "ccsb/launch/linux/openat2.hpp"
#endif

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb::launch {

// The directory `path` (absolute), opened O_RDONLY | O_DIRECTORY without
// following any symlink: component by component from "/" with openat(
// O_NOFOLLOW | O_DIRECTORY), each checked (fstat) to be a directory. A
// symlink on the way: ELOOP; "." and empty components are skipped; ".."
// (never in a resolved path) is refused with EINVAL; a component that is not
// a directory: ENOTDIR. The descriptor, or -1 (errno set).
inline int open_dir_walk_nofollow(std::string_view path) noexcept {
  if (path.empty() || path.front() != '/') {
    errno = EINVAL;
    return -1;
  }
  unique_fd cur(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur) return -1;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    const std::string name(path.substr(i, end - i));
    i = end + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      errno = EINVAL;
      return -1;
    }
    unique_fd next(::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      // O_NOFOLLOW | O_DIRECTORY on a symlink: ELOOP on both systems, but
      // say so whatever the errno, for one message on every platform.
      const int e = errno;
      struct stat st{};
      errno = ::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ? ELOOP : e;
      return -1;
    }
    struct stat st{};
    if (::fstat(next.get(), &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
      errno = ENOTDIR;
      return -1;
    }
    cur = std::move(next);
  }
  return cur.release();
}

// This platform's no-symlink open of a directory (see the top of the file),
// and the words its error messages name it by.
inline int open_dir_nofollow(const std::string& dir) noexcept {
#if CCSB_LAUNCH_MACOS
  return open_dir_walk_nofollow(dir);
#else
  return openat2_nofollow(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
#endif
}
#if CCSB_LAUNCH_MACOS
inline constexpr std::string_view kOpenDirNofollow = "openat(O_NOFOLLOW) per component ";
inline constexpr int kDirOpenFlags = O_RDONLY | O_DIRECTORY;
#else
inline constexpr std::string_view kOpenDirNofollow = "openat2(RESOLVE_NO_SYMLINKS) ";
inline constexpr int kDirOpenFlags = O_PATH | O_DIRECTORY;
#endif

// The parent directory of an absolute path, opened (O_PATH on Linux) without
// following any symlink, and the last component. {fd < 0, ""} on error (errno set).
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
  unique_fd fd(strict ? open_dir_nofollow(dir) : ::open(dir.c_str(), kDirOpenFlags | O_CLOEXEC));
  if (!fd) return sys_error((strict ? std::string(kOpenDirNofollow) : std::string("open ")) + dir);
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
