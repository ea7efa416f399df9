// ccsb/render/bwrap/layout.hpp — where the sandbox sees ccsb's own files,
// the fixed descriptors bwrap and ccsb-init are started with, the system
// tree, and the E5 scratch HOME's place. Pure: no I/O. Shared by the bwrap
// renderer (render/bwrap/render.hpp, which documents each decision), the X2
// Landlock rules (confine/landlock.hpp) and the launcher.
#pragma once

#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/session_environment.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb {

// Where the sandbox sees ccsb's own files.
inline constexpr std::string_view kGuestRunDir = "/run/ccsb";
inline constexpr std::string_view kGuestInit = "/run/ccsb/ccsb-init";
inline constexpr std::string_view kGuestGitExcludes = "/run/ccsb/git-excludes";
inline constexpr std::string_view kGitExcludesName = "git-excludes"; // in the run dir
// E4: the read-only copy of the user's ~/.ssh/known_hosts ssh reads
// (GIT_SSH_COMMAND's UserKnownHostsFile); ~/.ssh itself stays masked.
inline constexpr std::string_view kGuestKnownHosts = "/run/ccsb/known_hosts";
// E5: the scratch HOME's place when the host's HOME path cannot hold it (a
// read-only bind covers it, or it lies in a tree the sandbox gets from
// elsewhere); and the run-dir file holding its .gitconfig (the host user's
// git identity, gitconfig_for), copied in with --file.
inline constexpr std::string_view kScratchHomeFallback = "/run/ccsb/home";
inline constexpr std::string_view kGitConfigName = "gitconfig";
// The proxies as the sandbox sees them (listeners inside its network namespace).
inline constexpr std::string_view kProxyHttp = "127.0.0.1:3128";
inline constexpr std::string_view kProxySocks = "127.0.0.1:1080";
inline constexpr std::uint16_t kProxyHttpPort = 3128;
inline constexpr std::uint16_t kProxySocksPort = 1080;

// N2: the proxies as a bwrap sandbox's command reaches them: ssh goes
// through ccsb-init's own SOCKS helper; `known_hosts` is kGuestKnownHosts
// when the session has a copy, else empty.
inline proxy_endpoints bwrap_proxy_endpoints(std::string_view known_hosts) {
  return {.http = std::string(kProxyHttp),
          .socks = std::string(kProxySocks),
          .ssh_proxy_command = std::string(kGuestInit) + " --ssh-proxy " + std::string(kProxySocks) + " %h %p",
          .known_hosts = std::string(known_hosts)};
}
// ccsb-init's end of the exec channel (ccsb/protocol/supervisor.hpp): the
// launcher's requests in, readiness, exec outcomes and violations out.
inline constexpr int kExecChannelFd = 3;
inline constexpr int kInitStatusFd = kExecChannelFd; // the first fixed descriptor
// bwrap reads its options from kInitStatusFd + 1 (--args) and the L6
// baseline seccomp program from kSeccompFd (--seccomp); the files it copies
// into /etc (plan.data_files) start at kFirstDataFd and count up, so they
// come last and never collide with a fixed descriptor.
inline constexpr int kSeccompFd = kInitStatusFd + 2;
// ccsb-init read-only, when it is copied in (bwrap_facts::init_by_fd).
inline constexpr int kInitFd = kInitStatusFd + 3;
// ccsb-init's end of the proxy channel to egressd (proxied sessions).
inline constexpr int kProxyChannelFd = kInitStatusFd + 4;
inline constexpr int kFirstDataFd = kInitStatusFd + 5;

// L1: the read-only system tree. Top-level entries are bound read-only when
// they are directories and recreated as symlinks when they are symlinks
// (Debian merged-usr: /bin -> usr/bin, ...). Missing entries are skipped.
inline constexpr std::string_view kSystemTop[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// E5: where the session's private scratch HOME is mounted (render/bwrap/render.hpp
// "Scratch HOME"), or nullopt when HOME is already writable (a writable bind
// covers it: the terminal profile, a spec binding HOME) or is "/". Decided
// from the policy alone, so the launcher, the renderer and the Landlock
// rules agree.
inline std::optional<std::string> scratch_home(const policy& pol) {
  if (pol.home.empty() || pol.home == "/" || pol.home.front() != '/') return std::nullopt;
  const mount_rule* best = nullptr;
  for (const auto& m : pol.mounts)
    if (within(pol.home, m.guest_path) && (!best || m.guest_path.size() > best->guest_path.size())) best = &m;
  if (best && best->writable) return std::nullopt;
  if (best) return std::string(kScratchHomeFallback); // read-only HOME: its masks stay, the scratch goes elsewhere
  for (auto top : kSystemTop)
    if (within(pol.home, std::string(top))) return std::string(kScratchHomeFallback);
  for (std::string_view t : {"/etc", "/proc", "/dev", "/sys", "/run"})
    if (within(pol.home, std::string(t))) return std::string(kScratchHomeFallback);
  return pol.home;
}

} // namespace ccsb
