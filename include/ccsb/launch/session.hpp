// ccsb/launch/session.hpp — a session (S3, S4, S7): launched once, then
// many exec calls, then destroyed (launcher only; does I/O). The pure
// decisions (backend selection, compile, render) happen before or inside the
// driver; this file holds the state machine, the events and each exec's
// output.
//
//   auto s = session::launch(reactor, request, callbacks); // -> warm (`ready`)
//   auto id = s->exec(argv, {workdir, env, timeout, terminal, stdin_fd});
//   ... reactor.run_once() / run_until(...) ...             // events per exec
//   s->kill(id); s->suspend(); s->resume(); s->destroy();
//
// launch() reads as a checklist:
//   1. `starting`; the handle is created;
//   2. the driver (bwrap_driver.hpp native, none_driver.hpp none) prepares
//      and spawns the sandbox; the session waits in the reactor, so other
//      sessions on the same reactor go on meanwhile;
//   3. the driver reports ready: handle -> warm, `ready` (ready to accept
//      exec calls); or a failure: the reason as a typed error, handle ->
//      error -> destroyed (details.lastError keeps it), `exit` 125.
// exec():
//   1. typed refusals: after destroy (handle_destroyed), while suspended or
//      not yet warm (illegal_transition; while starting, the native Linux
//      driver queues the request instead: can_exec()), an empty argv, a relative workdir
//      or an environment addition E3 would remove (invalid_argument, naming
//      it);
//   2. the command's stdout and stderr are pipes the session reads (each
//      chunk: the output callback and a `stdout`/`stderr` event carrying
//      execId, cut on UTF-8 boundaries); stdin is the caller's descriptor or
//      a pipe fed by write_stdin(); with a terminal (T4) the supervisor
//      opens a pseudo-terminal inside and hands its master back, and the
//      session relays it instead;
//   3. the driver starts it; handle -> active while any exec runs;
//   4. the end: the process exited (or did not start: exec-failed with 126
//      or 127), its output drained (bounded: 2 s after the exit, so a
//      background job holding the pipe cannot hold the exec open), then
//      `exit` with execId and the code (128+signal when killed); a timeout
//      or kill() sends SIGKILL and emits `killed` first.
// Violations carry execId when the broker knows the exec (X1); egressd's
// (N7) carry the session only: the proxy cannot tell which exec connected.
//
// Callbacks: the event, output, handle and log callbacks may call back into
// the session that calls them (destroy it on an exit or a violation, exec
// the next command from the last one's exit, kill on some output). An exec
// has left the session (finished() is true) when its `exit` is emitted, and
// no output of it follows (a violation may: a background process it left
// can still be refused something, and the broker names its exec); a function
// that calls out holds its exec alive through the call; inside destroy() a
// second destroy is a no-op and an exec is refused (handle_destroyed). No
// callback can reach its session before start() returned it. Deleting the
// session from its own callback is not supported.
//
// No process outlives its session: see the drivers' destroy().
#pragma once

#include "ccsb/sys/platform.hpp"
#if !CCSB_LAUNCH_MACOS
#include "ccsb/launch/bwrap_driver.hpp" // the native default (Linux)
#include "ccsb/launch/helpers.hpp"
#endif
#include "ccsb/launch/driver.hpp"
#include "ccsb/launch/none_driver.hpp"
#include "ccsb/launch/reactor.hpp"
#include "ccsb/launch/request.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/spec.hpp"

#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::launch {

// The launcher's terminal in raw mode while an interactive exec runs,
// restored on destruction (also on every error path).
class raw_terminal {
public:
  raw_terminal() = default;
  raw_terminal(const raw_terminal&) = delete;
  raw_terminal& operator=(const raw_terminal&) = delete;
  ~raw_terminal() { restore(); }
  bool enter(int fd) {
    if (::tcgetattr(fd, &saved_) != 0) return false;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(fd, TCSANOW, &raw) != 0) return false;
    fd_ = fd;
    return true;
  }
  void restore() {
    if (fd_ >= 0) ::tcsetattr(fd_, TCSANOW, &saved_);
    fd_ = -1;
  }

private:
  int fd_{-1};
  termios saved_{};
};

struct session_callbacks {
  std::function<void(const sandbox_event&)> event;                      // S5
  std::function<void(exec_id, int stream, std::string_view bytes)> output; // raw bytes (1 stdout, 2 stderr)
  std::function<void(const sandbox_handle&)> handle;                    // after each state change (S3/S4)
  std::function<void(const std::string&)> log;                          // diagnostics
};

struct exec_options {
  std::string workdir;                              // empty: the session's
  env_list env;                                     // added to the session's environment (E3-checked)
  std::optional<std::chrono::milliseconds> timeout; // SIGKILL + `killed` "timeout"
  std::optional<protocol::terminal_size> terminal;  // T4: a pseudo-terminal of this size
  int stdin_fd{-1};                                 // passed as the command's stdin; -1: a pipe (write_stdin)
};

namespace detail {

// Longest prefix of `s` that ends on a UTF-8 sequence boundary.
inline std::size_t utf8_cut(std::string_view s) {
  std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue; // continuation byte
    std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

} // namespace detail

class session {
public:
  // Starts the session and returns at once (state created); `ready` or a
  // failure follows through the callbacks as the reactor runs.
  // `drv`: the backend's driver; nullptr picks it from the request (native:
  // bubblewrap on Linux; none: the host). The macOS driver
  // (macos/seatbelt_driver.hpp) is passed in by its caller.
  static result<std::unique_ptr<session>> start(reactor& r, session_request req, session_callbacks cb,
                                                 std::unique_ptr<driver> drv = nullptr) {
    std::unique_ptr<session> s(new session(r, std::move(req), std::move(cb)));
    s->driver_ = std::move(drv);
    if (auto st = s->begin(); !st) return std::move(st).err();
    return s;
  }

  // start(), then runs the reactor until the session is warm or failed.
  static result<std::unique_ptr<session>> launch(reactor& r, session_request req, session_callbacks cb,
                                                  std::unique_ptr<driver> drv = nullptr) {
    auto s = start(r, std::move(req), std::move(cb), std::move(drv));
    if (!s) return s;
    session* p = s->get();
    if (auto w = r.run_until([p] { return p->handle_.state() != sandbox_state::created; }); !w) {
      p->fail_start(w.err());
      return std::move(w).err();
    }
    if (p->handle_.state() != sandbox_state::warm) {
      if (p->start_error_) return *p->start_error_;
      return make_error(errc::handle_destroyed, "session", "destroyed before it was ready");
    }
    return s;
  }

  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() { destroy(); }

  const sandbox_handle& handle() const { return handle_; }
  // Whether exec() is accepted now: warm or active, or still starting with a
  // driver that queues the request until the sandbox is ready (the native
  // Linux driver; the session goes active once `ready` has been reported,
  // and a start that fails ends the queued exec with the start's error).
  bool can_exec() const {
    const auto st = handle_.state();
    return st == sandbox_state::warm || st == sandbox_state::active ||
           (st == sandbox_state::created && !start_error_ && driver_ && driver_->queues_exec());
  }
  const std::string& id() const { return req_.session_id; }
  // The start failure, once the session is in error or destroyed without having been warm.
  const std::optional<error>& start_error() const { return start_error_; }

  result<exec_id> exec(std::vector<std::string> argv, exec_options o) {
    if (handle_.state() == sandbox_state::destroyed || destroying_)
      return make_error(errc::handle_destroyed, "session", "exec after destroy (session " + req_.session_id + ")");
    if (handle_.state() == sandbox_state::suspended)
      return make_error(errc::illegal_transition, "session", "exec while suspended; resume first");
    if (!can_exec())
      return make_error(errc::illegal_transition, "session",
                        "exec in state " + std::string(to_string(handle_.state())) + "; the session is not ready");
    if (argv.empty() || argv[0].empty()) return make_error(errc::invalid_argument, "argv", "no command");
    if (o.workdir.empty()) o.workdir = driver_->default_workdir();
    if (o.workdir.front() != '/') return make_error(errc::invalid_argument, "workdir", "not an absolute path: " + o.workdir);
    for (const auto& v : o.env) {
      // E3 holds for additions too: nothing it would remove from an inherited
      // environment (credentials, injection variables, proxy overrides) gets in.
      auto why = environment_removal_reason(v.name, v.value);
      if (!why.empty()) return make_error(errc::invalid_argument, "env." + v.name, std::string(why));
    }
    const exec_id id = ++next_exec_;
    auto x = std::make_unique<running>();
    x->id = id;
    x->terminal = o.terminal;
    exec_spec spec{id, std::move(argv), o.workdir, std::move(o.env), o.terminal, -1, -1, -1};
    unique_fd out_w, err_w, in_r, null;
    if (!o.terminal) {
      auto out = make_pipe();
      if (!out) return std::move(out).err();
      auto err = make_pipe();
      if (!err) return std::move(err).err();
      for (int fd : {out->write.get(), err->write.get()})
        if (auto a = driver_->adopt(fd); !a) return std::move(a).err();
      x->streams[0].fd = std::move(out->read);
      x->streams[1].fd = std::move(err->read);
      out_w = std::move(out->write);
      err_w = std::move(err->write);
      if (o.stdin_fd >= 0) {
        spec.stdin_fd = o.stdin_fd;
      } else {
        auto in = make_pipe();
        if (!in) return std::move(in).err();
        in_r = std::move(in->read);
        x->input = std::move(in->write);
        spec.stdin_fd = in_r.get();
      }
      spec.stdout_fd = out_w.get();
      spec.stderr_fd = err_w.get();
    }
    if (auto e = driver_->exec(spec); !e) return std::move(e).err();
    running* raw = x.get();
    for (int i = 0; i < 2 && !o.terminal; ++i) {
      auto& s = raw->streams[i];
      ::fcntl(s.fd.get(), F_SETFL, O_NONBLOCK);
      s.open = true;
      s.token = r_.watch(s.fd.get(), [this, id, i](short) { on_output(id, i); });
    }
    if (raw->input) ::fcntl(raw->input.get(), F_SETFL, O_NONBLOCK);
    if (o.timeout)
      raw->timer = r_.after(*o.timeout, [this, id] {
        if (auto it = execs_.find(id); it != execs_.end()) it->second->timer = 0;
        (void)kill_exec(id, "timeout");
      });
    execs_.emplace(id, std::move(x));
    if (handle_.state() == sandbox_state::warm) {
      (void)handle_.transition(sandbox_state::active);
      publish();
    }
    return id;
  }

  // Bytes for an exec's stdin (its pipe, or its terminal); buffered, written
  // as the command reads.
  result<void> write_stdin(exec_id id, std::string_view data) {
    auto* x = find(id);
    if (!x) return make_error(errc::invalid_argument, "execId", "no running exec " + std::to_string(id));
    // A terminal exec's master arrives with `started`; input until then is
    // buffered and written when it does.
    const bool waiting = x->terminal && !x->started;
    int fd = x->master ? x->master.get() : x->input.get();
    if (fd < 0 && !waiting)
      return make_error(errc::invalid_argument, "stdin", "exec " + std::to_string(id) + " has no open stdin");
    x->pending.append(data);
    flush_input(*x);
    return ok();
  }

  // End of input: the pipe closes once what is buffered is written (a
  // terminal gets its EOF character instead).
  result<void> close_stdin(exec_id id) {
    auto* x = find(id);
    if (!x) return make_error(errc::invalid_argument, "execId", "no running exec " + std::to_string(id));
    if (x->terminal) return write_stdin(id, "\x04");
    x->close_input = true;
    flush_input(*x);
    return ok();
  }

  result<void> resize(exec_id id, std::uint16_t rows, std::uint16_t cols) {
    auto* x = find(id);
    if (!x) return make_error(errc::invalid_argument, "execId", "no running exec " + std::to_string(id));
    if (!x->terminal) return make_error(errc::invalid_argument, "pty", "exec " + std::to_string(id) + " has no terminal");
    if (rows == 0 || cols == 0) return make_error(errc::invalid_argument, "pty", "rows and cols must be 1-65535");
    if (!x->master) { // applied when the master arrives
      x->terminal = protocol::terminal_size{rows, cols};
      x->resize_pending = true;
      return ok();
    }
    winsize ws{};
    ws.ws_row = rows;
    ws.ws_col = cols;
    // The kernel signals SIGWINCH to the terminal's foreground process group.
    if (::ioctl(x->master.get(), TIOCSWINSZ, &ws) != 0) return sys_error("ioctl(TIOCSWINSZ)");
    driver_->terminal_resized(id, protocol::terminal_size{rows, cols});
    return ok();
  }

  // `sig` (SIGKILL unless asked) to the exec's process group and session;
  // `killed` (reason, signal) first. A command may survive another signal:
  // it can be sent again, and SIGKILL after it.
  result<void> kill(exec_id id, std::string reason = "stop", int sig = SIGKILL) {
    if (handle_.state() == sandbox_state::destroyed || destroying_)
      return make_error(errc::handle_destroyed, "session", "kill after destroy");
    if (!find(id)) return make_error(errc::invalid_argument, "execId", "no running exec " + std::to_string(id));
    return kill_exec(id, std::move(reason), sig);
  }

  result<void> suspend() {
    if (handle_.state() == sandbox_state::destroyed || destroying_)
      return make_error(errc::handle_destroyed, "session", "suspend after destroy");
    if (auto t = handle_.transition(sandbox_state::suspended); !t) return t; // S4: only from warm
    if (auto f = driver_->freeze(true); !f) {
      (void)handle_.transition(sandbox_state::warm);
      publish();
      return f;
    }
    publish();
    return ok();
  }

  result<void> resume() {
    if (handle_.state() == sandbox_state::destroyed || destroying_)
      return make_error(errc::handle_destroyed, "session", "resume after destroy");
    if (handle_.state() != sandbox_state::suspended)
      return make_error(errc::illegal_transition, "session", "resume of a session that is not suspended");
    if (auto f = driver_->freeze(false); !f) return f;
    (void)handle_.transition(sandbox_state::warm);
    publish();
    return ok();
  }

  // Synchronous and idempotent: every exec ends (its `exit` is emitted with
  // what it had), the sandbox and egressd go, the handle is destroyed.
  // Callbacks may call back meanwhile (see "Callbacks" above): a destroy
  // from one of them is a no-op, an exec is refused (handle_destroyed), and
  // the execs have left the session before their exits are emitted.
  void destroy() {
    if (handle_.state() == sandbox_state::destroyed || destroying_) return;
    destroying_ = true;
    detach_terminal(); // cooked mode, and the launcher's terminal no longer read
    if (driver_) {
      if (handle_.state() == sandbox_state::suspended) (void)driver_->freeze(false);
      driver_->destroy();
    }
    auto ending = std::move(execs_);
    execs_.clear();
    for (auto& [id, x] : ending) { // an exec in execs_ has not emitted its exit (finish erases it first)
      if (!x->exited) {
        x->exited = true;
        x->status = SIGKILL; // as a wait status: killed by SIGKILL
        // The destroy ended it: said before its exit, as a timeout or kill is.
        if (!x->killed) {
          auto e = sandbox_event::make_killed("destroyed", SIGKILL, req_.session_id);
          e.exec_id = id;
          emit(e);
        }
      }
      drop_sources(*x);
      emit_exit(*x);
    }
    detach_terminal(); // again: a callback meanwhile may have attached one
    if (handle_.state() == sandbox_state::active || handle_.state() == sandbox_state::suspended)
      (void)handle_.transition(sandbox_state::warm);
    (void)handle_.destroy();
    destroying_ = false;
    publish();
  }

  // True once exec `id` has emitted its `exit` (or never existed).
  bool finished(exec_id id) const { return !execs_.count(id); }
  // The exit code of the last exec that finished (128+signal when killed).
  std::optional<int> exit_code(exec_id id) const {
    auto it = codes_.find(id);
    if (it == codes_.end()) return std::nullopt;
    return it->second;
  }
  // How an exec that could not start ended: 126/127 and why.
  std::optional<std::pair<int, std::string>> start_failure(exec_id id) const {
    auto it = start_failures_.find(id);
    if (it == start_failures_.end()) return std::nullopt;
    return it->second;
  }

  // T4: forward the launcher's own terminal to an exec's terminal: raw mode
  // on `tty`, its keystrokes to the exec, and its size on resize_from().
  result<void> attach_terminal(exec_id id, int tty) {
    auto* x = find(id);
    if (!x) return make_error(errc::invalid_argument, "execId", "no running exec " + std::to_string(id));
    detach_terminal(); // one attached terminal at a time: the last one's mode restored first
    const bool raw = raw_.enter(tty);
    attached_ = id;
    attached_tty_ = tty;
    // Not O_NONBLOCK: the flag would stay on the terminal the user's shell
    // shares. One read per readiness never blocks.
    tty_token_ = r_.watch(tty, [this](short ev) { on_tty(ev); });
    if (!raw) log("could not put the terminal in raw mode"); // last: the callback may end the exec
    return ok();
  }
  void resize_from(int tty) {
    winsize ws{};
    if (attached_ && ::ioctl(tty, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
      (void)resize(*attached_, ws.ws_row, ws.ws_col);
  }

private:
  struct stream {
    unique_fd fd;
    std::string carry; // incomplete UTF-8 tail for events
    bool open{false};
    reactor::token token{0};
  };
  struct running {
    exec_id id{0};
    stream streams[2];
    std::optional<protocol::terminal_size> terminal; // T4: asked for (the size, kept until the master arrives)
    bool resize_pending{false};
    unique_fd master; // T4: the terminal's master, read as stdout
    reactor::token master_token{0};
    unique_fd input;  // the stdin pipe's write end (no terminal, no caller fd)
    reactor::token input_token{0};
    std::string pending;
    bool close_input{false};
    bool started{false};
    bool exited{false};
    int status{0};
    bool killed{false};
    bool done{false}; // its `exit` is emitted: nothing of it is reported any more
    reactor::token timer{0};
    reactor::token drain{0};
  };

  session(reactor& r, session_request req, session_callbacks cb)
      : r_(r), req_(std::move(req)), cb_(std::move(cb)), handle_(req_.session_id, req_.chosen) {}

  result<void> begin() {
    emit(sandbox_event::make_starting(req_.session_id));
    detail_str("backend", std::string(to_string(req_.chosen)));
    if (!req_.profile_name.empty()) detail_str("profile", req_.profile_name);
    // P7: the session's exceptions to the creation rule, where it has any.
    if (req_.chosen == backend::native && !req_.pol.create_allow.empty()) {
      picojson::array a;
      for (const auto& g : req_.pol.create_allow) a.emplace_back(g);
      (void)handle_.set_detail("createAllow", picojson::value(std::move(a)));
    }
    if (!driver_ && req_.chosen == backend::native) {
#if CCSB_LAUNCH_MACOS // platform.hpp: the caller passes the Seatbelt driver
      error e = make_error(errc::backend_unavailable, "backend", "no native driver was given (macOS: Seatbelt)");
      fail_start(e);
      return e;
#else
      // L8: the helpers are ones no session could have written (helpers.hpp).
      std::vector<helper_program> helpers{{"bwrap", req_.bwrap_path}, {"ccsb-init", req_.init_path}};
      if (req_.pol.network.kind == network_kind::proxied) helpers.push_back({"egressd", req_.egressd_path});
      if (auto c = check_helpers(req_.pol, helpers); !c) {
        fail_start(c.err());
        return c.err();
      }
      driver_ = std::make_unique<bwrap_driver>(req_); // it reads the request this session keeps
#endif
    } else if (!driver_) {
      driver_ = std::make_unique<none_driver>(req_.host_env, req_.pol.workdir);
    }
    sink_.ready = [this] { on_ready(); };
    sink_.failed = [this](error e) { on_failed(std::move(e)); };
    sink_.started = [this](exec_id id, std::int64_t pid, unique_fd master) { on_started(id, pid, std::move(master)); };
    sink_.exec_failed = [this](exec_id id, int code, std::string why) { on_exec_failed(id, code, std::move(why)); };
    sink_.exited = [this](exec_id id, int status) { on_exited(id, status); };
    sink_.violation = [this](std::optional<exec_id> id, sandbox_violation v) {
      auto e = sandbox_event::make_violation(std::move(v), req_.session_id);
      e.exec_id = id;
      emit(e);
    };
    sink_.detail = [this](const std::string& k, picojson::value v) {
      (void)handle_.set_detail(k, std::move(v));
      if (handle_.state() != sandbox_state::created) publish();
    };
    sink_.log = [this](const std::string& s) { log(s); };
    if (auto s = driver_->start(r_, sink_); !s) {
      fail_start(s.err());
      return s;
    }
    return ok();
  }

  void on_ready() {
    if (handle_.state() != sandbox_state::created) return;
    (void)handle_.transition(sandbox_state::warm);
    publish();
    if (handle_.state() == sandbox_state::destroyed) return; // the handle's callback destroyed it
    emit(sandbox_event::make_ready(req_.session_id));
    if (!execs_.empty() && handle_.state() == sandbox_state::warm) { // queued before ready (can_exec)
      (void)handle_.transition(sandbox_state::active);
      publish();
    }
  }

  void on_failed(error e) {
    if (handle_.state() == sandbox_state::created) return fail_start(std::move(e));
    if (handle_.state() == sandbox_state::destroyed || handle_.state() == sandbox_state::error) return;
    // The sandbox went away under a warm session: every exec ends.
    log("the sandbox ended: " + e.what());
    detail_str("lastError", e.what());
    // Ids first: an exec whose output is already drained is finished (and
    // erased from execs_) inside on_exited.
    std::vector<exec_id> ending;
    for (const auto& [id, x] : execs_)
      if (!x->exited) ending.push_back(id);
    for (exec_id id : ending) on_exited(id, SIGKILL);
    if (handle_.state() == sandbox_state::destroyed) return; // an exit's callback destroyed the session
    (void)handle_.fail(e);
    publish();
  }

  // The launcher's own terminal back to how it was (attach_terminal).
  void detach_terminal() {
    raw_.restore();
    if (tty_token_) r_.unwatch(tty_token_);
    tty_token_ = 0;
    attached_.reset();
  }

  void fail_start(error e) {
    if (start_error_) return;
    start_error_ = e;
    // Execs queued before ready never ran: each ends as a start failure
    // (125, the start's reason; no exit event of its own: the session's
    // `exit` 125 below is the one).
    for (auto& [id, x] : execs_) {
      start_failures_[id] = {125, e.what()};
      codes_[id] = 125;
      drop_sources(*x);
    }
    execs_.clear();
    detach_terminal(); // a queued terminal exec may have the launcher's tty in raw mode
    if (driver_) driver_->destroy();
    detail_str("lastError", e.what()); // S3 clears `error` on leaving the error state
    if (handle_.state() != sandbox_state::error && handle_.state() != sandbox_state::destroyed) (void)handle_.fail(e);
    publish();
    (void)handle_.destroy();
    publish();
    emit(sandbox_event::make_exit(125, req_.session_id));
  }

  void on_started(exec_id id, std::int64_t pid, unique_fd master) {
    auto* x = find(id);
    if (!x) return;
    x->started = true;
    (void)pid;
    if (master) {
      x->master = std::move(master);
      ::fcntl(x->master.get(), F_SETFL, O_NONBLOCK);
      x->master_token = r_.watch(x->master.get(), [this, id](short) { on_master(id); });
      if (x->resize_pending) (void)resize(id, x->terminal->rows, x->terminal->cols);
      x->resize_pending = false;
    }
    flush_input(*x);
  }

  void on_exec_failed(exec_id id, int code, std::string why) {
    auto* x = find(id);
    if (!x) return;
    start_failures_[id] = {code, why};
    x->exited = true;
    x->status = code << 8;
    detail_str("lastError", "exec " + std::to_string(id) + ": " + why); // S3: the reason stays visible
    publish();
    if (auto* y = find(id)) finish_when_drained(*y); // the handle's callback may have ended it
  }

  void on_exited(exec_id id, int status) {
    auto* x = find(id);
    if (!x || x->exited) return;
    x->exited = true;
    x->status = status;
    // A SIGKILL nobody here sent: the session's memory cgroup counts an OOM
    // kill since the last look, so the memory limit (L7) ended it.
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !x->killed && oom_kill_seen()) {
      x->killed = true;
      auto e = sandbox_event::make_killed("memory_limit", SIGKILL, req_.session_id);
      e.exec_id = id;
      emit(e);
      x = find(id);
      if (!x) return; // the callback ended the exec or the session
    }
    finish_when_drained(*x);
  }

  // Whether the session's memory cgroup has counted an OOM kill since the
  // last call (Linux cgroups, limits.hpp; the rlimit fallback and other
  // platforms make a failed allocation, never a kill).
  bool oom_kill_seen() {
#if CCSB_LAUNCH_MACOS
    return false;
#else
    const auto& det = handle_.details();
    const auto dir = det.find("runDir");
    const auto mech = det.find("limits");
    if (dir == det.end() || !dir->second.is<std::string>() || mech == det.end() || !mech->second.is<std::string>())
      return false;
    const std::string& d = dir->second.get<std::string>();
    const std::uint64_t n = session_limits::oom_kills(d.substr(d.rfind('/') + 1), mech->second.get<std::string>());
    if (n <= oom_kills_) return false;
    oom_kills_ = n;
    return true;
#endif
  }

  // Output still in flight is read for a bounded time after the exit.
  void finish_when_drained(running& x) {
    if (x.timer) {
      r_.cancel(x.timer);
      x.timer = 0;
    }
    if (!x.streams[0].open && !x.streams[1].open && !x.master) return finish(x.id);
    const exec_id id = x.id;
    x.drain = r_.after(std::chrono::seconds(2), [this, id] {
      if (auto* y = find(id)) {
        y->drain = 0;
        finish(id);
      }
    });
  }

  void finish(exec_id id) {
    auto it = execs_.find(id);
    if (it == execs_.end()) return;
    const auto keep = it->second; // alive through the callbacks below, whatever they do
    running& x = *keep;
    for (int i = 0; i < 2; ++i)
      if (x.streams[i].open) on_output(id, i); // what is there now
    if (x.master) on_master(id);
    it = execs_.find(id);
    if (it == execs_.end()) return; // a callback finished it, or ended the session
    drop_sources(x);
    execs_.erase(it); // finished before its exit is reported: a callback sees it gone
    if (attached_ == id) detach_terminal();
    emit_exit(x);
    if (execs_.empty() && handle_.state() == sandbox_state::active) {
      (void)handle_.transition(sandbox_state::warm);
      publish();
    }
  }

  void emit_exit(running& x) {
    x.done = true;
    for (int i = 0; i < 2; ++i)
      if (!x.streams[i].carry.empty()) flush_output(x.id, i, std::exchange(x.streams[i].carry, {}));
    int code = exit_code_of(x.status);
    codes_[x.id] = code;
    auto e = sandbox_event::make_exit(code, req_.session_id);
    e.exec_id = x.id;
    // A command that did not start: why, on the exit itself (S5).
    if (auto f = start_failures_.find(x.id); f != start_failures_.end()) {
      e.reason = f->second.first == 127 ? "not_found" : f->second.first == 126 ? "not_executable" : "start_failed";
      e.data = f->second.second;
    }
    emit(e);
  }

  void drop_sources(running& x) {
    for (auto& s : x.streams) {
      if (s.token) r_.unwatch(s.token);
      s.token = 0;
      s.open = false;
      s.fd.reset();
    }
    for (auto* t : {&x.master_token, &x.input_token, &x.timer, &x.drain}) {
      if (*t) {
        r_.unwatch(*t);
        r_.cancel(*t);
      }
      *t = 0;
    }
    x.master.reset();
    x.input.reset();
  }

  result<void> kill_exec(exec_id id, std::string reason, int sig = SIGKILL) {
    auto* x = find(id);
    if (!x || x->killed || x->exited) return ok();
    if (sig == SIGKILL) x->killed = true;
    auto e = sandbox_event::make_killed(std::move(reason), sig, req_.session_id);
    e.exec_id = id;
    emit(e);
    if (!find(id)) return ok(); // the callback ended the exec or the session (destroy empties execs_ first)
    return driver_->signal(id, sig);
  }

  void on_output(exec_id id, int i) {
    auto it = execs_.find(id);
    if (it == execs_.end()) return;
    const auto keep = it->second; // alive through the callbacks deliver() makes
    running* x = keep.get();
    auto& s = x->streams[i];
    char buf[16384];
    for (;;) {
      ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) {
        if (s.token) r_.unwatch(s.token);
        s.token = 0;
        s.open = false;
        if (!s.carry.empty()) flush_output(id, i, std::exchange(s.carry, {}));
        if (x->exited && !x->streams[0].open && !x->streams[1].open && !x->master) finish(id);
        return;
      }
      deliver(*x, i, std::string_view(buf, static_cast<std::size_t>(n)));
      if (x->done) return; // a callback ended the exec, or the session
    }
  }

  // The terminal's master: what the command writes to its terminal is its
  // stdout. EIO once every slave descriptor is closed.
  void on_master(exec_id id) {
    auto it = execs_.find(id);
    if (it == execs_.end() || !it->second->master) return;
    const auto keep = it->second; // alive through the callbacks deliver() makes
    running* x = keep.get();
    char buf[16384];
    for (;;) {
      ssize_t n = ::read(x->master.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) {
        if (x->master_token) r_.unwatch(x->master_token);
        x->master_token = 0;
        if (x->input_token) r_.unwatch(x->input_token);
        x->input_token = 0;
        x->master.reset();
        if (!x->streams[0].carry.empty()) flush_output(id, 0, std::exchange(x->streams[0].carry, {}));
        if (x->exited) finish(id);
        return;
      }
      deliver(*x, 0, std::string_view(buf, static_cast<std::size_t>(n)));
      if (x->done) return; // a callback ended the exec, or the session
    }
  }

  void deliver(running& x, int i, std::string_view bytes) {
    if (cb_.output) cb_.output(x.id, i + 1, bytes);
    if (x.done) return; // the callback ended the session: its exit is out, nothing follows it
    auto& s = x.streams[i];
    s.carry.append(bytes);
    std::size_t cut = detail::utf8_cut(s.carry);
    if (cut > 0) {
      std::string chunk = s.carry.substr(0, cut);
      s.carry.erase(0, cut); // out before it is emitted: a destroy from the event flushes only the rest
      flush_output(x.id, i, std::move(chunk));
    }
  }

  void flush_output(exec_id id, int i, std::string data) {
    if (data.empty()) return;
    auto e = i == 0 ? sandbox_event::make_stdout(std::move(data), req_.session_id)
                    : sandbox_event::make_stderr(std::move(data), req_.session_id);
    e.exec_id = id;
    emit(e);
  }

  void flush_input(running& x) {
    const int fd = x.master ? x.master.get() : x.input.get();
    if (fd < 0) return;
    while (!x.pending.empty()) {
      ssize_t n = ::write(fd, x.pending.data(), x.pending.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) { // the reader is gone
        x.pending.clear();
        x.close_input = true;
        break;
      }
      x.pending.erase(0, static_cast<std::size_t>(n));
    }
    const exec_id id = x.id;
    if (!x.pending.empty()) {
      if (!x.input_token)
        x.input_token = r_.watch(fd, [this, id](short) {
          if (auto* y = find(id)) flush_input(*y);
        }, POLLOUT);
      return;
    }
    if (x.input_token) r_.unwatch(x.input_token);
    x.input_token = 0;
    if (x.close_input && !x.master) x.input.reset();
  }

  void on_tty(short ev) {
    if (!attached_) return;
    char buf[4096];
    ssize_t n = ::read(attached_tty_, buf, sizeof buf);
    if (n > 0) {
      (void)write_stdin(*attached_, std::string_view(buf, static_cast<std::size_t>(n)));
      return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    (void)ev;
    if (tty_token_) r_.unwatch(tty_token_);
    tty_token_ = 0;
  }

  running* find(exec_id id) {
    auto it = execs_.find(id);
    return it == execs_.end() ? nullptr : it->second.get();
  }
  void emit(const sandbox_event& e) {
    if (cb_.event) cb_.event(e);
  }
  void publish() {
    if (cb_.handle) cb_.handle(handle_);
  }
  void log(const std::string& s) {
    if (cb_.log) cb_.log(s);
  }
  void detail_str(const std::string& k, const std::string& v) { (void)handle_.set_detail(k, picojson::value(v)); }

  reactor& r_;
  session_request req_;
  session_callbacks cb_;
  sandbox_handle handle_;
  driver_sink sink_;
  std::unique_ptr<driver> driver_;
  // Shared: a function that calls a callback holds its exec alive through
  // it, whatever the callback does to the session.
  std::map<exec_id, std::shared_ptr<running>> execs_;
  bool destroying_{false}; // inside destroy(): callbacks may call back
  std::map<exec_id, int> codes_;
  std::map<exec_id, std::pair<int, std::string>> start_failures_;
  exec_id next_exec_{0};
  std::uint64_t oom_kills_{0}; // the memory cgroup's OOM kill count at the last look
  std::optional<error> start_error_;
  raw_terminal raw_;
  std::optional<exec_id> attached_;
  int attached_tty_{-1};
  reactor::token tty_token_{0};
};

} // namespace ccsb::launch
