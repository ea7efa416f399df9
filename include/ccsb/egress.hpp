// ccsb/egress.hpp — a session's compiled egress rules (N3-N6).
//
// egress_policy = kBaselineDeniedDomains ∪ extra denies (checked first,
// always win) and kBaselineAllowedDomains ∪ kGithubDomains ∪ the session's
// allowlist. networkEnabled: false empties the allowlist (every connection
// is denied and reported). Compiled once per session; decide() never
// allocates and never throws.
#pragma once

#include "ccsb/baseline.hpp"
#include "ccsb/domain.hpp"
#include "ccsb/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

struct egress_rules {
  std::vector<std::string> allow; // SandboxSpec.egressAllowlist / --allow
  std::vector<std::string> deny;  // extra denies / --deny
  bool baseline{true};            // include kBaselineAllowedDomains + kGithubDomains
  bool network_enabled{true};     // false: empty allowlist (N6)
};

class egress_policy {
public:
  static result<egress_policy> compile(const egress_rules& rules, std::string_view allow_field = "egressAllowlist",
                                       std::string_view deny_field = "deny") {
    std::vector<std::string_view> deny;
    for (const auto& d : kBaselineDeniedDomains) deny.push_back(d.pattern);
    auto base_deny = domain_set::compile(deny, "kBaselineDeniedDomains");
    if (!base_deny) return std::move(base_deny).err();
    auto extra_deny = domain_set::compile(rules.deny, deny_field);
    if (!extra_deny) return std::move(extra_deny).err();
    // Validate the session's allowlist even when the network is off, so a bad
    // pattern is reported the same way in both cases.
    auto session_allow = domain_set::compile(rules.allow, allow_field);
    if (!session_allow) return std::move(session_allow).err();

    std::vector<std::string> allow;
    if (rules.network_enabled) {
      if (rules.baseline) {
        for (const auto& d : kBaselineAllowedDomains) allow.emplace_back(d.pattern);
        for (const auto& d : kGithubDomains) allow.emplace_back(d.pattern);
      }
      allow.insert(allow.end(), rules.allow.begin(), rules.allow.end());
    }
    for (const auto& p : extra_deny->patterns()) deny.push_back(p.text);

    egress_policy out;
    auto d = domain_set::compile(deny, deny_field);
    if (!d) return std::move(d).err();
    auto a = domain_set::compile(allow, allow_field);
    if (!a) return std::move(a).err();
    out.deny_ = std::move(*d);
    out.allow_ = std::move(*a);
    out.network_enabled_ = rules.network_enabled;
    return out;
  }

  decision decide(const host& h) const noexcept {
    domain_set::key k; // split and hashed once for both lists
    domain_set::prepare(h, k);
    if (const auto* p = deny_.match(k)) return {false, decision_step::deny_list, p->text};
    if (!network_enabled_) return {false, decision_step::network_disabled, {}};
    if (const auto* p = allow_.match(k)) return {true, decision_step::allowlist, p->text};
    return {false, decision_step::not_allowlisted, {}};
  }

  // Normalises first; a malformed host is denied with step `malformed`.
  decision decide(std::string_view raw_host) const {
    auto h = parse_host(raw_host);
    if (!h) return {false, decision_step::malformed, {}};
    return decide(*h);
  }

  const domain_set& allowlist() const noexcept { return allow_; }
  const domain_set& denylist() const noexcept { return deny_; }
  bool network_enabled() const noexcept { return network_enabled_; }

private:
  domain_set deny_;
  domain_set allow_;
  bool network_enabled_{true};
};

} // namespace ccsb
