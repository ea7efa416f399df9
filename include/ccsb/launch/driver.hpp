// ccsb/launch/driver.hpp — what a session needs from a backend (launcher
// only). The session (session.hpp) owns the state machine, the events, the
// output pipes and the deadlines; a driver owns the sandbox:
//
//   start(reactor, sink)   prepare (run dir, limits, egressd, policy rendering)
//                          and spawn the sandbox; returns once spawned, then
//                          reports ready() or failed() through the sink
//   exec(spec)             start one command in the live sandbox; reports
//                          started / exec_failed / exited through the sink
//   queues_exec()          whether exec() may come before ready (bwrap: the
//                          exec channel holds it until ccsb-init serves it)
//   signal(id, sig)        signal an exec's process group (and its session)
//   terminal_resized(id, size)  a terminal exec's new size (T4)
//   freeze(on)             suspend or resume everything in the sandbox
//   adopt(fd)              make a pipe end usable by the sandbox's uid
//   destroy()              synchronous, idempotent teardown: nothing of the
//                          session is left afterwards (processes, egressd,
//                          placeholders, run dir, cgroups)
//
// Drivers: bwrap_driver.hpp (native, Linux) and none_driver.hpp (B8: the
// command on the host); macos/seatbelt_driver.hpp (macOS, passed to session::start by its caller) renders
// only after egressd's `ready` has named its ports, which start() allows: it
// reports ready() when it is.
#pragma once

#include "ccsb/environment.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/reactor.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "ccsb/spec.hpp"

#include <picojson.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ccsb::launch {

using exec_id = protocol::exec_id;

struct exec_spec {
  exec_id id{0};
  std::vector<std::string> argv;
  std::string workdir;                            // absolute (the session's when the caller gave none)
  env_list env;                                   // additions, already checked (E3)
  std::optional<protocol::terminal_size> terminal; // T4: a pseudo-terminal instead of the three below
  int stdin_fd{-1};
  int stdout_fd{-1};
  int stderr_fd{-1};
};

struct driver_sink {
  std::function<void()> ready;
  std::function<void(error)> failed; // the sandbox did not come up, or went away
  std::function<void(exec_id, std::int64_t pid, unique_fd master)> started;
  std::function<void(exec_id, int code, std::string reason)> exec_failed;
  std::function<void(exec_id, int status)> exited; // a wait status (WIFEXITED/WIFSIGNALED)
  std::function<void(std::optional<exec_id>, sandbox_violation)> violation;
  std::function<void(const std::string& key, picojson::value)> detail;
  std::function<void(const std::string&)> log;
};

class driver {
public:
  virtual ~driver() = default;
  virtual result<void> start(reactor& r, driver_sink& sink) = 0;
  virtual result<void> exec(const exec_spec& spec) = 0;
  // Whether exec() may be called after a successful start() and before
  // ready: the request then waits until the sandbox serves it.
  virtual bool queues_exec() const { return false; }
  virtual result<void> signal(exec_id id, int sig) = 0;
  // A terminal exec's new size, after the session set it on the master it
  // holds. Drivers whose master is the command's own terminal need nothing;
  // microvm's master is a host pty relayed to the guest's (it sends the size).
  virtual void terminal_resized(exec_id, protocol::terminal_size) {}
  virtual result<void> freeze(bool on) = 0;
  virtual result<void> adopt(int fd) = 0;
  // The workdir of an exec that names none.
  virtual std::string default_workdir() const = 0;
  virtual void destroy() = 0;
};

} // namespace ccsb::launch
