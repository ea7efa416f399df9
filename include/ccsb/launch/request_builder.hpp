// ccsb/launch/request_builder.hpp — from a spec to a session_request: what
// every client of the session API (ccsb-run, ccsbd) does between choosing a
// backend and session::start (launcher only; looks programs up on the host).
// One builder for every backend: the backend decides what it fills.
//
// build_session_request() reads as a checklist:
//   1. the backend chosen by select_backend (B5, B6) must be one the
//      launcher has: microvm needs this platform's driver (Linux) and the
//      caller's probe (probe_microvm: request_inputs::vm), else
//      backend_unavailable (field backend);
//   2. the spec is compiled for the profile against the host facts (pure,
//      policy.hpp), with what the sandbox's host uid reaches among them
//      (native on Linux: linux/session_uid.hpp probe_sandbox_reach); a
//      refusal comes back as it is (unenforceable, ...);
//   3. the environment (E1, E3): native: the caller's additions go with
//      the policy (policy::environment_additions), which the renderer's
//      session_environment applies; none (B8): host_environment, the
//      host's plus the additions (both session_environment.hpp); microvm:
//      the guest's base (microvm::guest_environment) plus the additions;
//   4. native: bwrap on PATH and ccsb-init executable (Linux: the bwrap
//      driver; on macOS, platform.hpp, the Seatbelt driver needs neither),
//      and egressd executable when the network is proxied; a missing
//      program is an io_error naming it (field bwrap, ccsb-init or egressd);
//      each program must be one no session could have written, outside
//      every writable bind of the policy (helpers.hpp check_helpers, L8):
//      else unenforceable, naming it and why;
//      microvm: the shares (microvm::plan_shares: the system tree read-only
//      and the spec's binds; a bind holding a P4 secret is refused), the P5
//      paths of the compiled policy inside writable shares (made read-only
//      in the guest), and the driver that boots QEMU with them
//      (prepared_request::backend_driver).
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
#include "ccsb/microvm.hpp"
#if !CCSB_LAUNCH_MACOS
#include "ccsb/launch/microvm_driver.hpp" // X4 (Linux)
#endif
#include "ccsb/session_environment.hpp"
#include "ccsb/session_settings.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/spec.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
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

// X4: where QEMU and the guest image were found and what microvm::probe
// made of them. The caller probes before select_backend (its answer is the
// microvm_probe select_backend reads, and ccsb-run's B4 line); the builder
// plans the session with it.
struct microvm_inputs {
  microvm::probe_facts facts;
  microvm::probe_answer answer;
};

#if !CCSB_LAUNCH_MACOS
// The accelerator: `accel` when the caller was asked for one (its name in
// errors: `accel_source`, `opt_in` says how this caller's clients opt into
// TCG), else the launcher's CCSB_MICROVM_ACCEL; the image: `guest_dir`, else
// CCSB_GUEST_DIR, else the helper directories (microvm_driver.hpp). An
// accelerator that is neither kvm nor tcg is an error; a microVM that cannot
// be had is an answer whose vm.note says why (select_backend refuses an
// explicit request with it).
inline result<microvm_inputs> probe_microvm(const std::optional<std::string>& accel, const std::string& accel_source,
                                            const std::optional<std::string>& guest_dir, const std::string& opt_in) {
  microvm_inputs v;
  v.facts = gather_microvm_facts(accel, guest_dir);
  if (accel) v.facts.accel_source = accel_source;
  v.facts.opt_in = opt_in;
  auto a = microvm::probe(v.facts);
  if (!a) return std::move(a).err();
  v.answer = std::move(*a);
  return v;
}
#endif

// What compile needs beyond the host facts, and what the caller adds to
// the command's environment; the rest of the session is the caller's
// session_request (request.hpp), which build_session_request completes.
struct request_inputs {
  sandbox_spec spec;
  ccsb::profile prof{ccsb::profile::dispatch};
  compile_options compile;
  env_list extra_env; // added to the command's environment (E3 still applies)
  std::optional<microvm_inputs> vm; // backend microvm: the caller's probe (probe_microvm)
};

struct prepared_request {
  session_request request;
  // As compiled (for native with the environment of step 3): the caller may
  // read its mounts. microvm: its mounts are the shares (what the guest sees
  // of the host, read-only ones included), its rules the compiled P5 paths.
  policy pol;
  // The session's driver when the backend needs one the session does not
  // make itself (microvm); nullptr: session::start's default for the
  // backend (Linux native: bubblewrap; none).
  std::unique_ptr<driver> backend_driver;
};

namespace detail {

// Before anything: the settings named as ccsbd's launch fields.
inline result<void> check_settings(const request_inputs& in, const session_request& req) {
  if (req.chosen == backend::microvm) {
#if CCSB_LAUNCH_MACOS
    return make_error(errc::backend_unavailable, "backend", "backend microvm is not implemented on this platform");
#else
    if (!in.vm) return make_error(errc::backend_unavailable, "backend", "backend microvm was chosen without a probe");
    if (!in.vm->answer.vm.available)
      return make_error(errc::backend_unavailable, "backend", "microvm: " + in.vm->answer.vm.note);
#endif
  }
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

#if !CCSB_LAUNCH_MACOS
// Step 4 for microvm: the shares, the P5 paths in writable ones, the
// guest's environment and workdir, the driver that boots QEMU with them.
// `pol` is the compiled policy; its mounts become the shares.
inline result<std::unique_ptr<driver>> plan_microvm(const request_inputs& in, const session_request& req, policy& pol,
                                                    const host_facts& hf) {
  auto plan = microvm::plan_shares(in.spec.bind_mounts, system_tree(), hf.home, hf.resolve);
  if (!plan) return std::move(plan).err();
  microvm_driver_options o;
  o.session_id = in.spec.session_id;
  o.probe = in.vm->answer;
  o.guest_dir = in.vm->facts.guest_dir;
  o.qemu_path = in.vm->facts.qemu_path;
  o.protect = microvm::protected_guest_paths(*plan, pol.write_deny);
  o.supervisor = microvm::guest_supervisor_args(*plan, pol); // X1, P7, X2 in the guest
  // N1-N8: the network is the session's egressd behind the guest's egress
  // port (the guest has no NIC); the commands get the native proxy
  // variables; the terminal profile's open network (T2) is egressd with
  // only the deny list and its address checks.
  if (::access(req.egressd_path.c_str(), X_OK) != 0)
    return make_error(errc::io_error, "egressd", "egressd not found at " + req.egressd_path);
  if (auto c = check_helpers(pol, {{"egressd", req.egressd_path}}); !c) return std::move(c).err();
  o.egress = microvm_egress_options{req.egressd_path, pol.network, req.egress, req.limits.memory_bytes};
  env_list additions = guest_proxy_environment();
  additions.insert(additions.end(), in.extra_env.begin(), in.extra_env.end());
  o.env = microvm::guest_environment(hf.env, additions);
  o.workdir = in.spec.guest_workdir ? *in.spec.guest_workdir : pol.workdir;
  if (req.run_as) o.run_as = spawn_options::credentials{req.run_as->uid, req.run_as->gid};
  o.limits = req.limits;
  pol.mounts.clear();
  for (const auto& sh : plan->shares) pol.mounts.push_back({sh.host_path, sh.guest_path, sh.writable});
  o.plan = std::move(*plan);
  return std::unique_ptr<driver>(std::make_unique<microvm_driver>(std::move(o)));
}
#endif

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
  std::unique_ptr<driver> drv;
  if (req.chosen == backend::native) {
    pol->environment_additions = in.extra_env;
    if (auto c = detail::check_native_helpers(req, *pol); !c) return std::move(c).err();
    req.pol = *pol;
  } else if (req.chosen == backend::none) {
    req.host_env = host_environment(hf.env, in.extra_env);
  } else {
#if !CCSB_LAUNCH_MACOS
    auto d = detail::plan_microvm(in, req, *pol, hf);
    if (!d) return std::move(d).err();
    drv = std::move(*d);
#endif
  }
  return prepared_request{std::move(req), std::move(*pol), std::move(drv)};
}

} // namespace ccsb::launch
