// ccsb/launch/etc_view.hpp — the /etc view (L1, L8; issue 9): the minimal
// /etc as one immutable host directory, built by the launcher, cached
// across launches and bound read-only at /etc in one operation (launcher
// only, Linux; does I/O).
//
//   acquire_etc_view(manifest, base, options) -> result<etc_view>
//   sweep_etc_views(base) -> the views removed
//   etc_view_key_of(manifest, options) -> the key (what acquire computes on
//     every launch and compares; tests and the benchmark measure it)
//
// What it holds is etc_manifest.hpp's minimal_etc(), the function the
// renderer's own /etc layout uses too; content as bwrap's layout shows it:
//   * a listed regular file: a copy, mode 0444 (bwrap's `--perms 0444
//     --file`);
//   * a listed directory: a recursive copy. Regular files keep their mode
//     without setuid, setgid and sticky bits; as root they keep their uid
//     and gid too, so a root-only file stays unreadable to the sandbox's
//     unprivileged uid as it is through today's bind; symlinks are
//     recreated with the same target text; directories keep their mode
//     (and, as root, uid and gid). Device nodes, sockets and FIFOs are
//     left out: a view holds only files, directories and symlinks (none of
//     the others belongs in the listed trees; the bind showed them);
//   * a listed symlink: followed, as bwrap's --ro-bind follows it
//     (/etc/localtime -> zoneinfo): its target file or tree is copied as
//     above; one whose target does not exist is left out (bwrap's bind of
//     it fails the start);
//   * a masked P4 secret (/etc/ssl/private): an empty directory or file,
//     mode 0000, like the mask sources (run_dir.hpp);
//   * directories bwrap would create on the way (/etc/ssh, /etc/default)
//     and the view's root: mode 0755, the launcher's.
// Timestamps (atime, mtime) are kept. Everything of a view is the
// launcher's euid's except, as root, what keeps its source's owner: the
// owner of a source entry can change its copy as it could change the
// source the bind showed; the launcher never reads a view's content back
// (it compares the key file and removes views without following links).
//
// Where (L8): <run-dir base>/etc-views/ (run_dir.hpp: /run/ccsb-sessions
// for root, $XDG_RUNTIME_DIR/ccsb or /tmp/ccsb-UID otherwise; out of every
// sandbox's reach: check_base_outside), mode 0711, this euid's, writable by
// nobody else, opened without following a symlink. A view is the directory
// v-<16 hex digits>, mode 0711, holding
//   locked  an empty file: its builder took the lock (run_dir.hpp's marker);
//   etc/    the tree bwrap binds at /etc;
//   key     the key's text, written last: the view is complete.
// As root the sandbox's uid reaches etc/ through the 0711 directories. A
// root launcher's view is readable by every host uid that knows its name,
// so a listed top-level file that others may not read on the host is not
// copied into one (the start uses bwrap's layout instead, which copies it
// for the sandbox's uid alone).
//
// The key: everything the content depends on, as text (its lines: see
// record_line): a version, the boot id (a view does not outlive a reboot,
// so a disk-backed /tmp/ccsb-UID never serves a view a power loss cut
// short), the euid, the manifest (entries, kinds, masks), and for every
// source entry (listed symlinks followed, directories recursively, names
// sorted): its guest path, type, mode, uid, gid, size, device, inode, mtime
// and ctime in nanoseconds; a listed symlink also its target text; a
// symlink inside a directory only its inode (see walk, "Cost": its target
// cannot change without its directory's times changing). The view's name
// is a 64-bit hash of that text; the key file holds the text itself and
// must match it byte for byte, so a hash collision cannot serve a wrong
// view (acquire fails instead, below). Computing the key costs one call
// per listed entry, directory and regular file inside a directory, and
// reads no directory that a published view recorded with its current
// metadata (walk, "Cost"); ~830 entries on this host, ~50 of them stat'ed
// one by one (etc_view_key_of; the README gives the microseconds). A key
// that saw a change in the last kEtcViewRacyWindowNs is "racy": no view is
// built for it (walk, "Racy timestamps").
//
// acquire: compute the key; then
//   * a complete view of that key (a real directory, this euid's, not
//     writable by others, its key file a regular file of this euid with the
//     same text, its name still that inode) is used: flock(LOCK_SH) on its
//     directory, held for the session's life (etc_view::hold);
//   * otherwise one is built in a fresh t-<random> directory under
//     etc-views (mkdirat, held with LOCK_SH from before it has content),
//     every entry created relative to its parent's descriptor with
//     O_CREAT|O_EXCL|O_NOFOLLOW, mkdirat, symlinkat; nothing is followed on
//     the view's side. The build re-checks what it copies against what it
//     stat'ed (a file replaced or written meanwhile fails the build), and
//     its own record must equal the key computed before. It is published
//     by renameat2(RENAME_NOREPLACE) to v-<hash>. A concurrent launcher
//     may win that race: then the winner's view is used and ours removed
//     (or, if the winner's cannot be used, ours is used unpublished and
//     swept after the session);
//   * a name taken by something that is not a view of ours (a symlink, a
//     file, a directory of another uid or writable by others): never
//     followed, used or removed; acquire fails with what is there;
//   * a directory of ours at the name that is no complete view (a sweep
//     cut short) is removed first, unless a session holds it (another key
//     under the same hash, in use): then acquire fails;
//   * a racy key (below): acquire fails, nothing is built.
// Building a view for one session only would cost far more than bwrap's
// layout (creating ~830 inodes: ~7 ms on tmpfs, ~250 ms on this VM's ext4
// /run), so whatever keeps a view from being published or reused ends in
// bwrap's layout rather than in a private copy.
// Bounds: at most kEtcViewMaxEntries entries and kEtcViewMaxBytes bytes of
// file content, and 64 directory levels; beyond them, and on any other
// failure (an unreadable source for an unprivileged launcher: bwrap's bind
// would show its modes, a copy cannot be made), acquire fails with the
// reason and the launcher uses bwrap's layout (bwrap_driver.hpp logs one
// line). CCSB_ETC_VIEW=off in the launcher's environment does the same
// (tests compare both layouts).
//
// Lifetime: a session holds LOCK_SH on its view's directory until its
// driver is gone. sweep_etc_views() (each launch that uses a view, after
// it holds its own) removes every v-* and t-* directory of this euid with
// a `locked` marker on which flock(LOCK_EX|LOCK_NB) succeeds — no live
// session holds it: views of an older key, unpublished copies, and the
// half-built directories of SIGKILLed launchers (a lock dies with its
// holder). A directory without the marker is a builder's that has not
// locked yet: never swept. The removal holds that LOCK_EX throughout,
// unlinks the key file first (a launcher that takes LOCK_SH afterwards
// finds no key and does not use it), then the tree, then the marker, then
// the directory, never following a link. A view a live session holds is
// never removed: a removed file would vanish inside that sandbox.
#pragma once

#include "ccsb/etc_manifest.hpp"
#include "ccsb/launch/linux/openat2.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/result.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch {

inline constexpr const char* kEtcViewsDir = "etc-views";
inline constexpr std::string_view kEtcViewPrefix = "v-";     // a published view: v-<hash of its key>
inline constexpr std::string_view kEtcViewTempPrefix = "t-"; // being built, or a copy a session uses unpublished
inline constexpr const char* kEtcViewKeyFile = "key";
inline constexpr const char* kEtcViewTree = "etc";
inline constexpr std::size_t kEtcViewMaxEntries = 20000;
inline constexpr std::uint64_t kEtcViewMaxBytes = 64ull << 20;
inline constexpr int kEtcViewMaxDepth = 64;
inline constexpr std::string_view kEtcViewMagic = "ccsb etc view v1";

// A walk that sees a time this recent is racy (see etc_view_detail::walk).
inline constexpr std::int64_t kEtcViewRacyWindowNs = 2'000'000'000;

struct etc_view_options {
  // Where the listed paths are read: "/" for the launcher; tests use a fake
  // tree. Paths resolve inside it (openat2 RESOLVE_IN_ROOT), absolute
  // symlink targets included.
  std::string source_root{"/"};
  bool sweep{true}; // sweep_etc_views() once the view is held
  std::int64_t racy_window_ns{kEtcViewRacyWindowNs};
};

struct etc_view_key {
  std::string text; // what the key file of its view holds
  std::string name; // v-<hash of text>
  bool racy{false}; // a source changed within racy_window_ns: not to be published
};

struct etc_view {
  std::string name;               // v-<hash of the key>: the published view's name
  std::string path;               // <base>/etc-views/<dir>/etc: bwrap's --ro-bind source for /etc
  unique_fd hold;                 // the view's directory, flock(LOCK_SH) for the session's life
  bool built{false};              // this call built it (false: a view built before is reused)
  bool published{false};          // under its key's name (false: this session's copy, unpublished)
  std::vector<std::string> notes; // what is worth a log line (views swept, a name that was taken)
};

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

inline std::uint64_t key_hash(std::string_view s) noexcept {
  std::uint64_t h = 0x243f6a8885a308d3ull ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  std::uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 32;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

inline std::string view_name(std::string_view key_text) {
  static const char* hex = "0123456789abcdef";
  std::uint64_t h = key_hash(key_text);
  std::string n(kEtcViewPrefix);
  for (int i = 60; i >= 0; i -= 4) n += hex[(h >> i) & 0xf];
  return n;
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
    for (std::uint64_t v : {static_cast<std::uint64_t>(st.st_mode), static_cast<std::uint64_t>(st.st_uid),
                            static_cast<std::uint64_t>(st.st_gid), static_cast<std::uint64_t>(st.st_size),
                            static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                            static_cast<std::uint64_t>(st.st_mtim.tv_sec), static_cast<std::uint64_t>(st.st_mtim.tv_nsec),
                            static_cast<std::uint64_t>(st.st_ctim.tv_sec), static_cast<std::uint64_t>(st.st_ctim.tv_nsec)}) {
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

// Removes what is in the directory open as `dir` without following any
// link; directories of this uid that it may not write or search are made
// 0700 first (the masks, 0555 copies: an unprivileged launcher's own).
inline void remove_tree(int dir, int depth = 0) {
  for (const auto& n : names_in(dir)) {
    struct stat st{};
    if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      ::unlinkat(dir, n.c_str(), 0);
      continue;
    }
    if (depth > kEtcViewMaxDepth) continue;
    if (st.st_uid == ::geteuid() && (st.st_mode & 0700) != 0700)
      ::fchmodat(dir, n.c_str(), 0700, AT_SYMLINK_NOFOLLOW); // glibc: O_PATH, never a link
    unique_fd sub(::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub) remove_tree(sub.get(), depth + 1);
    ::unlinkat(dir, n.c_str(), AT_REMOVEDIR);
  }
}

// Removes the view `name` open as `fd`, on which the caller holds LOCK_EX:
// the key first (see the top), then the tree, the marker, the directory.
inline bool remove_view(int views, const std::string& name, int fd) {
  struct stat a{}, b{};
  if (::fstat(fd, &a) != 0 || ::fstatat(views, name.c_str(), &b, AT_SYMLINK_NOFOLLOW) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino)
    return false;
  ::unlinkat(fd, kEtcViewKeyFile, 0);
  ::fchmodat(fd, kEtcViewTree, 0700, AT_SYMLINK_NOFOLLOW);
  unique_fd tree(::openat(fd, kEtcViewTree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (tree) remove_tree(tree.get());
  ::unlinkat(fd, kEtcViewTree, AT_REMOVEDIR);
  remove_tree(fd); // anything else (nothing, unless a build failed half-way)
  return ::unlinkat(views, name.c_str(), AT_REMOVEDIR) == 0;
}

// <base>/etc-views, created if `create`, opened without following a link,
// checked: a directory of this euid that nobody else may write.
inline result<unique_fd> open_views(const std::string& base, bool create) {
  const std::string path = base + "/" + kEtcViewsDir;
  unique_fd b(openat2_nofollow(AT_FDCWD, base, O_PATH | O_DIRECTORY));
  if (!b) return sys_fail(base, "openat2(RESOLVE_NO_SYMLINKS) of the run-dir base");
  if (create && ::mkdirat(b.get(), kEtcViewsDir, 0711) != 0 && errno != EEXIST) return sys_fail(path, "mkdirat");
  unique_fd v(::openat(b.get(), kEtcViewsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!v) return sys_fail(path, "open (not following a link)");
  struct stat st{};
  if (::fstat(v.get(), &st) != 0) return sys_fail(path, "fstat");
  if (st.st_uid != ::geteuid())
    return make_error(errc::unenforceable, path, "belongs to uid " + std::to_string(st.st_uid) + "; not used");
  if (!S_ISDIR(st.st_mode) || (st.st_mode & 022))
    return make_error(errc::unenforceable, path, "is writable by others; not used");
  if ((st.st_mode & 07777) != 0711 && ::fchmod(v.get(), 0711) != 0) return sys_fail(path, "fchmod");
  return v;
}

// Reads the key file of the view directory open as `dir` (a regular file of
// this euid that nobody else may write, at most `max` bytes).
inline std::optional<std::string> read_key_file(int dir, std::size_t max) {
  unique_fd k(::openat(dir, kEtcViewKeyFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat ks{};
  if (!k || ::fstat(k.get(), &ks) != 0 || !S_ISREG(ks.st_mode) || ks.st_uid != ::geteuid() || (ks.st_mode & 022) ||
      static_cast<std::uint64_t>(ks.st_size) > max)
    return std::nullopt;
  std::string text(static_cast<std::size_t>(ks.st_size), '\0');
  std::size_t got = 0;
  ssize_t n;
  while (got < text.size() && ((n = ::read(k.get(), text.data() + got, text.size() - got)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0) got += static_cast<std::size_t>(n);
  if (got != text.size()) return std::nullopt;
  return text;
}

// The listing oracle (see walk): the key text of a published view of this
// euid under `views` (the newest, when a sweep left several), or nullopt.
inline std::optional<listing_oracle> load_oracle(int views) {
  std::optional<std::string> best;
  std::int64_t best_time = -1;
  for (const auto& n : names_in(views)) {
    if (n.rfind(kEtcViewPrefix, 0) != 0) continue;
    unique_fd d(::openat(views, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st{};
    if (!d || ::fstat(d.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022)) continue;
    const std::int64_t t = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    if (t <= best_time) continue;
    if (auto text = read_key_file(d.get(), 64u << 20)) {
      best = std::move(text);
      best_time = t;
    }
  }
  if (!best) return std::nullopt;
  return make_oracle(*best);
}

enum class found { usable, absent, busy, stale, foreign };

struct lookup {
  found state{found::absent};
  unique_fd fd;       // usable: LOCK_SH held
  std::string why;    // not usable: what is there
};

// The view `name` if it is complete for `key` (see acquire at the top).
inline lookup look_up(int views, const std::string& name, const std::string& key) {
  lookup l;
  unique_fd fd(::openat(views, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return l;
    l.state = found::foreign;
    l.why = errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink or a file)" : std::strerror(errno);
    return l;
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022)) {
    l.state = found::foreign;
    l.why = st.st_uid != ::geteuid() ? "a directory of uid " + std::to_string(st.st_uid) : "a directory others may write";
    return l;
  }
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    l.state = found::busy;
    l.why = "being removed by another launcher's sweep";
    return l;
  }
  auto text = read_key_file(fd.get(), key.size());
  bool complete = text && *text == key;
  struct stat ts{};
  if (complete && (::fstatat(fd.get(), kEtcViewTree, &ts, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(ts.st_mode) ||
                   ts.st_uid != ::geteuid() || (ts.st_mode & 022)))
    complete = false;
  if (!complete) {
    l.state = found::stale;
    l.why = "no complete view of this key";
    l.fd = std::move(fd);
    return l;
  }
  struct stat now{};
  if (::fstatat(views, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_dev != st.st_dev ||
      now.st_ino != st.st_ino) {
    l.state = found::busy;
    l.why = "replaced while it was checked";
    return l;
  }
  l.state = found::usable;
  l.fd = std::move(fd);
  return l;
}

// A fresh t-<random> directory under `views`, held (LOCK_SH) and marked.
inline result<std::pair<std::string, unique_fd>> make_temp(int views, const std::string& views_path) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    unsigned char r[8];
    if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) return sys_fail(views_path, "getrandom");
    std::string name(kEtcViewTempPrefix);
    for (unsigned char c : r) {
      name += "0123456789abcdef"[c >> 4];
      name += "0123456789abcdef"[c & 0xf];
    }
    if (::mkdirat(views, name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return sys_fail(views_path + "/" + name, "mkdirat");
    }
    unique_fd fd(::openat(views, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return sys_fail(views_path + "/" + name, "open");
    // A sweeper holds LOCK_EX only for a moment here (no marker yet).
    while (::flock(fd.get(), LOCK_SH) != 0)
      if (errno != EINTR) return sys_fail(views_path + "/" + name, "flock(LOCK_SH)");
    unique_fd m(::openat(fd.get(), kLockedMarker, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!m) return sys_fail(views_path + "/" + name, "create the marker");
    return std::pair<std::string, unique_fd>{name, std::move(fd)};
  }
  return fail(views_path, "no free name for a new /etc view");
}

// Builds the view of `key` into the held directory `dir`.
inline result<void> build_into(int dir, int root, const etc_manifest& m, const std::string& key,
                               const std::string& where, std::int64_t racy_window_ns) {
  if (::mkdirat(dir, kEtcViewTree, 0700) != 0) return sys_fail(where, "mkdirat etc");
  unique_fd tree(::openat(dir, kEtcViewTree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!tree) return sys_fail(where, "open etc");
  auto built = walk(root, m, tree.get(), racy_window_ns).run();
  if (!built) return std::move(built).err();
  if (*built != key) return fail(where, "the host's /etc changed while its view was built");
  if (::fchmod(tree.get(), 0755) != 0) return sys_fail(where, "fchmod etc");
  unique_fd k(::openat(dir, kEtcViewKeyFile, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!k || !write_all(k.get(), key)) return sys_fail(where, "write the key");
  if (::fchmod(dir, 0711) != 0) return sys_fail(where, "fchmod");
  return ok();
}

} // namespace etc_view_detail

// The key of `m` (see the top): what acquire_etc_view computes on every
// launch and compares. With a run-dir base, the listing of a published view
// there stands for the directories it recorded unchanged (see walk).
inline result<etc_view_key> etc_view_key_of(const etc_manifest& m, const etc_view_options& o = {},
                                            const std::string& base = {}) {
  unique_fd root(::open(o.source_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return etc_view_detail::sys_fail(o.source_root, "open the source root");
  std::optional<etc_view_detail::listing_oracle> oracle;
  if (!base.empty())
    if (auto views = etc_view_detail::open_views(base, false); views) oracle = etc_view_detail::load_oracle(views->get());
  etc_view_detail::walk w(root.get(), m, -1, o.racy_window_ns, oracle ? &*oracle : nullptr);
  auto text = w.run();
  if (!text) return std::move(text).err();
  etc_view_key k;
  k.name = etc_view_detail::view_name(*text);
  k.text = std::move(*text);
  k.racy = w.racy();
  return k;
}

// Removes every view under `base` no live session holds (see the top).
inline std::vector<std::string> sweep_etc_views(const std::string& base) {
  using namespace etc_view_detail;
  std::vector<std::string> removed;
  auto views = open_views(base, false);
  if (!views) return removed;
  const std::string where = base + "/" + kEtcViewsDir;
  for (const auto& n : names_in(views->get())) {
    if (n.rfind(kEtcViewPrefix, 0) != 0 && n.rfind(kEtcViewTempPrefix, 0) != 0) continue;
    unique_fd fd(::openat(views->get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;
    struct stat st{};
    // Only directories of this euid that nobody else may write: anything
    // else here was not made by a launcher and is left alone.
    if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022)) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue; // a live session holds it
    struct stat ms{};
    if (::fstatat(fd.get(), kLockedMarker, &ms, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(ms.st_mode)) continue;
    if (remove_view(views->get(), n, fd.get())) removed.push_back(where + "/" + n);
  }
  return removed;
}

// The view of `m` under `base`, held (see the top).
inline result<etc_view> acquire_etc_view(const etc_manifest& m, const std::string& base,
                                         const etc_view_options& o = {}) {
  using namespace etc_view_detail;
  if (!m.view_blocker.empty()) return make_error(errc::unsupported, "etcView", m.view_blocker);
  unique_fd root(::open(o.source_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return sys_fail(o.source_root, "open the source root");
  auto views = open_views(base, true);
  if (!views) return std::move(views).err();
  const auto oracle = load_oracle(views->get());
  walk kw(root.get(), m, -1, o.racy_window_ns, oracle ? &*oracle : nullptr);
  auto key = kw.run();
  if (!key) return std::move(key).err();
  const std::string where = base + "/" + kEtcViewsDir;
  const std::string name = view_name(*key);
  etc_view v;
  v.name = name;
  auto finish = [&](std::string dir, unique_fd hold) -> result<etc_view> {
    v.path = where + "/" + dir + "/" + kEtcViewTree;
    v.hold = std::move(hold);
    if (o.sweep)
      for (const auto& gone : sweep_etc_views(base)) v.notes.push_back("removed an /etc view nobody holds: " + gone);
    return std::move(v);
  };
  // A view of a racy key is never published (see walk): bwrap's layout
  // costs this launch ~2 ms, a view built for it alone far more (inode
  // creation on a disk-backed base: the README's numbers).
  if (kw.racy())
    return make_error(errc::unsupported, where,
                      "the host's /etc changed within the last " + std::to_string(o.racy_window_ns / 1000000) +
                          " ms; its view is built by the first launch after that");
  for (int attempt = 0; attempt < 3; ++attempt) {
    lookup l = look_up(views->get(), name, *key);
    if (l.state == found::usable) {
      v.published = true;
      return finish(name, std::move(l.fd));
    }
    if (l.state == found::stale) {
      // Ours, but no complete view of this key: removed when no one holds
      // it (another key's view under the same name, in use, is left alone).
      if (::flock(l.fd.get(), LOCK_EX | LOCK_NB) == 0 && remove_view(views->get(), name, l.fd.get())) {
        v.notes.push_back("removed an incomplete /etc view: " + where + "/" + name);
        continue;
      }
      return make_error(errc::unsupported, where + "/" + name, "is a view of another key that a session holds");
    }
    if (l.state == found::foreign)
      return make_error(errc::unenforceable, where + "/" + name,
                        "the /etc view's name is taken by " + l.why + ", which is neither followed, used nor removed");
    // Absent, or being removed by another launcher's sweep: build, publish.
    auto temp = make_temp(views->get(), where);
    if (!temp) return std::move(temp).err();
    auto& [tname, tfd] = *temp;
    if (auto b = build_into(tfd.get(), root.get(), m, *key, where + "/" + tname, o.racy_window_ns); !b) {
      if (::flock(tfd.get(), LOCK_EX | LOCK_NB) == 0) remove_view(views->get(), tname, tfd.get());
      return std::move(b).err();
    }
    v.built = true;
    for (int publish = 0; publish < 2; ++publish) {
      if (::renameat2(views->get(), tname.c_str(), views->get(), name.c_str(), RENAME_NOREPLACE) == 0) {
        v.published = true;
        return finish(name, std::move(tfd));
      }
      if (errno != EEXIST && errno != ENOTEMPTY) return sys_fail(where + "/" + name, "renameat2(RENAME_NOREPLACE)");
      // Another launcher published first: use its view, drop ours.
      lookup w = look_up(views->get(), name, *key);
      if (w.state == found::usable) {
        if (::flock(tfd.get(), LOCK_EX | LOCK_NB) == 0) remove_view(views->get(), tname, tfd.get());
        v.built = false;
        v.published = true;
        return finish(name, std::move(w.fd));
      }
      if (w.state == found::absent) continue; // a sweep removed what was there: publish again
      // What is there cannot be used (being swept, another key's): ours is
      // built, so this session uses it unpublished; the next sweep removes it.
      v.notes.push_back("the /etc view's name " + where + "/" + name + " is taken (" + w.why +
                        "); this session uses its own copy, unpublished");
      return finish(tname, std::move(tfd));
    }
    v.notes.push_back("the /etc view's name " + where + "/" + name +
                      " kept changing; this session uses its own copy, unpublished");
    return finish(tname, std::move(tfd));
  }
  return fail(where + "/" + name, "the /etc view kept changing under concurrent launchers");
}

// The session's view (bwrap_driver.hpp): nothing when CCSB_ETC_VIEW=off.
inline result<etc_view> etc_view_for_session(const policy& pol, const std::function<path_kind(const std::string&)>& kind,
                                             const std::string& base) {
  if (const char* e = std::getenv("CCSB_ETC_VIEW"); e && std::string_view(e) == "off")
    return make_error(errc::unsupported, "CCSB_ETC_VIEW", "off in the launcher's environment");
  return acquire_etc_view(minimal_etc(pol, kind), base);
}

} // namespace ccsb::launch
