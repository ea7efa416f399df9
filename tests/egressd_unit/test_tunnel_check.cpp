// The ClientHello reader and the tunnel inspector (N8: the TLS server name
// and the first HTTP request of a tunnel must name the checked target),
// sans-I/O: hellos built here byte by byte, split across records and calls.
#include "tls_client_hello.hpp"
#include "tunnel_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

using namespace egressd;

namespace {

std::string u16(std::size_t v) { return {static_cast<char>(v >> 8 & 0xff), static_cast<char>(v & 0xff)}; }
std::string u24(std::size_t v) { return static_cast<char>(v >> 16 & 0xff) + u16(v); }

std::string ext(std::uint16_t type, const std::string& data) { return u16(type) + u16(data.size()) + data; }
std::string sni(const std::string& name) {
  std::string entry = std::string(1, '\0') + u16(name.size()) + name;
  return ext(0, u16(entry.size()) + entry);
}
std::string ech_outer() { return ext(0xfe0d, std::string("\x00\x00\x01\x00\x01\x01\x00\x00\x00\x02" "ab", 12)); }

// A ClientHello handshake message with these extensions (none: no block).
std::string hello_msg(const std::vector<std::string>& exts, bool with_block = true) {
  std::string body = "\x03\x03" + std::string(32, 'r') + std::string(1, '\x20') + std::string(32, 's');
  body += u16(4) + std::string("\x13\x01\x13\x02", 4);
  body += std::string("\x01\x00", 2);
  if (with_block) {
    std::string e;
    for (const auto& x : exts) e += x;
    body += u16(e.size()) + e;
  }
  return std::string(1, '\x01') + u24(body.size()) + body;
}

// The message in handshake records of at most `frag` bytes each.
std::string records(const std::string& msg, std::size_t frag = 16384) {
  std::string out;
  for (std::size_t i = 0; i < msg.size(); i += frag) {
    std::string f = msg.substr(i, frag);
    out += std::string("\x16\x03\x01", 3) + u16(f.size()) + f;
  }
  return out;
}

const ccsb::egress_policy& policy() {
  static const ccsb::egress_policy p = [] {
    ccsb::egress_rules rules;
    rules.allow = {"allowed.test", "other.allowed.test"};
    rules.baseline = false;
    return std::move(*ccsb::egress_policy::compile(rules));
  }();
  return p;
}

// Feeds the stream in pieces of `piece` bytes; returns the last step.
tunnel_inspector::step inspect(const std::string& target, const std::string& stream, std::size_t piece = 0,
                               std::uint16_t port = 443) {
  auto h = ccsb::parse_host(target);
  REQUIRE(h);
  tunnel_inspector insp(*h, port, policy());
  if (piece == 0) return insp.feed(stream);
  tunnel_inspector::step s;
  for (std::size_t have = std::min(piece, stream.size());; have = std::min(have + piece, stream.size())) {
    s = insp.feed(std::string_view(stream).substr(0, have));
    if (s.v != tunnel_inspector::verdict::need_more || have == stream.size()) return s;
  }
}

} // namespace

TEST_CASE("N8: the ClientHello reader finds the server name in one record, in many records, and byte by byte",
          "[N8][tls]") {
  std::string msg = hello_msg({ext(10, u16(2) + u16(29)), sni("Allowed.Test"), ext(43, "\x02\x03\x04")});
  for (std::size_t frag : {std::size_t{16384}, std::size_t{100}, std::size_t{7}, std::size_t{1}}) {
    INFO("record size " << frag);
    std::string s = records(msg, frag);
    auto r = tls::parse_client_hello(s);
    REQUIRE(r.st == tls::status::hello);
    CHECK(r.has_server_name);
    CHECK(r.server_name == "Allowed.Test");
    CHECK(!r.ech);
    CHECK(r.consumed == s.size());
    // Every proper prefix asks for more, and says how much.
    for (std::size_t n = 0; n < s.size(); n += 13) {
      auto p = tls::parse_client_hello(std::string_view(s).substr(0, n));
      CHECK(p.st == tls::status::need_more);
      CHECK(p.need > n);
    }
  }
}

TEST_CASE("N8: the ClientHello reader reports no server name, ECH, non-TLS and every malformed hello",
          "[N8][tls]") {
  auto r = tls::parse_client_hello(records(hello_msg({ext(10, u16(2) + u16(29))})));
  CHECK(r.st == tls::status::hello);
  CHECK(!r.has_server_name);
  r = tls::parse_client_hello(records(hello_msg({}, false)));
  CHECK(r.st == tls::status::hello); // a TLS 1.2 hello without an extension block
  CHECK(!r.has_server_name);
  r = tls::parse_client_hello(records(hello_msg({sni("public.example"), ech_outer()})));
  CHECK(r.st == tls::status::hello);
  CHECK(r.ech);
  CHECK(r.server_name == "public.example");

  CHECK(tls::parse_client_hello("GET / HTTP/1.1\r\n").st == tls::status::not_tls);
  CHECK(tls::parse_client_hello("SSH-2.0-x\r\n").st == tls::status::not_tls);

  struct bad_case {
    std::string name, bytes, reason;
  };
  std::string good = records(hello_msg({sni("a.test")}));
  std::vector<bad_case> bad{
      {"two SNI extensions", records(hello_msg({sni("a.test"), sni("b.test")})), "duplicate_extension"},
      {"two host names in one list", records(hello_msg({ext(0, u16(14) + std::string(1, '\0') + u16(4) + "a.te" +
                                                                    std::string(1, '\0') + u16(4) + "b.te")})),
       "two_server_names"},
      {"an empty host name", records(hello_msg({ext(0, u16(3) + std::string(1, '\0') + u16(0))})), "empty_server_name"},
      {"a list length that does not add up", records(hello_msg({ext(0, u16(9) + std::string(1, '\0') + u16(4) + "a.te")})),
       "bad_server_name_list"},
      {"a server hello", records("\x02" + hello_msg({}).substr(1)), "not_a_client_hello"},
      {"an alert record first", "\x16\x03\x01" + u16(2) +
                                    std::string("\x01\x00", 2) + std::string("\x15\x03\x03\x00\x02\x02\x28", 7),
       "record_before_client_hello_ends"},
      {"bytes after the hello in its record", records(hello_msg({sni("a.test")}) + "xyz"), "data_after_client_hello"},
      {"an empty record", std::string("\x16\x03\x01\x00\x00", 5) + good, "bad_record_length"},
      {"record version 4.0", "\x16\x04\x00" + good.substr(3), "bad_record_version"},
      {"a hello over the limit", records(hello_msg({ext(21, std::string(20000, '\0'))})), "client_hello_too_large"},
      {"a record header naming more than the limit", "\x16\x03\x01" + u16(16384) + std::string(10, 'x'),
       "client_hello_too_large"},
  };
  for (const auto& b : bad) {
    INFO(b.name);
    auto x = tls::parse_client_hello(b.bytes);
    CHECK(x.st == tls::status::bad);
    CHECK(x.reason == b.reason);
  }
}

TEST_CASE("N8: the tunnel inspector passes a server name equal to the checked name and refuses any other",
          "[N8][tls]") {
  std::string ok = records(hello_msg({sni("ALLOWED.test.")}), 50);
  std::string evil = records(hello_msg({sni("evil.test")}), 50);
  for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{33}}) {
    INFO("pieces of " << piece);
    auto s = inspect("allowed.test", ok + "after", piece);
    CHECK(s.v == tunnel_inspector::verdict::pass);
    s = inspect("allowed.test", evil, piece);
    CHECK(s.v == tunnel_inspector::verdict::refuse);
    CHECK(s.reason == "tls_server_name_mismatch: evil.test");
    // Until the hello is complete nothing is released.
    s = inspect("allowed.test", evil.substr(0, evil.size() - 1), piece);
    CHECK(s.v == tunnel_inspector::verdict::need_more);
    CHECK(s.release == 0);
  }
  // Another allowed name is still another site: refused.
  CHECK(inspect("allowed.test", records(hello_msg({sni("other.allowed.test")}))).v ==
        tunnel_inspector::verdict::refuse);
  // No server name: the front end's default site; passes.
  CHECK(inspect("allowed.test", records(hello_msg({}))).v == tunnel_inspector::verdict::pass);
  // ECH: the outer name is what is checked.
  CHECK(inspect("allowed.test", records(hello_msg({sni("allowed.test"), ech_outer()}))).v ==
        tunnel_inspector::verdict::pass);
  CHECK(inspect("allowed.test", records(hello_msg({sni("public.example"), ech_outer()}))).v ==
        tunnel_inspector::verdict::refuse);
  // A malformed hello fails closed.
  auto s = inspect("allowed.test", records(hello_msg({sni("a.test"), sni("b.test")})));
  CHECK(s.v == tunnel_inspector::verdict::refuse);
  CHECK(s.reason == "tls_client_hello_duplicate_extension");
  s = inspect("allowed.test", records(hello_msg({ext(21, std::string(20000, '\0'))})));
  CHECK(s.reason == "tls_client_hello_client_hello_too_large");
  s = inspect("allowed.test", records(hello_msg({sni("bad name")})));
  CHECK(s.v == tunnel_inspector::verdict::refuse);
  CHECK(s.reason.rfind("tls_server_name_malformed", 0) == 0);
}

TEST_CASE("N8: a tunnel to an IP literal takes no server name, the literal itself, or a name the allowlist allows",
          "[N8][tls]") {
  CHECK(inspect("127.0.0.1", records(hello_msg({}))).v == tunnel_inspector::verdict::pass);
  CHECK(inspect("127.0.0.1", records(hello_msg({sni("other.allowed.test")}))).v == tunnel_inspector::verdict::pass);
  auto s = inspect("127.0.0.1", records(hello_msg({sni("evil.test")})));
  CHECK(s.v == tunnel_inspector::verdict::refuse);
  CHECK(s.reason == "tls_server_name_mismatch: evil.test");
}

TEST_CASE("N8: the tunnel inspector checks a plain HTTP request's target and Host, and passes other "
          "protocols unchanged",
          "[N8][tls]") {
  using v = tunnel_inspector::verdict;
  struct row {
    std::string name, bytes;
    v expect;
    std::string reason;
  };
  std::vector<row> rows{
      {"origin-form with the checked Host", "GET /x HTTP/1.1\r\nHost: allowed.test\r\nAccept: */*\r\n\r\n", v::need_more, ""},
      {"Host with the tunnel's port", "GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", v::need_more, ""},
      {"Host naming another site", "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", v::refuse,
       "http_host_mismatch: evil.test"},
      {"Host with another port", "GET / HTTP/1.1\r\nhost: allowed.test:81\r\n\r\n", v::refuse,
       "http_host_mismatch: allowed.test:81"},
      {"two Host headers", "GET / HTTP/1.1\r\nHost: allowed.test\r\nhost: allowed.test\r\n\r\n", v::refuse,
       "two_host_headers_in_tunnel"},
      {"whitespace before the colon", "GET / HTTP/1.1\r\nHost : allowed.test\r\n\r\n", v::refuse,
       "bad_header_name_in_tunnel"},
      {"absolute-form naming another site", "GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", v::refuse,
       "http_target_mismatch: http://evil.test/"},
      {"bare LF line ends", "\r\nGET / HTTP/1.0\nHost: evil.test\n\n", v::refuse, "http_host_mismatch: evil.test"},
      {"obs-fold", "GET / HTTP/1.1\r\nX: y\r\n evil\r\n\r\n", v::refuse, "obs_fold_in_tunnel"},
      {"bare CR", "GET / HTTP/1.1\r\nHost: allowed.test\rHost: evil.test\r\n\r\n", v::refuse, "bare_cr_in_tunnel"},
      {"HTTP/2 prior knowledge", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", v::refuse, "http2_in_tunnel"},
      {"an unknown HTTP version", "GET / HTTP/1.7\r\nHost: evil.test\r\n\r\n", v::refuse,
       "http_version_in_tunnel: 1.7"},
      {"an ssh banner", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", v::pass, ""},
      {"binary", std::string("\x00\x01\x02 GET", 7), v::pass, ""},
      {"IRC", "USER guest 0 * :Guest\r\nNICK x\r\n", v::pass, ""},
      {"a stream of letters", std::string(40000, 'a'), v::pass, ""},
  };
  for (const auto& r : rows) {
    for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
      INFO(r.name << ", pieces of " << piece);
      auto s = inspect("allowed.test", r.bytes, piece, 8080);
      CHECK(s.v == r.expect);
      CHECK(s.reason == r.reason);
    }
  }
  // A word with no line end is never held: an echo client waits for it.
  auto s = inspect("allowed.test", "ping", 0, 8080);
  CHECK(s.v == v::need_more);
  CHECK(s.release == 4);
  // An absolute-form target is held until its request line is complete.
  s = inspect("allowed.test", "GET http://evil.test/ HT", 0, 8080);
  CHECK(s.v == v::need_more);
  CHECK(s.release == 4);
  // A head that does not end within the bound is refused.
  s = inspect("allowed.test", "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a'), 0, 8080);
  CHECK(s.v == v::refuse);
  CHECK(s.reason == "tunnel_head_too_large");
}

TEST_CASE("N8: every request of a plain-HTTP tunnel is read: a pipelined request naming another host is refused, "
          "bodies are framed by Content-Length and chunked, and framing a server could read otherwise is refused",
          "[N8][tls]") {
  using v = tunnel_inspector::verdict;
  const std::string ok = "GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  const std::string evil = "GET /b HTTP/1.1\r\nHost: evil.test\r\n\r\n";
  const std::string evil_abs = "GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  const std::string evil_len = std::to_string(evil.size());
  struct row {
    std::string name, bytes;
    v expect;
    std::string reason;
  };
  std::vector<row> rows{
      {"two requests to the checked host", ok + ok, v::need_more, ""},
      {"a pipelined Host: evil", ok + evil, v::refuse, "http_host_mismatch: evil.test"},
      {"a pipelined absolute-form target", ok + evil_abs, v::refuse, "http_target_mismatch: http://evil.test/"},
      {"a third request after empty lines", ok + ok + "\r\n\r\n" + evil, v::refuse, "http_host_mismatch: evil.test"},
      {"a Content-Length body that reads like a request is body",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: " + evil_len + "\r\n\r\n" + evil + ok, v::need_more,
       ""},
      {"a request after a Content-Length body",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 3\r\n\r\nabc" + evil, v::refuse,
       "http_host_mismatch: evil.test"},
      {"a request after a chunked body",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHost:\r\n0\r\nX: y\r\n\r\n" + evil,
       v::refuse, "http_host_mismatch: evil.test"},
      {"a chunked body that reads like a request is body",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: Chunked\r\n\r\n" +
           [&] {
             std::ostringstream o;
             o << std::hex << evil.size();
             return o.str();
           }() +
           "\r\n" + evil + "\r\n0\r\n\r\n" + ok,
       v::need_more, ""},
      {"Content-Length and Transfer-Encoding",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + evil,
       v::refuse, "content_length_and_transfer_encoding_in_tunnel"},
      {"Transfer-Encoding and Content-Length",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", v::refuse,
       "content_length_and_transfer_encoding_in_tunnel"},
      {"chunked in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nHost: evil.test\r\n\r\n",
       v::refuse, "transfer_encoding_in_http10_in_tunnel"},
      {"a coding other than chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", v::refuse,
       "transfer_encoding_in_tunnel"},
      {"two Transfer-Encoding", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
       v::refuse, "two_transfer_encodings_in_tunnel"},
      {"two Content-Length", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", v::refuse,
       "two_content_lengths_in_tunnel"},
      {"a Content-Length list", "POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc", v::refuse,
       "bad_content_length_in_tunnel"},
      {"a signed Content-Length", "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc", v::refuse,
       "bad_content_length_in_tunnel"},
      {"Connection naming the framing", "POST / HTTP/1.1\r\nConnection: keep-alive, Content-Length\r\n\r\n", v::refuse,
       "connection_names_framing_in_tunnel"},
      {"a framing field with whitespace before the colon",
       "POST / HTTP/1.1\r\nContent-Length : " + evil_len + "\r\n\r\n" + evil, v::refuse, "bad_header_name_in_tunnel"},
      {"a header line without a colon", "GET / HTTP/1.1\r\nHost allowed.test\r\n\r\n", v::refuse,
       "bad_header_line_in_tunnel"},
      {"a broken chunk", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", v::refuse,
       "bad_chunk_in_tunnel: bad_chunk_size"},
      {"an Expect body that starts like a request line",
       "POST / HTTP/1.1\r\nHost: allowed.test\r\nExpect: 100-continue\r\nContent-Length: " + evil_len + "\r\n\r\n" + evil,
       v::refuse, "request_line_in_expect_body_in_tunnel"},
      {"an Expect body behind empty lines",
       "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(evil.size() + 2) +
           "\r\n\r\n\r\n" + evil,
       v::refuse, "request_line_in_expect_body_in_tunnel"},
      {"an Expect body of JSON", "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n{\"a\": \"b\"}\n" + ok,
       v::need_more, ""},
      {"an Expect body of one word", "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello" + ok,
       v::need_more, ""},
      {"binary after a request", ok + std::string("\x81\x85\x01\x02", 4), v::refuse,
       "not_http_after_request_in_tunnel"},
      {"a stream of letters after a request", ok + std::string(100, 'a'), v::refuse,
       "not_http_after_request_in_tunnel"},
      {"websocket frames after an Upgrade request",
       "GET /ws HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" +
           std::string("\x81\x85\x01\x02\x03\x04GET /", 11) + "\r\nHost: evil.test\r\n\r\n",
       v::pass, ""},
      {"an Upgrade the server declined, then Host: evil",
       "GET /ws HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + evil, v::refuse,
       "http_host_mismatch: evil.test"},
      {"h2c after an Upgrade", "GET / HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: h2c\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
       v::refuse, "http2_in_tunnel"},
      {"a CONNECT to the checked target, then its tunnel",
       "CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n" + std::string("\x16\x03\x01\x00\x05", 5),
       v::pass, ""},
      {"a CONNECT to another site", ok + "CONNECT evil.test:443 HTTP/1.1\r\n\r\n", v::refuse,
       "http_target_mismatch: evil.test:443"},
      {"a control byte in an origin-form target", "GET /\x01 HTTP/1.1\r\nHost: evil.test\r\n\r\n", v::refuse,
       "bad_request_line_in_tunnel"},
      {"HTTP/0.9", "GET /index.html\r\n", v::refuse, "bad_request_line_in_tunnel"},
  };
  for (const auto& r : rows) {
    for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      INFO(r.name << ", pieces of " << piece);
      auto s = inspect("allowed.test", r.bytes, piece, 8080);
      CHECK(s.v == r.expect);
      CHECK(s.reason == r.reason);
      if (s.v == v::need_more) CHECK(s.release == r.bytes.size());
    }
  }
  // A refusal in a later request releases the complete requests before it
  // (they still go upstream, and their answers come back); one in the first
  // request releases nothing.
  CHECK(inspect("allowed.test", ok + ok + evil, 0, 8080).release == 2 * ok.size());
  CHECK(inspect("allowed.test", ok + ok + evil, 1, 8080).release == 2 * ok.size());
  CHECK(inspect("allowed.test", evil + ok, 0, 8080).release == 0);
  // A body is not a head: no 16 KiB bound on it, read whole or in pieces,
  // and the empty lines an Expect body starts with are not held.
  const std::string big = "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'x') + ok;
  const std::string crlfs = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 40000\r\n\r\n";
  for (std::size_t piece : {std::size_t{0}, std::size_t{16384}, std::size_t{7}}) {
    INFO("pieces of " << piece);
    auto s = inspect("allowed.test", big, piece, 8080);
    CHECK(s.v == v::need_more);
    CHECK(s.release == big.size());
    auto e = inspect("allowed.test", crlfs + std::string(30000, '\n'), piece, 8080);
    CHECK(e.v == v::need_more);
    CHECK(e.release == crlfs.size() + 30000);
  }
}

TEST_CASE("N8: a long keep-alive plain-HTTP tunnel is read with a bounded buffer: drop() gives up every request "
          "read to its end, and a refusal in a later request still comes",
          "[N8][tls]") {
  using v = tunnel_inspector::verdict;
  auto h = ccsb::parse_host("allowed.test");
  REQUIRE(h);
  std::string stream;
  const std::string body(70000, 'x');
  for (int i = 0; i < 300; ++i) {
    stream += "POST /" + std::to_string(i) + " HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body;
    stream += "GET /" + std::to_string(i) + " HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  }
  stream += "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n";
  tunnel_inspector insp(*h, 8080, policy());
  std::string buf;
  std::size_t sent = 0, biggest = 0, at = 0;
  tunnel_inspector::step s;
  while (at < stream.size()) {
    const std::size_t n = std::min<std::size_t>(4093, stream.size() - at);
    buf.append(stream, at, n);
    at += n;
    biggest = std::max(biggest, buf.size());
    s = insp.feed(buf);
    if (s.v != v::need_more) break;
    sent = s.release;
    const std::size_t d = insp.drop(sent);
    buf.erase(0, d);
    sent -= d;
  }
  CHECK(s.v == v::refuse);
  CHECK(s.reason == "http_host_mismatch: evil.test");
  CHECK(insp.requests() == 600);
  CHECK(biggest < 3 * 4093);
}
