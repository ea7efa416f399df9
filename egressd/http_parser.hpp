// egressd/http_parser.hpp — strict, sans-I/O HTTP/1.1 message-head parser
// for a forward proxy (RFC 9112), after the request_parser of the Asio
// examples: hand it the bytes received so far, get good / bad(reason) /
// need_more. It never allocates for the bytes themselves (the head refers to
// the caller's buffer) and every size is capped.
//
// What is refused (-> 400, the connection closes): bare LF or CR, obs-fold,
// whitespace before ':', bytes outside field-vchar, a request line that is not
// `METHOD SP target SP HTTP/1.x`, a missing (HTTP/1.1) or duplicate Host,
// several Content-Length, Content-Length together with Transfer-Encoding, a
// Transfer-Encoding other than "chunked", a Connection (or Proxy-Connection)
// header that names Content-Length or Transfer-Encoding (obeying it would
// strip the framing the proxy used, and the next hop would read the body as
// another message), userinfo in the target, a port that is not plain decimal
// 1-65535 without leading zeros, an unbracketed IPv6 literal, origin-form and
// https absolute-form targets, a CONNECT with a body, and heads over the line,
// size or count limits. Responses get the same framing checks (-> 502).
//
// A refused request still names a target whenever its request line does
// (parse_result::target, "host:port"), so the refusal can be reported (N7).
//
// The result only depends on the bytes, never on how they were split across
// calls (fuzz/fuzz_egressd_http.cpp checks it).
#pragma once

#include "ccsb/host.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace egressd::http {

// RFC 9110 §5.6.2: a byte of a token (method, field name).
constexpr bool is_tchar(unsigned char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
  case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
  case '-': case '.': case '^': case '_': case '`': case '|': case '~':
    return true;
  default:
    return false;
  }
}

struct limits {
  std::size_t max_line{8192};    // request/status line and each header line
  std::size_t max_head{16384};   // the whole head including the empty line
  std::size_t max_headers{64};   // header fields
};

enum class status : std::uint8_t { need_more, good, bad };

struct header {
  std::string_view name;
  std::string_view value; // OWS trimmed
};

// A target authority split into its parts; `host` is set only when the host
// text normalises (a malformed host is a policy denial, not a syntax error).
struct authority {
  std::string_view raw;       // as written in the request
  std::string_view host_text; // without the port, brackets kept
  std::uint16_t port{0};
  std::optional<ccsb::host> host;
};

struct request_head {
  std::string_view method;
  std::string_view target;
  int version_minor{1};
  bool is_connect{false};
  authority target_authority; // CONNECT target, or the absolute-form authority
  std::string_view path;      // absolute-form only: path and query ("/" if empty)
  std::vector<header> headers;
  std::optional<std::uint64_t> content_length;
  bool chunked{false};
  bool keep_alive{true};
  bool expect_continue{false};
};

struct response_head {
  int version_minor{1};
  int code{0};
  std::string_view reason;
  std::vector<header> headers;
  std::optional<std::uint64_t> content_length;
  bool chunked{false};
  bool keep_alive{true};
};

struct parse_result {
  status st{status::need_more};
  std::size_t consumed{0};    // bytes of the head (good) — the rest is body
  std::string_view reason{};  // stable reason when bad, e.g. "obs_fold"
  // Bad requests only: the target the request names, as well as it can be
  // named ("host:port"; see refused_target), or empty when it names none.
  std::string target{};
};

// Parses the request head at the start of `data` (all bytes received so far).
parse_result parse_request(std::string_view data, const limits& lim, request_head& out);

// Incremental reading of a request head (issue 30 item 7): parse_request
// looks at the whole head, so calling it on every read of a head that
// arrives a byte at a time costs the square of its size. The scanner looks
// at each new byte once and says when parse_request can answer anything but
// need_more: a line end arrived (a line to check, or the empty line that
// ends the head) or the incomplete last line hit a limit, exactly the
// conditions under which scan_lines' answer changes. parse_request then runs
// at most once per line (max_headers + 2 times per head).
class request_head_scanner {
public:
  // `data` is everything received so far (it only grows until reset()).
  bool worth_parsing(std::string_view data, const limits& lim) noexcept;
  void reset() noexcept { seen_ = 0, line_start_ = 0; }

private:
  std::size_t seen_{0};       // bytes already looked at
  std::size_t line_start_{0}; // where the incomplete last line starts
};

// Parses a response head (upstream side of a forwarded request).
parse_result parse_response(std::string_view data, const limits& lim, response_head& out);

// Splits and checks an authority "host:port" / "[v6]:port" / "host" (port
// optional only when default_port != 0). Returns a reason or empty.
std::string_view parse_authority(std::string_view raw, std::uint16_t default_port, authority& out);

// Connection-specific ("hop-by-hop") header? Includes the names listed in
// the message's Connection header — except Content-Length and
// Transfer-Encoding, which frame the message and are never hop-by-hop (the
// parsers refuse a Connection header that lists them).
bool is_hop_by_hop(std::string_view name, const std::vector<header>& headers);

// The target a request names, for reporting a refusal: the authority of an
// absolute-form target (default port by scheme: http 80, https 443, ftp 21,
// ws 80, wss 443, else 0), of a CONNECT target (port 0 when none is given),
// or the single Host header of an origin-form request (port 80). Userinfo is
// dropped (the host is what follows the last '@'); an unbracketed IPv6
// literal before a decimal port is split there. The host is normalised when
// it parses, else kept as written; a port that is not canonical decimal is
// kept as written. Empty when nothing names a host. `h` may be a partially
// parsed head: method and target set, headers as far as they were read.
std::string refused_target(const request_head& h);

bool iequals(std::string_view a, std::string_view b) noexcept;

// Incremental validator for a chunked body: it forwards nothing itself, it
// says how many of the given bytes belong to the body and whether the body
// is complete or broken. Split-insensitive like the head parser.
class chunked_decoder {
public:
  explicit chunked_decoder(std::size_t max_trailer = 16384) : max_trailer_(max_trailer) {}
  struct step {
    status st{status::need_more}; // good = last chunk and trailers done
    std::size_t consumed{0};
    std::string_view reason{};
  };
  step feed(std::string_view data);
  bool done() const noexcept { return state_ == st_done; }

private:
  enum state_t : std::uint8_t {
    st_size, st_ext, st_size_lf, st_data, st_data_cr, st_data_lf,
    st_trailer_start, st_trailer, st_trailer_lf, st_final_lf, st_done, st_bad
  };
  state_t state_{st_size};
  std::uint64_t size_{0};
  unsigned digits_{0};
  std::size_t line_{0};
  std::size_t trailer_bytes_{0};
  std::size_t max_trailer_;
};

} // namespace egressd::http
