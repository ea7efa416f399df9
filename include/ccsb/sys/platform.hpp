// ccsb/sys/platform.hpp — THE platform boundary of ccsb's launcher and of the
// programs that share its system layer (ccsb/sys/; B2, M1-M8, S7): every
// choice that differs between macOS and Linux is made here, once, and every
// system call that exists on only one of them is written here.
// Everything else in include/ccsb/launch is either Linux-only (bubblewrap,
// cgroups, openat2, the namespace probe: included only where
// !CCSB_LAUNCH_MACOS) or portable POSIX; tests/macos/include_graph.py and
// the macos_poisoned_headers check hold the macOS side to that.
//
// CCSB_LAUNCH_MACOS is 1 when compiling for macOS (__APPLE__), or when
// CCSB_LAUNCH_SIMULATE_MACOS is defined: a Linux build that makes every macOS
// CHOICE below (the Seatbelt driver, the SIGCHLD exit watch, no Linux-only
// launcher header where the macOS build avoids one) while the few
// Apple-only CALLS (the confstr name, getpeereid) get their Linux
// equivalents. Linux CI builds and runs ccsb-run that way (tests/macos), so
// what a Mac runs is, apart from those calls and the programs it drives
// (sandbox-exec, log), what Linux CI checks.
//
//   choice                        Linux (default)               macOS
//   native driver (native_driver) bwrap_driver.hpp              macos/seatbelt_driver.hpp
//   process exits (exit_watch)    pidfd per child               SIGCHLD self-pipe, then
//                                                               waitpid(pid, WNOHANG) per
//                                                               watched pid (never -1)
//   launcher signals              self-pipe (reactor.hpp)       the same
//   close-on-exec sweep (fd.hpp)  close_range, /proc/self/fd    every fd below the limit
//   die with the launcher         PR_SET_PDEATHSIG(SIGKILL)     none: destroy() kills
//                                                               (a SIGKILLed launcher
//                                                               leaves its children)
//   credential change             setresgid/setresuid           setgid/setuid
//   pipe / socket / accept        pipe2, SOCK_CLOEXEC, accept4  + fcntl(FD_CLOEXEC/O_NONBLOCK)
//   send without SIGPIPE          MSG_NOSIGNAL                  SO_NOSIGPIPE on the socket
//   peer uid of a Unix socket     SO_PEERCRED                   getpeereid
//   per-user temp dir             (none: Seatbelt unavailable)  confstr(_CS_DARWIN_USER_TEMP_DIR)
//   the running executable        readlink /proc/self/exe       _NSGetExecutablePath
//   host probe (B2)               linux/host_probe.hpp (user    macos/seatbelt_driver.hpp
//                                 namespaces, Landlock, bwrap)  seatbelt_probe_facts
//   no-symlink directory open     linux/openat2.hpp (openat2    safe_path.hpp walk: openat
//   (safe_path.hpp, L8)           RESOLVE_NO_SYMLINKS)          O_NOFOLLOW|O_DIRECTORY per
//                                                               component, fstat each
//   L7 limits                     limits.hpp (cgroups, rlimits) none (said at start-up)
#pragma once

#include "ccsb/result.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach-o/dyld.h> // _NSGetExecutablePath
#endif

#include <climits>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#if defined(__APPLE__) || defined(CCSB_LAUNCH_SIMULATE_MACOS)
#define CCSB_LAUNCH_MACOS 1
#else
#define CCSB_LAUNCH_MACOS 0
#endif

namespace ccsb::sys::this_platform {

enum class native_driver { bwrap, seatbelt };
enum class exit_watch { pidfd, sigchld };

#if CCSB_LAUNCH_MACOS
inline constexpr bool macos = true;
inline constexpr std::string_view name = "macos";
inline constexpr native_driver native = native_driver::seatbelt;
inline constexpr exit_watch exits = exit_watch::sigchld;
#else
inline constexpr bool macos = false;
inline constexpr std::string_view name = "linux";
inline constexpr native_driver native = native_driver::bwrap;
inline constexpr exit_watch exits = exit_watch::pidfd;
#endif
// True only in a real macOS build (not the Linux simulation).
#if defined(__APPLE__)
inline constexpr bool real_macos = true;
#else
inline constexpr bool real_macos = false;
#endif
#if defined(CCSB_LAUNCH_SIMULATE_MACOS)
inline constexpr bool simulated = true;
#else
inline constexpr bool simulated = false;
#endif

inline bool set_cloexec(int fd) noexcept { return ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0; }
inline bool set_nonblock(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// pipe(2) with both ends close-on-exec. 0 or -1 (errno).
inline int pipe_cloexec(int p[2]) noexcept {
#if defined(__APPLE__)
  if (::pipe(p) != 0) return -1;
  if (set_cloexec(p[0]) && set_cloexec(p[1])) return 0;
  int e = errno;
  ::close(p[0]);
  ::close(p[1]);
  errno = e;
  return -1;
#else
  return ::pipe2(p, O_CLOEXEC);
#endif
}

#if defined(__APPLE__)
// A new socket (or accepted connection) `fd` made close-on-exec, optionally
// non-blocking, with SO_NOSIGPIPE; closed on failure (errno kept). fd or -1.
inline int finish_socket(int fd, bool nonblock) noexcept {
  if (fd < 0) return -1;
  int one = 1;
  if (set_cloexec(fd) && (!nonblock || set_nonblock(fd)) &&
      ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) == 0)
    return fd;
  int e = errno;
  ::close(fd);
  errno = e;
  return -1;
}
#endif

// A close-on-exec (optionally non-blocking) socket; macOS sets SO_NOSIGPIPE
// so send() never raises SIGPIPE (send_flags() is then 0).
inline int socket_cloexec(int domain, int type, bool nonblock) noexcept {
#if defined(__APPLE__)
  return finish_socket(::socket(domain, type, 0), nonblock);
#else
  return ::socket(domain, type | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
#endif
}

// accept(2): the connection close-on-exec and non-blocking.
inline int accept_cloexec_nonblock(int listener) noexcept {
#if defined(__APPLE__)
  return finish_socket(::accept(listener, nullptr, nullptr), true);
#else
  return ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
#endif
}

// Flags for send(2) on a socket made above: never SIGPIPE.
inline constexpr int send_flags() noexcept {
#if defined(__APPLE__)
  return 0; // SO_NOSIGPIPE is set on the socket
#else
  return MSG_NOSIGNAL;
#endif
}

// The uid of the process at the other end of a connected Unix socket.
inline std::optional<uid_t> peer_uid(int fd) noexcept {
#if defined(__APPLE__)
  uid_t u = 0;
  gid_t g = 0;
  if (::getpeereid(fd, &u, &g) != 0) return std::nullopt;
  return u;
#else
  ucred c{};
  socklen_t n = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &n) != 0 || n != sizeof c) return std::nullopt;
  return c.uid;
#endif
}

// Drop to uid/gid (root launcher, L1): every id, no way back. 0, or the
// step that failed (errno set): 1 the group ids, 2 the user ids.
inline int set_ids(uid_t uid, gid_t gid) noexcept {
#if defined(__APPLE__)
  if (::setgid(gid) != 0) return 1;
  if (::setuid(uid) != 0) return 2;
#else
  if (::setresgid(gid, gid, gid) != 0) return 1;
  if (::setresuid(uid, uid, uid) != 0) return 2;
#endif
  return 0;
}

// The per-user temp dir (/var/folders/XX/YYYY/T/), owned by the user, 0700:
// the parent of every macOS session's run dir. In the Linux simulation:
// $CCSB_SIMULATED_USER_TEMP_DIR (a test gives its own), which must be set.
// Off macOS otherwise: a typed error (backend_unavailable); the Seatbelt
// driver refuses to run rather than pick some other directory.
inline result<std::string> user_temp_dir() {
#if defined(__APPLE__)
  char buf[1024];
  size_t n = ::confstr(_CS_DARWIN_USER_TEMP_DIR, buf, sizeof buf);
  if (n == 0 || n > sizeof buf)
    return make_error(errc::io_error, "DARWIN_USER_TEMP_DIR", "confstr(_CS_DARWIN_USER_TEMP_DIR) failed");
  std::string d(buf);
#elif defined(CCSB_LAUNCH_SIMULATE_MACOS)
  const char* e = std::getenv("CCSB_SIMULATED_USER_TEMP_DIR");
  if (!e || e[0] != '/')
    return make_error(errc::backend_unavailable, "CCSB_SIMULATED_USER_TEMP_DIR",
                      "the simulated macOS build needs CCSB_SIMULATED_USER_TEMP_DIR (an absolute private directory)");
  std::string d(e);
#else
  return make_error(errc::backend_unavailable, "platform",
                    "the Seatbelt backend runs only on macOS (sandbox-exec); use --print-profile seatbelt to see "
                    "the profile a Mac would run");
#endif
#if defined(__APPLE__) || defined(CCSB_LAUNCH_SIMULATE_MACOS)
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
#endif
}

// The running executable, absolute and resolved (ccsb-run and ccsbd find
// egressd and ccsb-init next to themselves): _NSGetExecutablePath on macOS,
// /proc/self/exe elsewhere (the simulation too). nullopt when unknown.
inline std::optional<std::string> executable_path() {
#if defined(__APPLE__)
  std::uint32_t n = 0;
  (void)::_NSGetExecutablePath(nullptr, &n); // n: the size it needs
  std::string raw(n, '\0');
  if (n == 0 || ::_NSGetExecutablePath(raw.data(), &n) != 0) return std::nullopt;
  char real[PATH_MAX];
  if (::realpath(raw.c_str(), real) == nullptr) return std::nullopt;
  return std::string(real);
#else
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
#endif
}

} // namespace ccsb::sys::this_platform
