// ccsb/broker/kernel_probe.hpp — does this kernel have what the X1 broker
// needs? Launcher side, does I/O (like ccsb/launch/): the answer becomes
// bwrap_facts::creation_rules (ccsb/render/bwrap/render.hpp), and the pure P7/L4
// decision on it is check_enforceable() in ccsb/policy.hpp.
//
//   creation_rules_supported() -> {ok, why}   (probed once per process)
//
// The probe really uses each feature once, in a throw-away child:
//   1. the child sets no_new_privs and installs a one-rule filter with
//      SECCOMP_FILTER_FLAG_NEW_LISTENER | WAIT_KILLABLE_RECV (getppid ->
//      user notification), then calls getppid;
//   2. the parent takes the listener out of the child with pidfd_open +
//      pidfd_getfd, receives the notification and answers it with
//      SECCOMP_IOCTL_NOTIF_ADDFD + SECCOMP_ADDFD_FLAG_SEND;
//   3. the child checks that getppid returned a valid descriptor.
// Any step failing means "no": the default dispatch profile then keeps
// failing closed with the P7/L4 message.
#pragma once

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace ccsb::broker {

struct kernel_support {
  bool ok{false};
  std::string why; // what is missing when !ok
};

namespace detail {

inline kernel_support probe_once() {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return {false, std::string("pipe2: ") + std::strerror(errno)};
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sync[0]);
    ::close(sync[1]);
    return {false, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::close(sync[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(2);
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<unsigned>(offsetof(seccomp_data, nr))),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    long lfd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                         SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
    if (lfd < 0) ::_exit(3);
    int n = static_cast<int>(lfd);
    if (::write(sync[1], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) ::_exit(4);
    long got = ::syscall(SYS_getppid);
    ::_exit(got >= 0 && ::fcntl(static_cast<int>(got), F_GETFD) >= 0 ? 0 : 5);
  }
  ::close(sync[1]);
  kernel_support out;
  int remote = -1;
  pollfd p{sync[0], POLLIN, 0};
  bool readable = ::poll(&p, 1, 5000) == 1;
  ssize_t r = readable ? ::read(sync[0], &remote, sizeof remote) : -1;
  ::close(sync[0]);
  int pidfd = -1, listener = -1;
  auto finish = [&](std::string why) {
    if (listener >= 0) ::close(listener);
    if (pidfd >= 0) ::close(pidfd);
    ::kill(pid, SIGKILL);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return kernel_support{false, std::move(why)};
  };
  if (r != static_cast<ssize_t>(sizeof remote))
    return finish("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV) is not available");
  long pf = ::syscall(SYS_pidfd_open, pid, 0);
  if (pf < 0) return finish(std::string("pidfd_open: ") + std::strerror(errno));
  pidfd = static_cast<int>(pf);
  long lf = ::syscall(SYS_pidfd_getfd, pidfd, remote, 0);
  if (lf < 0) return finish(std::string("pidfd_getfd: ") + std::strerror(errno));
  listener = static_cast<int>(lf);
  pollfd lp{listener, POLLIN, 0};
  if (::poll(&lp, 1, 5000) != 1) return finish("no seccomp user notification arrived");
  seccomp_notif req;
  std::memset(&req, 0, sizeof req);
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0)
    return finish(std::string("SECCOMP_IOCTL_NOTIF_RECV: ") + std::strerror(errno));
  int nul = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (nul < 0) return finish(std::string("open /dev/null: ") + std::strerror(errno));
  seccomp_notif_addfd add{};
  add.id = req.id;
  add.flags = SECCOMP_ADDFD_FLAG_SEND;
  add.srcfd = static_cast<unsigned>(nul);
  int rc = ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
  int e = errno;
  ::close(nul);
  if (rc < 0) return finish(std::string("SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND: ") + std::strerror(e));
  ::close(listener);
  ::close(pidfd);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return {false, "the injected descriptor did not arrive"};
  out.ok = true;
  return out;
}

} // namespace detail

inline const kernel_support& creation_rules_supported() {
  static const kernel_support s = detail::probe_once();
  return s;
}

} // namespace ccsb::broker
