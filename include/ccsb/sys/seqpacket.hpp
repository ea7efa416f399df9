// ccsb/sys/seqpacket.hpp — one datagram with descriptors over a
// SOCK_SEQPACKET socket (SCM_RIGHTS), for the exec channel between the
// launcher and ccsb-init (ccsb/protocol/supervisor.hpp). Used by both ends;
// does I/O.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::sys {

inline constexpr std::size_t kMaxPassedFds = 4;

// Sends `text` with `fds` in one sendmsg (MSG_NOSIGNAL); false with errno set
// when the peer is gone or the datagram is too big.
inline bool send_datagram(int sock, std::string_view text, const std::vector<int>& fds = {}) {
  if (fds.size() > kMaxPassedFds) {
    errno = EINVAL;
    return false;
  }
  iovec iov{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (!fds.empty()) {
    m.msg_control = cbuf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (static_cast<std::size_t>(n) != text.size()) {
      errno = EMSGSIZE;
      return false;
    }
    return true;
  }
}

struct datagram {
  std::string text;
  std::vector<int> fds;   // received close-on-exec; the caller owns them
  bool truncated{false};  // text or descriptors cut: the message must be refused
  bool eof{false};        // the peer closed its end
  int error{0};           // errno of a failed recvmsg (EAGAIN: nothing there)
};

inline datagram recv_datagram(int sock, std::size_t max_text) {
  datagram d;
  // One receive buffer per thread, kept: the exec channel's limit is 128 KiB
  // and most messages are a few bytes, so zeroing a fresh buffer per call
  // was the largest user-space item of a warm exec in the launcher and in
  // ccsb-init (perf; two calls per message, the second finding EAGAIN).
  thread_local std::vector<char> buf;
  if (buf.size() < max_text + 1) buf.resize(max_text + 1);
  iovec iov{buf.data(), max_text + 1};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  ssize_t n;
  do n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    d.error = errno;
    return d;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      d.fds.push_back(fd);
    }
  }
  if (n == 0 && d.fds.empty()) {
    d.eof = true;
    return d;
  }
  d.truncated = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<std::size_t>(n) > max_text;
  d.text.assign(buf.data(), static_cast<std::size_t>(n) > max_text ? max_text : static_cast<std::size_t>(n));
  return d;
}

inline void close_all(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

} // namespace ccsb::sys
