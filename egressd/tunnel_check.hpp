// egressd/tunnel_check.hpp — what the first bytes of a tunnel may say about
// where they go (N8), sans-I/O.
//
// A CONNECT tunnel or a SOCKS connection goes to the address egressd
// checked, but a shared front end (a CDN, a virtual-host server) picks the
// site by what the client sends first: the TLS server name, or the HTTP
// Host. The tunnel inspector reads the client's first bytes, never
// decrypting, and holds back only the bytes that could name another site
// until it has decided:
//
//   TLS (first byte 0x16)  the ClientHello is reassembled (tls_client_hello.hpp,
//                          at most kMaxClientHelloBytes) and held until complete;
//                          its server_name must be the checked name (a
//                          target that is an IP literal: no server name, or
//                          one the allowlist allows). No server name passes
//                          (the front end's default site). ECH: the outer
//                          name is what is checked.
//   plain HTTP/1.x         the first request's target (absolute-form or
//                          authority-form: its host) and its Host header
//                          (at most one) must name the checked host, a port
//                          in it the tunnel's port. HTTP/2 prior knowledge
//                          (PRI * HTTP/2.0), other HTTP versions, bare CR
//                          and obs-fold in that head are refused. Requests
//                          after the first are not read (documented).
//   anything else          passes unchanged, byte for byte.
//
// Bytes that cannot name a site (a method, an origin-form target, a header
// line that is not Host) are released as they arrive, so a protocol whose
// client sends a word and waits (an echo, a banner) is never held; what is
// held is bounded by kMaxInspect (16 KiB) and a stream still undecided past
// that is refused. A first word longer than kMaxMethod (32) bytes is not a
// method: the stream is not HTTP and passes.
#pragma once

#include "ccsb/egress.hpp"
#include "ccsb/host.hpp"

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
    std::size_t release{0}; // bytes from the start of the stream that may go upstream now
    std::string reason;     // refuse: e.g. "tls_server_name_mismatch: evil.example"
  };

  // `checked` is the target egressd checked (a name or an IP literal),
  // `port` the tunnel's port, `policy` decides a server name sent to an IP
  // literal.
  tunnel_inspector(const ccsb::host& checked, std::uint16_t port, const ccsb::egress_policy& policy)
      : checked_(checked), port_(port), policy_(policy) {}

  // `stream` is everything the client sent so far (it only grows between
  // calls). Once the verdict is pass, every later byte passes too.
  step feed(std::string_view stream);

private:
  enum state_t : std::uint8_t {
    st_start, st_method, st_sp1, st_origin, st_sensitive, st_sp2, st_version, st_after_version,
    st_line_start, st_line, st_tls, st_pass, st_refused
  };
  step refuse(std::string reason);
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
  bool sensitive_target_{false};
  int hosts_{0};
  std::string reason_;
};

} // namespace egressd
