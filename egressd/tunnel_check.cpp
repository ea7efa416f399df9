#include "tunnel_check.hpp"

#include "http_parser.hpp"
#include "tls_client_hello.hpp"

namespace egressd {

namespace {

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
  return step{verdict::refuse, 0, reason_};
}

tunnel_inspector::step tunnel_inspector::feed(std::string_view s) {
  if (st_ == st_pass) return step{verdict::pass, s.size(), {}};
  if (st_ == st_refused) return step{verdict::refuse, 0, reason_};
  if (s.empty()) return step{};

  if (st_ == st_tls || (st_ == st_start && pos_ == 0 && static_cast<unsigned char>(s[0]) == 0x16)) {
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
  bool holding = st_ == st_sensitive || st_ == st_line ||
                 ((st_ == st_sp2 || st_ == st_version) && sensitive_target_);
  while (pos_ < s.size()) {
    // Past the bound a stream that still reads as an HTTP head is refused:
    // nothing unchecked may follow a head egressd could not read to its end.
    if (pos_ >= kMaxInspect) return refuse("tunnel_head_too_large");
    const auto c = static_cast<unsigned char>(s[pos_]);
    switch (st_) {
    case st_start:
      if (c == '\r' || c == '\n') { ++pos_; break; } // empty lines before a request are ignored by servers
      if (!is_tchar(c)) return pass_all();
      st_ = st_method;
      token_ = pos_;
      break;
    case st_method:
      if (is_tchar(c)) {
        // A first word longer than any method is not a request line (a
        // protocol that streams letters must not be held to the bound).
        if (pos_ - token_ >= kMaxMethod) return pass_all();
        ++pos_;
        break;
      }
      if (c != ' ') return pass_all();
      st_ = st_sp1;
      ++pos_;
      break;
    case st_sp1:
      if (c == ' ') { ++pos_; break; }
      if (!is_vchar(c)) return pass_all();
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
      if (c != ' ') return pass_all(); // not an HTTP/1.x request line
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
          return pass_all();
        ++pos_;
        break;
      }
      if ((c >= '0' && c <= '9') || c == '.') { ++pos_; break; }
      if (c != ' ' && c != '\r' && c != '\n') return refuse("http_version_in_tunnel");
      std::string_view version = s.substr(token_ + kName.size(), pos_ - token_ - kName.size());
      if (version == "2.0" || version == "2") return refuse("http2_in_tunnel");
      if (version != "1.1" && version != "1.0") return refuse("http_version_in_tunnel: " + shown(version));
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
        }
        return pass_all();
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
      std::string_view line = s.substr(token_, end - token_);
      if (auto colon = line.find(':'); colon != std::string_view::npos &&
                                       http::iequals(trim(line.substr(0, colon)), "host")) {
        if (++hosts_ > 1) return refuse("two_host_headers_in_tunnel");
        std::string_view value = trim(line.substr(colon + 1));
        if (!name_problem(value).empty()) return refuse("http_host_mismatch: " + shown(value));
      }
      holding = false;
      st_ = st_line_start;
      break;
    }
    case st_tls:
    case st_pass:
    case st_refused:
      return pass_all(); // not reached
    }
  }
more:
  if (pos_ >= kMaxInspect) return refuse("tunnel_head_too_large");
  return step{verdict::need_more, holding ? hold_ : pos_, {}};
}

} // namespace egressd
