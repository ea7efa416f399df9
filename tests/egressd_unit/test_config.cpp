#include "config.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <vector>

using namespace egressd;

namespace {
ccsb::result<settings> from_args(std::vector<const char*> args) {
  args.insert(args.begin(), "egressd");
  auto o = parse_command_line(static_cast<int>(args.size()), args.data());
  if (!o) return std::move(o).err();
  return compile(std::move(*o));
}
} // namespace

TEST_CASE("N3: an invalid allow pattern is an error naming it", "[N3]") {
  auto s = from_args({"--http-listen", "127.0.0.1:0", "--allow", "ok.example", "--allow", "*.com"});
  REQUIRE_FALSE(s);
  CHECK(s.err().field == "allow[1]");
}

TEST_CASE("N1: listeners are loopback or unix unless explicitly allowed", "[N1]") {
  CHECK(from_args({"--http-listen", "127.0.0.1:0"}));
  CHECK(from_args({"--http-listen", "[::1]:8080"}));
  CHECK(from_args({"--socks-listen", "unix:/tmp/x.sock"}));
  CHECK_FALSE(from_args({"--http-listen", "0.0.0.0:8080"}));
  CHECK_FALSE(from_args({"--http-listen", "::1:8080"}));
  CHECK_FALSE(from_args({"--http-listen", "127.0.0.1:080"}));
  CHECK_FALSE(from_args({"--http-listen", "unix:relative.sock"}));
  CHECK(from_args({"--http-listen", "0.0.0.0:8080", "--allow-non-loopback-listen"}));
  CHECK_FALSE(from_args({})); // no listener at all
}

TEST_CASE("N6: --network off keeps the listeners and empties the allowlist", "[N6]") {
  auto s = from_args({"--http-listen", "127.0.0.1:0", "--network", "off", "--allow", "a.example"});
  REQUIRE(s);
  CHECK_FALSE(s->policy.network_enabled());
  CHECK_FALSE(s->policy.decide("a.example").allowed);
}

TEST_CASE("N8: the JSON config uses the command-line field names and rejects unknown ones", "[N8]") {
  options o;
  auto r = apply_json(R"({"httpListen":"127.0.0.1:0","allow":["a.example"],"deny":["b.example"],
                          "baseline":false,"network":true,"allowUpstream":["127.0.0.0/8"],
                          "resolve":{"a.example":"127.0.0.1"},"dnsServer":"127.0.0.1:53","events":"-"})", o);
  REQUIRE(r);
  CHECK(o.http_listen == "127.0.0.1:0");
  CHECK(o.rules.allow.size() == 1);
  CHECK_FALSE(o.rules.baseline);
  auto s = compile(o);
  REQUIRE(s);
  CHECK(s->policy.decide("a.example").allowed);
  CHECK_FALSE(s->policy.decide("b.example").allowed);

  options bad;
  auto e = apply_json(R"({"allow":"a.example"})", bad);
  REQUIRE_FALSE(e);
  CHECK(e.err().field == "allow");
  e = apply_json(R"({"alow":[]})", bad);
  REQUIRE_FALSE(e);
  CHECK(e.err().field == "alow");
  CHECK_FALSE(apply_json("{", bad));
}

TEST_CASE("N8: --resolve and --allow-upstream are validated", "[N8]") {
  CHECK_FALSE(from_args({"--http-listen", "127.0.0.1:0", "--resolve", "a.example=localhost"}));
  CHECK_FALSE(from_args({"--http-listen", "127.0.0.1:0", "--resolve", "a.example"}));
  CHECK_FALSE(from_args({"--http-listen", "127.0.0.1:0", "--allow-upstream", "127.0.0.1/8"}));
  CHECK(from_args({"--http-listen", "127.0.0.1:0", "--resolve", "a.example=127.0.0.1", "--allow-upstream",
                   "127.0.0.0/8"}));
}

TEST_CASE("N1: the SOCKS token can come from a file and must not be empty", "[N1]") {
  const char* path = "/tmp/egressd_unit_token";
  {
    std::FILE* f = std::fopen(path, "w");
    REQUIRE(f);
    std::fputs("s3cret\n", f);
    std::fclose(f);
  }
  auto s = from_args({"--socks-listen", "127.0.0.1:0", "--socks-token-file", path});
  REQUIRE(s);
  CHECK(s->opts.socks_token == "s3cret");
  {
    std::FILE* f = std::fopen(path, "w");
    REQUIRE(f);
    std::fclose(f);
  }
  CHECK_FALSE(from_args({"--socks-listen", "127.0.0.1:0", "--socks-token-file", path}));
  std::remove(path);
}
