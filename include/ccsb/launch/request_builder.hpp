// ccsb/launch/request_builder.hpp — from a spec to a session_request: what
// every client of the session API (ccsb-run, ccsbd) does between choosing a
// backend and session::start (launcher only; looks programs up on the host).
//
// build_session_request() reads as a checklist:
//   1. the backend chosen by select_backend (B5, B6) must be one the
//      launcher has: microvm is refused (backend_unavailable, field backend);
//   2. the spec is compiled for the profile against the host facts (pure,
//      policy.hpp), with what the sandbox's host uid reaches among them
//      (native on Linux: linux/session_uid.hpp probe_sandbox_reach); a
//      refusal comes back as it is (unenforceable, ...);
//   3. the environment (E1, E3): native: the caller's additions go with
//      the policy (policy::environment_additions), which the renderer's
//      session_environment applies; none (B8): host_environment, the
//      host's plus the additions (both session_environment.hpp);
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
#include "ccsb/session_environment.hpp"
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

// What compile needs beyond the host facts, and what the caller adds to
// the command's environment; the rest of the session is the caller's
// session_request (request.hpp), which build_session_request completes.
struct request_inputs {
  sandbox_spec spec;
  ccsb::profile prof{ccsb::profile::dispatch};
  compile_options compile;
  env_list extra_env; // added to the command's environment (E3 still applies)
};

struct prepared_request {
  session_request request;
  policy pol; // as compiled (for native with the caller's environment additions): the caller may read its mounts
};

namespace detail {

// Before anything: the settings named as ccsbd's launch fields.
inline result<void> check_settings(const request_inputs& in, const session_request& req) {
  if (req.chosen == backend::microvm)
    return make_error(errc::backend_unavailable, "backend", "backend microvm is not implemented by this launcher");
  for (const auto& v : in.extra_env)
    if (auto a = env_addition(v.name, v.value); !a) return std::move(a).err();
  if (auto e = check_egress(req.egress); !e) return std::move(e).err();
  if (req.run_as)
    if (auto r = check_run_as(*req.run_as, static_cast<std::uint32_t>(::geteuid()), static_cast<std::uint32_t>(::getegid())); !r)
      return std::move(r).err();
  return ok();
}

// L1, E4: what the sandbox's host uid reaches, a fact compile decides with
// (native on Linux; the workdir as the spec names it, before compile
// resolves it).
inline result<void> add_reach(host_facts& facts, const request_inputs& in, const session_request& req) {
#if !CCSB_LAUNCH_MACOS
  if (req.chosen != backend::native) return ok();
  const std::string workdir = in.spec.guest_workdir ? *in.spec.guest_workdir
                              : in.spec.bind_mounts.empty() ? std::string("/")
                                                            : in.spec.bind_mounts.front().host_path;
  auto reach = probe_sandbox_reach(workdir, req.run_as);
  if (!reach) return std::move(reach).err();
  facts.reach = std::move(*reach);
#else
  (void)facts, (void)in, (void)req;
#endif
  return ok();
}

// Step 4: the helpers the native driver runs, found and checked (L8).
inline result<void> check_native_helpers(session_request& req, const policy& pol) {
  if constexpr (sys::this_platform::native == sys::this_platform::native_driver::bwrap) {
    auto bwrap = which("bwrap", path_variable());
    if (!bwrap) return make_error(errc::io_error, "bwrap", "bwrap is not on PATH");
    if (::access(req.init_path.c_str(), X_OK) != 0)
      return make_error(errc::io_error, "ccsb-init", "ccsb-init not found at " + req.init_path);
    req.bwrap_path = *bwrap;
  }
  const bool proxied = pol.network.kind == network_kind::proxied;
  if (proxied && ::access(req.egressd_path.c_str(), X_OK) != 0)
    return make_error(errc::io_error, "egressd", "egressd not found at " + req.egressd_path);
  std::vector<helper_program> helpers;
  if (!req.bwrap_path.empty()) helpers.push_back({"bwrap", req.bwrap_path});
  if constexpr (sys::this_platform::native == sys::this_platform::native_driver::bwrap)
    helpers.push_back({"ccsb-init", req.init_path});
  if (proxied) helpers.push_back({"egressd", req.egressd_path});
  return check_helpers(pol, helpers);
}

} // namespace detail

// `req`: the caller's part of the session (backend, helper paths, egressd
// options, run-as, limits, the Landlock ABI); the result completes it.
inline result<prepared_request> build_session_request(request_inputs in, session_request req, const host_facts& hf) {
  if (auto c = detail::check_settings(in, req); !c) return std::move(c).err();
  host_facts facts = hf;
  if (auto r = detail::add_reach(facts, in, req); !r) return std::move(r).err();
  auto pol = compile(in.spec, in.prof, facts, in.compile);
  if (!pol) return std::move(pol).err();
  req.session_id = in.spec.session_id;
  req.profile_name = std::string(to_string(in.prof));
  if (req.chosen == backend::native) {
    pol->environment_additions = in.extra_env;
    if (auto c = detail::check_native_helpers(req, *pol); !c) return std::move(c).err();
    req.pol = *pol;
  } else {
    req.host_env = host_environment(hf.env, in.extra_env);
  }
  return prepared_request{std::move(req), std::move(*pol)};
}

} // namespace ccsb::launch
