// ccsbd/listener.hpp — the daemon's Unix socket (S8): created 0600, peers
// of another uid refused.
//
// open_listener(path) is a checklist:
//   1. the path fits sun_path, is absolute, and its directory exists;
//   2. something already at the path: a socket a live daemon answers on is
//      refused ("another ccsbd listens there"); a socket nobody answers on
//      (a daemon that was SIGKILLed) is removed; anything else is refused;
//   3. socket(AF_UNIX, SOCK_STREAM), bind with umask 0177 around it, so the
//      socket is never reachable by anyone else, not even for an instant;
//   4. chmod 0600 and lstat: a socket, owned by the daemon's euid, mode 0600,
//      or the start fails;
//   5. the socket's directory: owned by the daemon's euid (or root) and
//      writable by nobody else, or the start fails (another user could
//      replace the socket); its identity and its ancestors' (node_chain)
//      are kept: a launch whose binds reach them is refused (server.hpp);
//   6. listen.
// peer_uid(fd) reads SO_PEERCRED, getpeereid on macOS (ccsb/sys/platform.hpp:
// the credentials of the connecting process
// at connect() time: they cannot be changed afterwards by the peer).
#pragma once

#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/protocol/daemon.hpp"
#include "ccsb/result.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ccsbd {

using ccsb::errc;
using ccsb::make_error;
using ccsb::result;
using ccsb::launch::unique_fd;

// The identity of a path (following symlinks) and of each of its ancestors
// up to "/" (ccsb/protocol/daemon.hpp bind_exposure). A path that does not
// exist starts at its deepest existing ancestor, with exists false.
struct node_chain {
  std::vector<ccsb::protocol::daemon::node_id> ids;
  bool exists{false};
};

inline node_chain chain_of(std::string path) {
  node_chain c;
  c.exists = true;
  char buf[PATH_MAX];
  while (::realpath(path.c_str(), buf) == nullptr) {
    c.exists = false;
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos || path == "/") return c;
    path = slash == 0 ? std::string("/") : path.substr(0, slash);
  }
  std::string p = buf;
  for (;;) {
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return node_chain{}; // a chain with a hole is refused by bind_exposure
    c.ids.push_back({static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)});
    if (p == "/") return c;
    const auto slash = p.find_last_of('/');
    p = slash == 0 ? std::string("/") : p.substr(0, slash);
  }
}

struct listener {
  unique_fd fd;
  std::string path;
  std::string dir;        // the socket's directory, resolved
  node_chain dir_chain;   // its identity, then its ancestors'
  dev_t dev{0};
  ino_t ino{0};

  // Removes the socket file if it is still the one this daemon bound.
  void unlink_own() const {
    struct stat st{};
    if (!path.empty() && ::lstat(path.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino) ::unlink(path.c_str());
  }
};

inline result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.front() != '/')
    return make_error(errc::invalid_argument, "--listen", "unix:PATH needs an absolute path, got \"" + path + "\"");
  if (path.size() >= sizeof a.sun_path)
    return make_error(errc::invalid_argument, "--listen",
                      "socket path is " + std::to_string(path.size()) + " bytes; at most " +
                          std::to_string(sizeof a.sun_path - 1));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

inline result<listener> open_listener(const std::string& path) {
  auto addr = unix_address(path);
  if (!addr) return std::move(addr).err();
  const std::string dir = path.substr(0, path.rfind('/') == 0 ? 1 : path.rfind('/'));
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(errc::io_error, "--listen", "the socket's directory " + dir + " does not exist");
  if ((st.st_uid != ::geteuid() && st.st_uid != 0) || (st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(errc::invalid_argument, "--listen",
                      "the socket's directory " + dir + " (uid " + std::to_string(st.st_uid) + ", mode " + mode +
                          ") is writable by another user, who could replace the socket; use a directory of uid " +
                          std::to_string(::geteuid()) + " that only it can write (S8)");
  }
  listener l;
  l.dir_chain = chain_of(dir);
  if (!l.dir_chain.exists || l.dir_chain.ids.empty())
    return make_error(errc::io_error, "--listen", "cannot name the socket's directory " + dir + " and its ancestors");
  char resolved[PATH_MAX];
  l.dir = ::realpath(dir.c_str(), resolved) ? std::string(resolved) : dir;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return make_error(errc::io_error, "--listen", path + " exists and is not a socket");
    unique_fd probe(ccsb::sys::this_platform::socket_cloexec(AF_UNIX, SOCK_STREAM, false));
    if (!probe) return ccsb::launch::sys_error("socket(AF_UNIX)");
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0)
      return make_error(errc::io_error, "--listen", "another ccsbd listens on " + path);
    if (errno != ECONNREFUSED) return ccsb::launch::sys_error("connect(" + path + ") to check for a live daemon");
    if (::unlink(path.c_str()) != 0) return ccsb::launch::sys_error("unlink(" + path + ") (a stale socket)");
  }
  l.path = path;
  l.fd.reset(ccsb::sys::this_platform::socket_cloexec(AF_UNIX, SOCK_STREAM, true));
  if (!l.fd) return ccsb::launch::sys_error("socket(AF_UNIX)");
  const mode_t old = ::umask(0177);
  const int b = ::bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  const int bind_errno = errno;
  ::umask(old);
  if (b != 0) {
    errno = bind_errno;
    return ccsb::launch::sys_error("bind(" + path + ")");
  }
  if (::chmod(path.c_str(), 0600) != 0) return ccsb::launch::sys_error("chmod(" + path + ", 0600)");
  if (::lstat(path.c_str(), &st) != 0) return ccsb::launch::sys_error("lstat(" + path + ")");
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0600)
    return make_error(errc::io_error, "--listen",
                      path + " is not a socket of uid " + std::to_string(::geteuid()) + " with mode 0600 after bind");
  l.dev = st.st_dev;
  l.ino = st.st_ino;
  if (::listen(l.fd.get(), 64) != 0) return ccsb::launch::sys_error("listen(" + path + ")");
  return l;
}

// The uid of the process that connected (SO_PEERCRED; getpeereid on macOS).
inline std::optional<uid_t> peer_uid(int fd) { return ccsb::sys::this_platform::peer_uid(fd); }

} // namespace ccsbd
