// init/exec/server.hpp — the exec server: ccsb-init, once the sandbox is
// set up, starts the session's commands (S7).
//
//   serve(options) -> never returns
//
// The launcher sends `exec` and `kill` requests over the exec channel
// (ccsb/protocol/supervisor.hpp); the server is the only process inside that
// holds the channel. A checklist; a failed step writes init-failed and exits
// 125:
//   1. with creation rules (X1), build the notification filter once
//      (broker/filter.hpp); the socket registry is shared by every exec's
//      broker, so a socket one command bound is its own for the next one;
//   2. make the server non-dumpable (a command of the same uid can neither
//      ptrace it nor read its memory nor take its descriptors: the channel
//      and the listeners stay the server's) and take SIGCHLD through a
//      signalfd;
//   3. report `ready`; then serve. For each exec request:
//      a. a pseudo-terminal pair from the sandbox's own devpts instance when
//         the request asks for one (T4);
//      b. fork; the child resets its signals, becomes a session and process
//         group leader (so `kill` reaches what it started, and job control
//         works on its terminal), takes the request's descriptors or the
//         terminal's slave (its controlling tty) as 0-2, changes to the
//         request's workdir, sets the session's environment plus the
//         request's additions, with creation rules installs the filter and
//         hands the listener back, and execs. Every descriptor above 2 is
//         close-on-exec: the command gets nothing else. A failure comes back
//         over a close-on-exec pipe (exec-failed, 127/126, 125 for set-up);
//      c. `started` once the exec happened (with the terminal's master for
//         the launcher, which relays it; the server keeps no copy), `exited`
//         when the process ends, `violation` for each denial of its broker;
//   4. `kill ID SIG` signals the exec's process group and every process of
//      its session (the ones a shell moved into other groups);
//   5. when the channel closes (the launcher destroyed the session or died),
//      the server exits; it is the sandbox's PID 1, so the kernel kills
//      everything left in the sandbox's PID namespace.
#pragma once

#include "ccsb/broker/decide.hpp"

namespace ccsb::init {

struct server_options {
  int channel{-1};
  bool broker{false};
  ccsb::broker::rule_set rules = ccsb::broker::rule_set::none();
};

[[noreturn]] void serve(server_options o);

// A message to the launcher; false when the channel is gone.
bool send_to_launcher(int channel, const std::string& message, int fd = -1);

} // namespace ccsb::init
