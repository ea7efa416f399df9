// ccsb/protocol/egressd_args.hpp: egressd's command line. The launchers
// write it with to_argv and egressd parses it with parse_egressd_args, so
// what one writes the other must parse back to the same value, and every
// malformed command line is a typed error naming the option.
#include "ccsb/protocol/egressd_args.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ccsb;
using namespace ccsb::protocol;

namespace {

error refusal(const std::vector<std::string>& args) {
  auto r = parse_egressd_args(args);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  return r.err();
}

} // namespace

TEST_CASE("N1 N6: egressd's command line round-trips through its writer and parser", "[N1][N6][L3]") {
  egressd_args a;
  a.listen_channel = 4;
  a.allow = {"*.example.com", "api.test"};
  a.deny = {"bad.example.com"};
  a.no_baseline = true;
  a.allow_upstream = {"127.0.0.0/8", "::1/128"};
  a.resolve = {"a.test=127.0.0.1"};
  a.dns_server = "127.0.0.1:53";
  a.events = "3";
  a.user = egressd_user{2046820352, 2046820353};
  a.max_tunnels = 512;
  a.drain_seconds = 0;
  a.confine = "privileges,seccomp";
  a.http_listen = "127.0.0.1:0";
  a.socks_token_file = "/run/token";
  auto back = parse_egressd_args(to_argv(a));
  REQUIRE(back);
  CHECK(*back == a);
  egressd_args off;
  off.network = false;
  off.listen_channel = 4;
  off.events = "3";
  CHECK(to_argv(off) == std::vector<std::string>{"--listen-channel", "4", "--network", "off", "--events", "3"});
  // --name=VALUE and -h, as a person types them.
  auto typed = parse_egressd_args({"--http-listen=127.0.0.1:0", "--allow=x.test", "--allow", "y.test", "-h"});
  REQUIRE(typed);
  CHECK(typed->http_listen == std::optional<std::string>("127.0.0.1:0"));
  CHECK(typed->allow == std::vector<std::string>{"x.test", "y.test"});
  CHECK(typed->help);
}

TEST_CASE("N1 N6: egressd refuses an unknown, duplicate, incomplete or malformed option, naming it", "[N1][N6][L3]") {
  CHECK(refusal({"--frobnicate", "1"}).field == "--frobnicate");
  CHECK(refusal({"stray"}).field == "stray");
  CHECK(refusal({"--frobnicate"}).field == "--frobnicate");
  CHECK(refusal({"--allow"}).field == "--allow"); // no value
  CHECK(refusal({"--events", "3", "--events", "4"}).field == "--events");
  CHECK(refusal({"--max-tunnels", "1", "--max-tunnels=2"}).field == "--max-tunnels");
  CHECK(refusal({"--no-baseline", "--no-baseline"}).field == "--no-baseline");
  CHECK(refusal({"--no-baseline=yes"}).field == "--no-baseline");
  for (const char* bad : {"", "-1", "01", "x", "4294967296", "1e3"})
    CHECK(refusal({"--max-tunnels", bad}).field == "--max-tunnels");
  for (const char* bad : {"2", "65536", "x", ""}) CHECK(refusal({"--listen-channel", bad}).field == "--listen-channel");
  CHECK(refusal({"--network", "maybe"}).field == "--network");
  for (const char* bad : {"0", "0:1", "1:0", "4294967295", "1:", ":1", "a:b"}) CHECK(refusal({"--user", bad}).field == "--user");
  CHECK(refusal({"--confine", "all", "--no-confine"}).field == "--no-confine");
  CHECK(refusal({"--socks-token", "t", "--socks-token-file", "/f"}).field == "--socks-token-file");
}
