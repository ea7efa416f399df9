// Fuzzes egressd's HTTP head parser and chunked decoder (N8): no crash, and
// the outcome — including the target a refused request names (N7) — never
// depends on how the bytes arrive (all at once, byte by byte, or in pieces
// whose sizes come from the input).
#include "http_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace egressd::http;

namespace {

struct outcome {
  status st;
  std::size_t consumed;
  std::string reason;
  std::string target;
  bool operator==(const outcome&) const = default;
};

// Feeds `data` in pieces; `next_size` gives each piece's size.
template <class Next, class Parse>
outcome feed(std::string_view data, Next next_size, Parse parse) {
  std::string buf;
  std::size_t pos = 0;
  outcome last{status::need_more, 0, {}, {}};
  while (pos < data.size()) {
    std::size_t n = next_size();
    if (n == 0) n = 1;
    if (n > data.size() - pos) n = data.size() - pos;
    buf.append(data.substr(pos, n));
    pos += n;
    last = parse(std::string_view(buf));
    if (last.st != status::need_more) break;
  }
  return last;
}

void check(bool ok) {
  if (!ok) std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::uint8_t seed = data[0];
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  limits lim;
  lim.max_line = 512 + seed;   // small limits so the fuzzer reaches them
  lim.max_head = 2048 + 8 * seed;
  lim.max_headers = 8 + seed % 32;

  auto req = [&](std::string_view b) {
    request_head h;
    auto r = parse_request(b, lim, h);
    if (r.st == status::good) {
      check(r.consumed <= b.size() && r.consumed >= 4);
      check(b.substr(r.consumed - 4, 4) == "\r\n\r\n");
      if (!h.is_connect) check(!h.path.empty());
    }
    // Only a refusal names a target, always as host:port.
    if (r.st != status::bad) check(r.target.empty());
    if (!r.target.empty()) check(r.target.find(':') != std::string::npos && r.target.size() < 400);
    return outcome{r.st, r.consumed, std::string(r.reason), r.target};
  };
  auto resp = [&](std::string_view b) {
    response_head h;
    auto r = parse_response(b, lim, h);
    check(r.target.empty());
    return outcome{r.st, r.consumed, std::string(r.reason), {}};
  };

  outcome whole = req(in);
  std::uint32_t state = seed * 2654435761u + 1;
  auto random_size = [&] {
    state = state * 1103515245u + 12345u;
    return static_cast<std::size_t>((state >> 16) % 64);
  };
  auto one = [] { return std::size_t{1}; };
  // Split-insensitivity: a prefix decides no differently from the whole.
  outcome pieces = feed(in, random_size, req);
  outcome bytes = feed(in, one, req);
  if (whole.st != status::need_more) {
    check(pieces == whole);
    check(bytes == whole);
  } else {
    check(pieces.st == status::need_more && bytes.st == status::need_more);
  }
  // The incremental scanner: parsing only when it says so decides exactly
  // as parsing after every piece.
  {
    request_head_scanner scanner;
    std::string buf;
    outcome gated{status::need_more, 0, {}, {}};
    std::uint32_t st2 = seed * 2246822519u + 3;
    for (std::size_t pos = 0; pos < in.size();) {
      st2 = st2 * 1103515245u + 12345u;
      std::size_t n = (st2 >> 16) % 64 + 1;
      if (n > in.size() - pos) n = in.size() - pos;
      buf.append(in.substr(pos, n));
      pos += n;
      const bool worth = scanner.worth_parsing(buf, lim);
      outcome now = req(buf);
      if (!worth) check(now.st == status::need_more); // the scanner never skips an answer
      if (worth) gated = now;
      if (now.st != status::need_more) break;
    }
    if (whole.st != status::need_more) check(gated == whole);
  }
  outcome rwhole = resp(in);
  outcome rpieces = feed(in, random_size, resp);
  if (rwhole.st != status::need_more) check(rpieces == rwhole);

  // The chunked decoder: the same total consumption and final state.
  chunked_decoder a, b;
  auto sa = a.feed(in);
  std::size_t consumed = 0;
  status sb = status::need_more;
  std::string_view reason_b;
  for (std::size_t pos = 0; pos < in.size() && sb == status::need_more;) {
    std::size_t n = random_size() + 1;
    if (n > in.size() - pos) n = in.size() - pos;
    auto s = b.feed(in.substr(pos, n));
    consumed += s.consumed;
    sb = s.st;
    reason_b = s.reason;
    if (s.st == status::need_more) check(s.consumed == n);
    pos += n;
  }
  check(sa.st == sb);
  if (sa.st == status::good) check(sa.consumed == consumed);
  if (sa.st == status::bad) check(sa.reason == reason_b);
  return 0;
}
