// ccsb_test/process.hpp — the one way the tests start a program and collect
// what it printed.
//
// fork + execve of an argv vector (no shell, no PATH search: argv[0] is the
// program), with an explicit environment and descriptor map. Between fork and
// execve the child only makes async-signal-safe calls (the test process has
// threads), and every descriptor the map names is first duplicated above all
// of its targets, so placing one can never clobber another's source. A setup
// failure throws (Catch2 reports it as a failed test); a failed execve is the
// child's exit 127, a failed step before it 126.
//
// run() reads stdout and stderr until the child exited and both pipes are
// drained, or for a short grace period after the exit: a descendant that keeps
// a pipe open must not hang the test. The timeout is a safety net against
// hangs (the child, and its group when it has one, is killed); no test
// asserts a duration.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ccsb_test {

struct process_options {
  std::vector<std::string> argv; // argv[0]: the program's path
  std::vector<std::string> env;  // the complete environment, NAME=value
  std::string cwd;               // empty: the test's own
  int stdin_fd = -1;             // -1: /dev/null
  int stdout_fd = -1;            // -1: /dev/null
  int stderr_fd = -1;            // -1: /dev/null
  // Descriptors handed to the child open across execve: {fd in the test, fd in the child}.
  std::vector<std::pair<int, int>> inherit;
  std::vector<std::pair<int, rlim_t>> rlimits; // setrlimit(resource, {v, v}): the child cannot raise it
  bool own_process_group = false;              // setpgid(0, 0): a timeout kills the whole group
};

// What a finished program left.
struct output {
  int exit_code = -1;  // the exit status, -1 when a signal ended it
  int term_signal = 0; // the signal that ended it
  bool timed_out = false;
  std::string out, err;

  std::string describe() const {
    return "exit=" + std::to_string(exit_code) + " signal=" + std::to_string(term_signal) +
           (timed_out ? " TIMED OUT" : "") + "\n--- stdout ---\n" + out + "\n--- stderr ---\n" + err;
  }
};

// A started child whose stdout and stderr are pipes the test reads.
struct captured_child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  bool own_process_group = false;
};

// A vector of strings as the NULL-terminated char* array execve takes, built
// before fork (the child must not allocate).
struct c_strings {
  std::vector<std::string> store;
  std::vector<char*> ptrs;
  explicit c_strings(const std::vector<std::string>& v) : store(v) {
    for (auto& s : store) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  char** data() { return ptrs.data(); }
};

namespace spawn_steps {

[[noreturn]] inline void fail(const std::string& call) {
  throw std::runtime_error(call + ": " + std::strerror(errno));
}

// The descriptor map {source, target}, sources moved above every target
// (close-on-exec copies, closed in the test when `holders` go).
struct fd_plan {
  std::vector<std::pair<int, int>> maps;
  std::vector<int> holders;
  ~fd_plan() {
    for (int fd : holders) ::close(fd);
  }
};

inline void plan_fds(const process_options& o, int devnull, fd_plan& p) {
  p.maps = {{o.stdin_fd < 0 ? devnull : o.stdin_fd, 0},
            {o.stdout_fd < 0 ? devnull : o.stdout_fd, 1},
            {o.stderr_fd < 0 ? devnull : o.stderr_fd, 2}};
  p.maps.insert(p.maps.end(), o.inherit.begin(), o.inherit.end());
  int above = 0;
  for (const auto& m : p.maps) above = std::max(above, m.second + 1);
  for (auto& m : p.maps) {
    int dup = ::fcntl(m.first, F_DUPFD_CLOEXEC, above);
    if (dup < 0) fail("fcntl(F_DUPFD_CLOEXEC)");
    p.holders.push_back(dup);
    m.first = dup;
  }
}

[[noreturn]] inline void exec_child(const process_options& o, const fd_plan& p, char** argv, char** envp) noexcept {
  if (o.own_process_group) ::setpgid(0, 0);
  for (const auto& m : p.maps)
    if (::dup2(m.first, m.second) < 0) ::_exit(126); // dup2 leaves the target open across execve
  for (const auto& [res, v] : o.rlimits) {
    rlimit rl{v, v};
    if (::setrlimit(res, &rl) != 0) ::_exit(126);
  }
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

} // namespace spawn_steps

inline pid_t spawn(const process_options& o) {
  if (o.argv.empty()) throw std::runtime_error("spawn: empty argv");
  c_strings argv(o.argv), envp(o.env);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) spawn_steps::fail("open /dev/null");
  spawn_steps::fd_plan plan;
  plan.holders.push_back(devnull);
  spawn_steps::plan_fds(o, devnull, plan);
  pid_t pid = ::fork();
  if (pid < 0) spawn_steps::fail("fork");
  if (pid == 0) spawn_steps::exec_child(o, plan, argv.data(), envp.data());
  if (o.own_process_group) ::setpgid(pid, pid); // race-free with the child's own call
  return pid;
}

// spawn() with stdout and stderr into pipes the caller collects.
inline captured_child spawn_captured(process_options o) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) spawn_steps::fail("pipe2");
  if (::pipe2(err, O_CLOEXEC) != 0) spawn_steps::fail("pipe2");
  o.stdout_fd = out[1];
  o.stderr_fd = err[1];
  pid_t pid = -1;
  try {
    pid = spawn(o);
  } catch (...) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw;
  }
  ::close(out[1]);
  ::close(err[1]);
  return {pid, out[0], err[0], o.own_process_group};
}

// Reads both pipes of `c` until it exited and they are drained, or 3 s after
// the exit; kills it (and its group) at the timeout.
inline output collect(captured_child c, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  output r;
  const auto deadline = clock::now() + timeout;
  std::optional<clock::time_point> exited_at;
  bool out_open = true, err_open = true;
  int status = 0;
  char buf[65536];
  while (out_open || err_open || !exited_at) {
    if (!exited_at && ::waitpid(c.pid, &status, WNOHANG) == c.pid) exited_at = clock::now();
    const auto now = clock::now();
    if (!exited_at && now > deadline) {
      r.timed_out = true;
      if (c.own_process_group) ::kill(-c.pid, SIGKILL);
      ::kill(c.pid, SIGKILL);
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      exited_at = now;
    }
    if (exited_at && now - *exited_at > std::chrono::seconds(3)) break;
    pollfd fds[2];
    int n = 0;
    if (out_open) fds[n++] = {c.out_fd, POLLIN, 0};
    if (err_open) fds[n++] = {c.err_fd, POLLIN, 0};
    if (n == 0) {
      ::usleep(20000);
      continue;
    }
    if (::poll(fds, static_cast<nfds_t>(n), 100) <= 0) continue;
    for (int i = 0; i < n; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t k = ::read(fds[i].fd, buf, sizeof buf);
      const bool is_out = fds[i].fd == c.out_fd;
      if (k > 0)
        (is_out ? r.out : r.err).append(buf, static_cast<std::size_t>(k));
      else if (k == 0 || errno != EINTR)
        (is_out ? out_open : err_open) = false;
    }
  }
  ::close(c.out_fd);
  ::close(c.err_fd);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

// Runs o.argv to completion with stdout and stderr captured.
inline output run(const process_options& o, std::chrono::milliseconds timeout) {
  return collect(spawn_captured(o), timeout);
}

} // namespace ccsb_test
