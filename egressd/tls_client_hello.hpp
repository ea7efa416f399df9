// egressd/tls_client_hello.hpp — a sans-I/O reader of the first TLS
// ClientHello of a stream (N8: the TLS server name of a tunnel is checked
// against the target egressd checked, never decrypting anything).
//
// Hand it every byte the client has sent so far; it reassembles the
// handshake records (a ClientHello may be split across several TLS records,
// and each record across TCP segments) and answers:
//   need_more  the bytes so far are a valid beginning; `need` says how many
//              bytes in total it needs before looking again
//   not_tls    the first byte is not a TLS handshake record (0x16): the
//              stream is something else and is not this parser's business
//   hello      a complete, well-formed ClientHello: its server_name (the
//              host_name entry of the SNI extension) if it has one, and
//              whether it carries an encrypted_client_hello extension (ECH:
//              the server_name read here is then the outer, public name;
//              the inner name is encrypted and cannot be checked)
//   bad        anything else that starts like TLS: a record or handshake
//              message that is not a ClientHello, a length that does not
//              add up, a duplicate extension, two host names, an empty one,
//              a record of another type before the hello is complete, bytes
//              after the hello in its last record, or a hello larger than
//              max_bytes (reason "client_hello_too_large"): egressd fails
//              closed on all of these.
//
// The result depends only on the bytes, never on how they were split across
// calls (fuzz/fuzz_egressd_tls.cpp checks it). Nothing is allocated except
// the returned name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace egressd::tls {

// The most bytes of a stream (record headers included) egressd buffers to
// read one ClientHello. Hellos of today's clients are 0.3-2 KiB (a
// post-quantum key share and ECH included); a larger one is refused.
constexpr std::size_t kMaxClientHelloBytes = 16384;

enum class status : std::uint8_t { need_more, not_tls, hello, bad };

struct hello_result {
  status st{status::need_more};
  std::string_view reason{};  // bad only: a stable token, e.g. "duplicate_extension"
  std::size_t need{0};        // need_more: total bytes wanted before the next look
  std::size_t consumed{0};    // hello: bytes of the records that carried it
  bool has_server_name{false};
  std::string server_name;    // the SNI host_name, as sent (bytes, unchecked)
  bool ech{false};            // an encrypted_client_hello extension was present
};

hello_result parse_client_hello(std::string_view stream, std::size_t max_bytes = kMaxClientHelloBytes);

} // namespace egressd::tls
