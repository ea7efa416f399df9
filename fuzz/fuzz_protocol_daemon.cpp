// Fuzz target: ccsbd's request lines and replies (S8,
// ccsb/protocol/daemon.hpp), the strict parser the daemon reads requests
// with, the request writer, the framer and the reply writers.
//
// Properties:
//   * no input crashes, throws or hangs the parser or the framer;
//   * whenever bytes parse as a request, write_request gives text that
//     parses back to an equal request, and writing that gives the same text;
//   * the error reply to a refused line is one line of valid UTF-8 JSON,
//     "event" first, whose error object reads back with the same field;
//   * fed in two chunks, the framer never yields a line longer than its
//     limit or holding a newline, and reports each overlong line once.
#include "ccsb/protocol/daemon.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace D = ccsb::protocol::daemon;

namespace {

void check_reply(const std::string& line) {
  if (line.find('\n') != std::string::npos || line.rfind("{\"event\":\"", 0) != 0) __builtin_trap();
  if (ccsb::protocol::egressd_events::invalid_utf8_at(line)) __builtin_trap();
  if (!ccsb::parse_json(line)) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), data ? size : 0);

  auto p = D::parse_request(text);
  if (p.body) {
    const D::request q{p.id, *p.body};
    const std::string once = D::write_request(q);
    auto back = D::parse_request(once);
    if (!back.body || !(D::request{back.id, *back.body} == q)) __builtin_trap();
    if (D::write_request(D::request{back.id, *back.body}) != once) __builtin_trap();
  } else {
    const std::string line = D::error_line({p.id, p.op, std::nullopt, std::nullopt}, p.body.err());
    check_reply(line);
    auto v = ccsb::parse_json(line);
    ccsb::error back;
    if (!ccsb::error_from_json(v->get<picojson::object>().at("error"), back) || back.field != p.body.err().field)
      __builtin_trap();
  }

  constexpr std::size_t kMax = 32;
  D::line_framer f(kMax);
  std::size_t overflows = 0, newlines = 0;
  for (char c : text) newlines += c == '\n';
  auto line = [&](std::string_view l) {
    if (l.empty() || l.size() > kMax || l.find('\n') != std::string_view::npos) __builtin_trap();
  };
  auto over = [&](std::size_t seen) {
    if (seen <= kMax) __builtin_trap();
    ++overflows;
  };
  const std::size_t cut = text.size() / 2;
  f.feed(text.substr(0, cut), line, over);
  f.feed(text.substr(cut), line, over);
  if (overflows > newlines + 1) __builtin_trap();
  return 0;
}
