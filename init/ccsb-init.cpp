// ccsb-init — the first program of ours inside the bubblewrap sandbox (L3).
//
//   ccsb-init [--status-fd N] [--socat PATH] [--bridge HOST:PORT=SOCKET]... -- COMMAND [ARG...]
//
// A checklist (nsjail's containProc habit); each step says what failed, with
// errno, and the run stops there:
//   1. parse the options (no shell, argv only);
//   2. start one socat per bridge: TCP-LISTEN on 127.0.0.1:PORT inside the
//      sandbox's network namespace, relaying to egressd's Unix socket that the
//      launcher bound in (SOCKET);
//   3. wait until every bridge accepts a connection (connect probe, bounded:
//      kBridgeWaitMs), failing early if a socat exits;
//   4. report "bridges-ready" on the status descriptor;
//   5. mark every descriptor above stderr close-on-exec (close_range, then
//      /proc/self/fd) so the command inherits only stdin/stdout/stderr;
//   6. execvp the command. The status descriptor closes on success (the
//      launcher sees EOF = the command runs); on failure "exec-failed: ..." is
//      written to it and ccsb-init exits 127 (126 when not executable).
//
// PID 1 decision: ccsb-init does not stay as a supervisor and is not PID 1.
// bwrap (without --as-pid-1) keeps its own small init as PID 1 of the
// sandbox's PID namespace, which reaps orphans; ccsb-init runs as its child,
// forks the socat bridges and then *becomes* the command (execvp), so the
// command's exit status is what bwrap reports. The socats stay children of
// the command's process; when the command exits, bwrap's PID 1 exits and the
// kernel kills everything left in the PID namespace, bridges included (they
// also carry PR_SET_PDEATHSIG). The next issue's seccomp supervisor slots in
// between steps 5 and 6.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

namespace {

constexpr int kBridgeWaitMs = 10000;
constexpr int kProbeIntervalMs = 10;

struct bridge {
  std::string host;
  int port{0};
  std::string socket;
  pid_t pid{-1};
};

struct options {
  int status_fd{-1};
  std::string socat{"/usr/bin/socat"};
  std::vector<bridge> bridges;
  std::vector<std::string> command;
};

void report(int fd, const std::string& line) {
  if (fd < 0) return;
  std::string l = line + "\n";
  const char* p = l.data();
  std::size_t n = l.size();
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

[[noreturn]] void fail(const options& o, const std::string& what, int code = 125) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  report(o.status_fd, "init-failed: " + what);
  std::_Exit(code);
}

std::string errno_text(const std::string& call) { return call + ": " + std::strerror(errno); }

bool parse(int argc, char** argv, options& o, std::string& err) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        err = std::string(name) + " needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    } else if (a == "--status-fd") {
      const char* v = need("--status-fd");
      if (!v) return false;
      char* end = nullptr;
      long fd = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || fd < 0 || fd > 65535) {
        err = "--status-fd: not a descriptor number";
        return false;
      }
      o.status_fd = static_cast<int>(fd);
    } else if (a == "--socat") {
      const char* v = need("--socat");
      if (!v) return false;
      o.socat = v;
    } else if (a == "--bridge") {
      const char* v = need("--bridge");
      if (!v) return false;
      std::string s = v;
      auto eq = s.find('=');
      auto colon = s.rfind(':', eq);
      if (eq == std::string::npos || colon == std::string::npos || colon == 0) {
        err = "--bridge: expected HOST:PORT=SOCKET, got \"" + s + "\"";
        return false;
      }
      bridge b;
      b.host = s.substr(0, colon);
      b.port = std::atoi(s.substr(colon + 1, eq - colon - 1).c_str());
      b.socket = s.substr(eq + 1);
      in_addr tmp{};
      if (b.port <= 0 || b.port > 65535 || inet_pton(AF_INET, b.host.c_str(), &tmp) != 1 || b.socket.empty() ||
          b.socket.front() != '/') {
        err = "--bridge: expected IPv4:PORT=/absolute/socket, got \"" + s + "\"";
        return false;
      }
      o.bridges.push_back(b);
    } else {
      err = "unknown option \"" + a + "\"";
      return false;
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.command.empty()) {
    err = "no command after --";
    return false;
  }
  return true;
}

pid_t start_bridge(const options& o, const bridge& b) {
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: dies with ccsb-init/the command; quiet stdin/stdout; stderr kept
  // for socat's own error lines.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) std::_Exit(1);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
  }
  std::string listen = "TCP-LISTEN:" + std::to_string(b.port) + ",bind=" + b.host + ",fork,reuseaddr";
  std::string connect = "UNIX-CONNECT:" + b.socket;
  std::vector<char*> argv{const_cast<char*>("socat"), listen.data(), connect.data(), nullptr};
  execv(o.socat.c_str(), argv.data());
  std::fprintf(stderr, "ccsb-init: execv %s: %s\n", o.socat.c_str(), std::strerror(errno));
  std::_Exit(127);
}

bool accepts(const bridge& b) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(b.port));
  inet_pton(AF_INET, b.host.c_str(), &a.sin_addr);
  bool okay = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return okay;
}

// Step 5: close_range(CLOSE_RANGE_CLOEXEC) -> /proc/self/fd (fallback chain).
bool mark_cloexec_above_stderr() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
#endif
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != self) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  closedir(d);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  std::string err;
  // 1. parse
  if (!parse(argc, argv, o, err)) fail(o, err, 125);
  if (o.status_fd >= 0 && fcntl(o.status_fd, F_SETFD, FD_CLOEXEC) != 0)
    fail(o, errno_text("fcntl(status fd " + std::to_string(o.status_fd) + ", F_SETFD, FD_CLOEXEC)"));

  // 2. bridges
  for (auto& b : o.bridges) {
    b.pid = start_bridge(o, b);
    if (b.pid < 0) fail(o, errno_text("fork (socat bridge " + b.host + ":" + std::to_string(b.port) + ")"));
  }

  // 3. wait until each bridge accepts, bounded
  for (const auto& b : o.bridges) {
    int waited = 0;
    while (!accepts(b)) {
      int status = 0;
      if (waitpid(b.pid, &status, WNOHANG) == b.pid)
        fail(o, "socat bridge " + b.host + ":" + std::to_string(b.port) + " -> " + b.socket + " exited (status " +
                    std::to_string(status) + ")");
      if (waited >= kBridgeWaitMs)
        fail(o, "socat bridge " + b.host + ":" + std::to_string(b.port) + " did not accept within " +
                    std::to_string(kBridgeWaitMs) + " ms");
      usleep(kProbeIntervalMs * 1000);
      waited += kProbeIntervalMs;
    }
  }

  // 4. report
  report(o.status_fd, "bridges-ready");

  // 5. descriptors
  if (!mark_cloexec_above_stderr()) fail(o, errno_text("close_range(3, ~0, CLOSE_RANGE_CLOEXEC) and /proc/self/fd"));

  // 6. exec the command
  std::vector<char*> cargv;
  for (auto& a : o.command) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  int e = errno;
  std::string msg = "exec-failed: " + o.command[0] + ": " + std::strerror(e);
  std::fprintf(stderr, "ccsb-init: %s\n", msg.c_str());
  report(o.status_fd, msg);
  std::_Exit(e == ENOENT ? 127 : 126);
}
