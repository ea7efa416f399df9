// ccsb/launch/linux/session_uid.hpp — a host uid of its own for each session
// of a root launcher, and the idmapped mounts that present its binds to that
// uid as their owner (launcher only; does I/O; Linux-only). Issue 27, L1, L7.
//
// Why: the kernel counts, checks and trusts by host uid. Sessions that share
// one (today's "the workdir's owner, else nobody") share RLIMIT_NPROC, the
// per-uid inotify and user-namespace counts (ucounts are charged up to the
// owner of each user namespace, i.e. to the uid that started bwrap), and
// may signal each other's processes where a pid is reachable. So a root
// launcher gives each session a uid of its own, the way systemd's
// DynamicUser and container runtimes' userns-remap do:
//
//   * the range: kSessionUidBase .. kSessionUidBase + kSessionUidCount - 1
//     (2046820352-2046885887, uid == gid), below 2^31 (some tools read ids as
//     signed) and outside the ranges systemd documents for its own use. A
//     host whose /etc/subuid or /etc/subgid hands out any id of this range
//     gets no per-session uids (the reason is logged; today's identity is
//     kept), so a container's subordinate ids are never reused; an id that
//     /etc/passwd or /etc/group names is skipped (files only: the tools are
//     static binaries, without NSS modules, so an id known only to LDAP
//     is not seen);
//   * the lease: a file per uid in kLeaseDir (root's, 0700), flock(LOCK_EX)
//     for the session's life; the lock dies with the launcher, SIGKILL
//     included, and so does every process of the session (bwrap runs with
//     --die-with-parent in a PID namespace), so a uid is never handed to a
//     second live session. The first uid tried is random, the rest follow
//     in order;
//   * the binds: each writable bind, and each read-only one the session uid
//     could not read on the host (a toolchain under /root), is opened with
//     no symlink on the way (openat2 RESOLVE_NO_SYMLINKS: the launcher is
//     root, and a path another session swapped for a link must never hand
//     the link's target to this one), its owner checked again, and cloned
//     (open_tree OPEN_TREE_CLONE | AT_RECURSIVE) and idmapped
//     (mount_setattr MOUNT_ATTR_IDMAP, read-only ones also
//     MOUNT_ATTR_RDONLY) with a user namespace whose only mapping is the
//     bind's owner -> the session uid (the same for its group): files of
//     the owner are the session's, files the session creates land owned by
//     the owner on disk, other owners' files are unmapped (overflow ids, so
//     never writable). The clone is attached in a mount namespace of bwrap's
//     own (a slave of the host's: nothing propagates back) at a staging
//     directory in the run dir, and bwrap binds from there
//     (render/bwrap/render.hpp alias_bind_sources);
//   * a root-owned writable bind spelled through a symlink is refused
//     (check_symlinked_binds): idmapped, root's files become the session's,
//     and the link may be one an earlier session planted (in a root-owned
//     worktree its files are root's on disk, so the link's owner proves
//     nothing); spelled without a symlink, it is the caller's choice;
//   * inside, the session still sees today's identity (bwrap --uid/--gid):
//     the workdir's owner, else nobody. Only the host uid changed.
// Where the kernel or a bind's file system has no idmapped mounts (EINVAL,
// EPERM or ENOSYS from mount_setattr), the session keeps today's identity and
// the start-up log says why (session_uid_plan::fallback).
#pragma once

#include "ccsb/launch/identity.hpp"
#include "ccsb/launch/linux/openat2.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/paths.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr uid_t kSessionUidBase = 2046820352; // 0x7A000000
inline constexpr uid_t kSessionUidCount = 65536;
inline constexpr const char* kLeaseDir = "/run/ccsb-uids";

namespace detail {

// Whether a line "name:first:count" of /etc/subuid (or subgid) text names an
// id in [lo, lo + n). Malformed lines count as overlapping (fail closed: the
// range is not used).
inline bool subid_overlaps(const std::string& text, std::uint64_t lo, std::uint64_t n) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    auto a = line.find(':');
    auto b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) return true;
    std::uint64_t first = 0, count = 0;
    try {
      std::size_t used = 0;
      first = std::stoull(line.substr(a + 1, b - a - 1), &used);
      if (used != b - a - 1) return true;
      count = std::stoull(line.substr(b + 1), &used);
      if (used != line.size() - b - 1) return true;
    } catch (...) {
      return true;
    }
    if (first < lo + n && lo < first + count) return true;
  }
  return false;
}

inline std::string slurp(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace detail

// The ids of /etc/passwd and /etc/group text (field 3) that fall in
// [lo, lo + n). Read as files, not through NSS: the tools are static
// binaries, where NSS modules cannot be loaded.
inline std::vector<std::uint32_t> account_ids_in(const std::string& text, std::uint64_t lo, std::uint64_t n) {
  std::vector<std::uint32_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = a == std::string::npos ? a : line.find(':', a + 1);
    auto c = b == std::string::npos ? b : line.find(':', b + 1);
    if (c == std::string::npos) continue;
    const std::string f = line.substr(b + 1, c - b - 1);
    if (f.empty() || f.size() > 10 || f.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::uint64_t v = std::stoull(f);
    if (v >= lo && v < lo + n) out.push_back(static_cast<std::uint32_t>(v));
  }
  return out;
}

// A leased session uid: the lock is held until this is destroyed.
struct session_uid {
  uid_t uid{0};
  unique_fd lock;
};

// Leases a free uid of the range (root only). Errors name what blocked it.
// Why this host gives no session a uid of its own, whatever is leased:
// its subordinate ids overlap the range.
inline result<void> session_uid_range_usable() {
  for (const char* f : {"/etc/subuid", "/etc/subgid"})
    if (detail::subid_overlaps(detail::slurp(f), kSessionUidBase, kSessionUidCount))
      return make_error(errc::unenforceable, f,
                        "hands out ids of ccsb's session range " + std::to_string(kSessionUidBase) + "-" +
                            std::to_string(kSessionUidBase + kSessionUidCount - 1));
  return ok();
}

inline result<session_uid> lease_session_uid() {
  if (auto r = session_uid_range_usable(); !r) return std::move(r).err();
  if (::mkdir(kLeaseDir, 0700) != 0 && errno != EEXIST) return sys_error(std::string("mkdir ") + kLeaseDir);
  unique_fd dir(::open(kLeaseDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st{};
  if (!dir || ::fstat(dir.get(), &st) != 0) return sys_error(std::string("open ") + kLeaseDir);
  if (st.st_uid != 0 || (st.st_mode & 077) != 0)
    return make_error(errc::unenforceable, kLeaseDir,
                      "belongs to uid " + std::to_string(st.st_uid) + " or is open to others; not used");
  std::vector<std::uint32_t> taken;
  for (const char* f : {"/etc/passwd", "/etc/group"})
    for (auto id : account_ids_in(detail::slurp(f), kSessionUidBase, kSessionUidCount)) taken.push_back(id);
  std::uint32_t start = 0;
  if (::getrandom(&start, sizeof start, 0) != static_cast<ssize_t>(sizeof start)) start = static_cast<std::uint32_t>(::getpid());
  for (uid_t i = 0; i < kSessionUidCount; ++i) {
    const uid_t uid = kSessionUidBase + (start + i) % kSessionUidCount;
    if (std::find(taken.begin(), taken.end(), uid) != taken.end()) continue; // a user or group of the host
    const std::string name = std::to_string(uid);
    unique_fd f(::openat(dir.get(), name.c_str(), O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!f) return sys_error(std::string("open ") + kLeaseDir + "/" + name);
    if (::flock(f.get(), LOCK_EX | LOCK_NB) == 0) return session_uid{uid, std::move(f)};
    if (errno != EWOULDBLOCK) return sys_error(std::string("flock ") + kLeaseDir + "/" + name);
  }
  return make_error(errc::unenforceable, kLeaseDir, "every uid of the session range is leased");
}

// A user namespace whose only mapping is `owner_uid` -> `uid` and
// `owner_gid` -> `gid` (the idmapping of a mount: on-disk owner_uid appears
// as uid). Made by a child that unshares nothing else and waits; its
// namespace outlives it through the returned descriptor.
inline result<unique_fd> idmap_userns(uid_t owner_uid, gid_t owner_gid, uid_t uid, gid_t gid) {
  auto sync = make_pipe();
  if (!sync) return std::move(sync).err();
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid < 0) return sys_error("clone(CLONE_NEWUSER)");
  if (pid == 0) {
    ::close(sync->write.get()); // its own copy: EOF comes when the parent closes its one
    char c;
    (void)!::read(sync->read.get(), &c, 1); // EOF when the parent is done (or gone)
    ::_exit(0);
  }
  sync->read.reset();
  auto finish = [&] {
    sync->write.reset();
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  auto write_map = [&](const char* file, unsigned long from, unsigned long to) -> bool {
    const std::string p = "/proc/" + std::to_string(pid) + "/" + file;
    const std::string line = std::to_string(from) + " " + std::to_string(to) + " 1\n";
    unique_fd f(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
    return f && ::write(f.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
  };
  if (!write_map("uid_map", owner_uid, uid) || !write_map("gid_map", owner_gid, gid)) {
    auto e = sys_error("write the idmapping of a session uid");
    finish();
    return e;
  }
  unique_fd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  auto e = sys_error("open the idmapping's user namespace");
  finish();
  if (!ns) return e;
  return ns;
}

// One bind presented to the session uid as its owner.
struct idmapped_bind {
  std::string host_path; // the policy's source
  std::string staged;    // where bwrap binds it from (a directory of the run dir)
  bool read_only{false};
  uid_t owner_uid{0};
  gid_t owner_gid{0};
};

// What a root launcher's session runs as, and how its binds are presented.
struct session_uid_plan {
  session_uid lease;
  std::vector<idmapped_bind> binds;
  std::map<std::pair<uid_t, gid_t>, unique_fd> userns; // by owner
};

// A detached, idmapped (and for read-only binds, read-only) recursive clone
// of `b.host_path`. The launcher is root and the clone hands the owner's
// files to the session: the path is opened with no symlink anywhere on the
// way (a directory another session swapped for a link to /root must never
// be cloned), and its owner must still be the one planned.
inline result<unique_fd> idmapped_tree(const idmapped_bind& b, int userns) {
  // Not O_NOFOLLOW: with O_PATH it would return the final symlink itself,
  // and a clone of that descriptor is the whole mount holding the link.
  unique_fd at(openat2_nofollow(AT_FDCWD, b.host_path, O_PATH));
  if (!at) return sys_error("open " + b.host_path + " (no symlink on the way)");
  struct stat st{};
  if (::fstat(at.get(), &st) != 0) return sys_error("fstat " + b.host_path);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return make_error(errc::io_error, b.host_path, "is neither a directory nor a regular file; not cloned");
  if (st.st_uid != b.owner_uid || st.st_gid != b.owner_gid)
    return make_error(errc::io_error, b.host_path,
                      "its owner changed from " + std::to_string(b.owner_uid) + ":" + std::to_string(b.owner_gid) +
                          " to " + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) +
                          " while the session started");
  unique_fd t(static_cast<int>(::syscall(SYS_open_tree, at.get(), "",
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH)));
  if (!t) return sys_error("open_tree " + b.host_path);
  mount_attr a{};
  a.attr_set = MOUNT_ATTR_IDMAP | (b.read_only ? MOUNT_ATTR_RDONLY : 0);
  a.userns_fd = static_cast<std::uint64_t>(userns);
  if (::syscall(SYS_mount_setattr, t.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) != 0)
    return sys_error("mount_setattr(MOUNT_ATTR_IDMAP) " + b.host_path);
  return t;
}

// The detached trees of `plan`, in the order of plan.binds (made again for
// each bwrap spawned: a tree attached in one mount namespace cannot be
// attached in another).
inline result<std::vector<unique_fd>> make_idmapped_trees(session_uid_plan& plan) {
  std::vector<unique_fd> out;
  for (const auto& b : plan.binds) {
    auto key = std::make_pair(b.owner_uid, b.owner_gid);
    auto it = plan.userns.find(key);
    if (it == plan.userns.end()) {
      auto ns = idmap_userns(b.owner_uid, b.owner_gid, plan.lease.uid, plan.lease.uid);
      if (!ns) return std::move(ns).err();
      it = plan.userns.emplace(key, std::move(*ns)).first;
    }
    auto t = idmapped_tree(b, it->second.get());
    if (!t) return std::move(t).err();
    out.push_back(std::move(*t));
  }
  return out;
}

// Whether `id` can read `path` on the host: search on every ancestor, and
// read (and search, for a directory) on the path itself (identity.hpp).
inline bool readable_by(const std::string& path, const sandbox_identity& id) {
  if (!ancestors_searchable_by(path, id)) return false;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return true; // nothing there: nothing to present
  return permits(st, id, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK);
}

// A writable mount the caller spelled through a symlink whose target is
// root's: refused (unenforceable, naming the field and both paths), since a
// session uid would get root's files there (see the header). A target that
// does not stat any more is refused as well.
inline result<void> check_symlinked_binds(const policy& pol) {
  for (const auto& sp : pol.symlinked_writable) {
    struct stat st{};
    if (::stat(sp.resolved.c_str(), &st) == 0 && st.st_uid != 0) continue;
    return make_error(errc::unenforceable, sp.field,
                      "\"" + sp.written + "\" reaches the root-owned directory \"" + sp.resolved +
                          "\" through a symlink: a session uid is not given root's files through a link a "
                          "session could have planted (L1, L8); name \"" + sp.resolved + "\" itself");
  }
  return ok();
}

// The binds of `pol` that a session uid needs idmapped: every writable one
// that exists, then every read-only one it could not read on the host that
// no writable one contains (those come from the writable one's clone). Each
// is staged at `<run_dir>/idmap-<n>`, named once the run dir exists
// (stage_binds). Pure but for stat.
inline std::vector<idmapped_bind> binds_to_idmap(const policy& pol, uid_t session) {
  std::vector<idmapped_bind> out;
  auto covered = [&](const std::string& p) {
    for (const auto& b : out)
      if (ccsb::within(p, b.host_path)) return true;
    return false;
  };
  const sandbox_identity self{session, session, "session uid"};
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& m : pol.mounts) {
      if (m.writable != (pass == 0) || covered(m.host_path)) continue;
      struct stat st{};
      if (::lstat(m.host_path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      if (!m.writable && readable_by(m.host_path, self)) continue;
      out.push_back({m.host_path, "", !m.writable, st.st_uid, st.st_gid});
    }
  return out;
}

// host_facts::reach for a session (E4 / L1), probed before compile: set
// when the sandbox will run as a host uid it shares, one that may not reach
// what the launcher reaches: the uid asked for (`asked`), or, on a host that
// gives no session a uid of its own, the one choose_identity picks for
// `workdir`. Unset for a non-root launcher (the sandbox is the launcher's
// own uid) and for a session uid (what it needs is idmapped to it).
inline result<std::optional<host_facts::sandbox_reach>> probe_sandbox_reach(
    const std::string& workdir, const std::optional<run_as_ids>& asked) {
  if (::geteuid() != 0) return std::optional<host_facts::sandbox_reach>{};
  if (!asked && session_uid_range_usable()) return std::optional<host_facts::sandbox_reach>{};
  auto ident = choose_identity(workdir, asked);
  if (!ident) return std::move(ident).err();
  if (!*ident) return std::optional<host_facts::sandbox_reach>{};
  return std::optional<host_facts::sandbox_reach>{reach_of(**ident)};
}

// Names the staging directories in `run_dir` and creates them (empty, 0700:
// only the mount on top is ever seen through them).
inline result<void> stage_binds(std::vector<idmapped_bind>& binds, const std::string& run_dir) {
  for (std::size_t i = 0; i < binds.size(); ++i) {
    binds[i].staged = run_dir + "/idmap-" + std::to_string(i);
    if (::mkdir(binds[i].staged.c_str(), 0700) != 0) return sys_error("mkdir " + binds[i].staged);
  }
  return ok();
}

} // namespace ccsb::launch
