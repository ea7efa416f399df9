#include "broker/supervise.hpp"

#include "broker/filter.hpp"
#include "broker/notify_loop.hpp"
#include "ccsb/protocol/supervisor.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ccsb::init {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP};

[[noreturn]] void fail(int status_fd, const std::string& what) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  report_line(status_fd, ccsb::protocol::write_line(ccsb::protocol::init_failed{what}));
  std::_Exit(125);
}

bool send_fd(int sock, int fd) {
  char byte = 'L';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return ::sendmsg(sock, &m, MSG_NOSIGNAL) == 1;
}

int recv_fd(int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  ssize_t n;
  do n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

[[noreturn]] void exit_like(int status) {
  if (WIFEXITED(status)) std::_Exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    ::signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    ::sigprocmask(SIG_UNBLOCK, &s, nullptr);
    ::prctl(PR_SET_DUMPABLE, 0); // no core of the supervisor
    ::raise(sig);
    std::_Exit(128 + sig);
  }
  std::_Exit(125);
}

} // namespace

void report_line(int fd, const std::string& l) {
  if (fd < 0) return;
  const char* p = l.data();
  std::size_t n = l.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void run_supervised(std::vector<std::string> command, ccsb::broker::rule_set rules, int status_fd) {
  // 1. the filter
  auto prog = build_filter();
  if (!prog) fail(status_fd, prog.err().what());
  // 2. non-dumpable; signals through a signalfd
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) fail(status_fd, std::string("prctl(PR_SET_DUMPABLE, 0): ") + std::strerror(errno));
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int s : kForwarded) sigaddset(&mask, s);
  if (::sigprocmask(SIG_BLOCK, &mask, &old) != 0) fail(status_fd, std::string("sigprocmask: ") + std::strerror(errno));
  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) fail(status_fd, std::string("signalfd: ") + std::strerror(errno));
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    fail(status_fd, std::string("socketpair: ") + std::strerror(errno));
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC) != 0) fail(status_fd, std::string("pipe2: ") + std::strerror(errno));

  // 3. the command
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) fail(status_fd, std::string("fork (command): ") + std::strerror(errno));
  if (pid == 0) {
    ::close(sp[0]);
    ::close(ep[0]);
    ::close(sfd);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) std::_Exit(125);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    auto listener = install_filter(*prog);
    if (!listener) {
      std::string msg = listener.err().what();
      report_line(ep[1], msg);
      std::_Exit(125);
    }
    if (!send_fd(sp[1], *listener)) std::_Exit(125);
    ::close(*listener);
    ::close(sp[1]);
    std::vector<char*> argv;
    for (auto& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    int e = errno;
    std::string msg = "E" + std::to_string(e);
    report_line(ep[1], msg);
    std::_Exit(e == ENOENT ? 127 : 126);
  }
  ::close(sp[1]);
  ::close(ep[1]);
  int listener = recv_fd(sp[0]);
  ::close(sp[0]);
  if (listener < 0) {
    std::string why;
    char buf[512];
    ssize_t n = ::read(ep[0], buf, sizeof buf);
    if (n > 0) why.assign(buf, static_cast<std::size_t>(n));
    ::kill(pid, SIGKILL);
    fail(status_fd, "the command's notification filter was not installed" + (why.empty() ? std::string() : ": " + why));
  }
  broker b(listener, std::move(rules), [&](const std::string& action, const std::string& target) {
    report_line(status_fd, ccsb::protocol::write_line(ccsb::protocol::violation{action, target}));
  });

  // 4. serve until the command exits
  bool exec_open = true, listening = true;
  std::string exec_msg;
  for (;;) {
    pollfd p[3] = {{sfd, POLLIN, 0}, {listening ? listener : -1, POLLIN, 0}, {exec_open ? ep[0] : -1, POLLIN, 0}};
    int n = ::poll(p, 3, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(status_fd, std::string("poll: ") + std::strerror(errno));
    // The exec outcome first (command-started precedes any violation line),
    // then notifications (a command blocked in a brokered call cannot exit).
    if (p[2].revents) {
      char buf[512];
      ssize_t r = ::read(ep[0], buf, sizeof buf);
      if (r > 0) {
        exec_msg.append(buf, static_cast<std::size_t>(r));
      } else if (r == 0) {
        exec_open = false;
        ::close(ep[0]);
        if (exec_msg.empty()) {
          report_line(status_fd, ccsb::protocol::write_line(ccsb::protocol::command_started{}));
        } else {
          std::string reason = exec_msg;
          if (exec_msg.size() > 1 && exec_msg[0] == 'E')
            reason = command[0] + ": " + std::strerror(std::atoi(exec_msg.c_str() + 1));
          std::fprintf(stderr, "ccsb-init: exec-failed: %s\n", reason.c_str());
          report_line(status_fd, ccsb::protocol::write_line(ccsb::protocol::exec_failed{reason}));
        }
      }
    }
    if (p[1].revents & POLLIN) {
      // Notifications first: a command blocked in a brokered call cannot exit.
      if (!b.handle_one()) listening = false;
    } else if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      listening = false;
    }
    if (p[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo != SIGCHLD) {
          ::kill(pid, static_cast<int>(si.ssi_signo));
          continue;
        }
        for (;;) {
          int st = 0;
          pid_t w = ::waitpid(-1, &st, WNOHANG);
          if (w <= 0) break;
          if (w == pid) exit_like(st);
        }
      }
    }
  }
}

} // namespace ccsb::init
