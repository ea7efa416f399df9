// The proxy channel (L3, B2): listening sockets handed to egressd over
// --listen-channel (ccsb/protocol/proxy_channel.hpp). egressd must serve
// exactly what passes its checks, refuse everything else with a reason, and
// keep serving what it already has.
#include "support.hpp"

#include "ccsb/protocol/proxy_channel.hpp"

#include <catch2/catch.hpp>

#include <sys/un.h>

using namespace etest;

namespace {

constexpr int kChannelFd = 4;

struct channel_egressd {
  unique_fd mine; // our end of the channel
  std::unique_ptr<egressd> e;
  channel_egressd() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) fatal(errno_text("socketpair"));
    mine.reset(pair[0]);
    unique_fd theirs(pair[1]);
    egressd::options o;
    o.extra_fds.push_back({theirs.get(), kChannelFd});
    e = std::make_unique<egressd>(std_args({"--listen-channel", std::to_string(kChannelFd)}), o);
  }
};

unique_fd tcp_listener(const char* host = "127.0.0.1", bool listen_too = true, int type = SOCK_STREAM) {
  unique_fd s(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, host, &a.sin_addr);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fatal(errno_text("bind"));
  if (listen_too && type == SOCK_STREAM && ::listen(s.get(), 16) != 0) fatal(errno_text("listen"));
  return s;
}

uint16_t port_of_fd(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// Sends one datagram with `fds` attached and returns egressd's answer.
std::string hand_over(int channel, const std::string& text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (fds.empty() ? 1 : fds.size())));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(channel, &msg, MSG_NOSIGNAL) < 0) return "sendmsg: " + errno_text("sendmsg");
  set_timeouts(channel, kWaitMs);
  char buf[1024];
  ssize_t n = ::recv(channel, buf, sizeof buf, 0);
  if (n <= 0) return "<no answer>";
  return std::string(buf, static_cast<std::size_t>(n));
}

// One SOCKS5 CONNECT through the listener on `port`, echo checked.
bool socks_echo_works(uint16_t port, const upstream& up) {
  auto fd = tcp_connect(port);
  auto r = socks::connect_name(fd.get(), "allowed.test", up.port());
  if (r.code != 0) return false;
  send_all(fd.get(), "ping-through-handed-listener");
  return recv_n(fd.get(), 28) == "ping-through-handed-listener";
}

} // namespace

TEST_CASE("L3: egressd serves listening sockets handed over the proxy channel, HTTP and SOCKS5", "[L3][B2][egressd]") {
  upstream echo(upstream::mode::echo);
  upstream web(upstream::mode::http);
  channel_egressd ce;
  CHECK(ce.e->ready().str("http").size() > 0); // its own listeners still come first
  auto http = tcp_listener();
  auto socks = tcp_listener();
  CHECK(hand_over(ce.mine.get(), "listeners http socks", {http.get(), socks.get()}) == "accepting");
  const uint16_t http_port = port_of_fd(http.get()), socks_port = port_of_fd(socks.get());
  // Our copies go away: egressd's are the only ones left, as in a sandbox.
  http.reset();
  socks.reset();
  CHECK(socks_echo_works(socks_port, echo));
  auto r = run({find_tool("curl"), "-sS", "--max-time", "20", "-x", "http://127.0.0.1:" + std::to_string(http_port),
                "http://allowed.test:" + std::to_string(web.port()) + "/handed"});
  INFO(r.out << r.err << ce.e->describe());
  CHECK(r.exit_code == 0);
  // A denied name through a handed listener is a violation like any other.
  auto denied = run({find_tool("curl"), "-sSf", "--max-time", "20", "-x", "http://127.0.0.1:" + std::to_string(http_port),
                     "http://other.test:" + std::to_string(web.port()) + "/"});
  CHECK(denied.exit_code != 0);
  CHECK(ce.e->wait_violation("other.test:" + std::to_string(web.port())));
}

TEST_CASE("L3: egressd refuses whatever on the proxy channel is not a loopback TCP listener, and keeps serving",
          "[L3][B2][egressd]") {
  upstream echo(upstream::mode::echo);
  channel_egressd ce;
  auto good = tcp_listener();
  REQUIRE(hand_over(ce.mine.get(), "listeners socks", {good.get()}) == "accepting");
  const uint16_t good_port = port_of_fd(good.get());
  good.reset();

  temp_dir dir;
  write_file(dir.file("plain"), "x");
  unique_fd file(::open(dir.file("plain").c_str(), O_RDONLY | O_CLOEXEC));
  auto not_listening = tcp_listener("127.0.0.1", false);
  auto any_address = tcp_listener("0.0.0.0");
  auto udp = tcp_listener("127.0.0.1", false, SOCK_DGRAM);
  unique_fd unix_listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string p = dir.file("l.sock");
    std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
    REQUIRE(::bind(unix_listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(unix_listener.get(), 4) == 0);
  }
  auto spare = tcp_listener();
  struct row {
    const char* what;
    std::string text;
    std::vector<int> fds;
    const char* reason; // part of the refusal
  };
  // Nine listeners (one more than a channel takes) and sixteen (more
  // descriptors than egressd makes room for: the kernel truncates).
  std::vector<unique_fd> holders;
  std::vector<int> nine, ten;
  std::string nine_text = "listeners", ten_text = "listeners";
  for (int i = 0; i < 16; ++i) {
    holders.push_back(tcp_listener());
    if (i < 9) {
      nine.push_back(holders.back().get());
      nine_text += " http";
    }
    ten.push_back(holders.back().get());
    ten_text += " http";
  }
  const std::vector<row> rows{
      {"a regular file", "listeners http", {file.get()}, "not a socket"},
      {"a TCP socket that is not listening", "listeners http", {not_listening.get()}, "not listening"},
      {"a listener on 0.0.0.0", "listeners http", {any_address.get()}, "not bound to a loopback address"},
      {"a UDP socket", "listeners http", {udp.get()}, "not SOCK_STREAM"},
      {"a Unix listener", "listeners http", {unix_listener.get()}, "not TCP"},
      {"two roles, one descriptor", "listeners http socks", {spare.get()}, "2 roles but 1 descriptors"},
      {"a role, no descriptor", "listeners http", {}, "1 roles but 0 descriptors"},
      {"an unknown role", "listeners ftp", {spare.get()}, "unknown role"},
      {"an unknown kind", "gimme http", {spare.get()}, "expected \"listeners\""},
      {"a doubled space", "listeners  http", {spare.get()}, "empty field"},
      {"a control byte", std::string("listeners http\n"), {spare.get()}, "not printable ASCII"},
      {"more listeners than one channel takes", nine_text, nine, "between 1 and 8 roles"},
      {"more descriptors than egressd makes room for", ten_text, ten, "truncated"},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    std::string answer = hand_over(ce.mine.get(), r.text, r.fds);
    CHECK_THAT(answer, Catch::StartsWith("refused "));
    CHECK_THAT(answer, Catch::Contains(r.reason));
  }
  // Nothing refused was served: a connection to the spare listener waits
  // in its backlog for us instead of being accepted by egressd.
  {
    auto c = tcp_connect(port_of_fd(spare.get()));
    pollfd p{spare.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, kWaitMs) == 1);
    unique_fd taken(::accept4(spare.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    CHECK(taken.get() >= 0);
  }
  // And the listener it accepted first still works.
  CHECK(socks_echo_works(good_port, echo));
  CHECK(ce.e->alive());
}

TEST_CASE("L3: --listen-channel must be a SOCK_SEQPACKET descriptor", "[L3][egressd]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  unique_fd a(sv[0]), b(sv[1]);
  spawn_options so;
  so.extra_fds.push_back({b.get(), kChannelFd});
  int err[2];
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  unique_fd er(err[0]), ew(err[1]);
  so.stderr_fd = ew.get();
  auto argv = std_args({"--listen-channel", std::to_string(kChannelFd)});
  argv.insert(argv.begin(), egressd_path());
  pid_t pid = spawn(argv, so);
  ew.reset();
  auto code = wait_exit(pid, kWaitMs);
  REQUIRE(code);
  CHECK(*code == 1);
  char buf[512];
  ssize_t n = ::read(er.get(), buf, sizeof buf);
  CHECK_THAT(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), Catch::Contains("not a SOCK_SEQPACKET socket"));
}

TEST_CASE("X4 N1: egressd serves a connection handed over the proxy channel, and refuses anything but a connected "
          "Unix stream socket",
          "[X4][N1][L3][egressd]") {
  upstream web(upstream::mode::http);
  upstream echo(upstream::mode::echo);
  channel_egressd ce;
  auto pair_of = [](int type) {
    int sp[2];
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sp) != 0) fatal(errno_text("socketpair"));
    return std::pair<unique_fd, unique_fd>(unique_fd(sp[0]), unique_fd(sp[1]));
  };
  {
    auto [mine, theirs] = pair_of(SOCK_STREAM);
    REQUIRE(hand_over(ce.mine.get(), "connection http", {theirs.get()}) == "accepting");
    theirs.reset();
    send_all(mine.get(), "GET http://allowed.test:" + std::to_string(web.port()) +
                             "/handed HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n");
    set_timeouts(mine.get(), kWaitMs);
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = ::recv(mine.get(), buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 200"));
  }
  {
    auto [mine, theirs] = pair_of(SOCK_STREAM);
    REQUIRE(hand_over(ce.mine.get(), "connection socks", {theirs.get()}) == "accepting");
    theirs.reset();
    auto r = socks::connect_name(mine.get(), "allowed.test", echo.port());
    REQUIRE(r.code == 0);
    send_all(mine.get(), "ping-through-handed-connection");
    CHECK(recv_n(mine.get(), 30) == "ping-through-handed-connection");
    // A denied name on a handed connection is a violation like any other.
    auto [m2, t2] = pair_of(SOCK_STREAM);
    REQUIRE(hand_over(ce.mine.get(), "connection socks", {t2.get()}) == "accepting");
    t2.reset();
    CHECK(socks::connect_name(m2.get(), "other.test", echo.port()).code != 0);
    CHECK(ce.e->wait_violation("other.test:" + std::to_string(echo.port())));
  }
  auto listening = tcp_listener();
  auto dgram = pair_of(SOCK_DGRAM);
  auto stream = pair_of(SOCK_STREAM);
  auto stream2 = pair_of(SOCK_STREAM);
  temp_dir dir;
  write_file(dir.file("plain"), "x");
  unique_fd file(::open(dir.file("plain").c_str(), O_RDONLY | O_CLOEXEC));
  auto not_listening = tcp_listener("127.0.0.1", false);
  struct row {
    const char* what;
    std::string text;
    std::vector<int> fds;
    const char* reason;
  };
  const std::vector<row> rows{
      {"a TCP listener", "connection http", {listening.get()}, "listening"},
      {"a TCP socket", "connection http", {not_listening.get()}, "not an AF_UNIX socket"},
      {"a datagram socket", "connection http", {dgram.second.get()}, "not SOCK_STREAM"},
      {"a regular file", "connection socks", {file.get()}, "not a socket"},
      {"no descriptor", "connection http", {}, "takes 1 descriptor, got 0"},
      {"two descriptors", "connection http", {stream.second.get(), stream2.second.get()}, "takes 1 descriptor, got 2"},
      {"an unknown role", "connection ftp", {stream.second.get()}, "unknown role"},
      {"two roles", "connection http socks", {stream.second.get()}, "expected \"connection ROLE\""},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    std::string answer = hand_over(ce.mine.get(), r.text, r.fds);
    CHECK_THAT(answer, Catch::StartsWith("refused "));
    CHECK_THAT(answer, Catch::Contains(r.reason));
  }
  CHECK(ce.e->alive());
}
