// The reactor's child-exit watch (S7) in both mechanisms, on Linux: pidfd
// (the Linux default) and the SIGCHLD self-pipe with waitpid on each watched
// pid (the macOS default, ccsb/sys/platform.hpp). Several sessions share
// one launcher process, so a reactor must reap exactly the children it was
// given: never one of another reactor, never one of code outside it.
// Also the self-pipe signal watch ccsb-run and ccsbd use on both platforms.
#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/reactor.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>

using namespace ccsb;
using launch::exit_watch;

namespace {

// fork + _exit(code) after `delay_ms`.
pid_t child_exiting(int code, int delay_ms = 0) {
  pid_t p = ::fork();
  if (p == 0) {
    if (delay_ms) ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
    ::_exit(code);
  }
  return p;
}

// Blocks until `pid` has exited, without reaping it (it stays a zombie).
void wait_zombie(pid_t pid) {
  siginfo_t si{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT) == 0);
}

const char* name_of(exit_watch w) { return w == exit_watch::pidfd ? "pidfd" : "sigchld"; }

} // namespace

TEST_CASE("S7: the platform boundary names one native driver and one exit watch per platform", "[S7][B2]") {
  namespace P = sys::this_platform;
  if constexpr (P::macos) {
    CHECK(P::native == P::native_driver::seatbelt);
    CHECK(P::exits == exit_watch::sigchld);
  } else {
    CHECK(P::native == P::native_driver::bwrap);
    CHECK(P::exits == exit_watch::pidfd); // the Linux default stays pidfd
    CHECK(P::name == "linux");
  }
  launch::reactor r;
  CHECK(r.exits() == P::exits);
}

TEST_CASE("S7: a reactor reports and reaps exactly the children it watches (pidfd and SIGCHLD)", "[S7]") {
  const exit_watch mode = GENERATE(exit_watch::pidfd, exit_watch::sigchld);
  INFO(name_of(mode));
  launch::reactor r(mode);
  // A child of code outside the reactor: it exits first and must stay
  // unreaped (no waitpid(-1) anywhere).
  pid_t foreign = child_exiting(9);
  wait_zombie(foreign);
  // One that ends before it is watched (SIGCHLD already gone by), two later.
  pid_t early = child_exiting(3);
  wait_zombie(early);
  std::map<pid_t, int> got;
  for (pid_t p : {early, child_exiting(4, 50), child_exiting(5, 150)}) {
    auto t = r.watch_exit(p, [&got, p](int st) { got[p] = st; });
    REQUIRE(t);
  }
  REQUIRE(r.run_until([&] { return got.size() == 3; }));
  std::map<int, int> codes;
  for (auto [p, st] : got) {
    REQUIRE(WIFEXITED(st));
    codes[WEXITSTATUS(st)]++;
    CHECK(::waitpid(p, nullptr, WNOHANG) < 0); // reaped: ECHILD
  }
  CHECK(codes == std::map<int, int>{{3, 1}, {4, 1}, {5, 1}});
  CHECK(r.idle());
  int st = 0;
  REQUIRE(::waitpid(foreign, &st, WNOHANG) == foreign); // still ours to reap
  CHECK(WEXITSTATUS(st) == 9);
}

TEST_CASE("S7: two reactors in one process never reap each other's children (SIGCHLD)", "[S7]") {
  launch::reactor a(exit_watch::sigchld), b(exit_watch::sigchld);
  std::optional<int> got_a, got_b;
  pid_t pa = child_exiting(11, 20), pb = child_exiting(12, 120);
  REQUIRE(a.watch_exit(pa, [&](int st) { got_a = st; }));
  REQUIRE(b.watch_exit(pb, [&](int st) { got_b = st; }));
  // Only a runs until its child is done; b's child exits meanwhile or later
  // and b still gets it.
  REQUIRE(a.run_until([&] { return got_a.has_value(); }));
  CHECK(WEXITSTATUS(*got_a) == 11);
  CHECK_FALSE(got_b);
  REQUIRE(b.run_until([&] { return got_b.has_value(); }));
  CHECK(WEXITSTATUS(*got_b) == 12);
}

TEST_CASE("S7: unwatching a child leaves it to its owner, killed children report the signal", "[S7]") {
  const exit_watch mode = GENERATE(exit_watch::pidfd, exit_watch::sigchld);
  INFO(name_of(mode));
  launch::reactor r(mode);
  pid_t left = child_exiting(6, 30);
  auto t = r.watch_exit(left, [](int) { FAIL("unwatched child reported"); });
  REQUIRE(t);
  r.unwatch(*t);
  pid_t killed = ::fork();
  if (killed == 0) {
    ::pause();
    ::_exit(0);
  }
  std::optional<int> st;
  REQUIRE(r.watch_exit(killed, [&](int s) { st = s; }));
  ::kill(killed, SIGKILL);
  REQUIRE(r.run_until([&] { return st.has_value(); }));
  CHECK(WIFSIGNALED(*st));
  CHECK(WTERMSIG(*st) == SIGKILL);
  CHECK(launch::exit_code_of(*st) == 128 + SIGKILL);
  int ls = 0;
  REQUIRE(::waitpid(left, &ls, 0) == left);
  CHECK(WEXITSTATUS(ls) == 6);
}

TEST_CASE("S7: signals arrive through the reactor's self-pipe, and the old disposition is back afterwards", "[S7]") {
  struct sigaction before{};
  ::sigaction(SIGUSR1, nullptr, &before);
  {
    launch::reactor r;
    int seen = 0;
    auto w = r.watch_signals({SIGUSR1, SIGUSR2}, [&](int sig) { seen = sig; });
    REQUIRE(w);
    CHECK_FALSE(r.idle()); // a signal watch is something to wait for
    ::kill(::getpid(), SIGUSR1);
    REQUIRE(r.run_until([&] { return seen != 0; }));
    CHECK(seen == SIGUSR1);
    // From another thread too (delivered to whichever thread; the pipe wakes the loop).
    seen = 0;
    std::thread([] { ::kill(::getpid(), SIGUSR2); }).join();
    REQUIRE(r.run_until([&] { return seen != 0; }));
    CHECK(seen == SIGUSR2);
  }
  struct sigaction after{};
  ::sigaction(SIGUSR1, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}
