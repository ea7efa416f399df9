// egressd/events.hpp — the JSON-line event stream (S6, N7, X3).
//
// One event per line, as ccsb/protocol/egressd_events.hpp writes it (the
// launcher parses it with the same header), written with a single write(2)
// so lines never interleave and are visible to a reader as soon as the call
// returns.
#pragma once

#include "ccsb/protocol/egressd_events.hpp"
#include "ccsb/result.hpp"

#include <string>
#include <string_view>

namespace egressd {

// A JSON string literal (ccsb's one escaping: UTF-8 kept, invalid bytes as
// U+FFFD, control characters as \uXXXX), for --check's output.
void append_json_string(std::string& out, std::string_view s);

class event_sink {
public:
  event_sink() = default;
  ~event_sink();
  event_sink(const event_sink&) = delete;
  event_sink& operator=(const event_sink&) = delete;

  // "-" (standard output), a descriptor number, or a file path (appended).
  ccsb::result<void> open(const std::string& where);

  void write(const ccsb::protocol::egressd_events::event& e);
  // {"event":"violation","action":"network-outbound","target":..,"reason":..}
  void violation(std::string_view target, std::string_view reason);

private:
  int fd_{1};
  bool owned_{false};
};

} // namespace egressd
