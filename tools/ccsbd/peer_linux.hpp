// ccsbd/peer_linux.hpp — is the peer a host process or a sandboxed one (S8)?
//
// SO_PEERCRED's uid does not tell: an unprivileged launcher's sandbox runs as
// the daemon's own uid, so a sandboxed command that reaches the socket would
// pass it and could launch a session with backend none (a command on the
// host). The daemon therefore serves only peers that share its user, mount
// and PID namespaces; every sandbox has a mount and a PID namespace of its
// own (bwrap), an unprivileged one a user namespace too.
//
// Race-free, through a pidfd of the peer, never through its pid alone:
//   1. SO_PEERPIDFD (Linux 6.5+): a pidfd of the process that called
//      connect(), taken by the kernel at connect time; a pid that was
//      recycled since cannot be confused with it;
//   2. each namespace by ioctl(pidfd, PIDFD_GET_{USER,MNT,PID}_NAMESPACE)
//      (Linux 6.11+): the namespace of exactly that process, or ESRCH when
//      it is gone;
//   3. on a kernel without those ioctls: the pid from /proc/self/fdinfo of
//      the pidfd, /proc/PID/ns/NAME opened, then pidfd_send_signal(pidfd, 0)
//      must still succeed: the process lived through the open, so the pid was
//      still its own when the namespace was read;
//   4. the namespaces compared by (st_dev, st_ino) with /proc/self/ns/NAME
//      (ccsb/protocol/daemon.hpp peer_namespace_mismatch).
// Every failure (no SO_PEERPIDFD, a peer that exited, EPERM from a peer that
// made itself undumpable) refuses the peer: the check fails closed.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/protocol/daemon.hpp"
#include "ccsb/result.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace ccsbd {

namespace peer_detail {

inline constexpr int kSoPeerPidfd = 77; // SO_PEERPIDFD, Linux 6.5
inline constexpr unsigned long kPidfsIoctlMagic = 0xFF;
inline constexpr unsigned long pidfs_ioctl(unsigned long nr) { return _IO(kPidfsIoctlMagic, nr); }

struct ns_kind {
  const char* name;
  unsigned long ioctl_nr; // PIDFD_GET_<NAME>_NAMESPACE, Linux 6.11
};
inline constexpr ns_kind kKinds[] = {{"user", 9}, {"mnt", 3}, {"pid", 5}};

inline std::optional<ccsb::protocol::daemon::node_id> id_of_fd(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return ccsb::protocol::daemon::node_id{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

// The pid a pidfd refers to, from /proc/self/fdinfo ("Pid:"; -1 once it exited).
inline long pid_of_pidfd(int pidfd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(pidfd));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Pid:", 0) == 0) return std::strtol(line.c_str() + 4, nullptr, 10);
  return -1;
}

} // namespace peer_detail

// The daemon's own namespaces, read once at start-up.
struct own_namespaces {
  std::vector<ccsb::protocol::daemon::node_id> ids; // in peer_detail::kKinds order
};

inline ccsb::result<own_namespaces> read_own_namespaces() {
  own_namespaces o;
  for (const auto& k : peer_detail::kKinds) {
    struct stat st{};
    const std::string p = std::string("/proc/self/ns/") + k.name;
    if (::stat(p.c_str(), &st) != 0) return ccsb::launch::sys_error("stat(" + p + ")");
    o.ids.push_back({static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)});
  }
  return o;
}

// ok: the peer of `fd` shares the daemon's namespaces. Otherwise why not.
inline ccsb::result<void> check_peer_outside_sandbox(int fd, const own_namespaces& own) {
  using ccsb::errc;
  using ccsb::make_error;
  int raw = -1;
  socklen_t n = sizeof raw;
  if (::getsockopt(fd, SOL_SOCKET, peer_detail::kSoPeerPidfd, &raw, &n) != 0 || raw < 0)
    return make_error(errc::io_error, "peer",
                      std::string("cannot take a pidfd of the peer (SO_PEERPIDFD, Linux 6.5+): ") + std::strerror(errno) +
                          "; without it the daemon cannot tell a sandboxed peer from a host one, and refuses");
  ccsb::launch::unique_fd pidfd(raw);
  std::vector<ccsb::protocol::daemon::ns_ids> all;
  for (std::size_t i = 0; i < std::size(peer_detail::kKinds); ++i) {
    const auto& k = peer_detail::kKinds[i];
    ccsb::launch::unique_fd ns(::ioctl(pidfd.get(), peer_detail::pidfs_ioctl(k.ioctl_nr), 0));
    if (!ns && (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP)) {
      const long pid = peer_detail::pid_of_pidfd(pidfd.get());
      if (pid > 0) ns.reset(::open(("/proc/" + std::to_string(pid) + "/ns/" + k.name).c_str(), O_RDONLY | O_CLOEXEC));
      if (ns && ::syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr, 0) != 0) ns.reset();
    }
    if (!ns)
      return make_error(errc::io_error, "peer",
                        std::string("cannot read the peer's ") + k.name + " namespace through its pidfd: " +
                            std::strerror(errno) + "; the daemon refuses a peer it cannot place");
    auto id = peer_detail::id_of_fd(ns.get());
    if (!id) return ccsb::launch::sys_error(std::string("fstat(the peer's ") + k.name + " namespace)");
    all.push_back({k.name, own.ids[i], *id});
  }
  if (auto which = ccsb::protocol::daemon::peer_namespace_mismatch(all))
    return make_error(errc::invalid_argument, "peer",
                      "the peer is inside a sandbox (its " + *which +
                          " namespace is not the daemon's); sandboxed commands cannot drive ccsbd (S8)");
  return ccsb::ok();
}

} // namespace ccsbd
