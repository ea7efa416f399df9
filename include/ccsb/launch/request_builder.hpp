// ccsb/launch/request_builder.hpp — from a spec to a session_request: what
// every client of the session API (ccsb-run, ccsbd) does between choosing a
// backend and session::start (launcher only; looks programs up on the host).
//
// build_session_request() reads as a checklist:
//   1. the backend chosen by select_backend (B5, B6) must be one the
//      launcher has: microvm is refused (backend_unavailable, field backend);
//   2. the spec is compiled for the profile against the host facts (pure,
//      policy.hpp); a refusal comes back as it is (unenforceable, ...);
//   3. the environment (E1, E3): native: the policy's plus the caller's
//      additions; none (B8): the host's plus the additions; sanitised
//      either way, an addition replacing a variable of the same name;
//   4. native: bwrap on PATH and ccsb-init executable (Linux: the bwrap
//      driver; on macOS, platform.hpp, the Seatbelt driver needs neither),
//      and egressd executable when the network is proxied; a missing
//      program is an io_error naming it (field bwrap, ccsb-init or egressd);
//      each program must be one no session could have written, outside
//      every writable bind of the policy (helpers.hpp check_helpers, L8):
//      else unenforceable, naming it and why.
// Before step 2, the per-session settings (session_settings.hpp), named by
// their ccsbd launch fields whoever asked: each environment addition
// (env.NAME: E3 refuses, never drops), the egressd options
// (egress.allowUpstream[i], ...) and run-as (runAs: L1, before anything
// starts).
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/launch/helpers.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/session.hpp"
#include "ccsb/session_settings.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/spec.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace ccsb::launch {

// A helper program: the flag, else the environment variable, else the first
// of helper_candidates (helpers.hpp: next to the running binary, an
// installed package's libexec/ccsb, the compiled-in CCSB_HELPER_DIR).
inline std::string helper_path(const std::optional<std::string>& flag, const char* env, const std::string& name) {
  if (flag) return *flag;
  if (const char* e = std::getenv(env); e && *e) return e;
  return find_helper(name, self_dir());
}

struct request_inputs {
  sandbox_spec spec;
  ccsb::profile prof{ccsb::profile::dispatch};
  backend chosen{backend::native}; // select_backend's answer: the badge (B6)
  compile_options compile;
  env_list extra_env; // added to the command's environment (E3 still applies)
  std::string egressd_path;
  std::string init_path;
  egress_settings egress;                 // egressd options of the session
  std::optional<run_as_ids> run_as;       // L1
  resource_limits limits;                            // L7
  int landlock_abi{0};                               // X2: probe_result::landlock_abi
};

struct prepared_request {
  session_request request;
  policy pol; // as compiled (for native with the environment of step 3): the caller may read its mounts
};

// Additions replace variables of the same name; the result is E3-sanitised.
inline env_list merge_environment(env_list base, const env_list& more) {
  for (const auto& v : more) {
    std::erase_if(base, [&](const env_var& b) { return b.name == v.name; });
    base.push_back(v);
  }
  return sanitize_environment(base).kept;
}

inline result<prepared_request> build_session_request(request_inputs in, const host_facts& hf) {
  if (in.chosen == backend::microvm)
    return make_error(errc::backend_unavailable, "backend", "backend microvm is not implemented by this launcher");
  for (const auto& v : in.extra_env)
    if (auto a = env_addition(v.name, v.value); !a) return std::move(a).err();
  if (auto e = check_egress(in.egress); !e) return std::move(e).err();
  if (in.run_as)
    if (auto r = check_run_as(*in.run_as, static_cast<std::uint32_t>(::geteuid()), static_cast<std::uint32_t>(::getegid())); !r)
      return std::move(r).err();
  auto pol = compile(in.spec, in.prof, hf, in.compile);
  if (!pol) return std::move(pol).err();
  prepared_request out;
  session_request& req = out.request;
  req.session_id = in.spec.session_id;
  req.chosen = in.chosen;
  req.profile_name = std::string(to_string(in.prof));
  if (in.run_as) req.run_as = spawn_options::credentials{in.run_as->uid, in.run_as->gid};
  req.limits = in.limits;
  req.landlock_abi = in.landlock_abi;
  if (in.chosen == backend::native) {
    pol->environment = merge_environment(pol->environment, in.extra_env);
    if constexpr (sys::this_platform::native == sys::this_platform::native_driver::bwrap) {
      auto bwrap = which("bwrap", path_variable());
      if (!bwrap) return make_error(errc::io_error, "bwrap", "bwrap is not on PATH");
      if (::access(in.init_path.c_str(), X_OK) != 0)
        return make_error(errc::io_error, "ccsb-init", "ccsb-init not found at " + in.init_path);
      req.bwrap_path = *bwrap;
    }
    const bool proxied = pol->network.kind == network_kind::proxied;
    if (proxied && ::access(in.egressd_path.c_str(), X_OK) != 0)
      return make_error(errc::io_error, "egressd", "egressd not found at " + in.egressd_path);
    std::vector<helper_program> helpers;
    if (!req.bwrap_path.empty()) helpers.push_back({"bwrap", req.bwrap_path});
    if constexpr (sys::this_platform::native == sys::this_platform::native_driver::bwrap)
      helpers.push_back({"ccsb-init", in.init_path});
    if (proxied) helpers.push_back({"egressd", in.egressd_path});
    if (auto c = check_helpers(*pol, helpers); !c) return std::move(c).err();
    req.pol = *pol;
    req.egressd_path = std::move(in.egressd_path);
    req.init_path = std::move(in.init_path);
    req.egress_opts = in.egress.to_args();
  } else {
    env_list env;
    for (const auto& [k, v] : hf.env) env.push_back({k, v});
    req.host_env = merge_environment(std::move(env), in.extra_env);
  }
  out.pol = std::move(*pol);
  return out;
}

} // namespace ccsb::launch
