// egressd — the per-session egress proxy (N1, N6-N8). Parse, validate, then
// either answer --check or run the server.
#include "config.hpp"
#include "dial.hpp"
#include "events.hpp"
#include "server.hpp"
#if CCSB_EGRESSD_TEST_ATTACKS
#include "test_attack.hpp"
#endif

#include <cstdio>
#include <string>
#include <vector>

namespace {

// --check HOST[:PORT]: the name-only decision as one JSON object.
int check(const egressd::settings& cfg) {
  std::string_view in = cfg.opts.check_target;
  if (in.empty()) {
    std::fprintf(stderr, "egressd: --check: empty host\n");
    return 2;
  }
  // "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 literal.
  std::string_view host_text = in, port_text;
  bool has_port = false;
  if (in.front() == '[') {
    auto close = in.find(']');
    if (close != std::string_view::npos && close + 1 < in.size()) {
      if (in[close + 1] != ':') {
        std::fprintf(stderr, "egressd: --check: expected [v6]:PORT, got '%s'\n", std::string(in).c_str());
        return 2;
      }
      host_text = in.substr(0, close + 1);
      port_text = in.substr(close + 2);
      has_port = true;
    }
  } else if (auto colon = in.find(':');
             colon != std::string_view::npos && in.find(':', colon + 1) == std::string_view::npos) {
    host_text = in.substr(0, colon);
    port_text = in.substr(colon + 1);
    has_port = true;
  } else if (colon != std::string_view::npos) {
    // Several colons: only a bare IPv6 literal (no port) is a host.
    std::uint8_t b[16];
    if (!ccsb::parse_ipv6(in, b)) {
      std::fprintf(stderr, "egressd: --check: '%s' is not HOST[:PORT] (bracket IPv6 literals: [::1]:443)\n",
                   std::string(in).c_str());
      return 2;
    }
  }
  std::uint16_t port = 443;
  if (has_port) {
    auto p = ccsb::parse_port(port_text);
    if (!p) {
      std::fprintf(stderr, "egressd: --check: bad port '%s' (decimal 1-65535 without leading zeros)\n",
                   std::string(port_text).c_str());
      return 2;
    }
    port = *p;
  }
  egressd::target t;
  t.raw = std::string(host_text);
  t.port = port;
  if (auto h = ccsb::parse_host(host_text)) t.host = *h;
  ccsb::decision d;
  std::string reason = egressd::name_denial(cfg.policy, t, d);
  std::string out = "{\"host\":";
  egressd::append_json_string(out, t.host ? t.host->str() : std::string_view(t.raw));
  out += ",\"port\":" + std::to_string(port);
  out += d.allowed ? ",\"allowed\":true" : ",\"allowed\":false";
  out += ",\"step\":";
  egressd::append_json_string(out, to_string(d.step));
  if (!d.pattern.empty()) {
    out += ",\"pattern\":";
    egressd::append_json_string(out, d.pattern);
  }
  if (!reason.empty()) {
    out += ",\"reason\":";
    egressd::append_json_string(out, reason);
  }
  out += "}\n";
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  // A host that does not normalise is bad input (exit 2), though the JSON
  // still says which step refused it.
  if (!t.host) return 2;
  return d.allowed ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
#if CCSB_EGRESSD_TEST_ATTACKS
  // egressd-attack (tests only): the --test-attack options leave argv
  // before the shipping parser sees the rest.
  std::vector<std::string> args(argv, argv + argc);
  auto attacks = egressd::take_test_attacks(args);
  if (!attacks) {
    std::fprintf(stderr, "egressd: %s\n", attacks.err().what().c_str());
    return 2;
  }
  std::vector<const char*> kept;
  for (const auto& a : args) kept.push_back(a.c_str());
  auto opts = egressd::parse_command_line(static_cast<int>(kept.size()), kept.data());
#else
  auto opts = egressd::parse_command_line(argc, argv);
#endif
  if (!opts) {
    std::fprintf(stderr, "egressd: %s\n%s", opts.err().what().c_str(), egressd::kUsage);
    return 2;
  }
  if (opts->help) {
    std::fputs(egressd::kUsage, stdout);
    return 0;
  }
  auto cfg = egressd::compile(std::move(*opts));
  if (!cfg) {
    std::fprintf(stderr, "egressd: %s\n", cfg.err().what().c_str());
    return 2;
  }
  if (cfg->opts.check) return check(*cfg);

  egressd::event_sink events;
  if (auto r = events.open(cfg->opts.events); !r) {
    std::fprintf(stderr, "egressd: %s\n", r.err().what().c_str());
    return 2;
  }
#if CCSB_EGRESSD_TEST_ATTACKS
  return egressd::run_server(*cfg, events, [&](egressd::event_sink& sink) {
    for (const auto& a : *attacks) sink.write(egressd::run_test_attack(a));
  });
#else
  return egressd::run_server(*cfg, events);
#endif
}
