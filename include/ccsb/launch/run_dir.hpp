// ccsb/launch/run_dir.hpp — where a session keeps its private files on the
// host (launcher only; does I/O). L8.
//
// The base directory:
//   root launcher      /run/ccsb-sessions            (root:root 0711; not /run/ccsb,
//                                                    the guest path of ccsb's own files)
//   other launchers    $XDG_RUNTIME_DIR/ccsb         (uid 0700) when XDG_RUNTIME_DIR
//                                                    is a directory of this uid, mode 0700
//                      /tmp/ccsb-<uid>               (uid 0700) otherwise, unless
//                                                    another uid squatted it (it is not a
//                                                    directory of this uid that nobody else
//                                                    may write): then /tmp/ccsb-<uid>.XXXXXX
// Every use checks it again: a real directory (not a symlink), owned by this
// uid, writable by nobody else.
// The squat fallback (issue 27): the /tmp name is predictable, so any uid can
// pre-create it (a directory of its own, a symlink) and would make every
// launch of this uid fail. Launches then use a base of the form
// /tmp/ccsb-<uid>.XXXXXX instead: the first (by name) real directory of that
// form that this uid owns with mode 0700, found again by every later launch
// (so the sweeps, the placeholder registry, the /etc views and the mask
// sources keep one base per uid), else a new one from mkdtemp (a name no
// other uid can guess in advance). Another uid's entries of that form are
// ignored. The choice is logged (choose_run_dir_base's note). A policy whose writable mounts reach the base
// (a bind of /tmp, of /run, of the base itself or below it; read-only too) is refused before
// anything is created (check_base_outside), so no sandbox can ever write
// there: the sweep below and the placeholder registry trust what they find
// only because of that.
//
// A run dir is mkdtemp(<base>/ccsb-<id>-XXXXXX), flock(LOCK_EX)'ed for the
// session's whole life by the launcher. Its content: the `locked` marker and
// the git excludes file; egressd has no socket here (the proxy listeners
// reach it over a socketpair, L3). When the sandbox runs as another uid (a
// root launcher, L1), the run dir is group-owned by the sandbox gid with
// mode 0710, so bwrap (running as that uid) can reach the git excludes, and
// nobody else can.
//
// The mask sources (render/bwrap/render.hpp mask_sources: empty files and
// directories, mode 0000 or read-only, that masks and placeholders are bound
// from) are the same for every session, so they live once per base in
// <base>/mask-sources (ensure_mask_sources): made on first use in a
// temporary directory and renamed into place, checked on every launch
// (each entry's type, owner, mode and size, no symlink followed), never
// changed. They hold nothing: other users may look them up (mode 0755 on
// the directories; the root base is 0711). Shared, not made per session:
// five directories and four files per launch would each be a synchronous
// discard on removal on an ext4 -o discard base.
//
// The sweep: a run dir with its `locked` marker whose flock can be taken is stale (its launcher is
// dead: a lock dies with its holder, also after SIGKILL and across pid
// namespaces) and is removed. It reads nothing from it; placeholders are
// swept from their own registry (placeholders.hpp).
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h> // renameat2, RENAME_NOREPLACE (Linux; glibc 2.28)
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr const char* kRunDirPrefix = "ccsb-";
inline constexpr const char* kRootRunDirBase = "/run/ccsb-sessions";
// Created right after the lock is taken: a sweeper only considers run dirs
// that have it, so a fresh one (mkdtemp done, lock not yet) is never swept.
inline constexpr const char* kLockedMarker = "locked";

// A directory ccsb owns: exists (created 0700 / `mode` if missing), is no
// symlink, belongs to this euid, and no one else may write it.
inline result<void> ensure_private_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return sys_error("mkdir " + path);
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return sys_error("lstat " + path);
  if (!S_ISDIR(st.st_mode))
    return make_error(errc::unenforceable, path, "ccsb's run-dir base is not a directory (a symlink?); refusing to use it");
  if (st.st_uid != ::geteuid())
    return make_error(errc::unenforceable, path, "ccsb's run-dir base belongs to uid " + std::to_string(st.st_uid));
  if (st.st_mode & 022)
    return make_error(errc::unenforceable, path, "ccsb's run-dir base is writable by others; refusing to use it");
  if ((st.st_mode & 07777) != mode && ::chmod(path.c_str(), mode) != 0) return sys_error("chmod " + path);
  return ok();
}

struct run_dir_base_choice {
  std::string path;
  std::string note; // non-empty when the usual base was unusable and why (the squat fallback)
};

namespace run_dir_detail {

// The squat fallback bases of this uid in `dir` ("ccsb-<uid>.XXXXXX"): real
// directories this euid owns with mode 0700, by name.
inline std::vector<std::string> fallback_bases(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  unique_fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d) return out;
  DIR* it = ::fdopendir(::fcntl(d.get(), F_DUPFD_CLOEXEC, 0));
  if (!it) return out;
  while (dirent* e = ::readdir(it)) {
    const std::string name = e->d_name;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    struct stat st{};
    if (::fstatat(d.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0700)
      continue;
    out.push_back(dir + "/" + name);
  }
  ::closedir(it);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace run_dir_detail

// The base for this launcher (see the header comment), created and checked.
inline result<run_dir_base_choice> choose_run_dir_base() {
  if (::geteuid() == 0) {
    if (auto r = ensure_private_dir(kRootRunDirBase, 0711); !r) return std::move(r).err();
    return run_dir_base_choice{kRootRunDirBase, {}};
  }
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  struct stat st{};
  if (x && x[0] == '/' && ::lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
      (st.st_mode & 077) == 0) {
    std::string b = ccsb::lexical_normal(x) + "/ccsb";
    if (auto r = ensure_private_dir(b, 0700); !r) return std::move(r).err();
    return run_dir_base_choice{b, {}};
  }
  const std::string prefix = "ccsb-" + std::to_string(::geteuid());
  const std::string usual = "/tmp/" + prefix;
  auto r = ensure_private_dir(usual, 0700);
  if (r) return run_dir_base_choice{usual, {}};
  // Squatted: the first fallback of this uid, else a new one. Two launchers
  // that both find none both make one, then take the first by name; the
  // other, still empty, is removed by its maker (unless the first launcher
  // already chose its own: that run dir is then swept by nobody but its own
  // launcher's teardown).
  const std::string why = r.err().what();
  auto note = [&](const std::string& b) {
    return "the run-dir base " + usual + " is unusable (" + why + "); using " + b + ", private to uid " +
           std::to_string(::geteuid());
  };
  auto found = run_dir_detail::fallback_bases("/tmp", prefix + ".");
  if (found.empty()) {
    std::string tmpl = usual + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return sys_error("mkdtemp " + tmpl);
    found = run_dir_detail::fallback_bases("/tmp", prefix + ".");
    if (found.empty()) return make_error(errc::unenforceable, tmpl, "the run-dir base just made is not private");
    if (found.front() != tmpl) (void)::rmdir(tmpl.c_str());
  }
  if (auto c = ensure_private_dir(found.front(), 0700); !c) return std::move(c).err();
  return run_dir_base_choice{found.front(), note(found.front())};
}

inline result<std::string> run_dir_base() {
  auto c = choose_run_dir_base();
  if (!c) return std::move(c).err();
  return std::move(c->path);
}

// L8: no mount of the policy may reach the base (either way): writable, a
// sandbox could forge the sweep's and the registry's input; read-only, it
// would see other sessions' run dirs.
inline result<void> check_base_outside(const policy& pol, const std::string& base,
                                       const std::function<std::optional<std::string>(const std::string&)>& resolve) {
  std::vector<std::string> spellings{base};
  if (resolve)
    if (auto r = resolve(base); r && *r != base) spellings.push_back(*r);
  for (std::size_t i = 0; i < pol.mounts.size(); ++i) {
    const auto& m = pol.mounts[i];
    for (const auto& b : spellings)
      if (ccsb::within(b, m.host_path) || ccsb::within(m.host_path, b))
        return make_error(errc::unenforceable, "bindMounts",
                          "the bound path \"" + m.host_path + "\" reaches ccsb's private run-dir base \"" + b +
                              "\"; a sandbox that sees it could reach other sessions' files or forge the launcher's "
                              "state (L8). Bind a narrower directory");
  }
  return ok();
}

struct run_dir {
  std::string path;
  unique_fd lock; // the run dir itself, flock(LOCK_EX) for the session's life
};

// `sandbox_gid`: when the sandbox runs as another uid, the group that may
// traverse the run dir (mode 0710); nullopt: 0700, this uid only.
inline result<run_dir> make_run_dir(const std::string& session_id, const std::string& base,
                                    std::optional<gid_t> sandbox_gid) {
  std::string safe;
  for (char c : session_id) {
    if (safe.size() >= 24) break;
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  }
  std::string tmpl = base + "/" + kRunDirPrefix + safe + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return sys_error("mkdtemp " + tmpl);
  run_dir rd;
  rd.path = tmpl;
  rd.lock.reset(::open(tmpl.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!rd.lock) return sys_error("open " + tmpl);
  if (::flock(rd.lock.get(), LOCK_EX | LOCK_NB) != 0) return sys_error("flock(LOCK_EX) " + tmpl);
  {
    unique_fd m(::openat(rd.lock.get(), kLockedMarker, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!m) return sys_error("create " + tmpl + "/" + kLockedMarker);
  }
  if (sandbox_gid) {
    if (::lchown(tmpl.c_str(), static_cast<uid_t>(-1), *sandbox_gid) != 0) return sys_error("lchown " + tmpl);
    if (::chmod(tmpl.c_str(), 0710) != 0) return sys_error("chmod " + tmpl);
  }
  return rd;
}

// Descriptors holding the last reference to inodes whose names were just
// removed. ext4 mounted with -o discard (this VM; common on cloud VMs) frees
// a directory's or a non-empty file's blocks with a synchronous discard in
// whichever call drops the inode's last reference: ~50 us when the disk is
// idle, 1-4 ms each when it is busy (here: other builds), and one after
// another when that call is the rmdir or unlink itself (it holds the parent
// directory's lock). A session in an empty worktree frees 17 directories and
// 4 files. So removal (teardown, sweeps) keeps a descriptor of each entry
// until its name is gone (O_PATH does: it pins the inode without opening
// anything a sandbox could have planted) and drops them at the end: one by
// one while closes are quick, and as soon as one is slow, the rest each on a
// thread of its own, so the discards overlap instead of adding up. Nothing
// is left behind: every name is gone when unlink returns, every inode when
// release() returns.
class unlinked_inodes {
public:
  unlinked_inodes() = default;
  unlinked_inodes(const unlinked_inodes&) = delete;
  unlinked_inodes& operator=(const unlinked_inodes&) = delete;
  ~unlinked_inodes() { release(); }

  void keep(unique_fd fd) {
    if (fd) fds_.push_back(std::move(fd));
  }

  // Closes every kept descriptor and returns when all are closed: in turn
  // until one close takes longer than 300 us, then the rest concurrently (at
  // most 16 threads; without threads, creation failed, here).
  void release() {
    std::size_t from = 0;
    while (from < fds_.size()) {
      const auto t0 = std::chrono::steady_clock::now();
      fds_[from++].reset();
      if (std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(300)) break;
    }
    if (fds_.size() - from > 1) {
      std::vector<std::thread> threads;
      const std::size_t n = std::min<std::size_t>(fds_.size() - from, 16);
      try {
        for (std::size_t t = 0; t < n; ++t)
          threads.emplace_back([this, t, n, from] {
            for (std::size_t i = from + t; i < fds_.size(); i += n) fds_[i].reset();
          });
      } catch (...) {
        // What the started threads do not reach is closed below, after them.
      }
      for (auto& th : threads) th.join();
    }
    fds_.clear();
  }

private:
  std::vector<unique_fd> fds_;
};

namespace run_dir_detail {

// Removes what is in the directory open as `dir` (recursively, without
// following symlinks: entries are unlinked, never opened for reading,
// directories opened O_NOFOLLOW) and keeps each removed inode in `later`.
inline void remove_entries(int dir, unlinked_inodes& later, int depth = 0) {
  DIR* d = ::fdopendir(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  if (!d) return;
  std::vector<std::pair<std::string, bool>> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name, e->d_type == DT_DIR || e->d_type == DT_UNKNOWN);
  }
  ::closedir(d);
  for (const auto& [name, maybe_dir] : names) {
    unique_fd pin(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (::unlinkat(dir, name.c_str(), 0) == 0) {
      later.keep(std::move(pin));
      continue;
    }
    if (!maybe_dir || (errno != EISDIR && errno != EPERM) || depth > 8) continue;
    // (An unreadable one, the 0000 mask dir of a non-root launcher, is empty.)
    unique_fd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub) remove_entries(sub.get(), later, depth + 1);
    if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0) later.keep(std::move(pin));
  }
}

} // namespace run_dir_detail

// Removes a run dir and everything in it. The inodes go when `later` is
// released (see unlinked_inodes); the run dir's lock descriptor, if the
// caller still holds it, belongs there too.
inline void remove_run_dir(const std::string& dir, unlinked_inodes& later) {
  if (dir.empty()) return;
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return;
  run_dir_detail::remove_entries(fd.get(), later);
  if (::rmdir(dir.c_str()) == 0) later.keep(std::move(fd));
}

inline void remove_run_dir(const std::string& dir) {
  unlinked_inodes later;
  remove_run_dir(dir, later);
}

// Removes the run dirs of dead launchers under `base` (see the header
// comment). Only real directories named ccsb-* owned by this uid whose lock
// is free are touched.
inline std::vector<std::string> sweep_stale_run_dirs(const std::string& base) {
  std::vector<std::string> removed;
  unique_fd basefd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!basefd) return removed;
  DIR* d = ::fdopendir(::fcntl(basefd.get(), F_DUPFD_CLOEXEC, 0));
  if (!d) return removed;
  const uid_t me = ::geteuid();
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, kRunDirPrefix, std::strlen(kRunDirPrefix)) != 0) continue;
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    unique_fd dfd(::openat(basefd.get(), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd) continue;
    struct stat st{};
    if (::fstat(dfd.get(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
    if (::flock(dfd.get(), LOCK_EX | LOCK_NB) != 0) continue; // a live launcher holds it
    struct stat ms{};
    if (::fstatat(dfd.get(), kLockedMarker, &ms, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(ms.st_mode)) continue;
    std::string path = base + "/" + e->d_name;
    remove_run_dir(path);
    removed.push_back(path);
  }
  ::closedir(d);
  return removed;
}

inline constexpr const char* kMaskSourcesDir = "mask-sources";

namespace run_dir_detail {

struct source_entry {
  const char* name; // relative to the sources directory
  bool dir;
  mode_t mode;
  std::string_view content;
};

// What <base>/mask-sources holds (render/bwrap/render.hpp mask_sources_for), parents first.
inline constexpr source_entry kMaskSourceEntries[] = {
    {"mask", true, 0755, {}},
    {"empty", true, 0755, {}},
    {"mask/file", false, 0000, {}},
    {"mask/dir", true, 0000, {}},
    {"empty/file", false, 0444, {}},
    {"empty/dir", true, 0555, {}},
    {"empty/commondir", false, 0444, kGitCommondirPlaceholder},
};

// Whether the directory open as `dir` is a complete set of mask sources of
// this euid: every entry of its type, mode and size, none a symlink; a
// file's content as it should be.
inline bool mask_sources_ok(int dir) {
  struct stat st{};
  if (::fstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0755)
    return false;
  for (const auto& e : kMaskSourceEntries) {
    if (::fstatat(dir, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid() ||
        (st.st_mode & 07777) != e.mode || (e.dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
      return false;
    if (e.dir) continue;
    if (st.st_size != static_cast<off_t>(e.content.size())) return false;
    if (e.content.empty()) continue;
    unique_fd f(::openat(dir, e.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    char buf[16];
    if (!f || e.content.size() > sizeof buf || ::pread(f.get(), buf, e.content.size(), 0) != static_cast<ssize_t>(e.content.size()) ||
        std::string_view(buf, e.content.size()) != e.content)
      return false;
  }
  return true;
}

// Fills the empty directory open as `dir` (parents first; modes set last on
// the directories, after their content exists).
inline result<void> fill_mask_sources(int dir, const std::string& path) {
  for (const auto& e : kMaskSourceEntries) {
    const std::string where = path + "/" + e.name;
    if (e.dir) {
      if (::mkdirat(dir, e.name, 0700) != 0) return sys_error("mkdir " + where);
      continue;
    }
    unique_fd f(::openat(dir, e.name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!f || !write_all(f.get(), e.content)) return sys_error("create " + where);
    if (::fchmod(f.get(), e.mode) != 0) return sys_error("chmod " + where);
  }
  for (auto it = std::rbegin(kMaskSourceEntries); it != std::rend(kMaskSourceEntries); ++it)
    if (it->dir && ::fchmodat(dir, it->name, it->mode, 0) != 0) return sys_error(std::string("chmod ") + path + "/" + it->name);
  if (::fchmod(dir, 0755) != 0) return sys_error("chmod " + path);
  return ok();
}

// Removes <base>/<name> and everything in it without following a link (a
// set that failed its check, or a builder's temporary directory).
inline void remove_tree(int basefd, const std::string& name) {
  unique_fd pin(::openat(basefd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (::unlinkat(basefd, name.c_str(), 0) == 0) return;
  unique_fd d(::openat(basefd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) return;
  for (const char* sub : {"mask/dir", "empty/dir", "mask", "empty"}) (void)::fchmodat(d.get(), sub, 0700, 0);
  unlinked_inodes later;
  remove_entries(d.get(), later);
  if (::unlinkat(basefd, name.c_str(), AT_REMOVEDIR) == 0) later.keep(std::move(pin));
}

} // namespace run_dir_detail

// The directory of this base's mask sources (see the header comment):
// checked, or made when missing or not as it should be (a set that fails the
// check is moved aside and removed; sessions already bound from it keep
// their mounts). Concurrent launchers race on the rename: the loser removes
// its temporary set and uses the winner's.
inline result<std::string> ensure_mask_sources(const std::string& base) {
  using namespace run_dir_detail;
  const std::string path = base + "/" + kMaskSourcesDir;
  unique_fd basefd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!basefd) return sys_error("open " + base);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unique_fd cur(::openat(basefd.get(), kMaskSourcesDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (cur && mask_sources_ok(cur.get())) return path;
    if (cur || errno != ENOENT) {
      // Not as it should be (or not a directory): moved aside, then removed.
      const std::string aside = std::string(kMaskSourcesDir) + ".old-" + std::to_string(::getpid());
      if (::renameat(basefd.get(), kMaskSourcesDir, basefd.get(), aside.c_str()) == 0) remove_tree(basefd.get(), aside);
      else if (errno != ENOENT) return sys_error("rename " + path);
    }
    std::string tmpl = path + ".tmp-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return sys_error("mkdtemp " + tmpl);
    const std::string tmp_name = tmpl.substr(base.size() + 1);
    unique_fd tmp(::openat(basefd.get(), tmp_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!tmp) return sys_error("open " + tmpl);
    if (auto r = fill_mask_sources(tmp.get(), tmpl); !r) {
      remove_tree(basefd.get(), tmp_name);
      return std::move(r).err();
    }
    // RENAME_NOREPLACE: a set another launcher published first stays.
    if (::renameat2(basefd.get(), tmp_name.c_str(), basefd.get(), kMaskSourcesDir, RENAME_NOREPLACE) == 0) return path;
    const int e = errno;
    remove_tree(basefd.get(), tmp_name);
    if (e != EEXIST) {
      errno = e;
      return sys_error("rename " + tmpl + " " + path);
    }
  }
  return make_error(errc::io_error, path, "the mask sources keep changing under this launcher");
}

} // namespace ccsb::launch
