// ccsb/render/bwrap/render.hpp — render a compiled policy as a typed bubblewrap
// plan (L1-L5, N2, P7; the plan's types and its one spelling as argv are
// ccsb/render/bwrap/plan.hpp). Pure: no I/O. Everything the renderer must know about the
// host (what exists at a path, symlink targets, the session's run directory,
// whether the X1 broker can run) arrives as injected bwrap_facts, so golden
// tests are deterministic. What every renderer needs is decided by
// policy.hpp and consumed here: the P7/L4 refusal (check_enforceable) and the
// write denials of `.git` files and the git directories they name.
//
//   render_bwrap(policy, facts) -> result<bwrap_plan>: typed setup ops,
//     host_prep, data files, environment, ccsb-init's options
//   bwrap_options(plan) / init_argv(plan) -> the plan as bwrap and
//     ccsb-init read it (render/bwrap/plan.hpp)
//   bwrap_argv(plan, bwrap) -> an argv for execve (printing, tests)
//   bwrap_spawn_argv(bwrap, args_fd, options_fd) -> the argv the launcher
//     runs: bwrap before its policy exists (see "Spawned first, fed later")
//   spawn_args_blob(plan) / init_options_blob(plan) -> what it is fed
//   known_hosts_source(policy, kind) -> the E4 known hosts file copied in
//
// render_bwrap is a checklist of steps, each a function below with its
// inputs and outputs named (check_render_inputs, add_system_tree,
// add_minimal_etc, add_proc_dev_tmp, broker_rules_for, path_planner,
// add_session_files, environment_for, host_prep_for). Layout of the sandbox
// (L1), in the order of plan.ops:
//   1. namespaces: --new-session --die-with-parent --unshare-pid --as-pid-1
//      --unshare-ipc --unshare-uts --unshare-cgroup-try, --unshare-net when
//      the network is proxied (L3: the namespace has only loopback),
//      --cap-drop ALL, --seccomp kSeccompFd (L6).
//      --as-pid-1: ccsb-init itself is the PID namespace's init, not a child
//      of bwrap's small reaper. The kernel drops every signal that a
//      namespace's init has no handler for when it comes from inside the
//      namespace, SIGSTOP and SIGKILL included, so no command can stop or
//      kill the supervisor that reports its exit (as PID 2, same uid and
//      same Landlock domain, it could); ccsb-init reaps the orphans
//      (init/exec/server.cpp), and its exit ends the namespace as the
//      reaper's did. One process fewer to fork at start and to kill at
//      teardown (issue 9).
//      --unshare-user --disable-userns ALWAYS, also for a root launcher (L1):
//      the sandbox's uid 0 must never be the host's. A user namespace alone
//      does not achieve that when bwrap itself runs as host root (it maps the
//      sandbox's ids onto host uid 0, which still owns /proc/sys and the root
//      keyring), so a root launcher starts bwrap as an unprivileged host uid
//      (session.hpp, "The sandbox's host uid"); this renderer only makes sure
//      a user namespace is created and that no further one can be made
//      inside (bwrap's --disable-userns; the L6 seccomp filter refuses
//      unshare/clone(CLONE_NEW*) on top).
//      With a session uid of its own (a root launcher), bwrap runs as that
//      uid and --uid/--gid give the sandbox the ids it would have had
//      without one (facts.sandbox_ids); binds inside the roots the launcher
//      idmapped come from their staged clones (facts.source_aliases).
//   2. the minimal read-only system tree (kSystemTree): /usr read-only, the
//      merged-usr top-level symlinks (/bin, /sbin, /lib*) recreated as
//      symlinks (or bound read-only where the host has real directories), a
//      documented minimal /etc (kSystemEtc in etc_manifest.hpp, see "The
//      minimal /etc"), then
//      --proc /proc, --dev /dev with a private --tmpfs /dev/shm, /dev
//      remounted read-only, and a private --tmpfs /tmp (see "Writable
//      tmpfs").
//   3. one sorted list of path operations, parents before children, so an
//      operation never hides a deeper one (bwrap binds from the host view, a
//      later bind of an ancestor would hide earlier submounts):
//        bind mounts (--bind / --ro-bind per P1-P3), pins, write-deny
//        re-binds (--ro-bind P P), masks, placeholders.
//      Because runner state dirs (P3) are bind mounts of their own and lie
//      deeper than the write-deny path that contains them, they are applied
//      after it and win, as policy.hpp's contract requires.
//   4. the session's own files under /run/ccsb: ccsb-init (read-only) and
//      the directory of the egressd sockets (proxied runs, read-only), then
//      the root remounted read-only, then --chdir.
//
// Decisions (documented here because tests and reviewers rely on them):
//  * Writable tmpfs (L7). The sandbox can write two tmpfs mounts, each
//    capped at bwrap_facts::tmp_size_bytes (`--size N --tmpfs`; 0 leaves
//    them at the kernel's default, half of RAM): /tmp and /dev/shm (POSIX
//    shared memory, shm_open). bwrap makes three more it cannot size: its
//    root, its /dev (device nodes, symlinks, the /dev/shm and /dev/pts mount
//    points) and the /etc tmpfs; each is remounted read-only once its
//    content is in place (`--remount-ro /dev` right after /dev/shm,
//    `--remount-ro /etc` and `--remount-ro /` last). Writes there fail with
//    EROFS; the device nodes are bind mounts of their own and stay usable.
//  * Masking (L2). A read-denied path that exists and is visible is
//    covered by a read-only bind of an empty mode-0000 file or directory
//    from the run dir (mask_sources). Opening it fails with EACCES, its old
//    content is not there, writing fails (EROFS: read-only mount), chmod
//    fails (EROFS), unlink/rename fail (EBUSY: mount point). A writable tmpfs
//    over a secret would let the command plant content there, so it is never
//    used. Inside a writable bind the directories between the bind's root
//    and the mask are pinned (see Pins): `mv ~/.config ~/.c2 && mkdir -p
//    ~/.config/gh` would otherwise leave the mask behind and give the
//    command a fresh, writable ~/.config/gh. A read-denied path that is a
//    symlink inside a READ-ONLY bind is not bound over (the mount would land
//    on its target); its resolved spelling, which P6 always adds, is masked
//    instead. One inside a writable bind refuses the run (see Symlinks). A
//    read-denied path that does not exist gets a placeholder when the
//    command could create it (see Denied paths that do not exist): P4 says
//    a missing secret cannot be created (a new ~/.ssh/config, ~/.aws/config
//    or ~/.docker/config.json runs commands on the host).
//  * Write-deny (L2, P2, P5). A write-denied path that is visible through a
//    writable bind gets `--ro-bind P P`. Paths already read-only (ro mounts,
//    the system tree, below another write-denied path of the same bind) or
//    not visible get nothing. A path inside a masked path gets nothing (the
//    mask is stronger).
//  * Pins. A mount protects a dentry, not a name: `mv .git .git2 && mkdir -p
//    .git/hooks` would leave the read-only hooks behind under .git2 and
//    create fresh, writable ones. So every directory between a writable
//    bind's root and a denied path is bind-mounted onto itself
//    (`--bind A A`): a mount point cannot be renamed or removed (EBUSY).
//  * Denied paths that do not exist. bwrap cannot forbid creating a name,
//    but a mount point occupies it. When the nearest existing ancestor is a
//    directory visible through a writable bind, the missing parents are
//    created by the launcher before bwrap runs (plan.host_prep: bwrap
//    resolves every bind source before it mounts anything, so `--dir` cannot
//    create a source) and pinned (`--bind M M`), and a placeholder from the
//    run dir is bound read-only at the path, so the name exists and cannot
//    be written, renamed or removed. Which placeholder is data, not a guess
//    (path_rule::shape, paths.hpp; placeholder_for()): a read-denied name
//    gets a mode-0000 mask (a directory for ~/.ssh, a file for ~/.netrc:
//    neither readable nor writable), a write-denied one an empty 0555
//    directory or 0444 file, and git's `commondir` a 0444 file holding
//    kGitCommondirPlaceholder (".": the git directory itself; git treats an
//    empty or unreadable commondir as fatal, a directory too, so only "."
//    keeps `git status`, `commit`, `worktree add`, `sparse-checkout`
//    working, inside and on the host). The mount points are created on the
//    host (a commondir one with the same content, so host git keeps
//    working): each is an `occupy` entry of plan.host_prep with the shape
//    to create, which the launcher creates, holds and removes at teardown
//    (launch/placeholders.hpp); plan.placeholders lists the topmost created
//    path of each. When the nearest existing
//    ancestor is a file (e.g. `.git` is a file), nothing can be created
//    below it as long as it stays, so that file is pinned.
//  * Absent write-denied names under the broker (X1, P5). Where the policy
//    runs under the X1 broker (policy::requires_broker(): every native
//    profile), a write-denied name inside a writable bind that
//    does not exist gets no placeholder, no pins and nothing on the host:
//    it becomes an entry of the broker's rule set (`--broker-deny PATH`,
//    ccsb/broker/decide.hpp), which denies creating anything at or below it
//    and renaming, linking or symlinking anything onto one of its
//    ancestors. A directory on the way to it that is a symlink still
//    refuses the run (the broker decides on resolved names, so a name
//    behind a symlink would be another name to it). A name the broker's git
//    rules already hold (`.git/hooks`, `config`, `commondir`,
//    `config.worktree` of a root's own `.git`) is not listed again
//    (covers_absent). Missing READ-denied names keep their mode-0000
//    placeholders, also below an absent write-denied directory
//    (`~/.config/git/credentials`): reads are not brokered, and a file the
//    host creates there later would otherwise be readable. Existing
//    write-denied names keep their read-only re-binds.
//  * Symlinks on a denied path. If a write-denied path, or a read-denied
//    path inside a writable bind, or a directory between the writable bind
//    root and either, is a symlink, the command could replace the symlink
//    (its directory is writable: `rm ~/.ssh && mkdir ~/.ssh` with a planted
//    config, the key still masked at the old target) and a mount cannot pin
//    a symlink. The run is refused (errc::unenforceable, naming the path and
//    what to do: bind that tree read-only, or replace the symlink by its
//    target) rather than run weaker. Masking both spellings and pinning the
//    link's name is not possible with mounts.
//  * `.git` as a file (worktrees, submodules): the file and the git paths of
//    the directories it names are write-deny entries of the policy
//    (policy.hpp, "`.git` as a file") and rendered like every other one.
//  * P7/L4, P5/L3. A policy that needs the broker (every native profile) is
//    refused first (check_enforceable, policy.hpp: errc::unenforceable):
//    bubblewrap cannot forbid creating a new .env, *.key or *.pem, a nested
//    repository's config or a `.git` entry inside a writable bind, nor a
//    connect to a host socket inside a bind — unless facts.creation_rules
//    says the host has the X1 broker's kernel features (the launcher probes
//    them, ccsb/broker/kernel_probe.hpp). Then ccsb-init gets the rule set
//    (ccsb/broker/decide.hpp to_args: every writable root and runner state
//    dir outside the terminal profile, the P7 globs where the profile has
//    them, the git and Unix-socket rules) and enforces it as the command's
//    supervisor.
//  * T2. The terminal profile shares the host's network (no --unshare-net)
//    and is refused the same way without the broker, which then gets
//    `--broker-net host`: connects, sendto and sendmsg to the host's own
//    services, link-local and metadata addresses and abstract sockets fail
//    (ccsb/broker/net_decide.hpp).
//  * L5. execGrantRoots (and the M5 exec rules) are not rendered on Linux.
//  * Baseline seccomp filter (L6), always. `--seccomp kSeccompFd`: the
//    launcher builds the program from ccsb/confine/seccomp_table.hpp
//    (ccsb/sys/seccomp.hpp) and places it, a sealed memfd, at kSeccompFd;
//    bwrap applies it in its PID-1 init and right before it execs ccsb-init,
//    so ccsb-init and the command run under it. A launcher that cannot build
//    it does not start the sandbox.
//  * Placeholders and git. The empty files and directories that occupy
//    missing denied names would show up as untracked files to git inside,
//    and an agent's `git add -A` would commit them. plan.git_excludes lists
//    each created path (its topmost created component) as an anchored
//    gitignore line relative to its writable root; the launcher writes it to
//    the run dir, it is bound read-only at kGuestGitExcludes, and the
//    command's environment sets core.excludesFile to it through
//    GIT_CONFIG_COUNT/KEY_n/VALUE_n (session_environment.hpp
//    session_git_config: command-line level, it replaces a user's own
//    core.excludesFile inside the sandbox; E3 removes any inherited GIT_*
//    variable first). Tracked files are not affected.
//  * --args FD, always. The options are never put in bwrap's argv:
//    the launcher runs `bwrap --args FD -- ccsb-init ...` and writes
//    bwrap_options(plan) NUL-separated into FD (spawn_args_blob).
//    bwrap's argv is visible to the host's ps (and was, before --as-pid-1,
//    the sandbox's /proc/1/cmdline): it would otherwise show the whole
//    policy, host paths included; the execve size limits (128 KiB per
//    string, 2 MiB in total) stop mattering too.
//  * Spawned first, fed later (issue 9). bwrap's own start (fork, execve,
//    the dynamic loader, libc's start-up) costs about as much as this
//    launcher's policy work, so the launcher starts bwrap before the policy
//    is rendered, with an argv that depends on nothing of it:
//      bwrap_spawn_argv: `bwrap --args FD -- ccsb-init --options-fd OFD`;
//    bwrap blocks reading FD (a stream socket) until the launcher writes
//    spawn_args_blob(plan) and closes it: `--clearenv`, then `--setenv NAME
//    VALUE` for each variable of plan.environment (the command's complete
//    environment; bwrap sets it in its own process, so it reaches ccsb-init
//    as before, and values never appear in any argv), then bwrap_options.
//    ccsb-init's own options (init_argv(plan) after its path) go through
//    OFD, a memfd written before FD is closed (init_options_blob). What
//    bwrap must hold from its execve on, the descriptors, cannot follow
//    later: plan.data_files is known before rendering for the view's
//    layout (at most the known hosts, known_hosts_source), and a plan that
//    needs others makes the launcher start a fresh bwrap for it.
//  * Proxy listeners (L3, B2). Nothing of egressd is mounted: ccsb-init
//    creates the listening sockets (kProxyHttp, kProxySocks) inside the
//    sandbox's network namespace and hands them to egressd over the proxy
//    channel, a socketpair end the launcher places at kProxyChannelFd
//    (ccsb/protocol/proxy_channel.hpp); egressd accepts on them directly.
//    GIT_SSH_COMMAND's ProxyCommand is ccsb-init's own SOCKS5 helper
//    (`--ssh-proxy`), with ssh's connection sharing off (a control socket
//    would let one ssh reuse another's tunnel).
//  * The minimal /etc (L1). What it holds is etc_manifest.hpp's
//    minimal_etc(), the one function both forms below use:
//    - with facts.etc_view (the launcher's cached view, a host directory
//      holding exactly that /etc; ccsb/launch/etc_view.hpp): one
//      `--ro-bind VIEW /etc` and nothing else for /etc (no data file, no
//      mask, no remount). Unless the manifest names a view_blocker (a
//      policy mount covers /etc or lies inside it, ...): then the form
//      below, with a note;
//    - without: /etc is a private tmpfs holding only the listed entries,
//      remounted read-only (`--remount-ro /etc`, the last option before
//      --chdir) once everything below it exists. Listed regular files are
//      copied in (`--perms 0444 --file FD P`: the launcher opens each of
//      plan.data_files, in order, read-only at descriptor kFirstDataFd + i;
//      bwrap copies and closes it before the command runs). Listed
//      directories and symlinks stay read-only binds. One tmpfs and one
//      remount instead of ~20 bind mounts (bwrap re-reads the mount table
//      for every bind). When a policy mount covers /etc itself, it hides the
//      tmpfs and the remount is left out (it would make that mount
//      read-only). A P4 secret of kSystemReadDenyPaths inside a listed
//      directory or symlink (/etc/ssl/private: group ssl-cert reads it, and
//      supplementary groups still count inside the user namespace) is
//      masked there like any read-denied path.
//    Either way a write fails with EROFS and nothing else of the host /etc
//    is there.
//  * SSH known hosts (E4). The user's known hosts (policy::ssh_known_hosts,
//    a regular file) are copied in read-only at kGuestKnownHosts (`--perms
//    0444 --file FD`, a data file like /etc's: the launcher opens it, so a
//    root launcher's own file reaches an unprivileged sandbox uid), and
//    GIT_SSH_COMMAND names it with -o UserKnownHostsFile. ~/.ssh stays
//    masked; the copy cannot change the host's file. /etc/ssh/ssh_known_hosts
//    is in the minimal /etc (ssh reads it by default).
//  * Toolchains (E4): policy::toolchains are read-only mounts like any
//    other; each one gets a note (the start-up details).
//  * Scratch HOME (E5). Every session whose HOME no writable bind covers
//    (scratch_home(policy): decided from the policy alone, so the renderer,
//    the launcher's data files and the X2 Landlock rules agree) gets a
//    private tmpfs as HOME, `--perms 0700 --size <tmp cap> --tmpfs`, gone
//    with the session. HOME not bound at all: the tmpfs is mounted at the
//    host's HOME path, as one of the sorted path operations, so every bind
//    below HOME (a worktree, the E4 toolchain homes) lands on it and stays
//    where tools expect it; nothing of the host's HOME is in it, so no mask
//    is needed there (the read-deny loop only masks what a bind makes
//    visible). HOME bound read-only, or inside a tree the sandbox gets from
//    elsewhere (kSystemTop, /etc, /proc, /dev, /sys, /run): the bind and its
//    masks stay, and the tmpfs goes to kScratchHomeFallback with HOME
//    pointing there and the toolchain homes bound from below the host's HOME
//    named by their variables (kToolchainHomeVariables). A writable HOME
//    (the terminal profile, a writable bind of HOME) gets nothing. Its one
//    file: `.gitconfig` with the host user's user.name and user.email
//    (bwrap_facts::identity, read by the launcher; gitconfig_for quotes
//    them and drops one holding a control character with a note), written
//    by the launcher to <run_dir>/kGitConfigName and copied in like the
//    known hosts (`--perms 0644 --file FD`, after them in plan.data_files):
//    a copy the session may rewrite, never the host's file.
//  * The environment reaches the command through bwrap's own environment:
//    `--clearenv` and `--setenv` through --args (spawn_args_blob), never on
//    an argv, where the host's process list would show the values.
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/confine/landlock.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/etc_manifest.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/layout.hpp"
#include "ccsb/render/bwrap/plan.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb {

struct bwrap_facts {
  // lstat-like: what is at a host path (not following a final symlink).
  std::function<path_kind(const std::string&)> kind;
  // readlink: the target of a symlink (only asked for kind()==symlink).
  std::function<std::optional<std::string>(const std::string&)> readlink;
  std::string run_dir;      // host path of the session's private 0700 run dir
  std::string sources_dir;  // host path of the launcher's shared mask sources (run_dir.hpp ensure_mask_sources)
  std::string init_path;    // host path of ccsb-init
  // The sandbox's uid cannot reach init_path (a root launcher installed in a
  // private directory): bwrap copies ccsb-init in from kInitFd, which the
  // launcher opened, instead of binding the path.
  bool init_by_fd{false};
  std::uint64_t tmp_size_bytes{0}; // L7: size cap of the private /tmp (0: bwrap's default, unbounded)
  bool creation_rules{false}; // X1: the kernel has what ccsb-init's broker needs (P7 runs instead of being refused)
  // The launcher's /etc view (ccsb/launch/etc_view.hpp): a host directory
  // holding exactly the minimal /etc, bound read-only at /etc in one
  // operation. nullopt: bwrap builds /etc itself (see "The minimal /etc").
  std::optional<std::string> etc_view;
  // L1, a root launcher's session uid (ccsb/launch/linux/session_uid.hpp):
  // the ids the sandbox sees itself as (bwrap --uid/--gid), when they are
  // not its host ids; and the binds presented to that uid as their owner:
  // a bind whose source lies in `root` is taken from `from` (root's
  // idmapped clone, staged in the run dir), its destination unchanged.
  using ids = bwrap_ids;
  std::optional<ids> sandbox_ids;
  struct source_alias {
    std::string root, from;
  };
  std::vector<source_alias> source_aliases;
  // E5: the host user's git identity (the launcher reads `git config
  // --global --get user.name` / `user.email`); empty: none.
  struct git_identity {
    std::string name, email;
  } identity;
};

// What masks and placeholders are bound from: empty files and directories
// the launcher keeps once per run-dir base, shared by every session
// (run_dir.hpp ensure_mask_sources).
struct mask_sources {
  std::string mask_file;   // empty regular file, mode 0000
  std::string mask_dir;    // empty directory, mode 0000
  std::string empty_file;  // empty regular file, mode 0444 (placeholder)
  std::string empty_dir;   // empty directory, mode 0555 (placeholder)
  std::string git_commondir; // regular file holding kGitCommondirPlaceholder, mode 0444
};

// What a placeholder for git's `commondir` holds (source and host mount
// point alike): "." names the git directory itself, which is what git does
// when there is no commondir; an empty or unreadable commondir is a fatal
// error for git ("failed to read .git/commondir"), on the host too.
inline constexpr std::string_view kGitCommondirPlaceholder = ".\n";

inline mask_sources mask_sources_for(const std::string& sources_dir) {
  return {sources_dir + "/mask/file", sources_dir + "/mask/dir", sources_dir + "/empty/file", sources_dir + "/empty/dir",
          sources_dir + "/empty/commondir"};
}

// E4: the known hosts file copied in read-only: the first of
// policy::ssh_known_hosts that is a regular file, for proxied sessions.
inline std::optional<std::string> known_hosts_source(const policy& pol,
                                                     const std::function<path_kind(const std::string&)>& kind) {
  if (pol.network.kind != network_kind::proxied) return std::nullopt;
  for (const auto& kh : pol.ssh_known_hosts)
    if (kind(kh) == path_kind::file) return kh;
  return std::nullopt;
}

// E5: the scratch HOME's .gitconfig: user.name and user.email only, each
// quoted; a value holding a control character (a newline would start a
// new section: `[core] sshCommand = ...`) is dropped, and a note says so.
struct gitconfig_text {
  std::string content; // empty: nothing to copy in
  std::vector<std::string> notes;
};
inline gitconfig_text gitconfig_for(const bwrap_facts::git_identity& id) {
  gitconfig_text out;
  std::string body;
  auto put = [&](std::string_view key, const std::string& v) {
    if (v.empty()) return;
    for (unsigned char ch : v)
      if (ch < 0x20 || ch == 0x7f) {
        out.notes.push_back("git identity: the host's user." + std::string(key) +
                            " holds a control character and is not carried into the scratch HOME (E5)");
        return;
      }
    std::string q;
    for (char ch : v) {
      if (ch == '\\' || ch == '"') q += '\\';
      q += ch;
    }
    body += "\t" + std::string(key) + " = \"" + q + "\"\n";
  };
  put("name", id.name);
  put("email", id.email);
  if (!body.empty()) out.content = "[user]\n" + body;
  return out;
}

namespace detail {

// One gitignore line matching exactly `rel` (a path relative to a worktree
// root) and everything below it: anchored with "/", every byte that is
// special to gitignore escaped with a backslash.
inline std::string git_exclude_pattern(std::string_view rel) {
  if (rel.empty() || rel.find('\n') != std::string_view::npos) return {}; // not expressible: git sees it
  std::string out = "/";
  for (char ch : rel) {
    if (ch == '\\' || ch == '*' || ch == '?' || ch == '[' || ch == '!' || ch == '#' || ch == ' ') out += '\\';
    out += ch;
  }
  return out + "\n";
}

inline std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// The run-dir source bound over a denied name that does not exist, and what
// the launcher creates at the name on the host, chosen by what the name is
// by nature (path_rule::shape, data in paths.hpp): a read-denied one gets a
// mode-0000 mask (neither readable nor writable), a write-denied one an
// empty read-only placeholder, git's commondir a read-only file naming the
// git directory itself (see "Denied paths that do not exist").
struct occupant {
  std::string source;
  entry_shape shape;
};
inline occupant placeholder_for(path_shape shape, bool read_denied, const mask_sources& src) {
  if (read_denied)
    return shape == path_shape::dir ? occupant{src.mask_dir, entry_shape::dir} : occupant{src.mask_file, entry_shape::file};
  switch (shape) {
  case path_shape::dir: return {src.empty_dir, entry_shape::dir};
  case path_shape::git_commondir: return {src.git_commondir, entry_shape::git_commondir};
  case path_shape::file: break;
  }
  return {src.empty_file, entry_shape::file};
}

// Which of the path operations wins when several land on one path: the
// stronger statement (a mask over a re-bind over a pin over the mount).
inline int precedence(op_kind k) {
  switch (k) {
  case op_kind::tmpfs: return 4; // E5's scratch HOME at the host's HOME path
  case op_kind::mask: return 3;
  case op_kind::write_deny:
  case op_kind::placeholder: return 2;
  case op_kind::pin:
  case op_kind::create_pin: return 1;
  default: return 0; // the policy's own mounts
  }
}

// The refusal for a symlink on a denied path inside a writable bind (see
// "Symlinks on a denied path"); `what` names the symlink's role.
inline error unpinnable_symlink(const std::string& path, std::string_view what, const std::string& root,
                                std::string_view why = {}) {
  std::string m = std::string(what) + " is a symlink inside the writable bind \"" + root +
                  "\": the command could replace it with a directory of its own (a planted config), and bubblewrap "
                  "cannot pin a symlink";
  if (!why.empty()) m += " (" + std::string(why) + ")";
  return make_error(errc::unenforceable, path,
                    m + ". Bind \"" + root + "\" read-only (--bind PATH:ro, readOnly), or replace the symlink by "
                        "what it points to; refusing instead of running with a weaker policy");
}

// What covers a path: the deepest bind mount that is an ancestor-or-self.
// The system tree is read-only; anything else is invisible.
inline const mount_rule* covering_mount(const policy& pol, const std::string& p) {
  const mount_rule* best = nullptr;
  for (const auto& m : pol.mounts)
    if (within(p, m.guest_path) && (!best || m.guest_path.size() > best->guest_path.size())) best = &m;
  return best;
}

// A tmpfs capped at the L7 size (see "Writable tmpfs").
inline setup_op capped_tmpfs(std::string dest, const bwrap_facts& facts, std::string perms = {}) {
  return {.kind = op_kind::tmpfs, .dest = std::move(dest), .perms = std::move(perms), .size = facts.tmp_size_bytes};
}

// What the renderer cannot do without.
inline result<void> check_render_inputs(const policy& pol, const bwrap_facts& facts) {
  // P7 / L4: fail closed before anything else.
  if (auto e = check_enforceable(pol, {.creation_rules = facts.creation_rules}); !e) return std::move(e).err();
  if (!facts.kind) return make_error(errc::invalid_argument, "facts.kind", "the renderer needs a path lookup");
  if (facts.run_dir.empty() || facts.run_dir.front() != '/')
    return make_error(errc::invalid_argument, "facts.run_dir", "an absolute run directory is required");
  if (facts.sources_dir.empty() || facts.sources_dir.front() != '/')
    return make_error(errc::invalid_argument, "facts.sources_dir",
                      "the absolute directory of the mask sources is required");
  if (facts.init_path.empty() || facts.init_path.front() != '/')
    return make_error(errc::invalid_argument, "facts.init_path", "the absolute path of ccsb-init is required");
  if (facts.etc_view && (facts.etc_view->empty() || facts.etc_view->front() != '/'))
    return make_error(errc::invalid_argument, "facts.etc_view", "the /etc view must be an absolute host path");
  return ok();
}

// Layout step 2: the read-only system tree.
inline result<void> add_system_tree(const bwrap_facts& facts, std::vector<setup_op>& ops) {
  for (auto top : kSystemTop) {
    std::string p(top);
    switch (facts.kind(p)) {
    case path_kind::dir: ops.push_back({.kind = op_kind::ro_bind, .dest = p, .source = p}); break;
    case path_kind::symlink: {
      auto target = facts.readlink ? facts.readlink(p) : std::nullopt;
      if (!target) return make_error(errc::io_error, p, "cannot read the symlink target");
      ops.push_back({.kind = op_kind::symlink, .dest = p, .source = *target});
      break;
    }
    default: break;
    }
  }
  return ok();
}

// The minimal /etc (see "The minimal /etc"): one read-only bind of the
// launcher's view, or a tmpfs with files copied in, directories and
// symlinks bound read-only and the masks. Returns whether that tmpfs is to
// be remounted read-only at the end.
inline bool add_minimal_etc(const policy& pol, const bwrap_facts& facts, const mask_sources& src, bwrap_plan& plan) {
  const etc_manifest etc = minimal_etc(pol, facts.kind);
  if (facts.etc_view) {
    if (etc.view_blocker.empty()) {
      plan.ops.push_back({.kind = op_kind::ro_bind, .dest = "/etc", .source = *facts.etc_view});
      return false;
    }
    plan.notes.push_back("the /etc view is not used: " + etc.view_blocker);
  }
  if (!etc.entries.empty()) plan.ops.push_back({.kind = op_kind::tmpfs, .dest = "/etc"});
  for (const auto& e : etc.entries) {
    if (e.kind == path_kind::file) {
      plan.ops.push_back({.kind = op_kind::file,
                          .dest = e.path,
                          .fd = kFirstDataFd + static_cast<int>(plan.data_files.size()),
                          .perms = "0444"});
      plan.data_files.push_back(e.path);
    } else {
      // --ro-bind follows a symlinked source (/etc/localtime -> zoneinfo).
      plan.ops.push_back({.kind = op_kind::ro_bind, .dest = e.path, .source = e.path});
    }
  }
  for (const auto& m : etc.masks)
    plan.ops.push_back({.kind = op_kind::mask,
                        .dest = m.path,
                        .source = m.dir ? src.mask_dir : src.mask_file,
                        .shape = m.dir ? entry_shape::dir : entry_shape::file});
  return !etc.entries.empty() && !etc.covered;
}

// /proc with /proc/sys read-only (L1: kernel settings such as core_pattern
// are never writable from inside, whatever uid the sandbox has); /dev with
// a capped /dev/shm, then read-only (L7: bwrap cannot size its /dev tmpfs;
// /dev/shm and /dev/pts are mounts of their own and stay writable); a
// capped private /tmp.
inline void add_proc_dev_tmp(const bwrap_facts& facts, std::vector<setup_op>& ops) {
  ops.push_back({.kind = op_kind::proc, .dest = "/proc"});
  ops.push_back({.kind = op_kind::ro_bind, .dest = "/proc/sys", .source = "/proc/sys"});
  ops.push_back({.kind = op_kind::dev, .dest = "/dev"});
  ops.push_back(capped_tmpfs("/dev/shm", facts));
  ops.push_back({.kind = op_kind::remount_ro, .dest = "/dev"});
  ops.push_back(capped_tmpfs("/tmp", facts));
}

// X1: the broker's rule set before the write denials add their absent
// names (see "P7/L4"). Every writable root and runner state dir is a root
// of the rules (P5, L3) in every profile but the terminal one; linked
// worktrees of protected checkouts make their common dir a root whose names
// decide_linked decides one by one; the P7 names where the profile has them
// (a glob's root is always one of these).
inline broker::rule_set broker_rules_for(const policy& pol) {
  broker::rule_set rules;
  rules.host_net = pol.network.kind == network_kind::open;
  auto add_root = [&](const std::string& r) {
    if (std::find(rules.roots.begin(), rules.roots.end(), r) == rules.roots.end()) rules.roots.push_back(r);
  };
  if (pol.base != profile::terminal)
    for (const auto& a : pol.write_allow) add_root(a.path);
  for (const auto& l : pol.linked_worktrees) {
    add_root(l.common);
    rules.linked.push_back({l.admin, l.branch});
  }
  for (const auto& g : pol.write_deny_globs) {
    add_root(g.root);
    if (std::find(rules.names.begin(), rules.names.end(), g.name) == rules.names.end()) rules.names.push_back(g.name);
  }
  if (!rules.names.empty()) rules.create_allow = pol.create_allow;
  return rules;
}

// Layout step 3: the policy's mounts, pins, write-deny re-binds, masks and
// placeholders, decided path by path and then put in one sorted list. The
// absent write-denied names become entries of `rules` (the broker's).
class path_planner {
public:
  path_planner(const policy& pol, const bwrap_facts& facts, const mask_sources& src, broker::rule_set& rules,
               std::vector<std::string>& notes)
      : pol_(pol), facts_(facts), src_(src), rules_(rules), notes_(notes) {
    for (const auto& x : pol.write_deny)
      if (!is_glob(x.path)) deny_paths_.push_back(&x);
  }

  result<void> add_mounts(const std::optional<std::string>& scratch) {
    for (const auto& m : pol_.mounts) {
      if (facts_.kind(m.host_path) == path_kind::missing)
        return make_error(errc::invalid_argument, "bindMounts",
                          "bind mount source does not exist: \"" + m.host_path + "\"");
      candidates_.push_back({.kind = m.writable ? op_kind::bind : op_kind::ro_bind, .dest = m.guest_path});
    }
    // E5: at the host's HOME path the scratch HOME is one of the path
    // operations, so the binds below HOME (the worktree, toolchains) land
    // on it, parents first; nothing of the host's HOME is in it.
    if (scratch && *scratch == pol_.home) candidates_.push_back(capped_tmpfs(*scratch, facts_, "0700"));
    // Under the broker an absent write-denied ancestor is a rule, not a
    // mount. Every native profile runs under it (policy::requires_broker,
    // check_enforceable): a policy that would not is refused rather than
    // rendered with its absent write-denied names unenforced.
    if (!pol_.requires_broker())
      return make_error(errc::unenforceable, "backend", "render_bwrap renders only policies that run under the X1 broker");
    return ok();
  }

  // Read-deny (P4): masks, and placeholders for the missing ones.
  result<void> add_read_denials() {
    for (const auto& r : pol_.read_deny) {
      if (is_glob(r.path)) continue;
      const mount_rule* c = covering_mount(pol_, r.path);
      if (!c) continue; // invisible
      // Could the command rename, replace or create this name?
      const bool writable_here = c->writable && !under_deny(r.path, *c, true);
      const path_kind k = facts_.kind(r.path);
      if (k == path_kind::symlink) {
        if (writable_here) return unpinnable_symlink(r.path, "the read-denied path", c->guest_path, r.why);
        notes_.push_back("read-deny " + r.path + " is a symlink: its resolved spelling is masked (P6)");
        continue;
      }
      if (k == path_kind::missing) {
        if (!writable_here) continue; // nothing can create it
        if (auto res = occupy_missing(r.path, *c, placeholder_for(r.shape, true, src_)); !res)
          return std::move(res).err();
        masked_.push_back(r.path);
        continue;
      }
      if (writable_here)
        if (auto res = pin_chain(c->guest_path, parent_of(r.path)); !res) return std::move(res).err();
      const bool dir = k == path_kind::dir;
      candidates_.push_back({.kind = op_kind::mask,
                             .dest = r.path,
                             .source = dir ? src_.mask_dir : src_.mask_file,
                             .shape = dir ? entry_shape::dir : entry_shape::file});
      masked_.push_back(r.path);
    }
    return ok();
  }

  // Write-deny (P2, P5, `.git` files): read-only re-binds of what exists;
  // the absent ones are rules of the broker, never placeholders.
  result<void> add_write_denials() {
    for (const auto& d : pol_.write_deny) {
      if (is_glob(d.path)) continue;
      const mount_rule* c = covering_mount(pol_, d.path);
      if (!c || !c->writable) continue; // invisible, or already read-only
      if (in_mask(d.path)) continue;    // masked: stronger
      if (under_deny(d.path, *c, false)) continue;
      const path_kind k = facts_.kind(d.path);
      if (k == path_kind::symlink) return unpinnable_symlink(d.path, "the write-denied path", c->guest_path, d.why);
      if (k != path_kind::missing) {
        if (auto r = pin_chain(c->guest_path, parent_of(d.path)); !r) return std::move(r).err();
        candidates_.push_back({.kind = op_kind::write_deny, .dest = d.path});
        continue;
      }
      if (auto r = deny_absent(d.path, *c); !r) return std::move(r).err();
    }
    auto& a = rules_.absent_denied;
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    return ok();
  }

  // The operations, parents first, one per path (the strongest, see
  // precedence), none below a mask (it would re-expose host content), each
  // bind taken from its idmapped clone where there is one.
  std::vector<setup_op> ops() {
    std::stable_sort(candidates_.begin(), candidates_.end(), [](const setup_op& a, const setup_op& b) {
      if (a.dest != b.dest) return a.dest < b.dest;
      return precedence(a.kind) > precedence(b.kind);
    });
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end(),
                                  [](const setup_op& a, const setup_op& b) { return a.dest == b.dest; }),
                      candidates_.end());
    std::vector<setup_op> out;
    for (auto& op : candidates_) {
      if (std::any_of(masked_.begin(), masked_.end(),
                      [&](const std::string& m) { return op.dest != m && within(op.dest, m); })) {
        notes_.push_back(op.dest + " lies inside a read-denied path: not rendered (the mask wins)");
        continue;
      }
      if (is_bind(op.kind)) op.source = aliased(op.source.empty() ? op.dest : op.source);
      out.push_back(std::move(op));
    }
    return out;
  }

  // The missing parents the launcher creates, sorted and unique.
  std::vector<std::string> create_dirs() const {
    auto d = create_dirs_;
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  }

  // The topmost created path of each placeholder, sorted and unique, and
  // the gitignore lines that hide them from git inside (see "Placeholders
  // and git").
  std::vector<std::string> placeholders() const {
    std::vector<std::string> p;
    for (const auto& [ph, root] : placeholder_roots_) p.push_back(ph);
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    return p;
  }
  std::string git_excludes() const {
    auto roots = placeholder_roots_;
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    std::string out;
    for (const auto& [ph, root] : roots)
      if (ph != root && within(ph, root)) out += git_exclude_pattern(ph.substr(root == "/" ? 1 : root.size() + 1));
    return out;
  }

private:
  // Read-only through a write-denied ancestor below the same cover (a
  // runner state dir deeper than that ancestor is its own cover);
  // `mounted_only` leaves out the absent ancestors (rules of the broker:
  // nothing below one can be created, but the host's files there would be
  // visible).
  bool under_deny(const std::string& p, const mount_rule& c, bool mounted_only) const {
    return std::any_of(deny_paths_.begin(), deny_paths_.end(), [&](const path_rule* x) {
      return x->path != p && within(p, x->path) && within(x->path, c.guest_path) &&
             !(mounted_only && facts_.kind(x->path) == path_kind::missing);
    });
  }

  bool in_mask(const std::string& p) const {
    return std::any_of(masked_.begin(), masked_.end(), [&](const std::string& m) { return within(p, m); });
  }

  // Every directory strictly below `root` down to `upto_incl`; none may be
  // a symlink (the command could replace it, and neither a pin nor the
  // broker, which decides on resolved names, would hold the denied name).
  result<std::vector<std::string>> chain_of(const std::string& root, const std::string& upto_incl) const {
    std::vector<std::string> chain;
    for (std::string a = upto_incl; a != root && within(a, root) && a != "/"; a = parent_of(a)) {
      if (facts_.kind(a) == path_kind::symlink)
        return unpinnable_symlink(a, "a directory on the way to a denied path", root);
      chain.push_back(a);
    }
    return chain;
  }

  result<void> pin_chain(const std::string& root, const std::string& upto_incl) {
    auto chain = chain_of(root, upto_incl);
    if (!chain) return std::move(chain).err();
    for (const auto& a : *chain) candidates_.push_back({.kind = op_kind::pin, .dest = a});
    return ok();
  }

  // A write-denied name that does not exist, below the writable cover `c`,
  // under the broker: an entry of the rule set instead of a placeholder
  // (see "Absent write-denied names under the broker").
  result<void> deny_absent(const std::string& p, const mount_rule& c) {
    std::string e = parent_of(p);
    while (within(e, c.guest_path) && e != c.guest_path && facts_.kind(e) == path_kind::missing) e = parent_of(e);
    if (auto chain = chain_of(c.guest_path, e); !chain) return std::move(chain).err();
    if (!broker::covers_absent(rules_, p)) rules_.absent_denied.push_back(p);
    return ok();
  }

  // A denied name that does not exist, below the writable cover `c`:
  // occupy it (see "Denied paths that do not exist").
  result<void> occupy_missing(const std::string& p, const mount_rule& c, const occupant& with) {
    std::string e = parent_of(p);
    std::vector<std::string> missing_parents;
    while (within(e, c.guest_path) && e != c.guest_path && facts_.kind(e) == path_kind::missing) {
      missing_parents.push_back(e);
      e = parent_of(e);
    }
    const path_kind ek = facts_.kind(e);
    if (ek == path_kind::symlink) return unpinnable_symlink(e, "a directory on the way to a denied path", c.guest_path);
    if (ek != path_kind::dir) {
      // Nothing can be created below a file, as long as the file stays: pin
      // it (a mount point cannot be removed or replaced).
      if (ek == path_kind::missing) return ok();
      return pin_chain(c.guest_path, e);
    }
    if (auto r = pin_chain(c.guest_path, e); !r) return std::move(r).err();
    std::reverse(missing_parents.begin(), missing_parents.end());
    for (const auto& mp : missing_parents) {
      candidates_.push_back({.kind = op_kind::create_pin, .dest = mp});
      create_dirs_.push_back(mp);
    }
    candidates_.push_back({.kind = op_kind::placeholder, .dest = p, .source = with.source, .shape = with.shape});
    placeholder_roots_.emplace_back(missing_parents.empty() ? p : missing_parents.front(), c.guest_path);
    return ok();
  }

  // The source of a bind: the host path, or where its idmapped clone is
  // staged (facts.source_aliases; the longest root wins).
  std::string aliased(const std::string& p) const {
    const bwrap_facts::source_alias* best = nullptr;
    for (const auto& a : facts_.source_aliases)
      if (within(p, a.root) && (!best || a.root.size() > best->root.size())) best = &a;
    return best ? best->from + p.substr(best->root.size()) : p;
  }

  const policy& pol_;
  const bwrap_facts& facts_;
  const mask_sources& src_;
  broker::rule_set& rules_;
  std::vector<std::string>& notes_;
  std::vector<const path_rule*> deny_paths_; // the non-glob write denials, looked at for every denied path
  std::vector<setup_op> candidates_;         // several may name one path until ops() picks one
  std::vector<std::string> masked_;
  std::vector<std::string> create_dirs_;
  std::vector<std::pair<std::string, std::string>> placeholder_roots_; // topmost created path, its writable root
};

// Layout step 4: ccsb's own files, the E4 known hosts, the E5 scratch HOME
// (away from the host's HOME path) and its .gitconfig, the read-only
// remounts. Returns where the known hosts are in the sandbox ("": none).
inline std::string add_session_files(const policy& pol, const bwrap_facts& facts,
                                     const std::optional<std::string>& scratch, bool remount_etc, bwrap_plan& plan) {
  auto next_data_fd = [&] { return kFirstDataFd + static_cast<int>(plan.data_files.size()); };
  if (facts.init_by_fd)
    plan.ops.push_back({.kind = op_kind::file, .dest = std::string(kGuestInit), .fd = kInitFd, .perms = "0555"});
  else
    plan.ops.push_back({.kind = op_kind::ro_bind, .dest = std::string(kGuestInit), .source = facts.init_path});
  if (!plan.git_excludes.empty())
    plan.ops.push_back({.kind = op_kind::ro_bind,
                        .dest = std::string(kGuestGitExcludes),
                        .source = facts.run_dir + "/" + std::string(kGitExcludesName)});
  std::string known_hosts;
  if (auto kh = known_hosts_source(pol, facts.kind)) {
    plan.ops.push_back({.kind = op_kind::file, .dest = std::string(kGuestKnownHosts), .fd = next_data_fd(), .perms = "0444"});
    plan.data_files.push_back(*kh);
    known_hosts = kGuestKnownHosts;
    plan.notes.push_back("ssh known hosts: a read-only copy of " + *kh + " at " + known_hosts);
  }
  if (scratch && *scratch != pol.home) {
    plan.ops.push_back(capped_tmpfs(*scratch, facts, "0700"));
    plan.notes.push_back("scratch HOME: a private tmpfs at " + *scratch + " (the host's HOME " + pol.home +
                         " is bound read-only or cannot hold it); HOME points there");
  } else if (scratch) {
    plan.notes.push_back("scratch HOME: a private tmpfs at " + *scratch + ", nothing of the host's HOME in it");
  }
  if (scratch) {
    auto gc = gitconfig_for(facts.identity);
    for (auto& n : gc.notes) plan.notes.push_back(std::move(n));
    const std::string dest = *scratch + "/.gitconfig";
    if (!gc.content.empty() && !covering_mount(pol, dest)) {
      plan.ops.push_back({.kind = op_kind::file, .dest = dest, .fd = next_data_fd(), .perms = "0644"});
      plan.data_files.push_back(facts.run_dir + "/" + std::string(kGitConfigName));
      plan.notes.push_back("git identity: user.name and user.email copied into " + dest);
    }
  }
  if (remount_etc) plan.ops.push_back({.kind = op_kind::remount_ro, .dest = "/etc"});
  // L7: bwrap's root is a tmpfs it cannot size either; every mount point is
  // made by now, so it becomes read-only (a policy never binds "/": compile
  // refuses it).
  if (!covering_mount(pol, "/")) plan.ops.push_back({.kind = op_kind::remount_ro, .dest = "/"});
  return known_hosts;
}

// The command's environment (session_environment.hpp): E5's moved HOME, N2's
// proxies through ccsb-init's ssh helper, the placeholders' git excludes.
inline env_list environment_for(const policy& pol, const std::optional<std::string>& scratch, bool proxied,
                                const std::string& known_hosts, bool git_excludes) {
  environment_facts f;
  f.home = scratch.value_or(std::string());
  if (proxied) f.proxy = bwrap_proxy_endpoints(known_hosts);
  if (git_excludes) f.git_excludes_file = std::string(kGuestGitExcludes);
  return session_environment(pol, f);
}

// What the launcher prepares on the host: the missing parents of
// placeholders (parents first), then every bind target inside a writable
// mount, in the order bwrap mounts them: held when it exists, created when
// it is a missing mask or placeholder target (see placeholders.hpp).
inline std::vector<host_prep_op> host_prep_for(const policy& pol, const std::vector<setup_op>& ops,
                                            const std::vector<std::string>& create_dirs) {
  std::vector<host_prep_op> out;
  for (const auto& d : create_dirs) out.push_back({host_prep_op::action::make_dir, d, entry_shape::dir});
  auto in_writable = [&](const std::string& p) {
    return std::any_of(pol.mounts.begin(), pol.mounts.end(),
                       [&](const mount_rule& m) { return m.writable && within(p, m.guest_path); });
  };
  for (const auto& op : ops)
    if (is_bind(op.kind) && in_writable(op.dest)) out.push_back({host_prep_op::action::occupy, op.dest, op.shape});
  return out;
}

} // namespace detail

inline result<bwrap_plan> render_bwrap(const policy& pol, const bwrap_facts& facts) {
  using namespace detail;
  if (auto r = check_render_inputs(pol, facts); !r) return std::move(r).err();
  const bool proxied = pol.network.kind == network_kind::proxied;
  const mask_sources src = mask_sources_for(facts.sources_dir);
  const std::optional<std::string> scratch = scratch_home(pol);
  bwrap_plan plan;

  // 1. Namespaces and process attributes (L1).
  plan.process = {.ids = facts.sandbox_ids, .unshare_net = proxied};
  // 2. The read-only system tree, /etc, /proc, /dev, /tmp.
  if (auto r = add_system_tree(facts, plan.ops); !r) return std::move(r).err();
  const bool remount_etc = add_minimal_etc(pol, facts, src, plan);
  add_proc_dev_tmp(facts, plan.ops);
  // 3. The policy's paths; the broker's rules take the absent write denials.
  plan.init.broker = broker_rules_for(pol);
  path_planner paths(pol, facts, src, plan.init.broker, plan.notes);
  if (auto r = paths.add_mounts(scratch); !r) return std::move(r).err();
  if (auto r = paths.add_read_denials(); !r) return std::move(r).err();
  if (auto r = paths.add_write_denials(); !r) return std::move(r).err();
  for (auto& op : paths.ops()) plan.ops.push_back(std::move(op));
  plan.placeholders = paths.placeholders();
  plan.git_excludes = paths.git_excludes();
  // 4. ccsb's own files, the remounts, the working directory.
  const std::string known_hosts = add_session_files(pol, facts, scratch, remount_etc, plan);
  plan.chdir = pol.workdir.empty() ? std::string("/") : pol.workdir;
  if (!pol.exec.grant_roots.empty()) plan.notes.push_back("execGrantRoots are ignored on Linux (L5)");

  // ccsb-init: the proxy listeners (L3); the X2 Landlock ruleset, computed
  // from the policy, not from the ops above (confine/landlock.hpp).
  plan.init.proxy_listeners = proxied;
  plan.init.landlock = confine::landlock_rules_for(pol, !proxied);
  plan.environment = environment_for(pol, scratch, proxied, known_hosts, !plan.git_excludes.empty());
  plan.host_prep = host_prep_for(pol, plan.ops, paths.create_dirs());
  return plan;
}

} // namespace ccsb
