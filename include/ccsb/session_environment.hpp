// ccsb/session_environment.hpp — the one place a session's environment is
// built (E1-E5, N2), for every backend's renderer and driver. Pure: no I/O.
//
//   session_environment(policy, environment_facts) -> env_list
//
// The command's environment is, in this order (a later step replaces a
// variable of the same name where it stands):
//   1. E1: the policy's environment (compile records environment.hpp's
//      passed_environment: the pass list over the launcher's variables);
//   2. the caller's additions (policy::environment_additions: ccsb-run
//      --env, ccsbd's launch "env"), then E3 over the whole (environment.hpp);
//   3. TMPDIR at the session's private temp dir (Seatbelt; bwrap gives the
//      sandbox its own /tmp and sets none);
//   4. E5: HOME at the scratch HOME when it moved, and each toolchain home
//      bound from below the host's HOME named by its own variable
//      (kToolchainHomeVariables), since ~/.cargo no longer finds it;
//   5. N2/E2/E4: the proxy variables of a proxied session (proxy_environment);
//   6. git's command-line-level configuration (session_git_config), through
//      GIT_CONFIG_COUNT/KEY_n/VALUE_n.
// Steps 3-6 come after E3 on purpose: E3 removes every inherited proxy and
// GIT_* variable, so these are exactly the launcher's. Renderers, drivers
// and the launcher add nothing elsewhere; the list travels typed (env_list)
// to the exec path and is never re-parsed from NAME=VALUE strings.
//
// `none` sessions have no policy: host_environment is steps 1-2 over the
// launcher's own environment. An exec's own additions go on top of either
// (exec_environment).
#pragma once

#include "ccsb/environment.hpp"
#include "ccsb/policy.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb {

// E5/E4: with HOME moved, a toolchain home bound read-only from below the
// host's HOME is named by its own variable.
inline constexpr std::pair<std::string_view, std::string_view> kToolchainHomeVariables[] = {
    {".cargo", "CARGO_HOME"}, {".rustup", "RUSTUP_HOME"}, {".pyenv", "PYENV_ROOT"}, {".nvm", "NVM_DIR"}};

// Where the command reaches the session's proxies: host:port of the HTTP
// and SOCKS5 proxies, ssh's ProxyCommand (with %h %p) to the SOCKS proxy,
// and the known-hosts file ssh reads (empty: none).
struct proxy_endpoints {
  std::string http;
  std::string socks;
  std::string ssh_proxy_command;
  std::string known_hosts;
};

// N2/E2/E4: the proxy variables every backend gives a proxied session
// (environment.hpp documents each variable and the clients that read it).
inline env_list proxy_environment(const proxy_endpoints& p) {
  return proxy_environment(p.http, p.socks, p.ssh_proxy_command, p.known_hosts);
}

// git configuration at command-line level (it replaces the user's own
// setting of the same key inside the sandbox):
//   maintenance.auto=false, gc.auto=0: after a commit, merge or fetch git
//     runs `maintenance run --auto` (and older git `gc --auto`), which
//     takes objects/maintenance.lock (gc.pid) in the common git directory;
//     in a linked worktree only new objects may be created there (X1), so
//     every commit ended in a violation. Repacking is the host's job;
//   core.excludesFile: the placeholders' gitignore lines (render/bwrap/render.hpp,
//     "Placeholders and git"), when there are any.
inline std::vector<std::pair<std::string, std::string>> session_git_config(std::string_view excludes_file) {
  std::vector<std::pair<std::string, std::string>> c{{"maintenance.auto", "false"}, {"gc.auto", "0"}};
  if (!excludes_file.empty()) c.emplace_back("core.excludesFile", std::string(excludes_file));
  return c;
}

// What the backend knows about the session beyond its policy.
struct environment_facts {
  std::string tmpdir;                    // TMPDIR (with a trailing '/'); empty: not set
  std::string home;                      // E5: the scratch HOME; empty or the policy's home: HOME unchanged
  std::optional<proxy_endpoints> proxy;  // set for a proxied session
  std::string git_excludes_file;         // core.excludesFile; empty: none
};

namespace detail {
// `name` set to `value`: in place when present, appended otherwise.
inline void set_variable(env_list& env, std::string_view name, std::string value) {
  auto it = std::find_if(env.begin(), env.end(), [&](const env_var& v) { return v.name == name; });
  if (it != env.end()) it->value = std::move(value);
  else env.push_back({std::string(name), std::move(value)});
}

inline env_list with_additions_sanitized(env_list base, const env_list& additions) {
  for (const auto& v : additions) set_variable(base, v.name, v.value);
  return sanitize_environment(base).kept;
}
} // namespace detail

// One exec's own additions (exec_spec::env, E3-checked when the request was
// taken) over the session's environment, each replacing a variable of the
// same name: for drivers that start the command themselves (none,
// Seatbelt); ccsb-init does the same inside (init/exec/server.cpp).
inline env_list exec_environment(env_list session, const env_list& additions) {
  for (const auto& a : additions) detail::set_variable(session, a.name, a.value);
  return session;
}

// Steps 1-2 for a session without a policy (`none`): the launcher's own
// environment and the caller's additions, E3-sanitised.
inline env_list host_environment(const std::map<std::string, std::string>& host, const env_list& additions) {
  env_list base;
  for (const auto& [k, v] : host) base.push_back({k, v});
  return detail::with_additions_sanitized(std::move(base), additions);
}

// The session's complete environment (see the header comment).
inline env_list session_environment(const policy& pol, const environment_facts& f) {
  env_list env = detail::with_additions_sanitized(pol.environment, pol.environment_additions);
  if (!f.tmpdir.empty()) detail::set_variable(env, "TMPDIR", f.tmpdir);
  if (!f.home.empty() && f.home != pol.home) {
    detail::set_variable(env, "HOME", f.home);
    for (const auto& t : pol.toolchains)
      for (const auto& [name, var] : kToolchainHomeVariables)
        if (t.path == pol.home + "/" + std::string(name)) detail::set_variable(env, var, t.path);
  }
  if (f.proxy)
    for (auto& v : proxy_environment(*f.proxy)) detail::set_variable(env, v.name, std::move(v.value));
  const auto git = session_git_config(f.git_excludes_file);
  detail::set_variable(env, "GIT_CONFIG_COUNT", std::to_string(git.size()));
  for (std::size_t i = 0; i < git.size(); ++i) {
    detail::set_variable(env, "GIT_CONFIG_KEY_" + std::to_string(i), git[i].first);
    detail::set_variable(env, "GIT_CONFIG_VALUE_" + std::to_string(i), git[i].second);
  }
  return env;
}

} // namespace ccsb
