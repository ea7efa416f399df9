#include "http_parser.hpp"

#include <algorithm>

namespace egressd::http {

namespace {

constexpr bool is_field_byte(unsigned char c) noexcept {
  return c == '\t' || (c >= 0x20 && c != 0x7f); // VCHAR, SP, HTAB, obs-text
}
constexpr char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string_view trim_ows(std::string_view v) noexcept {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool istarts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// Does any comma-separated token of `list` equal `token`?
bool has_token(std::string_view list, std::string_view token) noexcept {
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view t = trim_ows(list.substr(0, comma));
    if (iequals(t, token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Splits `data` into lines, applying the limits in order. Calls on_line for
// each complete line (without CRLF); the empty line ends the head.
struct line_scan {
  status st{status::need_more};
  std::size_t consumed{0};
  std::string_view reason;
};

template <class F>
line_scan scan_lines(std::string_view data, const limits& lim, F&& on_line) {
  std::size_t pos = 0;
  std::size_t index = 0;
  for (;;) {
    std::size_t lf = data.find('\n', pos);
    if (lf == std::string_view::npos) {
      std::size_t partial = data.size() - pos;
      std::size_t total = data.size();
      if (partial > 0 && data.back() == '\r') { --partial; --total; }
      if (partial > lim.max_line || total > lim.max_head)
        return {status::bad, 0, "header_too_large"};
      return {status::need_more, 0, {}};
    }
    // Limits first, exactly as for a partial line, so the outcome does not
    // depend on whether the line end has arrived yet.
    bool cr = lf > pos && data[lf - 1] == '\r';
    std::size_t content = lf - pos - (cr ? 1 : 0);
    if (content > lim.max_line || lf + 1 > lim.max_head) return {status::bad, 0, "header_too_large"};
    if (!cr) return {status::bad, 0, "bare_lf"};
    std::string_view line = data.substr(pos, content);
    pos = lf + 1;
    if (line.empty()) {
      if (index == 0) return {status::bad, 0, "empty_request_line"};
      return {status::good, pos, {}};
    }
    if (index > lim.max_headers) return {status::bad, 0, "too_many_headers"};
    std::string_view why = on_line(index, line);
    if (!why.empty()) return {status::bad, 0, why};
    ++index;
  }
}

std::string_view parse_header_line(std::string_view line, std::vector<header>& out) {
  if (line.front() == ' ' || line.front() == '\t') return "obs_fold";
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "header_without_colon";
  if (colon == 0) return "empty_header_name";
  for (std::size_t i = 0; i < colon; ++i) {
    auto c = static_cast<unsigned char>(line[i]);
    if (c == ' ' || c == '\t') return "whitespace_before_colon";
    if (!is_tchar(c)) return "bad_header_name";
  }
  std::string_view value = line.substr(colon + 1);
  for (char ch : value)
    if (!is_field_byte(static_cast<unsigned char>(ch))) return "bad_header_value";
  out.push_back({line.substr(0, colon), trim_ows(value)});
  return {};
}

// Checks shared by requests and responses: Content-Length and
// Transfer-Encoding. Sets content_length/chunked.
std::string_view body_framing(const std::vector<header>& headers, int version_minor,
                              std::optional<std::uint64_t>& content_length, bool& chunked) {
  int te_count = 0;
  for (const auto& h : headers) {
    if (iequals(h.name, "content-length")) {
      if (content_length) return "duplicate_content_length";
      if (h.value.empty() || h.value.size() > 15) return "bad_content_length";
      std::uint64_t v = 0;
      for (char c : h.value) {
        if (c < '0' || c > '9') return "bad_content_length";
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
      }
      content_length = v;
    } else if (iequals(h.name, "transfer-encoding")) {
      if (++te_count > 1) return "duplicate_transfer_encoding";
      if (!iequals(h.value, "chunked")) return "unsupported_transfer_encoding";
      chunked = true;
    }
  }
  if (chunked && content_length) return "content_length_with_transfer_encoding";
  if (chunked && version_minor == 0) return "transfer_encoding_in_http10";
  // "Connection: Content-Length" asks the next hop to drop the header that
  // frames this very message: the proxy would frame the body by it, strip it,
  // and the next hop would read the body as a message of its own.
  for (const auto& h : headers) {
    if (!iequals(h.name, "connection") && !iequals(h.name, "proxy-connection")) continue;
    if (has_token(h.value, "content-length") || has_token(h.value, "transfer-encoding"))
      return "framing_header_in_connection";
  }
  return {};
}

bool connection_keep_alive(const std::vector<header>& headers, int version_minor) {
  bool keep = version_minor >= 1;
  for (const auto& h : headers) {
    if (!iequals(h.name, "connection") && !iequals(h.name, "proxy-connection")) continue;
    if (has_token(h.value, "close")) return false;
    if (has_token(h.value, "keep-alive")) keep = true;
  }
  return keep;
}

std::string_view parse_version(std::string_view v, int& minor) {
  if (v == "HTTP/1.1") { minor = 1; return {}; }
  if (v == "HTTP/1.0") { minor = 0; return {}; }
  return "bad_version";
}

} // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view parse_authority(std::string_view raw, std::uint16_t default_port, authority& out) {
  out = authority{};
  out.raw = raw;
  if (raw.empty()) return "empty_authority";
  if (raw.find('@') != std::string_view::npos) return "userinfo_in_target";
  std::string_view host_text, port_text;
  bool has_port = false;
  if (raw.front() == '[') {
    std::size_t close = raw.find(']');
    if (close == std::string_view::npos) return "bad_brackets";
    host_text = raw.substr(0, close + 1);
    std::string_view rest = raw.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return "bad_brackets";
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    std::size_t colon = raw.find(':');
    if (colon != std::string_view::npos && raw.find(':', colon + 1) != std::string_view::npos)
      return "unbracketed_ipv6";
    if (raw.find_first_of("[]") != std::string_view::npos) return "bad_brackets";
    host_text = raw.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = raw.substr(colon + 1);
      has_port = true;
    }
  }
  if (host_text.empty()) return "empty_host";
  if (has_port) {
    auto p = ccsb::parse_port(port_text);
    if (!p) return "bad_port";
    out.port = *p;
  } else {
    if (default_port == 0) return "missing_port";
    out.port = default_port;
  }
  out.host_text = host_text;
  if (auto h = ccsb::parse_host(host_text)) out.host = *h;
  return {};
}

namespace {

// `named` is set once the request line has a method and a target made of
// valid bytes: from then on a refusal can name what the request aimed at.
parse_result parse_request_head(std::string_view data, const limits& lim, request_head& out, bool& named) {
  out = request_head{};
  auto scan = scan_lines(data, lim, [&](std::size_t index, std::string_view line) -> std::string_view {
    if (index > 0) return parse_header_line(line, out.headers);
    std::size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0) return "bad_request_line";
    std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return "bad_request_line";
    out.method = line.substr(0, sp1);
    out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    for (char c : out.method)
      if (!is_tchar(static_cast<unsigned char>(c))) return "bad_method";
    named = true; // a target with bad bytes (full-width dots, ...) still names one
    for (char c : out.target) {
      auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7f) return "bad_target";
    }
    return parse_version(line.substr(sp2 + 1), out.version_minor);
  });
  if (scan.st != status::good) return {scan.st, 0, scan.reason};
  auto bad = [](std::string_view why) { return parse_result{status::bad, 0, why}; };

  // Host: exactly one in HTTP/1.1, at most one in 1.0, and well formed. For
  // an absolute-form target the proxy replaces it (RFC 9112 3.2.2).
  int hosts = 0;
  for (const auto& h : out.headers) {
    if (!iequals(h.name, "host")) continue;
    if (++hosts > 1) return bad("duplicate_host");
    authority a;
    if (!parse_authority(h.value, 80, a).empty() || !a.host) return bad("bad_host_header");
  }
  if (hosts == 0 && out.version_minor == 1) return bad("missing_host");

  if (auto why = body_framing(out.headers, out.version_minor, out.content_length, out.chunked); !why.empty())
    return bad(why);
  out.keep_alive = connection_keep_alive(out.headers, out.version_minor);
  for (const auto& h : out.headers)
    if (iequals(h.name, "expect") && iequals(h.value, "100-continue")) out.expect_continue = true;

  if (out.method == "CONNECT") {
    out.is_connect = true;
    if (out.target.front() == '/' || out.target.find("://") != std::string_view::npos) return bad("connect_needs_authority");
    if (auto why = parse_authority(out.target, 0, out.target_authority); !why.empty()) return bad(why);
    if (out.chunked || (out.content_length && *out.content_length > 0)) return bad("connect_with_body");
    return {status::good, scan.consumed, {}};
  }

  std::string_view t = out.target;
  if (t.front() == '/' || t == "*") return bad("origin_form_not_proxied");
  if (istarts_with(t, "https://")) return bad("https_needs_connect");
  if (!istarts_with(t, "http://")) return bad("unsupported_scheme");
  if (t.find('#') != std::string_view::npos) return bad("fragment_in_target");
  t.remove_prefix(7);
  std::size_t end = t.find_first_of("/?");
  std::string_view auth = t.substr(0, end);
  if (auto why = parse_authority(auth, 80, out.target_authority); !why.empty()) return bad(why);
  out.path = end == std::string_view::npos ? std::string_view("/") : t.substr(end);
  return {status::good, scan.consumed, {}};
}

std::uint16_t scheme_port(std::string_view scheme) noexcept {
  if (iequals(scheme, "http") || iequals(scheme, "ws")) return 80;
  if (iequals(scheme, "https") || iequals(scheme, "wss")) return 443;
  if (iequals(scheme, "ftp")) return 21;
  return 0;
}

bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A request line the line scanner refused before reading it (bare LF, or
// over the limits) still names its target when the bytes say it (N7): the
// whole line when it ended in a bare LF, else only the first
// min(max_line, max_head - 1) bytes of it (all of them are there whenever
// the limit is hit, however the bytes came), and from a partial target only
// a complete http-style authority (followed by '/', '?' or '#').
bool name_from_first_line(std::string_view data, const limits& lim, std::string_view why, request_head& out) {
  std::string_view line;
  bool complete = false;
  if (why == "bare_lf") {
    std::size_t lf = data.find('\n');
    if (lf == std::string_view::npos) return false;
    line = data.substr(0, lf);
    complete = true;
  } else if (why == "header_too_large") {
    std::size_t window = std::min(lim.max_line, lim.max_head > 0 ? lim.max_head - 1 : 0);
    line = data.substr(0, std::min(window, data.find_first_of("\r\n")));
  } else {
    return false;
  }
  std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return false;
  for (char c : line.substr(0, sp1))
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  std::string_view rest = line.substr(sp1 + 1);
  std::size_t sp2 = rest.find(' ');
  std::string_view target = rest.substr(0, sp2);
  if (target.empty()) return false;
  if (sp2 == std::string_view::npos && !complete) {
    auto sep = target.find("://");
    if (sep == std::string_view::npos ||
        target.find_first_of("/?#", sep + 3) == std::string_view::npos)
      return false;
  }
  out.method = line.substr(0, sp1);
  out.target = target;
  out.headers.clear();
  return true;
}

} // namespace

parse_result parse_request(std::string_view data, const limits& lim, request_head& out) {
  bool named = false;
  parse_result r = parse_request_head(data, lim, out, named);
  if (r.st == status::bad && !named) named = name_from_first_line(data, lim, r.reason, out);
  if (r.st == status::bad && named) r.target = refused_target(out);
  return r;
}

std::string refused_target(const request_head& h) {
  constexpr std::size_t kMaxText = 300; // what an event carries of a raw host or port
  std::string_view t = h.target;
  if (t.empty()) return {};
  std::string_view auth;
  std::uint16_t default_port = 0;
  if (auto sep = t.find("://"); sep != std::string_view::npos) {
    std::string_view rest = t.substr(sep + 3);
    auth = rest.substr(0, rest.find_first_of("/?#"));
    default_port = scheme_port(t.substr(0, sep));
  } else if (t.front() == '/' || t == "*") {
    // Origin-form: only the Host header says where it was meant to go.
    int hosts = 0;
    for (const auto& hd : h.headers)
      if (iequals(hd.name, "host")) {
        ++hosts;
        auth = hd.value;
      }
    if (hosts != 1) return {};
    default_port = 80;
  } else {
    auth = t;
    default_port = h.method == "CONNECT" ? 0 : 80;
  }
  if (auto at = auth.rfind('@'); at != std::string_view::npos) auth.remove_prefix(at + 1);
  if (auth.empty()) return {};

  std::string_view host_text = auth, port_text;
  if (auth.front() == '[') {
    auto close = auth.find(']');
    if (close != std::string_view::npos) {
      host_text = auth.substr(0, close + 1);
      std::string_view rest = auth.substr(close + 1);
      if (!rest.empty() && rest.front() == ':') port_text = rest.substr(1);
    }
  } else if (auto colon = auth.rfind(':'); colon != std::string_view::npos) {
    std::string_view before = auth.substr(0, colon), after = auth.substr(colon + 1);
    if (before.find(':') == std::string_view::npos) {
      host_text = before;
      port_text = after;
    } else if (all_digits(after) && after.size() <= 5 && ccsb::parse_host(before)) {
      host_text = before; // unbracketed IPv6 literal, then a port
      port_text = after;
    } // else: a bare IPv6 literal without a port
  }
  if (host_text.empty()) return {};

  std::string port;
  if (port_text.empty()) port = std::to_string(default_port);
  else if (port_text == "0" || ccsb::parse_port(port_text)) port = std::string(port_text);
  else port = std::string(port_text.substr(0, 16));

  std::string out;
  if (auto parsed = ccsb::parse_host(host_text)) {
    if (parsed->kind() == ccsb::host_kind::ipv6) out = "[" + std::string(parsed->str()) + "]";
    else out = std::string(parsed->str());
  } else {
    out = std::string(host_text.substr(0, kMaxText));
  }
  out += ':';
  out += port;
  return out;
}

bool request_head_scanner::worth_parsing(std::string_view data, const limits& lim) noexcept {
  if (data.size() < seen_) reset(); // a new buffer: look at all of it
  bool line_end = false;
  for (std::size_t lf = data.find('\n', seen_); lf != std::string_view::npos; lf = data.find('\n', lf + 1)) {
    line_end = true;
    line_start_ = lf + 1;
  }
  seen_ = data.size();
  if (line_end) return true;
  // The same limits scan_lines applies to an incomplete last line.
  std::size_t partial = data.size() - line_start_, total = data.size();
  if (partial > 0 && data.back() == '\r') {
    --partial;
    --total;
  }
  return partial > lim.max_line || total > lim.max_head;
}

parse_result parse_response(std::string_view data, const limits& lim, response_head& out) {
  out = response_head{};
  auto scan = scan_lines(data, lim, [&](std::size_t index, std::string_view line) -> std::string_view {
    if (index > 0) return parse_header_line(line, out.headers);
    if (line.size() < 12 || line[8] != ' ') return "bad_status_line";
    if (auto why = parse_version(line.substr(0, 8), out.version_minor); !why.empty()) return why;
    int code = 0;
    for (std::size_t i = 9; i < 12; ++i) {
      if (line[i] < '0' || line[i] > '9') return "bad_status_code";
      code = code * 10 + (line[i] - '0');
    }
    if (code < 100) return "bad_status_code";
    if (line.size() > 12) {
      if (line[12] != ' ') return "bad_status_line";
      out.reason = line.substr(13);
      for (char c : out.reason)
        if (!is_field_byte(static_cast<unsigned char>(c))) return "bad_status_line";
    }
    out.code = code;
    return {};
  });
  if (scan.st != status::good) return {scan.st, 0, scan.reason};
  if (auto why = body_framing(out.headers, 1, out.content_length, out.chunked); !why.empty())
    return {status::bad, 0, why};
  out.keep_alive = connection_keep_alive(out.headers, out.version_minor);
  return {status::good, scan.consumed, {}};
}

bool is_hop_by_hop(std::string_view name, const std::vector<header>& headers) {
  static constexpr std::string_view fixed[] = {
      "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
      "te", "trailer", "upgrade"};
  for (auto f : fixed)
    if (iequals(name, f)) return true;
  // The framing of the message is end-to-end whatever Connection says.
  if (iequals(name, "content-length") || iequals(name, "transfer-encoding")) return false;
  for (const auto& h : headers)
    if (iequals(h.name, "connection") && has_token(h.value, name)) return true;
  return false;
}

chunked_decoder::step chunked_decoder::feed(std::string_view data) {
  std::size_t i = 0;
  auto fail = [&](std::string_view why) {
    state_ = st_bad;
    return step{status::bad, i, why};
  };
  if (state_ == st_bad) return {status::bad, 0, "bad_chunk"};
  while (i < data.size() && state_ != st_done) {
    char c = data[i];
    switch (state_) {
    case st_size:
      if (ccsb::is_hex_digit(c)) {
        if (++digits_ > 15) return fail("chunk_size_too_large");
        size_ = size_ << 4 | static_cast<std::uint64_t>(ccsb::hex_digit_value(c));
        ++i;
      } else if (digits_ == 0) {
        return fail("bad_chunk_size");
      } else if (c == ';') {
        state_ = st_ext; line_ = 0; ++i;
      } else if (c == '\r') {
        state_ = st_size_lf; ++i;
      } else {
        return fail("bad_chunk_size");
      }
      break;
    case st_ext:
      if (c == '\r') { state_ = st_size_lf; ++i; break; }
      if (!is_field_byte(static_cast<unsigned char>(c)) || ++line_ > 1024) return fail("bad_chunk_extension");
      ++i;
      break;
    case st_size_lf:
      if (c != '\n') return fail("bad_chunk_line");
      ++i;
      digits_ = 0;
      if (size_ == 0) { state_ = st_trailer_start; trailer_bytes_ = 0; }
      else state_ = st_data;
      break;
    case st_data: {
      std::size_t n = data.size() - i;
      if (n > size_) n = static_cast<std::size_t>(size_);
      size_ -= n;
      i += n;
      if (size_ == 0) state_ = st_data_cr;
      break;
    }
    case st_data_cr:
      if (c != '\r') return fail("bad_chunk_data_end");
      state_ = st_data_lf; ++i;
      break;
    case st_data_lf:
      if (c != '\n') return fail("bad_chunk_data_end");
      state_ = st_size; size_ = 0; ++i;
      break;
    case st_trailer_start:
      if (c == '\r') { state_ = st_final_lf; ++i; break; }
      if (c == ' ' || c == '\t' || c == ':' || !is_tchar(static_cast<unsigned char>(c))) return fail("bad_trailer");
      state_ = st_trailer;
      [[fallthrough]];
    case st_trailer:
      if (++trailer_bytes_ > max_trailer_) return fail("trailer_too_large");
      if (c == '\r') { state_ = st_trailer_lf; ++i; break; }
      if (!is_field_byte(static_cast<unsigned char>(c))) return fail("bad_trailer");
      ++i;
      break;
    case st_trailer_lf:
      if (c != '\n') return fail("bad_trailer");
      state_ = st_trailer_start; ++i;
      break;
    case st_final_lf:
      if (c != '\n') return fail("bad_chunk_end");
      state_ = st_done; ++i;
      break;
    case st_done:
    case st_bad:
      break;
    }
  }
  if (state_ == st_done) return {status::good, i, {}};
  return {status::need_more, i, {}};
}

} // namespace egressd::http
