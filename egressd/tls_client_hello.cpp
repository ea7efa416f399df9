#include "tls_client_hello.hpp"

#include <array>

namespace egressd::tls {

namespace {

constexpr unsigned char kHandshake = 22;
constexpr unsigned char kClientHello = 1;
constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kMaxFragment = 16384; // RFC 8446 5.1: 2^14
constexpr std::uint16_t kServerName = 0;
constexpr std::uint16_t kEncryptedClientHello = 0xfe0d;

// A bounds-checked reader over the reassembled handshake message.
struct cursor {
  std::string_view d;
  bool ok{true};
  std::size_t left() const { return d.size(); }
  std::uint32_t num(std::size_t n) {
    if (!ok || d.size() < n) {
      ok = false;
      return 0;
    }
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = v << 8 | static_cast<unsigned char>(d[i]);
    d.remove_prefix(n);
    return v;
  }
  std::string_view bytes(std::size_t n) {
    if (!ok || d.size() < n) {
      ok = false;
      return {};
    }
    auto v = d.substr(0, n);
    d.remove_prefix(n);
    return v;
  }
};

hello_result bad(std::string_view why) {
  hello_result r;
  r.st = status::bad;
  r.reason = why;
  return r;
}

hello_result need(std::size_t total) {
  hello_result r;
  r.need = total;
  return r;
}

hello_result not_tls() {
  hello_result r;
  r.st = status::not_tls;
  return r;
}

// The ClientHello body (RFC 8446 4.1.2; the TLS 1.2 form has the same
// layout, extensions optional).
hello_result parse_body(std::string_view body) {
  cursor c{body};
  c.num(2);                      // legacy_version
  c.bytes(32);                   // random
  auto sid = c.num(1);
  if (sid > 32) return bad("bad_session_id");
  c.bytes(sid);
  auto suites = c.num(2);
  if (c.ok && (suites < 2 || suites % 2 != 0)) return bad("bad_cipher_suites");
  c.bytes(suites);
  auto comp = c.num(1);
  if (c.ok && comp < 1) return bad("bad_compression_methods");
  c.bytes(comp);
  if (!c.ok) return bad("truncated_client_hello");
  hello_result r;
  r.st = status::hello;
  if (c.left() == 0) return r; // no extensions: no server name
  auto ext_len = c.num(2);
  if (!c.ok || ext_len != c.left()) return bad("bad_extensions_length");
  // Each extension type at most once (RFC 8446 4.2). Types are 16 bits: a
  // bitmap of the ones seen.
  std::array<unsigned char, 8192> seen{};
  while (c.left() > 0) {
    auto type = static_cast<std::uint16_t>(c.num(2));
    auto len = c.num(2);
    std::string_view data = c.bytes(len);
    if (!c.ok) return bad("bad_extension_length");
    auto& byte = seen[type >> 3];
    const auto bit = static_cast<unsigned char>(1u << (type & 7));
    if (byte & bit) return bad("duplicate_extension");
    byte = static_cast<unsigned char>(byte | bit);
    if (type == kEncryptedClientHello) {
      r.ech = true;
      continue;
    }
    if (type != kServerName) continue;
    cursor s{data};
    auto list_len = s.num(2);
    if (!s.ok || list_len != s.left() || list_len == 0) return bad("bad_server_name_list");
    while (s.left() > 0) {
      auto name_type = s.num(1);
      auto name_len = s.num(2);
      std::string_view name = s.bytes(name_len);
      if (!s.ok) return bad("bad_server_name_list");
      if (name_type != 0) continue; // only host_name (0) is defined
      if (r.has_server_name) return bad("two_server_names");
      if (name.empty()) return bad("empty_server_name");
      r.has_server_name = true;
      r.server_name.assign(name);
    }
  }
  return r;
}

} // namespace

hello_result parse_client_hello(std::string_view stream, std::size_t max_bytes) {
  if (stream.empty()) return need(1);
  if (static_cast<unsigned char>(stream[0]) != kHandshake) return not_tls();
  std::string msg; // the handshake message, reassembled from the records' fragments
  std::size_t pos = 0;
  for (;;) {
    // Each record is looked at only once it is complete, so the outcome
    // does not depend on how the bytes were split.
    if (stream.size() < pos + kRecordHeader) return need(pos + kRecordHeader);
    auto type = static_cast<unsigned char>(stream[pos]);
    auto major = static_cast<unsigned char>(stream[pos + 1]);
    auto minor = static_cast<unsigned char>(stream[pos + 2]);
    std::size_t len = static_cast<std::size_t>(static_cast<unsigned char>(stream[pos + 3])) << 8 |
                      static_cast<unsigned char>(stream[pos + 4]);
    if (type != kHandshake) return bad("record_before_client_hello_ends");
    if (major != 3 || minor > 4) return bad("bad_record_version");
    if (len == 0 || len > kMaxFragment) return bad("bad_record_length");
    std::size_t end = pos + kRecordHeader + len;
    if (end > max_bytes) return bad("client_hello_too_large");
    if (stream.size() < end) return need(end);
    msg.append(stream.substr(pos + kRecordHeader, len));
    pos = end;
    if (msg.size() < 4) continue;
    if (static_cast<unsigned char>(msg[0]) != kClientHello) return bad("not_a_client_hello");
    std::size_t body_len = static_cast<std::size_t>(static_cast<unsigned char>(msg[1])) << 16 |
                           static_cast<std::size_t>(static_cast<unsigned char>(msg[2])) << 8 |
                           static_cast<unsigned char>(msg[3]);
    if (body_len + 4 > max_bytes) return bad("client_hello_too_large");
    if (msg.size() < body_len + 4) continue;
    // Nothing may follow the ClientHello in the record that ends it (the
    // client waits for the server's answer before its next handshake message).
    if (msg.size() > body_len + 4) return bad("data_after_client_hello");
    hello_result r = parse_body(std::string_view(msg).substr(4));
    if (r.st == status::hello) r.consumed = pos;
    return r;
  }
}

} // namespace egressd::tls
