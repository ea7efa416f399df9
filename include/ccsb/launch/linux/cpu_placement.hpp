// ccsb/launch/linux/cpu_placement.hpp — start a waiting child on another
// CPU than the launcher's, for the time it waits (launcher only; does I/O;
// issue 9).
//
// bwrap is spawned before the policy is rendered so that its own start
// (execve, the dynamic loader, libc's start-up) runs beside the launcher's
// policy work (render/bwrap/render.hpp "Spawned first, fed later"). A scheduler
// that keeps a forked child on its parent's CPU until the parent sleeps
// (this project's VM: the child became runnable, the other CPU stayed idle,
// bwrap reached execve only once the launcher blocked) defeats that: the
// start then follows the policy work instead of overlapping it.
//
// place_beside(pid) narrows the child's CPU set to the launcher's own set
// without the CPU the launcher runs on, when that leaves any CPU; the
// kernel moves the runnable child there at once. restore() gives it the
// launcher's whole set back; the driver calls it before bwrap is fed, so
// every process of the sandbox (bwrap forks them only after it read its
// options) is created with the set the launcher was given, not the hint's.
//
// Only a placement hint: no security property depends on it, a failure
// leaves the default placement, and a launcher confined to one CPU (or one
// whose set the kernel does not report) does nothing.
#pragma once

#include <sched.h>
#include <sys/types.h>

namespace ccsb::launch {

class cpu_placement {
public:
  cpu_placement() = default;

  // The child `pid` (runnable, not yet fed) onto the launcher's other CPUs.
  static cpu_placement place_beside(pid_t pid) {
    cpu_placement p;
    CPU_ZERO(&p.all_);
    if (::sched_getaffinity(0, sizeof p.all_, &p.all_) != 0) return p;
    const int here = ::sched_getcpu();
    if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &p.all_)) return p;
    cpu_set_t others = p.all_;
    CPU_CLR(here, &others);
    if (CPU_COUNT(&others) == 0) return p;
    if (::sched_setaffinity(pid, sizeof others, &others) != 0) return p;
    p.pid_ = pid;
    return p;
  }

  // The launcher's whole set back (once; a no-op when nothing was narrowed).
  void restore() {
    if (pid_ <= 0) return;
    (void)::sched_setaffinity(pid_, sizeof all_, &all_); // a child that is gone: its exit is reported elsewhere
    pid_ = -1;
  }

  bool narrowed() const { return pid_ > 0; }

private:
  pid_t pid_{-1};
  cpu_set_t all_{};
};

} // namespace ccsb::launch
