// init/pty/relay.hpp — a pseudo-terminal for the command (T4).
//
//   become_pty_session(options) -> returns in the child, never in the parent
//
// A checklist; a failing step is an error for ccsb-init to report:
//   1. open a pseudo-terminal pair in the sandbox's own devpts instance
//      (bwrap --dev), sized as the user's terminal is;
//   2. fork. The child becomes a session leader whose controlling terminal
//      is the pair's slave, on descriptors 0, 1 and 2, and returns: it goes
//      on as the supervisor (broker) or becomes the command, so job control,
//      `tty`, SIGWINCH and Ctrl-C work as on a host terminal, and TIOCSTI
//      (denied by L6 anyway) could only reach this terminal;
//   3. the parent is the relay and never returns: the launcher's input
//      (ccsb-init's stdin) to the master, the master to ccsb-init's stdout,
//      `resize` lines from the control pipe (ccsb/protocol/pty_control.hpp)
//      to TIOCSWINSZ on the master (the kernel then signals SIGWINCH to the
//      terminal's foreground process group). When the child exits the relay
//      drains what the terminal still holds and exits with the child's
//      status (a signal death is re-raised).
#pragma once

#include "ccsb/result.hpp"

#include <cstdint>

namespace ccsb::init {

struct pty_options {
  int control_fd{-1};      // resize lines from the launcher (-1: none)
  std::uint16_t rows{0};   // initial size (0: leave the default)
  std::uint16_t cols{0};
  int status_fd{-1};       // the relay closes its copy (EOF means "exec'd")
};

result<void> become_pty_session(const pty_options& o);

} // namespace ccsb::init
