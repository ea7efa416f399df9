// ccsb/launch/identity.hpp — the host uid/gid a sandbox runs as (launcher
// only; does I/O). L1.
//
// The sandbox's uid 0 is never the host's. bwrap started by host root maps
// the sandbox's ids onto host uid 0 even inside a new user namespace, and
// host uid 0 owns /proc/sys, the root keyring and every root-owned file a
// bind makes visible. So:
//   * a non-root launcher runs the sandbox as itself (bwrap creates a user
//     namespace mapping only that uid); asking for another uid is an error;
//   * a root launcher starts bwrap as an unprivileged host uid: the one asked
//     for (ccsb-run --run-as UID[:GID], session_request::run_as; uid 0 is
//     refused), else the owner of the session's workdir when that is not
//     root (a root server running agents in a user's worktree: files the
//     command creates belong to that user, as they would had the user run it),
//     else nobody:nogroup (65534:65534).
// What this means for writable binds (the choice, also in docs/design.md): a
// bind is writable inside only where the sandbox uid may write on the host.
// A root launcher binding root-owned directories writable gets a sandbox
// that cannot write them; the launcher logs each such root
// (unwritable_roots) instead of widening anything. Files the sandbox creates
// belong to its uid. No supplementary groups are kept.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/session_settings.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace ccsb::launch {

inline constexpr uid_t kNobodyUid = 65534;
inline constexpr gid_t kNogroupGid = 65534;

struct sandbox_identity {
  uid_t uid;
  gid_t gid;
  std::string why;
};

// nullopt: the sandbox runs as the launcher's own uid (non-root launcher).
// `workdir`: the session's workdir on the host.
inline result<std::optional<sandbox_identity>> choose_identity(const std::string& workdir,
                                                              const std::optional<run_as_ids>& asked) {
  if (::geteuid() != 0) {
    if (asked && (asked->uid != ::geteuid() || asked->gid != ::getegid()))
      return make_error(errc::invalid_argument, "runAs",
                        "only a root launcher can run the sandbox as another uid (asked for " +
                            std::to_string(asked->uid) + ")");
    return std::optional<sandbox_identity>{};
  }
  if (asked) {
    if (asked->uid == 0 || asked->gid == 0)
      return make_error(errc::invalid_argument, "runAs",
                        "the sandbox may not run as host uid or gid 0 (L1: its root must never be the host's)");
    return std::optional<sandbox_identity>{sandbox_identity{asked->uid, asked->gid, "asked for"}};
  }
  struct stat st{};
  if (!workdir.empty() && ::stat(workdir.c_str(), &st) == 0 && st.st_uid != 0)
    return std::optional<sandbox_identity>{
        sandbox_identity{st.st_uid, st.st_gid == 0 ? kNogroupGid : st.st_gid, "the owner of the workdir"}};
  return std::optional<sandbox_identity>{
      sandbox_identity{kNobodyUid, kNogroupGid, "nobody: the launcher is root and the workdir belongs to root"}};
}

// Whether `id` holds every bit of `want` (a mix of R_OK, W_OK, X_OK) on
// `st` by its owner, group or other bits, the class chosen as the kernel
// does (no supplementary groups: the sandbox has none).
inline bool permits(const struct stat& st, const sandbox_identity& id, unsigned want) {
  unsigned bits = st.st_uid == id.uid ? (st.st_mode >> 6) : st.st_gid == id.gid ? (st.st_mode >> 3) : st.st_mode;
  return (bits & want & 7u) == (want & 7u);
}

// Whether `id` may search every ancestor directory of `path`.
inline bool ancestors_searchable_by(const std::string& path, const sandbox_identity& id) {
  struct stat st{};
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    if (::stat(path.substr(0, slash).c_str(), &st) != 0 || !permits(st, id, X_OK)) return false;
  return true;
}

// Whether `id` can reach and execute `path`: search on every ancestor, read
// and execute on the file.
inline bool reachable_by(const std::string& path, const sandbox_identity& id) {
  struct stat st{};
  return ancestors_searchable_by(path, id) && ::stat(path.c_str(), &st) == 0 && permits(st, id, R_OK | X_OK);
}

// The host fact compile's toolchain step decides with (host_facts::reach,
// E4 / L1): whether `id` can reach a path, probed on the host as compile
// asks (a root launcher whose PATH names /root/.cargo/bin: /root is 0700).
inline host_facts::sandbox_reach reach_of(const sandbox_identity& id) {
  return {id.uid, [id](const std::string& p) { return reachable_by(p, id); }};
}

// Writable roots the sandbox uid cannot write on the host (log lines).
inline std::vector<std::string> unwritable_roots(const policy& pol, const sandbox_identity& id) {
  std::vector<std::string> out;
  for (const auto& m : pol.mounts) {
    if (!m.writable) continue;
    struct stat st{};
    if (::stat(m.host_path.c_str(), &st) != 0) continue;
    bool w = (st.st_uid == id.uid && (st.st_mode & S_IWUSR)) || (st.st_gid == id.gid && (st.st_mode & S_IWGRP)) ||
             (st.st_mode & S_IWOTH);
    if (!w)
      out.push_back("writable bind " + m.host_path + " is not writable by the sandbox's host uid " +
                    std::to_string(id.uid) + " (owner " + std::to_string(st.st_uid) + "): writes there will fail");
  }
  return out;
}

} // namespace ccsb::launch
