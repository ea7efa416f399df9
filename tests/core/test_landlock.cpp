// X2: the Landlock ruleset is computed from the policy (ccsb/confine/landlock.hpp).
#include "ccsb/confine/landlock.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ccsb;
using namespace ccsb::confine;

namespace {
policy two_mounts(network_kind net) {
  policy p;
  p.mounts = {{"/work/tree", "/work/tree", true}, {"/work/ref", "/work/ref", false}, {"/home/u", "/home/u", true}};
  p.network.kind = net;
  return p;
}
bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }
} // namespace

TEST_CASE("X2: writable mounts get read-write, read-only mounts and the system tree read-execute", "[X2]") {
  auto r = landlock_rules_for(two_mounts(network_kind::proxied), false);
  CHECK(has(r.read_write, "/work/tree"));
  CHECK(has(r.read_write, "/home/u"));
  CHECK(has(r.read_write, "/tmp"));
  CHECK(has(r.read_write, "/dev"));
  CHECK(has(r.read_exec, "/work/ref"));
  CHECK_FALSE(has(r.read_write, "/work/ref"));
  for (const char* sys : {"/usr", "/etc", "/run/ccsb", "/bin", "/lib"}) CHECK(has(r.read_exec, sys));
  CHECK(has(r.proc_like, "/proc"));
  // Nothing else: no rule for "/" beyond listing, none for another host path.
  for (const auto* v : {&r.read_exec, &r.read_write, &r.proc_like}) {
    CHECK_FALSE(has(*v, "/"));
    CHECK_FALSE(has(*v, "/root"));
    CHECK_FALSE(has(*v, "/work"));
  }
  CHECK(r.list_everywhere);
  CHECK(r.scope_abstract_unix);
  CHECK(r.scope_signal);
}

TEST_CASE("X2: TCP is restricted to the proxy ports only when a proxied session shares the host network namespace",
          "[X2][L3]") {
  CHECK_FALSE(landlock_rules_for(two_mounts(network_kind::proxied), false).restrict_tcp); // own namespace
  CHECK_FALSE(landlock_rules_for(two_mounts(network_kind::open), true).restrict_tcp);     // T2: open network
  auto shared = landlock_rules_for(two_mounts(network_kind::proxied), true);
  CHECK(shared.restrict_tcp);
  CHECK(shared.connect_ports == std::vector<std::uint16_t>{3128, 1080});
}

TEST_CASE("X2: ccsb-init's Landlock options round-trip and bad ones name the option", "[X2]") {
  auto r = landlock_rules_for(two_mounts(network_kind::proxied), true);
  auto args = to_init_args(r);
  landlock_rules back;
  back.read_exec.clear();
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    REQUIRE(is_landlock_option(args[i]));
    REQUIRE(parse_init_arg(back, args[i], args[i + 1]));
  }
  CHECK(back == r);
  landlock_rules x;
  for (auto [opt, val] : std::vector<std::pair<std::string, std::string>>{{"--landlock", "off"},
                                                                          {"--landlock-rx", "relative"},
                                                                          {"--landlock-rw", ""},
                                                                          {"--landlock-tcp", "open"},
                                                                          {"--landlock-connect", "0"},
                                                                          {"--landlock-connect", "65536"},
                                                                          {"--landlock-connect", "08"},
                                                                          {"--landlock-connect", "1x"},
                                                                          {"--landlock-connect", ""},
                                                                          {"--landlock-nope", "x"}}) {
    INFO(opt << " " << val);
    auto e = parse_init_arg(x, opt, val);
    REQUIRE_FALSE(e);
    CHECK(e.err().field == opt);
  }
}
