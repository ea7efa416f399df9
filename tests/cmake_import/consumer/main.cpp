// Packaging check: a consumer compiles a spec into a policy [P8] and asks the
// egress decision [N3] through the installed or embedded ccsb::ccsb target.
#include <ccsb/ccsb.hpp>

#include <cstdio>

int main() {
  auto spec = ccsb::parse_spec(R"({"sessionId":"s","workspaceId":"w","bindMounts":[{"hostPath":"/w"}]})");
  if (!spec) return 1;
  ccsb::host_facts facts;
  facts.home = "/home/u";
  facts.resolve = [](const std::string& p) { return std::optional<std::string>(p); }; // a host without symlinks
  facts.kind = [](const std::string&) { return ccsb::path_kind::missing; };            // ... and without .git files
  auto pol = ccsb::compile(*spec, ccsb::profile::spec, facts);
  if (!pol) return 2;
  auto egress = ccsb::egress_policy::compile({});
  if (!egress || !egress->decide("github.com").allowed) return 3;
  std::puts("consumer ok");
  return 0;
}
