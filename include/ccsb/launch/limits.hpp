// ccsb/launch/limits.hpp — per-session resource limits on Linux: cgroups
// and rlimits (launcher only; does I/O; Linux-only: a macOS build never
// includes it, ccsb/sys/platform.hpp). L7. What is asked for
// (resource_limits, parse_size, parse_cpus) is platform-neutral:
// ccsb/resource_limits.hpp (memory, pids, tmp, cpu).
//
// Mechanism, first that works (nsjail habit: explicit fallback chain, the
// one that applied is reported in the handle's details.limits):
//   1. cgroup v2: a child of the launcher's own cgroup on the cgroup2 mount
//      whose cgroup.controllers offers memory and pids: memory.max, pids.max;
//      teardown writes cgroup.kill, then rmdir.
//   2. cgroup v1: a child of the launcher's own cgroup in the memory and the
//      pids hierarchies: memory.limit_in_bytes, pids.max; teardown SIGKILLs
//      every pid in cgroup.procs until it is empty, then rmdir.
//   3. rlimits on bwrap (inherited by everything inside): RLIMIT_DATA =
//      memory (per process), RLIMIT_NPROC = pids (per host uid: counts the
//      uid's other processes too, so it is a looser bound).
// CPU (details.cpu says which applied), after the chain above:
//   a. the session's v2 cgroup, when its cgroup.controllers offers cpu:
//      cpu.weight = kCpuWeight, cpu.max = the cap or "max 100000";
//   b. else a child of the launcher's own cgroup in the v1 hierarchy that
//      carries cpu (often cpu,cpuacct; on a hybrid host also next to a v2
//      session cgroup): cpu.shares = kCpuShares, cpu.cfs_period_us and
//      cpu.cfs_quota_us = the cap or -1; joined through its `tasks` like
//      memory and pids;
//   c. else none: the session's processes compete for CPU with every other
//      process of the host (the start-up log and details say so), and a cap
//      asked for (resource_limits::cpu_millis) makes create() fail: a cap is
//      never silently dropped. A cgroup that refuses a written cap is the
//      same error.
// The sandbox's processes join the cgroup in the child of fork, before bwrap
// execs (spawn_options::cgroup_procs for v2, cgroup_tasks for v1), so
// nothing inside ever runs outside it. Creating cgroups needs write access
// to the hierarchy: normally root.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/resource_limits.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ccsb::launch {

namespace detail {

inline std::string read_text(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline bool write_text(const std::string& p, const std::string& v) {
  unique_fd f(::open(p.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  return f && write_all(f.get(), v);
}

// This process's cgroup path in the hierarchy whose line of
// /proc/self/cgroup (`self_cgroup`) matches `controller` ("" for the v2 line
// "0::/path").
inline std::optional<std::string> own_cgroup(const std::string& self_cgroup, const std::string& controller) {
  std::istringstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctl = line.substr(a + 1, b - a - 1);
    if (controller.empty() ? (line.substr(0, a) == "0" && ctl.empty()) : (("," + ctl + ",").find("," + controller + ",") != std::string::npos))
      return line.substr(b + 1);
  }
  return std::nullopt;
}

// Mount point of the cgroup hierarchy in /proc/self/mountinfo
// (`mountinfo`): v2 ("cgroup2") or the v1 one that carries `controller`.
inline std::optional<std::string> cgroup_mount(const std::string& mountinfo, const std::string& controller) {
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string id, parent, devno, root, mnt, fstype, source, opts;
    pre >> id >> parent >> devno >> root >> mnt;
    post >> fstype >> source >> opts;
    if (root != "/") continue;
    if (controller.empty() && fstype == "cgroup2") return mnt;
    if (!controller.empty() && fstype == "cgroup" && ("," + opts + ",").find("," + controller + ",") != std::string::npos)
      return mnt;
  }
  return std::nullopt;
}

// Whether the space-separated `list` names `word`.
inline bool has_word(std::string list, const std::string& word) {
  for (auto& c : list)
    if (c == '\n' || c == '\t') c = ' ';
  return (" " + list + " ").find(" " + word + " ") != std::string::npos;
}

// This process's own cgroup directories: where the session's cgroups are
// made, and swept. Its /proc/self/cgroup and mountinfo are read once; a
// session looks up to four hierarchies in them.
struct own_cgroups {
  std::string self_cgroup = read_text("/proc/self/cgroup");
  std::string mountinfo = read_text("/proc/self/mountinfo");

  // The directory in the hierarchy of `controller` ("" for cgroup v2).
  std::optional<std::string> dir(const std::string& controller) const {
    auto mnt = cgroup_mount(mountinfo, controller);
    auto own = own_cgroup(self_cgroup, controller);
    if (!mnt || !own) return std::nullopt;
    return *mnt + (*own == "/" ? "" : *own);
  }
};

} // namespace detail

// Moving a process into another cgroup through cgroup.procs takes
// cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period
// (7-11 ms on this VM) unless another move finished within the last one; a
// second move right after costs ~30 us. One exception: a thread that moves
// only itself (it writes "0" into a cgroup v1 `tasks` file, or v2
// cgroup.threads) needs no threadgroup stability, and the kernel (since
// Linux 6.0) skips that lock: 0.03 ms (bench/launch/cgroup_move.c measures
// both). A child of fork has one thread, so on cgroup v1 bwrap's child moves
// itself that way (spawn_options::cgroup_tasks) and pays no grace period.
// cgroup v2 offers that only inside threaded subtrees, so there bwrap's move
// is a cgroup.procs write on the critical path of every launch, and
// prewarm_cgroup_move() starts a no-op move of this launcher into its own
// v2 cgroup on a detached thread, which pays the wait in the background
// while the launcher starts egressd and renders. The kernel holds
// cgroup_mutex through that wait, so every cgroup directory of the session
// must exist before it starts (session_limits::create() calls it last;
// started before the mkdirs, it only moved the wait onto them). At most one
// runs at a time; it starts only where this process may write its own
// cgroup.procs (a root launcher; otherwise the open fails and nothing runs)
// and changes nothing: the launcher stays in the cgroup it is in.
inline void prewarm_cgroup_move(const detail::own_cgroups& own_dirs) {
  static std::atomic<bool> running{false};
  if (running.exchange(true)) return;
  unique_fd procs;
  if (auto own = own_dirs.dir("")) procs.reset(::open((*own + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!procs) {
    running = false;
    return;
  }
  try {
    std::thread([fd = std::move(procs)] {
      const std::string pid = std::to_string(::getpid());
      (void)!::write(fd.get(), pid.data(), pid.size());
      running = false;
    }).detach();
  } catch (...) { // no thread (a pids limit): bwrap's move pays the wait itself
    running = false;
  }
}

// The limits applied to one session; owns its cgroup directories.
class session_limits {
public:
  session_limits() = default;
  session_limits(session_limits&&) = default;
  session_limits& operator=(session_limits&&) = default;
  session_limits(const session_limits&) = delete;
  ~session_limits() { destroy(); }

  // What the session's CPU got (details: cpu, cpuWeight or cpuShares, cpuMax).
  struct cpu_setting {
    std::string mechanism{"none"}; // "cgroup-v2", "cgroup-v1" or "none" (no CPU separation)
    std::string share_key;         // "cpuWeight" (v2) or "cpuShares" (v1); "" with none
    std::uint64_t share{0};        // kCpuWeight or kCpuShares
    std::string max;               // cpu.max as written ("150000 100000", "max 100000"); "" with none
  };

  // Tries the chain for `name` (unique per session) and returns what
  // applied; an error only when a CPU cap was asked for and no cgroup took
  // it (field "cpus").
  static result<session_limits> create(const std::string& name, const resource_limits& want) {
    session_limits s;
    s.want_ = want;
    const detail::own_cgroups own;
    if (s.try_v2(own, name)) {
      if (s.cpu_.mechanism == "none") // a hybrid host: cpu may be a v1 controller
        if (auto c = s.try_cpu_v1(own, name); !c) return std::move(c).err();
      if (auto c = s.cpu_required(); !c) return std::move(c).err();
      prewarm_cgroup_move(own); // every directory exists: bwrap's move follows soon
      return s;
    }
    if (!s.try_v1(own, name)) s.mechanism_ = "rlimit";
    // On v1 bwrap's child moves itself through `tasks` (the cpu hierarchy's
    // too): no wait to prepay. With rlimits a v1 cpu hierarchy is still
    // tried (where only it was delegated); normally its mkdir fails.
    if (auto c = s.try_cpu_v1(own, name); !c) return std::move(c).err();
    if (auto c = s.cpu_required(); !c) return std::move(c).err();
    return s;
  }

  const std::string& mechanism() const { return mechanism_; }
  const cpu_setting& cpu() const { return cpu_; }
  // Descriptors of cgroup.procs (v2) for spawn_options::cgroup_procs, and
  // of the v1 `tasks` files for spawn_options::cgroup_tasks.
  std::vector<int> procs_fds() const { return raw(procs_); }
  std::vector<int> tasks_fds() const { return raw(tasks_); }
  // rlimits for the rlimit mechanism, applied to bwrap by the caller's child.
  bool uses_rlimits() const { return mechanism_ == "rlimit"; }
  const resource_limits& wanted() const { return want_; }

  // S7 suspend/resume: the cgroup freezer (v2 cgroup.freeze, else the v1
  // freezer controller) stops, or restarts, every process of the session at
  // once, and a frozen process cannot thaw itself (SIGCONT does not). Waits,
  // bounded (5 s), until the kernel reports the state reached; a freeze not
  // reached is undone. Without a freezer cgroup: a typed error.
  result<void> freeze(bool on) {
    if (freezer_.empty())
      return make_error(errc::unsupported, "suspend",
                        "this session has no cgroup freezer (limits: " + mechanism_ +
                            "); suspend/resume needs a writable cgroup v2 hierarchy or the v1 freezer controller "
                            "(a root launcher, or a delegated cgroup)");
    const freezer_files f = freezer_files_of();
    const std::string want = on ? f.frozen : f.thawed;
    if (on) froze_ = true;
    // A freeze that a task resists is let go and tried again: the X1
    // broker's filter waits killably once ccsb-init has received a
    // request (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), the freezer cannot
    // take a task in that wait, and a ccsb-init frozen before its answer
    // would leave it there. Thawed for a moment, ccsb-init answers.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    const auto attempt = on ? std::chrono::milliseconds(50) : std::chrono::milliseconds(5000);
    do {
      if (!detail::write_text(f.ctl, on ? f.freeze_text : f.thaw_text)) return sys_error("write " + f.ctl);
      const auto until = std::min(give_up, std::chrono::steady_clock::now() + attempt);
      do {
        if (detail::read_text(f.state).find(want) != std::string::npos) return ok();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      } while (std::chrono::steady_clock::now() < until);
      if (on) (void)detail::write_text(f.ctl, f.thaw_text);
    } while (std::chrono::steady_clock::now() < give_up);
    // Not frozen in time (a process in uninterruptible sleep, a busy disk):
    // thawed (above), so the session goes on as it was. A freezer left
    // half-way would hold its processes, and a frozen process cannot even
    // die: a later teardown's SIGKILL would wait for a thaw forever.
    return make_error(errc::io_error, "suspend", f.state + " never reported \"" + want + "\" within 5 s");
  }
  bool can_freeze() const { return !freezer_.empty(); }

  // Teardown's first step when the session was ever frozen: thaw, without
  // waiting, so that the SIGKILLs that follow can end its processes.
  void thaw_for_teardown() const {
    if (!froze_ || freezer_.empty()) return;
    const freezer_files f = freezer_files_of();
    (void)detail::write_text(f.ctl, f.thaw_text);
  }

  // Kills everything left in the cgroups and removes them.
  void destroy() {
    if (dirs_.empty()) return;
    const bool v2 = mechanism_ == "cgroup-v2";
    for (const auto& d : dirs_) empty_and_remove(d, v2);
    dirs_.clear();
    procs_.clear();
    tasks_.clear();
    freezer_.clear();
  }

  // L7: how many times the kernel's OOM killer has killed a process of the
  // session `name` for its memory limit (`mechanism`: details.limits):
  // oom_kill in the v2 cgroup's memory.events, or in the v1 memory cgroup's
  // memory.oom_control. 0 with rlimits (an allocation fails instead) or
  // when the file cannot be read.
  static std::uint64_t oom_kills(const std::string& name, const std::string& mechanism) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) return 0;
    const bool v2 = mechanism == "cgroup-v2";
    if (!v2 && mechanism != "cgroup-v1") return 0;
    const detail::own_cgroups own_dirs;
    auto own = own_dirs.dir(v2 ? "" : "memory");
    if (!own) return 0;
    const std::string text = detail::read_text(*own + "/" + name + (v2 ? "/memory.events" : "/memory.oom_control"));
    std::istringstream in(text);
    std::string key;
    std::uint64_t value = 0;
    while (in >> key >> value)
      if (key == "oom_kill") return value;
    return 0;
  }

  // L8: the cgroups a dead launcher left (it was SIGKILLed: no teardown
  // ran) under the same parents this launcher uses, named after its stale run
  // dir (sweep_stale_run_dirs found it unlocked, so no live launcher owns the
  // name: run dir and cgroups share it, the run dir exists first and goes
  // last). Whatever still runs in them is killed (bwrap's --die-with-parent
  // normally left nothing); returns the removed directories.
  static std::vector<std::string> remove_stale(const std::string& name) {
    std::vector<std::string> removed;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) return removed;
    const detail::own_cgroups own_dirs;
    auto one = [&](const std::string& controller, bool v2) {
      auto own = own_dirs.dir(controller);
      if (!own) return;
      const std::string d = *own + "/" + name;
      struct stat st{};
      if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
      if (empty_and_remove(d, v2)) removed.push_back(d);
    };
    one("", true);
    for (const char* c : {"freezer", "memory", "pids", "cpu"}) one(c, false); // the freezer first: it thaws (empty_and_remove)
    return removed;
  }

private:
  // The freezer's control and state files and their words: v2 writes
  // cgroup.freeze and reports in cgroup.events, v1 has freezer.state for both.
  struct freezer_files {
    std::string ctl, state;
    const char* freeze_text;
    const char* thaw_text;
    const char* frozen; // in `state` once frozen
    const char* thawed; // in `state` once thawed
  };
  freezer_files freezer_files_of() const {
    if (mechanism_ == "cgroup-v2")
      return {freezer_ + "/cgroup.freeze", freezer_ + "/cgroup.events", "1", "0", "frozen 1", "frozen 0"};
    return {freezer_ + "/freezer.state", freezer_ + "/freezer.state", "FROZEN", "THAWED", "FROZEN", "THAWED"};
  }

  // Every process still listed in cgroup `d` is SIGKILLed through a pidfd
  // and waited for on it: a process has left its cgroups when its pidfd
  // turns readable (the kernel's cgroup_exit comes before the exit
  // notification), so the rmdir follows the last exit at once instead of a
  // poll's next round. Where no pidfd can be had, a backoff (50 us doubling
  // to 5 ms). Then the list is read again (a fork racing the kill); at most
  // 1 s in all. v2: cgroup.kill first. true when `d` is gone. An empty
  // cgroup (a teardown's usual case: bwrap and its PID namespace are gone
  // already) is removed at once; rmdir refuses a busy one (EBUSY).
  static bool empty_and_remove(const std::string& d, bool v2) {
    if (::rmdir(d.c_str()) == 0) return true;
    if (v2) detail::write_text(d + "/cgroup.kill", "1");
    // v1: a frozen process does not die of SIGKILL until it is thawed (a
    // stale cgroup of a launcher killed while its session was suspended).
    else (void)detail::write_text(d + "/freezer.state", "THAWED"); // fails on the other hierarchies
    auto pause = std::chrono::microseconds(50);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < give_up) {
      std::istringstream in(detail::read_text(d + "/cgroup.procs"));
      pid_t p;
      bool any = false;
      std::vector<unique_fd> exits;
      while (in >> p) {
        any = true;
        unique_fd pfd(pidfd_open(p));
#ifdef SYS_pidfd_send_signal
        if (pfd && ::syscall(SYS_pidfd_send_signal, pfd.get(), SIGKILL, nullptr, 0) == 0) {
          exits.push_back(std::move(pfd));
          continue;
        }
#endif
        ::kill(p, SIGKILL);
      }
      if (!any) break;
      if (exits.empty()) {
        if (::rmdir(d.c_str()) == 0) return true;
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
        continue;
      }
      std::vector<pollfd> pf;
      for (const auto& e : exits) pf.push_back({e.get(), POLLIN, 0});
      for (std::size_t left = pf.size(); left > 0;) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
        if (ms.count() <= 0) break;
        const int n = ::poll(pf.data(), pf.size(), static_cast<int>(ms.count()) + 1);
        if (n < 0 && errno != EINTR) break;
        for (auto& x : pf)
          if (x.fd >= 0 && x.revents) {
            x.fd = -1; // exited (or gone): not polled again
            --left;
          }
      }
    }
    return ::rmdir(d.c_str()) == 0;
  }

  bool make_dir(const std::string& parent, const std::string& name, std::string& out) {
    out = parent + "/" + name;
    if (::mkdir(out.c_str(), 0755) != 0) return false;
    dirs_.push_back(out);
    return true;
  }

  static std::vector<int> raw(const std::vector<unique_fd>& fds) {
    std::vector<int> v;
    for (const auto& f : fds) v.push_back(f.get());
    return v;
  }

  // `file` is cgroup.procs (v2) or tasks (v1), opened into `into`.
  static bool open_join(const std::string& dir, const char* file, std::vector<unique_fd>& into) {
    unique_fd f(::open((dir + "/" + file).c_str(), O_WRONLY | O_CLOEXEC));
    if (!f) return false;
    into.push_back(std::move(f));
    return true;
  }
  bool open_procs(const std::string& dir) { return open_join(dir, "cgroup.procs", procs_); }
  bool open_tasks(const std::string& dir) { return open_join(dir, "tasks", tasks_); }

  void reset() {
    procs_.clear();
    tasks_.clear();
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) ::rmdir(it->c_str());
    dirs_.clear();
  }

  bool try_v2(const detail::own_cgroups& own_dirs, const std::string& name) {
    auto own = own_dirs.dir("");
    if (!own) return false;
    // A child's cgroup.controllers is its parent's cgroup.subtree_control:
    // where that lacks memory or pids (a hybrid host's unified hierarchy),
    // no directory is made and removed again just to find out.
    if (const std::string sc = *own + "/cgroup.subtree_control"; ::access(sc.c_str(), R_OK) == 0) {
      const std::string sub = detail::read_text(sc);
      if (!detail::has_word(sub, "memory") || !detail::has_word(sub, "pids")) return false;
    }
    std::string dir;
    if (!make_dir(*own, name, dir)) return false;
    std::string ctl = " " + detail::read_text(dir + "/cgroup.controllers") + " ";
    for (auto& c : ctl)
      if (c == '\n') c = ' ';
    if (ctl.find(" memory ") == std::string::npos || ctl.find(" pids ") == std::string::npos ||
        !detail::write_text(dir + "/memory.max", std::to_string(want_.memory_bytes)) ||
        !detail::write_text(dir + "/pids.max", std::to_string(want_.pids)) || !open_procs(dir)) {
      reset();
      return false;
    }
    mechanism_ = "cgroup-v2";
    // CPU in the same cgroup where the parent delegates cpu; else
    // create() tries a v1 cpu hierarchy. A write refused here leaves
    // cpu_ at none: cpu_required() then refuses a cap.
    if (ctl.find(" cpu ") != std::string::npos &&
        detail::write_text(dir + "/cpu.weight", std::to_string(kCpuWeight)) &&
        detail::write_text(dir + "/cpu.max", cpu_max_text(want_.cpu_millis)))
      cpu_ = {"cgroup-v2", "cpuWeight", kCpuWeight, cpu_max_text(want_.cpu_millis)};
    freezer_ = dir;
    return true;
  }

  bool try_v1(const detail::own_cgroups& own_dirs, const std::string& name) {
    auto mo = own_dirs.dir("memory");
    auto po = own_dirs.dir("pids");
    if (!mo || !po) return false;
    std::string md, pd;
    if (!make_dir(*mo, name, md) || !make_dir(*po, name, pd) ||
        !detail::write_text(md + "/memory.limit_in_bytes", std::to_string(want_.memory_bytes)) ||
        !detail::write_text(pd + "/pids.max", std::to_string(want_.pids)) || !open_tasks(md) || !open_tasks(pd)) {
      reset();
      return false;
    }
    mechanism_ = "cgroup-v1";
    // The v1 freezer (S7 suspend), where its hierarchy is mounted; the
    // session runs without one otherwise (suspend is then a typed error).
    if (auto fo = own_dirs.dir("freezer")) {
      std::string fd;
      if (make_dir(*fo, name, fd)) {
        if (open_tasks(fd)) freezer_ = fd;
      }
    }
    return true;
  }

  // CPU in the v1 hierarchy that carries the cpu controller: a cgroup of
  // its own, joined through `tasks`. A hierarchy that is not there, or one
  // this launcher may not write (an unprivileged launcher), leaves cpu_ at
  // none; a cgroup made but refusing a setting is removed again, and with a
  // cap asked for that is an error (the cap is never dropped silently).
  result<void> try_cpu_v1(const detail::own_cgroups& own_dirs, const std::string& name) {
    auto co = own_dirs.dir("cpu");
    std::string cd;
    if (!co || !make_dir(*co, name, cd)) return ok();
    const std::string quota = want_.cpu_millis ? std::to_string(cpu_quota_us(want_.cpu_millis)) : "-1";
    const char* failed = nullptr;
    if (!detail::write_text(cd + "/cpu.shares", std::to_string(kCpuShares))) failed = "cpu.shares";
    else if (!detail::write_text(cd + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs))) failed = "cpu.cfs_period_us";
    else if (!detail::write_text(cd + "/cpu.cfs_quota_us", quota)) failed = "cpu.cfs_quota_us";
    else if (!open_tasks(cd)) failed = "tasks";
    if (!failed) {
      cpu_ = {"cgroup-v1", "cpuShares", kCpuShares, cpu_max_text(want_.cpu_millis)};
      return ok();
    }
    const int e = errno;
    ::rmdir(cd.c_str());
    dirs_.pop_back();
    if (!want_.cpu_millis) return ok();
    return make_error(errc::io_error, "cpus",
                      "the session's cpu cgroup " + cd + " refused " + failed + " (" + std::strerror(e) +
                          "): the CPU cap of " + cpus_text(want_.cpu_millis) + " cannot be applied");
  }

  // A cap asked for needs a cgroup that took it.
  result<void> cpu_required() const {
    if (!want_.cpu_millis || cpu_.mechanism != "none") return ok();
    return make_error(errc::unsupported, "cpus",
                      "a CPU cap of " + cpus_text(want_.cpu_millis) +
                          " was asked for, but no cgroup of this launcher takes the cpu controller (limits: " +
                          mechanism_ +
                          "); a cap needs a writable cgroup v2 hierarchy that delegates cpu or the v1 cpu "
                          "controller (a root launcher, or a delegated cgroup)");
  }

  resource_limits want_{};
  std::string mechanism_{"none"};
  cpu_setting cpu_{};
  std::vector<std::string> dirs_;
  std::vector<unique_fd> procs_; // v2 cgroup.procs
  std::vector<unique_fd> tasks_; // v1 tasks
  std::string freezer_; // the cgroup whose freezer suspends the session
  bool froze_{false};   // freeze(true) was asked once: teardown thaws first
};

} // namespace ccsb::launch
