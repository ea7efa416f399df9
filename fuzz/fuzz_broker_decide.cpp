// X1: the broker's decision and the supervisor protocol on arbitrary input.
// Properties: nothing crashes; a denial always names an S6 action and the
// path; a P7 name in a root is never allowed, nor a name at or below an
// absent denied one, nor a placement over one's ancestor; non-normal paths are denied;
// every violation line round-trips (write_line -> parse_line). T2: any
// sockaddr bytes decode without a crash, and with the host's network a
// loopback, unspecified, link-local or metadata destination (in any IPv6
// spelling) or a host-local one is never allowed, except port 53 of a listed
// nameserver; resolv.conf text never crashes the reader. The git-directory
// rules never allow a new HEAD outside a .git below a root.
#include "ccsb/broker/decide.hpp"
#include "ccsb/broker/net_decide.hpp"
#include "ccsb/protocol/supervisor.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ccsb::broker;
  if (size == 0) return 0;
  const op o = static_cast<op>(data[0] % 4);
  std::string path(reinterpret_cast<const char*>(data + 1), size - 1);
  rule_set r{{"/w", "/w/sub", "/r/.git"}, {".env", "*.key", "*.pem"}, {"/w/.bashrc", "/w/.cargo/config.toml"}, true, true, false, {}};
  auto v = decide(r, o, path);
  if (!v.allowed) {
    if (v.action != "file-write-create" && v.action != "file-write*") std::abort();
    if (v.target != path) std::abort();
  }
  // The broker's own definition of a path it decides on (the property is about those paths).
  const bool normal = detail::is_normal_absolute(path);
  if (!normal && v.allowed) std::abort();
  if (normal && root_of(r, path)) {
    std::string_view last = std::string_view(path).substr(path.rfind('/') + 1);
    bool p7 = last == ".env" || (last.size() >= 4 && (last.ends_with(".key") || last.ends_with(".pem")));
    if (p7 && v.allowed && path != "/w" && path != "/w/sub" && path != "/r/.git") std::abort();
  }
  // P5: nothing at or below an absent denied name, nothing placed over an ancestor of one.
  auto over = decide_over_absent(r, o, path);
  for (const auto& d : r.absent_denied) {
    if (normal && ccsb::within(path, d) && v.allowed) std::abort();
    if (normal && path != d && ccsb::within(d, path) && over.allowed) std::abort();
  }
  if (!normal && over.allowed) std::abort();
  (void)decide_into_git(r, path);
  // Git directories by content: a new HEAD outside every .git below a root
  // is never allowed, a denial names the path; a tool configuration is
  // never allowed at any depth.
  const bool subtree = data[0] & 8;
  git_facts gf;
  gf.head_dirs = git_probes(r, path, subtree);
  gf.beside_git_names = data[0] & 16;
  gf.moves_head_dir = data[0] & 32;
  auto g = decide_git_dir(r, o, path, gf, subtree);
  if (!g.allowed && (g.target != path || (g.action != "file-write-create" && g.action != "file-write*"))) std::abort();
  if (!normal && g.allowed) std::abort();
  if (normal && root_of(r, path) && path != "/w" && path != "/w/sub" && path != "/r/.git") {
    std::string_view last = std::string_view(path).substr(path.rfind('/') + 1);
    if (o == op::create && last == "HEAD" && path.find("/.git/") == std::string::npos && g.allowed) std::abort();
    if (last == ".npmrc" && v.allowed) std::abort();
  }
  (void)remove_fails(data[0] & 1, {bool(data[0] & 2), bool(data[0] & 4), bool(data[0] & 8)});
  auto c = decide_unix_connect(r, path, data[0] & 1);
  if (!c.allowed && c.target != "unix:" + path) std::abort();
  // Protocol: the path as a violation target and reason round-trips; as a raw line it never crashes the parser.
  const std::string text = path.empty() ? "x" : path;
  std::string line = ccsb::protocol::encode(ccsb::protocol::violation{1, "file-write*", text, text});
  auto back = ccsb::protocol::decode_supervisor(line, 0);
  if (!back || std::get<ccsb::protocol::violation>(*back).reason != text) std::abort();
  (void)ccsb::protocol::decode_supervisor(path, 0);
  (void)ccsb::protocol::decode_launcher(path, data[0] % 4);
  // T2
  rule_set net = rule_set::none();
  net.host_net = true;
  net.dns = parse_resolv_conf(path);
  if (auto e = endpoint_of(path.data(), path.size())) {
    const bool local = data[0] & 2;
    auto d = decide_inet(net, *e, 6, local, {});
    bool dns = e->port == 53 && std::find(net.dns.begin(), net.dns.end(), e->addr) != net.dns.end();
    if (d.allowed && !dns && (classify(e->addr) != addr_class::ordinary || local)) std::abort();
    if (!d.allowed && (d.action != "network-outbound" || d.target != to_string(*e))) std::abort();
  }
  (void)decide_abstract(net, path, data[0] & 4);
  return 0;
}
