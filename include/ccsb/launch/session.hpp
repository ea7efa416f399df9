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
//        flock'ed for the session's life, with ccsb-run.pid, the mask and
//        placeholder sources (render_bwrap.hpp mask_sources) and egress/.
//     3. proxied network: spawn this session's egressd on Unix sockets in
//        <run>/egress (N1, N6) and do NOT wait: bwrap starts concurrently.
//     4. render the policy for bwrap with the real host facts; record the
//        placeholders in the run dir; create the placeholder parents.
//     5. spawn bwrap (its own process group, PR_SET_PDEATHSIG, explicit envp,
//        descriptors 0-2 + ccsb-init's status pipe + the --args memfd + the
//        /etc files bwrap copies in, plan.data_files at kFirstDataFd...);
//        ccsb-init starts the socat bridges (L3), waits until both egressd
//        sockets accept a connection and both bridges listen, and reports
//        "bridges-ready" (handle -> warm); the status pipe closing without a
//        failure line means the command was exec'd: handle -> active,
//        `ready`. egressd exiting before that kills the sandbox and fails
//        the run (exit 125).
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
#include "ccsb/launch/process.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render_bwrap.hpp"
#include "ccsb/spec.hpp"

#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

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
  std::string socat_path{"/usr/bin/socat"};
  std::vector<std::string> egress_opts;
  std::optional<std::chrono::milliseconds> timeout;
  std::string profile_name;
};

namespace detail {

inline std::string run_dir_base() {
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  struct stat st{};
  if (x && x[0] == '/' && ::stat(x, &st) == 0 && S_ISDIR(st.st_mode) && ::access(x, W_OK | X_OK) == 0)
    return x;
  return "/tmp";
}

// Files of a run dir besides the mask sources (render_bwrap.hpp):
//   ccsb-run.pid   the owning launcher's pid (written after the lock is held)
//   placeholders   the host paths bwrap will create, one a line (teardown
//                  and the stale sweep remove the still-empty ones)
//   egress/        egressd's http.sock and socks.sock (bound into the sandbox)
inline constexpr const char* kRunDirPrefix = "ccsb-";
inline constexpr const char* kPidFile = "ccsb-run.pid";
inline constexpr const char* kPlaceholdersFile = "placeholders";
inline constexpr const char* kEgressDir = "egress";

struct run_dir {
  std::string path;
  unique_fd lock; // the run dir itself, flock(LOCK_EX) for the session's life
};

inline result<run_dir> make_run_dir(const std::string& session_id, const std::string& base) {
  std::string safe;
  for (char c : session_id) {
    if (safe.size() >= 24) break;
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  }
  std::string tmpl = base + "/" + kRunDirPrefix + safe + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return sys_error("mkdtemp " + tmpl);
  run_dir rd;
  rd.path = tmpl;
  // Lock first, then the pid file: a sweeper only considers dirs that have a
  // pid file, so it never sees this one unlocked.
  rd.lock.reset(::open(tmpl.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!rd.lock) return sys_error("open " + tmpl);
  if (::flock(rd.lock.get(), LOCK_EX | LOCK_NB) != 0) return sys_error("flock(LOCK_EX) " + tmpl);
  {
    unique_fd pf(::open((tmpl + "/" + kPidFile).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!pf || !write_all(pf.get(), std::to_string(::getpid()) + "\n")) return sys_error("write " + tmpl + "/" + kPidFile);
  }
  const mask_sources s = mask_sources_for(tmpl);
  auto mk_dir = [](const std::string& p, mode_t m) -> result<void> {
    if (::mkdir(p.c_str(), 0700) != 0) return sys_error("mkdir " + p);
    if (::chmod(p.c_str(), m) != 0) return sys_error("chmod " + p);
    return ok();
  };
  auto mk_file = [](const std::string& p, mode_t m) -> result<void> {
    int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return sys_error("open(O_CREAT) " + p);
    ::close(fd);
    if (::chmod(p.c_str(), m) != 0) return sys_error("chmod " + p);
    return ok();
  };
  for (auto r : {mk_dir(tmpl + "/mask", 0700), mk_dir(tmpl + "/empty", 0700), mk_dir(tmpl + "/" + kEgressDir, 0700),
                 mk_file(s.mask_file, 0000), mk_dir(s.mask_dir, 0000), mk_file(s.empty_file, 0444),
                 mk_dir(s.empty_dir, 0555)})
    if (!r) return std::move(r).err();
  return rd;
}

inline void remove_run_dir(const std::string& dir) {
  if (dir.empty()) return;
  const mask_sources s = mask_sources_for(dir);
  ::chmod(s.mask_dir.c_str(), 0700);
  ::chmod(s.empty_dir.c_str(), 0700);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Writes the placeholder list into the run dir (before bwrap creates them).
inline result<void> record_placeholders(const std::string& dir, const std::vector<std::string>& paths) {
  std::string text;
  for (const auto& p : paths) text += p + "\n";
  std::string file = dir + "/" + kPlaceholdersFile;
  unique_fd f(::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!f || !write_all(f.get(), text)) return sys_error("write " + file);
  return ok();
}

inline void remove_if_empty(const std::string& p);

inline std::string read_small_at(int dirfd, const char* name) {
  unique_fd f(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!f) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(f.get(), buf, sizeof buf)) > 0 && out.size() < (1u << 20)) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// Removes the run dirs (and their still-empty placeholders) that launchers
// killed with SIGKILL left behind under `base`. A dir is stale only when all
// hold: its name starts with "ccsb-", it is a real directory owned by this
// uid, it has a ccsb-run.pid file, that pid is dead (kill(pid, 0) gives
// ESRCH), and flock(LOCK_EX|LOCK_NB) on it succeeds (a live launcher holds
// its lock for the whole session, also across pid namespaces; two sweepers
// never remove the same dir twice). Anything else named ccsb-* is left alone.
inline std::vector<std::string> sweep_stale_run_dirs(const std::string& base) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(base.c_str());
  if (!d) return removed;
  const uid_t me = ::getuid();
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, kRunDirPrefix, std::strlen(kRunDirPrefix)) != 0) continue;
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    unique_fd dfd(::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd) continue;
    struct stat st{};
    if (::fstat(dfd.get(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
    std::string pid_text = read_small_at(dfd.get(), kPidFile);
    char* end = nullptr;
    long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (pid_text.empty() || pid <= 0 || (*end != '\n' && *end != '\0')) continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::flock(dfd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    // Under the lock: the dir may have been removed by another sweeper
    // between readdir and flock; then the pid file is gone too.
    if (read_small_at(dfd.get(), kPidFile) != pid_text) continue;
    std::istringstream ph(read_small_at(dfd.get(), kPlaceholdersFile));
    std::string line;
    while (std::getline(ph, line))
      if (!line.empty() && line.front() == '/') remove_if_empty(line);
    std::string path = base + "/" + e->d_name;
    remove_run_dir(path);
    removed.push_back(path);
  }
  ::closedir(d);
  return removed;
}

// Removes a placeholder bwrap created: empty directories (bottom-up) and
// empty regular files only; anything with content stays.
inline void remove_if_empty(const std::string& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    std::vector<std::string> children;
    for (auto& e : std::filesystem::directory_iterator(p, ec)) children.push_back(e.path().string());
    for (auto& c : children) remove_if_empty(c);
    ::rmdir(p.c_str());
  } else if (S_ISREG(st.st_mode) && st.st_size == 0) {
    ::unlink(p.c_str());
  }
}

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
    if (!req_.profile_name.empty()) detail_str("profile", req_.profile_name);
    // Signals arrive through a signalfd from here on (before any child is spawned,
    // so no SIGCHLD is lost).
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, s);
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
    std::vector<unique_fd> data_fds;
    if (req_.chosen == backend::native) {
      // 2. run dir: first sweep what SIGKILLed launchers left behind.
      const std::string base = detail::run_dir_base();
      for (const auto& gone : detail::sweep_stale_run_dirs(base)) log("removed a stale run dir of a dead launcher: " + gone);
      auto dir = detail::make_run_dir(req_.session_id, base);
      if (!dir) return std::move(dir).err();
      run_dir_ = dir->path;
      run_lock_ = std::move(dir->lock);
      detail_str("runDir", run_dir_);
      bwrap_facts facts = host_bwrap_facts();
      facts.run_dir = run_dir_;
      facts.init_path = req_.init_path;
      facts.socat_path = req_.socat_path;
      // 3. egressd, started now and not waited for: bwrap starts at once and
      //    ccsb-init holds the command back until both egressd sockets and
      //    both bridges accept (L3).
      if (req_.pol.network.kind == network_kind::proxied) {
        egressd_options eo;
        eo.path = req_.egressd_path;
        eo.socket_dir = run_dir_ + "/" + detail::kEgressDir;
        eo.network = req_.pol.network;
        eo.extra = req_.egress_opts;
        auto e = spawn_egressd(eo);
        if (!e) return std::move(e).err();
        egressd_ = std::move(*e);
        facts.egress_dir = eo.socket_dir;
        detail_int("egressdPid", egressd_->pid);
        detail_str("httpSocket", egressd_->http_socket);
        detail_str("socksSocket", egressd_->socks_socket);
        detail_str("httpProxy", std::string(kBridgeHttp));
        detail_str("socksProxy", std::string(kBridgeSocks));
      }
      // 4. render
      auto plan = render_bwrap(req_.pol, facts);
      if (!plan) return std::move(plan).err();
      for (const auto& n : plan->notes) log(n);
      placeholders_ = plan->placeholders;
      if (auto r = detail::record_placeholders(run_dir_, placeholders_); !r) return std::move(r).err();
      for (const auto& d : plan->create_dirs) {
        if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + d);
        struct stat st{};
        if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
          return make_error(errc::io_error, d, "expected a directory for a write-deny placeholder");
      }
      detail_str("workdir", req_.pol.workdir);
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
      // The /etc files bwrap copies in (--file FD): read-only, not following
      // a symlink the renderer did not see (it bound those instead).
      data_fds.clear();
      for (std::size_t i = 0; i < plan->data_files.size(); ++i) {
        unique_fd f(::open(plan->data_files[i].c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
        if (!f) return sys_error("open " + plan->data_files[i]);
        fds.push_back({kFirstDataFd + static_cast<int>(i), f.get()});
        data_fds.push_back(std::move(f));
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
    data_fds.clear();
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
    bool bridges_ready = false;
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
          if (*line == "bridges-ready") {
            bridges_ready = true;
            (void)handle_.transition(sandbox_state::warm);
            publish();
          } else if (line->rfind("init-failed:", 0) == 0 || line->rfind("exec-failed:", 0) == 0) {
            failure = *line;
          }
        }
        if (!more) {
          status_open = false;
          if (bridges_ready && failure.empty()) {
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
        if (parsed->event == "ready") egressd_->ready = true;
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

  void flush_output(int i, std::string data) {
    if (data.empty()) return;
    emit(i == 0 ? sandbox_event::make_stdout(std::move(data), req_.session_id)
                : sandbox_event::make_stderr(std::move(data), req_.session_id));
  }

  void teardown() {
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
    for (const auto& p : placeholders_) detail::remove_if_empty(p);
    detail::remove_run_dir(run_dir_);
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
  std::vector<std::string> placeholders_;
  unique_fd run_lock_;
  std::optional<egressd_process> egressd_;
  pid_t top_{-1};
  bool ready_{false};
  bool killed_{false};
};

} // namespace ccsb::launch
