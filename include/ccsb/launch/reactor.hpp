// ccsb/launch/reactor.hpp — a small poll(2) reactor: descriptors, deadlines,
// child exits and signals, each with a callback (launcher only; does I/O).
//
// One reactor drives any number of sessions in one thread (S7): each
// session registers its sources (the exec channel, output pipes, terminal
// masters, egressd's events), the processes it spawned (watch_exit) and its
// deadlines (exec timeouts, output drains).
//
// Child exits, two mechanisms (platform.hpp chooses the default; a test may
// ask for either):
//   * exit_watch::pidfd (Linux): a pidfd per watched child, readable when it
//     exits, then waitpid(pid, WNOHANG) on that pid. A kernel without
//     pidfd_open (ENOSYS) falls back to the next mechanism for that child.
//   * exit_watch::sigchld (macOS, portable POSIX): a SIGCHLD handler writes
//     to this reactor's self-pipe; on each wake-up (and once right after a
//     child is watched, for one that ended before) waitpid(pid, WNOHANG) for
//     each watched pid, never waitpid(-1): several sessions, and code outside
//     the reactor, share the process and never reap each other's children.
// Either way the callback gets the wait status and the child is reaped.
//
// Signals (watch_signals): the same self-pipe on every platform (a handler
// per signal, installed while some reactor watches it, the previous
// disposition restored after), so ccsb-run and ccsbd read SIGTERM, SIGINT,
// SIGHUP and SIGWINCH through one code path on Linux and macOS. Handlers,
// unlike a blocked mask, do not leak into children: execve resets them.
//
// Callbacks may watch, unwatch and schedule freely, including their own
// token: dispatch looks every token up again before calling it.
#pragma once

#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/result.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace ccsb::launch {

using sys::this_platform::exit_watch;

namespace detail {

// Process-wide: the self-pipes of the reactors that watch signals, and the
// handler that wakes them. The handler touches only lock-free atomics and
// write(2) (async-signal-safe).
struct signal_hub {
  static constexpr int kSlots = 32;
  static constexpr int kMaxSignal = 63; // bit s of a 64-bit mask
  struct slot {
    std::atomic<int> fd{-1};               // write end of a reactor's self-pipe
    std::atomic<std::uint64_t> pending{0}; // bit s: signal s arrived
  };
  slot slots[kSlots];
  // Main-thread bookkeeping: how many reactors watch each signal, and what
  // was there before the first one did.
  int users[kMaxSignal + 1]{};
  struct sigaction saved[kMaxSignal + 1]{};

  static signal_hub& get() {
    static signal_hub h;
    return h;
  }
  static void handler(int sig) {
    const int saved_errno = errno;
    signal_hub& h = get();
    for (auto& s : h.slots) {
      int fd = s.fd.load(std::memory_order_acquire);
      if (fd < 0) continue;
      s.pending.fetch_or(std::uint64_t{1} << sig, std::memory_order_acq_rel);
      char b = 1;
      ssize_t ignored = ::write(fd, &b, 1); // full pipe: a wake-up is pending anyway
      (void)ignored;
    }
    errno = saved_errno;
  }
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

  int claim(int write_fd) {
    for (int k = 0; k < kSlots; ++k) {
      int expect = -1;
      if (slots[k].fd.compare_exchange_strong(expect, write_fd)) return k;
    }
    return -1;
  }
  void release(int k) {
    slots[k].fd.store(-1);
    slots[k].pending.store(0);
  }
  result<void> use(int sig) {
    if (sig <= 0 || sig > kMaxSignal) return make_error(errc::invalid_argument, "signal", "no such signal");
    if (users[sig]++ > 0) return ok();
    struct sigaction sa{};
    sa.sa_handler = &signal_hub::handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    if (::sigaction(sig, &sa, &saved[sig]) != 0) {
      --users[sig];
      return sys_error("sigaction (reactor)");
    }
    // A signal the caller had blocked would never reach the handler.
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    return ok();
  }
  void unuse(int sig) {
    if (sig <= 0 || sig > kMaxSignal || users[sig] == 0) return;
    if (--users[sig] == 0) ::sigaction(sig, &saved[sig], nullptr);
  }
};

} // namespace detail

class reactor {
public:
  using clock = std::chrono::steady_clock;
  using token = std::uint64_t;

  explicit reactor(exit_watch exits = sys::this_platform::exits) : exits_(exits) {}
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;
  ~reactor() {
    for (int sig : signals_used_) detail::signal_hub::get().unuse(sig);
    if (slot_ >= 0) detail::signal_hub::get().release(slot_);
  }

  // The mechanism this reactor uses for child exits.
  exit_watch exits() const { return exits_; }

  token watch(int fd, std::function<void(short revents)> cb, short events = POLLIN) {
    token t = ++next_;
    fds_.emplace(t, fd_entry{fd, events, std::move(cb)});
    return t;
  }
  void set_events(token t, short events) {
    if (auto it = fds_.find(t); it != fds_.end()) it->second.events = events;
  }
  void unwatch(token t) {
    fds_.erase(t);
    if (auto it = children_.find(t); it != children_.end()) {
      if (it->second.pidfd_token) fds_.erase(it->second.pidfd_token);
      children_.erase(it);
    }
  }

  token at(clock::time_point when, std::function<void()> cb) {
    token t = ++next_;
    timers_.emplace(t, timer_entry{when, std::move(cb)});
    return t;
  }
  token after(std::chrono::milliseconds d, std::function<void()> cb) { return at(clock::now() + d, std::move(cb)); }
  void cancel(token t) { timers_.erase(t); }

  // Calls `cb(wait status)` once child `pid` (of this process, not yet
  // reaped) has exited, and reaps it. unwatch(token) stops watching (the
  // child is then the caller's to reap).
  result<token> watch_exit(pid_t pid, std::function<void(int status)> cb) {
    if (pid <= 0) return make_error(errc::invalid_argument, "pid", "watch_exit needs a child pid");
    token t = ++next_;
    child_entry c{pid, std::move(cb), {}, 0};
    if (exits_ == exit_watch::pidfd) {
      c.pidfd = unique_fd(pidfd_open(pid));
      if (!c.pidfd && errno != ENOSYS) return sys_error("pidfd_open (reactor)");
    }
    if (c.pidfd) {
      const int fd = c.pidfd.get();
      c.pidfd_token = watch(fd, [this, t](short) { reap(t); });
    } else {
      if (auto s = ensure_signal(SIGCHLD); !s) return std::move(s).err();
      check_exits_ = true; // it may have ended before the handler was there
    }
    children_.emplace(t, std::move(c));
    return t;
  }

  // Calls `cb(signal)` for each of `signals` that arrives (self-pipe). The
  // handlers stay installed while the reactor lives.
  result<token> watch_signals(const std::vector<int>& signals, std::function<void(int sig)> cb) {
    for (int sig : signals)
      if (auto s = ensure_signal(sig); !s) return std::move(s).err();
    token t = ++next_;
    sig_watchers_.emplace(t, sig_entry{signals, std::move(cb)});
    return t;
  }
  void unwatch_signals(token t) { sig_watchers_.erase(t); }

  // Nothing to wait for: no descriptor (the self-pipe aside), deadline,
  // child or signal watch.
  bool idle() const {
    return fds_.size() == (pipe_token_ ? 1u : 0u) && timers_.empty() && children_.empty() && sig_watchers_.empty() &&
           !check_exits_;
  }

  // One round: waits for the first ready descriptor or due deadline (at most
  // max_wait), then runs every callback that is due.
  result<void> run_once(std::optional<std::chrono::milliseconds> max_wait = std::nullopt) {
    std::vector<pollfd> p;
    std::vector<token> who;
    p.reserve(fds_.size());
    for (const auto& [t, e] : fds_) {
      p.push_back({e.fd, e.events, 0});
      who.push_back(t);
    }
    int wait_ms = -1;
    const auto now = clock::now();
    auto bound = [&](std::chrono::milliseconds d) {
      long long ms = d.count() < 0 ? 0 : d.count();
      int m = static_cast<int>(std::min<long long>(ms, 60000));
      wait_ms = wait_ms < 0 ? m : std::min(wait_ms, m);
    };
    for (const auto& [t, e] : timers_)
      bound(std::chrono::ceil<std::chrono::milliseconds>(e.when - now));
    if (max_wait) bound(*max_wait);
    if (check_exits_) bound(std::chrono::milliseconds(0));
    int n = ::poll(p.data(), p.size(), wait_ms);
    if (n < 0 && errno != EINTR) return sys_error("poll (reactor)");
    for (std::size_t k = 0; n > 0 && k < p.size(); ++k) {
      if (!p[k].revents) continue;
      auto it = fds_.find(who[k]);
      if (it == fds_.end() || it->second.fd != p[k].fd) continue; // unwatched by an earlier callback
      auto cb = it->second.cb;                                     // the callback may unwatch itself
      cb(p[k].revents);
    }
    if (check_exits_) {
      check_exits_ = false;
      reap_all_signalled();
    }
    const auto after = clock::now();
    std::vector<token> due;
    for (const auto& [t, e] : timers_)
      if (e.when <= after) due.push_back(t);
    for (token t : due) {
      auto it = timers_.find(t);
      if (it == timers_.end()) continue;
      auto cb = std::move(it->second.cb);
      timers_.erase(it);
      cb();
    }
    return ok();
  }

  // Runs rounds until done() holds (checked before each round).
  template <class Pred> result<void> run_until(Pred done) {
    while (!done()) {
      if (idle()) return make_error(errc::io_error, "reactor", "nothing left to wait for");
      if (auto r = run_once(); !r) return r;
    }
    return ok();
  }

private:
  struct fd_entry {
    int fd;
    short events;
    std::function<void(short)> cb;
  };
  struct timer_entry {
    clock::time_point when;
    std::function<void()> cb;
  };
  struct child_entry {
    pid_t pid;
    std::function<void(int)> cb;
    unique_fd pidfd;      // exit_watch::pidfd
    token pidfd_token{0}; // its watch
  };
  struct sig_entry {
    std::vector<int> signals;
    std::function<void(int)> cb;
  };

  // The self-pipe and the handler for `sig`, once per reactor.
  result<void> ensure_signal(int sig) {
    auto& hub = detail::signal_hub::get();
    if (slot_ < 0) {
      int p[2];
      if (sys::this_platform::pipe_cloexec(p) != 0) return sys_error("pipe (reactor self-pipe)");
      pipe_r_.reset(p[0]);
      pipe_w_.reset(p[1]);
      sys::this_platform::set_nonblock(p[0]);
      sys::this_platform::set_nonblock(p[1]);
      slot_ = hub.claim(p[1]);
      if (slot_ < 0) return make_error(errc::io_error, "reactor", "too many reactors watch signals in this process");
      pipe_token_ = watch(p[0], [this](short) { on_self_pipe(); });
    }
    if (signals_used_.count(sig)) return ok();
    if (auto u = hub.use(sig); !u) return u;
    signals_used_.insert(sig);
    return ok();
  }

  void on_self_pipe() {
    char buf[256];
    while (::read(pipe_r_.get(), buf, sizeof buf) > 0) {
    }
    const std::uint64_t got = detail::signal_hub::get().slots[slot_].pending.exchange(0);
    if (got & (std::uint64_t{1} << SIGCHLD)) reap_all_signalled();
    for (int sig = 1; sig <= detail::signal_hub::kMaxSignal; ++sig) {
      if (!(got & (std::uint64_t{1} << sig))) continue;
      std::vector<token> ts;
      for (const auto& [t, w] : sig_watchers_)
        for (int s : w.signals)
          if (s == sig) ts.push_back(t);
      for (token t : ts)
        if (auto it = sig_watchers_.find(t); it != sig_watchers_.end()) {
          auto cb = it->second.cb;
          cb(sig);
        }
    }
  }

  // One child, by its own pid.
  void reap(token t) {
    auto it = children_.find(t);
    if (it == children_.end()) return;
    int st = 0;
    pid_t r;
    do r = ::waitpid(it->second.pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0) return; // not yet (a spurious wake-up)
    if (r < 0) st = 0x7f00; // someone else reaped it: report "exited 127"
    auto cb = std::move(it->second.cb);
    if (it->second.pidfd_token) fds_.erase(it->second.pidfd_token);
    children_.erase(it);
    cb(st);
  }

  void reap_all_signalled() {
    std::vector<token> ts;
    for (const auto& [t, c] : children_)
      if (!c.pidfd) ts.push_back(t);
    for (token t : ts) reap(t);
  }

  exit_watch exits_;
  token next_{0};
  std::map<token, fd_entry> fds_;
  std::map<token, timer_entry> timers_;
  std::map<token, child_entry> children_;
  std::map<token, sig_entry> sig_watchers_;
  int slot_{-1};
  unique_fd pipe_r_, pipe_w_;
  token pipe_token_{0};
  std::set<int> signals_used_;
  bool check_exits_{false};
};

} // namespace ccsb::launch
