// ccsb/launch/request.hpp — what a session is asked to be: one value that
// the client fills (request_builder.hpp compiles its policy), the session
// (session.hpp) keeps for the session's life, and the driver reads
// (bwrap_driver.hpp holds a reference to it; what a driver works out from
// it, the host uid, the run dir, the plan, is the driver's own state).
// Launcher only; this file does no I/O.
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/resource_limits.hpp"
#include "ccsb/session_settings.hpp"

#include <optional>
#include <string>

namespace ccsb::launch {

struct session_request {
  std::string session_id;
  backend chosen{backend::native};
  std::string profile_name;
  policy pol;        // native: the compiled policy, its environment the command's (E1, E3)
  env_list host_env; // none: the complete environment
  // The helpers (L8: request_builder.hpp checks them): bwrap and ccsb-init
  // (Linux), egressd (a proxied network).
  std::string bwrap_path;
  std::string egressd_path;
  std::string init_path;
  egress_settings egress; // egressd options of the session (ccsb/protocol/egressd_args.hpp spells them)
  // L1: the host uid/gid the sandbox runs as when the launcher is root
  // (nullopt: identity.hpp choose_identity decides); a non-root launcher
  // runs it as itself.
  std::optional<run_as_ids> run_as;
  resource_limits limits; // L7
  int landlock_abi{0};    // X2: what the probe found (probe_result::landlock_abi), for details
  // E5: the host user's git identity for the scratch HOME's .gitconfig;
  // nullopt: read from the host user's git config (git_identity.hpp).
  std::optional<bwrap_facts::git_identity> git_identity;
};

} // namespace ccsb::launch
