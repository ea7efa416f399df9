// ccsb/render_bwrap.hpp — render a compiled policy as a bubblewrap argv
// (L1-L5, N2, P7). Pure: no I/O. Everything the renderer must know about the
// host (what exists at a path, symlink targets, the session's run directory,
// whether the X1 broker can run) arrives as injected bwrap_facts, so golden
// tests are deterministic. What every renderer needs is decided by
// policy.hpp and consumed here: the P7/L4 refusal (check_enforceable) and the
// write denials of `.git` files and the git directories they name.
//
//   render_bwrap(policy, facts) -> result<bwrap_plan>
//   bwrap_argv(plan, bwrap, args_fd) -> an argv for execve (printing, tests)
//   bwrap_spawn_argv(bwrap, args_fd, options_fd) -> the argv the launcher
//     runs: bwrap before its policy exists (see "Spawned first, fed later")
//   spawn_args_blob(plan) / init_options_blob(plan) -> what it is fed
//   known_hosts_source(policy, kind) -> the E4 known hosts file copied in
//
// Layout of the sandbox (L1), in argv order:
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
//    created by the launcher before bwrap runs (plan.create_dirs: bwrap
//    resolves every bind source before it mounts anything, so `--dir` cannot
//    create a source) and pinned (`--bind M M`), and a placeholder from the
//    run dir is bound read-only at the path, so the name exists and cannot
//    be written, renamed or removed. Which placeholder is data, not a guess
//    (path_rule::shape, paths.hpp; placeholder_source()): a read-denied name
//    gets a mode-0000 mask (a directory for ~/.ssh, a file for ~/.netrc:
//    neither readable nor writable), a write-denied one an empty 0555
//    directory or 0444 file, and git's `commondir` a 0444 file holding
//    kGitCommondirPlaceholder (".": the git directory itself; git treats an
//    empty or unreadable commondir as fatal, a directory too, so only "."
//    keeps `git status`, `commit`, `worktree add`, `sparse-checkout`
//    working, inside and on the host). The mount points are created on the
//    host (a commondir one with the same content, so host git keeps
//    working); plan.placeholders lists the topmost created path of each so
//    the launcher removes them at teardown. When the nearest existing
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
//    GIT_CONFIG_COUNT/KEY_0/VALUE_0 (command-line level: it replaces a
//    user's own core.excludesFile inside the sandbox; E3 removes any
//    inherited GIT_* variable first). Tracked files are not affected.
//  * --args FD, always. The options are never put in bwrap's argv:
//    bwrap_argv returns `bwrap --args FD -- ccsb-init OPTIONS...` and the
//    launcher writes plan.options NUL-separated into FD (args_blob()).
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
//    as before, and values never appear in any argv), then plan.options.
//    ccsb-init's own options (plan.init_argv after its path) go through
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
#include "ccsb/environment.hpp"
#include "ccsb/etc_manifest.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
// E5/E4: with HOME moved to kScratchHomeFallback, a toolchain home bound
// read-only from below the host's HOME is named by its own variable.
inline constexpr std::pair<std::string_view, std::string_view> kToolchainHomeVariables[] = {
    {".cargo", "CARGO_HOME"}, {".rustup", "RUSTUP_HOME"}, {".pyenv", "PYENV_ROOT"}, {".nvm", "NVM_DIR"}};
// The proxies as the sandbox sees them (listeners inside its network namespace).
inline constexpr std::string_view kProxyHttp = "127.0.0.1:3128";
inline constexpr std::string_view kProxySocks = "127.0.0.1:1080";
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
  struct ids {
    std::uint32_t uid, gid;
  };
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

struct bwrap_plan {
  std::vector<std::string> options;      // every bwrap option, before "--"
  std::vector<std::string> init_argv;    // ccsb-init and its options
  env_list environment;                  // the command's complete environment (E1 + N2)
  std::vector<std::string> placeholders; // host paths bwrap will create (teardown removes them if empty)
  std::string git_excludes;              // gitignore lines naming the placeholders, per writable root (launcher
                                         // writes them to <run_dir>/kGitExcludesName)
  std::vector<std::string> create_dirs;  // directories the launcher creates before bwrap runs (parents first)
  std::vector<std::string> data_files;   // host files the launcher opens read-only at kFirstDataFd + i (--file)
  std::vector<std::string> notes;        // decisions worth a log line
  bool use_args_fd{true}; // always (see "--args FD, always"); kept for callers that check

  // The options NUL-separated, for --args FD.
  std::string args_blob() const {
    std::string out;
    for (const auto& o : options) {
      out += o;
      out += '\0';
    }
    return out;
  }
};

// A complete argv for execve, ccsb-init's options on it. With
// plan.use_args_fd bwrap reads its own options from `args_fd` (filled with
// args_blob()). The launcher runs bwrap_spawn_argv instead.
inline std::vector<std::string> bwrap_argv(const bwrap_plan& plan, const std::string& bwrap, int args_fd = -1) {
  std::vector<std::string> argv{bwrap};
  if (plan.use_args_fd) {
    argv.push_back("--args");
    argv.push_back(std::to_string(args_fd));
  } else {
    argv.insert(argv.end(), plan.options.begin(), plan.options.end());
  }
  argv.push_back("--");
  argv.insert(argv.end(), plan.init_argv.begin(), plan.init_argv.end());
  return argv;
}

// The argv the launcher runs (see "Spawned first, fed later"): nothing of
// the policy, so bwrap can start before the policy is rendered.
inline std::vector<std::string> bwrap_spawn_argv(const std::string& bwrap, int args_fd, int options_fd) {
  return {bwrap, "--args", std::to_string(args_fd), "--", std::string(kGuestInit), "--options-fd",
          std::to_string(options_fd)};
}

// What bwrap reads from its --args descriptor: the command's environment
// (replacing bwrap's own, which the launcher leaves empty), then the options.
// NUL separates them, so a NUL inside one would split it into options of its
// own (a variable's value turned into `--bind / /`): refused, naming it.
inline result<std::string> spawn_args_blob(const bwrap_plan& plan) {
  std::string out;
  auto put = [&](std::string_view a, std::string_view what) -> result<void> {
    if (a.find('\0') != std::string_view::npos)
      return make_error(errc::invalid_argument, std::string(what), "contains a NUL byte");
    out += a;
    out += '\0';
    return ok();
  };
  if (auto r = put("--clearenv", "--clearenv"); !r) return std::move(r).err();
  for (const auto& v : plan.environment) {
    if (auto r = put("--setenv", "--setenv"); !r) return std::move(r).err();
    if (auto r = put(v.name, "environment"); !r) return std::move(r).err();
    if (auto r = put(v.value, "environment." + v.name); !r) return std::move(r).err();
  }
  for (const auto& o : plan.options)
    if (auto r = put(o, "bwrap option"); !r) return std::move(r).err();
  return out;
}

// ccsb-init's options for its --options-fd memfd: plan.init_argv without
// the program path, NUL-separated (the launcher appends what it adds); a
// NUL inside one is refused as above.
inline result<std::string> init_options_blob(const bwrap_plan& plan) {
  std::string out;
  for (std::size_t i = 1; i < plan.init_argv.size(); ++i) {
    if (plan.init_argv[i].find('\0') != std::string::npos)
      return make_error(errc::invalid_argument, "ccsb-init option", "contains a NUL byte");
    out += plan.init_argv[i];
    out += '\0';
  }
  return out;
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

// E5: where the session's private scratch HOME is mounted (see "Scratch
// HOME"), or nullopt when HOME is already writable (a writable bind covers
// it: the terminal profile, a spec binding HOME) or is "/". Decided from the
// policy alone, so the launcher, the renderer and the Landlock rules agree.
inline std::optional<std::string> scratch_home(const policy& pol) {
  if (pol.home.empty() || pol.home == "/" || pol.home.front() != '/') return std::nullopt;
  const mount_rule* best = nullptr;
  for (const auto& m : pol.mounts)
    if (detail::within(pol.home, m.guest_path) && (!best || m.guest_path.size() > best->guest_path.size())) best = &m;
  if (best && best->writable) return std::nullopt;
  if (best) return std::string(kScratchHomeFallback); // read-only HOME: its masks stay, the scratch goes elsewhere
  for (auto top : kSystemTop)
    if (detail::within(pol.home, std::string(top))) return std::string(kScratchHomeFallback);
  for (std::string_view t : {"/etc", "/proc", "/dev", "/sys", "/run"})
    if (detail::within(pol.home, std::string(t))) return std::string(kScratchHomeFallback);
  return pol.home;
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

inline std::string parent_of(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return p.substr(0, slash);
}

inline std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// The run-dir source bound over a denied name that does not exist, chosen
// by what the name is by nature (path_rule::shape, data in paths.hpp): a
// read-denied one gets a mode-0000 mask (neither readable nor writable), a
// write-denied one an empty read-only placeholder, git's commondir a
// read-only file naming the git directory itself (see "Denied paths that do
// not exist").
inline const std::string& placeholder_source(path_shape shape, bool read_denied, const mask_sources& src) {
  if (read_denied) return shape == path_shape::dir ? src.mask_dir : src.mask_file;
  switch (shape) {
  case path_shape::dir: return src.empty_dir;
  case path_shape::git_commondir: return src.git_commondir;
  case path_shape::file: break;
  }
  return src.empty_file;
}

enum class op_kind {
  bind_rw,     // --bind P P (bind mount or pin)
  bind_ro,     // --ro-bind P P (bind mount or write-deny)
  create_pin,  // --bind P P for a missing parent of a placeholder (created by the launcher)
  mask,        // --ro-bind <mask source> P
  placeholder, // --ro-bind <empty source> P
  scratch,     // --perms 0700 --size N --tmpfs P: E5's scratch HOME at the host's HOME path
};

struct path_op {
  std::string path;
  op_kind kind{op_kind::bind_ro};
  std::string source; // mask/placeholder source
  int rank{0};        // which op wins at the same path (higher wins)
};

} // namespace detail

inline result<bwrap_plan> render_bwrap(const policy& pol, const bwrap_facts& facts) {
  using namespace detail;
  // P7 / L4: fail closed before anything else.
  if (auto e = check_enforceable(pol, {.creation_rules = facts.creation_rules}); !e) return std::move(e).err();
  if (!facts.kind)
    return make_error(errc::invalid_argument, "facts.kind", "the renderer needs a path lookup");
  if (facts.run_dir.empty() || facts.run_dir.front() != '/')
    return make_error(errc::invalid_argument, "facts.run_dir", "an absolute run directory is required");
  if (facts.sources_dir.empty() || facts.sources_dir.front() != '/')
    return make_error(errc::invalid_argument, "facts.sources_dir", "the absolute directory of the mask sources is required");
  if (facts.init_path.empty() || facts.init_path.front() != '/')
    return make_error(errc::invalid_argument, "facts.init_path", "the absolute path of ccsb-init is required");
  const bool proxied = pol.network.kind == network_kind::proxied;

  bwrap_plan plan;
  auto& o = plan.options;
  auto add = [&](std::initializer_list<std::string_view> args) {
    for (auto a : args) o.emplace_back(a);
  };
  const mask_sources src = mask_sources_for(facts.sources_dir);

  // 1. Namespaces and process attributes (L1).
  add({"--new-session", "--die-with-parent"});
  add({"--unshare-user", "--disable-userns"});
  if (facts.sandbox_ids)
    add({"--uid", std::to_string(facts.sandbox_ids->uid), "--gid", std::to_string(facts.sandbox_ids->gid)});
  add({"--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"});
  if (proxied) add({"--unshare-net"});
  add({"--hostname", "ccsb", "--cap-drop", "ALL"});
  add({"--seccomp", std::to_string(kSeccompFd)}); // L6, see "Baseline seccomp filter"

  // 2. The read-only system tree.
  for (auto top : kSystemTop) {
    std::string p(top);
    switch (facts.kind(p)) {
    case path_kind::dir: add({"--ro-bind", p, p}); break;
    case path_kind::symlink: {
      auto target = facts.readlink ? facts.readlink(p) : std::nullopt;
      if (!target) return make_error(errc::io_error, p, "cannot read the symlink target");
      add({"--symlink", *target, p});
      break;
    }
    default: break;
    }
  }
  // The minimal /etc (see "The minimal /etc"): one read-only bind of the
  // launcher's view, or a tmpfs with files copied in, directories and
  // symlinks bound read-only and the masks, remounted read-only at the end.
  const etc_manifest etc = minimal_etc(pol, facts.kind);
  bool etc_by_view = false;
  if (facts.etc_view) {
    if (facts.etc_view->empty() || facts.etc_view->front() != '/')
      return make_error(errc::invalid_argument, "facts.etc_view", "the /etc view must be an absolute host path");
    if (etc.view_blocker.empty()) etc_by_view = true;
    else plan.notes.push_back("the /etc view is not used: " + etc.view_blocker);
  }
  if (etc_by_view) {
    add({"--ro-bind", *facts.etc_view, "/etc"});
  } else {
    if (!etc.entries.empty()) add({"--tmpfs", "/etc"});
    for (const auto& e : etc.entries) {
      if (e.kind == path_kind::file) {
        add({"--perms", "0444", "--file", std::to_string(kFirstDataFd + static_cast<int>(plan.data_files.size())),
             e.path});
        plan.data_files.push_back(e.path);
      } else {
        // --ro-bind follows a symlinked source (/etc/localtime -> zoneinfo).
        add({"--ro-bind", e.path, e.path});
      }
    }
    for (const auto& m : etc.masks) add({"--ro-bind", m.dir ? src.mask_dir : src.mask_file, m.path});
  }
  // /proc/sys read-only (L1): kernel settings such as core_pattern are
  // never writable from inside, whatever uid the sandbox has.
  add({"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"});
  // L7: no writable tmpfs without a cap (see "Writable tmpfs"): /dev/shm is
  // a tmpfs of its own with /tmp's cap, and bwrap's /dev (a tmpfs bwrap
  // cannot size) is read-only from here on; /dev/shm and /dev/pts are mounts
  // of their own and stay writable.
  auto capped_tmpfs = [&](const char* where) {
    if (facts.tmp_size_bytes) add({"--size", std::to_string(facts.tmp_size_bytes)});
    add({"--tmpfs", where});
  };
  capped_tmpfs("/dev/shm");
  add({"--remount-ro", "/dev"});
  capped_tmpfs("/tmp");

  // What covers a path: the deepest bind mount that is an ancestor-or-self.
  // The system tree is read-only; anything else is invisible.
  auto cover = [&](const std::string& p) -> const mount_rule* {
    const mount_rule* best = nullptr;
    for (const auto& m : pol.mounts)
      if (within(p, m.guest_path) && (!best || m.guest_path.size() > best->guest_path.size())) best = &m;
    return best;
  };

  std::vector<path_op> ops;
  for (const auto& m : pol.mounts) {
    path_kind k = facts.kind(m.host_path);
    if (k == path_kind::missing)
      return make_error(errc::invalid_argument, "bindMounts", "bind mount source does not exist: \"" + m.host_path + "\"");
    ops.push_back({m.guest_path, m.writable ? op_kind::bind_rw : op_kind::bind_ro, {}, 0});
  }
  // E5: the scratch HOME (see "Scratch HOME"). At the host's HOME path it is
  // one of the path operations, so the binds below HOME (the worktree,
  // toolchains) land on it, parents first; nothing of the host's HOME is in it.
  const std::optional<std::string> scratch = scratch_home(pol);
  if (scratch && *scratch == pol.home) ops.push_back({*scratch, op_kind::scratch, {}, 4});

  // Write-deny: the policy's (P2, P5, `.git` files), sorted and unique.
  const std::vector<path_rule>& deny = pol.write_deny;
  // Read-only through a write-denied ancestor below the same cover (a
  // runner state dir deeper than that ancestor is its own cover). Under the
  // broker an absent ancestor is a rule, not a mount: nothing below it can
  // be created from inside, but the host's files there would be visible.
  // Every native profile runs under the X1 broker (policy::requires_broker,
  // check_enforceable above): a policy that would not is refused rather than
  // rendered with its absent write-denied names unenforced.
  if (!pol.requires_broker())
    return make_error(errc::unenforceable, "backend",
                      "render_bwrap renders only policies that run under the X1 broker");
  std::vector<const path_rule*> deny_paths; // the non-glob ones, looked at for every denied path
  for (const auto& x : deny)
    if (!is_glob(x.path)) deny_paths.push_back(&x);
  auto under_deny = [&](const std::string& p, const mount_rule& c, bool mounted_only) {
    return std::any_of(deny_paths.begin(), deny_paths.end(), [&](const path_rule* x) {
      return x->path != p && within(p, x->path) && within(x->path, c.guest_path) &&
             !(mounted_only && facts.kind(x->path) == path_kind::missing);
    });
  };

  // Every directory strictly below `root` down to `upto_incl`; none may be
  // a symlink (the command could replace it, and neither a pin nor the
  // broker, which decides on resolved names, would hold the denied name).
  auto chain_of = [&](const std::string& root, const std::string& upto_incl) -> result<std::vector<std::string>> {
    std::vector<std::string> chain;
    for (std::string a = upto_incl; a != root && within(a, root) && a != "/"; a = parent_of(a)) {
      if (facts.kind(a) == path_kind::symlink)
        return make_error(errc::unenforceable, a,
                          "a directory on the way to a denied path is a symlink inside a writable bind; "
                          "the command could replace it and bubblewrap cannot pin a symlink");
      chain.push_back(a);
    }
    return chain;
  };
  auto pin_chain = [&](const std::string& root, const std::string& upto_incl) -> result<void> {
    auto chain = chain_of(root, upto_incl);
    if (!chain) return std::move(chain).err();
    for (const auto& a : *chain) ops.push_back({a, op_kind::bind_rw, {}, 1});
    return ok();
  };

  // X1: the broker's rule set (see "P7/L4"), built before the write
  // denials so that absent ones can become its entries.
  broker::rule_set rules;
  rules.host_net = pol.network.kind == network_kind::open;
  // Every writable root and runner state dir is a root of the rules (P5,
  // L3) in every profile but the terminal one; the P7 names where the
  // profile has them (a glob's root is always one of these).
  if (pol.base != profile::terminal)
    for (const auto& a : pol.write_allow)
      if (std::find(rules.roots.begin(), rules.roots.end(), a.path) == rules.roots.end()) rules.roots.push_back(a.path);
  // Linked worktrees of protected checkouts: the common dir is a root whose
  // names decide_linked decides one by one.
  for (const auto& l : pol.linked_worktrees) {
    if (std::find(rules.roots.begin(), rules.roots.end(), l.common) == rules.roots.end()) rules.roots.push_back(l.common);
    rules.linked.push_back({l.admin, l.branch});
  }
  for (const auto& g : pol.write_deny_globs) {
    if (std::find(rules.roots.begin(), rules.roots.end(), g.root) == rules.roots.end()) rules.roots.push_back(g.root);
    if (std::find(rules.names.begin(), rules.names.end(), g.name) == rules.names.end()) rules.names.push_back(g.name);
  }
  if (!rules.names.empty()) rules.create_allow = pol.create_allow;
  // A write-denied name that does not exist, below the writable cover `c`,
  // under the broker: an entry of the rule set instead of a placeholder
  // (see "Absent write-denied names under the broker").
  auto deny_absent = [&](const std::string& p, const mount_rule& c) -> result<void> {
    std::string e = parent_of(p);
    while (within(e, c.guest_path) && e != c.guest_path && facts.kind(e) == path_kind::missing) e = parent_of(e);
    if (auto chain = chain_of(c.guest_path, e); !chain) return std::move(chain).err();
    if (!broker::covers_absent(rules, p)) rules.absent_denied.push_back(p);
    return ok();
  };

  // A denied name that does not exist, below the writable cover `c`:
  // occupy it (see "Denied paths that do not exist").
  std::vector<std::pair<std::string, std::string>> placeholder_roots; // topmost created path, its writable root
  auto occupy_missing = [&](const std::string& p, const mount_rule& c, const std::string& source) -> result<void> {
    std::string e = parent_of(p);
    std::vector<std::string> missing_parents;
    while (within(e, c.guest_path) && e != c.guest_path && facts.kind(e) == path_kind::missing) {
      missing_parents.push_back(e);
      e = parent_of(e);
    }
    path_kind ek = facts.kind(e);
    if (ek == path_kind::symlink)
      return make_error(errc::unenforceable, e,
                        "a directory on the way to a denied path is a symlink inside a writable bind; the command "
                        "could replace it and bubblewrap cannot pin a symlink");
    if (ek != path_kind::dir) {
      // Nothing can be created below a file, as long as the file stays: pin
      // it (a mount point cannot be removed or replaced).
      if (ek == path_kind::missing) return ok();
      return pin_chain(c.guest_path, e);
    }
    if (auto r = pin_chain(c.guest_path, e); !r) return std::move(r).err();
    std::reverse(missing_parents.begin(), missing_parents.end());
    for (const auto& mp : missing_parents) {
      ops.push_back({mp, op_kind::create_pin, {}, 1});
      plan.create_dirs.push_back(mp);
    }
    ops.push_back({p, op_kind::placeholder, source, 2});
    plan.placeholders.push_back(missing_parents.empty() ? p : missing_parents.front());
    placeholder_roots.emplace_back(plan.placeholders.back(), c.guest_path);
    return ok();
  };

  // Read-deny (P4): masks, and placeholders for the missing ones.
  std::vector<std::string> masked;
  for (const auto& r : pol.read_deny) {
    if (is_glob(r.path)) continue;
    const mount_rule* c = cover(r.path);
    if (!c) continue; // invisible
    // Could the command rename, replace or create this name?
    const bool writable_here = c->writable && !under_deny(r.path, *c, true);
    path_kind k = facts.kind(r.path);
    if (k == path_kind::symlink) {
      if (writable_here)
        return make_error(errc::unenforceable, r.path,
                          "read-denied path is a symlink inside the writable bind \"" + c->guest_path +
                              "\": its target stays masked, but the command could replace the symlink with a "
                              "directory of its own (a planted config), and bubblewrap cannot pin a symlink (" +
                              r.why + "). Bind \"" + c->guest_path +
                              "\" read-only (--bind PATH:ro, readOnly), or replace the symlink by what it points "
                              "to; refusing instead of running with a weaker policy (P4)");
      plan.notes.push_back("read-deny " + r.path + " is a symlink: its resolved spelling is masked (P6)");
      continue;
    }
    if (k == path_kind::missing) {
      if (!writable_here) continue; // nothing can create it
      if (auto res = occupy_missing(r.path, *c, placeholder_source(r.shape, true, src)); !res)
        return std::move(res).err();
      masked.push_back(r.path);
      continue;
    }
    if (writable_here)
      if (auto res = pin_chain(c->guest_path, parent_of(r.path)); !res) return std::move(res).err();
    ops.push_back({r.path, op_kind::mask, k == path_kind::dir ? src.mask_dir : src.mask_file, 3});
    masked.push_back(r.path);
  }
  auto in_mask = [&](const std::string& p) {
    return std::any_of(masked.begin(), masked.end(), [&](const std::string& m) { return within(p, m); });
  };

  // Write-deny (P2, P5): read-only re-binds, and placeholders for the missing ones.
  for (const auto& d : deny) {
    if (is_glob(d.path)) continue;
    const mount_rule* c = cover(d.path);
    if (!c || !c->writable) continue; // invisible, or already read-only
    if (in_mask(d.path)) continue;    // masked: stronger
    if (under_deny(d.path, *c, false)) continue;
    path_kind k = facts.kind(d.path);
    if (k == path_kind::symlink)
      return make_error(errc::unenforceable, d.path,
                        "write-denied path is a symlink inside a writable bind; the command could replace the "
                        "symlink and bubblewrap cannot pin it (" + d.why + ")");
    if (k != path_kind::missing) {
      if (auto r = pin_chain(c->guest_path, parent_of(d.path)); !r) return std::move(r).err();
      ops.push_back({d.path, op_kind::bind_ro, {}, 2});
      continue;
    }
    // Absent: a rule of the broker (every policy rendered here runs under
    // it; see the check above), never a placeholder.
    if (auto r = deny_absent(d.path, *c); !r) return std::move(r).err();
  }
  std::sort(rules.absent_denied.begin(), rules.absent_denied.end());
  rules.absent_denied.erase(std::unique(rules.absent_denied.begin(), rules.absent_denied.end()),
                            rules.absent_denied.end());

  // Sort parents first; at one path the highest rank wins.
  std::stable_sort(ops.begin(), ops.end(), [](const path_op& a, const path_op& b) {
    if (a.path != b.path) return a.path < b.path;
    return a.rank > b.rank;
  });
  ops.erase(std::unique(ops.begin(), ops.end(), [](const path_op& a, const path_op& b) { return a.path == b.path; }),
            ops.end());
  // The source of a bind: the host path, or where its idmapped clone is
  // staged (facts.source_aliases; the longest root wins).
  auto source = [&](const std::string& p) {
    const bwrap_facts::source_alias* best = nullptr;
    for (const auto& a : facts.source_aliases)
      if (within(p, a.root) && (!best || a.root.size() > best->root.size())) best = &a;
    return best ? best->from + p.substr(best->root.size()) : p;
  };
  for (const auto& op : ops) {
    // Nothing below a mask is rendered: it would re-expose host content.
    bool below_mask = std::any_of(masked.begin(), masked.end(),
                                  [&](const std::string& m) { return op.path != m && within(op.path, m); });
    if (below_mask) {
      plan.notes.push_back(op.path + " lies inside a read-denied path: not rendered (the mask wins)");
      continue;
    }
    switch (op.kind) {
    case op_kind::bind_rw: add({"--bind", source(op.path), op.path}); break;
    case op_kind::bind_ro: add({"--ro-bind", source(op.path), op.path}); break;
    case op_kind::create_pin: add({"--bind", source(op.path), op.path}); break;
    case op_kind::mask:
    case op_kind::placeholder: add({"--ro-bind", source(op.source), op.path}); break;
    case op_kind::scratch:
      add({"--perms", "0700"});
      capped_tmpfs(op.path.c_str());
      break;
    }
  }
  std::sort(plan.create_dirs.begin(), plan.create_dirs.end());
  plan.create_dirs.erase(std::unique(plan.create_dirs.begin(), plan.create_dirs.end()), plan.create_dirs.end());
  std::sort(plan.placeholders.begin(), plan.placeholders.end());
  plan.placeholders.erase(std::unique(plan.placeholders.begin(), plan.placeholders.end()), plan.placeholders.end());

  // Placeholders are invisible to git inside (see "Placeholders and git").
  std::sort(placeholder_roots.begin(), placeholder_roots.end());
  placeholder_roots.erase(std::unique(placeholder_roots.begin(), placeholder_roots.end()), placeholder_roots.end());
  for (const auto& [ph, root] : placeholder_roots)
    if (ph != root && within(ph, root)) plan.git_excludes += git_exclude_pattern(ph.substr(root == "/" ? 1 : root.size() + 1));

  // 4. ccsb's own files.
  if (facts.init_by_fd)
    add({"--perms", "0555", "--file", std::to_string(kInitFd), std::string(kGuestInit)});
  else
    add({"--ro-bind", facts.init_path, std::string(kGuestInit)});
  if (!plan.git_excludes.empty())
    add({"--ro-bind", facts.run_dir + "/" + std::string(kGitExcludesName), std::string(kGuestGitExcludes)});
  // E4: ssh's known hosts, a read-only copy (see "SSH known hosts").
  std::string known_hosts;
  if (auto kh = known_hosts_source(pol, facts.kind)) {
    add({"--perms", "0444", "--file", std::to_string(kFirstDataFd + static_cast<int>(plan.data_files.size())),
         std::string(kGuestKnownHosts)});
    plan.data_files.push_back(*kh);
    known_hosts = kGuestKnownHosts;
    plan.notes.push_back("ssh known hosts: a read-only copy of " + *kh + " at " + known_hosts);
  }
  // E5: the scratch HOME away from the host's HOME path, and its .gitconfig.
  if (scratch && *scratch != pol.home) {
    add({"--perms", "0700"});
    capped_tmpfs(scratch->c_str());
    plan.notes.push_back("scratch HOME: a private tmpfs at " + *scratch + " (the host's HOME " + pol.home +
                         " is bound read-only or cannot hold it); HOME points there");
  } else if (scratch) {
    plan.notes.push_back("scratch HOME: a private tmpfs at " + *scratch + ", nothing of the host's HOME in it");
  }
  if (scratch) {
    auto gc = gitconfig_for(facts.identity);
    for (auto& n : gc.notes) plan.notes.push_back(std::move(n));
    const std::string dest = *scratch + "/.gitconfig";
    if (!gc.content.empty() && !cover(dest)) {
      add({"--perms", "0644", "--file", std::to_string(kFirstDataFd + static_cast<int>(plan.data_files.size())), dest});
      plan.data_files.push_back(facts.run_dir + "/" + std::string(kGitConfigName));
      plan.notes.push_back("git identity: user.name and user.email copied into " + dest);
    }
  }
  if (!etc_by_view && !etc.entries.empty() && !etc.covered) add({"--remount-ro", "/etc"});
  // L7: bwrap's root is a tmpfs it cannot size either; every mount point is
  // made by now, so it becomes read-only (a policy never binds "/": compile
  // refuses it).
  if (!cover("/")) add({"--remount-ro", "/"});
  add({"--chdir", pol.workdir.empty() ? std::string("/") : pol.workdir});

  if (!pol.exec.grant_roots.empty())
    plan.notes.push_back("execGrantRoots are ignored on Linux (L5)");

  // ccsb-init: proxy listeners (L3), then the exec server (S7): commands
  // come over the exec channel, none is on this argv.
  plan.init_argv.emplace_back(kGuestInit);
  plan.init_argv.push_back("--exec-channel");
  plan.init_argv.push_back(std::to_string(kExecChannelFd));
  if (proxied) {
    plan.init_argv.push_back("--proxy-channel");
    plan.init_argv.push_back(std::to_string(kProxyChannelFd));
    plan.init_argv.push_back("--proxy-listen");
    plan.init_argv.push_back("http=" + std::string(kProxyHttp));
    plan.init_argv.push_back("--proxy-listen");
    plan.init_argv.push_back("socks=" + std::string(kProxySocks));
  }
  // X1: the creation rules ccsb-init's broker enforces (P7 globs per root,
  // the absent write-denied names), and with the host's network (T2) its
  // excepted destinations.
  for (auto& a : broker::to_args(rules)) plan.init_argv.push_back(std::move(a));

  // Environment: E1 (policy) + N2 for proxied runs.
  plan.environment = pol.environment;
  if (scratch && *scratch != pol.home) {
    // E5: HOME moved; the toolchains bound read-only from below the host's
    // HOME are found where they are (E4).
    std::vector<env_var> moved{{"HOME", *scratch}};
    for (const auto& t : pol.toolchains)
      for (const auto& [name, var] : kToolchainHomeVariables)
        if (t.path == pol.home + "/" + std::string(name)) moved.push_back({std::string(var), t.path});
    for (auto& v : moved) {
      auto it = std::find_if(plan.environment.begin(), plan.environment.end(),
                             [&](const env_var& e) { return e.name == v.name; });
      if (it != plan.environment.end()) it->value = v.value;
      else plan.environment.push_back(v);
    }
  }
  if (proxied) {
    auto px = proxy_environment(kProxyHttp, kProxySocks,
                                std::string(kGuestInit) + " --ssh-proxy " + std::string(kProxySocks) + " %h %p",
                                known_hosts);
    plan.environment.insert(plan.environment.end(), px.begin(), px.end());
  }
  if (!plan.git_excludes.empty()) {
    // Command-line-level git configuration (E3 removes every inherited GIT_*).
    plan.environment.push_back({"GIT_CONFIG_COUNT", "1"});
    plan.environment.push_back({"GIT_CONFIG_KEY_0", "core.excludesFile"});
    plan.environment.push_back({"GIT_CONFIG_VALUE_0", std::string(kGuestGitExcludes)});
  }

  plan.use_args_fd = true;
  return plan;
}

} // namespace ccsb
