// ccsb/launch/macos/seatbelt_driver.hpp — the launcher's macOS driver (M1-M8,
// N1, N2, S5, S7): a ccsb/launch/driver.hpp backend, so a macOS session is
// the same session (session.hpp) with the same exec calls and events. Plain
// POSIX (fork, execve, pipe, poll, waitpid), so the Linux build compiles it
// and tests it against stand-in programs; the macOS-specific calls are in
// ccsb/sys/platform.hpp (the per-user temp dir), which also makes it the
// native driver of ccsb-run and ccsbd on macOS (make_seatbelt_driver below).
//
// start() is a checklist, each step checked (a failure ends the session with
// a typed error, nothing runs with less than the policy):
//   1. egressd (proxied policies): started with --http-listen 127.0.0.1:0
//      --socks-listen 127.0.0.1:0 (N1: on macOS the sandbox shares the host
//      loopback, so the ports are TCP), not waited for in start(): the
//      reactor reads its events, and its {"event":"ready","http":
//      "127.0.0.1:P","socks":"127.0.0.1:Q"} line gives the ports the profile
//      needs (parse_ready_ports). Rendering waits for it (bounded:
//      egress_ready_within).
//   2. the session temp dir run_dir/tmp (0700); E5: the scratch HOME
//      run_dir/home (0700, when seatbelt_scratch_home_needed: no writable
//      root covers the host's HOME), holding only `.gitconfig` with the host
//      user's git identity (git_identity.hpp, gitconfig_for: user.name and
//      user.email, as on Linux); the profile rendered (render_seatbelt) with
//      the ports, the log tag (seatbelt_tag(session, nonce)), the temp dir
//      and the scratch HOME, and the environment (seatbelt_environment:
//      HOME points at the scratch HOME).
//   3. the log reader (seatbelt_log_argv: `log stream --style ndjson` for the
//      tag) started BEFORE any command, so no early denial is missed; then
//      the session is ready.
// exec(): `sandbox-exec -p PROFILE -- COMMAND...` with exactly that
// environment plus the exec's additions (E1), the exec's workdir, its own
// session and process group, the exec's descriptors as 0-2, the signal mask
// and dispositions reset (the launcher ignores SIGPIPE); its exit comes from
// the reactor's watch_exit (on macOS the SIGCHLD self-pipe and waitpid on
// that pid: reactor.hpp).
// egressd's violations (N7) and the log reader's denials (M8) become
// `violation` events of the session (the tag is per session, not per exec).
// destroy(): SIGKILL every exec's group, drain the log reader for log_drain
// (the unified log delivers late), then SIGTERM it and egressd; the scratch
// HOME is removed (never following a symlink), and a run dir the driver made
// (make_seatbelt_driver) with it.
// Not offered here: a pseudo-terminal and suspend (typed errors).
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/launch/driver.hpp"
#include "ccsb/launch/git_identity.hpp"
#include "ccsb/protocol/egressd_args.hpp"
#include "ccsb/session_environment.hpp"
#include "ccsb/session_settings.hpp"
#include "ccsb/sys/platform.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/seatbelt/render.hpp"
#include "ccsb/result.hpp"
#include "ccsb/render/seatbelt/log.hpp"
#include "ccsb/spec.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <picojson.h>

#include <cerrno>
#include <exception>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch::macos {

struct driver_options {
  policy pol;
  std::string sandbox_exec{kSandboxExec};
  std::string log_tool{kLogTool};
  std::string egressd_path;            // required for a proxied policy
  egress_settings egress;               // the session's egressd options
  std::string run_dir;                 // an existing private (0700) directory of this session
  std::string nonce;                   // per launch, [A-Za-z0-9]{8,16}: part of the log tag
  std::chrono::milliseconds egress_ready_within{10000};
  std::chrono::milliseconds log_drain{1500};
  bool owns_run_dir{false};            // destroy() removes run_dir (make_seatbelt_driver made it)
  // E5: the host user's git identity for the scratch HOME's .gitconfig;
  // nullopt: read from the host user's git config (git_identity.hpp).
  std::optional<bwrap_facts::git_identity> git_identity;
};

// The name of the scratch HOME in the session's run dir (E5).
inline constexpr std::string_view kScratchHomeName = "home";

// One line of egressd's --events stream as a JSON object, or nullopt.
inline std::optional<picojson::object> parse_json_object(const std::string& line) {
  picojson::value v;
  try {
    if (!picojson::parse(v, line).empty() || !v.is<picojson::object>()) return std::nullopt;
  } catch (const std::exception&) { // a number that overflows a double
    return std::nullopt;
  }
  return v.get<picojson::object>();
}

// The two ports of egressd's ready line, or nullopt.
inline std::optional<std::pair<std::uint16_t, std::uint16_t>> parse_ready_ports(const std::string& line) {
  const auto parsed = parse_json_object(line);
  if (!parsed) return std::nullopt;
  const picojson::object& o = *parsed;
  auto port = [&](const char* k) -> std::optional<std::uint16_t> {
    auto it = o.find(k);
    if (it == o.end() || !it->second.is<std::string>()) return std::nullopt;
    const std::string& a = it->second.get<std::string>();
    const std::string prefix = "127.0.0.1:";
    if (a.rfind(prefix, 0) != 0 || a.size() == prefix.size() || a.size() > prefix.size() + 5) return std::nullopt;
    unsigned long n = 0;
    for (char c : a.substr(prefix.size())) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<unsigned long>(c - '0');
    }
    if (n == 0 || n > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(n);
  };
  auto ev = o.find("event");
  if (ev == o.end() || !ev->second.is<std::string>() || ev->second.get<std::string>() != "ready") return std::nullopt;
  auto h = port("http"), s = port("socks");
  if (!h || !s) return std::nullopt;
  return std::make_pair(*h, *s);
}

// A violation line of egressd's --events stream (N7), or nullopt.
inline std::optional<sandbox_violation> parse_egressd_violation(const std::string& line) {
  const auto parsed = parse_json_object(line);
  if (!parsed) return std::nullopt;
  const picojson::object& o = *parsed;
  auto str = [&](const char* k) -> std::string {
    auto it = o.find(k);
    return it != o.end() && it->second.is<std::string>() ? it->second.get<std::string>() : std::string();
  };
  if (str("event") != "violation") return std::nullopt;
  sandbox_violation sv{str("action"), str("target"), line};
  if (sv.action.empty()) sv.action = "network-outbound";
  return sv;
}

namespace detail {

struct child {
  pid_t pid{-1};
  int out{-1}; // read end of its stdout (or events pipe)
  int err{-1}; // read end of its stderr (-1: not captured)
};

inline error sys(const std::string& what) { return make_error(errc::io_error, what, std::strerror(errno)); }

// In a child before execve: nothing of the launcher's signal state stays
// (a blocked mask and SIG_IGN survive execve; handlers do not).
inline void reset_signals() noexcept {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT, SIGWINCH}) ::signal(s, SIG_DFL);
}

// Removes `name` below the directory `dirfd` and everything in it, never
// following a symlink: every step is relative to a descriptor opened with
// O_NOFOLLOW, so an entry swapped for a link while this runs (by a process of
// the session that outlived it) fails the open instead of redirecting the
// removal. Portable POSIX (openat, fdopendir, unlinkat). 0 or an errno.
inline int remove_tree_at(int dirfd, const char* name, int depth = 0) noexcept {
  if (depth > 256) return ELOOP;
  if (::unlinkat(dirfd, name, 0) == 0) return 0; // not a directory
  if (errno == ENOENT) return 0;
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int e = errno;
    ::close(fd);
    return e;
  }
  int first = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (int r = remove_tree_at(::dirfd(d), e->d_name, depth + 1); r && !first) first = r;
  }
  ::closedir(d);
  if (::unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && !first) first = errno;
  return first;
}

// argv and envp as execve(2) takes them, built before fork (the child only
// reads them): the argv pointers point into `argv`, which must outlive this.
struct exec_args {
  std::vector<std::string> envs;
  std::vector<char*> av, ev;
  exec_args(const std::vector<std::string>& argv, const env_list& env) {
    for (const auto& v : env) envs.push_back(v.name + "=" + v.value);
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    for (auto& e : envs) ev.push_back(e.data());
    ev.push_back(nullptr);
  }
};

// fork + execve with an explicit environment; `extra` is mapped to fd 3.
// stdin is /dev/null unless keep_stdin.
inline result<child> start(const std::vector<std::string>& argv, const env_list& env, const std::string& cwd,
                           bool capture_err, bool keep_stdin, bool own_group) {
  int out[2], err[2] = {-1, -1};
  if (::pipe(out) != 0) return sys("pipe");
  if (capture_err && ::pipe(err) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return sys("pipe");
  }
  const exec_args args(argv, env);
  pid_t pid = ::fork();
  if (pid < 0) return sys("fork");
  if (pid == 0) {
    reset_signals();
    if (own_group) ::setpgid(0, 0);
    if (!keep_stdin) {
      int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
    }
    ::dup2(out[1], 1);
    if (capture_err) ::dup2(err[1], 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execve(args.av[0], args.av.data(), args.ev.data());
    ::_exit(127);
  }
  if (own_group) ::setpgid(pid, pid); // as the child does: a group signal right after fork finds it
  ::close(out[1]);
  if (capture_err) ::close(err[1]);
  return child{pid, out[0], capture_err ? err[0] : -1};
}

// A signal to the process group of a command start_exec started. The child
// makes itself a session (and group) leader with setsid() after fork, which
// its parent cannot do for it: a signal sent before that finds no group
// (ESRCH) while the command is still the only process it would reach, so it
// goes to the pid itself (a kill of a session's exec once missed it, and
// the exec ran to its end).
inline void signal_group(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0 && errno == ESRCH) ::kill(pid, sig);
}

inline void stop(pid_t pid, bool group = false) {
  if (pid <= 0) return;
  auto send = [&](int sig) {
    if (group) signal_group(pid, sig);
    else ::kill(pid, sig);
  };
  send(SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    ::usleep(20000);
  }
  send(SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Lines from a descriptor.
struct lines {
  std::string buf;
  bool eof{false};
  template <class F> void read(int fd, F&& each) {
    char tmp[8192];
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0) {
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) eof = true;
      return;
    }
    buf.append(tmp, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string l = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      each(l);
    }
    if (buf.size() > kMaxLogLine) buf.clear(); // an endless line is noise, not a denial
  }
};

// A command of the session: setsid, the given 0-2, workdir, explicit environment.
inline result<pid_t> start_exec(const std::vector<std::string>& argv, const env_list& env, const std::string& cwd,
                                int in, int out, int err) {
  const exec_args args(argv, env);
  pid_t pid = ::fork();
  if (pid < 0) return sys("fork");
  if (pid == 0) {
    reset_signals();
    ::setsid();
    int fds[3] = {::dup(in), ::dup(out), ::dup(err)};
    for (int k = 0; k < 3; ++k)
      if (fds[k] < 0 || ::dup2(fds[k], k) < 0) ::_exit(125);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(125);
    ::execve(args.av[0], args.av.data(), args.ev.data());
    ::_exit(127);
  }
  return pid;
}

} // namespace detail

class seatbelt_driver final : public driver {
public:
  explicit seatbelt_driver(driver_options o) : o_(std::move(o)) {}
  ~seatbelt_driver() override { destroy(); }

  result<void> start(reactor& r, driver_sink& sink) override {
    r_ = &r;
    sink_ = &sink;
    if (o_.run_dir.empty() || o_.run_dir.front() != '/')
      return make_error(errc::invalid_argument, "run_dir", "an absolute private run directory is required");
    // 1. egressd; rendering waits for its ports
    if (o_.pol.network.kind == network_kind::proxied) {
      if (o_.egressd_path.empty()) return make_error(errc::invalid_argument, "egressd", "a proxied run needs egressd");
      // Its command line: ccsb/protocol/egressd_args.hpp, the header egressd parses it with.
      protocol::egressd_args ea;
      ea.http_listen = "127.0.0.1:0";
      ea.socks_listen = "127.0.0.1:0";
      if (o_.pol.network.enabled) ea.allow = o_.pol.network.allow;
      else ea.network = false;
      ea.allow_upstream = o_.egress.allow_upstream;
      ea.resolve = o_.egress.resolve;
      ea.dns_server = o_.egress.dns_server;
      ea.events = "1";
      std::vector<std::string> av{o_.egressd_path};
      for (auto& x : protocol::to_argv(ea)) av.push_back(std::move(x));
      auto e = detail::start(av, {{"PATH", "/usr/bin:/bin"}}, "", false, false, false);
      if (!e) return std::move(e).err();
      egress_ = *e;
      ::fcntl(egress_.out, F_SETFL, O_NONBLOCK);
      egress_tok_ = r_->watch(egress_.out, [this](short) { on_egress(); });
      ready_timer_ = r_->after(o_.egress_ready_within, [this] {
        ready_timer_ = 0;
        if (!ready_) sink_->failed(make_error(errc::io_error, "egressd", "egressd did not report its ports (ready) in time"));
      });
      return ok();
    }
    r_->after(std::chrono::milliseconds(0), [this] { prepare(); });
    return ok();
  }

  result<void> exec(const exec_spec& s) override {
    if (!ready_) return make_error(errc::illegal_transition, "session", "the Seatbelt profile is not rendered yet");
    if (s.terminal) return make_error(errc::unsupported, "pty", "the macOS driver gives no pseudo-terminal");
    const env_list env = exec_environment(env_, s.env);
    auto pid = detail::start_exec(seatbelt_argv(o_.sandbox_exec, profile_, s.argv), env, s.workdir, s.stdin_fd,
                                  s.stdout_fd, s.stderr_fd);
    if (!pid) return std::move(pid).err();
    const exec_id id = s.id;
    auto w = r_->watch_exit(*pid, [this, id](int status) {
      execs_.erase(id);
      sink_->exited(id, status);
    });
    if (!w) {
      detail::signal_group(*pid, SIGKILL);
      ::waitpid(*pid, nullptr, 0);
      return std::move(w).err();
    }
    execs_.emplace(id, running{*pid, *w});
    r_->after(std::chrono::milliseconds(0), [this, id, p = *pid] { sink_->started(id, p, unique_fd()); });
    return ok();
  }

  result<void> signal(exec_id id, int sig) override {
    if (auto it = execs_.find(id); it != execs_.end()) detail::signal_group(it->second.pid, sig);
    return ok();
  }
  result<void> freeze(bool) override {
    return make_error(errc::unsupported, "suspend", "the macOS driver has no freezer");
  }
  result<void> adopt(int) override { return ok(); }
  std::string default_workdir() const override { return o_.pol.workdir.empty() ? std::string("/") : o_.pol.workdir; }

  void destroy() override {
    if (destroyed_) return;
    destroyed_ = true;
    for (auto* t : {&egress_tok_, &log_tok_, &ready_timer_})
      if (r_ && *t) {
        r_->unwatch(*t);
        r_->cancel(*t);
        *t = 0;
      }
    for (auto& [id, x] : execs_) {
      if (r_) r_->unwatch(x.watch);
      detail::signal_group(x.pid, SIGKILL);
      while (::waitpid(x.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    execs_.clear();
    if (reader_.pid > 0) { // the unified log delivers late: read it a little longer
      auto until = std::chrono::steady_clock::now() + o_.log_drain;
      while (!log_lines_.eof && std::chrono::steady_clock::now() < until) {
        pollfd p{reader_.out, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0) log_lines_.read(reader_.out, [this](const std::string& l) { on_log_line(l); });
      }
      detail::stop(reader_.pid);
      ::close(reader_.out);
      reader_ = {};
    }
    if (egress_.pid > 0) {
      detail::stop(egress_.pid);
      egress_lines_.read(egress_.out, [this](const std::string& l) { on_egress_line(l); });
      ::close(egress_.out);
      egress_ = {};
    }
    if (!facts_.scratch_home.empty()) {
      int rfd = ::open(o_.run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int r = rfd < 0 ? errno : detail::remove_tree_at(rfd, std::string(kScratchHomeName).c_str());
      if (rfd >= 0) ::close(rfd);
      if (r && sink_) sink_->log("could not remove the scratch HOME " + facts_.scratch_home + ": " + std::strerror(r));
    }
    if (o_.owns_run_dir && !o_.run_dir.empty()) {
      const auto slash = o_.run_dir.rfind('/');
      const std::string parent = slash == 0 ? "/" : o_.run_dir.substr(0, slash);
      int pfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      int r = pfd < 0 ? errno : detail::remove_tree_at(pfd, o_.run_dir.c_str() + slash + 1);
      if (pfd >= 0) ::close(pfd);
      if (r && sink_) sink_->log("could not remove " + o_.run_dir + ": " + std::strerror(r));
    }
  }

private:
  // 2. and 3.: once the ports are known (or without proxies, at once).
  void prepare() {
    facts_.session_tag = seatbelt_tag(o_.pol.session_id, o_.nonce);
    facts_.temp_dir = ccsb::lexical_normal(o_.run_dir + "/tmp");
    if (::mkdir(facts_.temp_dir.c_str(), 0700) != 0 && errno != EEXIST)
      return sink_->failed(detail::sys("mkdir " + facts_.temp_dir));
    if (seatbelt_scratch_home_needed(o_.pol))
      if (auto h = make_scratch_home(); !h) return sink_->failed(h.err());
    facts_.resolve = [](const std::string& p) {
      char buf[4096];
      if (::realpath(p.c_str(), buf)) return std::string(buf);
      return p;
    };
    auto profile = render_seatbelt(o_.pol, facts_);
    if (!profile) return sink_->failed(profile.err());
    for (const auto& n : profile->notes) sink_->log(n);
    profile_ = std::move(*profile);
    env_ = seatbelt_environment(o_.pol, facts_);
    auto reader = detail::start(seatbelt_log_argv(o_.log_tool, facts_.session_tag), {{"PATH", "/usr/bin:/bin"}}, "",
                                false, false, false);
    if (!reader) return sink_->failed(reader.err());
    reader_ = *reader;
    ::fcntl(reader_.out, F_SETFL, O_NONBLOCK);
    log_tok_ = r_->watch(reader_.out, [this](short) {
      log_lines_.read(reader_.out, [this](const std::string& l) { on_log_line(l); });
      if (log_lines_.eof && log_tok_) {
        r_->unwatch(log_tok_);
        log_tok_ = 0;
      }
    });
    ready_ = true;
    sink_->ready();
  }

  // E5: run_dir/home, made here (an existing entry is refused: nothing
  // else of the host becomes the session's HOME), with its .gitconfig.
  result<void> make_scratch_home() {
    const std::string home = ccsb::lexical_normal(o_.run_dir + "/" + std::string(kScratchHomeName));
    if (::mkdir(home.c_str(), 0700) != 0) return detail::sys("mkdir " + home);
    facts_.scratch_home = home;
    auto gc = gitconfig_for(o_.git_identity ? *o_.git_identity : read_host_git_identity(o_.pol.home));
    for (const auto& n : gc.notes) sink_->log(n);
    if (!gc.content.empty()) {
      const std::string gp = home + "/.gitconfig";
      unique_fd f(::open(gp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!f || !write_all(f.get(), gc.content)) return detail::sys("write " + gp);
      sink_->log("git identity: user.name and user.email copied into " + gp);
    }
    sink_->log("scratch HOME: a private directory at " + home + " (HOME), removed with the session");
    return ok();
  }

  void on_egress() {
    egress_lines_.read(egress_.out, [this](const std::string& l) { on_egress_line(l); });
    if (egress_lines_.eof && egress_tok_) {
      r_->unwatch(egress_tok_);
      egress_tok_ = 0;
      if (!ready_) sink_->failed(make_error(errc::io_error, "egressd", "egressd exited before it reported its ports"));
    }
  }

  void on_egress_line(const std::string& l) {
    if (!ready_ && !facts_.http_port) {
      if (auto ports = parse_ready_ports(l)) {
        facts_.http_port = ports->first;
        facts_.socks_port = ports->second;
        if (ready_timer_) r_->cancel(ready_timer_);
        ready_timer_ = 0;
        prepare();
      }
      return;
    }
    if (auto v = parse_egressd_violation(l)) sink_->violation(std::nullopt, *v);
  }

  void on_log_line(const std::string& l) {
    if (auto v = parse_seatbelt_denial(l, facts_.session_tag)) sink_->violation(std::nullopt, *v);
  }

  driver_options o_;
  reactor* r_{nullptr};
  driver_sink* sink_{nullptr};
  detail::child egress_, reader_;
  detail::lines egress_lines_, log_lines_;
  reactor::token egress_tok_{0}, log_tok_{0}, ready_timer_{0};
  seatbelt_facts facts_;
  seatbelt_profile profile_;
  env_list env_;
  struct running {
    pid_t pid;
    reactor::token watch;
  };
  std::map<exec_id, running> execs_;
  bool ready_{false};
  bool destroyed_{false};
};

// A nonce for the log tag: [A-Za-z0-9]{12} from /dev/urandom.
inline result<std::string> random_nonce() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[12];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return detail::sys("open /dev/urandom");
  ssize_t n = ::read(fd, raw, sizeof raw);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof raw)) return make_error(errc::io_error, "nonce", "short read from /dev/urandom");
  std::string out;
  for (unsigned char c : raw) out.push_back(kAlnum[c % (sizeof kAlnum - 1)]);
  return out;
}

// The programs the driver runs: /usr/bin/sandbox-exec and /usr/bin/log
// always; only the Linux simulation (CCSB_LAUNCH_SIMULATE_MACOS) reads
// CCSB_SIMULATED_SANDBOX_EXEC and CCSB_SIMULATED_LOG (the tests' stand-ins).
inline std::string sandbox_exec_path() {
  if constexpr (sys::this_platform::simulated)
    if (const char* e = std::getenv("CCSB_SIMULATED_SANDBOX_EXEC"); e && *e) return e;
  return std::string(kSandboxExec);
}
inline std::string log_tool_path() {
  if constexpr (sys::this_platform::simulated)
    if (const char* e = std::getenv("CCSB_SIMULATED_LOG"); e && *e) return e;
  return std::string(kLogTool);
}

// B2 on macOS: what the probe needs (probe_native's macos case): the
// platform and whether sandbox-exec is there. No namespaces to try.
inline probe_facts seatbelt_probe_facts() {
  probe_facts f;
  f.platform = ccsb::platform::macos;
  f.has_sandbox_exec = ::access(sandbox_exec_path().c_str(), X_OK) == 0;
  return f;
}

// The native driver of ccsb-run and ccsbd on macOS (platform.hpp
// native_driver::seatbelt): a private run dir made under the per-user temp
// dir (mkdtemp: 0700, unpredictable), a fresh nonce for the log tag; the
// driver removes the run dir on destroy.
inline result<std::unique_ptr<driver>> make_seatbelt_driver(policy pol, std::string egressd_path,
                                                            egress_settings egress) {
  auto base = sys::this_platform::user_temp_dir();
  if (!base) return std::move(base).err();
  std::string tmpl = *base + "/ccsb-XXXXXXXX";
  if (!::mkdtemp(tmpl.data())) return detail::sys("mkdtemp " + tmpl);
  auto nonce = random_nonce();
  if (!nonce) {
    ::rmdir(tmpl.c_str());
    return std::move(nonce).err();
  }
  driver_options o;
  o.pol = std::move(pol);
  o.egressd_path = std::move(egressd_path);
  o.egress = std::move(egress);
  o.run_dir = tmpl;
  o.nonce = *nonce;
  o.owns_run_dir = true;
  o.sandbox_exec = sandbox_exec_path();
  o.log_tool = log_tool_path();
  return std::unique_ptr<driver>(new seatbelt_driver(std::move(o)));
}

} // namespace ccsb::launch::macos
