// launch::spawn's own report of a failed step (S7): the child writes
// (stage, errno) to a close-on-exec pipe before it exits 127. Placing the
// descriptor map must not overwrite that pipe, whatever numbers the map asks
// for: a target equal to the pipe's number once turned an execve failure
// into "bwrap exited with code 127" and wrote the report into the map's
// descriptor instead.
#include <catch2/catch.hpp>

#include <ccsb/launch/process.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace launch = ccsb::launch;

TEST_CASE("S7: a failed execve is reported whatever descriptor numbers the map places", "[S7][launch]") {
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(null);
  // The status pipe takes the lowest free numbers; every target from 3 to
  // 40 covers it however many descriptors this process holds open.
  for (int target = 3; target <= 40; ++target) {
    INFO("child descriptor " << target);
    launch::spawn_options o;
    o.path = "/nonexistent/ccsb-spawn-test";
    o.argv = {o.path};
    o.fds = {{0, null.get()}, {target, null.get()}};
    auto pid = launch::spawn(o);
    REQUIRE_FALSE(pid);
    CHECK(pid.err().what().find("execve /nonexistent/ccsb-spawn-test: No such file or directory") != std::string::npos);
  }
}

TEST_CASE("S7: a failed execve is reported when the map moves the status pipe's own number", "[S7][launch]") {
  // The pipe is made inside spawn: free the two lowest numbers so that it
  // lands there, and ask the map to place a descriptor on exactly those.
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(null);
  int low = ::fcntl(null.get(), F_DUPFD_CLOEXEC, 0);
  REQUIRE(low >= 0);
  ::close(low);
  launch::spawn_options o;
  o.path = "/nonexistent/ccsb-spawn-test";
  o.argv = {o.path};
  o.fds = {{low, null.get()}, {low + 1, null.get()}};
  auto c = launch::spawn_async(o);
  REQUIRE(c);
  auto outcome = launch::exec_outcome(*c);
  int status = 0;
  REQUIRE(::waitpid(c->pid, &status, 0) == c->pid);
  CHECK(launch::exit_code_of(status) == 127);
  REQUIRE(outcome);
  REQUIRE_FALSE(*outcome);
  CHECK(outcome->err().what().find("execve /nonexistent/ccsb-spawn-test: No such file or directory") != std::string::npos);
}

TEST_CASE("S7: spawn works under a small RLIMIT_NOFILE (256, a macOS default and common service limit)", "[S7][launch]") {
  // The child moves its status pipe and the map's sources above the map's
  // targets; a fixed floor above the descriptor limit made F_DUPFD fail
  // (EINVAL) and every spawn with it.
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(null);
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit small = saved;
  small.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &small) == 0);
  launch::spawn_options o;
  o.path = "/bin/true";
  o.argv = {o.path};
  o.fds = {{0, null.get()}, {1, null.get()}, {2, null.get()}, {64, null.get()}};
  auto pid = launch::spawn(o);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  REQUIRE(pid);
  int status = 0;
  REQUIRE(::waitpid(*pid, &status, 0) == *pid);
  CHECK(launch::exit_code_of(status) == 0);
}

TEST_CASE("S7: a status descriptor that cannot be read is an error, never 'reached execve'", "[S7][launch]") {
  // exec_outcome reads (stage, errno) or EOF; a read that fails (here
  // EISDIR) says nothing about the child and must not pass for success.
  launch::spawned_child c;
  c.pid = -1;
  c.path = "/bin/true";
  c.exec_status.reset(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(c.exec_status);
  auto outcome = launch::exec_outcome(c);
  REQUIRE(outcome);
  REQUIRE_FALSE(*outcome);
  CHECK(outcome->err().what().find("Is a directory") != std::string::npos);
}

TEST_CASE("S7: a signal the launcher ignores is not ignored in what it spawns", "[S7][launch]") {
  // Ignored dispositions survive execve: a launcher started with SIGTERM or
  // SIGUSR1 ignored (nohup, some service managers) would otherwise hand
  // bwrap and egressd a SIGTERM they cannot receive.
  struct sigaction ign{}, old_term{}, old_usr1{};
  ign.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGTERM, &ign, &old_term) == 0);
  REQUIRE(::sigaction(SIGUSR1, &ign, &old_usr1) == 0);
  auto out = launch::make_pipe();
  REQUIRE(out);
  launch::spawn_options o;
  o.path = "/bin/sed";
  o.argv = {o.path, "-n", "s/^SigIgn:[[:space:]]*//p", "/proc/self/status"};
  o.fds = {{1, out->write.get()}};
  auto pid = launch::spawn(o);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  REQUIRE(pid);
  out->write.reset();
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(out->read.get(), buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  REQUIRE(::waitpid(*pid, &status, 0) == *pid);
  INFO("SigIgn: " << text);
  const unsigned long long ignored = std::stoull(text, nullptr, 16);
  CHECK((ignored & (1ULL << (SIGTERM - 1))) == 0);
  CHECK((ignored & (1ULL << (SIGUSR1 - 1))) == 0);
}

TEST_CASE("S7: a spawned child allocates nothing between fork and execve, so a multithreaded embedder cannot deadlock it",
          "[S7][launch]") {
  // spawn_noalloc_probe.cpp: its allocator exits 99 in any process but the
  // launcher's; the spawned child must reach execve (exit 0 of /bin/true).
  launch::spawn_options o;
  o.path = std::string(CCSB_BIN_DIR) + "/spawn_noalloc_probe";
  o.argv = {o.path};
  auto pid = launch::spawn(o);
  REQUIRE(pid);
  int st = 0;
  REQUIRE(::waitpid(*pid, &st, 0) == *pid);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("S7: the close-on-exec sweep without close_range marks every descriptor from the lowest asked for, and no other",
          "[S7][launch]") {
  // The /proc/self/fd fallback step itself (kernels before 5.11): this kernel has close_range.
  int low_fd = ::open("/dev/null", O_RDONLY); // no O_CLOEXEC
  REQUIRE(low_fd >= 0);
  std::vector<int> high;
  for (int k = 0; k < 200; ++k) high.push_back(::fcntl(low_fd, F_DUPFD, 300 + 3 * k)); // more than one 4 KiB read
  for (int fd : high) REQUIRE(fd >= 300);
  REQUIRE(ccsb::sys::detail::mark_cloexec_listed(300));
  CHECK((::fcntl(low_fd, F_GETFD) & FD_CLOEXEC) == 0);
  for (int fd : high) CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  for (int fd : high) ::close(fd);
  ::close(low_fd);
}
