// ccsb/launch/session.hpp — run one command in one session, from start to
// teardown (launcher only; does I/O). The pure decisions (backend selection,
// compile, render) happen before; this file runs what was rendered.
//
// run_session() reads as a checklist (nsjail containProc habit); each step is
// checked and a failure stops the run with a typed error (the caller exits
// 125 with error.what()):
//   native (bubblewrap):
//     1. `starting`; handle created.
//     2. sweep the stale run dirs SIGKILLed launchers left (sweep_stale_run_dirs);
//        private run dir: mkdtemp 0700 under $XDG_RUNTIME_DIR, else /tmp,
//        flock'ed for the session's life, with the mask and placeholder
//        sources (render_bwrap.hpp mask_sources).
//     3. proxied network: spawn this session's egressd with one end of the
//        proxy channel (a socketpair, ccsb/protocol/proxy_channel.hpp; N1,
//        N6) and do NOT wait: bwrap starts concurrently.
//     4. render the policy for bwrap with the real host facts; record the
//        placeholders in the run dir; create the placeholder parents.
//     5. spawn bwrap (its own process group, PR_SET_PDEATHSIG, explicit envp,
//        descriptors 0-2 + ccsb-init's status pipe + the --args memfd + the
//        L6 seccomp program at kSeccompFd (seccomp.hpp) + the
//        /etc files bwrap copies in, plan.data_files at kFirstDataFd...
//        + the proxy channel's other end at kProxyChannelFd + ccsb-init's
//        options memfd at kInitOptionsFd: the X2 Landlock ruleset computed
//        from the policy, ccsb/confine/landlock.hpp); ccsb-init creates the
//        proxy listeners inside, hands them to egressd, waits for its answer
//        (L3) and reports "proxies-ready" (handle -> warm), applies Landlock
//        ("landlock" line -> details.landlock); the status pipe closing
//        without a failure line means the command was exec'd: handle ->
//        active, `ready`. egressd exiting before that kills the sandbox and
//        fails the run (exit 125).
//     6. loop: command stdout/stderr -> pass-through + `stdout`/`stderr`
//        events; egressd violation lines -> `violation` events (N7); deadline
//        -> SIGKILL + `killed` (timeout); SIGTERM/SIGINT/SIGHUP to the
//        launcher -> SIGKILL + `killed` (stop); SIGCHLD -> reap.
//     7. teardown: drain output, stop egressd (SIGTERM, pidfd wait, SIGKILL
//        after 2 s; its last violation lines still become events), remove
//        placeholders bwrap created, remove the run dir; handle -> warm ->
//        destroyed (a failure reason stays in details.lastError); `exit`
//        with the command's exit code.
//   none (B8): the same loop around the command itself, on the host, with the
//     environment the caller built (E3-sanitised), no proxies.
//
// No process outlives its session: every child has PR_SET_PDEATHSIG(SIGKILL)
// (also when the launcher is SIGKILLed), bwrap runs with --die-with-parent, the
// sandbox is a PID namespace whose PID 1 takes everything with it, and
// egressd is killed at teardown (and by PDEATHSIG if the launcher dies). A
// launcher killed with SIGKILL cannot remove its run dir or placeholders
// itself; the next launcher's sweep (step 2) removes them.
#pragma once

#include "ccsb/launch/egressd.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/identity.hpp"
#include "ccsb/launch/limits.hpp"
#include "ccsb/launch/placeholders.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/seccomp.hpp"
#include "ccsb/broker/kernel_probe.hpp"
#include "ccsb/confine/landlock.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/protocol/pty_control.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "ccsb/render_bwrap.hpp"
#include "ccsb/spec.hpp"

#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::launch {

// ccsb-init's --options-fd descriptor: far above the data descriptors, which
// count up from kFirstDataFd, one per minimal-/etc file.
inline constexpr int kInitOptionsFd = 64;
static_assert(kFirstDataFd + static_cast<int>(std::size(kSystemEtc)) < kInitOptionsFd);
// The pseudo-terminal's control pipe (T4), read by ccsb-init's relay.
inline constexpr int kPtyControlFd = kInitOptionsFd + 1;

// The launcher's terminal in raw mode for a PTY session, restored on
// destruction (also on every error path of the session).
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
  std::function<void(const sandbox_event&)> event;              // S5
  std::function<void(int stream, std::string_view bytes)> output; // raw pass-through (1 or 2)
  std::function<void(const sandbox_handle&)> handle;            // after each state change (S3/S4)
  std::function<void(const std::string&)> log;                  // diagnostics
};

struct session_request {
  std::string session_id;
  backend chosen{backend::native};
  policy pol;                        // native: the compiled policy
  env_list host_env;                 // none: the complete environment
  std::vector<std::string> command;  // argv
  std::string bwrap_path;
  std::string egressd_path;
  std::string init_path;
  std::vector<std::string> egress_opts;
  std::optional<std::chrono::milliseconds> timeout;
  std::string profile_name;
  // L1: the host uid/gid the sandbox runs as when the launcher is root
  // (nullopt: chosen by choose_identity); a non-root launcher runs it as itself.
  std::optional<spawn_options::credentials> run_as;
  resource_limits limits; // L7
  // T4: give the command a pseudo-terminal inside the sandbox (ccsb-run: when
  // its own stdin is a terminal). The launcher's terminal is put in raw mode
  // for the session and its size changes are forwarded.
  bool pty{false};
  int landlock_abi{0}; // X2: what the probe found (probe_result::landlock_abi), for details
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

struct output_stream {
  unique_fd fd;
  std::string carry; // incomplete UTF-8 tail for events
  bool open{false};
};

} // namespace detail

class session {
public:
  session(session_request req, session_callbacks cb)
      : req_(std::move(req)), cb_(std::move(cb)), handle_(req_.session_id, req_.chosen) {}

  // Returns the command's exit code (128+signal when killed), or the reason
  // the session could not start.
  result<int> run() {
    emit(sandbox_event::make_starting(req_.session_id));
    auto r = start_and_supervise();
    teardown();
    if (!r) {
      // The reason stays visible after destroy (S3 clears `error` on leaving
      // the error state): details.lastError.
      detail_str("lastError", r.err().what());
      if (handle_.state() != sandbox_state::error && handle_.state() != sandbox_state::destroyed)
        (void)handle_.fail(r.err());
      publish();
      (void)handle_.destroy();
      publish();
      emit(sandbox_event::make_exit(125, req_.session_id));
      return r;
    }
    if (handle_.state() == sandbox_state::active) (void)handle_.transition(sandbox_state::warm);
    (void)handle_.destroy();
    publish();
    emit(sandbox_event::make_exit(*r, req_.session_id));
    return r;
  }

  const sandbox_handle& handle() const { return handle_; }

private:
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
  void detail_int(const std::string& k, std::int64_t v) { (void)handle_.set_detail(k, picojson::value(v)); }

  result<int> start_and_supervise() {
    detail_str("backend", std::string(to_string(req_.chosen)));
    if (req_.chosen == backend::native) detail_int("landlockAbi", req_.landlock_abi);
    if (!req_.profile_name.empty()) detail_str("profile", req_.profile_name);
    // Signals arrive through a signalfd from here on (before any child is spawned,
    // so no SIGCHLD is lost).
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, s);
    if (req_.pty) sigaddset(&mask, SIGWINCH); // forwarded to the sandbox's terminal (T4)
    sigset_t old;
    ::sigprocmask(SIG_BLOCK, &mask, &old);
    struct restore_mask {
      sigset_t m;
      ~restore_mask() { ::sigprocmask(SIG_SETMASK, &m, nullptr); }
    } restore{old};
    unique_fd sfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sfd) return sys_error("signalfd");
    std::vector<fd_map> fds;
    auto out = make_pipe();
    if (!out) return std::move(out).err();
    auto err = make_pipe();
    if (!err) return std::move(err).err();
    unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    int in = ::fcntl(0, F_GETFD) >= 0 ? 0 : null.get();
    fds = {{0, in}, {1, out->write.get()}, {2, err->write.get()}};

    spawn_options so;
    std::optional<pipe_pair> status;
    unique_fd args_memfd;
    unique_fd seccomp_memfd;
    std::vector<unique_fd> data_fds;
    if (req_.chosen == backend::native) {
      // 2. who the sandbox is on the host (L1), the run dir (L8) and what
      //    crashed launchers left behind.
      auto ident = choose_identity(req_.pol, req_.run_as);
      if (!ident) return std::move(ident).err();
      if (*ident) {
        so.run_as = spawn_options::credentials{(*ident)->uid, (*ident)->gid};
        detail_int("sandboxUid", (*ident)->uid);
        detail_int("sandboxGid", (*ident)->gid);
        log("the sandbox runs as host uid " + std::to_string((*ident)->uid) + " (" + (*ident)->why + ")");
        // The command's stdout/stderr pipes belong to its uid, so reopening
        // them (`> /dev/stdout`, `tee /dev/stderr`) works as on a host shell.
        for (int fd : {out->write.get(), err->write.get()})
          if (::fchown(fd, (*ident)->uid, (*ident)->gid) != 0) return sys_error("fchown (output pipe)");
        for (const auto& w : unwritable_roots(req_.pol, **ident)) log(w);
        for (const auto& w : drop_unreachable_toolchains(req_.pol, **ident)) log(w);
      } else {
        detail_int("sandboxUid", ::geteuid());
        detail_int("sandboxGid", ::getegid());
      }
      auto base = run_dir_base();
      if (!base) return std::move(base).err();
      host_facts resolver;
      resolver.resolve = [](const std::string& p) -> std::optional<std::string> {
        std::error_code ec;
        auto c = std::filesystem::canonical(p, ec);
        if (ec) return std::nullopt;
        return c.string();
      };
      if (auto r = check_base_outside(req_.pol, *base, resolver.resolve); !r) return std::move(r).err();
      for (const auto& gone : sweep_stale_run_dirs(*base)) log("removed a stale run dir of a dead launcher: " + gone);
      auto phs = placeholder_set::open(*base);
      if (!phs) return std::move(phs).err();
      placeholders_ = std::move(*phs);
      for (const auto& gone : placeholders_->sweep()) log("removed a placeholder nobody holds any more: " + gone);
      std::optional<gid_t> shared_gid;
      if (*ident) shared_gid = (*ident)->gid;
      auto dir = make_run_dir(req_.session_id, *base, shared_gid);
      if (!dir) return std::move(dir).err();
      run_dir_ = dir->path;
      run_lock_ = std::move(dir->lock);
      detail_str("runDir", run_dir_);
      // L7: limits before anything of the sandbox runs.
      limits_ = session_limits::create(std::filesystem::path(run_dir_).filename().string(), req_.limits);
      detail_str("limits", limits_.mechanism());
      detail_int("memoryBytes", static_cast<std::int64_t>(req_.limits.memory_bytes));
      detail_int("pidsMax", static_cast<std::int64_t>(req_.limits.pids));
      detail_int("tmpBytes", static_cast<std::int64_t>(req_.limits.tmp_bytes));
      so.cgroup_procs = limits_.procs_fds();
      if (limits_.uses_rlimits())
        so.rlimits = {{RLIMIT_DATA, static_cast<rlim_t>(req_.limits.memory_bytes)},
                      {RLIMIT_NPROC, static_cast<rlim_t>(req_.limits.pids)}};
      bwrap_facts facts = host_bwrap_facts();
      facts.run_dir = run_dir_;
      facts.init_path = req_.init_path;
      if (*ident && !reachable_by(req_.init_path, **ident)) {
        // L1: the sandbox's uid cannot reach ccsb-init where it is installed;
        // bwrap copies it in from a descriptor the launcher opens.
        init_fd_.reset(::open(req_.init_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
        if (!init_fd_) return sys_error("open " + req_.init_path);
        facts.init_by_fd = true;
      }
      facts.tmp_size_bytes = req_.limits.tmp_bytes;
      // X1: creation rules run (instead of the P7 refusal) only where the kernel has the broker's features.
      if (req_.pol.requires_glob_denials()) facts.creation_rules = broker::creation_rules_supported().ok;
      // 3. egressd, started now and not waited for: bwrap starts at once and
      //    ccsb-init holds the command back until egressd has taken the
      //    proxy listeners it hands over (L3).
      if (req_.pol.network.kind == network_kind::proxied) {
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
          return sys_error("socketpair (proxy channel)");
        unique_fd egressd_end(pair[0]);
        proxy_channel_.reset(pair[1]);
        egressd_options eo;
        eo.path = req_.egressd_path;
        eo.channel = egressd_end.get();
        eo.network = req_.pol.network;
        eo.extra = req_.egress_opts;
        auto e = spawn_egressd(eo);
        if (!e) return std::move(e).err();
        egressd_ = std::move(*e);
        detail_int("egressdPid", egressd_->pid);
        detail_str("httpProxy", std::string(kProxyHttp));
        detail_str("socksProxy", std::string(kProxySocks));
      }
      // 4. render, then occupy what the plan mounts over (placeholders.hpp):
      //    hold every existing entry, create the missing ones. If an entry
      //    another session was removing changed under the lock, render again.
      std::optional<bwrap_plan> rendered;
      for (int attempt = 0; !rendered; ++attempt) {
        auto plan = render_bwrap(req_.pol, facts);
        if (!plan) return std::move(plan).err();
        auto occupied = occupy(*plan);
        if (occupied) {
          rendered = std::move(*plan);
        } else {
          // Let go of what this attempt held or created, then try again.
          (void)placeholders_->release_and_remove();
          if (attempt >= 3) return std::move(occupied).err();
        }
      }
      auto plan = &*rendered;
      for (const auto& n : plan->notes) log(n);
      if (!plan->git_excludes.empty()) {
        const std::string ex = run_dir_ + "/" + std::string(kGitExcludesName);
        unique_fd f(::open(ex.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (!f || !write_all(f.get(), plan->git_excludes)) return sys_error("write " + ex);
      }
      detail_str("workdir", req_.pol.workdir);
      // E4: the toolchains from PATH that are visible read-only, and why.
      if (!req_.pol.toolchains.empty()) {
        picojson::array tcs;
        for (const auto& t : req_.pol.toolchains) {
          picojson::object o;
          o["path"] = picojson::value(t.path);
          o["why"] = picojson::value(t.why);
          tcs.emplace_back(std::move(o));
        }
        (void)handle_.set_detail("toolchains", picojson::value(std::move(tcs)));
      }
      // 5. spawn bwrap; its options go through --args FD (a memfd), so its
      //    argv (and the sandbox's /proc/1/cmdline) carries no policy.
      auto st = make_pipe();
      if (!st) return std::move(st).err();
      status = std::move(*st);
      fds.push_back({kInitStatusFd, status->write.get()});
      args_memfd.reset(::memfd_create("ccsb-bwrap-args", MFD_CLOEXEC));
      if (!args_memfd) return sys_error("memfd_create(ccsb-bwrap-args)");
      if (!write_all(args_memfd.get(), plan->args_blob())) return sys_error("write (bwrap --args memfd)");
      if (::lseek(args_memfd.get(), 0, SEEK_SET) != 0) return sys_error("lseek (bwrap --args memfd)");
      const int args_fd = kInitStatusFd + 1;
      fds.push_back({args_fd, args_memfd.get()});
      // L6: the baseline seccomp filter, which bwrap applies before it execs
      // ccsb-init; a filter that cannot be built stops the run.
      auto filter = baseline_seccomp_memfd();
      if (!filter) return std::move(filter).err();
      seccomp_memfd = std::move(*filter);
      fds.push_back({kSeccompFd, seccomp_memfd.get()});
      if (init_fd_) fds.push_back({kInitFd, init_fd_.get()});
      if (proxy_channel_) fds.push_back({kProxyChannelFd, proxy_channel_.get()});
      // The /etc files bwrap copies in (--file FD): read-only, not following
      // a symlink the renderer did not see (it bound those instead).
      data_fds.clear();
      for (std::size_t i = 0; i < plan->data_files.size(); ++i) {
        unique_fd f(::open(plan->data_files[i].c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
        if (!f) return sys_error("open " + plan->data_files[i]);
        fds.push_back({kFirstDataFd + static_cast<int>(i), f.get()});
        data_fds.push_back(std::move(f));
      }
      // X2: the Landlock layer, computed from the policy (not from the plan),
      // for ccsb-init to apply before the command starts.
      //    Its options name host paths, so they go through a memfd
      //    (ccsb-init --options-fd), never argv: the sandbox reads bwrap's
      //    argv as /proc/1/cmdline (L1).
      {
        std::string blob;
        for (const auto& a : confine::to_init_args(
                 confine::landlock_rules_for(req_.pol, req_.pol.network.kind != network_kind::proxied))) {
          blob += a;
          blob += '\0';
        }
        init_options_.reset(::memfd_create("ccsb-init-options", MFD_CLOEXEC));
        if (!init_options_ || !write_all(init_options_.get(), blob) || ::lseek(init_options_.get(), 0, SEEK_SET) != 0)
          return sys_error("memfd (ccsb-init options)");
        fds.push_back({kInitOptionsFd, init_options_.get()});
        std::vector<std::string> opt{"--options-fd", std::to_string(kInitOptionsFd)};
        // T4: a pseudo-terminal inside, sized as ours, resized through a pipe.
        if (req_.pty) {
          auto ctl = make_pipe();
          if (!ctl) return std::move(ctl).err();
          pty_control_ = std::move(ctl->write);
          pty_control_read_ = std::move(ctl->read);
          fds.push_back({kPtyControlFd, pty_control_read_.get()});
          opt.insert(opt.end(), {"--pty-control", std::to_string(kPtyControlFd)});
          winsize ws{};
          if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
            opt.insert(opt.end(), {"--pty-size", std::to_string(ws.ws_row) + ":" + std::to_string(ws.ws_col)});
          detail_str("terminal", "pty");
        }
        plan->init_argv.insert(plan->init_argv.end() - 1, opt.begin(), opt.end()); // before the final "--"
      }
      plan->use_args_fd = true;
      so.path = req_.bwrap_path;
      so.argv = bwrap_argv(*plan, req_.bwrap_path, req_.command, args_fd);
      so.env = plan->environment;
    } else {
      // none (B8): the command itself, on the host.
      std::string path_var = "/usr/local/bin:/usr/bin:/bin";
      for (const auto& v : req_.host_env)
        if (v.name == "PATH") path_var = v.value;
      std::string prog = req_.command.front();
      std::optional<std::string> found;
      if (prog.find('/') != std::string::npos)
        found = prog.front() == '/' ? prog : std::filesystem::absolute(prog).string();
      else
        found = which(prog, path_var);
      if (!found) return make_error(errc::invalid_argument, "command", "command not found on PATH: \"" + prog + "\"");
      so.path = *found;
      so.argv = req_.command;
      so.env = req_.host_env;
      std::error_code ec;
      detail_str("workdir", std::filesystem::current_path(ec).string());
    }
    so.fds = fds;


    auto pid = spawn(so);
    if (!pid) return std::move(pid).err();
    top_ = *pid;
    detail_int("pid", top_);
    out->write.reset();
    err->write.reset();
    args_memfd.reset();
    seccomp_memfd.reset();
    init_fd_.reset();
    proxy_channel_.reset();
    init_options_.reset();
    pty_control_read_.reset();
    data_fds.clear();
    // The user's keystrokes go to the sandbox's terminal as they are typed.
    if (pty_control_ && ::isatty(0) && !raw_.enter(0)) log("could not put the terminal in raw mode");
    if (status) status->write.reset();

    detail::output_stream streams[2];
    streams[0].fd = std::move(out->read);
    streams[1].fd = std::move(err->read);
    for (auto& s : streams) {
      s.open = true;
      ::fcntl(s.fd.get(), F_SETFL, O_NONBLOCK);
    }
    line_reader status_lines;
    bool status_open = false;
    bool proxies_ready = false;
    std::string failure; // init-failed / exec-failed line
    if (status) {
      status_open = true;
      ::fcntl(status->read.get(), F_SETFL, O_NONBLOCK);
    } else {
      // none: spawn() returned after a successful execve.
      (void)handle_.transition(sandbox_state::warm);
      (void)handle_.transition(sandbox_state::active);
      publish();
      emit(sandbox_event::make_ready(req_.session_id));
      ready_ = true;
    }
    if (egressd_) ::fcntl(egressd_->events.get(), F_SETFL, O_NONBLOCK);

    std::string last_stderr;
    auto handle_status = [&]() {
      if (!status_open) return;
      for (;;) {
        bool more = status_lines.read_from(status->read.get());
        while (auto line = status_lines.next()) {
          // ccsb/protocol/supervisor.hpp: typed lines; a malformed one is logged, never guessed at.
          auto msg = protocol::parse_line(*line);
          if (!msg) {
            log("ccsb-init status line ignored: " + msg.err().what());
            continue;
          }
          if (std::holds_alternative<protocol::proxies_ready>(*msg)) {
            proxies_ready = true;
            (void)handle_.transition(sandbox_state::warm);
            publish();
          } else if (auto* f = std::get_if<protocol::init_failed>(&*msg)) {
            failure = "init-failed: " + f->reason;
          } else if (auto* x = std::get_if<protocol::exec_failed>(&*msg)) {
            failure = "exec-failed: " + x->reason;
          } else if (std::holds_alternative<protocol::command_started>(*msg)) {
            // X1: ccsb-init stays as the supervisor, so EOF no longer means "exec'd".
            if (proxies_ready && failure.empty() && !ready_) {
              (void)handle_.transition(sandbox_state::active);
              publish();
              emit(sandbox_event::make_ready(req_.session_id));
              ready_ = true;
            }
          } else if (auto* l = std::get_if<protocol::landlock_applied>(&*msg)) {
            detail_str("landlock", l->summary);
            log("Landlock: " + l->summary);
            publish();
          } else if (auto* v = std::get_if<protocol::violation>(&*msg)) {
            emit(sandbox_event::make_violation(sandbox_violation{v->action, v->target, std::nullopt}, req_.session_id));
          }
        }
        if (!more) {
          status_open = false;
          if (proxies_ready && failure.empty() && !ready_) {
            (void)handle_.transition(sandbox_state::active);
            publish();
            emit(sandbox_event::make_ready(req_.session_id));
            ready_ = true;
          }
          return;
        }
        pollfd p{status->read.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) return;
      }
    };
    auto handle_output = [&](int i) {
      auto& s = streams[i];
      handle_status(); // ready precedes the command's first byte
      char buf[16384];
      for (;;) {
        ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
          s.open = false;
          if (!s.carry.empty()) flush_output(i, std::exchange(s.carry, {}));
          return;
        }
        std::string_view bytes(buf, static_cast<std::size_t>(n));
        if (cb_.output) cb_.output(i + 1, bytes);
        if (i == 1 && !ready_) {
          last_stderr.append(bytes);
          if (last_stderr.size() > 4096) last_stderr.erase(0, last_stderr.size() - 4096);
        }
        s.carry.append(bytes);
        std::size_t cut = detail::utf8_cut(s.carry);
        if (cut > 0) {
          flush_output(i, s.carry.substr(0, cut));
          s.carry.erase(0, cut);
        }
      }
    };
    std::string egress_failure; // egressd died before the command started
    auto abort_start = [&](const std::string& why) {
      if (!egress_failure.empty()) return;
      egress_failure = why;
      ::kill(-top_, SIGKILL);
      ::kill(top_, SIGKILL);
    };
    auto handle_egressd = [&]() {
      if (!egressd_ || !egressd_->events) return;
      bool more = egressd_->lines.read_from(egressd_->events.get());
      while (auto line = egressd_->lines.next()) {
        auto parsed = parse_egressd_line(*line);
        if (!parsed) continue;
        if (parsed->event == "ready") {
          egressd_->ready = true;
          // X3: how egressd confined itself, as its ready line says.
          if (auto c = parsed->fields.find("confinement"); c != parsed->fields.end() && c->second.is<picojson::object>()) {
            (void)handle_.set_detail("egressdConfinement", c->second);
            publish();
          }
        }
        if (parsed->violation) emit(sandbox_event::make_violation(*parsed->violation, req_.session_id));
      }
      if (!more) egressd_->events.reset();
    };
    std::optional<int> top_status;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (req_.timeout) deadline = std::chrono::steady_clock::now() + *req_.timeout;
    std::optional<std::chrono::steady_clock::time_point> drain_until;
    auto kill_top = [&](const std::string& reason) {
      if (killed_) return;
      killed_ = true;
      ::kill(-top_, SIGKILL);
      ::kill(top_, SIGKILL);
      emit(sandbox_event::make_killed(reason, SIGKILL, req_.session_id));
    };

    for (;;) {
      if (top_status && !streams[0].open && !streams[1].open && !status_open) break;
      if (top_status && drain_until && std::chrono::steady_clock::now() >= *drain_until) break;
      std::vector<pollfd> pfds;
      std::vector<int> what; // 0,1 streams; 2 status; 3 egressd; 4 signals
      for (int i = 0; i < 2; ++i)
        if (streams[i].open) {
          pfds.push_back({streams[i].fd.get(), POLLIN, 0});
          what.push_back(i);
        }
      if (status_open) {
        pfds.push_back({status->read.get(), POLLIN, 0});
        what.push_back(2);
      }
      if (egressd_ && egressd_->events) {
        pfds.push_back({egressd_->events.get(), POLLIN, 0});
        what.push_back(3);
      }
      pfds.push_back({sfd.get(), POLLIN, 0});
      what.push_back(4);
      int wait_ms = -1;
      auto now = std::chrono::steady_clock::now();
      auto until = [&](std::chrono::steady_clock::time_point t) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count();
        int m = ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms + 1, 60000));
        wait_ms = wait_ms < 0 ? m : std::min(wait_ms, m);
      };
      if (deadline && !killed_) until(*deadline);
      if (drain_until) until(*drain_until);
      int r = ::poll(pfds.data(), pfds.size(), wait_ms);
      if (r < 0 && errno != EINTR) return sys_error("poll (session loop)");
      if (deadline && !killed_ && std::chrono::steady_clock::now() >= *deadline && !top_status) kill_top("timeout");
      if (r <= 0) continue;
      // Status first: `ready` precedes output.
      for (std::size_t k = 0; k < pfds.size(); ++k)
        if (what[k] == 2 && pfds[k].revents) handle_status();
      for (std::size_t k = 0; k < pfds.size(); ++k) {
        if (!pfds[k].revents) continue;
        switch (what[k]) {
        case 0:
        case 1: handle_output(what[k]); break;
        case 3: handle_egressd(); break;
        case 4: {
          signalfd_siginfo si{};
          while (::read(sfd.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
            if (si.ssi_signo == SIGCHLD) {
              int st = 0;
              if (!top_status && ::waitpid(top_, &st, WNOHANG) == top_) {
                top_status = st;
                // The command is done: egressd may start exiting now (it
                // exits at once when idle); its last lines are still read.
                if (egressd_ && egressd_->pid > 0 && !egressd_->stopping) {
                  ::kill(-egressd_->pid, SIGTERM);
                  egressd_->stopping = true;
                }
                // Output still in flight is read for a bounded time.
                drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
              }
              if (egressd_ && egressd_->pid > 0) {
                if (::waitpid(egressd_->pid, &st, WNOHANG) == egressd_->pid) {
                  egressd_->pid = -1;
                  std::string code = std::to_string(exit_code_of(st));
                  if (egressd_->stopping) {
                    // asked to exit above
                  } else if (!ready_ && !top_status)
                    abort_start("egressd exited before the command started (exit code " + code + ")");
                  else
                    log("egressd exited unexpectedly (exit code " + code + "); the sandbox has no network from now on");
                }
              }
            } else if (si.ssi_signo == SIGWINCH) {
              winsize ws{};
              if (pty_control_ && ::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
                (void)write_all(pty_control_.get(), protocol::write_line(protocol::pty_resize{ws.ws_row, ws.ws_col}));
            } else if (!top_status) {
              kill_top("stop");
            }
          }
          break;
        }
        default: break;
        }
      }
    }
    for (int i = 0; i < 2; ++i)
      if (!streams[i].carry.empty()) flush_output(i, std::exchange(streams[i].carry, {}));
    handle_egressd();
    int code = exit_code_of(*top_status);
    if (!ready_ && !egress_failure.empty()) return make_error(errc::io_error, "egressd", egress_failure);
    if (!ready_ && !killed_) {
      std::string why = failure;
      if (why.empty()) {
        // bwrap failed before ccsb-init ran: its own last stderr line says why.
        while (!last_stderr.empty() && last_stderr.back() == '\n') last_stderr.pop_back();
        auto nl = last_stderr.rfind('\n');
        why = "bwrap exited with code " + std::to_string(code) +
              (last_stderr.empty() ? std::string() : ": " + last_stderr.substr(nl == std::string::npos ? 0 : nl + 1));
      }
      if (failure.rfind("exec-failed:", 0) == 0)
        return make_error(errc::invalid_argument, "command", failure.substr(std::string("exec-failed: ").size()));
      return make_error(errc::io_error, "sandbox", why);
    }
    return code;
  }

  // Holds every existing host entry the plan mounts over inside a writable
  // mount, and creates (registered, held) the missing ones: the plan's
  // create_dirs (parents first) and the targets of its placeholder and mask
  // binds (`--ro-bind <run dir source> PATH`). See placeholders.hpp.
  result<void> occupy(const bwrap_plan& plan) {
    const mask_sources src = mask_sources_for(run_dir_);
    auto in_writable = [&](const std::string& p) {
      return std::any_of(req_.pol.mounts.begin(), req_.pol.mounts.end(),
                         [&](const mount_rule& m) { return m.writable && ccsb::detail::within(p, m.guest_path); });
    };
    for (const auto& d : plan.create_dirs) {
      struct stat st{};
      if (::lstat(d.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
          return make_error(errc::io_error, d, "expected a directory for a write-deny placeholder");
        auto h = placeholders_->hold(d);
        if (!h) return std::move(h).err();
        continue;
      }
      if (auto r = placeholders_->create(d, true); !r) return std::move(r).err();
    }
    const auto& o = plan.options;
    for (std::size_t i = 0; i + 2 < o.size(); ++i) {
      if (o[i] != "--bind" && o[i] != "--ro-bind") continue;
      const std::string& source = o[i + 1];
      const std::string& target = o[i + 2];
      i += 2;
      if (!in_writable(target)) continue;
      struct stat st{};
      if (::lstat(target.c_str(), &st) == 0) {
        auto h = placeholders_->hold(target);
        if (!h) return std::move(h).err();
        continue;
      }
      const bool dir_source = source == src.empty_dir || source == src.mask_dir;
      const bool file_source = source == src.empty_file || source == src.mask_file || source == src.git_commondir;
      if (!dir_source && !file_source) continue; // bwrap reports a missing source itself
      std::string_view content = source == src.git_commondir ? kGitCommondirPlaceholder : std::string_view{};
      if (auto r = placeholders_->create(target, dir_source, content); !r) return std::move(r).err();
    }
    return ok();
  }

  void flush_output(int i, std::string data) {
    if (data.empty()) return;
    emit(i == 0 ? sandbox_event::make_stdout(std::move(data), req_.session_id)
                : sandbox_event::make_stderr(std::move(data), req_.session_id));
  }

  void teardown() {
    raw_.restore(); // T4: the user's terminal is theirs again before anything is printed
    if (top_ > 0) {
      // Normally already reaped; a start failure may leave it running.
      int st = 0;
      if (::waitpid(top_, &st, WNOHANG) == 0) {
        ::kill(-top_, SIGKILL);
        ::kill(top_, SIGKILL);
        while (::waitpid(top_, &st, 0) < 0 && errno == EINTR) {
        }
      }
      top_ = -1;
    }
    stop_egressd();
    limits_.destroy();
    if (placeholders_) {
      for (const auto& p : placeholders_->release_and_remove()) (void)p;
      placeholders_.reset();
    }
    remove_run_dir(run_dir_);
    run_lock_.reset();
  }

  // SIGTERM; egressd exits at once when no tunnel is open (it drains open
  // tunnels up to its --drain-seconds). The wait is a poll on a pidfd and on
  // the events pipe, so it ends the moment egressd exits, and violations it
  // reports while exiting still become events. Bounded: SIGKILL after 2 s.
  void stop_egressd() {
    if (!egressd_) return;
    if (egressd_->pid > 0) {
      const pid_t pid = egressd_->pid;
      unique_fd pfd(pidfd_open(pid));
      if (!egressd_->stopping) ::kill(-pid, SIGTERM);
      egressd_->stopping = true;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
      std::optional<int> status;
      for (;;) {
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == pid) {
          status = st;
          break;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p[2] = {{pfd.get(), POLLIN, 0}, {egressd_->events ? egressd_->events.get() : -1, POLLIN, 0}};
        int wait_ms = pfd ? static_cast<int>(left.count()) : 1;
        if (::poll(p, 2, wait_ms) > 0 && p[1].revents) handle_egressd_lines();
      }
      if (!status) {
        ::kill(-pid, SIGKILL);
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
      }
      egressd_->pid = -1;
    }
    handle_egressd_lines(); // what is left in the pipe after the exit
  }

  void handle_egressd_lines() {
    if (!egressd_ || !egressd_->events) return;
    ::fcntl(egressd_->events.get(), F_SETFL, O_NONBLOCK);
    for (;;) {
      bool more = egressd_->lines.read_from(egressd_->events.get());
      bool any = false;
      while (auto line = egressd_->lines.next()) {
        any = true;
        auto parsed = parse_egressd_line(*line);
        if (parsed && parsed->violation) emit(sandbox_event::make_violation(*parsed->violation, req_.session_id));
      }
      if (!more) {
        egressd_->events.reset();
        return;
      }
      pollfd p{egressd_->events.get(), POLLIN, 0};
      if (!any && ::poll(&p, 1, 0) <= 0) return;
    }
  }

  session_request req_;
  session_callbacks cb_;
  sandbox_handle handle_;
  std::string run_dir_;
  std::optional<placeholder_set> placeholders_;
  session_limits limits_;
  unique_fd init_fd_; // ccsb-init, when bwrap copies it in (bwrap_facts::init_by_fd)
  unique_fd proxy_channel_; // the sandbox's end of the proxy channel, until bwrap has it
  unique_fd init_options_;  // ccsb-init's --options-fd memfd, until bwrap has it
  unique_fd pty_control_;       // T4: resize lines to the relay inside
  unique_fd pty_control_read_;  // its other end, until bwrap has it
  raw_terminal raw_;            // T4: the launcher's terminal, raw while the session runs
  unique_fd run_lock_;
  std::optional<egressd_process> egressd_;
  pid_t top_{-1};
  bool ready_{false};
  bool killed_{false};
};

} // namespace ccsb::launch
