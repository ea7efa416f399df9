// ccsb/launch/placeholders.hpp — the host entries a session mounts over, and
// the placeholders it creates for missing denied paths (launcher only; does
// I/O). L8: no teardown or sweep may weaken another live session.
//
// bubblewrap can only keep a name from being created by occupying it with a
// mount point, and a mount point must exist on the host. So before bwrap
// runs, the launcher creates every missing mount point the plan needs (an
// empty 0555 directory or 0444 file: the plan's create_dirs and the targets
// of its placeholder/mask binds) and removes them again afterwards. Unlinking
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
//   * a created placeholder is registered in <base>/placeholders/ as a file
//     named "<dev>-<ino>" whose content is the path, a NUL, and the bytes a
//     file placeholder was created with (raw: a path may contain newlines,
//     never a NUL); most are empty, git's `commondir` holds ".\n" so that
//     the host's git keeps working while the session runs;
//   * removal (teardown, sweep) takes flock(LOCK_EX|LOCK_NB) on a registered
//     entry: it succeeds only when no live session holds it (locks die with
//     their holder, so a SIGKILLed launcher releases its own). The entry must
//     still be that inode, hold exactly what it was created with (a
//     directory: be empty), and is then unlinked relative to its
//     parent directory opened without following any symlink
//     (safe_path.hpp), deepest first; its registry file goes with it;
//   * an entry that someone else still holds stays; whoever releases it last
//     (or the next sweep) removes it.
// The registry lives in the run-dir base, which no sandbox can write
// (run_dir.hpp check_base_outside).
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/safe_path.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr const char* kPlaceholderRegistry = "placeholders";

class placeholder_set {
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
  // `content`) at `path`, whose parent must exist, registers it and holds it.
  result<void> create(const std::string& path, bool dir, std::string_view content = {}) {
    auto parent = open_parent(path);
    if (!parent) return std::move(parent).err();
    unique_fd pdir(::openat(parent->dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!pdir) return sys_error("open " + split_parent(path).first);
    if (dir) {
      if (::mkdirat(pdir.get(), parent->name.c_str(), 0755) != 0) return sys_error("mkdir " + path);
    } else {
      unique_fd wf(::openat(pdir.get(), parent->name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
      if (!wf || !write_all(wf.get(), content)) return sys_error("create " + path);
    }
    unique_fd fd(::openat(pdir.get(), parent->name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return sys_error("open " + path);
    if (::flock(fd.get(), LOCK_SH) != 0) return sys_error("flock(LOCK_SH) " + path);
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) return sys_error("fstat " + path);
    if (::fchmod(fd.get(), dir ? 0755 : 0444) != 0) return sys_error("fchmod " + path);
    const std::string key = entry_key(st);
    unique_fd reg(::openat(regfd_.get(), key.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
    std::string record = path;
    record += '\0';
    record.append(content);
    if (!reg || !write_all(reg.get(), record)) return sys_error("register " + registry_ + "/" + key);
    created_.push_back(path);
    held_.emplace(path, std::move(fd));
    return ok();
  }

  const std::vector<std::string>& created() const { return created_; }

  // Teardown: drops this session's locks, then removes every registered
  // placeholder this session held that no other session holds.
  std::vector<std::string> release_and_remove() {
    std::vector<std::string> paths;
    for (auto& [p, fd] : held_) paths.push_back(p);
    held_.clear(); // closes: the shared locks are gone
    return remove_registered(paths);
  }

  // The registered placeholders that nobody holds (left by crashed or
  // overlapping sessions). Returns what was removed.
  std::vector<std::string> sweep() {
    std::vector<std::string> paths;
    DIR* d = ::fdopendir(::fcntl(regfd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!d) return {};
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string path = read_entry(e->d_name).first;
      if (path.empty() || path.front() != '/') {
        ::unlinkat(regfd_.get(), e->d_name, 0);
        continue;
      }
      paths.push_back(path);
    }
    ::closedir(d);
    return remove_registered(paths);
  }

private:
  static std::string entry_key(const struct stat& st) {
    return std::to_string(static_cast<unsigned long long>(st.st_dev)) + "-" +
           std::to_string(static_cast<unsigned long long>(st.st_ino));
  }

  // {path, content} of a registry entry; {"", ""} when unreadable.
  std::pair<std::string, std::string> read_entry(const std::string& key) const {
    unique_fd f(::openat(regfd_.get(), key.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!f) return {};
    std::string out = read_some(f.get(), 65536);
    auto nul = out.find('\0');
    if (nul == std::string::npos) return {};
    return {out.substr(0, nul), out.substr(nul + 1)};
  }

  static std::string read_some(int fd, std::size_t cap) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while (out.size() <= cap && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }

  // Deepest first, so a created directory is empty once its own created
  // children are gone.
  std::vector<std::string> remove_registered(std::vector<std::string> paths) {
    std::sort(paths.begin(), paths.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() > b.size() : a > b;
    });
    paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
    std::vector<std::string> removed;
    for (const auto& p : paths)
      if (remove_one(p)) removed.push_back(p);
    return removed;
  }

  bool remove_one(const std::string& path) {
    auto parent = open_parent(path);
    if (!parent) return false; // gone, or a symlink on the way: leave it
    unique_fd pdir(::openat(parent->dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!pdir) return false;
    unique_fd fd(::openat(pdir.get(), parent->name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st{};
    if (!fd) {
      // Gone (or no longer openable): drop a registry entry naming it only
      // if the name is gone entirely.
      if (::fstatat(pdir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) forget_path(path);
      return false;
    }
    if (::fstat(fd.get(), &st) != 0) return false;
    const std::string key = entry_key(st);
    const auto [registered, content] = read_entry(key);
    if (registered != path) return false;               // not a placeholder ccsb created
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false; // a live session holds it
    struct stat now{};
    if (::fstatat(pdir.get(), parent->name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != st.st_ino ||
        now.st_dev != st.st_dev)
      return false;
    bool removed = false;
    if (S_ISDIR(st.st_mode)) removed = ::unlinkat(pdir.get(), parent->name.c_str(), AT_REMOVEDIR) == 0;
    else if (S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) == content.size() &&
             read_some(fd.get(), content.size()) == content)
      removed = ::unlinkat(pdir.get(), parent->name.c_str(), 0) == 0;
    if (removed) ::unlinkat(regfd_.get(), key.c_str(), 0);
    return removed;
  }

  // Drops registry entries whose content is `path` (the entry is gone).
  void forget_path(const std::string& path) {
    DIR* d = ::fdopendir(::fcntl(regfd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!d) return;
    std::vector<std::string> keys;
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.' && read_entry(e->d_name).first == path) keys.emplace_back(e->d_name);
    ::closedir(d);
    for (const auto& k : keys) ::unlinkat(regfd_.get(), k.c_str(), 0);
  }

  std::string registry_;
  unique_fd regfd_;
  std::map<std::string, unique_fd> held_;
  std::vector<std::string> created_;
};

} // namespace ccsb::launch
