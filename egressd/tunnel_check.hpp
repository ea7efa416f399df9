// egressd/tunnel_check.hpp — what the bytes of a tunnel may say about
// where they go (N8), sans-I/O.
//
// A CONNECT tunnel or a SOCKS connection goes to the address egressd
// checked, but a shared front end (a CDN, a virtual-host server) picks the
// site by what the client sends: the TLS server name, or the Host of each
// HTTP request. The tunnel inspector reads the client's first bytes (and,
// in a plain-HTTP tunnel, every request head), never decrypting, and holds
// back only the bytes that could name another site until it has decided:
//
//   TLS (first byte 0x16)  the ClientHello is reassembled (tls_client_hello.hpp,
//                          at most kMaxClientHelloBytes) and held until complete;
//                          its server_name must be the checked name (a
//                          target that is an IP literal: no server name, or
//                          one the allowlist allows). No server name passes
//                          (the front end's default site). ECH: the outer
//                          name is what is checked.
//   plain HTTP/1.x         every request of the tunnel is read: its target
//                          (absolute-form or authority-form: its host) and
//                          its Host header (at most one) must name the
//                          checked host, a port in it the tunnel's port.
//                          Request boundaries are tracked the way the server
//                          tracks them (RFC 9112 6.3): a Content-Length body
//                          (one header, decimal) or a chunked body
//                          (Transfer-Encoding exactly "chunked",
//                          http::chunked_decoder), no body otherwise. Both
//                          framings in one head, a second Content-Length or
//                          Transfer-Encoding, Transfer-Encoding in HTTP/1.0,
//                          a Connection header naming either, a field name
//                          with whitespace or no colon,
//                          HTTP/2 prior knowledge, other HTTP versions, bare
//                          CR and obs-fold are refused: a server could frame
//                          such a request differently and read a body as the
//                          next request. The Content-Length body of a
//                          request with Expect is refused when it starts
//                          like a request line (a server that answered the
//                          expectation with a final status and kept the
//                          connection would read it as the next request).
//                          Bytes at a later request boundary that are not
//                          HTTP are refused, except after a request that may
//                          switch protocols (Upgrade, or CONNECT naming the
//                          checked target): then the server has switched
//                          (the tunnel's bytes still go to the checked
//                          target) or answers 400, and the rest passes.
//   anything else          passes unchanged, byte for byte.
//
// Bytes that cannot name a site (a method, an origin-form target, a header
// line that is not Host, a body) are released as they arrive, so a protocol
// whose client sends a word and waits (an echo, a banner) is never held;
// what is held is bounded by kMaxInspect (16 KiB per request head) and a
// head still undecided past that is refused. A first word longer than kMaxMethod (32) bytes is not a
// method: the stream is not HTTP and passes.
#pragma once

#include "ccsb/egress.hpp"
#include "ccsb/host.hpp"
#include "http_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace egressd {

class tunnel_inspector {
public:
  static constexpr std::size_t kMaxInspect = 16384;
  static constexpr std::size_t kMaxMethod = 32; // a longer first word is not a method

  enum class verdict : std::uint8_t { need_more, pass, refuse };
  struct step {
    verdict v{verdict::need_more};
    // Bytes from the start of the stream that may go upstream now; on a
    // refusal in a later request, where that request starts (the earlier
    // ones are complete and still go).
    std::size_t release{0};
    std::string reason;     // refuse: e.g. "tls_server_name_mismatch: evil.example"
  };

  // `checked` is the target egressd checked (a name or an IP literal),
  // `port` the tunnel's port, `policy` decides a server name sent to an IP
  // literal.
  tunnel_inspector(const ccsb::host& checked, std::uint16_t port, const ccsb::egress_policy& policy)
      : checked_(checked), port_(port), policy_(policy) {}

  // `stream` is everything the client sent so far (it only grows between
  // calls, except by drop()). Once the verdict is pass, every later byte
  // passes too. A plain-HTTP tunnel is never `pass`: every request is read.
  step feed(std::string_view stream);

  // The caller has sent the first `sent` bytes of the stream: returns how
  // many it may now erase from the front of its buffer (the next feed()
  // gets the stream without them). Only bytes the inspector no longer needs
  // (a body, or everything before a request boundary) are given up, so what
  // a long keep-alive tunnel holds stays bounded.
  std::size_t drop(std::size_t sent) noexcept;

  // Requests read to their end so far (a refusal in a later request cannot
  // be answered with a 403: earlier responses may still be on their way).
  std::size_t requests() const noexcept { return requests_; }

private:
  enum state_t : std::uint8_t {
    st_start, st_method, st_sp1, st_origin, st_sensitive, st_sp2, st_version, st_after_version,
    st_line_start, st_line, st_probe, st_body, st_chunked, st_tls, st_pass, st_refused
  };
  step refuse(std::string reason);
  step not_http();
  std::string header_line(std::string_view line);
  std::string_view head_end();
  void end_request();
  std::string_view name_problem(std::string_view text) const;
  bool name_ok(const ccsb::host& h) const;

  const ccsb::host checked_;
  std::uint16_t port_;
  const ccsb::egress_policy& policy_;
  state_t st_{st_start};
  std::size_t pos_{0};        // bytes scanned so far
  std::size_t hold_{0};       // start of the held bytes (release = hold_ while scanning)
  std::size_t token_{0};      // start of the current token (target, version, line)
  std::size_t target_begin_{0}, target_end_{0};
  std::size_t tls_need_{0};
  std::size_t head_start_{0};  // where the current request head starts
  std::size_t method_begin_{0};
  std::uint64_t body_left_{0}; // Content-Length bytes still to come
  std::size_t probe_word_{0};  // st_probe: length of the word the body starts with
  http::chunked_decoder chunks_;
  std::size_t requests_{0};
  bool sensitive_target_{false};
  int hosts_{0};
  bool has_length_{false}, chunked_{false}, expect_{false}, upgrade_{false}, method_is_connect_{false};
  bool http10_{false};
  bool switched_{false}; // the previous request may have switched protocols
  std::size_t refused_at_{0};
  std::string reason_;
};

} // namespace egressd
