// T4: a terminal session gets a real pseudo-terminal inside the sandbox.
// Driven through a real terminal: forkpty() gives ccsb-run a pty as its
// stdin/stdout, the test types into the master as a user would.
#include "escape_support.hpp"

#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

using namespace escape;

namespace {

class terminal_session {
public:
  terminal_session(const sandbox_fixture& fx, std::vector<std::string> args) {
    winsize ws{30, 100, 0, 0};
    std::vector<std::string> env = {"HOME=" + fx.home, "PATH=/usr/bin:/bin", "LANG=C", "TERM=xterm"};
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::forkpty(&master_, nullptr, nullptr, &ws);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      if (::chdir(fx.work.c_str()) != 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~terminal_session() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  void type(const std::string& s) { REQUIRE(::write(master_, s.data(), s.size()) == static_cast<ssize_t>(s.size())); }
  // Reads until `marker` shows up in the output (bounded); true when it did.
  bool read_until(const std::string& marker, int timeout_ms = 20000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (seen_.find(marker, from_) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) return seen_.find(marker, from_) != std::string::npos;
      seen_.append(buf, static_cast<std::size_t>(n));
    }
    from_ = seen_.find(marker, from_) + marker.size();
    return true;
  }
  void resize(unsigned short rows, unsigned short cols) {
    winsize ws{rows, cols, 0, 0};
    REQUIRE(::ioctl(master_, TIOCSWINSZ, &ws) == 0); // the kernel sends ccsb-run SIGWINCH
  }
  std::optional<int> wait_exit(int timeout_ms = 20000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && ::read(master_, buf, sizeof buf) > 0) continue;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
    }
    return std::nullopt;
  }
  const std::string& output() const { return seen_; }

private:
  int master_{-1};
  pid_t pid_{-1};
  std::string seen_;
  std::size_t from_{0};
};

} // namespace

TEST_CASE("T4: bash -i in a terminal session has a tty, job control, Ctrl-C and resize", "[T4][escape]") {
  sandbox_fixture fx;
  terminal_session t(fx, {bin_path("ccsb-run"), "--profile", "terminal", "--", "/bin/bash", "--norc", "--noprofile", "-i"});
  t.type("tty; echo \"@@tty=$?\"\n");
  REQUIRE(t.read_until("/dev/pts/"));
  CHECK(t.read_until("@@tty=0"));
  // Job control: a background job is listed and can be brought back.
  // Each marker is typed split by quotes, so the terminal's echo of the
  // typed line never matches it: only the command's output does.
  t.type("sleep 300 &\njobs; echo @@jo''bs\n");
  CHECK(t.read_until("Running"));
  CHECK(t.read_until("@@jobs"));
  CHECK(t.output().find("no job control") == std::string::npos);
  // Ctrl-C reaches the foreground job, not the shell.
  t.type("bash -c 'echo @@sta\"\"rted; exec sleep 300'\n");
  REQUIRE(t.read_until("@@started"));
  t.type("\x03");
  // The terminal discards typed-ahead input on an interrupt: type the next
  // line once the shell is back at its prompt.
  CHECK(t.read_until("^C"));
  if (!t.read_until("$ ")) FAIL_CHECK("no prompt after ^C; output so far:\n" << t.output());
  t.type("echo \"@@rc=$?\"\n");
  CHECK(t.read_until("@@rc=130"));
  // A resize of the user's terminal reaches the sandbox's terminal.
  t.resize(42, 132);
  bool resized = false;
  for (int i = 0; i < 40 && !resized; ++i) {
    t.type("stty size\n");
    resized = t.read_until("42 132", 500);
  }
  CHECK(resized);
  t.type("kill %1; exit 7\n");
  CHECK(t.wait_exit() == 7);
  UNSCOPED_INFO(t.output());
}

TEST_CASE("T4: without a terminal, or with --no-pty, the command has no tty", "[T4][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("tty; echo @@tty=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("tty") == "1"); // "not a tty": stdin is the launcher's, not a terminal
  terminal_session t(fx, {bin_path("ccsb-run"), "--profile", "terminal", "--no-pty", "--", "/bin/sh", "-c",
                          "tty; echo @@no''tty=$?"});
  CHECK(t.read_until("@@notty="));
  INFO(t.output());
  // Under --no-pty the command's stdin is the user's own terminal, not one
  // inside the sandbox: no /dev/pts of the sandbox's devpts.
  CHECK(t.wait_exit().has_value());
}
