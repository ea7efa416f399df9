#include "exec/server.hpp"

#include "broker/filter.hpp"
#include "broker/notify_loop.hpp"
#include "ccsb/sys/fd.hpp"
#include "ccsb/sys/seqpacket.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

namespace ccsb::init {
namespace protocol = ccsb::protocol;

bool send_to_launcher(int channel, const std::string& message, int fd) {
  std::vector<int> fds;
  if (fd >= 0) fds.push_back(fd);
  return ccsb::sys::send_datagram(channel, message, fds);
}

namespace {

[[noreturn]] void fail(int channel, const std::string& what) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  (void)send_to_launcher(channel, protocol::encode(protocol::init_failed{what}));
  std::_Exit(125);
}

struct running {
  protocol::exec_id id{0};
  pid_t pid{-1};
  int failure_pipe{-1}; // read end; closed once the exec happened or failed
  std::string failure;  // what the child wrote to it
  int master{-1};       // the terminal's master until `started` hands it over
  std::unique_ptr<broker> brk;
  bool started{false};
};

// What one descriptor of the serve loop's poll set belongs to.
enum class source {
  channel,      // the launcher's requests
  signals,      // SIGCHLD (signalfd)
  failure_pipe, // an exec's set-up report
  listener,     // an exec's seccomp notifications (X1)
  waiting_call, // a brokered call waiting for its socket
};
struct watched {
  source what;
  running* exec; // null for the channel and the signals
};

// The command's process, sharing this process's descriptor table until it
// unshares it (become_command): its filter's listener lands in ours. A
// listener sent with sendmsg would wait on the very filter it serves, which
// brokers sendmsg. Raw clone (fork() cannot share the table): the server is
// single-threaded, so no lock is held across it. `pidfd` watches the child.
pid_t clone_sharing_files(int& pidfd) {
  pidfd = -1;
  long pid = ::syscall(SYS_clone, CLONE_FILES | CLONE_PIDFD | SIGCHLD, nullptr, &pidfd, nullptr, nullptr);
  return static_cast<pid_t>(pid);
}

// The child's word "L<N>": descriptor N of ours is its listener. Until it
// comes, this process touches no descriptor (the table is still shared);
// a child that exits first (its filter failed) sends nothing: -1.
int receive_listener(int sock, int pidfd) {
  for (;;) {
    pollfd p[2] = {{sock, POLLIN, 0}, {pidfd, POLLIN, 0}};
    int n = ::poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (p[0].revents & POLLIN) {
      char buf[32];
      ssize_t r = ::read(sock, buf, sizeof buf - 1);
      if (r <= 1 || buf[0] != 'L') return -1;
      buf[r] = '\0';
      char* end = nullptr;
      long fd = std::strtol(buf + 1, &end, 10);
      if (*end != '\0' || fd < 3 || fd > 1 << 20) return -1;
      return static_cast<int>(fd);
    }
    if (p[1].revents) return -1;
  }
}

// The child's set-up failure, for the server: "CODE\tREASON".
[[noreturn]] void child_fail(int pipe_fd, int code, const std::string& reason) {
  std::string m = std::to_string(code) + "\t" + reason;
  (void)write_all(pipe_fd, m.data(), m.size());
  std::_Exit(code);
}

std::vector<std::string> merged_environment(const std::vector<std::string>& additions) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& a : additions) {
    const std::string name = a.substr(0, a.find('=') + 1);
    std::erase_if(env, [&](const std::string& v) { return v.rfind(name, 0) == 0; });
    env.push_back(a);
  }
  return env;
}

// In the child, after fork: never returns.
[[noreturn]] void become_command(const protocol::exec_request& rq, const std::vector<int>& stdio, int slave,
                                 int failure_pipe, int listener_sock, const std::vector<sock_filter>* filter,
                                 const sigset_t& old_mask, std::initializer_list<int> server_ends) {
  if (filter) {
    // Still sharing the server's descriptor table (clone_sharing_files):
    // the listener lands in both; then a table of our own, and only then
    // the word that says which descriptor it is.
    auto listener = install_filter(*filter);
    if (!listener) child_fail(failure_pipe, 125, listener.err().what());
    if (::unshare(CLONE_FILES) != 0) child_fail(failure_pipe, 125, errno_text("unshare(CLONE_FILES)"));
    std::string word = "L" + std::to_string(*listener);
    if (!write_all(listener_sock, word.data(), word.size())) child_fail(failure_pipe, 125, errno_text("write the listener's number"));
    ::close(*listener);
    ::close(listener_sock);
  }
  for (int fd : server_ends)
    if (fd >= 0) ::close(fd);
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::signal(s, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (::setsid() < 0) child_fail(failure_pipe, 125, errno_text("setsid"));
  if (slave >= 0) {
    if (::ioctl(slave, TIOCSCTTY, 0) != 0) child_fail(failure_pipe, 125, errno_text("ioctl(TIOCSCTTY)"));
    for (int fd = 0; fd < 3; ++fd)
      if (::dup2(slave, fd) < 0) child_fail(failure_pipe, 125, errno_text("dup2 (terminal)"));
    if (slave > 2) ::close(slave);
  } else {
    // dup2 onto 0-2 in an order that cannot overwrite a source still needed.
    int tmp[3];
    for (int i = 0; i < 3; ++i) {
      tmp[i] = ::fcntl(stdio[static_cast<std::size_t>(i)], F_DUPFD_CLOEXEC, 3);
      if (tmp[i] < 0) child_fail(failure_pipe, 125, errno_text("fcntl(F_DUPFD_CLOEXEC)"));
    }
    for (int i = 0; i < 3; ++i)
      if (::dup2(tmp[i], i) < 0) child_fail(failure_pipe, 125, errno_text("dup2 (stdio)"));
  }
  // Everything above stderr is close-on-exec (the channel, other execs'
  // descriptors, listeners): the command inherits 0-2 only.
  if (!ccsb::sys::mark_cloexec_from(3)) child_fail(failure_pipe, 125, errno_text("close_range and /proc/self/fd"));
  if (::chdir(rq.workdir.c_str()) != 0) child_fail(failure_pipe, 125, errno_text("chdir " + rq.workdir));
  std::vector<std::string> env = merged_environment(rq.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s = rq.argv;
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  environ = envp.data(); // execvp searches the PATH of the command's environment
  ::execvp(argv[0], argv.data());
  int e = errno;
  child_fail(failure_pipe, e == ENOENT ? 127 : 126, rq.argv[0] + ": " + std::strerror(e));
}

// Every process whose session is `sid` (read from /proc/N/stat).
void signal_session(pid_t sid, int sig) {
  ::kill(sid, sig); // also before the child's setsid (no group or session of that id yet)
  ::kill(-sid, sig);
  DIR* d = ::opendir("/proc");
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
    char* rp = std::strrchr(buf, ')');
    if (!rp) continue;
    int ppid = 0, pgrp = 0, session = 0;
    char state = 0;
    if (std::sscanf(rp + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) continue;
    if (session == sid) ::kill(static_cast<pid_t>(pid), sig);
  }
  ::closedir(d);
}

class server {
public:
  explicit server(server_options o) : o_(std::move(o)) {}

  [[noreturn]] void run() {
    // 1. the filter, once
    if (o_.broker) {
      auto prog = build_filter();
      if (!prog) fail(o_.channel, prog.err().what());
      filter_ = std::move(*prog);
    }
    // 2. non-dumpable; SIGCHLD through a signalfd
    if (::prctl(PR_SET_DUMPABLE, 0) != 0) fail(o_.channel, errno_text("prctl(PR_SET_DUMPABLE, 0)"));
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    if (::sigprocmask(SIG_BLOCK, &mask, &old_mask_) != 0) fail(o_.channel, errno_text("sigprocmask"));
    sfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd_ < 0) fail(o_.channel, errno_text("signalfd"));
    // 3. ready, then serve
    if (!send_to_launcher(o_.channel, protocol::encode(protocol::supervisor_ready{}))) std::_Exit(0);
    for (;;) {
      std::vector<pollfd> p;
      std::vector<watched> what; // what[k]: whose p[k] is
      std::optional<std::chrono::steady_clock::time_point> wake;
      p.push_back({o_.channel, POLLIN, 0});
      what.push_back({source::channel, nullptr});
      p.push_back({sfd_, POLLIN, 0});
      what.push_back({source::signals, nullptr});
      for (auto& [id, r] : execs_) {
        if (r.failure_pipe >= 0) {
          p.push_back({r.failure_pipe, POLLIN, 0});
          what.push_back({source::failure_pipe, &r});
        }
        if (r.brk) {
          p.push_back({r.brk->fd(), POLLIN, 0});
          what.push_back({source::listener, &r});
          for (auto [w, events] : r.brk->waiting_fds()) {
            p.push_back({w, events, 0});
            what.push_back({source::waiting_call, &r});
          }
          if (auto t = r.brk->next_wakeup(); t && (!wake || *t < *wake)) wake = t;
        }
      }
      int timeout = -1;
      if (wake) {
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - std::chrono::steady_clock::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(ms, 0, 60000));
      }
      int n = ::poll(p.data(), p.size(), timeout);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(o_.channel, errno_text("poll (exec server)"));
      // Exec outcomes first (started precedes its violations), then
      // notifications (a command blocked in a brokered call cannot exit),
      // then exits, then requests.
      for (std::size_t k = 0; k < p.size(); ++k)
        if (what[k].what == source::failure_pipe && p[k].revents) read_failure(*what[k].exec);
      for (std::size_t k = 0; k < p.size(); ++k) {
        if (what[k].what != source::listener || !p[k].revents) continue;
        running& r = *what[k].exec;
        // A listener that hangs up: every filtered process of this exec is gone.
        if (!(p[k].revents & POLLIN) || !r.brk->handle_one()) r.brk.reset();
      }
      // Calls waiting for their socket: those that are ready, and those
      // whose retry or deadline has come.
      for (auto& [id, r] : execs_) {
        if (!r.brk) continue;
        std::vector<int> ready;
        for (std::size_t k = 0; k < p.size(); ++k)
          if (what[k].what == source::waiting_call && what[k].exec == &r && p[k].revents) ready.push_back(p[k].fd);
        r.brk->resume(ready);
      }
      if (p[1].revents) reap();
      if (p[0].revents & POLLIN) serve_request();
      else if (p[0].revents & (POLLHUP | POLLERR)) std::_Exit(0); // 5. the launcher is gone
      // An exec is forgotten once its process is reaped and its broker has
      // no process left to serve.
      std::erase_if(execs_, [](const auto& e) { return e.second.pid < 0 && !e.second.brk && e.second.failure_pipe < 0; });
    }
  }

private:
  void serve_request() {
    auto d = ccsb::sys::recv_datagram(o_.channel, protocol::kMaxMessage);
    if (d.error == EAGAIN) return;
    if (d.eof || d.error) std::_Exit(0);
    struct closer {
      std::vector<int>& v;
      ~closer() { ccsb::sys::close_all(v); }
    } close_fds{d.fds};
    // The launcher never sends a message that is refused here; if one comes,
    // say so, answer an exec request with exec-failed (its launcher would
    // otherwise wait for it forever) and keep serving.
    auto refuse = [&](const std::string& why) {
      std::fprintf(stderr, "ccsb-init: exec channel message refused: %s\n", why.c_str());
      if (auto id = protocol::exec_id_of(d.text); id && !execs_.count(*id))
        (void)send_to_launcher(o_.channel,
                               protocol::encode(protocol::exec_failed{*id, 125, "exec channel message refused: " + why}));
    };
    if (d.truncated) return refuse("truncated");
    auto m = protocol::decode_launcher(d.text, d.fds.size());
    if (!m) return refuse(m.err().what());
    if (auto* k = std::get_if<protocol::kill_request>(&*m)) {
      auto it = execs_.find(k->id);
      if (it != execs_.end() && it->second.pid > 0) signal_session(it->second.pid, k->signal);
      return;
    }
    start(std::get<protocol::exec_request>(*m), d.fds);
  }

  void start(const protocol::exec_request& rq, const std::vector<int>& stdio) {
    auto refuse = [&](int code, const std::string& why) {
      (void)send_to_launcher(o_.channel, protocol::encode(protocol::exec_failed{rq.id, code, why}));
    };
    if (execs_.count(rq.id)) return refuse(125, "exec id " + std::to_string(rq.id) + " is in use");
    // a. the terminal
    int master = -1, slave = -1;
    if (rq.terminal) {
      master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
        std::string why = errno_text("posix_openpt (/dev/ptmx of the sandbox's devpts)");
        if (master >= 0) ::close(master);
        return refuse(125, why);
      }
      winsize ws{};
      ws.ws_row = rq.terminal->rows;
      ws.ws_col = rq.terminal->cols;
      (void)::ioctl(master, TIOCSWINSZ, &ws);
      // The slave is opened here, not in the child: the child runs under its
      // filter from its first step, and the broker cannot act for it before
      // it execs (it is not dumpable yet).
      char name[128];
      if (::ptsname_r(master, name, sizeof name) == 0) slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (slave < 0) {
        std::string why = errno_text("open the terminal's slave");
        ::close(master);
        return refuse(125, why);
      }
    }
    int fp[2];
    if (::pipe2(fp, O_CLOEXEC) != 0) {
      if (slave >= 0) ::close(slave);
      if (master >= 0) ::close(master);
      return refuse(125, errno_text("pipe2"));
    }
    int sp[2] = {-1, -1};
    if (filter_ && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
      ::close(fp[0]);
      ::close(fp[1]);
      if (master >= 0) ::close(master);
      if (slave >= 0) ::close(slave);
      return refuse(125, errno_text("socketpair (listener)"));
    }
    // b. the command
    int pidfd = -1;
    pid_t pid = filter_ ? clone_sharing_files(pidfd) : ::fork();
    if (pid == 0) become_command(rq, stdio, slave, fp[1], sp[1], filter_ ? &*filter_ : nullptr, old_mask_, {fp[0], sp[0], master});
    int listener = -1;
    if (pid > 0 && filter_) listener = receive_listener(sp[0], pidfd);
    if (pidfd >= 0) ::close(pidfd);
    if (slave >= 0) ::close(slave);
    ::close(fp[1]);
    if (sp[1] >= 0) ::close(sp[1]);
    if (sp[0] >= 0) ::close(sp[0]);
    if (pid < 0) {
      ::close(fp[0]);
      if (master >= 0) ::close(master);
      return refuse(125, errno_text(filter_ ? "clone(CLONE_FILES)" : "fork"));
    }
    running r;
    r.id = rq.id;
    r.pid = pid;
    r.failure_pipe = fp[0];
    r.master = master;
    if (filter_) {
      if (listener >= 0) {
        const protocol::exec_id id = rq.id;
        r.brk = std::make_unique<broker>(listener, o_.rules, sockets_, [this, id](const ccsb::broker::verdict& v) {
          // The protocol's REASON is never empty (an empty field is malformed).
          (void)send_to_launcher(o_.channel, protocol::encode(protocol::violation{
                                                 id, v.action, v.target, v.reason.empty() ? "X1: denied" : v.reason}));
        });
      }
      // No listener: the child failed before it sent one and says why on
      // its failure pipe; it never execs without the filter.
    }
    execs_.emplace(rq.id, std::move(r));
  }

  // c. the exec happened (EOF without a word) or failed.
  void read_failure(running& r) {
    char buf[1024];
    for (;;) {
      ssize_t n = ::read(r.failure_pipe, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        if (r.failure.size() < 4096) r.failure.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EAGAIN) return;
      break;
    }
    ::close(r.failure_pipe);
    r.failure_pipe = -1;
    if (r.failure.empty()) {
      r.started = true;
      (void)send_to_launcher(o_.channel, protocol::encode(protocol::exec_started{r.id, r.pid}), r.master);
    } else {
      auto tab = r.failure.find('\t');
      int code = std::atoi(r.failure.substr(0, tab).c_str());
      if (code < 125 || code > 127) code = 125;
      std::string why = tab == std::string::npos ? r.failure : r.failure.substr(tab + 1);
      (void)send_to_launcher(o_.channel, protocol::encode(protocol::exec_failed{r.id, code, why}));
    }
    if (r.master >= 0) ::close(r.master);
    r.master = -1;
  }

  void reap() {
    signalfd_siginfo si;
    while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    }
    for (;;) {
      int st = 0;
      pid_t w = ::waitpid(-1, &st, WNOHANG);
      if (w <= 0) break;
      for (auto& [id, r] : execs_) {
        if (r.pid != w) continue;
        if (r.failure_pipe >= 0) read_failure(r); // its write end is closed now: the outcome is complete
        // The broker keeps serving the exec's other processes (a command
        // that exits leaves its background jobs running) until its
        // listener reports that none is left.
        if (r.started)
          (void)send_to_launcher(o_.channel, protocol::encode(protocol::exec_exited{
                                                 r.id, WIFSIGNALED(st), WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st)}));
        r.pid = -1;
        break;
      }
    }
  }

  server_options o_;
  std::optional<std::vector<sock_filter>> filter_;
  socket_registry sockets_{std::make_shared<session_sockets>()};
  std::map<protocol::exec_id, running> execs_;
  sigset_t old_mask_{};
  int sfd_{-1};
};

} // namespace

void serve(server_options o) {
  server s(std::move(o));
  s.run();
}

} // namespace ccsb::init
