// init_exec — [S7][X2] a test-only launcher for tests that run ccsb-init under a bwrap
// command line of their own (a deliberately wrong plan, X2): it starts the
// sandbox with the exec channel at descriptor 3, sends one exec request
// (ccsb/protocol/supervisor.hpp) with its own stdin/stdout/stderr, and exits
// with the command's status.
//
//   init_exec WORKDIR ARGC ARG... -- SANDBOX_ARGV...
//
// SANDBOX_ARGV must end in `ccsb-init --exec-channel 3 [options]`. Exit: the
// command's code (128+signal when killed), 125 when the sandbox failed
// (init-failed, or it exited first), 126/127 when the exec did not start.
// INIT_EXEC_STDIO=N sends N of its stdio descriptors instead of 3 (a request
// the supervisor must refuse, with exec-failed).
#include "ccsb/sys/seqpacket.hpp"
#include "ccsb/protocol/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace P = ccsb::protocol;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: init_exec WORKDIR ARGC ARG... -- SANDBOX_ARGV...\n");
    return 2;
  }
  P::exec_request rq;
  rq.id = 1;
  rq.workdir = argv[1];
  int n = std::atoi(argv[2]);
  int i = 3;
  for (int k = 0; k < n && i < argc; ++k) rq.argv.emplace_back(argv[i++]);
  if (i >= argc || std::string(argv[i]) != "--" || static_cast<int>(rq.argv.size()) != n || n < 1) {
    std::fprintf(stderr, "init_exec: expected ARGC arguments, then --\n");
    return 2;
  }
  ++i;
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return 125;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(sp[1], 3); // dup2 clears close-on-exec on 3
    ::execv(argv[i], argv + i);
    std::perror("init_exec: exec of the sandbox");
    ::_exit(125);
  }
  ::close(sp[1]);
  auto finish = [&](int code) {
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    return code;
  };
  bool sent = false;
  for (;;) {
    pollfd p{sp[0], POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) continue;
    auto d = ccsb::sys::recv_datagram(sp[0], P::kMaxMessage);
    if (d.error == EAGAIN) continue;
    if (d.eof || d.error) {
      std::fprintf(stderr, "init_exec: the sandbox closed the exec channel\n");
      return finish(125);
    }
    auto m = P::decode_supervisor(d.text, d.fds.size());
    ccsb::sys::close_all(d.fds);
    if (!m) {
      std::fprintf(stderr, "init_exec: bad message: %s\n", m.err().what().c_str());
      return finish(125);
    }
    if (std::holds_alternative<P::supervisor_ready>(*m) && !sent) {
      sent = true;
      std::vector<int> stdio{0, 1, 2};
      if (const char* n = std::getenv("INIT_EXEC_STDIO")) stdio.resize(std::min<std::size_t>(3, std::strtoul(n, nullptr, 10)));
      if (!ccsb::sys::send_datagram(sp[0], P::encode(P::launcher_message{rq}), stdio)) return finish(125);
    } else if (auto* f = std::get_if<P::init_failed>(&*m)) {
      std::fprintf(stderr, "init_exec: init-failed: %s\n", f->reason.c_str());
      return finish(125);
    } else if (auto* x = std::get_if<P::exec_failed>(&*m)) {
      std::fprintf(stderr, "init_exec: exec-failed: %s\n", x->reason.c_str());
      return finish(x->code);
    } else if (auto* e = std::get_if<P::exec_exited>(&*m)) {
      return finish(e->signaled ? 128 + e->value : e->value);
    }
  }
}
