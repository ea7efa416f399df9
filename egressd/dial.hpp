// egressd/dial.hpp — the decision pipeline (N3-N8), shared by the HTTP and
// SOCKS front ends so both apply exactly the same checks:
//
//   normalise -> deny list -> allowlist -> tunnel limit -> resolve (--resolve
//   or c-ares) -> classify every address -> connect to a checked address.
//
// Every denial is reported as a violation event before dial() returns, so the
// event is written before the client sees the refusal.
#pragma once

#include "connection.hpp"

#include "ccsb/host.hpp"

#include "net.hpp"

#include <optional>
#include <string>

namespace egressd {

struct target {
  std::optional<ccsb::host> host; // unset: the name did not normalise
  std::string raw;                // the host as the client wrote it
  std::uint16_t port{0};
  std::string text() const;       // "host:port" for events
};

enum class dial_status : std::uint8_t { connected, denied, limit, dns_failed, refused, unreachable, timed_out };

struct dial_result {
  dial_status st{dial_status::denied};
  std::string reason; // e.g. "not_allowlisted", "address: loopback 127.0.0.1"
};

// The name-only part (no DNS): the reason when denied, empty when allowed.
std::string name_denial(const ccsb::egress_policy& policy, const target& t, ccsb::decision& d);

asio::awaitable<dial_result> dial(std::shared_ptr<connection> c, const target& t);

} // namespace egressd
