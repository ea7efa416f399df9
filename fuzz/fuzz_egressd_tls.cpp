// Fuzzes egressd's ClientHello reader and tunnel inspector (N8: the TLS
// server name and the first HTTP request of a tunnel are checked against
// the checked target): no crash, and the outcome (status, reason, server
// name, ECH; the inspector's verdict and reason) is the same whether the
// bytes come all at once, byte by byte, or in input-derived pieces. The
// inspector only ever releases a growing prefix of what it was given, and
// never releases bytes it later refuses.
#include "tls_client_hello.hpp"
#include "tunnel_check.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace egressd;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

const ccsb::egress_policy& policy() {
  static const ccsb::egress_policy p = [] {
    ccsb::egress_rules rules;
    rules.allow = {"allowed.test", "*.allowed.test"};
    rules.baseline = false;
    return std::move(*ccsb::egress_policy::compile(rules));
  }();
  return p;
}

std::string hello_trace(const tls::hello_result& r) {
  std::string t = std::to_string(static_cast<int>(r.st)) + ":" + std::string(r.reason);
  if (r.st == tls::status::hello)
    t += ":" + std::to_string(r.consumed) + ":" + (r.has_server_name ? "sni=" + r.server_name : "nosni") +
         (r.ech ? ":ech" : "");
  return t;
}

// Feeds the stream in pieces the way the relay does: the hello reader is
// asked again only once it has the bytes it said it needs.
template <class Next>
std::string run_hello(std::string_view data, Next next_size) {
  std::size_t have = 0, need = 0;
  tls::hello_result r;
  while (have < data.size()) {
    std::size_t n = next_size();
    if (n == 0) n = 1;
    have += std::min(n, data.size() - have);
    if (have < need) continue;
    r = tls::parse_client_hello(data.substr(0, have));
    if (r.st != tls::status::need_more) break;
    check(r.need > have);
    need = r.need;
  }
  if (have == data.size() && data.size() < need) r = tls::parse_client_hello(data); // the final look
  return hello_trace(r);
}

template <class Next>
std::string run_inspector(std::string_view data, const ccsb::host& h, Next next_size) {
  tunnel_inspector insp(h, 443, policy());
  std::size_t have = 0, released = 0;
  tunnel_inspector::step s;
  while (have < data.size()) {
    std::size_t n = next_size();
    if (n == 0) n = 1;
    have += std::min(n, data.size() - have);
    s = insp.feed(data.substr(0, have));
    if (s.v == tunnel_inspector::verdict::need_more) {
      check(s.release <= have);
      check(s.release >= released);
      released = s.release;
      continue;
    }
    if (s.v == tunnel_inspector::verdict::pass) check(s.release == have);
    break;
  }
  return std::to_string(static_cast<int>(s.v)) + ":" + s.reason + ":" + std::to_string(released);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::uint32_t state = data[0] * 2654435761u + 7;
  auto random_size = [&] {
    state = state * 1103515245u + 12345u;
    return static_cast<std::size_t>((state >> 16) % 64);
  };
  auto all = [&] { return in.size(); };
  auto one = [] { return std::size_t{1}; };

  std::string a = run_hello(in, all);
  check(hello_trace(tls::parse_client_hello(in)) == a);
  check(run_hello(in, random_size) == a);
  check(run_hello(in, one) == a);

  for (const char* target : {"allowed.test", "127.0.0.1"}) {
    auto h = ccsb::parse_host(target);
    check(static_cast<bool>(h));
    // All at once, the verdict; in pieces, the same verdict (what was
    // released along the way may differ, the decision may not).
    auto whole = run_inspector(in, *h, all);
    auto verdict = whole.substr(0, whole.rfind(':'));
    auto pieces = run_inspector(in, *h, random_size);
    check(pieces.substr(0, pieces.rfind(':')) == verdict);
    auto bytes = run_inspector(in, *h, one);
    check(bytes.substr(0, bytes.rfind(':')) == verdict);
  }
  return 0;
}
