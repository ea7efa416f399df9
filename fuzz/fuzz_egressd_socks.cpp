// Fuzzes egressd's SOCKS5 and SOCKS4/4a parsers (N1, N7, N8): no crash, and
// the sequence of stage results (greeting, auth, request; or the SOCKS4
// request), including the target a refused request names, is the same
// whether the bytes come all at once, byte by byte, or in input-derived
// pieces.
#include "socks_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace egressd::socks;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Runs the server's stage machine and returns a trace of what it decided.
template <class Next>
std::string run(std::string_view data, bool token, Next next_size) {
  std::string buf, trace;
  std::size_t pos = 0;
  int stage = 0; // 0 greeting, 1 auth, 2 request, 3 done, 4 SOCKS4/4a request
  auto step = [&]() -> bool { // false: stop
    for (;;) {
      parse_result r;
      std::uint8_t method = 0;
      std::string_view user, pass;
      request req;
      if (stage == 0) r = parse_greeting(buf, token, method);
      else if (stage == 1) r = parse_auth(buf, user, pass);
      else if (stage == 2) r = parse_request(buf, req);
      else if (stage == 4) r = parse_socks4_request(buf, req);
      else return false;
      if (r.st == status::need_more) return true;
      if (stage == 0 && r.st == status::bad && r.reason == "socks4") { // the server's SOCKS4 path
        trace += "0:socks4;";
        stage = 4;
        continue;
      }
      check(r.consumed <= buf.size());
      trace += std::to_string(stage) + ":" + std::to_string(static_cast<int>(r.st)) + ":" +
               std::to_string(r.consumed) + ":" + std::string(r.reason) + ":" + std::to_string(r.reply);
      if (r.st == status::bad) {
        // A refusal that names its target (N7) names the same one however the bytes came.
        check(stage == 2 || stage == 4 || !r.target_named);
        if (r.target_named) trace += ":named:" + req.raw_host + ":" + std::to_string(req.port);
        return false;
      }
      if (stage == 0) {
        trace += ":m" + std::to_string(method);
        if (method == kMethodNone) return false;
        stage = method == kMethodUserPass ? 1 : 2;
      } else if (stage == 1) {
        trace += ":" + std::string(user) + "/" + std::string(pass);
        stage = 2;
      } else { // 2 or 4: a request
        trace += ":" + req.raw_host + ":" + std::to_string(req.port) + (req.host ? ":ok" : ":bad");
        if (req.host) check(!req.host->str().empty());
        stage = 3;
      }
      trace += ';';
      buf.erase(0, r.consumed);
    }
  };
  while (pos < data.size()) {
    std::size_t n = next_size();
    if (n == 0) n = 1;
    if (n > data.size() - pos) n = data.size() - pos;
    buf.append(data.substr(pos, n));
    pos += n;
    if (!step()) break;
  }
  return trace;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  bool token = data[0] & 1;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::uint32_t state = data[0] * 2654435761u + 7;
  auto random_size = [&] {
    state = state * 1103515245u + 12345u;
    return static_cast<std::size_t>((state >> 16) % 40);
  };
  auto all = [&] { return in.size(); };
  auto one = [] { return std::size_t{1}; };
  std::string a = run(in, token, all);
  check(run(in, token, random_size) == a);
  check(run(in, token, one) == a);
  std::string_view x = in.substr(0, in.size() / 2), y = in.substr(in.size() / 2);
  (void)constant_time_equals(x, y);
  return 0;
}
