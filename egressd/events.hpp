// egressd/events.hpp — the JSON-line event stream (S6, N7).
//
// One event per line, written with a single write(2) so lines never
// interleave and are visible to a reader as soon as the call returns.
#pragma once

#include "ccsb/result.hpp"

#include <string>
#include <string_view>

namespace egressd {

// JSON string escaping (control bytes, quotes, backslash; other bytes >= 0x80
// are escaped as \u00XX so the line stays valid UTF-8 whatever a client sent).
void append_json_string(std::string& out, std::string_view s);

class event_sink {
public:
  event_sink() = default;
  ~event_sink();
  event_sink(const event_sink&) = delete;
  event_sink& operator=(const event_sink&) = delete;

  // "-" (standard output), a descriptor number, or a file path (appended).
  ccsb::result<void> open(const std::string& where);

  // {"event":"ready"[,"http":..][,"socks":..][,"listenChannel":FD]<extra>};
  // extra: further fields, each starting with a comma (the confinement, X3).
  void ready(std::string_view http, std::string_view socks, int listen_channel = -1, std::string_view extra = {});
  void violation(std::string_view target, std::string_view reason);
  void write_line(std::string line); // adds the newline

private:
  int fd_{1};
  bool owned_{false};
};

} // namespace egressd
