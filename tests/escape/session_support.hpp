// session_support.hpp — what the in-process session tests share: a
// session_request for the real bwrap, ccsb-init and egressd over a fixture's
// worktree (tests/escape/test_exec.cpp, test_supervisor_waits.cpp).
#pragma once

#include "escape_support.hpp"

#include "ccsb/launch/host.hpp"
#include "ccsb/launch/session.hpp"
#include "ccsb/policy.hpp"

namespace escape {

// The native session of profile `prof` binding `fx.work` writable, with
// `fx.home` as HOME and no toolchains from PATH; `sid` names it.
inline ccsb::launch::session_request native_request(const sandbox_fixture& fx, ccsb::profile prof,
                                                    const std::string& sid) {
  namespace L = ccsb::launch;
  REQUIRE(::access(bin_path("ccsb-init").c_str(), X_OK) == 0);
  REQUIRE(::access(bin_path("egressd").c_str(), X_OK) == 0);
  ccsb::sandbox_spec spec;
  spec.session_id = sid;
  spec.workspace_id = "api";
  spec.bind_mounts.push_back({fx.work, fx.work, false});
  spec.guest_workdir = fx.work;
  auto hf = L::gather_host_facts();
  hf.home = fx.home;
  hf.env["HOME"] = fx.home;
  ccsb::compile_options co;
  co.path_toolchains = false;
  auto pol = ccsb::compile(spec, prof, hf, co);
  REQUIRE(pol);
  L::session_request q;
  q.session_id = spec.session_id;
  q.chosen = ccsb::backend::native;
  q.pol = *pol;
  auto bwrap = L::which("bwrap", "/usr/local/bin:/usr/bin:/bin");
  REQUIRE(bwrap);
  q.bwrap_path = *bwrap;
  q.egressd_path = bin_path("egressd");
  q.init_path = bin_path("ccsb-init");
  q.profile_name = std::string(ccsb::to_string(prof));
  return q;
}

} // namespace escape
