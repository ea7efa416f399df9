// egressd/seccomp_allowlist.hpp — every system call egressd may make once it
// has confined itself (X3, N9), with who makes it and why. confine.cpp turns
// the table into a libseccomp filter; tests/egressd/test_confine.cpp reads it
// to check that nothing that opens, executes, binds, forks or changes
// credentials ever slips in. Pure data, no libseccomp.
//
// How the list was found (and how to redo it after a change): the egressd
// suite (egressd_tests, the proxy-channel tests included) was run with
// egressd under `strace -f`, and every call after the `ready` line collected
// with its arguments; then the suite, the launcher's network tests
// (escape_tests "[L3],[N2],[N6],[N7]") and bench/egressd were run with this
// filter loaded with SECCOMP_FILTER_FLAG_LOG (libseccomp
// SCMP_FLTATR_CTL_LOG: the kernel logs every trapped call, `dmesg | grep
// 'comm="egressd"'`) until nothing was logged. A
// few calls sit on paths no test reaches on a healthy machine (an events
// pipe that is full, a crash in abort(), a realloc of a big block, the
// c-ares TCP fallback); they are marked "rare path" below and were read from
// the glibc 2.36, c-ares 1.18 and Asio 1.22 sources.
//
// Anything else fails with EPERM and is logged once per system call on
// stderr (confine.cpp: SECCOMP_RET_TRAP and a SIGSYS handler); it never kills
// egressd, so a call missing here degrades one operation instead of taking
// the session's network down.
//
// Deliberately absent: open/openat/creat/stat-by-path (the file system is
// closed: Landlock too), execve/execveat, clone/clone3/fork/vfork, bind,
// listen, unlink, kill (other processes), ptrace, prctl, setuid & co.,
// capset, seccomp, landlock_*, bpf, mount, socket(AF_UNIX/AF_NETLINK/...),
// mprotect and any PROT_EXEC mapping (no code can be made executable),
// ioctl other than FIONBIO, fcntl other than the five commands below,
// sendmsg (egressd writes one buffer at a time: send(2) is sendto),
// getrandom (c-ares 1.18 seeds its RC4 generator from /dev/urandom at
// start-up and draws from memory afterwards).
#pragma once

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace egressd::seccomp_table {

// How a call's arguments are matched (on the low 32 bits where the kernel
// reads an int, so garbage in the upper half cannot step around a rule).
enum class match : std::uint8_t {
  any,        // every call
  one_of32,   // (arg & 0xffffffff) is one of values[0..count)
  bits_clear, // (arg & values[0]) == 0
  bits_set,   // (arg & values[0]) == values[0]
  self_pid,   // arg == egressd's own pid (filled in when the filter is built)
};

struct entry {
  std::string_view name;
  std::string_view user; // who calls it after `ready`
  std::string_view why;
  match how{match::any};
  unsigned arg{0};
  std::array<std::uint64_t, 5> values{};
  std::size_t count{0};
  bool required{true}; // false: exists on some architectures only
};

inline constexpr entry kAllowed[] = {
    // Relay (relay.cpp): the hot path first — libseccomp builds a binary
    // tree anyway, the order is for the reader.
    {"splice", "relay", "moves tunnel bytes socket -> pooled pipe -> socket"},
    {"pipe2", "relay", "a new pipe for the splice pool (O_NONBLOCK|O_CLOEXEC)"},
    {"recvfrom", "Asio, relay, c-ares", "recv(2): request heads, the copy fallback, DNS answers"},
    {"sendto", "Asio, relay, c-ares, channel", "send(2): replies, the copy fallback, DNS queries, channel replies"},
    {"shutdown", "relay", "passes a half-close (FIN) on"},
    // Event loop (Asio's epoll reactor).
    {"epoll_wait", "Asio", "waits for readiness and timers", match::any, 0, {}, 0, false},
    {"epoll_pwait", "Asio", "epoll_wait where the architecture has only this form", match::any, 0, {}, 0, false},
    {"epoll_ctl", "Asio, c-ares watches", "registers, re-arms and removes descriptors"},
    {"timerfd_settime", "Asio", "the reactor's one timer (deadlines, sweeper, DNS timeouts, back-off)"},
    {"read", "Asio", "the reactor's eventfd and the signal pipe"},
    {"write", "Asio, events, logging", "the eventfd, the signal pipe, event lines, stderr (also the SIGSYS handler)"},
    {"close", "everyone", "closes connections, pipes, c-ares sockets"},
    {"ioctl", "Asio", "FIONBIO only: non_blocking(true) on new sockets", match::one_of32, 1, {FIONBIO}, 1},
    {"fcntl", "Asio, c-ares, relay",
     "F_GETFL/F_SETFL (non-blocking), F_GETFD/F_SETFD (close-on-exec), F_SETPIPE_SZ (1 MiB relay pipes)",
     match::one_of32, 1, {F_GETFL, F_SETFL, F_GETFD, F_SETFD, F_SETPIPE_SZ}, 5},
    {"poll", "dial.cpp", "the zero-timeout look at a connecting socket", match::any, 0, {}, 0, false},
    {"ppoll", "dial.cpp", "poll(2) where the architecture has only this form", match::any, 0, {}, 0, false},
    // Network.
    {"accept", "Asio", "accepts on egressd's own and on handed-over listeners"},
    {"accept4", "Asio", "accept where the C library uses this form"},
    {"socket", "dial.cpp, c-ares", "IPv4/IPv6 only: upstream TCP, DNS over UDP and TCP", match::one_of32, 0,
     {AF_INET, AF_INET6}, 2},
    {"connect", "dial.cpp, c-ares", "dials upstreams and DNS servers (Landlock allows TCP connect, denies bind)"},
    {"getsockopt", "dial.cpp, channel", "SO_ERROR after a connect; SO_TYPE/SO_PROTOCOL/SO_ACCEPTCONN on handed listeners"},
    {"setsockopt", "Asio, c-ares", "TCP_NODELAY on both legs of a tunnel"},
    {"getsockname", "server.cpp, channel", "a listener's address (accept loop, handed listeners)"},
    {"recvmsg", "channel", "listeners handed over with SCM_RIGHTS (MSG_CMSG_CLOEXEC)"},
    {"writev", "c-ares", "rare path: DNS over TCP after a truncated UDP answer"},
    // fstat(2) on a handed-over descriptor: glibc 2.36 implements it as
    // newfstatat(fd, "", buf, AT_EMPTY_PATH). Only that form is allowed; a
    // path lookup without AT_EMPTY_PATH is refused (Landlock has no right for
    // stat, so this is the layer that stops stat-by-path).
    {"newfstatat", "channel", "fstat of a handed-over descriptor (AT_EMPTY_PATH only)", match::bits_set, 3,
     {AT_EMPTY_PATH}, 1, false},
    {"fstat", "channel", "fstat where the C library uses the old call", match::any, 0, {}, 0, false},
    // Memory (glibc malloc, single-threaded: the main arena grows with brk,
    // big blocks are mmapped). No mapping may be executable.
    {"brk", "malloc", "grows and trims the heap"},
    {"mmap", "malloc", "big blocks; PROT_EXEC refused", match::bits_clear, 2, {PROT_EXEC}, 1},
    {"munmap", "malloc", "frees big blocks"},
    {"mremap", "malloc", "rare path: realloc of a big (mmapped) block"},
    {"madvise", "malloc", "rare path: returns freed pages (MADV_DONTNEED) when the heap is trimmed"},
    // Time.
    {"clock_gettime", "Asio, c-ares", "only if the vDSO is unavailable: steady_clock, c-ares timeouts"},
    {"clock_nanosleep", "events", "rare path: usleep(1000) while the events pipe is full"},
    {"nanosleep", "events", "usleep where the C library uses the old call", match::any, 0, {}, 0, false},
    // Signals and exit.
    {"rt_sigreturn", "kernel", "returns from Asio's SIGTERM/SIGINT handler and from the SIGSYS handler"},
    {"restart_syscall", "kernel", "resumes a sleep interrupted by a signal"},
    {"rt_sigprocmask", "glibc", "rare path: abort() and raise() (a crash must stay a crash, SIGABRT)"},
    {"getpid", "glibc", "rare path: raise() names its own process"},
    {"gettid", "glibc", "rare path: raise() names its own thread"},
    {"tgkill", "glibc", "rare path: raise(SIGABRT) in abort(), to egressd itself only", match::self_pid, 0, {}, 0},
    {"exit_group", "main", "_Exit(0) after the drain"},
};

inline constexpr std::span<const entry> allowed() { return kAllowed; }

} // namespace egressd::seccomp_table
