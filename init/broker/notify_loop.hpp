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
//      40 links; /proc/self and /proc/thread-self mean the caller's. A magic
//      link of the caller's (/proc/<caller>[/task/<caller>]/fd/N, cwd, root,
//      exe, map_files/*), whether the final name or a step on the way
//      (/proc/self/fd/N/sub/f, /proc/self/cwd/.env), is opened by the broker
//      once (O_PATH: the kernel resolves it to the object, not its text);
//      the decision is made on the path read back from that descriptor and
//      the call acts on it (/proc/self/fd/<broker fd>, or relative to it),
//      so a second thread that dup2s another file onto N reaches nothing;
//   4. asks ccsb/broker/decide.hpp;
//   5. on allow performs the call itself relative to the directory
//      descriptor it holds (final component with O_NOFOLLOW, the caller's
//      umask, flags and O_CLOEXEC) and injects the result: an opened file
//      through SECCOMP_IOCTL_NOTIF_ADDFD, its own copy closed before the
//      answer (the descriptor number) is sent, else the return value or
//      errno; on deny answers EACCES (EPERM for a
//      connect) and writes a `violation` line (protocol/supervisor.hpp).
// Sockets (connect, sendto with an address, sendmsg): the destination is
// read once and decided (pathname Unix sockets: L3; with the host's network,
// IP and abstract destinations: T2, net_decide.hpp), then the broker
// performs the call on its copy of the caller's socket (pidfd_getfd): a
// pathname through an O_PATH descriptor of the socket inode it checked, so a
// name swapped for a symlink after the check reaches nothing else; sendto's
// and sendmsg's data and control messages are copied (SCM_RIGHTS descriptors
// fetched from the caller and passed on). A call that would block on a
// blocking socket (a connect in progress, a full send buffer, a Unix
// listener's full backlog) waits in the broker's pending list, polled by the
// exec server, so the broker keeps answering the session's other calls;
// SO_SNDTIMEO bounds it as the kernel would. An open never waits in the
// broker either: it is made with O_NONBLOCK (cleared again unless the caller
// asked for it), and one that would have waited (a FIFO without its
// partner, a lease being broken, a device) is made by a helper process
// (a child of ccsb-init, forked for that call) that sends the file back,
// and so is a truncate() that waits for a lease break;
// the call waits in the pending list for it, and a caller that dies
// meanwhile is noticed through its pidfd (the helper is killed). Every
// open the broker makes for a caller has O_NOCTTY (the broker, PID 1 and a
// session leader, must never take a terminal as its own). /dev/tty (the
// character device 5:0, by name or through a magic link to it) means the
// CALLER's controlling terminal, which the kernel would look up in the
// broker's process instead: the broker reads the caller's tty_nr
// (/proc/TID/stat, trusted once the notification id is re-checked),
// answers ENXIO when it is 0, else opens that pty slave of the sandbox's
// devpts (/dev/pts/N, checked by fstat: st_rdev is tty_nr, the filesystem a
// devpts) and reopens it as a magic link's object (EACCES for a terminal it
// cannot name). The file the caller gets is named /dev/pts/N, not /dev/tty.
// The broker
// stays single-threaded (the exec server's clone_sharing_files relies on
// it).
// sendmmsg: the broker sends the first message only, as sendmsg, writes its
// length into that message's msg_len and answers 1 (sendmmsg's contract
// lets it send fewer than asked; glibc's resolver then sends the second
// query with send). A msg_len it cannot write fails the call with EFAULT,
// as the kernel does.
// It never answers "continue" for a call whose memory arguments it checked
// and writes nothing into the caller's memory but sendmmsg's msg_len. The
// calls it lets run are umask(), which it only observes (see "Caller facts"
// below), and an allowed prlimit64 (only its pid, a register, is decided).
//
// Caller facts (what keeps a brokered call near its floor, issue 8): per
// calling thread the broker keeps a pidfd (PIDFD_THREAD), the tgid and the
// umask, so a call does not open a pidfd or read /proc/TID/status (12 µs)
// each time. An entry is used only while its pidfd says the thread lives (a
// live thread's TID is never reused); a fact read by TID is kept only if the
// pidfd still lives after the read. umask can change only through umask(),
// which the filter sends here: the broker forgets every cached umask (any
// fs_struct sharing, CLONE_FS included, is covered by forgetting all), notes
// the caller as "umask in flight" and answers CONTINUE. While any umask is
// in flight no umask is cached or served from the cache (each call reads
// /proc); the caller leaves that state at its next notification (its
// umask() has then returned) or when its pidfd says it exited.
// Opening a file under /proc for writing is allowed only below the caller's
// own /proc/PID (its fd reopen through /dev/stdout and the like).
// Access changes (chmod, chown, xattr families) are decided on the object
// itself, fetched once (the caller's descriptor through pidfd_getfd for the
// f- calls, else the resolved name opened O_PATH), and performed by the
// broker on that descriptor (ccsb/broker/object_decide.hpp decide_attr).
// prlimit64 on another pid is decided (decide_prlimit) and let run
// (CONTINUE: only the pid, a register, is decided) or refused with EPERM.
//
// Fail closed: anything the broker cannot read, resolve or fetch fails the
// call (EACCES, or the errno the step gave); if the broker dies, the kernel
// fails every pending and later brokered call with ENOSYS.
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/broker/net_decide.hpp"

#include <sys/types.h>

#include <chrono>
#include <optional>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ccsb::init {

struct broker_stats {
  std::uint64_t handled{0};
  std::uint64_t denied{0};
};

// What a session's commands bound through the broker, shared by the brokers
// of all of its execs (a server started by one exec is reachable from the
// next):
//  * pathname Unix sockets (dev/ino): a connect or sendto to one is allowed
//    (L3);
//  * with the host's network (T2): IP bindings and abstract Unix names, the
//    session's own services on the host's loopback (net_decide.hpp).
struct created_socket {
  std::string path;
  dev_t dev;
  ino_t ino;
};
struct session_sockets {
  std::vector<created_socket> unix_paths;
  std::vector<ccsb::broker::own_binding> inet;
  std::vector<std::string> abstract_names; // without the leading NUL
};
using socket_registry = std::shared_ptr<session_sockets>;

class broker {
public:
  // `violation(verdict)` is called for every denial (action, target, reason).
  broker(int listener, ccsb::broker::rule_set rules, socket_registry sockets,
         std::function<void(const ccsb::broker::verdict&)> violation);
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;
  ~broker();

  int fd() const { return listener_; }
  // Receives and answers one notification (the listener is readable).
  // false when the listener is gone (every filtered process exited).
  bool handle_one();
  const broker_stats& stats() const { return stats_; }

  // Calls waiting (a connect in progress, a full send buffer, an open in a
  // helper): the server polls waiting_fds() (descriptor, events) and calls
  // resume() with those that are ready, and also once next_wakeup() has
  // passed (timed retries, SO_SNDTIMEO deadlines). A call whose caller died
  // is dropped there.
  std::vector<std::pair<int, short>> waiting_fds() const;
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const;
  void resume(const std::vector<int>& ready);

  struct attempt_result {
    bool done;
    long long value;
    int error;
  };
  struct pending_op;
  struct caller_facts;

private:
  int listener_;
  ccsb::broker::rule_set rules_;
  std::function<void(const ccsb::broker::verdict&)> violation_;
  socket_registry sockets_;
  broker_stats stats_;
  std::vector<char> req_buf_, resp_buf_;
  std::vector<std::unique_ptr<pending_op>> pending_;
  std::unordered_map<pid_t, std::unique_ptr<caller_facts>> callers_;
  std::vector<pid_t> umask_in_flight_;

  friend struct call;
};

} // namespace ccsb::init
