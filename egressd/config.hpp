// egressd/config.hpp — options from the command line and the JSON config
// file (same field names), validated before anything starts.
//
// Parse first, then run (bubblewrap habit): parse_command_line() returns a
// complete `options` or an error naming the offending option or field;
// compile() turns it into the immutable `settings` the server runs with.
#pragma once

#include "address_class.hpp"

#include "ccsb/egress.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace egressd {

// Confinement layers (confine.hpp, X3).
inline constexpr unsigned kConfinePrivileges = 1u << 0;
inline constexpr unsigned kConfineLandlock = 1u << 1;
inline constexpr unsigned kConfineSeccomp = 1u << 2;
inline constexpr unsigned kConfineAll = kConfinePrivileges | kConfineLandlock | kConfineSeccomp;

struct options {
  std::string http_listen;  // httpListen
  std::string socks_listen; // socksListen
  int listen_channel{-1};   // --listen-channel FD (command line only): listeners handed over by a sandbox
  ccsb::egress_rules rules; // allow, deny, baseline, network
  std::vector<std::string> allow_upstream;                   // allowUpstream
  std::vector<std::pair<std::string, std::string>> resolve;  // resolve {"name": "ip"}
  std::string dns_server;   // dnsServer "IP:PORT"
  std::string events{"-"};  // events: "-", a file descriptor number or a path
  std::string socks_token;  // socksToken: require RFC 1929 auth with this password
  bool allow_non_loopback_listen{false}; // allowNonLoopbackListen
  std::uint32_t max_tunnels{4096};       // maxTunnels (sized by memory: egressd/README.md)
  std::uint32_t max_header_bytes{16384}; // maxHeaderBytes
  std::uint32_t connect_timeout_ms{10000}; // connectTimeoutMs
  std::uint32_t dns_timeout_ms{5000};      // dnsTimeoutMs
  std::uint32_t header_timeout_ms{10000};  // headerTimeoutMs
  std::uint32_t idle_timeout_ms{900000};   // idleTimeoutMs (0 = none)
  std::uint32_t drain_seconds{5};          // drainSeconds

  // Command line only: --confine LAYERS / --no-confine, --user UID[:GID].
  unsigned confine_layers{kConfineAll};
  std::string confine_how{"default"};
  bool user_set{false};
  std::uint32_t user_uid{0}, user_gid{0};

  bool check{false};        // --check HOST[:PORT]
  std::string check_target;
  bool help{false};
};

// Reads the JSON config text into `opts` (fields it names override; lists
// append). Errors name the field, e.g. "allow[2]".
ccsb::result<void> apply_json(std::string_view text, options& opts);

// argv -> options: parsed strictly by ccsb/protocol/egressd_args.hpp (the
// launcher writes it with the same header); --config FILE is applied first,
// so command-line options override or extend the file.
ccsb::result<options> parse_command_line(int argc, const char* const* argv);

struct listen_spec {
  bool is_unix{false};
  std::string path;        // unix
  ip_address address;      // tcp
  std::uint16_t port{0};   // tcp, 0 = pick one
};

ccsb::result<listen_spec> parse_listen(std::string_view text, std::string_view field, bool allow_non_loopback);

struct settings {
  options opts;
  ccsb::egress_policy policy;
  address_policy addresses; // allow-upstream (self is filled in at start-up)
  std::vector<std::pair<ccsb::host, ip_address>> resolve;
  std::optional<listen_spec> http;
  std::optional<listen_spec> socks;
  std::string dns_servers_csv; // for ares_set_servers_ports_csv
};

ccsb::result<settings> compile(options opts);

extern const char* const kUsage;

} // namespace egressd
