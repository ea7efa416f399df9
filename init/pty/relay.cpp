#include "pty/relay.hpp"

#include "io.hpp"

#include "ccsb/protocol/pty_control.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ccsb::init {

namespace {

[[noreturn]] void exit_like(int status) {
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    ::kill(::getpid(), WTERMSIG(status));
    std::_Exit(128 + WTERMSIG(status));
  }
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// Reads what the master holds without blocking; false once the slave side
// is gone (EIO) or on EOF.
bool pump_master(int master) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
    if (!write_all(1, buf, static_cast<std::size_t>(n))) return false;
  }
}

[[noreturn]] void relay(int master, int control, pid_t child, int sfd) {
  bool in_open = true, master_open = true;
  std::string control_buf;
  for (;;) {
    pollfd p[4];
    int n = 0;
    p[n++] = {sfd, POLLIN, 0};
    const int mi = master_open ? n : -1;
    if (master_open) p[n++] = {master, POLLIN, 0};
    const int ii = in_open ? n : -1;
    if (in_open) p[n++] = {0, POLLIN, 0};
    const int ci = control >= 0 ? n : -1;
    if (control >= 0) p[n++] = {control, POLLIN, 0};
    if (::poll(p, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      std::_Exit(125);
    }
    if (mi >= 0 && p[mi].revents) master_open = pump_master(master);
    if (ii >= 0 && p[ii].revents) {
      char buf[4096];
      ssize_t r = ::read(0, buf, sizeof buf);
      if (r > 0) {
        if (!write_all(master, buf, static_cast<std::size_t>(r))) master_open = false;
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        in_open = false; // the launcher's input ended; the terminal stays
      }
    }
    if (ci >= 0 && p[ci].revents) {
      char buf[256];
      ssize_t r = ::read(control, buf, sizeof buf);
      if (r > 0) {
        control_buf.append(buf, static_cast<std::size_t>(r));
        for (auto nl = control_buf.find('\n'); nl != std::string::npos; nl = control_buf.find('\n')) {
          auto msg = protocol::parse_pty_control(std::string_view(control_buf).substr(0, nl));
          control_buf.erase(0, nl + 1);
          if (!msg) continue;
          winsize ws{msg->rows, msg->cols, 0, 0};
          ::ioctl(master, TIOCSWINSZ, &ws);
        }
        if (control_buf.size() > protocol::kMaxPtyControlLine) control_buf.clear();
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(control);
        control = -1;
      }
    }
    if (p[0].revents) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      }
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        // What the command wrote last is still in the terminal.
        if (master_open) pump_master(master);
        exit_like(status);
      }
    }
  }
}

} // namespace

result<void> become_pty_session(const pty_options& o) {
  // 1. the pair
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return make_error(errc::io_error, "pty", errno_text("posix_openpt"));
  if (::grantpt(master) != 0 || ::unlockpt(master) != 0)
    return make_error(errc::io_error, "pty", errno_text("grantpt/unlockpt"));
  char name[128];
  if (::ptsname_r(master, name, sizeof name) != 0) return make_error(errc::io_error, "pty", errno_text("ptsname_r"));
  if (o.rows > 0 && o.cols > 0) {
    winsize ws{o.rows, o.cols, 0, 0};
    if (::ioctl(master, TIOCSWINSZ, &ws) != 0) return make_error(errc::io_error, "pty", errno_text("TIOCSWINSZ"));
  }
  // 2. fork (SIGCHLD blocked first, so the relay's signalfd sees the exit)
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &chld, &old);
  pid_t pid = ::fork();
  if (pid < 0) return make_error(errc::io_error, "pty", errno_text("fork"));
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::close(master);
    if (o.control_fd >= 0) ::close(o.control_fd);
    if (::setsid() < 0) return make_error(errc::io_error, "pty", errno_text("setsid"));
    int slave = ::open(name, O_RDWR | O_CLOEXEC);
    if (slave < 0) return make_error(errc::io_error, "pty", errno_text(std::string("open ") + name));
    if (::ioctl(slave, TIOCSCTTY, 0) != 0) return make_error(errc::io_error, "pty", errno_text("TIOCSCTTY"));
    for (int fd = 0; fd <= 2; ++fd)
      if (::dup2(slave, fd) < 0) return make_error(errc::io_error, "pty", errno_text("dup2 (terminal)"));
    if (slave > 2) ::close(slave);
    return ok();
  }
  // 3. the relay: not dumpable, so the command (same uid) cannot take the
  // launcher's terminal from it with pidfd_getfd or ptrace.
  if (o.status_fd >= 0) ::close(o.status_fd);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) std::_Exit(125);
  ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  relay(master, o.control_fd, pid, sfd);
}

} // namespace ccsb::init
