#include "http_parser.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace egressd::http;

namespace {
parse_result parse(std::string_view s, request_head& out, limits lim = {}) { return parse_request(s, lim, out); }
std::string_view why(const std::string& s, limits lim = {}) {
  request_head h;
  auto r = parse_request(s, lim, h);
  if (r.st != status::bad) return r.st == status::good ? "good" : "need_more";
  return r.reason;
}
} // namespace

TEST_CASE("N8: CONNECT authority-form parses host and port", "[N8]") {
  request_head h;
  std::string req = "CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nEARLY";
  auto r = parse(req, h);
  REQUIRE(r.st == status::good);
  CHECK(r.consumed == req.size() - 5);
  CHECK(h.is_connect);
  REQUIRE(h.target_authority.host);
  CHECK(h.target_authority.host->str() == "example.com");
  CHECK(h.target_authority.port == 443);

  r = parse("CONNECT [::1]:22 HTTP/1.1\r\nHost: [::1]:22\r\n\r\n", h);
  REQUIRE(r.st == status::good);
  CHECK(h.target_authority.host->str() == "::1");
}

TEST_CASE("N8: absolute-form request keeps path and query, defaults port 80", "[N8]") {
  request_head h;
  auto r = parse("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n", h);
  REQUIRE(r.st == status::good);
  CHECK_FALSE(h.is_connect);
  CHECK(h.path == "/a/b?c=d");
  CHECK(h.target_authority.port == 80);
  CHECK_FALSE(h.keep_alive);
  r = parse("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", h);
  REQUIRE(r.st == status::good);
  CHECK(h.path == "/");
  CHECK(h.keep_alive);
}

TEST_CASE("N8: a Host header that differs from the absolute-form target is replaced, not trusted", "[N8]") {
  request_head h;
  auto r = parse("GET http://allowed.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", h);
  REQUIRE(r.st == status::good);
  REQUIRE(h.target_authority.host);
  CHECK(h.target_authority.host->str() == "allowed.example"); // the checked target is the URL's
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a b\r\n\r\n") == "bad_host_header");
}

TEST_CASE("N8: obs-fold is rejected", "[N8]") {
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-A: 1\r\n  folded\r\n\r\n") == "obs_fold");
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-A: 1\r\n\tfolded\r\n\r\n") == "obs_fold");
}

TEST_CASE("N8: duplicate or missing Host is rejected", "[N8]") {
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n") == "duplicate_host");
  CHECK(why("GET http://a.example/ HTTP/1.1\r\n\r\n") == "missing_host");
  CHECK(why("CONNECT a.example:443 HTTP/1.1\r\n\r\n") == "missing_host");
  CHECK(why("GET http://a.example/ HTTP/1.0\r\n\r\n") == "good"); // Host is optional in 1.0
}

TEST_CASE("N8: Content-Length with Transfer-Encoding is rejected", "[N8]") {
  CHECK(why("POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n") ==
        "content_length_with_transfer_encoding");
  CHECK(why("POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n") ==
        "duplicate_content_length");
  CHECK(why("POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nContent-Length: +3\r\n\r\n") == "bad_content_length");
  CHECK(why("POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") ==
        "unsupported_transfer_encoding");
  CHECK(why("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\n") == "connect_with_body");
}

TEST_CASE("N8: userinfo in the target is rejected", "[N8]") {
  CHECK(why("CONNECT user@a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n") == "userinfo_in_target");
  CHECK(why("GET http://allowed.example@evil.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "userinfo_in_target");
}

TEST_CASE("N8: ports must be plain decimal 1-65535 without leading zeros", "[N8]") {
  for (const char* port : {"0", "080", "65536", "+80", "-1", "8a", "", " 80", "99999999999"}) {
    INFO(port);
    CHECK(why(std::string("CONNECT a.example:") + port + " HTTP/1.1\r\nHost: a.example\r\n\r\n") != "good");
  }
  CHECK(why("CONNECT a.example:080 HTTP/1.1\r\nHost: a.example\r\n\r\n") == "bad_port");
  CHECK(why("CONNECT a.example:65535 HTTP/1.1\r\nHost: a.example\r\n\r\n") == "good");
  CHECK(why("CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n") == "missing_port");
}

TEST_CASE("N8: an unbracketed IPv6 literal is rejected", "[N8]") {
  CHECK(why("CONNECT ::1:443 HTTP/1.1\r\nHost: a.example\r\n\r\n") == "unbracketed_ipv6");
  CHECK(why("GET http://::1/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "unbracketed_ipv6");
}

TEST_CASE("N8: line, head size and header count are capped", "[N8]") {
  limits lim;
  lim.max_line = 100;
  lim.max_head = 400;
  lim.max_headers = 5;
  std::string long_line = "GET http://a.example/" + std::string(200, 'a') + " HTTP/1.1\r\nHost: a.example\r\n\r\n";
  CHECK(why(long_line, lim) == "header_too_large");
  // Overlong even before the line ends: no need to wait for the rest.
  CHECK(why("GET http://a.example/" + std::string(200, 'a'), lim) == "header_too_large");
  std::string many = "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n";
  for (int i = 0; i < 6; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  CHECK(why(many + "\r\n", lim) == "too_many_headers");
  std::string big = "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n";
  for (int i = 0; i < 4; ++i) big += "X-" + std::to_string(i) + ": " + std::string(90, 'v') + "\r\n";
  CHECK(why(big + "\r\n", lim) == "header_too_large");
}

TEST_CASE("N8: request line and field syntax is strict", "[N8]") {
  CHECK(why("GET http://a.example/ HTTP/1.1\nHost: a.example\n\n") == "bare_lf");
  CHECK(why("GET  http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "bad_request_line");
  CHECK(why("GET http://a.example/ HTTP/2.0\r\nHost: a.example\r\n\r\n") == "bad_version");
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost : a.example\r\n\r\n") == "whitespace_before_colon");
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX: a\rb\r\n\r\n") == "bad_header_value");
  CHECK(why("GET /index.html HTTP/1.1\r\nHost: a.example\r\n\r\n") == "origin_form_not_proxied");
  CHECK(why("GET https://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "https_needs_connect");
  CHECK(why("GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "unsupported_scheme");
  CHECK(why("\r\nGET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n") == "empty_request_line");
  CHECK(why("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n") == "need_more");
}

TEST_CASE("N8: a malformed host name is not a syntax error but reaches the policy unset", "[N8]") {
  request_head h;
  const std::string req = "CONNECT 0x7f.1:443 HTTP/1.1\r\nHost: a.example\r\n\r\n"; // h refers to it
  auto r = parse(req, h);
  REQUIRE(r.st == status::good);
  CHECK_FALSE(h.target_authority.host);
  CHECK(h.target_authority.host_text == "0x7f.1");
}

TEST_CASE("N8: hop-by-hop headers are recognised, including those named by Connection", "[N8]") {
  std::vector<header> hs = {{"Connection", "keep-alive, X-Secret"}, {"X-Secret", "1"}};
  CHECK(is_hop_by_hop("Proxy-Authorization", hs));
  CHECK(is_hop_by_hop("keep-alive", hs));
  CHECK(is_hop_by_hop("x-secret", hs));
  CHECK_FALSE(is_hop_by_hop("Accept", hs));
}

TEST_CASE("N8: chunked bodies are validated", "[N8]") {
  auto run = [](std::string_view body) {
    chunked_decoder d;
    auto s = d.feed(body);
    return s;
  };
  auto ok = run("5\r\nhello\r\n0\r\n\r\nNEXT");
  CHECK(ok.st == status::good);
  CHECK(ok.consumed == 15);
  CHECK(run("5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n").st == status::good);
  CHECK(run("5\r\nhelloX\r\n0\r\n\r\n").st == status::bad);   // data longer than the size
  CHECK(run("z\r\n").st == status::bad);                      // not hex
  CHECK(run("5\nhello\r\n").st == status::bad);               // bare LF
  CHECK(run("-5\r\n").st == status::bad);
  CHECK(run("ffffffffffffffffff\r\n").st == status::bad);     // overflow
  CHECK(run("5\r\nhel").st == status::need_more);
  // Byte by byte gives the same answer.
  std::string body = "a\r\n0123456789\r\n0\r\n\r\n";
  chunked_decoder d;
  status last = status::need_more;
  for (char c : body) last = d.feed(std::string_view(&c, 1)).st;
  CHECK(last == status::good);
}

TEST_CASE("N8: response heads are parsed for their framing", "[N8]") {
  response_head r;
  limits lim;
  auto pr = parse_response("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", lim, r);
  REQUIRE(pr.st == status::good);
  CHECK(r.code == 200);
  CHECK(r.content_length == 5u);
  CHECK_FALSE(r.keep_alive);
  pr = parse_response("HTTP/1.1 204\r\n\r\n", lim, r);
  CHECK(pr.st == status::good);
  CHECK(parse_response("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", lim, r).st ==
        status::bad);
  CHECK(parse_response("HTTP/1.1 2000 OK\r\n\r\n", lim, r).st == status::bad);
}

TEST_CASE("N8: a Connection header that names the message's framing is refused, request and response", "[N8]") {
  const std::string post = "POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\n";
  CHECK(why(post + "Connection: Content-Length\r\nContent-Length: 3\r\n\r\n") == "framing_header_in_connection");
  CHECK(why(post + "Content-Length: 3\r\nConnection: keep-alive, content-LENGTH\r\n\r\n") ==
        "framing_header_in_connection");
  CHECK(why(post + "Transfer-Encoding: chunked\r\nConnection: Transfer-Encoding\r\n\r\n") ==
        "framing_header_in_connection");
  CHECK(why(post + "Proxy-Connection: transfer-encoding\r\n\r\n") == "framing_header_in_connection");
  // Listing it is enough, with or without the header itself.
  CHECK(why(post + "Connection: close, content-length\r\n\r\n") == "framing_header_in_connection");
  CHECK(why(post + "Connection: close, X-Content-Length\r\nContent-Length: 0\r\n\r\n") == "good");
  response_head r;
  limits lim;
  auto pr = parse_response("HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello", lim, r);
  CHECK(pr.st == status::bad);
  CHECK(pr.reason == "framing_header_in_connection");
  pr = parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n", lim, r);
  CHECK(pr.reason == "framing_header_in_connection");
  CHECK(pr.target.empty()); // responses name no target
  // Whatever a Connection header says, the framing headers are never hop-by-hop.
  std::vector<header> hs = {{"Connection", "Content-Length, Transfer-Encoding, X-Other"}};
  CHECK_FALSE(is_hop_by_hop("Content-Length", hs));
  CHECK_FALSE(is_hop_by_hop("transfer-encoding", hs));
  CHECK(is_hop_by_hop("X-Other", hs));
}

TEST_CASE("N7: a refused request names the target it aimed at", "[N7][N8]") {
  auto target = [](const std::string& s) {
    request_head h;
    auto r = parse_request(s, limits{}, h);
    INFO(s);
    CHECK(r.st == status::bad);
    return r.target;
  };
  const std::string host = "Host: h.example\r\n";
  CHECK(target("GET https://Denied.Example/ HTTP/1.1\r\n" + host + "\r\n") == "denied.example:443");
  CHECK(target("GET https://denied.example:8443/x HTTP/1.1\r\n" + host + "\r\n") == "denied.example:8443");
  CHECK(target("GET ftp://169.254.169.254/ HTTP/1.1\r\n" + host + "\r\n") == "169.254.169.254:21");
  CHECK(target("GET wss://a.example/ HTTP/1.1\r\n" + host + "\r\n") == "a.example:443");
  CHECK(target("GET gopher://a.example/ HTTP/1.1\r\n" + host + "\r\n") == "a.example:0");
  CHECK(target("CONNECT u@denied.example:443 HTTP/1.1\r\n" + host + "\r\n") == "denied.example:443");
  CHECK(target("GET http://u:p@denied.example/ HTTP/1.1\r\n" + host + "\r\n") == "denied.example:80");
  CHECK(target("GET http://a.example:80@169.254.169.254:8080/ HTTP/1.1\r\n" + host + "\r\n") ==
        "169.254.169.254:8080");
  CHECK(target("CONNECT a.example:0 HTTP/1.1\r\n" + host + "\r\n") == "a.example:0");
  CHECK(target("CONNECT a.example:0443 HTTP/1.1\r\n" + host + "\r\n") == "a.example:0443");
  CHECK(target("CONNECT a.example HTTP/1.1\r\n" + host + "\r\n") == "a.example:0");
  CHECK(target("CONNECT ::1:443 HTTP/1.1\r\n" + host + "\r\n") == "[::1]:443");
  CHECK(target("CONNECT [::FFFF:169.254.169.254]:x HTTP/1.1\r\n" + host + "\r\n") == "169.254.169.254:x");
  CHECK(target("GET http://::1/ HTTP/1.1\r\n" + host + "\r\n") == "[::1]:80");
  CHECK(target("GET / HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n") == "169.254.169.254:80");
  CHECK(target("GET /x HTTP/1.1\r\nHost: [fd00:ec2::254]:8080\r\n\r\n") == "[fd00:ec2::254]:8080");
  CHECK(target("OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n") == "a.example:80");
  // A name that does not normalise is reported as written.
  CHECK(target("GET https://0x7f.1/ HTTP/1.1\r\n" + host + "\r\n") == "0x7f.1:443");
  // Header errors after a good request line still name the target.
  CHECK(target("GET http://a.example/ HTTP/1.1\r\n" + host + "X: 1\r\n folded\r\n\r\n") == "a.example:80");
  CHECK(target("GET http://a.example/ HTTP/1.1\r\n" + host + host + "\r\n") == "a.example:80");
  // Nothing names a host.
  CHECK(target("GARBAGE\r\n\r\n").empty());
  CHECK(target("GET / HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n").empty());
  CHECK(target("GET http:/// HTTP/1.1\r\n" + host + "\r\n").empty());
  // Bad bytes in the target, a bare LF, a line over the limit: the bytes read
  // so far still name the target (issue 30 item 3).
  CHECK(target("GET http://a.example/\x01 HTTP/1.1\r\n" + host + "\r\n") == "a.example:80");
  CHECK(target("CONNECT a\xef\xbc\x8e" "example:443 HTTP/1.1\r\n" + host + "\r\n") == "a\xef\xbc\x8e" "example:443");
  CHECK(target("GET http://a.example/ HTTP/1.1\n" + host + "\n\n") == "a.example:80");
  CHECK(target("GET http://a.example:81/" + std::string(9000, 'x') + " HTTP/1.1\r\n" + host + "\r\n") ==
        "a.example:81");
  CHECK(target("CONNECT a.example" + std::string(9000, 'x') + ":443 HTTP/1.1\r\n" + host + "\r\n").empty());
  CHECK(target("GET\x01 http://a.example/ HTTP/1.1\r\n" + host + "\r\n").empty()); // not a method
  CHECK(target("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").empty());
}

TEST_CASE("N8: the request head scanner asks for a parse only when a line ends or a limit is hit (issue 30 item 7)",
          "[N8]") {
  limits lim;
  std::string head = "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n";
  for (int i = 0; i < 40; ++i) head += "X-Fill-" + std::to_string(i) + ": " + std::string(300, 'v') + "\r\n";
  head += "\r\n";
  request_head_scanner scanner;
  std::string buf;
  int parses = 0;
  parse_result last;
  for (char ch : head) { // a byte at a time
    buf += ch;
    if (!scanner.worth_parsing(buf, lim)) continue;
    ++parses;
    request_head h;
    last = parse_request(buf, lim, h);
    if (last.st != status::need_more) break;
  }
  CHECK(last.st == status::good);
  CHECK(parses == 2 + 40 + 1); // one per line, not one per byte
  // A partial line over the limit is worth parsing (it is refused at once).
  request_head_scanner s2;
  std::string big = "GET http://a.example/" + std::string(lim.max_line + 1, 'x');
  CHECK_FALSE(s2.worth_parsing(std::string_view(big).substr(0, 100), lim));
  CHECK(s2.worth_parsing(big, lim));
  // A new, shorter buffer starts over.
  CHECK(s2.worth_parsing("GET / HTTP/1.1\r\n", lim));
}
