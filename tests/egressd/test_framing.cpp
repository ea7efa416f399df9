// Absolute-form forwarding against upstreams that frame their responses
// every way HTTP/1.x allows, and messages whose Connection header names their
// own framing (N8: "no input can crash it — from the client or from an
// upstream"; "hop-by-hop handling never removes a message's framing").
//
// The upstreams are real sockets on loopback that send fixed bytes
// (scripted_upstream); the clients are curl and raw sockets. A CONNECT tunnel
// opened first stands by the whole time: egressd is one process per session,
// so a crash on one request would take that tunnel with it.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

// A CONNECT tunnel to an echo upstream that must keep relaying.
struct bystander {
  bystander(egressd& e, const upstream& echo) : fd(tcp_connect(e.http_port())) {
    auto r = http_connect(fd.get(), "allowed.test:" + std::to_string(echo.port()));
    if (r.status != 200) fatal("bystander tunnel not established: " + r.status_line);
  }
  bool relays(const std::string& tag) {
    std::string msg = "still-here:" + tag + ";";
    if (!send_all(fd.get(), msg)) return false;
    return recv_n(fd.get(), msg.size()) == msg;
  }
  unique_fd fd;
};

struct framing {
  std::string name;
  std::string response; // what the upstream sends, then it closes
  std::string body;     // what the client must receive as the body
  bool head_request = false;
};

std::string big_body() {
  std::string b;
  b.reserve(1 << 20);
  for (int i = 0; b.size() < (1u << 20); ++i) b += "line " + std::to_string(i) + "\n";
  return b;
}

} // namespace

TEST_CASE("N8: every upstream response framing reaches the client and a bystander tunnel keeps relaying",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  REQUIRE(by.relays("start"));
  const std::string big = big_body();
  const std::vector<framing> rows{
      {"Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello"},
      {"Content-Length 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", ""},
      {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
       "hello world"},
      {"chunked with trailer",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: t\r\n\r\n", "ok"},
      {"close-delimited, HTTP/1.1", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nclose-delimited body",
       "close-delimited body"},
      {"close-delimited, HTTP/1.0", "HTTP/1.0 200 OK\r\n\r\nhello close-delimited body",
       "hello close-delimited body"},
      {"close-delimited, empty body", "HTTP/1.0 200 OK\r\n\r\n", ""},
      {"close-delimited, 1 MiB", "HTTP/1.1 200 OK\r\n\r\n" + big, big},
      {"HTTP/1.0 with Content-Length", "HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\n1.0!", "1.0!"},
      {"Content-Length, 3 MiB (several splices)",
       "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(3 * big.size()) + "\r\n\r\n" + big + big + big,
       big + big + big},
      {"HEAD (Content-Length without a body)", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", "", true},
      {"HEAD, close-delimited head", "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n", "", true},
      {"1xx interim responses before the final one",
       "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
       "ok"},
      {"1xx then close-delimited", "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\n\r\nafter interim",
       "after interim"},
      {"204 No Content", "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", ""},
      {"304 Not Modified", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", ""},
  };
  int n = 0;
  for (const auto& row : rows) {
    INFO(row.name);
    scripted_upstream up(row.response);
    std::vector<std::string> args{"-x", http_proxy_url(e)};
    if (row.head_request) args.push_back("-I");
    args.push_back("http://allowed.test:" + port_of(up) + "/" + std::to_string(n));
    auto r = curl(args);
    INFO(r.describe().substr(0, 2000));
    CHECK(r.exit_code() == 0);
    if (row.head_request) {
      CHECK(r.http_code == 200);
    } else {
      CHECK(r.body == row.body);
      CHECK(r.http_code == std::stoi(row.response.substr(row.response.rfind("HTTP/1.") + 9, 3)));
    }
    CHECK(up.accepts() == 1);
    CHECK(e.alive());
    CHECK(by.relays(std::to_string(n++)));
  }
  CHECK(by.relays("end"));
  CHECK(e.alive());
}

TEST_CASE("N8: a close-delimited response is relayed to EOF on a raw connection and egressd keeps serving",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  for (const std::string& version : {std::string("HTTP/1.0"), std::string("HTTP/1.1")}) {
    INFO(version);
    scripted_upstream up(version + " 200 OK\r\n\r\nhello close-delimited body");
    auto fd = tcp_connect(e.http_port());
    // The client asks for keep-alive; a response without framing still ends the connection.
    send_all(fd.get(), "GET http://allowed.test:" + port_of(up) + "/ HTTP/1.1\r\nHost: allowed.test:" + port_of(up) +
                           "\r\n\r\n");
    auto r = read_response(fd.get());
    INFO(r.raw);
    CHECK(r.status == 200);
    CHECK(r.header("connection") == "close");
    CHECK(r.header("content-length").empty());
    CHECK(r.body == "hello close-delimited body");
    CHECK(r.closed);
    REQUIRE(up.requests().size() == 1);
    CHECK(up.requests()[0].rfind("GET / HTTP/1.1\r\n", 0) == 0);
    CHECK(by.relays(version));
  }
  // Keep-alive after a framed response still works on the same connection.
  scripted_upstream framed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  auto fd = tcp_connect(e.http_port());
  for (int i = 0; i < 2; ++i) {
    send_all(fd.get(), "GET http://allowed.test:" + port_of(framed) + "/k HTTP/1.1\r\nHost: allowed.test:" +
                           port_of(framed) + "\r\n\r\n");
    auto r = read_response(fd.get());
    CHECK(r.status == 200);
    CHECK(r.body == "ok");
  }
  CHECK(framed.accepts() == 2);
  CHECK(by.relays("keep-alive"));
  CHECK(e.alive());
}

TEST_CASE("N8: a request whose Connection header names Content-Length or Transfer-Encoding is refused with 400 and "
          "the upstream never sees a second request",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  // A server that keeps parsing after the first request: what egressd would
  // have left unframed arrives as a request of its own.
  scripted_upstream up("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", scripted_upstream::after::keep_reading);
  std::string p = port_of(up);
  std::string target = "http://allowed.test:" + p + "/first";
  std::string host = "Host: allowed.test:" + p + "\r\n";
  std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n";
  std::string chunk = [&] {
    char size[16];
    std::snprintf(size, sizeof size, "%zx", smuggled.size());
    return std::string(size) + "\r\n" + smuggled + "\r\n0\r\n\r\n";
  }();
  struct row {
    std::string name, bytes;
  };
  std::vector<row> rows{
      {"Connection: Content-Length", "POST " + target + " HTTP/1.1\r\n" + host + "Connection: Content-Length\r\n" +
                                         "Content-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled},
      {"Connection: keep-alive, content-length (case, list)",
       "POST " + target + " HTTP/1.1\r\n" + host + "Content-Length: " + std::to_string(smuggled.size()) +
           "\r\nConnection: keep-alive,  content-LENGTH\r\n\r\n" + smuggled},
      {"Connection: Transfer-Encoding", "POST " + target + " HTTP/1.1\r\n" + host +
                                            "Transfer-Encoding: chunked\r\nConnection: Transfer-Encoding\r\n\r\n" +
                                            chunk},
      {"Proxy-Connection: Content-Length", "POST " + target + " HTTP/1.1\r\n" + host +
                                               "Proxy-Connection: Content-Length\r\nContent-Length: " +
                                               std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled},
  };
  for (const auto& r : rows) {
    INFO(r.name);
    auto fd = tcp_connect(e.http_port());
    send_all(fd.get(), r.bytes);
    auto resp = read_response(fd.get(), true);
    INFO(resp.raw);
    CHECK(resp.status == 400);
    CHECK(!resp.header("x-ccsb-error").empty());
    CHECK(peer_closes(fd.get()));
  }
  auto reqs = up.requests();
  INFO([&] {
    std::string all;
    for (const auto& q : reqs) all += "---\n" + q;
    return all;
  }());
  CHECK(up.accepts() == 0);
  for (const auto& q : reqs) CHECK(q.find("/smuggled") == std::string::npos);
  CHECK(reqs.size() <= 1);
  // A plain request through the same upstream still works: one request, one answer.
  auto ok = curl({"-x", http_proxy_url(e), "http://allowed.test:" + p + "/plain"});
  INFO(ok.describe());
  CHECK(ok.http_code == 200);
  CHECK(ok.body == "ok");
  CHECK(up.requests().size() == 1);
  CHECK(by.relays("after"));
}

TEST_CASE("N8: a response whose Connection header names Content-Length or Transfer-Encoding is refused with 502",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  const std::string second = "HTTP/1.1 200 OK\r\nX-Smuggled: 1\r\nContent-Length: 0\r\n\r\n";
  struct row {
    std::string name, response;
  };
  std::vector<row> rows{
      {"Connection: Content-Length",
       "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello" + second},
      {"Connection: Transfer-Encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close, "
                                        "transfer-encoding\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
                                            second},
  };
  for (const auto& r : rows) {
    INFO(r.name);
    scripted_upstream up(r.response);
    auto fd = tcp_connect(e.http_port());
    // Keep-alive from the client: an unframed response would leave the
    // second one to be read as the answer to a next request.
    send_all(fd.get(), "GET http://allowed.test:" + port_of(up) + "/ HTTP/1.1\r\nHost: allowed.test:" + port_of(up) +
                           "\r\n\r\n");
    auto resp = read_response(fd.get(), true);
    INFO(resp.raw);
    CHECK(resp.status == 502);
    CHECK(!resp.header("x-ccsb-error").empty());
    auto rest = recv_to_eof(fd.get());
    INFO(rest.data);
    CHECK(rest.data.find("hello") == std::string::npos);
    CHECK(rest.data.find("X-Smuggled") == std::string::npos);
    CHECK((rest.eof || rest.reset));
    CHECK(up.accepts() == 1);
    CHECK(by.relays(r.name));
  }
  CHECK(e.alive());
}

// A Content-Length body is moved with splice(2), each call asking for at most
// what is left of it (egressd/relay.hpp, splice_exact): bytes past the body
// belong to the next message. Request side: a request pipelined right behind
// a body is parsed and decided on its own, never forwarded inside the first
// one (allowed: it reaches its own upstream; not allowlisted: refused).
// Response side: bytes an upstream sends past its Content-Length never reach
// the client, whose next response on the connection is the next upstream's.
TEST_CASE("N8: a Content-Length body is relayed exactly, in both directions, and what follows it is a message of its own",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  // Larger than any read of a message head, so most of each body moves by
  // splice, not through the parse buffer.
  std::string body;
  for (int i = 0; body.size() < (256u << 10); ++i) body += "body-" + std::to_string(i) + ";";
  const std::string big = body + body;
  auto post = [&](const std::string& port) {
    return "POST http://allowed.test:" + port + "/a HTTP/1.1\r\nHost: allowed.test:" + port +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  auto get = [](const std::string& host, const std::string& port) {
    return "GET http://" + host + ":" + port + "/b HTTP/1.1\r\nHost: " + host + ":" + port + "\r\n\r\n";
  };
  auto body_only = [&](const scripted_upstream& up) {
    REQUIRE(up.requests().size() == 1);
    const std::string got = up.requests()[0];
    CHECK(got.size() >= body.size());
    CHECK(got.substr(got.size() - body.size()) == body);
    CHECK(got.find("GET ") == std::string::npos);
  };
  {
    scripted_upstream first("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(big.size()) + "\r\n\r\n" + big +
                            "HTTP/1.1 200 OK\r\n\r\nSMUGGLED");
    scripted_upstream second("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbbb");
    auto fd = tcp_connect(e.http_port());
    REQUIRE(send_all(fd.get(), post(port_of(first)) + get("allowed.test", port_of(second))));
    auto r1 = read_response(fd.get());
    INFO(r1.raw.substr(0, 300));
    CHECK(r1.status == 200);
    CHECK(r1.body == big);
    auto r2 = read_response(fd.get());
    INFO(r2.raw);
    CHECK(r2.status == 200);
    CHECK(r2.body == "bbb");
    CHECK(r2.raw.find("SMUGGLED") == std::string::npos);
    body_only(first);
    CHECK(second.requests().size() == 1);
  }
  {
    scripted_upstream first("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    auto fd = tcp_connect(e.http_port());
    REQUIRE(send_all(fd.get(), post(port_of(first)) + get("other.test", port_of(first))));
    auto r1 = read_response(fd.get());
    INFO(r1.raw);
    CHECK(r1.body == "ok");
    auto r2 = read_response(fd.get());
    INFO(r2.raw);
    CHECK(r2.status == 403);
    CHECK(e.wait_violation("other.test:" + port_of(first)));
    body_only(first);
  }
  CHECK(by.relays("after"));
  CHECK(e.alive());
}

TEST_CASE("N8: an upstream that answers 413 and closes without reading the upload: the absolute-form client gets "
          "the 413 (RFC 9112 9.5)",
          "[N8][egressd]") {
  // The upstream reads the request head only, answers, and closes with the
  // body unread (the kernel then resets the connection).
  isolate_network();
  unique_fd lfd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  REQUIRE(::bind(lfd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(lfd.get(), 16) == 0);
  socklen_t len = sizeof sa;
  ::getsockname(lfd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  const uint16_t port = ntohs(sa.sin_port);
  std::atomic<int> served{0};
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {
      pollfd p{lfd.get(), POLLIN, 0};
      if (::poll(&p, 1, kWaitMs) <= 0) return;
      unique_fd fd(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
      send_all(fd.get(), "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 10\r\nConnection: close\r\n\r\ntoo large\n");
      ++served;
    } // closed with the upload unread
  });
  upstream echo(upstream::mode::echo);
  egressd e(std_args());
  bystander by(e, echo);
  for (bool chunked : {false, true}) {
    INFO((chunked ? "chunked" : "Content-Length 64 MiB") << " upload");
    auto fd = tcp_connect(e.http_port());
    std::string head = "PUT http://allowed.test:" + std::to_string(port) + "/upload HTTP/1.1\r\nHost: allowed.test\r\n" +
                       (chunked ? std::string("Transfer-Encoding: chunked\r\n") : std::string("Content-Length: 67108864\r\n")) +
                       "\r\n";
    REQUIRE(send_all(fd.get(), head));
    std::atomic<bool> stop{false};
    std::thread uploader([&] {
      std::string chunk(65536, 'u');
      if (chunked) chunk = "10000\r\n" + chunk + "\r\n";
      for (int i = 0; i < 1024 && !stop; ++i)
        if (!send_all(fd.get(), chunk)) break;
    });
    auto r = read_response(fd.get());
    stop = true;
    uploader.join();
    INFO(r.raw);
    CHECK(r.status == 413);
    CHECK(r.body == "too large\n");
    CHECK(r.header("connection") == "close");
  }
  server.join();
  CHECK(served == 2);
  CHECK(by.relays("after-413"));
  CHECK(e.alive());
}
