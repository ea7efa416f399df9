// Self-checks of the harness (no egressd): when an egressd test fails, these
// passing shows the failure is egressd's, not the peers'. Requirement N7/N8
// tests depend on these peers behaving as documented in support.hpp.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {
// One A query to the test DNS server; returns the dotted answers (empty on NXDOMAIN/none).
std::vector<std::string> query_a(uint16_t port, const std::string& name, int timeout_ms = 2000) {
  unique_fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  std::string q{'\x12', '\x34', '\x01', '\x00', '\x00', '\x01', '\x00', '\x00', '\x00', '\x00', '\x00', '\x00'};
  std::size_t start = 0;
  while (start <= name.size()) {
    auto dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    q += static_cast<char>(dot - start);
    q += name.substr(start, dot - start);
    start = dot + 1;
  }
  q += std::string{'\x00', '\x00', '\x01', '\x00', '\x01'};
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ::sendto(fd.get(), q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  pollfd p{fd.get(), POLLIN, 0};
  std::vector<std::string> out;
  if (::poll(&p, 1, timeout_ms) <= 0) {
    out.push_back("timeout");
    return out;
  }
  unsigned char r[1500];
  ssize_t n = ::recv(fd.get(), r, sizeof r, 0);
  if (n < static_cast<ssize_t>(q.size()) || r[0] != 0x12 || r[1] != 0x34) return out;
  int an = r[6] << 8 | r[7];
  std::size_t pos = q.size();
  for (int i = 0; i < an && pos + 16 <= static_cast<std::size_t>(n); ++i) {
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, r + pos + 12, buf, sizeof buf);
    out.emplace_back(buf);
    pos += 16;
  }
  return out;
}
} // namespace

TEST_CASE("N8: harness: the test runs in a network namespace with only loopback", "[N8][harness]") {
  isolate_network();
  // A non-loopback destination is unreachable (no route), so no packet leaves.
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(80);
  ::inet_pton(AF_INET, "169.254.169.254", &sa.sin_addr);
  CHECK(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0);
  CHECK(errno == ENETUNREACH);
}

TEST_CASE("N7: harness: upstreams count connections and answer curl directly", "[N7][harness]") {
  upstream up(upstream::mode::http);
  auto r = curl({"http://127.0.0.1:" + std::to_string(up.port()) + "/direct"});
  INFO(r.describe());
  CHECK(r.http_code == 200);
  CHECK(r.body == "upstream-ok GET /direct HTTP/1.1\n");
  CHECK(up.accepts() == 1);
  upstream echo(upstream::mode::echo);
  auto fd = tcp_connect(echo.port());
  send_all(fd.get(), "abc");
  CHECK(recv_n(fd.get(), 3) == "abc");
  upstream hc(upstream::mode::half_close);
  auto h = tcp_connect(hc.port());
  send_all(h.get(), "hello");
  ::shutdown(h.get(), SHUT_WR);
  CHECK(recv_to_eof(h.get()).data == "received 5 bytes\n");
}

TEST_CASE("N7: harness: the TLS upstream serves curl with the generated certificate", "[N7][harness]") {
  tls_upstream tls;
  auto r = curl({"--cacert", tls.cert(), "--resolve", "allowed.test:" + std::to_string(tls.port()) + ":127.0.0.1",
                 "https://allowed.test:" + std::to_string(tls.port()) + "/"});
  INFO(r.describe());
  CHECK(r.http_code == 200);
  CHECK(r.body.find("s_server") != std::string::npos);
}

TEST_CASE("N8: harness: the DNS server answers from its table and can stay silent", "[N8][harness]") {
  dns_server dns(std::map<std::string, std::vector<std::string>>{{"a.test", {"127.0.0.5", "169.254.169.254"}}});
  CHECK(query_a(dns.port(), "a.test") == std::vector<std::string>{"127.0.0.5", "169.254.169.254"});
  CHECK(query_a(dns.port(), "A.Test") == std::vector<std::string>{"127.0.0.5", "169.254.169.254"});
  CHECK(query_a(dns.port(), "nx.test").empty());
  dns_server quiet({}, true);
  CHECK(query_a(quiet.port(), "a.test", 300) == std::vector<std::string>{"timeout"});
  CHECK(quiet.queries() == 1);
}
