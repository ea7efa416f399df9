// The native policy inside the microVM guest (issue 31 step 4; docs/microvm.md
// "Layers"): every command runs under the guest's ccsb-init, with the X1
// broker's creation rules (P7) and the Landlock ruleset the native backend
// computes for the same policy, and its violations reach the session's
// --events. And the exec channel's stdin and terminal (T4) through the
// agent. Each case boots one real VM under TCG per launcher and makes all
// its checks in that boot; every one also proves the command ran in the
// guest (ESCAPE_REQUIRE_RAN and the guest's kernel).
#include "microvm_support.hpp"

#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <thread>

using namespace escape;
using namespace microvm_test;

namespace {

// A python3 program in the guest, from the worktree; t(NAME, F) prints
// @@NAME=ok or @@NAME=<errno name>.
std::string py_calls(const std::string& code) {
  return "python3 - <<'PY'\nimport os, errno, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "def t(name, f):\n    try:\n        f(); print('@@%s=ok' % name, flush=True)\n    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)), flush=True)\n" +
         code + "\nPY\n";
}

} // namespace

TEST_CASE("X4 X1 P7 X2 L6: in the guest, a.pem and its rename, link, symlink, O_TMPFILE and nested variants are "
          "denied with violation events, Landlock and the L6 filter are on, and stdin reaches the command",
          "[X4][X1][P7][X2][L6][microvm]") {
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged launcher" : "root launcher")) {
      sandbox_fixture fx;
      write_file(fx.work + "/plain.txt", "PLAIN\n");
      hand_to_sandbox_uid(fx.base);
      const std::string handle = fx.base + "/handle.json";
      vm_run v;
      v.unprivileged = unprivileged;
      v.extra = {"--handle", handle};
      // stdin: a line, then 200000 bytes, through a stream socket (more
      // than the agent's stdin window of 4 x 32 KiB: the window has to turn
      // over). A launcher that never reads it (main's gave /dev/null) must
      // not hang the test: closing the read end ends the writer (EPIPE,
      // MSG_NOSIGNAL).
      const std::string first = "hi-" + random_token();
      int p[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) == 0);
      REQUIRE(::shutdown(p[0], SHUT_WR) == 0);
      v.stdin_fd = p[0];
      std::thread writer([w = p[1], first] {
        std::string data = first + "\n" + std::string(200000, 'x');
        std::size_t off = 0;
        while (off < data.size()) {
          ssize_t n = ::send(w, data.data() + off, data.size() - off, MSG_NOSIGNAL);
          if (n <= 0) break;
          off += static_cast<std::size_t>(n);
        }
        ::close(w);
      });
      auto r = run_vm(fx,
                      "read -r line; echo \"@@first=$line\"; echo \"@@rest=$(wc -c)\"\n"
                      "echo \"@@uid=$(id -u)\"\n"
                      "( echo x > a.pem ) 2>/dev/null; echo @@pem=$?\n"
                      "echo y > a.txt; echo @@txt=$?\n"
                      "mkdir -p d/e && ( echo k > d/e/.env ) 2>/dev/null; echo @@nested=$?\n"
                      "mkdir .husky 2>/dev/null; echo @@husky=$?\n"
                      "mkdir -p sub/.vscode 2>/dev/null; echo @@vscode=$?\n" +
                          py_calls(R"(
t('rename_bad', lambda: os.rename('a.txt', 'm.pem'))
t('link_bad', lambda: os.link('plain.txt', 'hard.key'))
t('symlink_bad', lambda: os.symlink('plain.txt', 'ln.pem'))
t('mkdir_bad', lambda: os.mkdir('dir.pem'))
def tmp():
    fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600); os.write(fd, b'T'); return fd
try:
    a = tmp(); b = tmp(); print('@@tmpfile=ok', flush=True)
except OSError as e:
    a = None; print('@@tmpfile=%s' % errno.errorcode.get(e.errno, e.errno), flush=True)
def empty(name):
    if libc.linkat(b, b'', -100, name.encode(), 0x1000) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
if a is not None:
    t('tmpfile_proc_bad', lambda: os.link('/proc/self/fd/%d' % a, 'tmp.pem', follow_symlinks=True))
    t('tmpfile_empty_bad', lambda: empty('tmp2.pem'))
    t('tmpfile_ok', lambda: empty('tmp2.txt'))
t('rename_ok', lambda: os.rename('a.txt', 'b.txt'))
t('landlock_sys', lambda: open('/sys/kernel/uevent_seqnum').read())
def sys_call(nr, *args):
    if libc.syscall(nr, *args) < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
t('l6_unshare_user', lambda: sys_call(272, 0x10000000))
t('l6_keyctl', lambda: sys_call(250, 0, -3, 0))
t('l6_bpf', lambda: sys_call(321, 0, 0, 0))
)"),
                      v);
      ::close(p[0]);
      writer.join();
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("kernel") == image_kernel());
      CHECK(r.get("uid") != "0");
      // stdin
      CHECK(r.get("first") == first);
      CHECK(r.get("rest") == "200000");
      // P7 in the guest: every variant denied, the allowed twins work.
      CHECK(r.get("pem") != "0");
      CHECK(r.get("txt") == "0");
      CHECK(r.get("nested") != "0");
      // P5 names absent at launch: the broker's absent_denied entries.
      CHECK(r.get("husky") != "0");
      CHECK(r.get("vscode") != "0");
      CHECK_FALSE(file_exists(fx.work + "/.husky"));
      CHECK_FALSE(file_exists(fx.work + "/sub/.vscode"));
      for (const char* k : {"rename_bad", "link_bad", "symlink_bad", "mkdir_bad"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      // O_TMPFILE + linkat: the guest's 9p client has no O_TMPFILE (a
      // writable share cannot hold an unnamed file at all); where it has,
      // the broker decides the link's name.
      if (r.get("tmpfile") == "ok") {
        CHECK(r.get("tmpfile_proc_bad") == "EACCES");
        CHECK(r.get("tmpfile_empty_bad") == "EACCES");
        CHECK(r.get("tmpfile_ok") == "ok");
        CHECK(read_file(fx.work + "/tmp2.txt") == "T");
      } else {
        CHECK(r.get("tmpfile") == "ENOTSUP"); // python's name of EOPNOTSUPP
      }
      CHECK(r.get("rename_ok") == "ok");
      for (const char* f : {"/a.pem", "/m.pem", "/hard.key", "/ln.pem", "/dir.pem", "/tmp.pem", "/tmp2.pem", "/d/e/.env"})
        CHECK_FALSE(file_exists(fx.work + f));
      CHECK(read_file(fx.work + "/b.txt") == "y\n");
      // The violations reach the session's --events, with the rule.
      CHECK(violation_reason(fx, "file-write-create", fx.work + "/a.pem") == "P7: name matches *.pem");
      CHECK(has_violation(fx, "file-write-create", fx.work + "/d/e/.env"));
      CHECK(has_violation(fx, "file-write-create", fx.work + "/hard.key"));
      // X2: the guest's Landlock layer applied (the handle says so) and
      // denies a read outside its rx paths (a file of the guest's /sys,
      // world-readable there).
      CHECK(r.get("landlock_sys") == "EACCES");
      // L6 in the guest: the baseline filter bwrap applies on a host (a new
      // user namespace, the keyring, eBPF: EPERM from the filter).
      CHECK(r.get("l6_unshare_user") == "EPERM");
      CHECK(r.get("l6_keyctl") == "EPERM");
      CHECK(r.get("l6_bpf") == "EPERM");
      CHECK_THAT(read_file(handle), Catch::Contains("\"landlock\":\"abi "));
    }
  }
}

namespace {

class terminal_session {
public:
  terminal_session(const sandbox_fixture& fx, std::vector<std::string> args) {
    winsize ws{30, 100, 0, 0};
    std::vector<std::string> env = fx.env();
    env.push_back("TERM=xterm");
    env.push_back("CCSB_MICROVM_ACCEL=tcg");
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
  bool read_until(const std::string& marker, int timeout_ms = 30000) {
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
    REQUIRE(::ioctl(master_, TIOCSWINSZ, &ws) == 0);
  }
  std::optional<int> wait_exit(int timeout_ms = 60000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        ssize_t n = ::read(master_, buf, sizeof buf);
        if (n > 0) {
          seen_.append(buf, static_cast<std::size_t>(n));
          continue;
        }
      }
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

TEST_CASE("X4 T4: a PTY session in the guest runs bash -i with job control, Ctrl-C and resize", "[X4][T4][microvm]") {
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged launcher" : "root launcher")) {
      sandbox_fixture fx;
      REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
      std::vector<std::string> argv = unprivileged ? as_nobody() : std::vector<std::string>{};
      argv.insert(argv.end(), {ccsb_run_path(), "--backend", "microvm", "--events", fx.events, "--", "/bin/bash", "--norc",
                               "--noprofile", "-i"});
      if (unprivileged) hand_to_sandbox_uid(fx.base);
      terminal_session t(fx, argv);
      // Markers are typed split by quotes: the terminal's echo of the typed
      // line never matches, only the command's output does.
      t.type("tty; echo \"@@tty=$?\"; echo \"@@ker\"\"nel=$(uname -r)\"\n");
      REQUIRE(t.read_until("/dev/pts/", 120000));
      CHECK(t.read_until("@@tty=0"));
      CHECK(t.read_until("@@kernel=" + image_kernel()));
      t.type("sleep 100 &\njobs; echo @@jo''bs\n");
      CHECK(t.read_until("Running"));
      CHECK(t.read_until("@@jobs"));
      CHECK(t.output().find("no job control") == std::string::npos);
      t.type("kill %1; sleep 1; jobs; echo @@kil''led\n");
      CHECK(t.read_until("Terminated"));
      CHECK(t.read_until("@@killed"));
      // Ctrl-C reaches the foreground job in the guest, not the shell.
      t.type("bash -c 'echo @@sta\"\"rted; exec sleep 300'\n");
      REQUIRE(t.read_until("@@started"));
      t.type("\x03");
      CHECK(t.read_until("^C"));
      if (!t.read_until("$ ")) FAIL_CHECK("no prompt after ^C; output so far:\n" << t.output());
      t.type("echo \"@@rc=$?\"\n");
      CHECK(t.read_until("@@rc=130"));
      t.resize(42, 132);
      bool resized = false;
      for (int i = 0; i < 40 && !resized; ++i) {
        t.type("stty size\n");
        resized = t.read_until("42 132", 1000);
      }
      CHECK(resized);
      t.type("exit 7\n");
      CHECK(t.wait_exit() == 7);
      UNSCOPED_INFO(t.output());
    }
  }
}
