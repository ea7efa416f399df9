// ccsb/launch/microvm_driver.hpp — the `microvm` backend (X4, B6;
// docs/microvm.md): each session is a QEMU microVM with a guest kernel of its
// own (launcher only; does I/O; Linux-only). The decisions are
// ccsb/microvm.hpp's; this file gathers the facts and runs QEMU.
//
//   gather_microvm_facts()  QEMU on PATH, /dev/kvm, the guest image (found as
//                           the helpers are: --guest-dir, CCSB_GUEST_DIR,
//                           SELF/guest, SELF/../libexec/ccsb/guest, the
//                           compiled-in helper dir's guest), the accelerator
//                           asked for (flag, else CCSB_MICROVM_ACCEL)
//   microvm_driver          the session's driver (driver.hpp): start() spawns
//                           QEMU, ready() once the guest agent has mounted the
//                           shares; exec() runs commands through the agent
//                           (ccsb/protocol/guest.hpp) with their own output
//                           and exit; freeze() stops and continues QEMU;
//                           destroy() powers the guest off and reaps QEMU for
//                           certain (SIGKILL after a grace period)
//
// QEMU's confinement: it runs with its own seccomp filter (-sandbox on), no
// NIC, no host path but the kernel, the initramfs and the shares, and never
// as root. A root launcher runs it as a session uid of its own
// (linux/session_uid.hpp) in a mount namespace of its own where each
// writable bind, and each read-only one that uid could not read, is an
// idmapped clone presenting the bind's owner as that uid: what the guest
// writes lands owned by the bind's owner, and nothing else of the host is
// writable to QEMU. It joins a cgroup of its own with the session's L7
// limits (limits.hpp), named after the launcher (microvm::vm_cgroup_name):
// a launch sweeps the ones of launchers that were SIGKILLed. Its control and
// console channels are socketpairs it inherits: nothing of the session is
// left on disk.
//
// Inside the guest (docs/microvm.md "The policy inside the guest"), every
// command runs under the guest's own ccsb-init, started by the agent as an
// unprivileged guest user (QEMU's host uid): the X1 broker with the native
// policy's rules (P7, the absent P5 names) and its Landlock ruleset
// (microvm::guest_supervisor_args, sent as `supervise`); the existing P5
// paths in writable shares are read-only binds. Its `violation` and
// `landlock` messages reach the sink as a native session's do.
//
// exec(): pipes, or a terminal (T4): the session gets the master of a host
// pty whose slave end this driver relays raw to and from the guest's pty
// (the guest's has the line discipline); terminal_resized() sends the size.
// stdin is read from the caller's descriptor and sent in chunks of at most
// kMaxOutputChunk, at most kStdinWindow unacknowledged per exec.
//
// Egress (microvm_egress.hpp): with options::egress, a second virtio-serial
// port (ccsb.egress) into the session's egressd; the guest still has no NIC.
//
// The guest's output is written to the session's pipes, which the session
// reads on the same reactor and hands to its consumer: a consumer that
// blocks (ccsb-run's write to its stdout) stops the reactor, so the control
// port is not read, the agent's writes block and so do the commands, as on
// a full pipe (tests/microvm/test_microvm_output.cpp: 64 MiB unread, the
// launcher's VmRSS stays ~3.5 MB). The driver has no bound of its own.
#pragma once

#include "ccsb/launch/driver.hpp"
#include "ccsb/launch/helpers.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/limits.hpp"
#include "ccsb/launch/microvm_egress.hpp"
#include "ccsb/launch/linux/session_uid.hpp"
#include "ccsb/microvm.hpp"
#include "ccsb/protocol/guest.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ccsb::launch {

namespace microvm_detail {

// The directory of the guest image: the first candidate with a manifest.
inline std::string find_guest_dir(const std::optional<std::string>& flag) {
  if (flag) return *flag;
  if (const char* e = std::getenv("CCSB_GUEST_DIR"); e && *e) return e;
  const auto c = helper_candidates("guest", self_dir());
  for (const auto& d : c)
    if (::access((d + "/manifest").c_str(), R_OK) == 0) return d;
  return c.empty() ? std::string("guest") : c.front();
}

// The manifest's problem ("" when it is usable) and its kernel version.
inline std::pair<std::string, std::string> check_image(const std::string& dir) {
  for (const char* f : {"/vmlinux", "/initramfs.cpio.gz", "/manifest"}) {
    struct stat st{};
    if (::stat((dir + f).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return {dir + f + " is missing", ""};
  }
  std::istringstream in(detail::read_text(dir + "/manifest"));
  std::string line, kernel;
  int format = 0;
  while (std::getline(in, line)) {
    if (line.rfind("format=", 0) == 0) format = std::atoi(line.c_str() + 7);
    if (line.rfind("kernel=", 0) == 0) kernel = line.substr(7);
  }
  if (format != microvm::kImageFormat)
    return {dir + "/manifest is of format " + std::to_string(format) + ", this program needs " +
                std::to_string(microvm::kImageFormat),
            ""};
  if (kernel.empty()) return {dir + "/manifest names no kernel", ""};
  return {"", kernel};
}

// The host's TSC frequency in kHz, from /proc/cpuinfo's "cpu MHz" (0:
// unknown). The guest kernel's early calibration under TCG needs it.
inline long host_tsc_khz() {
  std::istringstream in(detail::read_text("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0)
      if (auto c = line.find(':'); c != std::string::npos) return static_cast<long>(std::atof(line.c_str() + c + 1) * 1000);
  return 0;
}

// SIGSTOP stops a process's threads asynchronously: true once every thread
// of `pid` is in the stopped state, so that a suspend answered means no
// vCPU and no 9p write of QEMU runs any more.
inline bool all_threads_stopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(tasks.c_str());
  if (!d) return false;
  bool all = true, any = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string stat = detail::read_text(tasks + "/" + e->d_name + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue; // the thread is gone
    any = true;
    const char state = stat[paren + 2];
    if (state != 'T' && state != 't') all = false;
  }
  ::closedir(d);
  return any && all;
}

} // namespace microvm_detail

// The vm-PID-N cgroups of launchers that are gone (SIGKILLed: no teardown
// ran), in this launcher's own cgroup of every hierarchy, are removed
// (session_limits::remove_stale kills what is left in them). A PID that
// lives (or was reused) keeps its directories. Each microvm launch sweeps
// before it makes its own; ccsbd sweeps at start-up (a SIGKILLed daemon
// leaves those of all its VMs).
inline void sweep_stale_vm_cgroups() {
  const detail::own_cgroups own;
  std::set<std::string> names;
  for (const char* controller : {"", "memory", "pids", "freezer", "cpu"}) {
    auto dir = own.dir(controller);
    if (!dir) continue;
    DIR* d = ::opendir(dir->c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d))
      if (auto pid = microvm::stale_vm_cgroup_owner(e->d_name);
          pid && ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH)
        names.insert(e->d_name);
    ::closedir(d);
  }
  for (const auto& n : names) (void)session_limits::remove_stale(n);
}

inline microvm::probe_facts gather_microvm_facts(const std::optional<std::string>& accel_flag,
                                                 const std::optional<std::string>& guest_dir_flag) {
  microvm::probe_facts f;
  if (auto q = which("qemu-system-x86_64", path_variable())) f.qemu_path = *q;
  int kvm = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm >= 0) {
    f.kvm_usable = true;
    ::close(kvm);
  } else {
    f.kvm_problem = std::string("/dev/kvm: ") + std::strerror(errno);
  }
  f.guest_dir = microvm_detail::find_guest_dir(guest_dir_flag);
  std::tie(f.image_problem, f.image_kernel) = microvm_detail::check_image(f.guest_dir);
  if (accel_flag) {
    f.accel_request = *accel_flag;
    f.accel_source = "--microvm-accel";
  } else if (const char* e = std::getenv("CCSB_MICROVM_ACCEL"); e && *e) {
    f.accel_request = std::string(e);
    f.accel_source = "CCSB_MICROVM_ACCEL";
  }
  return f;
}

// The host's system tree as microvm::plan_shares reads it.
inline std::vector<microvm::system_entry> system_tree() {
  std::vector<microvm::system_entry> out;
  for (auto p : microvm::kSystemTree) {
    microvm::system_entry e;
    e.path = std::string(p);
    struct stat st{};
    if (::lstat(e.path.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = ::readlink(e.path.c_str(), buf, sizeof buf - 1);
        if (n > 0) {
          e.what = microvm::system_entry::kind::symlink;
          e.link_target.assign(buf, static_cast<std::size_t>(n));
        }
      } else if (S_ISDIR(st.st_mode)) {
        e.what = microvm::system_entry::kind::directory;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

struct microvm_driver_options {
  std::string session_id;
  microvm::probe_answer probe;
  std::string guest_dir;
  std::string qemu_path;
  microvm::share_plan plan;
  std::vector<std::string> protect; // P5: guest paths made read-only in the guest (microvm::protected_guest_paths)
  protocol::init_args supervisor;   // the guest's ccsb-init: X1 broker, P7, X2 (microvm::guest_supervisor_args)
  env_list env; // the commands' environment (microvm::guest_environment)
  std::string workdir;          // the guest workdir of an exec that names none
  std::optional<spawn_options::credentials> run_as; // root launcher: QEMU's uid (else a session uid)
  std::chrono::milliseconds ready_timeout{60000};
  int memory_mb{512};
  resource_limits limits; // L7: QEMU's cgroup (memory, pids, CPU), as a native session's
  // N1-N8: the session's egressd behind the guest's egress port
  // (microvm_egress.hpp); nullopt: no port, the guest has lo only.
  std::optional<microvm_egress_options> egress;
};

class microvm_driver final : public driver {
public:
  explicit microvm_driver(microvm_driver_options o) : o_(std::move(o)) {}
  ~microvm_driver() override { destroy(); }

  result<void> start(reactor& r, driver_sink& sink) override {
    r_ = &r;
    sink_ = &sink;
    int ctl[2], con[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) return sys_error("socketpair (control)");
    ctl_ = unique_fd(ctl[0]);
    unique_fd qemu_ctl(ctl[1]);
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, con) != 0) return sys_error("socketpair (console)");
    con_ = unique_fd(con[0]);
    unique_fd qemu_con(con[1]);

    microvm::vm_config vc;
    vc.qemu = o_.qemu_path;
    vc.a = o_.probe.chosen;
    vc.kernel = o_.guest_dir + "/vmlinux";
    vc.initrd = o_.guest_dir + "/initramfs.cpio.gz";
    vc.tsc_khz = microvm_detail::host_tsc_khz();
    vc.memory_mb = o_.memory_mb;
    vc.control_fd = 3;
    vc.console_fd = 4;
    vc.shares = o_.plan.shares;
    unique_fd qemu_egress;
    if (o_.egress) {
      egress_ = std::make_unique<microvm_egress>(*o_.egress);
      auto p = egress_->open_port();
      if (!p) return std::move(p).err();
      qemu_egress = std::move(*p);
      vc.egress_fd = 5;
    }

    spawn_options so;
    so.path = o_.qemu_path;
    so.argv = microvm::qemu_argv(vc);
    so.env = {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}};
    // QEMU's own messages (a kernel it cannot open, a refused option) go
    // where the guest's console goes: a failed start reports them.
    unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    so.fds = {{0, null.get()}, {1, qemu_con.get()}, {2, qemu_con.get()}, {3, qemu_ctl.get()}, {4, qemu_con.get()}};
    if (qemu_egress) so.fds.push_back({5, qemu_egress.get()});
    so.cwd = "/";
    if (auto id = identity(so); !id) return id;
    if (auto l = apply_limits(so); !l) return l;
    auto pid = spawn(so);
    trees_.clear();
    if (!pid) return make_error(errc::backend_unavailable, "backend", "microvm: QEMU did not start: " + pid.err().what());
    pid_ = *pid;
    auto w = r_->watch_exit(pid_, [this](int st) { on_qemu_exit(st); });
    if (!w) {
      kill_qemu();
      return std::move(w).err();
    }
    exit_watch_ = *w;
    if (egress_) {
      microvm_egress_hooks h;
      h.violation = [this](sandbox_violation v) { sink_->violation(std::nullopt, std::move(v)); };
      h.detail = [this](const std::string& k, picojson::value v) { sink_->detail(k, std::move(v)); };
      h.log = [this](const std::string& m) { sink_->log(m); };
      if (auto e = egress_->start(*r_, limits_, std::move(h)); !e) {
        r_->unwatch(exit_watch_);
        exit_watch_ = 0;
        kill_qemu();
        pid_ = -1;
        return e;
      }
    }
    ctl_watch_ = r_->watch(ctl_.get(), [this](short) { on_control(); });
    con_watch_ = r_->watch(con_.get(), [this](short) { on_console(); });
    ready_timer_ = r_->after(o_.ready_timeout, [this] {
      ready_timer_ = 0;
      fail("the guest agent did not answer within " + std::to_string(o_.ready_timeout.count() / 1000) + " s");
    });
    sink_->detail("microvm", picojson::value(o_.probe.vm.note));
    sink_->detail("guestKernel", picojson::value(o_.probe.kernel));
    sink_->detail("workdir", picojson::value(o_.workdir));
    sink_->log("microvm: QEMU started (" + o_.probe.vm.note + ", " + std::to_string(o_.plan.shares.size()) +
               " 9p shares" + (host_uid_ ? ", as uid " + std::to_string(*host_uid_) : std::string()) + ")");
    return ok();
  }

  result<void> exec(const exec_spec& s) override {
    if (!ready_) return make_error(errc::illegal_transition, "exec", "the guest is not ready");
    protocol::guest::exec m;
    m.id = s.id;
    m.workdir = s.workdir.empty() ? o_.workdir : s.workdir;
    m.terminal = s.terminal;
    m.argv = s.argv;
    // The session's environment, the exec's additions replacing names; N=V
    // only on the wire.
    std::map<std::string, std::string> env;
    for (const auto& v : o_.env) env[v.name] = v.value;
    for (const auto& v : s.env) env[v.name] = v.value;
    for (const auto& [k, v] : env) m.env.push_back(k + "=" + v);
    running e; // in execs_ once it is complete: a failed set-up leaves nothing behind
    for (int i = 0; i < 2; ++i) {
      const int src = i == 0 ? s.stdout_fd : s.stderr_fd;
      if (src < 0) continue;
      e.out[i].fd = unique_fd(::fcntl(src, F_DUPFD_CLOEXEC, 3));
      if (!e.out[i].fd) return sys_error("dup (exec output)");
      ::fcntl(e.out[i].fd.get(), F_SETFL, ::fcntl(e.out[i].fd.get(), F_GETFL) | O_NONBLOCK);
    }
    if (s.terminal) {
      // T4: the caller's terminal is a host pty whose slave end this driver
      // relays, raw (the guest's pty has the line discipline: echo, job
      // control, Ctrl-C); the session gets the master with `started`.
      int mfd = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (mfd < 0) return sys_error("posix_openpt (the host side of the guest's terminal)");
      e.master = unique_fd(mfd);
      if (::grantpt(mfd) != 0 || ::unlockpt(mfd) != 0) return sys_error("unlockpt");
      char name[128];
      if (::ptsname_r(mfd, name, sizeof name) != 0) return sys_error("ptsname_r");
      e.relay = unique_fd(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
      if (!e.relay) return sys_error(std::string("open ") + name);
      termios t{};
      ::tcgetattr(e.relay.get(), &t);
      ::cfmakeraw(&t);
      ::tcsetattr(e.relay.get(), TCSANOW, &t);
      winsize ws{};
      ws.ws_row = s.terminal->rows;
      ws.ws_col = s.terminal->cols;
      ::ioctl(mfd, TIOCSWINSZ, &ws);
      e.out[0].fd = unique_fd(::fcntl(e.relay.get(), F_DUPFD_CLOEXEC, 3));
      if (!e.out[0].fd) return sys_error("dup (terminal)");
      e.in = unique_fd(::fcntl(e.relay.get(), F_DUPFD_CLOEXEC, 3));
      if (!e.in) return sys_error("dup (terminal)");
    } else if (s.stdin_fd >= 0) {
      // Read without O_NONBLOCK (the descriptor may be the caller's own
      // stdin, whose flags it shares): one read per POLLIN never blocks.
      e.in = unique_fd(::fcntl(s.stdin_fd, F_DUPFD_CLOEXEC, 3));
      if (!e.in) return sys_error("dup (exec stdin)");
    }
    execs_[s.id] = std::move(e);
    if (!send(m)) {
      execs_.erase(s.id);
      return make_error(errc::io_error, "exec", "the guest's control channel is closed");
    }
    if (execs_[s.id].in) watch_input(s.id);
    else send(protocol::guest::input_eof{s.id});
    return ok();
  }

  void terminal_resized(exec_id id, protocol::terminal_size size) override {
    if (execs_.count(id)) send(protocol::guest::resize{id, size});
  }

  result<void> signal(exec_id id, int sig) override {
    if (execs_.count(id)) send(protocol::guest::kill{id, sig});
    return ok();
  }

  // The whole VM stops (its vCPU and device threads), the guest's clock with
  // it: the cgroup freezer where there is one, else SIGSTOP/SIGCONT.
  result<void> freeze(bool on) override {
    if (pid_ <= 0) return make_error(errc::unsupported, "suspend", "the VM is not running");
    if (limits_.can_freeze()) return limits_.freeze(on);
    if (::kill(pid_, on ? SIGSTOP : SIGCONT) != 0) return sys_error(on ? "kill(SIGSTOP) QEMU" : "kill(SIGCONT) QEMU");
    if (!on) return ok();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!microvm_detail::all_threads_stopped(pid_)) {
      if (std::chrono::steady_clock::now() > give_up) {
        ::kill(pid_, SIGCONT);
        return make_error(errc::io_error, "suspend", "QEMU's threads did not all stop within 5 s of SIGSTOP");
      }
      ::usleep(2000);
    }
    return ok();
  }
  result<void> adopt(int) override { return ok(); }
  std::string default_workdir() const override { return o_.workdir; }

  void destroy() override {
    if (destroyed_) return;
    destroyed_ = true;
    if (r_) {
      if (ready_timer_) r_->cancel(ready_timer_);
      if (ctl_watch_) r_->unwatch(ctl_watch_);
      if (con_watch_) r_->unwatch(con_watch_);
      if (exit_watch_) r_->unwatch(exit_watch_);
      for (auto& [id, e] : execs_) {
        for (auto& o : e.out)
          if (o.watch) r_->unwatch(o.watch);
        if (e.in_watch) r_->unwatch(e.in_watch);
      }
      for (auto t : soon_) r_->cancel(t);
    }
    soon_.clear();
    execs_.clear();
    if (pid_ > 0) {
      if (ctl_) send(protocol::guest::poweroff{});
      limits_.thaw_for_teardown();
      ::kill(pid_, SIGCONT); // a suspended VM cannot power off
      if (!wait_for(pid_, std::chrono::milliseconds(3000))) kill_qemu();
      pid_ = -1;
    }
    ctl_.reset();
    con_.reset();
    egress_.reset(); // egressd stopped, its last violations reported
    limits_.destroy();
    lease_.reset();
  }

  // The serial console's last lines (the guest kernel's and /init's words).
  const std::string& console_tail() const { return console_; }

private:
  struct stream {
    unique_fd fd;
    std::string pending;
    reactor::token watch{0};
  };
  struct running {
    stream out[2];
    std::optional<int> status; // exited, not yet reported (output still pending)
    unique_fd in;              // its stdin, or the terminal's relay end: read, sent as `stdin`
    reactor::token in_watch{0};
    std::size_t unacked{0};    // stdin chunks the agent has not written yet (<= kStdinWindow)
    unique_fd master;          // T4: the caller's side, handed over with `started`
    unique_fd relay;           // T4: the slave end this driver relays (raw)
  };

  // Input flow control: at most kStdinWindow chunks of kMaxOutputChunk are
  // on their way or waiting in the agent; the descriptor is read again as
  // the agent acknowledges them.
  void watch_input(exec_id id) {
    auto it = execs_.find(id);
    if (it == execs_.end() || !it->second.in || it->second.in_watch) return;
    if (it->second.unacked >= protocol::guest::kStdinWindow) return;
    it->second.in_watch = r_->watch(it->second.in.get(), [this, id](short) { on_input(id); });
  }

  void on_input(exec_id id) {
    auto it = execs_.find(id);
    if (it == execs_.end()) return;
    auto& e = it->second;
    char buf[protocol::guest::kMaxOutputChunk];
    ssize_t n = ::read(e.in.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n > 0) {
      ++e.unacked;
      send(protocol::guest::input{id, std::string(buf, static_cast<std::size_t>(n))});
      if (e.unacked >= protocol::guest::kStdinWindow) {
        r_->unwatch(e.in_watch);
        e.in_watch = 0;
      }
      return;
    }
    // EOF (or EIO: the caller closed the terminal's master).
    r_->unwatch(e.in_watch);
    e.in_watch = 0;
    e.in.reset();
    send(protocol::guest::input_eof{id});
  }

  // QEMU's uid: never root. A root launcher's: a session uid with idmapped
  // binds (or the one asked for with --run-as).
  result<void> identity(spawn_options& so) {
    if (::geteuid() != 0) return ok();
    if (o_.run_as) {
      so.run_as = o_.run_as;
      host_uid_ = o_.run_as->uid;
      return ok();
    }
    auto lease = lease_session_uid();
    if (!lease) return make_error(errc::backend_unavailable, "backend",
                                  "microvm: no session uid for QEMU (" + lease.err().what() + "); pass --run-as UID");
    session_uid_plan plan;
    const uid_t u = lease->uid;
    for (const auto& s : o_.plan.shares) {
      struct stat st{};
      if (::stat(s.host_path.c_str(), &st) != 0) return sys_error("stat " + s.host_path);
      const bool readable = (st.st_mode & (S_ISDIR(st.st_mode) ? 05 : 04)) == (S_ISDIR(st.st_mode) ? 05 : 04);
      if (!s.writable && readable) continue;
      plan.binds.push_back({s.host_path, s.host_path, !s.writable, st.st_uid, st.st_gid});
    }
    plan.lease = std::move(*lease);
    auto t = make_idmapped_trees(plan);
    if (!t) return make_error(errc::backend_unavailable, "backend",
                              "microvm: cannot present the binds to QEMU's session uid: " + t.err().what() +
                                  " (pass --run-as UID)");
    trees_ = std::move(*t);
    for (std::size_t i = 0; i < trees_.size(); ++i) so.attach.push_back({trees_[i].get(), plan.binds[i].staged});
    so.run_as = spawn_options::credentials{u, u};
    host_uid_ = u;
    lease_ = std::move(plan.lease.lock);
    return ok();
  }

  // L7: QEMU joins a cgroup of its own with the session's limits as it is
  // spawned (limits.hpp: cgroup v2, else v1, else rlimits), so a guest that
  // fills its memory or spins its vCPU is bounded like a native session.
  result<void> apply_limits(spawn_options& so) {
    static int serial = 0;
    sweep_stale_vm_cgroups();
    auto lim = session_limits::create(microvm::vm_cgroup_name(::getpid(), ++serial), o_.limits);
    if (!lim) return std::move(lim).err();
    limits_ = std::move(*lim);
    sink_->detail("limits", picojson::value(limits_.mechanism()));
    sink_->detail("cpu", picojson::value(limits_.cpu().mechanism));
    sink_->detail("memoryBytes", picojson::value(static_cast<std::int64_t>(o_.limits.memory_bytes)));
    sink_->detail("pidsMax", picojson::value(static_cast<std::int64_t>(o_.limits.pids)));
    so.cgroup_procs = limits_.procs_fds();
    so.cgroup_tasks = limits_.tasks_fds();
    if (limits_.uses_rlimits())
      so.rlimits = {{RLIMIT_DATA, static_cast<rlim_t>(o_.limits.memory_bytes)},
                    {RLIMIT_NPROC, static_cast<rlim_t>(o_.limits.pids)}};
    return ok();
  }

  template <class M> bool send(const M& m) {
    if (!ctl_) return false;
    return write_all(ctl_.get(), protocol::guest::encode(protocol::guest::host_message(m)));
  }

  void kill_qemu() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

  void on_console() {
    char buf[4096];
    ssize_t n = ::read(con_.get(), buf, sizeof buf);
    if (n <= 0) {
      r_->unwatch(con_watch_);
      con_watch_ = 0;
      return;
    }
    console_.append(buf, static_cast<std::size_t>(n));
    if (console_.size() > 8192) console_.erase(0, console_.size() - 4096);
  }

  std::string tail() const {
    std::string t = console_.size() > 1500 ? console_.substr(console_.size() - 1500) : console_;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    return t.empty() ? std::string("(the serial console is empty)") : "serial console: " + t;
  }

  void fail(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    const std::string msg = "microvm: " + why + "; " + tail();
    if (pid_ > 0) {
      if (exit_watch_) r_->unwatch(exit_watch_);
      exit_watch_ = 0;
      kill_qemu();
      pid_ = -1;
    }
    later([this, msg] { sink_->failed(make_error(errc::backend_unavailable, "backend", msg)); });
  }

  void on_qemu_exit(int st) {
    exit_watch_ = 0;
    pid_ = -1;
    while (con_watch_) on_console(); // what the console still holds
    fail("QEMU exited (" + std::string(WIFSIGNALED(st) ? "signal " + std::to_string(WTERMSIG(st))
                                                      : "status " + std::to_string(WEXITSTATUS(st))) +
         ")");
  }

  void on_control() {
    char buf[65536];
    ssize_t n = ::read(ctl_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      r_->unwatch(ctl_watch_);
      ctl_watch_ = 0;
      return; // QEMU's exit reports it
    }
    reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    for (;;) {
      auto f = reader_.next();
      if (!f) return fail("bad frame from the guest agent: " + f.err().message);
      if (!*f) return;
      auto m = protocol::guest::decode_agent(**f);
      if (!m) return fail("bad message from the guest agent: " + m.err().message);
      handle(*m);
      if (failed_ || destroyed_) return;
    }
  }

  void handle(const protocol::guest::agent_message& m) {
    namespace g = protocol::guest;
    if (auto* h = std::get_if<g::hello>(&m)) {
      if (h->version != g::kGuestProtocol)
        return fail("the guest agent speaks protocol " + std::to_string(h->version) + ", this launcher " +
                    std::to_string(g::kGuestProtocol) + " (rebuild the guest image)");
      for (const auto& s : o_.plan.shares) send(g::share{s.tag, s.guest_path, s.writable});
      for (const auto& l : o_.plan.links) send(l);
      for (const auto& p : o_.protect) send(g::protect{p});
      // The commands' guest uid is QEMU's host uid: the files QEMU presents
      // as the guest user's are the ones it can write on the host.
      const uid_t u = host_uid_ ? *host_uid_ : ::geteuid();
      const gid_t gid = host_uid_ ? (o_.run_as ? o_.run_as->gid : *host_uid_) : ::getegid();
      send(g::user{u == 0 ? 65534u : u, gid == 0 ? 65534u : gid});
      send(g::supervise{o_.supervisor});
      send(g::start{});
      return;
    }
    if (std::holds_alternative<g::ready>(m)) {
      if (ready_) return fail("the guest agent said ready twice");
      ready_ = true;
      if (ready_timer_) r_->cancel(ready_timer_);
      ready_timer_ = 0;
      later([this] { sink_->ready(); });
      return;
    }
    if (auto* s = std::get_if<g::setup_failed>(&m)) return fail("the guest could not be set up: " + s->reason);
    if (auto* s = std::get_if<g::started>(&m)) {
      auto it = execs_.find(s->id);
      if (it == execs_.end()) return fail("the guest agent started an exec nobody asked for");
      sink_->started(s->id, s->pid, std::move(it->second.master));
      return;
    }
    if (auto* e = std::get_if<g::exec_failed>(&m)) {
      if (auto it = execs_.find(e->id); it != execs_.end() && it->second.in_watch) r_->unwatch(it->second.in_watch);
      execs_.erase(e->id);
      sink_->exec_failed(e->id, e->code, e->reason);
      return;
    }
    if (auto* o = std::get_if<g::output>(&m)) {
      auto it = execs_.find(o->id);
      if (it == execs_.end()) return;
      write_out(o->id, it->second.out[o->stream - 1], o->bytes);
      return;
    }
    if (auto* x = std::get_if<g::exited>(&m)) {
      auto it = execs_.find(x->id);
      if (it == execs_.end()) return;
      it->second.status = x->signalled ? x->value : (x->value << 8);
      finish_if_done(x->id);
      return;
    }
    if (auto* v = std::get_if<g::guest_violation>(&m)) {
      // X1/P7 in the guest: the same event a native session's broker gives.
      std::optional<exec_id> id;
      if (execs_.count(v->id)) id = v->id;
      sink_->violation(id, sandbox_violation{v->action, v->target, std::nullopt, v->reason});
      return;
    }
    if (auto* l = std::get_if<g::guest_landlock>(&m)) {
      sink_->detail("landlock", picojson::value(l->summary));
      sink_->log("Landlock (guest): " + l->summary);
      return;
    }
    if (auto* a = std::get_if<g::stdin_ack>(&m)) {
      auto it = execs_.find(a->id);
      if (it == execs_.end() || it->second.unacked == 0) return;
      --it->second.unacked;
      watch_input(a->id);
    }
  }

  // Output goes to the session's pipe without ever blocking the reactor
  // (the session reads that pipe on the same reactor).
  void write_out(exec_id id, stream& s, std::string_view bytes) {
    if (!s.fd) return;
    s.pending.append(bytes);
    flush(id, s);
  }

  void flush(exec_id id, stream& s) {
    while (!s.pending.empty()) {
      ssize_t w = ::write(s.fd.get(), s.pending.data(), s.pending.size());
      if (w > 0) {
        s.pending.erase(0, static_cast<std::size_t>(w));
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) {
        if (!s.watch)
          s.watch = r_->watch(s.fd.get(), [this, id, &s](short) { flush(id, s); }, POLLOUT);
        return;
      }
      s.pending.clear(); // the reader is gone
    }
    if (s.watch) {
      r_->unwatch(s.watch);
      s.watch = 0;
    }
    finish_if_done(id);
  }

  void finish_if_done(exec_id id) {
    auto it = execs_.find(id);
    if (it == execs_.end() || !it->second.status) return;
    for (auto& o : it->second.out)
      if (!o.pending.empty()) return;
    const int st = *it->second.status;
    if (it->second.in_watch) r_->unwatch(it->second.in_watch);
    execs_.erase(it); // closes the output pipes (and a terminal's relay end): the session reads EOF
    sink_->exited(id, st);
  }

  // Reports the sink gets on the reactor's next turn, cancelled by destroy().
  void later(std::function<void()> report) {
    auto self = std::make_shared<reactor::token>(0);
    *self = r_->after(std::chrono::milliseconds(0), [this, self, report = std::move(report)] {
      soon_.erase(*self);
      report();
    });
    soon_.insert(*self);
  }

  microvm_driver_options o_;
  reactor* r_{nullptr};
  driver_sink* sink_{nullptr};
  unique_fd ctl_, con_;
  unique_fd lease_;
  session_limits limits_;
  std::vector<unique_fd> trees_;
  std::unique_ptr<microvm_egress> egress_;
  std::optional<uid_t> host_uid_;
  pid_t pid_{-1};
  reactor::token exit_watch_{0}, ctl_watch_{0}, con_watch_{0}, ready_timer_{0};
  std::set<reactor::token> soon_;
  protocol::guest::frame_reader reader_;
  std::string console_;
  std::map<exec_id, running> execs_;
  bool ready_{false}, failed_{false}, destroyed_{false};
};

} // namespace ccsb::launch
