// ccsb/etc_manifest.hpp — the minimal /etc (L1): what the sandbox's /etc
// holds, decided once from the policy and the host's path kinds. Pure: no
// I/O; the path lookup arrives as a function (bwrap_facts::kind).
//
//   minimal_etc(policy, kind) -> etc_manifest
//
// Both ways of building that /etc use this one function, so they cannot
// drift apart:
//   * bwrap builds it (render/bwrap/render.hpp, "The minimal /etc"): a tmpfs, the
//     listed files copied in (mode 0444), the listed directories and
//     symlinks bound read-only, the masks, then --remount-ro;
//   * the launcher builds it once as an immutable host directory, the /etc
//     view, cached across launches under the run-dir base
//     (ccsb/launch/etc_view.hpp), and bwrap binds that one directory
//     read-only at /etc (bwrap_facts::etc_view). bwrap re-reads the mount
//     table after every bind, so one bind instead of a tmpfs, ~22 copies,
//     ~9 binds, the masks and a remount is most of the gain.
//
// The manifest:
//   entries  every listed path (kSystemEtc, and kSystemEtcOpenNetwork when
//            the network is not proxied) that exists, in list order, with
//            its kind as lstat sees it: a file is copied (0444), a
//            directory is the whole tree, a symlink is followed (bwrap's
//            --ro-bind follows a symlinked source: /etc/localtime ->
//            zoneinfo, /etc/os-release -> ../usr/lib/os-release);
//   masks    each P4 secret of kSystemReadDenyPaths that lies inside a
//            listed directory, or inside a listed symlink (its target's
//            tree is what the sandbox sees there), and exists there as a
//            file or a directory: it is replaced by an empty mode-0000 file
//            or directory (/etc/ssl/private: group ssl-cert reads it on the
//            host, and supplementary groups still count inside the user
//            namespace);
//   covered  a policy mount covers /etc itself (`--bind /etc:ro`, a bind of
//            /): that mount hides whatever is built at /etc;
//   view_blocker  why a read-only view cannot stand for this /etc ("" when
//            it can): nothing listed exists; /etc is covered (nothing to
//            gain); a policy mount lies inside /etc (bwrap must create its
//            mount point in /etc, which a read-only view does not allow);
//            a listed entry is neither a file, a directory nor a symlink.
#pragma once

#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace ccsb {

// L1: the minimal /etc. Each entry that exists on the host is in the
// sandbox's /etc, read-only (see the top of this file).
inline constexpr listed_path kSystemEtc[] = {
    {"/etc/alternatives", "Debian alternatives symlinks (/usr/bin/editor, awk, ...)"},
    {"/etc/ca-certificates", "CA bundle configuration"},
    {"/etc/ca-certificates.conf", "CA bundle configuration"},
    {"/etc/ssl", "CA certificates for TLS (through the proxy too: CONNECT is end to end)"},
    {"/etc/pki", "CA certificates on RPM systems"},
    {"/etc/ld.so.cache", "dynamic loader cache"},
    {"/etc/ld.so.conf", "dynamic loader configuration"},
    {"/etc/ld.so.conf.d", "dynamic loader configuration"},
    {"/etc/passwd", "user names for id, ls -l, ssh"},
    {"/etc/group", "group names"},
    {"/etc/nsswitch.conf", "name service switch (files only inside)"},
    {"/etc/hosts", "localhost resolution"},
    {"/etc/host.conf", "resolver configuration"},
    {"/etc/localtime", "time zone"},
    {"/etc/timezone", "time zone name"},
    {"/etc/protocols", "getprotobyname"},
    {"/etc/services", "getservbyname"},
    {"/etc/mime.types", "MIME types for tools that guess content types"},
    {"/etc/gitconfig", "system git configuration (read-only)"},
    {"/etc/gitattributes", "system git attributes (read-only)"},
    {"/etc/wgetrc", "system wget configuration (read-only)"},
    {"/etc/ssh/ssh_config", "system ssh client configuration (read-only; ccsb's -o options come first and win)"},
    {"/etc/ssh/ssh_config.d", "system ssh client configuration snippets (Debian's ssh_config includes them)"},
    {"/etc/ssh/ssh_known_hosts", "system-wide known host keys (public keys; ssh's GlobalKnownHostsFile)"},
    {"/etc/java-8-openjdk", "JVM configuration: java.security, net.properties (lib/security links here)"},
    {"/etc/java-11-openjdk", "JVM configuration: java.security, net.properties (lib/security links here)"},
    {"/etc/java-17-openjdk", "JVM configuration: java.security, net.properties (lib/security links here)"},
    {"/etc/java-21-openjdk", "JVM configuration: java.security, net.properties (lib/security links here)"},
    {"/etc/java-25-openjdk", "JVM configuration: java.security, net.properties (lib/security links here)"},
    {"/etc/locale.alias", "locale name aliases (libc)"},
    {"/etc/locale.conf", "system locale"},
    {"/etc/default/locale", "system locale (Debian)"},
    {"/etc/os-release", "distribution identification"},
    {"/etc/debian_version", "distribution identification"},
    {"/etc/bash.bashrc", "system bash start-up (read-only)"},
    {"/etc/profile", "system login start-up (read-only)"},
    {"/etc/inputrc", "system readline configuration (read-only)"},
    {"/etc/terminfo", "terminal descriptions"},
    {"/etc/magic", "file(1) magic"},
};
// Not in the minimal /etc, on purpose (the audit of issue 11): /etc/shadow,
// /etc/gshadow, /etc/sudoers(.d), the ssh host keys and sshd_config (the
// secrets of kSystemReadDenyPaths stay out because nothing lists them; the
// /etc/ssh client files are listed one by one, never the directory);
// /etc/npmrc and /etc/pip.conf (a global npmrc or pip.conf may hold
// registry tokens or index passwords); /etc/environment and /etc/security
// (PAM). Where a listed directory holds a P4 secret (/etc/ssl/private), the
// secret is masked inside it (see "The minimal /etc").
//
// Only with an open network (terminal profile): a proxied sandbox resolves
// nothing itself; the proxies resolve.
inline constexpr listed_path kSystemEtcOpenNetwork[] = {
    {"/etc/resolv.conf", "DNS resolver (open network only)"},
    {"/etc/gai.conf", "address selection (open network only)"},
};


struct etc_entry {
  std::string path; // a listed path, absolute (/etc/...)
  path_kind kind{path_kind::missing}; // file, dir, symlink or other (never missing)
  friend bool operator==(const etc_entry&, const etc_entry&) = default;
};

struct etc_mask {
  std::string path; // a P4 secret inside a listed directory or symlink
  bool dir{false};  // an empty mode-0000 directory (else an empty mode-0000 file)
  friend bool operator==(const etc_mask&, const etc_mask&) = default;
};

struct etc_manifest {
  std::vector<etc_entry> entries;
  std::vector<etc_mask> masks;
  bool covered{false};
  std::string view_blocker;
};

inline etc_manifest minimal_etc(const policy& pol, const std::function<path_kind(const std::string&)>& kind) {
  etc_manifest m;
  auto want = [&](const listed_path& e) {
    std::string p(e.path);
    path_kind k = kind(p);
    if (k != path_kind::missing) m.entries.push_back({p, k});
  };
  for (const auto& e : kSystemEtc) want(e);
  if (pol.network.kind != network_kind::proxied)
    for (const auto& e : kSystemEtcOpenNetwork) want(e);
  for (const auto& sec : kSystemReadDenyPaths) {
    std::string sp(sec.path);
    const bool inside = std::any_of(m.entries.begin(), m.entries.end(), [&](const etc_entry& e) {
      return (e.kind == path_kind::dir || e.kind == path_kind::symlink) && sp != e.path && ccsb::within(sp, e.path);
    });
    if (!inside) continue;
    path_kind k = kind(sp);
    if (k == path_kind::dir || k == path_kind::file) m.masks.push_back({sp, k == path_kind::dir});
  }
  for (const auto& mt : pol.mounts) {
    if (ccsb::within("/etc", mt.guest_path)) {
      m.covered = true;
      if (m.view_blocker.empty())
        m.view_blocker = "the policy mount of \"" + mt.guest_path + "\" covers /etc itself and hides it";
    } else if (ccsb::within(mt.guest_path, "/etc") && m.view_blocker.empty()) {
      m.view_blocker = "the policy mount of \"" + mt.guest_path +
                       "\" lies inside /etc; bwrap creates its mount point there, which a read-only view does not allow";
    }
  }
  if (m.entries.empty() && m.view_blocker.empty()) m.view_blocker = "no listed /etc entry exists on this host";
  for (const auto& e : m.entries)
    if (e.kind == path_kind::other && m.view_blocker.empty())
      m.view_blocker = "\"" + e.path + "\" is neither a file, a directory nor a symlink";
  return m;
}

} // namespace ccsb
