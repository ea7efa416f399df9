#include "tunnel_check.hpp"

#include "tls_client_hello.hpp"

#include <algorithm>

namespace egressd {

namespace {

using http::is_tchar;

constexpr bool is_vchar(unsigned char c) noexcept { return c > 0x20 && c < 0x7f; }

std::string_view trim(std::string_view v) noexcept {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// What an event carries of a client's text.
std::string shown(std::string_view s) { return std::string(s.substr(0, 255)); }

} // namespace

bool tunnel_inspector::name_ok(const ccsb::host& h) const {
  if (h == checked_) return true;
  // A tunnel to an IP literal: a name the allowlist allows is accepted (the
  // client may name the site it dialled by address).
  return checked_.is_ip() && !h.is_ip() && policy_.decide(h).allowed;
}

// Why `text` (an absolute-form or authority-form request target, or a Host
// value) names something other than the checked target; empty when it names
// the target.
std::string_view tunnel_inspector::name_problem(std::string_view text) const {
  std::string_view auth = text;
  if (auto sep = auth.find("://"); sep != std::string_view::npos) {
    auth = auth.substr(sep + 3);
    auth = auth.substr(0, auth.find_first_of("/?#"));
  }
  if (auth.find('@') != std::string_view::npos) return "userinfo";
  http::authority a;
  if (!http::parse_authority(auth, port_, a).empty() || !a.host) return "malformed";
  if (a.port != port_) return "port";
  if (!name_ok(*a.host)) return "mismatch";
  return {};
}

tunnel_inspector::step tunnel_inspector::refuse(std::string reason) {
  st_ = st_refused;
  reason_ = std::move(reason);
  refused_at_ = requests_ > 0 ? head_start_ : 0;
  return step{verdict::refuse, refused_at_, reason_};
}

// Bytes that are not an HTTP request: the tunnel's first bytes are another
// protocol and pass; after a request they pass only if that request may
// have switched protocols (the server still reads HTTP otherwise, and
// would answer this with 400 or, if lenient, find a request in it).
tunnel_inspector::step tunnel_inspector::not_http() {
  if (requests_ > 0 && !switched_) return refuse("not_http_after_request_in_tunnel");
  st_ = st_pass;
  return step{verdict::pass, 0, {}};
}

// A complete header line of the current head: a reason to refuse, or empty.
std::string tunnel_inspector::header_line(std::string_view line) {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return "bad_header_line_in_tunnel";
  const std::string_view name = line.substr(0, colon);
  if (name.empty()) return "bad_header_line_in_tunnel";
  for (char ch : name)
    if (!is_tchar(static_cast<unsigned char>(ch))) return "bad_header_name_in_tunnel";
  const std::string_view value = trim(line.substr(colon + 1));
  if (http::iequals(name, "host")) {
    if (++hosts_ > 1) return "two_host_headers_in_tunnel";
    if (!name_problem(value).empty()) return "http_host_mismatch: " + shown(value);
  } else if (http::iequals(name, "content-length")) {
    if (has_length_) return "two_content_lengths_in_tunnel";
    has_length_ = true;
    if (value.empty() || value.size() > 18) return "bad_content_length_in_tunnel";
    body_left_ = 0;
    for (char ch : value) {
      if (ch < '0' || ch > '9') return "bad_content_length_in_tunnel";
      body_left_ = body_left_ * 10 + static_cast<std::uint64_t>(ch - '0');
    }
  } else if (http::iequals(name, "transfer-encoding")) {
    if (chunked_) return "two_transfer_encodings_in_tunnel";
    if (!http::iequals(value, "chunked")) return "transfer_encoding_in_tunnel";
    chunked_ = true;
  } else if (http::iequals(name, "connection")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view tok = trim(rest.substr(0, comma));
      if (http::iequals(tok, "content-length") || http::iequals(tok, "transfer-encoding"))
        return "connection_names_framing_in_tunnel";
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  } else if (http::iequals(name, "upgrade")) {
    upgrade_ = true;
  } else if (http::iequals(name, "expect")) {
    expect_ = true;
  }
  return {};
}

// The empty line ended the head: where its body ends, or why it is refused.
std::string_view tunnel_inspector::head_end() {
  if (has_length_ && chunked_) return "content_length_and_transfer_encoding_in_tunnel";
  // An HTTP/1.0 server may not know transfer codings and read the chunks
  // as the next request (RFC 9112 6.1: no client sends one to such a server).
  if (chunked_ && http10_) return "transfer_encoding_in_http10_in_tunnel";
  if (chunked_) {
    chunks_ = http::chunked_decoder{};
    st_ = st_chunked;
  } else if (has_length_ && body_left_ > 0) {
    probe_word_ = 0;
    st_ = expect_ ? st_probe : st_body;
    hold_ = pos_;
  } else {
    end_request();
  }
  return {};
}

void tunnel_inspector::end_request() {
  ++requests_;
  switched_ = upgrade_ || method_is_connect_;
  hosts_ = 0;
  has_length_ = chunked_ = expect_ = upgrade_ = sensitive_target_ = method_is_connect_ = http10_ = false;
  body_left_ = 0;
  st_ = st_start;
  head_start_ = pos_;
}

std::size_t tunnel_inspector::drop(std::size_t sent) noexcept {
  if (st_ != st_start && st_ != st_body && st_ != st_chunked) return 0;
  const std::size_t n = std::min(sent, pos_);
  pos_ -= n;
  head_start_ = head_start_ > n ? head_start_ - n : 0;
  return n;
}

tunnel_inspector::step tunnel_inspector::feed(std::string_view s) {
  if (st_ == st_pass) return step{verdict::pass, s.size(), {}};
  if (st_ == st_refused) return step{verdict::refuse, refused_at_, reason_};
  if (s.empty()) return step{};

  if (st_ == st_tls ||
      (st_ == st_start && requests_ == 0 && pos_ == 0 && static_cast<unsigned char>(s[0]) == 0x16)) {
    st_ = st_tls;
    if (s.size() < tls_need_) return step{};
    auto h = tls::parse_client_hello(s);
    switch (h.st) {
    case tls::status::need_more: tls_need_ = h.need; return step{};
    case tls::status::not_tls: break; // not reached: the first byte is 0x16
    case tls::status::bad: return refuse("tls_client_hello_" + std::string(h.reason));
    case tls::status::hello:
      if (h.has_server_name) {
        auto sni = ccsb::parse_host(h.server_name);
        if (!sni) return refuse("tls_server_name_malformed: " + shown(h.server_name));
        if (!name_ok(*sni)) return refuse("tls_server_name_mismatch: " + shown(sni->str()));
      }
      break;
    }
    st_ = st_pass;
    return step{verdict::pass, s.size(), {}};
  }

  auto pass_all = [&] {
    st_ = st_pass;
    return step{verdict::pass, s.size(), {}};
  };
  auto other = [&] {
    auto r = not_http();
    if (r.v == verdict::pass) r.release = s.size();
    return r;
  };
  // Past the bound a stream that still reads as an HTTP head is refused:
  // nothing unchecked may follow a head egressd could not read to its end.
  // A body has no bound.
  auto head_too_large = [&] {
    return st_ != st_body && st_ != st_chunked && st_ != st_probe && pos_ - head_start_ >= kMaxInspect;
  };
  bool holding = st_ == st_sensitive || st_ == st_line || st_ == st_probe ||
                 ((st_ == st_sp2 || st_ == st_version) && sensitive_target_);
  while (pos_ < s.size()) {
    if (head_too_large()) return refuse("tunnel_head_too_large");
    const auto c = static_cast<unsigned char>(s[pos_]);
    switch (st_) {
    case st_start:
      if (c == '\r' || c == '\n') { ++pos_; break; } // empty lines before a request are ignored by servers
      if (!is_tchar(c)) return other();
      st_ = st_method;
      token_ = pos_;
      method_begin_ = pos_;
      break;
    case st_method:
      if (is_tchar(c)) {
        // A first word longer than any method is not a request line (a
        // protocol that streams letters must not be held to the bound).
        if (pos_ - token_ >= kMaxMethod) return other();
        ++pos_;
        break;
      }
      if (c != ' ') return other();
      method_is_connect_ = http::iequals(s.substr(method_begin_, pos_ - method_begin_), "CONNECT");
      st_ = st_sp1;
      ++pos_;
      break;
    case st_sp1:
      if (c == ' ') { ++pos_; break; }
      if (!is_vchar(c)) return other();
      token_ = pos_;
      if (c == '/' || c == '*') {
        st_ = st_origin;
      } else { // absolute-form or authority-form: held until checked
        st_ = st_sensitive;
        hold_ = pos_;
        holding = true;
      }
      ++pos_;
      break;
    case st_origin:
    case st_sensitive:
      if (is_vchar(c)) { ++pos_; break; }
      // "/path" then a control byte or a line end (HTTP/0.9) is no other
      // protocol's greeting: a lenient server may still take it as a request.
      if (c != ' ') return st_ == st_origin ? refuse("bad_request_line_in_tunnel") : other();
      sensitive_target_ = st_ == st_sensitive;
      target_begin_ = token_;
      target_end_ = pos_;
      st_ = st_sp2;
      ++pos_;
      break;
    case st_sp2:
      if (c == ' ') { ++pos_; break; }
      token_ = pos_;
      st_ = st_version;
      break;
    case st_version: {
      static constexpr std::string_view kName = "HTTP/";
      const std::size_t k = pos_ - token_;
      if (k < kName.size()) {
        if (c != static_cast<unsigned char>(kName[k]) && c != static_cast<unsigned char>(kName[k] + 32 * (k < 4)))
          return other();
        ++pos_;
        break;
      }
      if ((c >= '0' && c <= '9') || c == '.') { ++pos_; break; }
      if (c != ' ' && c != '\r' && c != '\n') return refuse("http_version_in_tunnel");
      std::string_view version = s.substr(token_ + kName.size(), pos_ - token_ - kName.size());
      if (version == "2.0" || version == "2") return refuse("http2_in_tunnel");
      if (version != "1.1" && version != "1.0") return refuse("http_version_in_tunnel: " + shown(version));
      http10_ = version == "1.0";
      if (sensitive_target_) {
        std::string_view t = s.substr(target_begin_, target_end_ - target_begin_);
        if (!name_problem(t).empty()) return refuse("http_target_mismatch: " + shown(t));
      }
      holding = false;
      st_ = st_after_version;
      break;
    }
    case st_after_version:
      if (c == ' ') { ++pos_; break; }
      if (c == '\r') {
        if (pos_ + 1 >= s.size()) goto more;
        if (s[pos_ + 1] != '\n') return refuse("bare_cr_in_tunnel");
        ++pos_;
      } else if (c != '\n') {
        return refuse("bad_request_line_in_tunnel");
      }
      ++pos_;
      st_ = st_line_start;
      break;
    case st_line_start:
      if (c == '\r' || c == '\n') { // the empty line: the head is complete
        if (c == '\r') {
          if (pos_ + 1 >= s.size()) goto more;
          if (s[pos_ + 1] != '\n') return refuse("bare_cr_in_tunnel");
          ++pos_;
        }
        ++pos_;
        if (auto why = head_end(); !why.empty()) return refuse(std::string(why));
        holding = st_ == st_probe;
        break;
      }
      if (c == ' ' || c == '\t') return refuse("obs_fold_in_tunnel");
      token_ = pos_;
      hold_ = pos_;
      holding = true;
      st_ = st_line;
      break;
    case st_line: {
      if (c != '\r' && c != '\n') { ++pos_; break; }
      std::size_t end = pos_;
      if (c == '\r') {
        if (pos_ + 1 >= s.size()) goto more;
        if (s[pos_ + 1] != '\n') return refuse("bare_cr_in_tunnel");
        ++pos_;
      }
      ++pos_;
      if (auto why = header_line(s.substr(token_, end - token_)); !why.empty()) return refuse(std::move(why));
      holding = false;
      st_ = st_line_start;
      break;
    }
    case st_probe: // the first bytes of an Expect request's Content-Length body
      if ((c == '\r' || c == '\n') && probe_word_ == 0) { // empty lines: released, a server skips them
        hold_ = ++pos_;
        if (--body_left_ == 0) {
          end_request();
          holding = false;
        }
        break;
      }
      if (is_tchar(c) && probe_word_ < kMaxMethod) {
        ++probe_word_;
        ++pos_;
        if (--body_left_ == 0) {
          end_request();
          holding = false;
        }
        break;
      }
      if (c == ' ' && probe_word_ > 0) return refuse("request_line_in_expect_body_in_tunnel");
      st_ = st_body;
      holding = false;
      break;
    case st_body: {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, s.size() - pos_));
      pos_ += n;
      body_left_ -= n;
      if (body_left_ == 0) end_request();
      break;
    }
    case st_chunked: {
      auto r = chunks_.feed(s.substr(pos_));
      pos_ += r.consumed;
      if (r.st == http::status::bad) return refuse("bad_chunk_in_tunnel: " + std::string(r.reason));
      if (r.st == http::status::good) end_request();
      break;
    }
    case st_tls:
    case st_pass:
    case st_refused:
      return pass_all(); // not reached
    }
  }
more:
  if (head_too_large()) return refuse("tunnel_head_too_large");
  return step{verdict::need_more, holding ? hold_ : pos_, {}};
}

} // namespace egressd
