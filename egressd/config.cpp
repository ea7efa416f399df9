#include "config.hpp"

#include "ccsb/protocol/egressd_args.hpp"

#include <picojson.h>

#include <fstream>
#include <sstream>

namespace egressd {

using ccsb::errc;
using ccsb::make_error;

const char* const kUsage =
    "usage: egressd [--config FILE.json] [options]\n"
    "  --http-listen ADDR       HTTP proxy listener: 127.0.0.1:PORT, [::1]:PORT (0 = pick) or unix:/path\n"
    "  --socks-listen ADDR      SOCKS5 listener, same forms\n"
    "  --listen-channel FD      also serve the listening sockets a sandbox hands over on this\n"
    "                           SOCK_SEQPACKET descriptor (ccsb/protocol/proxy_channel.hpp)\n"
    "  --allow PATTERN          add to the allowlist (repeatable)\n"
    "  --deny PATTERN           add to the deny list (repeatable; beats every allow)\n"
    "  --no-baseline            start from an empty allowlist\n"
    "  --open-network           allow every host the deny list lets through (the address checks\n"
    "                           still apply): the terminal profile's network in a microVM\n"
    "  --network on|off         off: every connection is denied\n"
    "  --allow-upstream CIDR    let resolved addresses in this range through the address check\n"
    "  --resolve NAME=IP        answer NAME with IP without DNS (repeatable)\n"
    "  --dns-server IP:PORT     DNS server instead of the system's\n"
    "  --events FD|PATH|-       where JSON-line events go (default: standard output)\n"
    "  --check HOST[:PORT]      print the name decision for HOST and exit 0/1 (2: bad input)\n"
    "  --socks-token TOKEN      require SOCKS5 username/password auth with this password\n"
    "  --socks-token-file PATH  the same, read from a file (keeps it out of argv)\n"
    "  --allow-non-loopback-listen  permit listeners on non-loopback addresses\n"
    "  --max-tunnels N          concurrent tunnels (default 4096; memory: egressd/README.md)\n"
    "  --max-header-bytes N     request head limit (default 16384)\n"
    "  --connect-timeout-ms N   upstream connect timeout (default 10000)\n"
    "  --dns-timeout-ms N       DNS timeout per try (default 5000)\n"
    "  --header-timeout-ms N    time allowed to send a request head (default 10000)\n"
    "  --idle-timeout-ms N      close tunnels idle this long, 0 = never (default 900000)\n"
    "  --drain-seconds N        on SIGTERM, let tunnels finish this long (default 5)\n"
    "  --confine LAYERS         confine egressd after start-up with these layers, comma-separated:\n"
    "                           privileges, landlock, seccomp, or all (default: all)\n"
    "  --no-confine             no confinement at all (debugging only; named in the ready line)\n"
    "  --user UID[:GID]         started as root, serve as this user (default: nobody; GID defaults to UID)\n"
    "                           and report the outcome as a testAttack event (repeatable)\n";

namespace {

ccsb::result<void> add_resolve(std::string_view spec, options& o) {
  auto eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    return make_error(errc::invalid_argument, "resolve", "expected NAME=IP, got '" + std::string(spec) + "'");
  o.resolve.emplace_back(std::string(spec.substr(0, eq)), std::string(spec.substr(eq + 1)));
  return ccsb::ok();
}

ccsb::result<unsigned> parse_layers(std::string_view v) {
  if (v == "all") return kConfineAll;
  unsigned layers = 0;
  while (!v.empty()) {
    auto comma = v.find(',');
    std::string_view name = v.substr(0, comma);
    unsigned bit = name == "privileges" ? kConfinePrivileges
                   : name == "landlock" ? kConfineLandlock
                   : name == "seccomp"  ? kConfineSeccomp
                                        : 0u;
    if (bit == 0)
      return make_error(errc::invalid_argument, "--confine",
                        "unknown layer '" + std::string(name) +
                            "' (expected privileges, landlock and/or seccomp, comma-separated, or all; "
                            "--no-confine for none)");
    layers |= bit;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
    if (v.empty()) return make_error(errc::invalid_argument, "--confine", "trailing comma");
  }
  if (layers == 0) return make_error(errc::invalid_argument, "--confine", "no layer named (--no-confine for none)");
  return layers;
}

ccsb::result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::io_error, "--config", "cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The token without a trailing newline; an empty token is an error (it
// would silently turn authentication off).
ccsb::result<std::string> read_token_file(const std::string& path, std::string_view field) {
  auto t = read_file(path);
  if (!t) return make_error(errc::io_error, std::string(field), "cannot read '" + path + "'");
  std::string token = std::move(*t);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return make_error(errc::invalid_argument, std::string(field), "'" + path + "' is empty");
  if (token.size() > 255) return make_error(errc::invalid_argument, std::string(field), "token longer than 255 bytes");
  return token;
}

} // namespace

ccsb::result<void> apply_json(std::string_view text, options& o) {
  picojson::value root;
  std::string err = picojson::parse(root, std::string(text));
  if (!err.empty()) return make_error(errc::invalid_argument, "config", "invalid JSON: " + err);
  if (!root.is<picojson::object>()) return make_error(errc::wrong_type, "config", "top level must be an object");
  auto wrong = [](const std::string& f, const char* want) {
    return make_error(errc::wrong_type, f, std::string("must be ") + want);
  };
  for (const auto& field : root.get<picojson::object>()) {
    // Named references, not a structured binding: the lambdas below capture
    // them, which clang 14 does not allow for bindings.
    const std::string& key = field.first;
    const picojson::value& v = field.second;
    auto str = [&](std::string& dst) -> ccsb::result<void> {
      if (!v.is<std::string>()) return wrong(key, "a string");
      dst = v.get<std::string>();
      return ccsb::ok();
    };
    auto boolean = [&](bool& dst) -> ccsb::result<void> {
      if (!v.is<bool>()) return wrong(key, "true or false");
      dst = v.get<bool>();
      return ccsb::ok();
    };
    auto number = [&](std::uint32_t& dst) -> ccsb::result<void> {
      if (!v.is<std::int64_t>() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 0xffffffffLL)
        return wrong(key, "a non-negative integer");
      dst = static_cast<std::uint32_t>(v.get<std::int64_t>());
      return ccsb::ok();
    };
    auto list = [&](std::vector<std::string>& dst) -> ccsb::result<void> {
      if (!v.is<picojson::array>()) return wrong(key, "an array of strings");
      std::size_t i = 0;
      for (const auto& e : v.get<picojson::array>()) {
        if (!e.is<std::string>()) return wrong(key + "[" + std::to_string(i) + "]", "a string");
        dst.push_back(e.get<std::string>());
        ++i;
      }
      return ccsb::ok();
    };
    ccsb::result<void> r;
    if (key == "httpListen") r = str(o.http_listen);
    else if (key == "socksListen") r = str(o.socks_listen);
    else if (key == "allow") r = list(o.rules.allow);
    else if (key == "deny") r = list(o.rules.deny);
    else if (key == "baseline") r = boolean(o.rules.baseline);
    else if (key == "network") r = boolean(o.rules.network_enabled);
    else if (key == "allowUpstream") r = list(o.allow_upstream);
    else if (key == "dnsServer") r = str(o.dns_server);
    else if (key == "events") {
      if (v.is<std::int64_t>()) o.events = std::to_string(v.get<std::int64_t>());
      else r = str(o.events);
    } else if (key == "socksToken") r = str(o.socks_token);
    else if (key == "socksTokenFile") {
      std::string path;
      r = str(path);
      if (r) {
        auto t = read_token_file(path, "socksTokenFile");
        if (!t) return std::move(t).err();
        o.socks_token = std::move(*t);
      }
    }
    else if (key == "allowNonLoopbackListen") r = boolean(o.allow_non_loopback_listen);
    else if (key == "maxTunnels") r = number(o.max_tunnels);
    else if (key == "maxHeaderBytes") r = number(o.max_header_bytes);
    else if (key == "connectTimeoutMs") r = number(o.connect_timeout_ms);
    else if (key == "dnsTimeoutMs") r = number(o.dns_timeout_ms);
    else if (key == "headerTimeoutMs") r = number(o.header_timeout_ms);
    else if (key == "idleTimeoutMs") r = number(o.idle_timeout_ms);
    else if (key == "drainSeconds") r = number(o.drain_seconds);
    else if (key == "resolve") {
      if (!v.is<picojson::object>()) return wrong(key, "an object {\"name\": \"ip\"}");
      for (const auto& [name, ip] : v.get<picojson::object>()) {
        if (!ip.is<std::string>()) return wrong("resolve." + name, "a string");
        o.resolve.emplace_back(name, ip.get<std::string>());
      }
    } else {
      return make_error(errc::invalid_argument, key, "unknown config field");
    }
    if (!r) return std::move(r).err();
  }
  return ccsb::ok();
}

namespace {

// The typed command line onto `o`: values replace what --config set, lists
// extend it.
ccsb::result<void> apply_args(const ccsb::protocol::egressd_args& a, options& o) {
  auto set = [](auto& dst, const auto& v) {
    if (v) dst = *v;
  };
  auto append = [](std::vector<std::string>& dst, const std::vector<std::string>& v) { dst.insert(dst.end(), v.begin(), v.end()); };
  set(o.http_listen, a.http_listen);
  set(o.socks_listen, a.socks_listen);
  set(o.listen_channel, a.listen_channel);
  append(o.rules.allow, a.allow);
  append(o.rules.deny, a.deny);
  if (a.no_baseline) o.rules.baseline = false;
  if (a.open_network) o.rules.open = true;
  set(o.rules.network_enabled, a.network);
  append(o.allow_upstream, a.allow_upstream);
  for (const auto& r : a.resolve)
    if (auto added = add_resolve(r, o); !added) return added;
  set(o.dns_server, a.dns_server);
  set(o.events, a.events);
  if (a.check) {
    o.check = true;
    o.check_target = *a.check;
  }
  set(o.socks_token, a.socks_token);
  if (a.socks_token_file) {
    auto t = read_token_file(*a.socks_token_file, "--socks-token-file");
    if (!t) return std::move(t).err();
    o.socks_token = std::move(*t);
  }
  if (a.allow_non_loopback_listen) o.allow_non_loopback_listen = true;
  set(o.max_tunnels, a.max_tunnels);
  set(o.max_header_bytes, a.max_header_bytes);
  set(o.connect_timeout_ms, a.connect_timeout_ms);
  set(o.dns_timeout_ms, a.dns_timeout_ms);
  set(o.header_timeout_ms, a.header_timeout_ms);
  set(o.idle_timeout_ms, a.idle_timeout_ms);
  set(o.drain_seconds, a.drain_seconds);
  if (a.no_confine) {
    o.confine_layers = 0;
    o.confine_how = "--no-confine";
  }
  if (a.confine) {
    auto layers = parse_layers(*a.confine);
    if (!layers) return std::move(layers).err();
    o.confine_layers = *layers;
    o.confine_how = "--confine " + *a.confine;
  }
  if (a.user) {
    o.user_set = true;
    o.user_uid = a.user->uid;
    o.user_gid = a.user->gid;
  }
  o.help = a.help;
  return ccsb::ok();
}

} // namespace

ccsb::result<options> parse_command_line(int argc, const char* const* argv) {
  auto a = ccsb::protocol::parse_egressd_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!a) return std::move(a).err();
  options o;
  if (a->config) { // first, so the command line overrides it
    auto text = read_file(*a->config);
    if (!text) return std::move(text).err();
    if (auto r = apply_json(*text, o); !r) {
      auto e = std::move(r).err();
      e.field = *a->config + ": " + e.field;
      return e;
    }
  }
  if (auto r = apply_args(*a, o); !r) return std::move(r).err();
  return o;
}

ccsb::result<listen_spec> parse_listen(std::string_view text, std::string_view field, bool allow_non_loopback) {
  listen_spec out;
  auto bad = [&](std::string why) {
    return make_error(errc::invalid_argument, std::string(field),
                      "'" + std::string(text) + "': " + why + " (expected 127.0.0.1:PORT, [::1]:PORT or unix:/path)");
  };
  if (text.starts_with("unix:")) {
    out.is_unix = true;
    out.path = text.substr(5);
    if (out.path.empty() || out.path.front() != '/') return bad("the socket path must be absolute");
    if (out.path.size() >= 108) return bad("socket path too long");
    return out;
  }
  std::size_t colon;
  std::string_view host;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return bad("bad address");
    host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing port");
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return bad("IPv6 address must be in brackets");
  }
  auto ip = parse_ip(host);
  if (!ip) return bad("not an IP address");
  out.address = *ip;
  std::string_view port = text.substr(colon + 1);
  if (port == "0") {
    out.port = 0;
  } else {
    auto p = ccsb::parse_port(port);
    if (!p) return bad("port must be decimal 0-65535 without leading zeros");
    out.port = *p;
  }
  if (!allow_non_loopback && classify(out.address) != addr_class::loopback)
    return bad("not a loopback address; pass --allow-non-loopback-listen to listen on it");
  return out;
}

ccsb::result<settings> compile(options opts) {
  settings s;
  auto pol = ccsb::egress_policy::compile(opts.rules, "allow", "deny");
  if (!pol) return std::move(pol).err();
  s.policy = std::move(*pol);
  for (std::size_t i = 0; i < opts.allow_upstream.size(); ++i) {
    auto c = parse_cidr(opts.allow_upstream[i]);
    if (!c) {
      auto e = std::move(c).err();
      e.field = "allowUpstream[" + std::to_string(i) + "]";
      return e;
    }
    s.addresses.allow_upstream.push_back(*c);
  }
  for (const auto& [name, ip] : opts.resolve) {
    auto h = ccsb::parse_host(name);
    if (!h || h->is_ip())
      return make_error(errc::invalid_argument, "resolve." + name, "not a host name");
    auto a = parse_ip(ip);
    if (!a) return make_error(errc::invalid_argument, "resolve." + name, "'" + ip + "' is not an IP address");
    s.resolve.emplace_back(*h, *a);
  }
  if (!opts.dns_server.empty()) {
    auto hp = ccsb::parse_host_port(opts.dns_server);
    if (!hp || !hp->host.is_ip())
      return make_error(errc::invalid_argument, "dnsServer", "'" + opts.dns_server + "': expected IP:PORT");
    s.dns_servers_csv = ccsb::format_host_port(hp->host, hp->port);
  }
  if (!opts.http_listen.empty()) {
    auto l = parse_listen(opts.http_listen, "httpListen", opts.allow_non_loopback_listen);
    if (!l) return std::move(l).err();
    s.http = std::move(*l);
  }
  if (!opts.socks_listen.empty()) {
    auto l = parse_listen(opts.socks_listen, "socksListen", opts.allow_non_loopback_listen);
    if (!l) return std::move(l).err();
    s.socks = std::move(*l);
  }
  if (!opts.check && !s.http && !s.socks && opts.listen_channel < 0)
    return make_error(errc::missing_field, "httpListen",
                      "no listener: give --http-listen, --socks-listen and/or --listen-channel");
  if (opts.max_header_bytes < 1024)
    return make_error(errc::invalid_argument, "maxHeaderBytes", "must be at least 1024");
  if (opts.socks_token.size() > 255)
    return make_error(errc::invalid_argument, "socksToken", "longer than 255 bytes (RFC 1929 limit)");
  if (opts.max_tunnels == 0) return make_error(errc::invalid_argument, "maxTunnels", "must be at least 1");
  if (opts.user_set && !(opts.confine_layers & kConfinePrivileges))
    return make_error(errc::invalid_argument, "--user", "needs the privileges layer (see --confine, --no-confine)");
  s.opts = std::move(opts);
  return s;
}

} // namespace egressd
