#include "proxy/listeners.hpp"

#include "io.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ccsb::init {

namespace {

struct fds_closer {
  std::vector<int> fds;
  ~fds_closer() {
    for (int fd : fds) ::close(fd);
  }
};

} // namespace

std::string send_listeners(const std::vector<protocol::init_listen>& listeners, int channel_fd) {
  if (listeners.empty() || listeners.size() > protocol::kMaxListeners) return "between 1 and 8 proxy listeners expected";
  fds_closer socks;
  protocol::listeners_message m;
  // 1. the sockets
  for (const auto& l : listeners) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (s < 0) return errno_text("socket");
    socks.fds.push_back(s);
    int one = 1;
    if (::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) return errno_text("setsockopt(SO_REUSEADDR)");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr.s_addr, l.address.data(), l.address.size()); // already in network order
    a.sin_port = htons(l.port);
    const std::string where = std::string(protocol::to_string(l.role)) + " proxy listener port " + std::to_string(l.port);
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return errno_text("bind (" + where + ")");
    if (::listen(s, 4096) != 0) return errno_text("listen (" + where + ")");
    m.roles.push_back(l.role);
  }
  // 2. hand them over
  const std::string text = protocol::write_message(m);
  iovec iov{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * protocol::kMaxListeners)]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * socks.fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * socks.fds.size());
  std::memcpy(CMSG_DATA(c), socks.fds.data(), sizeof(int) * socks.fds.size());
  ssize_t n;
  do n = ::sendmsg(channel_fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) return errno_text("sendmsg (proxy channel to egressd)");
  // 4. socks (our copies) close on return: the datagram in flight holds them
  return {};
}

std::string await_listeners_taken(int channel_fd, std::chrono::milliseconds wait) {
  // 3. the answer
  ssize_t n;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  char buf[protocol::kMaxChannelMessage + 1];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "egressd did not answer on the proxy channel within " + std::to_string(wait.count()) + " ms";
    pollfd p{channel_fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno_text("poll (proxy channel)");
    if (r == 0) continue;
    do n = ::recv(channel_fd, buf, sizeof buf, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) continue;
    if (n < 0) return errno_text("recv (proxy channel)");
    if (n == 0) return "egressd closed the proxy channel without answering (did it exit?)";
    auto reply = protocol::parse_reply(std::string_view(buf, static_cast<std::size_t>(n)));
    if (!reply) return "egressd's answer on the proxy channel: " + reply.err().what();
    if (auto* refused = std::get_if<protocol::refused_message>(&*reply))
      return "egressd refused the proxy listeners: " + refused->reason;
    break;
  }
  // 4. the channel closes
  ::close(channel_fd);
  return {};
}

} // namespace ccsb::init
