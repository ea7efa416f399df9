// egressd/io_platform.hpp — egressd's platform boundary for I/O (issue 12,
// N1, L3): the calls of the relay and of the proxy channel that exist on
// Linux only, declared here once and defined per platform, chosen by the
// build (egressd/CMakeLists.txt):
// Linux io_platform_linux.cpp, macOS io_platform_macos.cpp (plain POSIX).
// No other egressd file a Mac compiles may name those calls
// (tests/macos/poisoned_headers.py compiles them with the calls poisoned).
//
//   call                 Linux (io_platform_linux.cpp)       macOS (io_platform_macos.cpp)
//   relay pipe           pipe2(O_NONBLOCK | O_CLOEXEC),      none (ENOSYS): the relay copies
//                        then F_SETPIPE_SZ 1 MiB             through its 16 KiB buffer
//   move socket <-> pipe splice(SPLICE_F_MOVE |              ENOSYS (not reached: there is
//                        SPLICE_F_NONBLOCK)                  no pipe to move through)
//   send, never SIGPIPE  send(MSG_NOSIGNAL)                  send(); run_server() ignores
//                                                            SIGPIPE process-wide first
//   received descriptors recvmsg(MSG_CMSG_CLOEXEC)           recvmsg, then FD_CLOEXEC on
//   close-on-exec                                            each (egressd has one thread:
//                                                            nothing execs in between)
//   a handed listener    SO_PROTOCOL == IPPROTO_TCP          AF_INET or AF_INET6 (Darwin has
//   is TCP                                                   no SO_PROTOCOL; its stream
//                                                            sockets of those are TCP)
//
// SIGPIPE on macOS: run_server() (server.cpp) sets SIGPIPE to SIG_IGN as its
// first step, before it opens, accepts or writes any socket; it is the only
// path of egressd that does socket I/O (--check makes none). Asio also sets
// SO_NOSIGPIPE on the sockets it opens and accepts on Apple, but the proxy
// channel (server.cpp reply()) is a descriptor egressd is handed, so the
// process-wide ignore is what send_nosigpipe() relies on there.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>

namespace egressd::io_platform {

// A pipe for the relay's pool (relay.hpp pipe_pool), both ends non-blocking
// and close-on-exec: 0, or -1 with errno (ENOSYS where the relay has no
// zero-copy path, so it takes its copy fallback).
int relay_pipe(int fds[2]) noexcept;

// Moves up to n bytes from `from` to `to`, one of them the write or read
// end of a relay pipe, without blocking: bytes moved, 0 at end of input, or
// -1 with errno (EAGAIN: try later; EINVAL or ENOSYS: the pair cannot be
// spliced, the relay switches to copying).
ssize_t splice_move(int from, int to, std::size_t n) noexcept;

// send(2) with `flags` that never raises SIGPIPE (EPIPE instead).
ssize_t send_nosigpipe(int fd, const void* data, std::size_t n, int flags) noexcept;

// recvmsg(2) with `flags`; every descriptor it receives (SCM_RIGHTS) is
// close-on-exec. The proxy channel (server.cpp) reads with it.
ssize_t recvmsg_cloexec(int fd, msghdr* m, int flags) noexcept;

// True when `fd`, a SOCK_STREAM socket, speaks TCP (a listener handed over
// the proxy channel is checked with it).
bool stream_is_tcp(int fd) noexcept;

} // namespace egressd::io_platform
