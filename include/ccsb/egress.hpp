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
#include <utility>

namespace ccsb {

struct egress_rules {
  std::vector<std::string> allow; // SandboxSpec.egressAllowlist / --allow
  std::vector<std::string> deny;  // extra denies / --deny
  bool baseline{true};            // include kBaselineAllowedDomains + kGithubDomains
  bool network_enabled{true};     // false: empty allowlist (N6)
  // The terminal profile's open network (T2) where it goes through egressd
  // (the microvm backend): every host the deny list lets through is allowed;
  // egressd's address checks (no loopback, link-local or metadata address)
  // still apply to what it resolves to.
  bool open{false};
};

class egress_policy {
public:
  static result<egress_policy> compile(const egress_rules& rules, std::string_view allow_field = "egressAllowlist",
                                       std::string_view deny_field = "deny") {
    // Every list is parsed once, with its own field name for errors; the
    // session's allowlist is validated even when the network is off, so a
    // bad pattern is reported the same way in both cases.
    auto deny = parse_patterns(names_of(kBaselineDeniedDomains), "kBaselineDeniedDomains");
    if (!deny) return std::move(deny).err();
    auto extra_deny = parse_patterns(rules.deny, deny_field);
    if (!extra_deny) return std::move(extra_deny).err();
    auto session_allow = parse_patterns(rules.allow, allow_field);
    if (!session_allow) return std::move(session_allow).err();
    deny->insert(deny->end(), extra_deny->begin(), extra_deny->end());

    std::vector<domain_pattern> allow;
    if (rules.network_enabled) {
      if (rules.baseline) {
        for (auto [list, field] : {std::pair{names_of(kBaselineAllowedDomains), "kBaselineAllowedDomains"},
                                   std::pair{names_of(kGithubDomains), "kGithubDomains"}}) {
          auto base = parse_patterns(list, field);
          if (!base) return std::move(base).err();
          allow.insert(allow.end(), base->begin(), base->end());
        }
      }
      allow.insert(allow.end(), session_allow->begin(), session_allow->end());
    }

    egress_policy out;
    out.deny_ = domain_set::from_patterns(std::move(*deny));
    out.allow_ = domain_set::from_patterns(std::move(allow));
    out.network_enabled_ = rules.network_enabled;
    out.open_ = rules.open;
    return out;
  }

  decision decide(const host& h) const noexcept {
    domain_set::key k; // split and hashed once for both lists
    domain_set::prepare(h, k);
    if (const auto* p = deny_.match(k)) return {false, decision_step::deny_list, p->text};
    if (!network_enabled_) return {false, decision_step::network_disabled, {}};
    if (open_) return {true, decision_step::allowlist, "*"};
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
  template <std::size_t N> static std::vector<std::string_view> names_of(const listed_domain (&list)[N]) {
    std::vector<std::string_view> out;
    for (const auto& d : list) out.push_back(d.pattern);
    return out;
  }

  domain_set deny_;
  domain_set allow_;
  bool network_enabled_{true};
  bool open_{false};
};

} // namespace ccsb
