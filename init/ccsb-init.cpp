// ccsb-init — the first program of ours inside the bubblewrap sandbox (L3).
//
//   ccsb-init [--status-fd N] [--socat PATH] [--bridge HOST:PORT=SOCKET]...
//             [--broker-root PATH... --broker-name GLOB... --broker-git on|off --broker-unix on|off]
//             -- COMMAND [ARG...]
//
// A checklist (nsjail's containProc habit); each step says what failed, with
// errno, and the run stops there:
//   1. parse the options (no shell, argv only);
//   2. start one socat per bridge: TCP-LISTEN on 127.0.0.1:PORT inside the
//      sandbox's network namespace, relaying to egressd's Unix socket in the
//      directory the launcher bound in (SOCKET). egressd starts at the same
//      time as bwrap, so its sockets may not exist yet; socat connects to
//      SOCKET only per relayed connection, so it can start first;
//   3. wait (bounded: kBridgeWaitMs, failing early if a socat exits) until
//        * every egressd socket accepts a connection (a Unix connect probe;
//          egressd sees a connection that closes at once), and
//        * every bridge accepts: its address is a listening TCP socket in
//          this network namespace (asked from the kernel through sock_diag
//          netlink; the kernel completes the handshake of a listening
//          socket). A connect probe is the fallback when that query fails;
//          it is not the default because socat would fork a relay (and open
//          an egressd connection) for every probe.
//      Polling starts at 50 us and doubles up to 1 ms: no fixed sleep;
//   4. report "bridges-ready" on the status descriptor;
//   5. mark every descriptor above stderr close-on-exec (close_range, then
//      /proc/self/fd) so the command inherits only stdin/stdout/stderr;
//   6. with creation rules (any --broker-* option, X1): stay as the
//      command's supervisor and broker (broker/supervise.hpp): the command
//      runs under the notification filter, ccsb-init answers it, reports
//      "command-started" and each denial as a "violation" line, and exits
//      with the command's status. Without them:
//   7. execvp the command. The status descriptor closes on success (the
//      launcher sees EOF = the command runs); on failure "exec-failed" is
//      written to it and ccsb-init exits 127 (126 when not executable).
// Every line on the status descriptor is a ccsb/protocol/supervisor.hpp
// message.
//
// PID 1 decision (without creation rules): ccsb-init does not stay as a
// supervisor and is not PID 1.
// bwrap (without --as-pid-1) keeps its own small init as PID 1 of the
// sandbox's PID namespace, which reaps orphans; ccsb-init runs as its child,
// forks the socat bridges and then *becomes* the command (execvp), so the
// command's exit status is what bwrap reports. The socats stay children of
// the command's process; when the command exits, bwrap's PID 1 exits and the
// kernel kills everything left in the PID namespace, bridges included (they
// also carry PR_SET_PDEATHSIG). The next issue's seccomp supervisor slots in
// between steps 5 and 6 (it does: step 6).
#include "broker/supervise.hpp"
#include "ccsb/broker/decide.hpp"
#include "ccsb/protocol/supervisor.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr long kBridgeWaitMs = 10000;
constexpr long kFirstProbeUs = 50;
constexpr long kMaxProbeUs = 1000;

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
  bool broker{false};
  ccsb::broker::rule_set rules{{}, {}, false, false};
};

[[noreturn]] void fail(const options& o, const std::string& what, int code = 125) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  if (o.status_fd >= 0) ccsb::init::report_line(o.status_fd, ccsb::protocol::write_line(ccsb::protocol::init_failed{what}));
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
    } else if (ccsb::broker::is_broker_option(a)) {
      const char* v = need(a.c_str());
      if (!v) return false;
      if (auto r = ccsb::broker::parse_arg(o.rules, a, v); !r) {
        err = r.err().what();
        return false;
      }
      o.broker = true;
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

// The TCP sockets in LISTEN state in this network namespace, as
// (raw network-order IPv4 address, port), from the kernel's sock_diag
// netlink interface (a dump restricted to TCPF_LISTEN walks only the
// listening hash; /proc/net/tcp would walk the whole, host-sized established
// hash on every poll). nullopt when the query fails.
std::optional<std::vector<std::pair<std::uint32_t, int>>> tcp_listeners() {
  int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (s < 0) return std::nullopt;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 r;
  } req{};
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.r.sdiag_family = AF_INET;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = 1U << 10; // TCP_LISTEN
  sockaddr_nl nl{};
  nl.nl_family = AF_NETLINK;
  if (sendto(s, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&nl), sizeof nl) != static_cast<ssize_t>(sizeof req)) {
    close(s);
    return std::nullopt;
  }
  std::vector<std::pair<std::uint32_t, int>> out;
  alignas(nlmsghdr) char buf[8192];
  for (;;) {
    ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(s);
      return std::nullopt;
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        close(s);
        return out;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        close(s);
        return std::nullopt;
      }
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      if (m->idiag_state == 10) out.emplace_back(m->id.idiag_src[0], ntohs(m->id.idiag_sport));
    }
  }
}

bool unix_accepts(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    close(s);
    return false;
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  bool okay = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return okay;
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

  // 3. wait until each egressd socket and each bridge accepts, bounded
  {
    std::vector<bool> socket_ok(o.bridges.size(), false), bridge_ok(o.bridges.size(), false);
    timespec t0{};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long pause_us = kFirstProbeUs;
    for (;;) {
      bool all = true;
      std::optional<std::vector<std::pair<std::uint32_t, int>>> listeners;
      bool asked = false;
      for (std::size_t i = 0; i < o.bridges.size(); ++i) {
        const auto& b = o.bridges[i];
        if (!socket_ok[i]) socket_ok[i] = unix_accepts(b.socket);
        if (!bridge_ok[i]) {
          if (!asked) {
            listeners = tcp_listeners();
            asked = true;
          }
          if (listeners) {
            in_addr a{};
            inet_pton(AF_INET, b.host.c_str(), &a);
            for (const auto& [addr, port] : *listeners)
              if (addr == a.s_addr && port == b.port) bridge_ok[i] = true;
          } else {
            bridge_ok[i] = accepts(b);
          }
        }
        all = all && socket_ok[i] && bridge_ok[i];
        int status = 0;
        if (!bridge_ok[i] && waitpid(b.pid, &status, WNOHANG) == b.pid)
          fail(o, "socat bridge " + b.host + ":" + std::to_string(b.port) + " -> " + b.socket + " exited (status " +
                      std::to_string(status) + ")");
      }
      if (all) break;
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      long waited_ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
      if (waited_ms >= kBridgeWaitMs) {
        for (std::size_t i = 0; i < o.bridges.size(); ++i) {
          const auto& b = o.bridges[i];
          if (!socket_ok[i])
            fail(o, "egressd socket " + b.socket + " did not accept a connection within " +
                        std::to_string(kBridgeWaitMs) + " ms");
          if (!bridge_ok[i])
            fail(o, "socat bridge " + b.host + ":" + std::to_string(b.port) + " did not accept within " +
                        std::to_string(kBridgeWaitMs) + " ms");
        }
      }
      usleep(static_cast<useconds_t>(pause_us));
      pause_us = pause_us * 2 > kMaxProbeUs ? kMaxProbeUs : pause_us * 2;
    }
  }

  // 4. report
  ccsb::init::report_line(o.status_fd, ccsb::protocol::write_line(ccsb::protocol::bridges_ready{}));

  // 5. descriptors
  if (!mark_cloexec_above_stderr()) fail(o, errno_text("close_range(3, ~0, CLOSE_RANGE_CLOEXEC) and /proc/self/fd"));

  // 6. supervise (creation rules)
  if (o.broker) ccsb::init::run_supervised(o.command, o.rules, o.status_fd);

  // 7. exec the command
  std::vector<char*> cargv;
  for (auto& a : o.command) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  int e = errno;
  std::string msg = o.command[0] + ": " + std::strerror(e);
  std::fprintf(stderr, "ccsb-init: exec-failed: %s\n", msg.c_str());
  ccsb::init::report_line(o.status_fd, ccsb::protocol::write_line(ccsb::protocol::exec_failed{msg}));
  std::_Exit(e == ENOENT ? 127 : 126);
}
