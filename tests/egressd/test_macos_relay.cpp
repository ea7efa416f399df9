// The relay a Mac runs, run on Linux (issue 12, N1, N8): egressd-macsim is
// egressd built with every macOS choice made (egressd/CMakeLists.txt:
// confine_macos.cpp and io_platform_macos.cpp, CCSB_LAUNCH_SIMULATE_MACOS).
// Its relay gets no pipe, so every byte of a tunnel or a body is copied
// through the 16 KiB buffer, and it sends with plain send(2) (SIGPIPE
// ignored). On Linux egressd splices every TCP byte, so without this build
// the copy path would run nowhere in CI. What it does not show: Darwin's
// sockets (only a Mac does).
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

std::string macsim_path() { return std::string(CCSB_BIN_DIR) + "/egressd-macsim"; }

egressd::options macsim() {
  if (::access(macsim_path().c_str(), X_OK) != 0)
    fatal("egressd-macsim not found at " + macsim_path() + " (build the egressd-macsim target first)");
  egressd::options o;
  o.binary = macsim_path();
  return o;
}

// The layers a Mac has (the harness's default check expects Linux's).
std::vector<std::string> macsim_args() { return std_args({"--confine", "privileges"}); }


// Pipes among egressd's descriptors (its stdout and Asio's signal pipe
// included): a relay that splices keeps its pooled pipe after a transfer.
std::size_t pipes_of(const egressd& e) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(e.pid()) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code lec;
    if (std::filesystem::read_symlink(it->path(), lec).string().rfind("pipe:", 0) == 0) ++n;
  }
  return n;
}

unique_fd open_tunnel(egressd& e, bool socks5, uint16_t port) {
  if (socks5) {
    auto fd = tcp_connect(e.socks_port());
    if (socks::connect_name(fd.get(), "allowed.test", port).code != 0) fatal("SOCKS5 tunnel refused");
    return fd;
  }
  auto fd = tcp_connect(e.http_port());
  if (http_connect(fd.get(), "allowed.test:" + std::to_string(port)).status != 200) fatal("CONNECT refused");
  return fd;
}

std::string pattern(std::size_t n) {
  std::string s;
  s.reserve(n + 16);
  for (std::size_t i = 0; s.size() < n; ++i) s += std::to_string(i) + ",";
  s.resize(n);
  return s;
}

} // namespace

TEST_CASE("N1: the macOS relay (egressd-macsim, copying) carries 4 MiB each way through CONNECT and SOCKS5 "
          "tunnels, passes half-close on and makes no relay pipe", "[N1][N8][B2][egressd]") {
  upstream echo(upstream::mode::echo);
  upstream reply_after_eof(upstream::mode::half_close);
  upstream closes_first(upstream::mode::shut_first);
  egressd e(macsim_args(), macsim());
  const std::size_t pipes_before = pipes_of(e);
  const std::string data = pattern(4u << 20);
  for (bool socks5 : {false, true}) {
    INFO((socks5 ? "SOCKS5" : "CONNECT"));
    {
      auto fd = open_tunnel(e, socks5, echo.port());
      bool sent = false;
      std::thread writer([&] { sent = send_all(fd.get(), data); });
      std::string back = recv_n(fd.get(), data.size());
      writer.join();
      CHECK(sent);
      CHECK(back.size() == data.size());
      CHECK(back == data);
    }
    {
      auto fd = open_tunnel(e, socks5, reply_after_eof.port());
      send_all(fd.get(), data);
      ::shutdown(fd.get(), SHUT_WR);
      auto r = recv_to_eof(fd.get());
      CHECK(r.data == "received " + std::to_string(data.size()) + " bytes\n");
      CHECK(r.eof);
    }
    {
      auto fd = open_tunnel(e, socks5, closes_first.port());
      CHECK(recv_n(fd.get(), 4) == "bye\n");
      char c;
      CHECK(::recv(fd.get(), &c, 1, 0) == 0);
      CHECK(send_all(fd.get(), socks5 ? "more-socks" : "more-http"));
      ::shutdown(fd.get(), SHUT_WR);
      CHECK(peer_closes(fd.get()));
    }
  }
  CHECK(closes_first.wait_finished(2));
  CHECK(closes_first.after_shutdown().find("more-http") != std::string::npos);
  CHECK(closes_first.after_shutdown().find("more-socks") != std::string::npos);
  CHECK(pipes_of(e) == pipes_before);
  CHECK(e.alive());
}

TEST_CASE("N8: through the macOS relay (egressd-macsim) a Content-Length body is copied exactly, in both "
          "directions, and what follows it is a message of its own", "[N8][B2][egressd]") {
  egressd e(macsim_args(), macsim());
  // Many times the 16 KiB copy buffer, so each body takes many reads, each
  // asking for at most what is left.
  const std::string body = pattern((256u << 10) + 5);
  const std::string big = body + body;
  scripted_upstream first("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(big.size()) + "\r\n\r\n" + big +
                          "HTTP/1.1 200 OK\r\n\r\nSMUGGLED");
  scripted_upstream second("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbbb");
  const std::string p1 = port_of(first), p2 = port_of(second);
  auto fd = tcp_connect(e.http_port());
  REQUIRE(send_all(fd.get(), "POST http://allowed.test:" + p1 + "/a HTTP/1.1\r\nHost: allowed.test:" + p1 +
                                 "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                                 "GET http://allowed.test:" + p2 + "/b HTTP/1.1\r\nHost: allowed.test:" + p2 +
                                 "\r\n\r\n"));
  auto r1 = read_response(fd.get());
  INFO(r1.raw.substr(0, 300));
  CHECK(r1.status == 200);
  CHECK(r1.body == big);
  auto r2 = read_response(fd.get());
  INFO(r2.raw);
  CHECK(r2.status == 200);
  CHECK(r2.body == "bbb");
  CHECK(r2.raw.find("SMUGGLED") == std::string::npos);
  REQUIRE(first.requests().size() == 1);
  const std::string got = first.requests()[0];
  REQUIRE(got.size() >= body.size());
  CHECK(got.substr(got.size() - body.size()) == body);
  CHECK(got.find("GET ") == std::string::npos);
  CHECK(second.requests().size() == 1);
  CHECK(e.alive());
}

TEST_CASE("N8: through the macOS relay (egressd-macsim) peers that reset mid-transfer fail only their own "
          "connection and egressd keeps serving", "[N8][B2][egressd]") {
  upstream bad(upstream::mode::reset_mid);
  upstream echo(upstream::mode::echo);
  upstream good(upstream::mode::http);
  egressd e(macsim_args(), macsim());
  auto bystander = open_tunnel(e, false, echo.port());
  {
    // The upstream resets inside a Content-Length body.
    auto fd = tcp_connect(e.http_port());
    REQUIRE(send_all(fd.get(), "GET http://allowed.test:" + port_of(bad) + "/big HTTP/1.1\r\nHost: allowed.test:" +
                                   port_of(bad) + "\r\n\r\n"));
    auto r = recv_to_eof(fd.get());
    CHECK((r.eof || r.reset));
    CHECK(r.data.size() < 1048576);
  }
  {
    // The client resets while the upstream still sends: egressd's next
    // sends to it fail (ECONNRESET, then EPIPE) instead of killing it.
    auto fd = open_tunnel(e, true, echo.port());
    REQUIRE(send_all(fd.get(), pattern(1u << 20)));
    linger lg{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  const std::string msg = "still-here;";
  CHECK(send_all(bystander.get(), msg));
  CHECK(recv_n(bystander.get(), msg.size()) == msg);
  auto fd = tcp_connect(e.http_port());
  REQUIRE(send_all(fd.get(), "GET http://allowed.test:" + port_of(good) + "/after HTTP/1.1\r\nHost: allowed.test:" +
                                 port_of(good) + "\r\n\r\n"));
  auto r = read_response(fd.get());
  INFO(r.raw);
  CHECK(r.status == 200);
  CHECK(e.alive());
}
