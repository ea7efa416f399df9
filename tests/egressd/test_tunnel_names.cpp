// N8: the name a tunnel's first bytes give a shared front end — the TLS
// server name of a ClientHello, the Host of a plain HTTP request — must be
// the target egressd checked (issue 30 item 2: domain fronting by SNI or by
// Host through an allowed address). Real clients (curl, python's ssl,
// openssl) against real loopback upstreams.
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace etest;

namespace {

std::string port_text(uint16_t p) { return std::to_string(p); }

// python's ssl module as a client that tunnels through CONNECT (or SOCKS5
// when argv[6] is "socks5"), sends its ClientHello re-cut into TLS records
// of `frag` bytes, each record split into TCP segments of 7 bytes, then
// finishes the handshake and fetches "/" from openssl s_server -www.
// Prints "response-ok" when the page came back, "tls-error ..." or
// "closed ..." otherwise.
const char* kSplitHelloClient = R"PY(
import socket, ssl, sys, time
port, target, sni, frag, cafile, how = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
s = socket.create_connection(('127.0.0.1', port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
host, tport = target.rsplit(':', 1)
if how == 'socks5':
    s.sendall(b'\x05\x01\x00')
    assert s.recv(2) == b'\x05\x00'
    s.sendall(b'\x05\x01\x00\x03' + bytes([len(host)]) + host.encode() + int(tport).to_bytes(2, 'big'))
    rep = b''
    while len(rep) < 10:
        d = s.recv(10 - len(rep))
        if not d: print('closed at the socks reply'); sys.exit(3)
        rep += d
    if rep[1] != 0: print('socks refused', rep[1]); sys.exit(4)
else:
    s.sendall(('CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' % (target, target)).encode())
    head = b''
    while b'\r\n\r\n' not in head:
        d = s.recv(1)
        if not d: print('closed at the connect reply'); sys.exit(3)
        head += d
    if b' 200 ' not in head.split(b'\r\n')[0]: print('connect refused', head); sys.exit(4)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(cafile)
ctx.check_hostname = False
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname=sni)
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
assert hello[0] == 22 and len(hello) == 5 + int.from_bytes(hello[3:5], 'big')
body = hello[5:]
recs = b''.join(b'\x16\x03\x01' + len(body[i:i + frag]).to_bytes(2, 'big') + body[i:i + frag]
               for i in range(0, len(body), frag))
print('records', (len(body) + frag - 1) // frag, flush=True)
for i in range(0, len(recs), 7):
    s.sendall(recs[i:i + 7])
    time.sleep(0.0005)
def pump():
    o = out.read()
    if o: s.sendall(o)
    d = s.recv(65536)
    if not d: print('closed by the proxy'); sys.exit(5)
    inc.write(d)
while True:
    try:
        obj.do_handshake()
        break
    except ssl.SSLWantReadError:
        pump()
    except ssl.SSLError as e:
        print('tls-error', e); sys.exit(6)
obj.write(b'GET / HTTP/1.0\r\n\r\n')
s.sendall(out.read())
resp = b''
while True:
    try:
        d = obj.read(65536)
        if not d: break
        resp += d
    except ssl.SSLWantReadError:
        d = s.recv(65536)
        if not d: break
        inc.write(d)
    except ssl.SSLError:
        break
print('response-ok' if b's_server' in resp else 'response-missing %r' % resp[:200])
)PY";

run_result split_hello(const egressd& e, bool socks5, const std::string& target, const std::string& sni,
                       const tls_upstream& tls, int frag) {
  return run({find_tool("python3"), "-c", kSplitHelloClient,
              port_text(socks5 ? e.socks_port() : e.http_port()), target, sni, std::to_string(frag), tls.cert(),
              socks5 ? "socks5" : "connect"});
}

} // namespace

TEST_CASE("N8: a CONNECT tunnel whose TLS server name is another site is refused and reported naming both",
          "[N8][N7][egressd]") {
  tls_upstream tls;
  egressd e(std_args());
  std::string target = "allowed.test:" + port_text(tls.port());
  // Domain fronting as curl does it: CONNECT to the allowed name, SNI evil.test.
  auto r = curl({"-x", http_proxy_url(e), "-k", "--connect-to", "evil.test:443:" + target, "https://evil.test/"});
  INFO(r.describe());
  CHECK(r.exit_code() != 0);
  CHECK(r.connect_code == 200);
  CHECK(r.body.find("s_server") == std::string::npos);
  CHECK(r.run.err.find("unrecognized name") != std::string::npos); // egressd's TLS alert
  auto v = e.wait_violation(target);
  REQUIRE(v);
  CHECK(v->str("action") == "network-outbound");
  CHECK(v->str("reason") == "tls_server_name_mismatch: evil.test");
  // The same tunnel with the checked name (any case, one trailing dot) works.
  auto ok = curl({"-x", http_proxy_url(e), "--cacert", tls.cert(), "https://allowed.test:" + port_text(tls.port()) + "/"});
  INFO(ok.describe());
  CHECK(ok.exit_code() == 0);
  CHECK(ok.body.find("s_server") != std::string::npos);
  auto dot = curl({"-x", http_proxy_url(e), "-k", "--connect-to", "ALLOWED.test.:443:" + target, "https://ALLOWED.test./"});
  INFO(dot.describe());
  CHECK(dot.exit_code() == 0);
}

TEST_CASE("N8: a SOCKS5 connection whose TLS server name is another site is refused and reported naming both",
          "[N8][N7][egressd]") {
  tls_upstream tls;
  egressd e(std_args());
  std::string target = "allowed.test:" + port_text(tls.port());
  auto r = curl({"--socks5-hostname", socks_proxy(e), "-k", "--connect-to", "evil.test:443:" + target,
                 "https://evil.test/"});
  INFO(r.describe());
  CHECK(r.exit_code() != 0);
  CHECK(r.body.find("s_server") == std::string::npos);
  auto v = e.wait_violation(target);
  REQUIRE(v);
  CHECK(v->str("reason") == "tls_server_name_mismatch: evil.test");
  auto ok = curl({"--socks5-hostname", socks_proxy(e), "--cacert", tls.cert(), "https://" + target + "/"});
  INFO(ok.describe());
  CHECK(ok.exit_code() == 0);
  CHECK(ok.body.find("s_server") != std::string::npos);
}

TEST_CASE("N8: a ClientHello split across TLS records and TCP segments is read whole: the checked name passes, "
          "another is refused",
          "[N8][egressd]") {
  tls_upstream tls;
  egressd e(std_args());
  std::string target = "allowed.test:" + port_text(tls.port());
  for (bool socks5 : {false, true}) {
    for (int frag : {1, 50}) {
      INFO((socks5 ? "SOCKS5" : "CONNECT") << ", records of " << frag << " bytes");
      auto ok = split_hello(e, socks5, target, "allowed.test", tls, frag);
      INFO(ok.describe());
      CHECK(ok.out.find("response-ok") != std::string::npos);
      e.mark();
      auto bad = split_hello(e, socks5, target, "evil.test", tls, frag);
      INFO(bad.describe());
      CHECK(bad.out.find("response-ok") == std::string::npos);
      CHECK(bad.out.find("UNRECOGNIZED_NAME") != std::string::npos);
      auto v = e.wait_violation(target);
      REQUIRE(v);
      CHECK(v->str("reason") == "tls_server_name_mismatch: evil.test");
    }
  }
}

TEST_CASE("N8: a CONNECT to an IP literal takes no server name or an allowed one, and refuses any other",
          "[N8][N7][egressd]") {
  tls_upstream tls;
  egressd e(std_args({"--allow", "127.0.0.1"}));
  std::string target = "127.0.0.1:" + port_text(tls.port());
  auto plain = curl({"-x", http_proxy_url(e), "-k", "https://" + target + "/"}); // curl sends no SNI to an IP
  INFO(plain.describe());
  CHECK(plain.exit_code() == 0);
  auto named = curl({"-x", http_proxy_url(e), "-k", "--connect-to", "allowed.test:443:" + target,
                     "https://allowed.test/"});
  INFO(named.describe());
  CHECK(named.exit_code() == 0);
  auto evil = curl({"-x", http_proxy_url(e), "-k", "--connect-to", "evil.test:443:" + target, "https://evil.test/"});
  INFO(evil.describe());
  CHECK(evil.exit_code() != 0);
  auto v = e.wait_violation(target);
  REQUIRE(v);
  CHECK(v->str("reason") == "tls_server_name_mismatch: evil.test");
}

TEST_CASE("N8: plain HTTP through a CONNECT tunnel must name the checked host: Host: evil is refused with 403 and "
          "reported, and never reaches the upstream",
          "[N8][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  std::string target = "allowed.test:" + port_text(up.port());
  for (const std::string& head : std::vector<std::string>{"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                           "GET http://evil.test/ HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
                           "\r\nGET / HTTP/1.0\nHost: evil.test\n\n"}) {
    INFO(head);
    e.mark();
    auto fd = tcp_connect(e.http_port());
    REQUIRE(http_connect(fd.get(), target).status == 200);
    send_all(fd.get(), head);
    auto resp = read_response(fd.get());
    CHECK(resp.status == 403);
    CHECK(resp.header("x-ccsb-deny-reason").empty());
    CHECK(resp.body.find("mismatch") != std::string::npos);
    auto v = e.wait_violation(target);
    REQUIRE(v);
    CHECK(v->str("reason").find("evil.test") != std::string::npos);
  }
  CHECK(up.requests().empty());
  // The checked host passes (curl --proxytunnel sends Host: allowed.test:PORT).
  auto ok = curl({"-p", "-x", http_proxy_url(e), "http://" + target + "/tunnelled"});
  INFO(ok.describe());
  CHECK(ok.exit_code() == 0);
  CHECK(ok.body.find("upstream-ok GET /tunnelled") != std::string::npos);
  CHECK(up.requests().size() == 1);
}

TEST_CASE("N8: a tunnel that carries neither TLS nor HTTP passes byte for byte, a server that speaks first included",
          "[N8][egressd]") {
  upstream echo(upstream::mode::echo);
  upstream first(upstream::mode::shut_first);
  egressd e(std_args());
  // An echo client that sends a word and waits for it.
  auto fd = tcp_connect(e.http_port());
  REQUIRE(http_connect(fd.get(), "allowed.test:" + port_text(echo.port())).status == 200);
  for (const std::string& word : std::vector<std::string>{"ping", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", "x y z"}) {
    send_all(fd.get(), word);
    CHECK(recv_n(fd.get(), word.size()) == word);
  }
  std::string binary;
  for (int i = 0; i < 70000; ++i) binary += static_cast<char>(i * 7 % 256);
  binary[0] = '\x00';
  send_all(fd.get(), binary);
  CHECK(recv_n(fd.get(), binary.size()) == binary);
  // A server that speaks first is relayed before the client sends anything.
  auto s = tcp_connect(e.socks_port());
  auto rep = socks::connect_name(s.get(), "allowed.test", first.port());
  REQUIRE(rep.code == 0);
  CHECK(recv_n(s.get(), 4) == "bye\n");
}

TEST_CASE("N8: every request of a plain-HTTP CONNECT tunnel is checked: a pipelined or later request naming another "
          "host is refused, reported naming both, and never reaches the upstream",
          "[N8][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  const std::string target = "allowed.test:" + port_text(up.port());
  const std::string first = "GET /first HTTP/1.1\r\nHost: " + target + "\r\n\r\n";
  const std::string upload = "POST /upload HTTP/1.1\r\nHost: " + target + "\r\nContent-Length: 5\r\n\r\nHost:";
  struct variant {
    std::string name, before, evil, reason;
  };
  const std::vector<variant> variants{
      {"pipelined Host: evil", first, "GET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n", "evil.test"},
      {"pipelined absolute-form", first, "GET http://evil.test/evil HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
       "evil.test"},
      {"after a Content-Length body", upload, "GET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n", "evil.test"},
      {"a CONNECT to another site inside", first, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n",
       "evil.test:443"},
  };
  std::size_t seen = 0;
  for (const auto& v : variants) {
    for (bool pipelined : {true, false}) {
      INFO(v.name << (pipelined ? ", pipelined" : ", after the first answer"));
      e.mark();
      auto fd = tcp_connect(e.http_port());
      REQUIRE(http_connect(fd.get(), target).status == 200);
      if (pipelined) {
        send_all(fd.get(), v.before + v.evil);
      } else {
        send_all(fd.get(), v.before);
      }
      auto resp = read_response(fd.get());
      CHECK(resp.status == 200);
      CHECK(resp.body.find("upstream-ok") != std::string::npos);
      if (!pipelined) send_all(fd.get(), v.evil);
      auto v2 = e.wait_violation(target);
      REQUIRE(v2);
      CHECK(v2->str("target") == target);
      CHECK(v2->str("reason").find(v.reason) != std::string::npos);
      // Nothing more comes back: the tunnel is closed, no answer of the other site.
      auto rest = read_response(fd.get());
      CHECK(rest.status == -1);
      CHECK(rest.closed);
      seen += 1;
      auto reqs = up.requests();
      CHECK(reqs.size() == seen);
      for (const auto& r : reqs) CHECK(r.find("/evil") == std::string::npos);
    }
  }
  // The same through SOCKS5.
  {
    e.mark();
    auto s = tcp_connect(e.socks_port());
    REQUIRE(socks::connect_name(s.get(), "allowed.test", up.port()).code == 0);
    send_all(s.get(), first + variants[0].evil);
    auto resp = read_response(s.get());
    CHECK(resp.status == 200);
    auto v = e.wait_violation(target);
    REQUIRE(v);
    CHECK(v->str("reason") == "http_host_mismatch: evil.test");
    CHECK(read_response(s.get()).closed);
    seen += 1;
    CHECK(up.requests().size() == seen);
  }
  // Requests to the checked host on one tunnel, pipelined, one with a body
  // far over the 16 KiB head bound: all answered in order, the body intact.
  std::string body;
  for (int i = 0; i < 300000; ++i) body += static_cast<char>('a' + i % 26);
  const std::string big = "POST /big HTTP/1.1\r\nHost: " + target + "\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  const std::size_t before = up.requests().size();
  auto fd = tcp_connect(e.http_port());
  REQUIRE(http_connect(fd.get(), target).status == 200);
  send_all(fd.get(), "GET /one HTTP/1.1\r\nHost: " + target + "\r\n\r\n" + upload + big +
                         "GET /two HTTP/1.1\r\nHost: " + target + "\r\n\r\n");
  for (const std::string want : {"GET /one", "POST /upload", "POST /big", "GET /two"}) {
    auto r = read_response(fd.get());
    CHECK(r.status == 200);
    CHECK(r.body.find("upstream-ok " + want) != std::string::npos);
  }
  auto reqs = up.requests();
  REQUIRE(reqs.size() == before + 4);
  CHECK(reqs[before + 2].size() > body.size());
  CHECK(reqs[before + 2].substr(reqs[before + 2].size() - body.size()) == body);
}

TEST_CASE("N8: a request in a plain-HTTP tunnel that a server could frame two ways (Content-Length and "
          "Transfer-Encoding) is refused with 403 before its body goes upstream",
          "[N8][N7][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args());
  const std::string target = "allowed.test:" + port_text(up.port());
  const std::string hidden = "0\r\n\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n";
  const std::string n = std::to_string(hidden.size());
  for (const std::string& framing :
       std::vector<std::string>{"Content-Length: " + n + "\r\nTransfer-Encoding: chunked",
                                "Transfer-Encoding: chunked\r\nContent-Length: " + n,
                                "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity", "Content-Length : " + n}) {
    INFO(framing);
    e.mark();
    auto fd = tcp_connect(e.http_port());
    REQUIRE(http_connect(fd.get(), target).status == 200);
    send_all(fd.get(), "POST /smuggle HTTP/1.1\r\nHost: " + target + "\r\n" + framing + "\r\n\r\n" + hidden);
    auto resp = read_response(fd.get());
    CHECK(resp.status == 403);
    auto v = e.wait_violation(target);
    REQUIRE(v);
    CHECK(v->str("reason").find("_in_tunnel") != std::string::npos);
  }
  CHECK(up.requests().empty());
}

TEST_CASE("N8: curl --proxytunnel keeps one plain-HTTP tunnel alive for several requests to the checked host, and "
          "opens another for another allowed host",
          "[N8][egressd]") {
  upstream up(upstream::mode::http);
  egressd e(std_args({"--allow", "other.allowed.test", "--resolve", "other.allowed.test=127.0.0.1"}));
  const std::string p = port_text(up.port());
  e.mark();
  auto r = curl({"-p", "-x", http_proxy_url(e), "-v", "http://allowed.test:" + p + "/a",
                 "http://allowed.test:" + p + "/b", "http://other.allowed.test:" + p + "/c",
                 "http://allowed.test:" + p + "/d"});
  INFO(r.describe());
  CHECK(r.exit_code() == 0);
  for (const char* want : {"upstream-ok GET /a", "upstream-ok GET /b", "upstream-ok GET /c", "upstream-ok GET /d"})
    CHECK(r.body.find(want) != std::string::npos);
  CHECK(up.requests().size() == 4);
  CHECK(r.run.err.find("Re-using existing connection") != std::string::npos);
  CHECK(e.violations_since_mark() == 0);
}
