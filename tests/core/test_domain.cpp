// N3-N6: host normalisation, pattern forms, the compiled matcher and the
// egress decision.
#include "ccsb/egress.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ccsb;

namespace {

std::string norm(std::string_view in) {
  auto h = parse_host(in);
  return h ? std::string(h->str()) : std::string("<rejected>");
}

bool matches(std::vector<std::string> patterns, std::string_view host_text) {
  auto set = domain_set::compile(patterns);
  REQUIRE(set);
  auto h = parse_host(host_text);
  if (!h) return false;
  bool fast = set->match(*h) != nullptr;
  bool slow = set->match_linear(*h) != nullptr;
  CHECK(fast == slow); // the compiled matcher agrees with the reference
  return fast;
}

} // namespace

TEST_CASE("N3: host normalisation is strict and canonical", "[N3][N8]") {
  struct row { const char* in; const char* out; };
  const row rows[] = {
      {"Example.COM", "example.com"},
      {"example.com.", "example.com"},
      {"example.com..", "<rejected>"},
      {".example.com", "<rejected>"},
      {"a..b", "<rejected>"},
      {"", "<rejected>"},
      {".", "<rejected>"},
      {"-a.com", "<rejected>"},
      {"a-.com", "<rejected>"},
      {"a_b.com", "<rejected>"},
      {"a b.com", "<rejected>"},
      {"a%2e.com", "<rejected>"},
      {"ex\x01" "ample.com", "<rejected>"},
      {"exämple.com", "<rejected>"},
      {"xn--exmple-cua.com", "xn--exmple-cua.com"},
      {"[example.com]", "<rejected>"},
      {"example.com]", "<rejected>"},
      // IPv4: canonical dotted quad only
      {"127.0.0.1", "127.0.0.1"},
      {"169.254.169.254", "169.254.169.254"},
      {"2130706433", "<rejected>"},
      {"0x7f000001", "<rejected>"},
      {"0x7f.0.0.1", "<rejected>"},
      {"0177.0.0.1", "<rejected>"},
      {"127.1", "<rejected>"},
      {"127.0.0.01", "<rejected>"},
      {"256.0.0.1", "<rejected>"},
      {"1.2.3.4.5", "<rejected>"},
      {"example.123", "<rejected>"},
      {"example.0x1f", "<rejected>"},
      {"123.example.com", "123.example.com"},
      // IPv6
      {"[::1]", "::1"},
      {"::1", "::1"},
      {"[2001:DB8:0:0:0:0:0:1]", "2001:db8::1"},
      {"[2001:db8:0:0:1:0:0:1]", "2001:db8::1:0:0:1"},
      {"[0:0:0:0:0:0:0:0]", "::"},
      {"[::ffff:169.254.169.254]", "169.254.169.254"},
      {"[::ffff:a9fe:a9fe]", "169.254.169.254"},
      {"[::169.254.169.254]", "::a9fe:a9fe"},
      {"[fe80::1%eth0]", "<rejected>"},
      {"[1:2:3:4:5:6:7:8:9]", "<rejected>"},
      {"[1::2::3]", "<rejected>"},
      {"[12345::1]", "<rejected>"},
      {"[::ffff:1.2.3]", "<rejected>"},
  };
  for (const auto& r : rows) {
    INFO(r.in);
    CHECK(norm(r.in) == r.out);
  }
  CHECK(norm(std::string(63, 'a') + ".com") == std::string(63, 'a') + ".com");
  CHECK(norm(std::string(64, 'a') + ".com") == "<rejected>");
  std::string long_name;
  while (long_name.size() < 250) long_name += "abcdefghi.";
  CHECK(norm(long_name + "com") == long_name + "com"); // 253 bytes: the limit
  CHECK(norm(long_name + "com.") == long_name + "com");
  CHECK(norm(long_name + "comx") == "<rejected>");  // 254 bytes
}

TEST_CASE("N3: ports are plain decimal 1-65535", "[N3][N8]") {
  CHECK(parse_host_port("example.com:443"));
  CHECK(parse_host_port("[::1]:8080")->port == 8080);
  CHECK(parse_host_port("[::1]:8080")->host.str() == "::1");
  CHECK(parse_host_port("1.2.3.4:65535")->port == 65535);
  for (const char* bad : {"example.com", "example.com:", "example.com:0", "example.com:080", "example.com:65536",
                          "example.com:+80", "example.com:8a", "::1:443", "[::1]443", "[::1]", "example.com:99999"}) {
    INFO(bad);
    CHECK_FALSE(parse_host_port(bad));
  }
}

TEST_CASE("N3: pattern forms are validated when loaded", "[N3]") {
  struct row { const char* in; const char* canon; };
  const row ok[] = {
      {"example.com", "example.com"},
      {"Example.COM.", "example.com"},
      {"*.example.com", "*.example.com"},
      {"bedrock.*.amazonaws.com", "bedrock.*.amazonaws.com"},
      {"a.b.*.example.com", "a.b.*.example.com"},
      {"10.0.0.1", "10.0.0.1"},
      {"[2001:db8::1]", "2001:db8::1"},
  };
  for (const auto& r : ok) {
    INFO(r.in);
    auto p = parse_pattern(r.in);
    REQUIRE(p);
    CHECK(p->text == r.canon);
  }
  struct bad_row { const char* in; const char* says; };
  const bad_row bad[] = {
      {"", "empty"},
      {"*", "every host"},
      {"*.com", "at least two labels"},
      {"api.*.com", "at least two labels"},
      {"example.*", "trailing wildcard"},
      {"*.*.example.com", "more than one"},
      {"foo*.example.com", "whole label"},
      {"*foo.example.com", "whole label"},
      {"f*o.example.com", "whole label"},
      {"**.example.com", "more than one"},
      {"*.10.0.0.1", "numeric"},
      {"example.com:443", "ports"},
      {"https://example.com", "URL"},
      {"example.com/path", "'/'"},
      {"10.0.0.0/8", "'/'"},
      {"user@example.com", "'@'"},
      {"exa?ple.com", "'?'"},
      {"ex ample.com", "whitespace"},
      {"0x7f.1", "canonical"},
  };
  for (const auto& r : bad) {
    INFO(r.in);
    auto p = parse_pattern(r.in);
    REQUIRE_FALSE(p);
    CHECK(p.err().code == errc::invalid_pattern);
    CHECK_THAT(p.err().message, Catch::Contains(r.says));
  }
}

TEST_CASE("N3: a bad pattern names its list index", "[N3]") {
  std::vector<std::string> list{"example.com", "ok.example.org", "*.com"};
  auto set = domain_set::compile(list, "egressAllowlist");
  REQUIRE_FALSE(set);
  CHECK(set.err().field == "egressAllowlist[2]");
  CHECK(set.err().code == errc::invalid_pattern);
}

TEST_CASE("N3: matching table", "[N3]") {
  struct row { std::vector<std::string> patterns; std::string host; bool expect; };
  const std::vector<row> rows = {
      // exact, case, trailing dot
      {{"example.com"}, "example.com", true},
      {{"example.com"}, "EXAMPLE.com", true},
      {{"example.com"}, "example.com.", true},
      {{"example.com"}, "example.com..", false},
      {{"example.com"}, "www.example.com", false},
      // leading wildcard: any depth, never the apex
      {{"*.example.com"}, "a.example.com", true},
      {{"*.example.com"}, "a.b.example.com", true},
      {{"*.example.com"}, "x.y.z.example.com", true},
      {{"*.example.com"}, "example.com", false},
      {{"*.example.com"}, "A.Example.Com.", true},
      // look-alike suffixes
      {{"example.com"}, "evilexample.com", false},
      {{"*.example.com"}, "evilexample.com", false},
      {{"*.example.com"}, "a.evilexample.com", false},
      {{"example.com"}, "example.com.evil.net", false},
      {{"*.example.com"}, "a.example.com.evil.net", false},
      {{"*.example.com"}, "example.co", false},
      // middle wildcard: exactly one label
      {{"bedrock.*.amazonaws.com"}, "bedrock.us-east-1.amazonaws.com", true},
      {{"bedrock.*.amazonaws.com"}, "BEDROCK.eu-west-3.AMAZONAWS.com.", true},
      {{"bedrock.*.amazonaws.com"}, "bedrock.amazonaws.com", false},
      {{"bedrock.*.amazonaws.com"}, "bedrock.evil.attacker.amazonaws.com", false},
      {{"bedrock.*.amazonaws.com"}, "x.bedrock.us-east-1.amazonaws.com", false},
      {{"bedrock.*.amazonaws.com"}, "bedrockx.us-east-1.amazonaws.com", false},
      {{"bedrock.*.amazonaws.com"}, "bedrock.us-east-1.amazonaws.com.evil.net", false},
      {{"a.b.*.example.com"}, "a.b.c.example.com", true},
      {{"a.b.*.example.com"}, "b.c.example.com", false},
      // numeric spellings never reach a pattern
      {{"127.0.0.1"}, "127.0.0.1", true},
      {{"127.0.0.1"}, "2130706433", false},
      {{"127.0.0.1"}, "0x7f000001", false},
      {{"127.0.0.1"}, "0177.0.0.1", false},
      {{"127.0.0.1"}, "127.1", false},
      {{"127.0.0.1"}, "[::ffff:127.0.0.1]", true},
      // IPv6 canonical spelling
      {{"[2001:db8::1]"}, "[2001:DB8:0::1]", true},
      {{"2001:db8::1"}, "[2001:db8::2]", false},
      // a wildcard never matches an IP literal
      {{"*.example.com"}, "127.0.0.1", false},
      // empty and overlong labels, IDN, brackets
      {{"*.example.com"}, "a..example.com", false},
      {{"*.example.com"}, std::string(64, 'a') + ".example.com", false},
      {{"*.example.com"}, std::string(63, 'a') + ".example.com", true},
      {{"*.example.com"}, "bücher.example.com", false},
      {{"*.example.com"}, "xn--bcher-kva.example.com", true},
      {{"example.com"}, "[example.com]", false},
      // ports are not part of a host
      {{"example.com"}, "example.com:443", false},
  };
  for (const auto& r : rows) {
    INFO(r.patterns[0] << " vs " << r.host);
    CHECK(matches(r.patterns, r.host) == r.expect);
  }
}

TEST_CASE("N3: the most specific pattern is reported", "[N3]") {
  auto set = domain_set::compile(std::vector<std::string>{"*.example.com", "*.b.example.com", "a.b.example.com"});
  REQUIRE(set);
  CHECK(set->match(*parse_host("a.b.example.com"))->text == "a.b.example.com");
  CHECK(set->match(*parse_host("x.b.example.com"))->text == "*.b.example.com");
  CHECK(set->match(*parse_host("x.example.com"))->text == "*.example.com");
}

TEST_CASE("N3: the compiled matcher agrees with the linear scan at scale", "[N3]") {
  std::vector<std::string> patterns;
  for (int i = 0; i < 3000; ++i) {
    patterns.push_back("host" + std::to_string(i) + ".example" + std::to_string(i % 17) + ".com");
    patterns.push_back("*.zone" + std::to_string(i) + ".net");
    patterns.push_back("api.*.region" + std::to_string(i) + ".cloud.org");
  }
  auto set = domain_set::compile(patterns);
  REQUIRE(set);
  CHECK(set->size() == patterns.size());
  const char* probes[] = {"host5.example5.com", "host5.example6.com", "a.zone7.net", "a.b.zone7.net",
                          "zone7.net", "api.x.region9.cloud.org", "api.region9.cloud.org",
                          "api.x.y.region9.cloud.org", "www.zone2999.net", "host2999.example7.com"};
  for (auto p : probes) {
    INFO(p);
    auto h = parse_host(p);
    REQUIRE(h);
    CHECK((set->match(*h) != nullptr) == (set->match_linear(*h) != nullptr));
  }
  CHECK(set->match(*parse_host("a.b.zone7.net")));
  CHECK_FALSE(set->match(*parse_host("zone7.net")));
  CHECK_FALSE(set->match(*parse_host("host5.example6.com")));
}

TEST_CASE("N4: the allowlist is baseline plus GitHub plus the session's list", "[N4]") {
  auto pol = egress_policy::compile({{"*.internal.example.org"}, {}, true, true});
  REQUIRE(pol);
  CHECK(pol->decide("api.anthropic.com").allowed);
  CHECK(pol->decide("github.com").allowed);
  CHECK(pol->decide("raw.githubusercontent.com").allowed);
  CHECK(pol->decide("pypi.org").allowed);
  CHECK(pol->decide("bedrock-runtime.us-west-2.amazonaws.com").allowed);
  CHECK(pol->decide("git.internal.example.org").allowed);
  auto d = pol->decide("example.net");
  CHECK_FALSE(d.allowed);
  CHECK(d.step == decision_step::not_allowlisted);
  auto allowed = pol->decide("a.internal.example.org");
  CHECK(allowed.step == decision_step::allowlist);
  CHECK(allowed.pattern == "*.internal.example.org");
  CHECK(allowed.reason() == "allowlist: *.internal.example.org");

  auto bare = egress_policy::compile({{"only.example.com"}, {}, false, true});
  REQUIRE(bare);
  CHECK_FALSE(bare->decide("github.com").allowed);
  CHECK(bare->decide("only.example.com").allowed);
}

TEST_CASE("N4: every baseline entry is a valid pattern with a reason", "[N4][N5]") {
  auto check = [](const auto& list) {
    for (const auto& e : list) {
      INFO(e.pattern);
      CHECK(parse_pattern(e.pattern));
      CHECK_FALSE(e.why.empty());
    }
  };
  check(kBaselineAllowedDomains);
  check(kGithubDomains);
  check(kBaselineDeniedDomains);
}

TEST_CASE("N5: the deny list is checked first and always wins", "[N5]") {
  auto pol = egress_policy::compile({{"169.254.169.254", "metadata.google.internal", "*.ingest.sentry.io",
                                      "*.google.internal"},
                                     {"*.evil.example.com"}, true, true});
  REQUIRE(pol);
  for (const char* h : {"169.254.169.254", "[::ffff:169.254.169.254]", "metadata.google.internal",
                        "METADATA.GOOGLE.INTERNAL.", "o1.ingest.sentry.io", "fd00:ec2::254", "100.100.100.200",
                        "localhost", "statsig.anthropic.com"}) {
    INFO(h);
    auto d = pol->decide(h);
    CHECK_FALSE(d.allowed);
    CHECK(d.step == decision_step::deny_list);
  }
  auto extra = pol->decide("x.evil.example.com");
  CHECK(extra.step == decision_step::deny_list);
  CHECK(extra.reason() == "deny_list: *.evil.example.com");
  // An allow of the same host does not beat the extra deny.
  auto pol2 = egress_policy::compile({{"x.example.com"}, {"x.example.com"}, false, true});
  REQUIRE(pol2);
  CHECK(pol2->decide("x.example.com").step == decision_step::deny_list);
  CHECK(pol->decide("other.google.internal").allowed);
}

TEST_CASE("N6: networkEnabled false denies everything, allowlist or not", "[N6]") {
  auto pol = egress_policy::compile({{"example.com"}, {}, true, false});
  REQUIRE(pol);
  CHECK(pol->allowlist().empty());
  for (const char* h : {"example.com", "github.com", "api.anthropic.com"}) {
    auto d = pol->decide(h);
    CHECK_FALSE(d.allowed);
    CHECK(d.step == decision_step::network_disabled);
  }
  // The deny list still names its reason first.
  CHECK(pol->decide("169.254.169.254").step == decision_step::deny_list);
  // A bad pattern is still an error when the network is off.
  CHECK_FALSE(egress_policy::compile({{"*.com"}, {}, true, false}));
}

TEST_CASE("N8: malformed hosts are denied with their step", "[N8][N3]") {
  auto pol = egress_policy::compile({{"*.example.com"}, {}, false, true});
  REQUIRE(pol);
  for (const char* h : {"", "a..example.com", "0x7f000001", "exa mple.com", "[a.example.com]", "a.example.com..",
                        "a_b.example.com", "x.example.com\n"}) {
    INFO(h);
    auto d = pol->decide(h);
    CHECK_FALSE(d.allowed);
    CHECK(d.step == decision_step::malformed);
  }
}
