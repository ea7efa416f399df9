// ccsb/launch/process.hpp — spawn a child process the careful way (launcher
// only; does I/O).
//
// spawn(opts) is fork + execve with:
//   * an explicit argv and envp (vectors of strings; no shell, no PATH search:
//     `path` is the program to run);
//   * an explicit descriptor map (child fd <- parent fd); every other
//     descriptor is closed on exec (sys/fd.hpp mark_cloexec_from);
//   * PR_SET_PDEATHSIG(SIGKILL), so the child dies when the launcher dies (also
//     when the launcher is SIGKILLed), with the getppid() race check; macOS
//     has no such call: there only destroy() ends the children;
//   * its own process group (setpgid in child and parent), so the launcher can
//     kill the whole group;
//   * signal mask and dispositions reset to defaults;
//   * optionally: join cgroups (the pid written into each `cgroup_procs`
//     descriptor the launcher opened before fork, "0" into each
//     `cgroup_tasks` one), a umask, and a credential
//     change to an unprivileged uid/gid with no supplementary groups (a root
//     launcher runs the sandbox as a non-root host uid, L1; sys::this_platform::set_ids).
//     Order: cgroups
//     (needs the launcher's privilege), then setgroups/setresgid/setresuid,
//     then PR_SET_PDEATHSIG (a credential change clears it);
//   * optionally (Linux): a mount namespace of its own, a slave of the
//     launcher's, with detached trees attached in it (`attach`: the
//     idmapped binds of a session uid, linux/session_uid.hpp), before the
//     credential change;
//   * execve failure reported back through a close-on-exec pipe, so spawn()
//     returns an error naming execve, the path and errno instead of a child
//     that exits 127.
// The child, between fork and execve, allocates nothing (the parent may be a
// multithreaded embedder whose other threads held malloc's lock at fork):
// every vector it reads is built before fork, and every call it makes is
// async-signal-safe.
#pragma once

#include "ccsb/environment.hpp"
#include "ccsb/result.hpp"
#include "ccsb/sys/fd.hpp"
#include "ccsb/sys/platform.hpp"

#include <dirent.h>
#include <grp.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if !CCSB_LAUNCH_MACOS
#include <linux/close_range.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ccsb::launch {

// The system layer (ccsb/sys/) is the launcher's vocabulary too.
using sys::make_pipe;
using sys::pipe_pair;
using sys::sys_error;
using sys::unique_fd;
using sys::write_all;

struct fd_map {
  int child_fd;
  int parent_fd;
};

struct spawn_options {
  std::string path;              // absolute program path
  std::vector<std::string> argv; // argv[0] included
  env_list env;                  // the complete environment
  std::vector<fd_map> fds;       // everything else is closed on exec
  std::string cwd;               // chdir before execve (empty: inherit)
  bool own_process_group{true};
  bool die_with_parent{true};
  std::optional<mode_t> umask;          // set before execve
  std::vector<int> cgroup_procs;        // open cgroup.procs descriptors the child joins (its pid written)
  // Open cgroup v1 `tasks` descriptors the child joins by writing "0": the
  // writing thread, which is the whole child (a child of fork has one
  // thread; what it starts later inherits the cgroup). The kernel moves a
  // process's own single thread without taking cgroup_threadgroup_rwsem for
  // writing, which a cgroup.procs write takes and which waits for an RCU
  // grace period (limits.hpp).
  std::vector<int> cgroup_tasks;
  struct credentials {
    uid_t uid;
    gid_t gid;
  };
  std::optional<credentials> run_as;    // setgroups({}) + setresgid + setresuid
  std::vector<std::pair<int, rlim_t>> rlimits; // setrlimit(resource, {v, v}) before the credential change
  // Linux: detached mount trees (open_tree descriptors) attached at
  // `target` in a new mount namespace (MS_SLAVE, recursively) of the child.
  // Empty: the launcher's mount namespace.
  struct attach_mount {
    int tree;
    std::string target;
  };
  std::vector<attach_mount> attach;
};

namespace detail {

[[noreturn]] inline void child_fail(int err_fd, int stage) noexcept {
  int e[2] = {stage, errno};
  ssize_t ignored = ::write(err_fd, e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

} // namespace detail

// Stages reported by a child that failed before execve.
enum spawn_stage : int {
  stage_pgid = 1,
  stage_pdeathsig,
  stage_fds,
  stage_cloexec,
  stage_exec,
  stage_chdir,
  stage_cgroup,
  stage_setgroups,
  stage_setresgid,
  stage_setresuid,
  stage_rlimit,
  stage_cgroup_tasks,
  stage_mount_ns,
  stage_attach,
};

// A child that may not have reached execve yet. `exec_status` (close-on-exec
// in the child) reads EOF once it has, or (stage, errno) when a step before
// it failed: spawn() waits for that, spawn_async() leaves it to the caller
// (exec_outcome), who can do other work while the child gets there.
struct spawned_child {
  pid_t pid{-1};
  unique_fd exec_status;
  std::string path, cwd;   // for the error message
  std::optional<uid_t> uid;
};

namespace detail {

// argv and envp as execve takes them, built before fork (the child reads,
// never allocates).
struct exec_vectors {
  std::vector<char*> argv;
  std::vector<std::string> env_strings;
  std::vector<char*> envp;

  explicit exec_vectors(const spawn_options& o) {
    for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& v : o.env) env_strings.push_back(v.name + "=" + v.value);
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

// The child's cgroups: its pid into each cgroup.procs (the decimal digits
// formatted without allocating), "0" into each v1 tasks file.
inline void child_join_cgroups(const spawn_options& o, int ef) noexcept {
  if (!o.cgroup_procs.empty()) {
    char digits[24];
    int n = 0;
    for (pid_t v = ::getpid(); v > 0 && n < 23; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    char text[24];
    for (int k = 0; k < n; ++k) text[k] = digits[n - 1 - k];
    for (int cg : o.cgroup_procs)
      if (::write(cg, text, static_cast<std::size_t>(n)) != n) child_fail(ef, stage_cgroup);
  }
  for (int cg : o.cgroup_tasks)
    if (::write(cg, "0", 1) != 1) child_fail(ef, stage_cgroup_tasks);
}

// Limits, the attached mounts, then the credential change (which needs the
// launcher's privilege for the steps before it).
inline void child_limits_mounts_ids(const spawn_options& o, int ef) noexcept {
  for (const auto& [res, v] : o.rlimits) {
    rlimit rl{v, v};
    if (::setrlimit(res, &rl) != 0) child_fail(ef, stage_rlimit);
  }
#if !CCSB_LAUNCH_MACOS
  if (!o.attach.empty()) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
      child_fail(ef, stage_mount_ns);
    for (const auto& a : o.attach)
      if (::syscall(SYS_move_mount, a.tree, "", AT_FDCWD, a.target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
        child_fail(ef, stage_attach);
  }
#endif
  if (o.run_as) {
    if (::setgroups(0, nullptr) != 0) child_fail(ef, stage_setgroups);
    if (int step = sys::this_platform::set_ids(o.run_as->uid, o.run_as->gid); step != 0)
      child_fail(ef, step == 1 ? stage_setresgid : stage_setresuid);
  }
}

// The descriptor map: sources moved above every target first (into
// `moved`, sized before fork), everything else close-on-exec, then placed.
inline void child_place_fds(const spawn_options& o, int ef, int above, std::vector<int>& moved) noexcept {
  for (std::size_t i = 0; i < o.fds.size(); ++i) {
    moved[i] = ::fcntl(o.fds[i].parent_fd, F_DUPFD_CLOEXEC, above);
    if (moved[i] < 0) child_fail(ef, stage_fds);
  }
  if (!sys::mark_cloexec_from(0)) child_fail(ef, stage_cloexec);
  for (std::size_t i = 0; i < o.fds.size(); ++i) {
    if (::dup2(moved[i], o.fds[i].child_fd) < 0) child_fail(ef, stage_fds);
    ::fcntl(o.fds[i].child_fd, F_SETFD, 0);
  }
}

// Everything between fork and execve, in the order the header lists;
// async-signal-safe calls only.
[[noreturn]] inline void run_child(const spawn_options& o, exec_vectors& v, int status_fd, int above, pid_t parent,
                                   std::vector<int>& moved, const sigset_t& all) noexcept {
  int ef = ::fcntl(status_fd, F_DUPFD_CLOEXEC, above);
  if (ef < 0) child_fail(status_fd, stage_fds);
  // Default dispositions, then nothing blocked. Ignored signals survive
  // execve: a launcher started with SIGTERM ignored would otherwise hand
  // bwrap and egressd a SIGTERM they cannot receive.
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::signal(s, SIG_DFL);
  ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
  if (o.own_process_group && ::setpgid(0, 0) != 0) child_fail(ef, stage_pgid);
  child_join_cgroups(o, ef);
  child_limits_mounts_ids(o, ef);
  if (o.umask) ::umask(*o.umask);
  if (o.die_with_parent) {
#if !CCSB_LAUNCH_MACOS
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(ef, stage_pdeathsig);
#endif
    if (::getppid() != parent) ::_exit(127); // the launcher already died
  }
  child_place_fds(o, ef, above, moved);
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) child_fail(ef, stage_chdir);
  ::execve(o.path.c_str(), v.argv.data(), v.envp.data());
  child_fail(ef, stage_exec);
}

} // namespace detail

inline result<spawned_child> spawn_async(const spawn_options& o) {
  if (o.path.empty() || o.path.front() != '/')
    return make_error(errc::invalid_argument, "path", "spawn needs an absolute program path: \"" + o.path + "\"");
  // Everything the child needs is prepared before fork.
  detail::exec_vectors vectors(o);
  // The child moves its status pipe and the map's sources above every
  // target of the map before placing it: a target equal to the pipe's
  // number would otherwise close the pipe (the parent reads EOF, "reached
  // execve") and a failed step would write its report into the map's
  // descriptor. Just above the highest target, not a fixed floor: F_DUPFD
  // refuses a number at or above RLIMIT_NOFILE (256 on a macOS shell).
  int above = 0;
  for (const auto& m : o.fds) above = std::max(above, m.child_fd + 1);
  std::vector<int> moved(o.fds.size(), -1); // the sources' new numbers, filled by the child

  auto errp = make_pipe();
  if (!errp) return std::move(errp).err();
  const pid_t parent = ::getpid();
  // Every signal blocked across fork (posix_spawn's habit): the child sets
  // every disposition to default before it unblocks, so no handler of the
  // launcher ever runs in it.
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::fork();
  if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return sys_error("fork");
  if (pid == 0) detail::run_child(o, vectors, errp->write.get(), above, parent, moved, all);
  if (o.own_process_group) ::setpgid(pid, pid); // race-free with the child's own call
  errp->write.reset();
  spawned_child c;
  c.pid = pid;
  c.exec_status = std::move(errp->read);
  c.path = o.path;
  c.cwd = o.cwd;
  if (o.run_as) c.uid = o.run_as->uid;
  return c;
}

// How a spawn_async child's steps ended, once its status descriptor is
// readable: ok when it reached execve (EOF), else the failed step as an
// error naming it, errno included (the child exits 127; the caller reaps
// it). EAGAIN on a non-blocking descriptor: nullopt, not known yet.
inline std::optional<result<void>> exec_outcome(spawned_child& c) {
  int e[2] = {0, 0};
  ssize_t n;
  do n = ::read(c.exec_status.get(), e, sizeof e);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) return std::nullopt;
  // A read that fails, or is cut short, tells nothing of the child: an
  // error, never "reached execve".
  if (n < 0) {
    auto err = sys_error("read (spawn status of " + c.path + ")");
    c.exec_status.reset();
    return result<void>(std::move(err));
  }
  c.exec_status.reset();
  if (n == 0) return result<void>(ok());
  if (n != static_cast<ssize_t>(sizeof e))
    return result<void>(make_error(errc::io_error, "spawn", "a short status from the child of " + c.path));
  errno = e[1];
  static const char* stages[] = {"",
                                 "setpgid(0, 0)",
                                 "prctl(PR_SET_PDEATHSIG, SIGKILL)",
                                 "dup2 (descriptor map)",
                                 "close_range(0, ~0, CLOSE_RANGE_CLOEXEC) and /proc/self/fd",
                                 "execve",
                                 "chdir",
                                 "write (cgroup.procs)",
                                 "setgroups(0, NULL)",
                                 "setresgid",
                                 "setresuid",
                                 "setrlimit",
                                 "write (cgroup v1 tasks)",
                                 "unshare(CLONE_NEWNS) and mount(MS_REC | MS_SLAVE)",
                                 "move_mount (an idmapped bind)"};
  std::string what = (e[0] >= 1 && e[0] <= stage_attach) ? stages[e[0]] : "spawn";
  if (e[0] == stage_setresuid && c.uid) what += "(" + std::to_string(*c.uid) + ")";
  if (e[0] == stage_chdir) what += " " + c.cwd;
  if (e[0] == stage_exec) what += " " + c.path;
  return result<void>(sys_error(what));
}

// spawn_async, then wait until the child has reached execve (or failed: the
// error, the child reaped).
inline result<pid_t> spawn(const spawn_options& o) {
  auto c = spawn_async(o);
  if (!c) return std::move(c).err();
  auto outcome = exec_outcome(*c);
  if (outcome && !*outcome) {
    int status;
    ::waitpid(c->pid, &status, 0);
    return std::move(*outcome).err();
  }
  return c->pid;
}

// Exit code in shell convention: the code, or 128 + signal.
inline int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

// A pidfd for `pid` (Linux 5.3+): readable when the process exits. -1 when
// the kernel has none (ENOSYS) or the process is gone.
inline int pidfd_open(pid_t pid) noexcept {
#if !CCSB_LAUNCH_MACOS && defined(SYS_pidfd_open)
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// Waits for `pid` at most `limit`; nullopt if it is still running. A pidfd
// poll wakes up the moment the process exits (no sleep granularity); without
// one, a short exponential backoff (50 us doubling to 2 ms).
inline std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int pfd = pidfd_open(pid);
  long backoff_us = 50;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      if (pfd >= 0) ::close(pfd);
      if (r == pid) return status;
      return std::nullopt;
    }
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (pfd >= 0) ::close(pfd);
      return std::nullopt;
    }
    if (pfd >= 0) {
      pollfd p{pfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count() / 1000 + 1));
    } else {
      ::usleep(static_cast<useconds_t>(std::min<long>(backoff_us, left.count())));
      backoff_us = std::min<long>(backoff_us * 2, 2000);
    }
  }
}

// SIGTERM, wait up to `grace`, then SIGKILL and reap. Returns the status.
inline int terminate(pid_t pid, std::chrono::milliseconds grace, bool group = true) {
  ::kill(group ? -pid : pid, SIGTERM);
  if (auto s = wait_for(pid, grace)) return *s;
  ::kill(group ? -pid : pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// For a launcher's main(), first thing: /dev/null on each of 0, 1, 2 that
// is closed. Otherwise the first descriptors the launcher makes (its
// reactor's self-pipe) take those numbers, and a command's stdin or
// egressd's stderr, which are the launcher's 0 and 2, become them.
inline void hold_standard_fds() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // The lowest free number, which is fd: the lower ones are open.
    int n = ::open("/dev/null", O_RDWR | O_NOCTTY);
    if (n > 2) ::close(n);
  }
}

} // namespace ccsb::launch
