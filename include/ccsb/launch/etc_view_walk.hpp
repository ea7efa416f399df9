// ccsb/launch/etc_view_walk.hpp — the walk of the /etc view's sources
// (L1, L8; issue 9): the key's text, and the copy into a view being built
// (launcher only, Linux; does I/O). ccsb/launch/etc_view.hpp keeps, finds,
// builds and sweeps views with it; its top comment says what a view holds.
//
//   etc_view_detail::walk(root, manifest, out, racy_window_ns, oracle).run()
//     -> the key's text (out < 0), or the same text after copying into the
//        directory open as `out`
//   etc_view_detail::parse_record(text) -> its lines
//   etc_view_detail::make_oracle(text) -> a published view's listing
#pragma once

#include "ccsb/etc_manifest.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/result.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr std::size_t kEtcViewMaxEntries = 20000;
inline constexpr std::uint64_t kEtcViewMaxBytes = 64ull << 20;
inline constexpr int kEtcViewMaxDepth = 64;
inline constexpr std::string_view kEtcViewMagic = "ccsb etc view v1";

// A walk that sees a time this recent is racy (see etc_view_detail::walk).
inline constexpr std::int64_t kEtcViewRacyWindowNs = 2'000'000'000;

namespace etc_view_detail {

inline error fail(const std::string& field, const std::string& what) {
  return make_error(errc::io_error, field, what);
}
inline error sys_fail(const std::string& field, const std::string& call) {
  return make_error(errc::io_error, field, call + ": " + std::strerror(errno));
}

// openat2 with RESOLVE_IN_ROOT: `rel` (relative) resolved inside `root`, an
// absolute symlink target too; `flags` may hold O_NOFOLLOW for the last
// component.
inline int open_in_root(int root, const std::string& rel, int flags) noexcept {
  open_how how{};
  how.flags = static_cast<__u64>(flags) | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long r;
  do r = ::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how);
  while (r < 0 && errno == EINTR);
  return static_cast<int>(r);
}

inline bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size && a.st_mode == b.st_mode &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

inline std::optional<std::string> read_link_at(int dir, const char* name) {
  char buf[4096];
  ssize_t n = ::readlinkat(dir, name, buf, sizeof buf);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// The entries of the directory open as `dir`, sorted by name, with what
// readdir says of each (type, inode); nullopt when it cannot be read whole
// (errno set).
struct dir_entry {
  std::string_view name; // into the listing's storage (or an oracle's text)
  unsigned char type{DT_UNKNOWN};
  std::uint64_t ino{0};
};

struct dir_listing {
  std::vector<char> storage; // the names one after the other (a vector: a move keeps the views valid)
  std::vector<dir_entry> entries;
};

inline std::optional<dir_listing> read_entries(int dir) {
  dir_listing out;
  std::vector<std::pair<std::size_t, std::size_t>> at; // offset, length in storage
  int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
  if (!d) {
    if (dup >= 0) ::close(dup);
    return std::nullopt;
  }
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      const std::size_t len = std::strlen(e->d_name);
      at.emplace_back(out.storage.size(), len);
      out.storage.insert(out.storage.end(), e->d_name, e->d_name + len);
      out.entries.push_back({{}, e->d_type, static_cast<std::uint64_t>(e->d_ino)});
    }
    errno = 0;
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) {
    errno = err;
    return std::nullopt;
  }
  for (std::size_t i = 0; i < at.size(); ++i)
    out.entries[i].name = std::string_view(out.storage.data() + at[i].first, at[i].second);
  std::sort(out.entries.begin(), out.entries.end(),
            [](const dir_entry& x, const dir_entry& y) { return x.name < y.name; });
  return out;
}

inline std::vector<std::string> names_in(int dir) {
  std::vector<std::string> names;
  if (auto l = read_entries(dir))
    for (const auto& e : l->entries) names.emplace_back(e.name);
  return names;
}

// The key's text is a sequence of lines, each
//   TAG ' ' <len>:GUEST ' ' <len>:REST '\n'
// (length-prefixed: any bytes are safe), in walk order:
//   H  ""      "ccsb etc view v1 boot=<boot id> euid=<euid>"
//   M  path    "d" | "f"             a mask of the manifest
//   E  path    file|dir|symlink      a listed entry, then its lines:
//   f  guest   STAT                  a regular file (a listed one, or in a tree)
//   d  guest   STAT                  a directory (a listed one, or in a tree)
//   L  path    STAT ' ' TARGET       a listed symlink, then what it leads to:
//   F  path    STAT                  its target file, or
//   D  path    STAT                  its target directory (its tree follows), or
//   x  path    ""                    no target: left out
//   l  guest   INO                   a symlink in a tree (readdir's inode)
//   s  guest   TYPE ' ' INO          a device node, socket or FIFO: left out
//   m  guest   ""                    a masked secret in a tree
// STAT: mode uid gid size dev ino mtime-s mtime-ns ctime-s ctime-ns.
struct record_line {
  char tag{0};
  std::string_view guest, rest, whole; // views into the text; whole ends with '\n'
};

inline std::optional<std::vector<record_line>> parse_record(std::string_view t) {
  std::vector<record_line> out;
  std::size_t p = 0;
  auto lenstr = [&](std::string_view& v) {
    std::size_t n = 0;
    auto [q, ec] = std::from_chars(t.data() + p, t.data() + t.size(), n);
    if (ec != std::errc{} || q == t.data() + t.size() || *q != ':') return false;
    p = static_cast<std::size_t>(q - t.data()) + 1;
    if (n > t.size() - p) return false;
    v = t.substr(p, n);
    p += n;
    return true;
  };
  while (p < t.size()) {
    const std::size_t start = p;
    record_line l;
    l.tag = t[p];
    if (t.size() - p < 2 || t[p + 1] != ' ') return std::nullopt;
    p += 2;
    if (!lenstr(l.guest) || p >= t.size() || t[p] != ' ') return std::nullopt;
    ++p;
    if (!lenstr(l.rest) || p >= t.size() || t[p] != '\n') return std::nullopt;
    ++p;
    l.whole = t.substr(start, p - start);
    out.push_back(l);
  }
  return out;
}

// The listing oracle: a published view's key text (see "Cost" below).
struct listing_oracle {
  std::vector<char> text; // a vector: a move keeps the views valid
  std::vector<record_line> lines;
  std::vector<std::pair<std::string_view, std::size_t>> dirs; // guest -> index of its d/D line, sorted

  // The recorded line of directory `guest`, or nullptr.
  const record_line* dir_line(std::string_view guest, std::size_t& at) const {
    auto it = std::lower_bound(dirs.begin(), dirs.end(), guest,
                               [](const auto& e, std::string_view g) { return e.first < g; });
    if (it == dirs.end() || it->first != guest) return nullptr;
    at = it->second;
    return &lines[at];
  }
};

inline std::optional<listing_oracle> make_oracle(const std::string& text) {
  listing_oracle o;
  o.text.assign(text.begin(), text.end());
  auto lines = parse_record(std::string_view(o.text.data(), o.text.size()));
  if (!lines) return std::nullopt;
  o.lines = std::move(*lines);
  for (std::size_t i = 0; i < o.lines.size(); ++i)
    if (o.lines[i].tag == 'd' || o.lines[i].tag == 'D') o.dirs.emplace_back(o.lines[i].guest, i);
  std::sort(o.dirs.begin(), o.dirs.end());
  return o;
}

// One walk of the manifest's sources: it records the key's text and, given
// the view's open etc/ directory, copies into it as it goes. The text of a
// key-only walk and of a building walk is the same by construction; the
// building walk also opens what it copies and checks it against what the
// walk stat'ed (a file replaced or written meanwhile fails the build).
//
// Cost (the key is computed on every launch): one openat2 and fstat per
// listed entry, one open and fstat per directory, one fstatat per regular
// file inside a directory, and nothing per symlink inside a directory:
// readdir's inode number stands for it. A symlink's target cannot change in
// place (only a new symlink, unlink+symlink or a rename over it, changes
// it), and any of those changes the parent directory's mtime and ctime,
// which are in the key; a symlink's owner and mode have no effect on
// access, so neither is in the key (a root launcher still gives the copy
// its source's owner). Reading a directory (getdents: ext4 hashes every
// name of an indexed directory each time) is skipped when a published
// view's key text (the oracle) records that directory with exactly the
// metadata it has now: its children are then the recorded ones. That is
// sound because a published record is never racy (below): any change to
// a directory's entries after it was recorded stamps a ctime later than
// the recorded one. A building walk never uses the oracle.
//
// Racy timestamps: a file system stamps times at the kernel's clock tick,
// so a change right after the walk may keep the times the walk saw (git's
// "racy" entries). A walk that sees an mtime or ctime within the racy
// window (kEtcViewRacyWindowNs) of its start reports racy(): acquire then
// builds nothing (the launch uses bwrap's layout), and the first launch
// after the host's /etc has been still that long builds and publishes it.
class walk {
public:
  walk(int root, const etc_manifest& m, int out, std::int64_t racy_window_ns,
       const listing_oracle* oracle = nullptr)
      : root_(root), m_(m), out_(out), oracle_(out >= 0 ? nullptr : oracle) {
    struct timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    racy_after_ns_ = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec - racy_window_ns;
  }

  // The H line: a record whose first line differs is no oracle for this one.
  static std::string header() {
    std::string id;
    unique_fd fd(::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
    char buf[64];
    ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf) : -1;
    if (n > 0) id.assign(buf, static_cast<std::size_t>(n));
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return std::string(kEtcViewMagic) + " boot=" + id + " euid=" + std::to_string(::geteuid());
  }

  result<std::string> run() {
    text_.clear();
    text_.reserve(oracle_ ? oracle_->text.size() + 4096 : 64 * 1024);
    emit('H', "", header());
    if (oracle_ && (oracle_->lines.empty() || oracle_->lines.front().whole != std::string_view(text_)))
      oracle_ = nullptr;
    for (const auto& mk : m_.masks) emit('M', mk.path, mk.dir ? "d" : "f");
    for (const auto& e : m_.entries)
      if (auto r = entry(e); !r) return std::move(r).err();
    return std::move(text_);
  }

  bool racy() const { return racy_; }

private:
  void num(std::string& s, std::uint64_t v) {
    char b[24];
    auto [p, ec] = std::to_chars(b, b + sizeof b, v);
    s.append(b, p);
  }
  void str(std::string_view v) {
    num(text_, v.size());
    text_ += ':';
    text_ += v;
  }
  void emit(char tag, std::string_view guest, std::string_view rest) {
    text_ += tag;
    text_ += ' ';
    str(guest);
    text_ += ' ';
    str(rest);
    text_ += '\n';
  }
  // A STAT line; `link`: a listed symlink's target text after it.
  void stat_line(char tag, const std::string& guest, const struct stat& st, const std::string* link = nullptr) {
    rest_.clear();
    using u64 = std::uint64_t;
    for (u64 v : {u64(st.st_mode), u64(st.st_uid), u64(st.st_gid), u64(st.st_size), u64(st.st_dev), u64(st.st_ino),
                  u64(st.st_mtim.tv_sec), u64(st.st_mtim.tv_nsec), u64(st.st_ctim.tv_sec), u64(st.st_ctim.tv_nsec)}) {
      if (!rest_.empty()) rest_ += ' ';
      num(rest_, v);
    }
    if (link) {
      rest_ += ' ';
      rest_ += *link;
    }
    emit(tag, guest, rest_);
    if (static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec >= racy_after_ns_ ||
        static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec >= racy_after_ns_)
      racy_ = true;
  }
  result<void> count(const std::string& guest, std::uint64_t bytes) {
    if (++entries_ > kEtcViewMaxEntries)
      return fail(guest, "more than " + std::to_string(kEtcViewMaxEntries) + " entries in the minimal /etc");
    bytes_ += bytes;
    if (bytes_ > kEtcViewMaxBytes)
      return fail(guest, "more than " + std::to_string(kEtcViewMaxBytes) + " bytes of files in the minimal /etc");
    return ok();
  }
  const etc_mask* mask_at(const std::string& guest) const {
    for (const auto& mk : m_.masks)
      if (mk.path == guest) return &mk;
    return nullptr;
  }
  bool building() const { return out_ >= 0; }

  // The view's directory for `guest`'s parent, created 0755 on the way
  // (bwrap creates /etc/ssh and /etc/default for the listed entries there).
  result<unique_fd> out_parent(const std::string& guest, std::string& name) {
    std::string rel = guest.substr(5); // below "/etc/"
    unique_fd cur(::fcntl(out_, F_DUPFD_CLOEXEC, 0));
    if (!cur) return sys_fail(guest, "fcntl(F_DUPFD_CLOEXEC)");
    std::size_t i = 0;
    for (std::size_t slash; (slash = rel.find('/', i)) != std::string::npos; i = slash + 1) {
      const std::string part = rel.substr(i, slash - i);
      const bool made = ::mkdirat(cur.get(), part.c_str(), 0700) == 0;
      if (!made && errno != EEXIST) return sys_fail(guest, "mkdirat " + part);
      unique_fd next(::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) return sys_fail(guest, "openat " + part);
      if (made && ::fchmod(next.get(), 0755) != 0) return sys_fail(guest, "fchmod " + part);
      cur = std::move(next);
    }
    name = rel.substr(i);
    return cur;
  }

  result<void> entry(const etc_entry& e) {
    if (e.path.size() <= 5 || e.path.compare(0, 5, "/etc/") != 0)
      return make_error(errc::invalid_argument, e.path, "a minimal /etc entry must lie below /etc");
    emit('E', e.path, to_string(e.kind));
    const std::string rel = e.path.substr(1);
    unique_fd self(open_in_root(root_, rel, O_PATH | O_NOFOLLOW));
    if (!self) return sys_fail(e.path, "openat2");
    struct stat st{};
    if (::fstat(self.get(), &st) != 0) return sys_fail(e.path, "fstat");
    unique_fd out_dir;
    std::string name;
    if (building()) {
      auto p = out_parent(e.path, name);
      if (!p) return std::move(p).err();
      out_dir = std::move(*p);
    }
    switch (e.kind) {
    case path_kind::file:
      if (!S_ISREG(st.st_mode)) return fail(e.path, "changed since the manifest (no longer a regular file)");
      stat_line('f', e.path, st);
      if (auto r = count(e.path, static_cast<std::uint64_t>(st.st_size)); !r) return r;
      if (::geteuid() == 0 && !(st.st_mode & S_IROTH))
        return fail(e.path, "others may not read it on the host, and a root launcher's view is reachable by every "
                            "uid (bwrap's layout copies it for the sandbox alone)");
      if (!building()) return ok();
      return copy(e.path, -1, rel, st, out_dir.get(), name, true);
    case path_kind::dir: {
      if (!S_ISDIR(st.st_mode)) return fail(e.path, "changed since the manifest (no longer a directory)");
      const std::size_t at = text_.size();
      stat_line('d', e.path, st);
      if (auto r = count(e.path, 0); !r) return r;
      unique_fd dir(open_in_root(root_, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
      if (!dir) return sys_fail(e.path, "openat2");
      return subtree(dir.get(), st, e.path, at, out_dir.get(), name, 0);
    }
    case path_kind::symlink: {
      if (!S_ISLNK(st.st_mode)) return fail(e.path, "changed since the manifest (no longer a symlink)");
      auto target = read_link_at(self.get(), "");
      if (!target) return sys_fail(e.path, "readlinkat");
      stat_line('L', e.path, st, &*target);
      if (auto r = count(e.path, 0); !r) return r;
      // Followed, as bwrap's --ro-bind follows it.
      unique_fd to(open_in_root(root_, rel, O_PATH));
      if (!to) {
        if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR) return sys_fail(e.path, "openat2 (following)");
        emit('x', e.path, ""); // its target does not exist: left out
        return ok();
      }
      struct stat ts{};
      if (::fstat(to.get(), &ts) != 0) return sys_fail(e.path, "fstat");
      if (S_ISREG(ts.st_mode)) {
        stat_line('F', e.path, ts);
        if (auto r = count(e.path, static_cast<std::uint64_t>(ts.st_size)); !r) return r;
        if (!building()) return ok();
        return copy(e.path, -1, rel, ts, out_dir.get(), name, false);
      }
      if (S_ISDIR(ts.st_mode)) {
        const std::size_t at = text_.size();
        stat_line('D', e.path, ts);
        if (auto r = count(e.path, 0); !r) return r;
        unique_fd dir(open_in_root(root_, rel, O_RDONLY | O_DIRECTORY));
        if (!dir) return sys_fail(e.path, "openat2 (following)");
        return subtree(dir.get(), ts, e.path, at, out_dir.get(), name, 0);
      }
      return fail(e.path, "a symlink to neither a file nor a directory");
    }
    case path_kind::missing:
    case path_kind::other: break;
    }
    return fail(e.path, "neither a file, a directory nor a symlink");
  }

  // A regular file (`src_name` in the directory open as `src_dir`, or
  // `src_name` resolved in the source root when src_dir < 0): `top` (a
  // listed file) becomes 0444 and the launcher's; otherwise its mode
  // without setuid/setgid/sticky and, as root, its owner.
  result<void> copy(const std::string& guest, int src_dir, const std::string& src_name, const struct stat& st,
                    int out_dir, const std::string& name, bool top) {
    constexpr int flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
    unique_fd in(src_dir >= 0 ? ::openat(src_dir, src_name.c_str(), flags | O_NOFOLLOW)
                              : open_in_root(root_, src_name, flags | (top ? O_NOFOLLOW : 0)));
    if (!in) return sys_fail(guest, "open");
    struct stat is{};
    if (::fstat(in.get(), &is) != 0) return sys_fail(guest, "fstat");
    if (!same_file(is, st)) return fail(guest, "changed while the /etc view was built");
    unique_fd outf(::openat(out_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!outf) return sys_fail(guest, "create in the /etc view");
    std::uint64_t left = static_cast<std::uint64_t>(st.st_size);
    while (left > 0) {
      ssize_t n = ::sendfile(outf.get(), in.get(), nullptr, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sys_fail(guest, "sendfile");
      if (n == 0) break;
      left -= static_cast<std::uint64_t>(n);
    }
    char probe;
    if (left != 0 || ::read(in.get(), &probe, 1) != 0 || ::fstat(in.get(), &is) != 0 || !same_file(is, st))
      return fail(guest, "changed while the /etc view was built");
    return finish(guest, outf.get(), st, top ? 0444 : (st.st_mode & 0777), !top);
  }

  // Owner (as root, when `keep_owner`), mode and times of a created file or
  // directory.
  static result<void> finish(const std::string& guest, int fd, const struct stat& st, mode_t mode, bool keep_owner) {
    if (keep_owner && ::geteuid() == 0 && ::fchown(fd, st.st_uid, st.st_gid) != 0) return sys_fail(guest, "fchown");
    if (::fchmod(fd, mode) != 0) return sys_fail(guest, "fchmod");
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (::futimens(fd, times) != 0) return sys_fail(guest, "futimens");
    return ok();
  }

  // The children of directory `guest`: the oracle's, when it recorded this
  // directory exactly as the walk just did (its line from text_[at]), else
  // readdir's.
  std::optional<dir_listing> children(int src, const std::string& guest, std::size_t at) {
    std::size_t i = 0;
    const record_line* d = oracle_ ? oracle_->dir_line(guest, i) : nullptr;
    if (!d || d->whole != std::string_view(text_).substr(at)) return read_entries(src);
    dir_listing out;
    const std::string prefix = guest + "/";
    for (++i; i < oracle_->lines.size(); ++i) {
      const record_line& l = oracle_->lines[i];
      if (l.guest.size() <= prefix.size() || l.guest.compare(0, prefix.size(), prefix) != 0) break;
      std::string_view name = l.guest.substr(prefix.size());
      if (name.find('/') != std::string_view::npos) continue; // deeper
      dir_entry e;
      e.name = name;
      std::string_view ino = l.rest;
      switch (l.tag) {
      case 'f': e.type = DT_REG; break;
      case 'd': e.type = DT_DIR; break;
      case 'l': e.type = DT_LNK; break;
      case 's': {
        std::size_t sp = l.rest.find(' ');
        unsigned t = 0;
        std::from_chars(l.rest.data(), l.rest.data() + (sp == std::string_view::npos ? 0 : sp), t);
        e.type = static_cast<unsigned char>(t);
        ino = sp == std::string_view::npos ? std::string_view{} : l.rest.substr(sp + 1);
        break;
      }
      case 'm': e.type = DT_UNKNOWN; ino = {}; break;
      default: return read_entries(src); // not a line of a tree: no oracle
      }
      if (l.tag == 'f' || l.tag == 'd') { // STAT: the inode is the sixth number
        for (int skip = 0; skip < 5; ++skip) ino = ino.substr(std::min(ino.size(), ino.find(' ') + 1));
        ino = ino.substr(0, ino.find(' '));
      }
      std::from_chars(ino.data(), ino.data() + ino.size(), e.ino);
      out.entries.push_back(e);
    }
    return out;
  }

  // The tree of the directory open as `src` (its stat `st`, its line at
  // text_[at]), at `guest`; building: created as `name` in `out_parent`.
  result<void> subtree(int src, const struct stat& st, const std::string& guest, std::size_t at, int out_parent,
                       const std::string& name, int depth) {
    if (depth > kEtcViewMaxDepth) return fail(guest, "deeper than " + std::to_string(kEtcViewMaxDepth) + " levels");
    struct stat now{};
    if (::fstat(src, &now) != 0) return sys_fail(guest, "fstat");
    if (now.st_dev != st.st_dev || now.st_ino != st.st_ino) return fail(guest, "changed while it was read");
    unique_fd out;
    if (building()) {
      if (::mkdirat(out_parent, name.c_str(), 0700) != 0) return sys_fail(guest, "mkdirat in the /etc view");
      out.reset(::openat(out_parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!out) return sys_fail(guest, "openat in the /etc view");
    }
    const auto listing = children(src, guest, at);
    if (!listing) return sys_fail(guest, "readdir");
    std::string g, name_z; // reused: no allocation per entry
    for (const auto& de : listing->entries) {
      g.assign(guest);
      g += '/';
      g += de.name;
      name_z.assign(de.name); // NUL-terminated for the system calls
      const char* n = name_z.c_str();
      if (auto r = count(g, 0); !r) return r;
      if (const etc_mask* mk = mask_at(g)) {
        emit('m', g, "");
        if (building())
          if (auto r = make_mask(g, out.get(), name_z, mk->dir); !r) return r;
        continue;
      }
      if (de.type == DT_LNK) {
        // See "Cost" above: the inode stands for the symlink.
        rest_.clear();
        num(rest_, de.ino);
        emit('l', g, rest_);
        if (building())
          if (auto r = copy_symlink(g, src, name_z, de.ino, out.get()); !r) return r;
        continue;
      }
      if (de.type != DT_REG && de.type != DT_DIR && de.type != DT_UNKNOWN) {
        // A device node, socket or FIFO: left out of the view (see the top).
        rest_.clear();
        num(rest_, de.type);
        rest_ += ' ';
        num(rest_, de.ino);
        emit('s', g, rest_);
        continue;
      }
      struct stat cs{};
      if (::fstatat(src, n, &cs, AT_SYMLINK_NOFOLLOW) != 0) return sys_fail(g, "fstatat");
      if (static_cast<std::uint64_t>(cs.st_ino) != de.ino) return fail(g, "changed while it was read");
      if (S_ISREG(cs.st_mode)) {
        stat_line('f', g, cs);
        if (auto r = count(g, static_cast<std::uint64_t>(cs.st_size)); !r) return r;
        if (building())
          if (auto r = copy(g, src, name_z, cs, out.get(), name_z, false); !r) return r;
      } else if (S_ISDIR(cs.st_mode)) {
        const std::size_t sub_at = text_.size();
        stat_line('d', g, cs);
        unique_fd sub(::openat(src, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) return sys_fail(g, "openat");
        if (auto r = subtree(sub.get(), cs, g, sub_at, out.get(), name_z, depth + 1); !r) return r;
      } else {
        return fail(g, "changed while it was read (readdir did not say what it is)");
      }
    }
    if (building()) return finish(guest, out.get(), st, st.st_mode & 0777, true);
    return ok();
  }

  // A symlink inside a listed directory: recreated with the same target
  // text (as root with its owner); it must still be the inode readdir saw.
  static result<void> copy_symlink(const std::string& guest, int src, const std::string& name, std::uint64_t ino,
                                   int out) {
    struct stat ls{};
    if (::fstatat(src, name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) != 0) return sys_fail(guest, "fstatat");
    if (!S_ISLNK(ls.st_mode) || static_cast<std::uint64_t>(ls.st_ino) != ino)
      return fail(guest, "changed while the /etc view was built");
    auto target = read_link_at(src, name.c_str());
    if (!target) return sys_fail(guest, "readlinkat");
    if (::symlinkat(target->c_str(), out, name.c_str()) != 0) return sys_fail(guest, "symlinkat in the /etc view");
    if (::geteuid() == 0 && ::fchownat(out, name.c_str(), ls.st_uid, ls.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_fail(guest, "fchownat");
    return ok();
  }

  static result<void> make_mask(const std::string& guest, int out_dir, const std::string& name, bool dir) {
    if (dir) {
      if (::mkdirat(out_dir, name.c_str(), 0) != 0) return sys_fail(guest, "mkdirat (mask) in the /etc view");
      return ok();
    }
    unique_fd f(::openat(out_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0));
    if (!f) return sys_fail(guest, "create (mask) in the /etc view");
    if (::fchmod(f.get(), 0) != 0) return sys_fail(guest, "fchmod (mask)");
    return ok();
  }

  int root_;
  const etc_manifest& m_;
  int out_;
  const listing_oracle* oracle_;
  std::int64_t racy_after_ns_{0};
  bool racy_{false};
  std::string text_, rest_;
  std::size_t entries_{0};
  std::uint64_t bytes_{0};
};

} // namespace etc_view_detail
} // namespace ccsb::launch
