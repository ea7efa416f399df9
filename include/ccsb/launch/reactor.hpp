// ccsb/launch/reactor.hpp — a small poll(2) reactor: descriptors and
// deadlines, each with a callback (launcher only; does I/O).
//
// One reactor drives any number of sessions in one thread (S7): each
// session registers its sources (the exec channel, output pipes, terminal
// masters, egressd's events, pidfds of the processes it spawned) and its
// deadlines (exec timeouts, output drains). Child exits arrive as pidfds
// becoming readable, so no SIGCHLD handler and no waitpid(-1) is needed and
// sessions never reap each other's children.
//
// Callbacks may watch, unwatch and schedule freely, including their own
// token: dispatch looks every token up again before calling it.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/result.hpp"

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace ccsb::launch {

class reactor {
public:
  using clock = std::chrono::steady_clock;
  using token = std::uint64_t;

  token watch(int fd, std::function<void(short revents)> cb, short events = POLLIN) {
    token t = ++next_;
    fds_.emplace(t, fd_entry{fd, events, std::move(cb)});
    return t;
  }
  void set_events(token t, short events) {
    if (auto it = fds_.find(t); it != fds_.end()) it->second.events = events;
  }
  void unwatch(token t) { fds_.erase(t); }

  token at(clock::time_point when, std::function<void()> cb) {
    token t = ++next_;
    timers_.emplace(t, timer_entry{when, std::move(cb)});
    return t;
  }
  token after(std::chrono::milliseconds d, std::function<void()> cb) { return at(clock::now() + d, std::move(cb)); }
  void cancel(token t) { timers_.erase(t); }

  bool idle() const { return fds_.empty() && timers_.empty(); }

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
    int n = ::poll(p.data(), p.size(), wait_ms);
    if (n < 0 && errno != EINTR) return sys_error("poll (reactor)");
    for (std::size_t k = 0; n > 0 && k < p.size(); ++k) {
      if (!p[k].revents) continue;
      auto it = fds_.find(who[k]);
      if (it == fds_.end() || it->second.fd != p[k].fd) continue; // unwatched by an earlier callback
      auto cb = it->second.cb;                                     // the callback may unwatch itself
      cb(p[k].revents);
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
  token next_{0};
  std::map<token, fd_entry> fds_;
  std::map<token, timer_entry> timers_;
};

} // namespace ccsb::launch
