// init/broker/supervise.hpp — ccsb-init as the command's supervisor when the
// session has creation rules (X1).
//
//   run_supervised(command, rules, status_fd) -> never returns
//
// A checklist; a failed step writes init-failed and exits 125:
//   1. build the notification filter (filter.hpp) in the supervisor;
//   2. make the supervisor non-dumpable (the command, same uid, can neither
//      ptrace it nor read its memory or take its descriptors, so the
//      listener stays the broker's) and block the signals it handles through
//      a signalfd;
//   3. fork the command: it installs the filter (so it, and everything it
//      starts, runs under it; the supervisor does not), hands the listener
//      back over a socketpair, and execs; an exec failure comes back over a
//      close-on-exec pipe (exec-failed, 127/126);
//   4. write command-started, then answer notifications (notify_loop.hpp)
//      and forward SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
//      SIGWINCH, SIGCONT and SIGTSTP to the command;
//   5. when the command exits, exit with its status (a signal death is
//      re-raised, so bwrap reports the same status the command had).
// Each denial is a `violation` line on the status descriptor.
#pragma once

#include "ccsb/broker/decide.hpp"

#include <string>
#include <vector>

namespace ccsb::init {

[[noreturn]] void run_supervised(std::vector<std::string> command, ccsb::broker::rule_set rules, int status_fd);

// One line of protocol/supervisor.hpp on the status descriptor.
void report_line(int status_fd, const std::string& line);

} // namespace ccsb::init
