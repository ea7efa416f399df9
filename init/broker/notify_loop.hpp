// init/broker/notify_loop.hpp — the X1 broker: answers the seccomp user
// notifications of the command's filter (filter.hpp) in the supervisor.
//
// For each notification the broker:
//   1. reads the caller's memory once (process_vm_readv: the path strings,
//      the sockaddr), then checks the notification id is still valid (the
//      caller may have died and its pid been reused);
//   2. fetches what the call is relative to: the caller's cwd
//      (/proc/TID/cwd) or its dirfd / socket (pidfd_getfd), then re-checks
//      the id;
//   3. resolves the name the kernel would really create or change: the
//      directory part is opened (O_PATH, no magic links), its kernel path
//      read back from /proc/self/fd, and a final symlink followed where the
//      call follows it (a dangling-symlink O_CREAT names the target), up to
//      40 links; /proc/self and /proc/thread-self mean the caller's;
//   4. asks ccsb/broker/decide.hpp;
//   5. on allow performs the call itself relative to the directory
//      descriptor it holds (final component with O_NOFOLLOW, the caller's
//      umask, flags and O_CLOEXEC) and injects the result: an opened file
//      through SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND, else
//      the return value or errno; on deny answers EACCES (EPERM for a
//      connect) and writes a `violation` line (protocol/supervisor.hpp).
// It never answers "continue" and never writes the caller's memory.
// Opening a file under /proc for writing is allowed only below the caller's
// own /proc/PID (its fd reopen through /dev/stdout and the like).
//
// Fail closed: anything the broker cannot read, resolve or fetch fails the
// call (EACCES, or the errno the step gave); if the broker dies, the kernel
// fails every pending and later brokered call with ENOSYS.
#pragma once

#include "ccsb/broker/decide.hpp"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ccsb::init {

struct broker_stats {
  std::uint64_t handled{0};
  std::uint64_t denied{0};
};

// The Unix sockets a session's commands bound through the broker: a connect
// to one of them is allowed (X1). Shared by the brokers of all of a session's
// execs, so a server started by one exec is reachable from the next.
struct created_socket {
  std::string path;
  dev_t dev;
  ino_t ino;
};
using socket_registry = std::shared_ptr<std::vector<created_socket>>;

class broker {
public:
  // `violation(action, target)` is called for every denial.
  broker(int listener, ccsb::broker::rule_set rules, socket_registry sockets,
         std::function<void(const std::string&, const std::string&)> violation);
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;
  ~broker();

  int fd() const { return listener_; }
  // Receives and answers one notification (the listener is readable).
  // false when the listener is gone (every filtered process exited).
  bool handle_one();
  const broker_stats& stats() const { return stats_; }

private:
  int listener_;
  ccsb::broker::rule_set rules_;
  std::function<void(const std::string&, const std::string&)> violation_;
  socket_registry sockets_;
  broker_stats stats_;
  std::vector<char> req_buf_, resp_buf_;

  friend struct call;
};

} // namespace ccsb::init
