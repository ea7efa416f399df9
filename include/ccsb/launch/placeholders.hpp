// ccsb/launch/placeholders.hpp — the host entries a session mounts over, and
// the placeholders it creates for missing denied paths (launcher only; does
// I/O). L8: no teardown or sweep may weaken another live session.
//
// bubblewrap can only keep a name from being created by occupying it with a
// mount point, and a mount point must exist on the host. So before bwrap
// runs, the launcher creates every missing mount point the plan needs (an
// empty 0755 directory or 0444 file: the plan's host_prep, typed by the
// renderer) and removes them again afterwards. Unlinking
// a name on the host that is a mount point in ANOTHER mount namespace
// detaches that mount there (Linux >= 3.18), so one session's clean-up would
// lift a second session's protection if both mounted over the same name.
//
// Coordination, across sessions, uids and crashes, uses flock(2) on the
// entries themselves plus a registry of what ccsb created:
//   * every session holds flock(LOCK_SH) on every existing host entry it
//     mounts over inside a writable area (hold()), and on every placeholder
//     it creates (create()), from before bwrap starts until teardown; after
//     taking the lock it checks that the name still refers to the locked
//     inode (otherwise the caller renders again);
//   * the registry is <base>/placeholders/, ONE append-only file per session
//     ("s-<pid>-<random>", 0600), created on the session's first create()
//     (a session that creates nothing writes nothing) and held with
//     flock(LOCK_EX) by its owner until the owner's teardown: a file whose
//     lock can be taken has no live owner. It starts with the magic
//     "/.ccsb-placeholder-registry/v1" NUL "\n"; each placeholder is then
//     appended as one record (one write), after it exists and is locked:
//       "P <dev> <ino> <btime-sec> <btime-nsec> <d|f> <path-len> <content-len>\n"
//       <path bytes><content bytes>"\n"
//     (lengths, so any path or content bytes are safe; btime from statx, 0 0
//     where the file system has none, so an inode number reused at the same
//     name is not taken for ours); most contents are empty, git's `commondir`
//     holds ".\n" so that the host's git keeps working while the session
//     runs. A record that is cut short (a crash mid-write) ends the parse;
//   * removal (teardown, sweep) takes flock(LOCK_EX|LOCK_NB) on a recorded
//     placeholder: it succeeds only when no live session holds it (locks die
//     with their holder, so a SIGKILLed launcher releases its own). The name
//     must still be that inode (dev, ino, btime if recorded; it is stat'ed
//     before anything is opened), a file must hold exactly what it was created
//     with, a directory must be empty; it is then unlinked relative to its
//     parent directory opened without following any symlink (safe_path.hpp),
//     deepest first. Lookups go through one map built from every registry
//     file read (each file is read once per pass);
//   * a record is dead once its path no longer names that inode (removed,
//     gone, replaced, parent missing, a symlink on the way); a registry file
//     whose lock can be taken and whose records are all dead is deleted.
//     Teardown drops the session's locks, removes what it held that nobody
//     else holds (looking in every registry file: another, finished session
//     may have created it and failed to remove it while we held it), deletes
//     its own file if none of its records is live and otherwise just closes
//     it (whoever removes the rest, or a later sweep, deletes it), and
//     deletes the other files it removed from once they are all dead;
//   * sweep() (every launch, before anything is created) takes each registry
//     file's lock without waiting, skips files with a live owner (each of
//     their records is held by that owner, who registers only after locking
//     and drops the registry lock only after its own removal pass), removes
//     what nobody holds, and deletes the files left with no live record. So
//     the registry holds only files of live sessions and files with a
//     placeholder still on the host; it does not grow with launches;
//   * entries not named "s-..." (the registry of earlier versions: one
//     "<dev>-<ino>" file per placeholder, content path NUL bytes) are left
//     alone, neither read nor deleted, so that a launcher of an earlier
//     version running at the same time keeps removing its own; there is no
//     migration (a placeholder recorded there is left to that version). The
//     magic is shaped for that version's sweep too: it reads "path NUL", and
//     a path whose parent directory does not exist makes it keep the entry
//     (it deletes an entry whose path does not start with '/', and one
//     whose path's parent exists but whose name is gone).
// The registry lives in the run-dir base, which no sandbox can write
// (run_dir.hpp check_base_outside).
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/linux/openat2.hpp"
#include "ccsb/launch/safe_path.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr const char* kPlaceholderRegistry = "placeholders";
// The first bytes of every registry file (see the header comment for why a
// path and a NUL).
inline constexpr std::string_view kRegistryMagic{"/.ccsb-placeholder-registry/v1\0\n",
                                                 sizeof("/.ccsb-placeholder-registry/v1\0\n") - 1};
inline constexpr std::string_view kRegistryFilePrefix = "s-";

namespace placeholder_detail {

// What identifies an inode at a name: device, inode number and, where the
// file system records it, birth time.
struct ident {
  unsigned long long dev = 0, ino = 0;
  long long btime_sec = 0;
  unsigned btime_nsec = 0;
  mode_t mode = 0;
  unsigned long long size = 0;
};

// statx(dirfd, name, flags) (AT_EMPTY_PATH with "" for a descriptor), or
// fstatat where statx is missing (btime 0). false with errno set on error.
inline bool stat_ident(int dirfd, const char* name, int flags, ident& out) {
  struct statx sx{};
  const unsigned mask = STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE | STATX_BTIME;
  if (::statx(dirfd, name, flags | AT_STATX_SYNC_AS_STAT, mask, &sx) == 0) {
    out.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    out.ino = sx.stx_ino;
    out.mode = sx.stx_mode;
    out.size = sx.stx_size;
    out.btime_sec = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec : 0;
    out.btime_nsec = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_nsec : 0;
    return true;
  }
  if (errno != ENOSYS) return false;
  struct stat st{};
  if (::fstatat(dirfd, name, &st, flags) != 0) return false;
  out = ident{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino), 0, 0, st.st_mode,
              static_cast<unsigned long long>(st.st_size)};
  return true;
}

enum class rec_state : unsigned char { untried, removed, dead, live };

struct record {
  ident id;   // dev, ino, btime as recorded
  bool dir = false;
  std::string path, content;
  rec_state state = rec_state::untried;

  bool matches(const ident& now) const {
    if (now.dev != id.dev || now.ino != id.ino) return false;
    if (dir ? !S_ISDIR(now.mode) : !S_ISREG(now.mode)) return false;
    if (id.btime_sec == 0 && id.btime_nsec == 0) return true; // none recorded
    return now.btime_sec == id.btime_sec && now.btime_nsec == id.btime_nsec;
  }
};

inline std::string encode(const record& r) {
  std::string s = "P " + std::to_string(r.id.dev) + " " + std::to_string(r.id.ino) + " " +
                  std::to_string(static_cast<unsigned long long>(r.id.btime_sec)) + " " +
                  std::to_string(r.id.btime_nsec) + (r.dir ? " d " : " f ") + std::to_string(r.path.size()) + " " +
                  std::to_string(r.content.size()) + "\n";
  s += r.path;
  s += r.content;
  s += '\n';
  return s;
}

// The records of a registry file's bytes; nullopt when it does not start
// with the magic line (not written by this version, or cut before the first
// record). Parsing stops at the first record that is cut short or malformed.
inline std::optional<std::vector<record>> decode(std::string_view data) {
  if (data.substr(0, kRegistryMagic.size()) != kRegistryMagic) return std::nullopt;
  std::vector<record> out;
  std::size_t pos = kRegistryMagic.size();
  while (pos < data.size()) {
    const std::size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) break;
    std::string_view line = data.substr(pos, nl - pos);
    if (line.substr(0, 2) != "P ") break;
    line.remove_prefix(2);
    unsigned long long f[7] = {};
    char kind = 0;
    bool good = true;
    for (int i = 0; i < 7 && good; ++i) {
      if (i == 4) {
        if (line.size() < 2 || (line[0] != 'd' && line[0] != 'f') || line[1] != ' ') good = false;
        else kind = line[0], line.remove_prefix(2);
        continue;
      }
      auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), f[i]);
      if (ec != std::errc() || p == line.data()) good = false;
      line.remove_prefix(static_cast<std::size_t>(p - line.data()));
      if (i < 6) {
        if (line.empty() || line[0] != ' ') good = false;
        else line.remove_prefix(1);
      } else if (!line.empty()) {
        good = false;
      }
    }
    if (!good) break;
    const unsigned long long plen = f[5], clen = f[6];
    const std::size_t body = nl + 1;
    if (plen > data.size() || clen > data.size() || body + plen + clen + 1 > data.size()) break; // cut short
    if (data[body + plen + clen] != '\n') break;
    record r;
    r.id.dev = f[0];
    r.id.ino = f[1];
    r.id.btime_sec = static_cast<long long>(f[2]);
    r.id.btime_nsec = static_cast<unsigned>(f[3]);
    r.dir = kind == 'd';
    r.path.assign(data.substr(body, plen));
    r.content.assign(data.substr(body + plen, clen));
    if (r.path.empty() || r.path.front() != '/' || r.path.find('\0') != std::string::npos) break;
    out.push_back(std::move(r));
    pos = body + plen + clen + 1;
  }
  return out;
}

// One registry file as read by a pass.
struct reg_file {
  std::string name;
  unique_fd fd;
  bool locked = false; // this process holds its LOCK_EX
  std::vector<record> recs;

  bool all_dead() const {
    for (const auto& r : recs)
      if (r.state != rec_state::removed && r.state != rec_state::dead) return false;
    return true;
  }
};

inline bool gone_errno(int e) { return e == ENOENT || e == ENOTDIR || e == ELOOP; }

} // namespace placeholder_detail

class placeholder_set {
  using record = placeholder_detail::record;
  using reg_file = placeholder_detail::reg_file;
  using rec_state = placeholder_detail::rec_state;

public:
  static result<placeholder_set> open(const std::string& base) {
    placeholder_set s;
    s.registry_ = base + "/" + kPlaceholderRegistry;
    if (auto r = ensure_private_dir(s.registry_, 0700); !r) return std::move(r).err();
    s.regfd_.reset(::open(s.registry_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!s.regfd_) return sys_error("open " + s.registry_);
    return s;
  }

  // Holds LOCK_SH on an existing directory or regular file `path`. Returns
  // false when there is nothing lockable there (missing, another type, or
  // unreadable); an error when the name changed while the lock was taken.
  result<bool> hold(const std::string& path) {
    if (held_.count(path)) return true;
    auto parent = open_parent(path);
    if (!parent) return false;
    struct stat before{};
    if (::fstatat(parent->dir.get(), parent->name.c_str(), &before, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (!S_ISDIR(before.st_mode) && !S_ISREG(before.st_mode)) return false;
    unique_fd fd(::openat(parent->dir.get(), parent->name.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) return false;
    int r;
    do r = ::flock(fd.get(), LOCK_SH);
    while (r != 0 && errno == EINTR);
    if (r != 0) return sys_error("flock(LOCK_SH) " + path);
    struct stat locked{}, now{};
    if (::fstat(fd.get(), &locked) != 0 ||
        ::fstatat(parent->dir.get(), parent->name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        locked.st_dev != now.st_dev || locked.st_ino != now.st_ino)
      return make_error(errc::io_error, path, "the entry changed while it was being locked");
    held_.emplace(path, std::move(fd));
    return true;
  }

  // Creates a placeholder (an empty 0755 directory, or a 0444 file holding
  // `content`) at `path`, whose parent must exist, holds it, then records it
  // in this session's registry file (created on the first call).
  result<void> create(const std::string& path, bool dir, std::string_view content = {}) {
    auto parent = open_parent(path);
    if (!parent) return std::move(parent).err();
    const int pdir = parent->dir.get(); // O_PATH: fine as the dirfd of *at calls
    const char* name = parent->name.c_str();
    unique_fd fd;
    if (dir) {
      if (::mkdirat(pdir, name, 0755) != 0) return sys_error("mkdir " + path);
      fd.reset(::openat(pdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!fd) return sys_error("open " + path);
    } else {
      // Created 0444 yet opened read-write: the creator may write it.
      fd.reset(::openat(pdir, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0444));
      if (!fd || !write_all(fd.get(), content)) return sys_error("create " + path);
    }
    if (::flock(fd.get(), LOCK_SH) != 0) return sys_error("flock(LOCK_SH) " + path);
    record rec;
    if (!placeholder_detail::stat_ident(fd.get(), "", AT_EMPTY_PATH, rec.id)) return sys_error("statx " + path);
    if (::fchmod(fd.get(), dir ? 0755 : 0444) != 0) return sys_error("fchmod " + path);
    rec.dir = dir;
    rec.path = path;
    rec.content.assign(content);
    if (auto r = append(rec); !r) {
      // Unrecorded, nobody could ever remove it: take it back now unless
      // someone else already holds it.
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
        placeholder_detail::ident now;
        if (placeholder_detail::stat_ident(pdir, name, AT_SYMLINK_NOFOLLOW, now) && rec.matches(now))
          ::unlinkat(pdir, name, dir ? AT_REMOVEDIR : 0);
      }
      return r;
    }
    created_.push_back(path);
    held_.emplace(path, std::move(fd));
    return ok();
  }

  const std::vector<std::string>& created() const { return created_; }

  // Teardown: drops this session's locks, then removes every recorded
  // placeholder this session held that no other session holds, and closes
  // (deleting it when nothing in it is live) this session's registry file.
  // create() may be called again afterwards (a new registry file).
  std::vector<std::string> release_and_remove() {
    unlinked_inodes later;
    return release_and_remove(later);
  }

  // The same; the removed inodes (placeholders, registry files) are kept in
  // `later` and go when it is released (run_dir.hpp unlinked_inodes).
  std::vector<std::string> release_and_remove(unlinked_inodes& later) {
    std::set<std::string> paths; // what this session held
    for (auto& [p, fd] : held_) paths.insert(p);
    held_.clear(); // closes: the shared locks are gone
    std::vector<std::string> removed;
    std::vector<reg_file> files;
    const bool had_own = static_cast<bool>(own_.fd);
    if (had_own) files.push_back(std::move(own_));
    own_ = reg_file{};
    own_size_ = 0;
    own_broken_ = false;
    const std::size_t others_from = files.size();
    if (!paths.empty()) read_registry(files, false, had_own ? files.front().name : std::string());
    settle(files, [&](const reg_file& f, const record& r) { return f.locked || paths.count(r.path) != 0; }, removed,
           later);
    if (had_own) {
      reg_file& mine = files.front();
      if (mine.all_dead() && ::unlinkat(regfd_.get(), mine.name.c_str(), 0) == 0) later.keep(std::move(mine.fd));
      mine.fd.reset(); // its lock goes: the rest is anyone's to remove
    }
    // Another session's file we removed from: once nobody owns it, deal with
    // the rest of it and delete it when nothing in it is live.
    std::vector<reg_file> orphans;
    for (std::size_t i = others_from; i < files.size(); ++i) {
      reg_file& f = files[i];
      bool touched = false;
      for (const auto& r : f.recs) touched |= r.state == rec_state::removed || r.state == rec_state::dead;
      if (!touched || !lock_and_reread(f)) continue;
      orphans.push_back(std::move(f));
    }
    if (!orphans.empty()) {
      settle(orphans, [](const reg_file&, const record&) { return true; }, removed, later);
      for (auto& f : orphans)
        if (f.all_dead() && ::unlinkat(regfd_.get(), f.name.c_str(), 0) == 0) later.keep(std::move(f.fd));
    }
    return removed;
  }

  // The recorded placeholders that nobody holds (left by crashed or
  // overlapping sessions), and the registry files nobody needs any more.
  // Returns what was removed.
  std::vector<std::string> sweep() {
    std::vector<reg_file> files;
    read_registry(files, true, own_.name);
    std::vector<std::string> removed;
    unlinked_inodes later;
    settle(files, [](const reg_file&, const record&) { return true; }, removed, later);
    for (auto& f : files)
      if (f.all_dead() && ::unlinkat(regfd_.get(), f.name.c_str(), 0) == 0) later.keep(std::move(f.fd));
    return removed;
  }

private:
  // Appends one record to this session's registry file, creating and
  // locking the file first if this is the session's first placeholder.
  result<void> append(const record& rec) {
    std::string bytes = placeholder_detail::encode(rec);
    if (!own_.fd)
      if (auto r = create_registry_file(); !r) return r;
    if (own_broken_)
      return make_error(errc::io_error, registry_ + "/" + own_.name, "an earlier record could not be written");
    if (own_size_ == 0) bytes.insert(0, kRegistryMagic); // the first write carries the magic line
    if (!write_all(own_.fd.get(), bytes)) {
      const int e = errno;
      // No torn record in the middle: the records after it would not parse.
      // If it cannot be cut off, this file takes no more records (teardown
      // still works from the records in memory).
      if (::ftruncate(own_.fd.get(), own_size_) != 0 || ::lseek(own_.fd.get(), own_size_, SEEK_SET) < 0)
        own_broken_ = true;
      errno = e;
      return sys_error("write " + registry_ + "/" + own_.name);
    }
    own_size_ += static_cast<off_t>(bytes.size());
    own_.recs.push_back(rec);
    return ok();
  }

  result<void> create_registry_file() {
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::uint64_t rnd = 0;
      if (::getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof rnd))
        rnd = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
              (static_cast<std::uint64_t>(attempt) << 56);
      char hex[17];
      for (int i = 0; i < 16; ++i) hex[i] = "0123456789abcdef"[(rnd >> (4 * i)) & 0xf];
      hex[16] = '\0';
      std::string name = std::string(kRegistryFilePrefix) + std::to_string(::getpid()) + "-" + hex;
      unique_fd fd(
          ::openat(regfd_.get(), name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600));
      if (!fd) {
        if (errno == EEXIST) continue;
        return sys_error("create " + registry_ + "/" + name);
      }
      int r;
      do r = ::flock(fd.get(), LOCK_EX);
      while (r != 0 && errno == EINTR);
      if (r != 0) return sys_error("flock(LOCK_EX) " + registry_ + "/" + name);
      // A sweep that found it empty and unlocked (before this lock) deleted it.
      if (!names_inode(name, fd.get())) continue;
      own_ = reg_file{std::move(name), std::move(fd), true, {}};
      own_size_ = 0;
      own_broken_ = false;
      return ok();
    }
    return make_error(errc::io_error, registry_, "could not create this session's registry file");
  }

  // Whether `name` in the registry dir is still the inode open as `fd`.
  bool names_inode(const std::string& name, int fd) const {
    struct stat a{}, b{};
    return ::fstat(fd, &a) == 0 && ::fstatat(regfd_.get(), name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }

  static std::string read_all(int fd, std::size_t cap) {
    std::string out;
    char buf[16384];
    ssize_t n;
    while (out.size() <= cap) {
      n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  // Reads every registry file except `skip` into `files`, each once.
  // lock: only files whose LOCK_EX this process can take without waiting
  // (no live owner) are kept, locked; otherwise every file is read,
  // unlocked. Entries not named "s-..." are not touched.
  void read_registry(std::vector<reg_file>& files, bool lock, const std::string& skip) {
    DIR* d = ::fdopendir(::fcntl(regfd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!d) return;
    ::rewinddir(d); // a dup shares the offset: an earlier pass left it at the end
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.' || e->d_name == skip) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (auto& name : names) {
      if (name.compare(0, kRegistryFilePrefix.size(), kRegistryFilePrefix) != 0) continue; // an earlier version's

      reg_file f;
      f.name = std::move(name);
      f.fd.reset(::openat(regfd_.get(), f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
      if (!f.fd) continue;
      if (lock) {
        if (!lock_and_reread(f)) continue;
      } else {
        read_records(f);
      }
      files.push_back(std::move(f));
    }
  }

  // Takes f's LOCK_EX without waiting and (re)reads it; false when its
  // owner is alive (or it is no longer the file of that name).
  bool lock_and_reread(reg_file& f) {
    if (::flock(f.fd.get(), LOCK_EX | LOCK_NB) != 0) return false;
    if (!names_inode(f.name, f.fd.get())) return false;
    f.locked = true;
    if (::lseek(f.fd.get(), 0, SEEK_SET) < 0) return false;
    read_records(f);
    return true;
  }

  // A file without the magic line has no records: an owner that died
  // before writing it, or a sweep that saw it before its owner locked it
  // (the owner notices the deletion and makes another).
  void read_records(reg_file& f) const {
    auto recs = placeholder_detail::decode(read_all(f.fd.get(), std::size_t{64} << 20));
    f.recs = recs ? std::move(*recs) : std::vector<record>{};
  }

  // Tries every untried record of `files` that `want` selects, grouped by
  // path, deepest path first (a created directory is empty once its created
  // children are gone), and marks each removed, dead or live.
  template <class Want>
  void settle(std::vector<reg_file>& files, Want want, std::vector<std::string>& removed, unlinked_inodes& later) {
    struct deeper_first {
      bool operator()(const std::string& a, const std::string& b) const {
        return a.size() != b.size() ? a.size() > b.size() : a > b;
      }
    };
    std::map<std::string, std::vector<record*>, deeper_first> by_path;
    for (auto& f : files)
      for (auto& r : f.recs)
        if (r.state == rec_state::untried && want(f, r)) by_path[r.path].push_back(&r);
    for (auto& [path, recs] : by_path)
      if (settle_path(path, recs, later)) removed.push_back(path);
  }

  // The records (from any registry file) naming `path`. At most one of them
  // is the inode there now; the others are dead. That one is removed when
  // nobody holds it and it is as created; true when it was.
  // The removed inode is kept in `later` (its blocks are freed when that is
  // released, with the others, not here under the parent's lock).
  static bool settle_path(const std::string& path, std::vector<record*>& recs, unlinked_inodes& later) {
    auto mark = [&](rec_state s) {
      for (auto* r : recs)
        if (r->state == rec_state::untried) r->state = s;
    };
    auto [dir, name] = split_parent(path);
    if (path.front() != '/' || name.empty() || name == "." || name == "..") {
      mark(rec_state::dead);
      return false;
    }
    unique_fd pdir(openat2_nofollow(AT_FDCWD, dir, O_PATH | O_DIRECTORY));
    if (!pdir) {
      // Gone, or a symlink on the way: the path no longer names ours.
      mark(placeholder_detail::gone_errno(errno) ? rec_state::dead : rec_state::live);
      return false;
    }
    placeholder_detail::ident now;
    if (!placeholder_detail::stat_ident(pdir.get(), name.c_str(), AT_SYMLINK_NOFOLLOW, now)) {
      mark(placeholder_detail::gone_errno(errno) ? rec_state::dead : rec_state::live);
      return false;
    }
    record* mine = nullptr;
    for (auto* r : recs) {
      if (!mine && r->matches(now)) mine = r;
      else r->state = rec_state::dead; // that inode is not at the path
    }
    if (!mine) return false;
    mine->state = rec_state::live; // unless removed below
    unique_fd fd(::openat(pdir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) {
      if (placeholder_detail::gone_errno(errno)) mine->state = rec_state::dead;
      return false;
    }
    placeholder_detail::ident opened;
    if (!placeholder_detail::stat_ident(fd.get(), "", AT_EMPTY_PATH, opened) || !mine->matches(opened)) {
      return false; // changed under us: left for a later pass
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false; // a live session holds it
    placeholder_detail::ident again;
    if (!placeholder_detail::stat_ident(pdir.get(), name.c_str(), AT_SYMLINK_NOFOLLOW, again)) {
      if (placeholder_detail::gone_errno(errno)) mine->state = rec_state::dead;
      return false;
    }
    if (!mine->matches(again)) {
      mine->state = rec_state::dead;
      return false;
    }
    bool ok = false;
    if (mine->dir) {
      ok = ::unlinkat(pdir.get(), name.c_str(), AT_REMOVEDIR) == 0; // only when empty
    } else if (again.size == mine->content.size() && read_all(fd.get(), mine->content.size()) == mine->content) {
      ok = ::unlinkat(pdir.get(), name.c_str(), 0) == 0;
    }
    if (ok) {
      mine->state = rec_state::removed;
      later.keep(std::move(fd));
    }
    return ok;
  }

  std::string registry_;
  unique_fd regfd_;
  std::map<std::string, unique_fd> held_;
  std::vector<std::string> created_;
  reg_file own_;      // this session's registry file, once it has one
  off_t own_size_ = 0; // the bytes of whole records in it
  bool own_broken_ = false;
};

} // namespace ccsb::launch
