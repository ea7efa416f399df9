// ccsb/launch/etc_view.hpp — the /etc view (L1, L8; issue 9): the minimal
// /etc as one immutable host directory, built by the launcher, cached
// across launches and bound read-only at /etc in one operation (launcher
// only, Linux; does I/O).
//
//   acquire_etc_view(manifest, base, options) -> result<etc_view>
//   sweep_etc_views(base) -> the views removed
//   etc_view_key_of(manifest, options) -> the key (what acquire computes on
//     every launch and compares; tests and the benchmark measure it)
// The walk that records the key and copies a view is
// ccsb/launch/etc_view_walk.hpp (etc_view_detail::walk).
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
// A view is what /etc held when it was built: a running session does not
// see a file the host later adds to or rewrites in a listed directory (a
// directory bind did); the next session's key sees the change. Timestamps
// (atime, mtime) are kept. Everything of a view is the
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
// one by one (etc_view_key_of; docs/benchmarks.md gives the microseconds). A key
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
// layout (creating ~830 inodes: ~7 ms on tmpfs, 55-280 ms on this VM's ext4
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
#include "ccsb/launch/etc_view_walk.hpp"
#include "ccsb/launch/linux/openat2.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/result.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

// The view's name: v- and a 64-bit hash of the key's text (a locator only:
// the key file must match the text byte for byte).
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
  while (got < text.size() &&
         ((n = ::read(k.get(), text.data() + got, text.size() - got)) > 0 || (n < 0 && errno == EINTR)))
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

// A view directory this session holds: its name under the views directory
// and the descriptor whose lock holds it.
struct held_view {
  std::string dir;
  unique_fd fd;
};

// Publishes the built view `tname` as `name` (RENAME_NOREPLACE). When another
// launcher published first, its usable view wins and ours is dropped; when
// the name stays unusable, this session keeps its own copy unpublished.
inline result<held_view> publish_built(int views, std::string tname, unique_fd tfd, const std::string& name,
                                       const std::string& key, const std::string& where, etc_view& v) {
  for (int publish = 0; publish < 2; ++publish) {
    if (::renameat2(views, tname.c_str(), views, name.c_str(), RENAME_NOREPLACE) == 0) {
      v.published = true;
      return held_view{name, std::move(tfd)};
    }
    if (errno != EEXIST && errno != ENOTEMPTY) return sys_fail(where + "/" + name, "renameat2(RENAME_NOREPLACE)");
    // Another launcher published first: use its view, drop ours.
    lookup w = look_up(views, name, key);
    if (w.state == found::usable) {
      if (::flock(tfd.get(), LOCK_EX | LOCK_NB) == 0) remove_view(views, tname, tfd.get());
      v.built = false;
      v.published = true;
      return held_view{name, std::move(w.fd)};
    }
    if (w.state == found::absent) continue; // a sweep removed what was there: publish again
    // What is there cannot be used (being swept, another key's): ours is
    // built, so this session uses it unpublished; the next sweep removes it.
    v.notes.push_back("the /etc view's name " + where + "/" + name + " is taken (" + w.why +
                      "); this session uses its own copy, unpublished");
    return held_view{std::move(tname), std::move(tfd)};
  }
  v.notes.push_back("the /etc view's name " + where + "/" + name +
                    " kept changing; this session uses its own copy, unpublished");
  return held_view{std::move(tname), std::move(tfd)};
}

// Builds the view of `key` in a fresh temporary directory, then publishes it.
inline result<held_view> build_and_publish(int views, int root, const etc_manifest& m, const std::string& key,
                                           const std::string& name, const std::string& where,
                                           std::int64_t racy_window_ns, etc_view& v) {
  auto temp = make_temp(views, where);
  if (!temp) return std::move(temp).err();
  auto& [tname, tfd] = *temp;
  if (auto b = build_into(tfd.get(), root, m, key, where + "/" + tname, racy_window_ns); !b) {
    if (::flock(tfd.get(), LOCK_EX | LOCK_NB) == 0) remove_view(views, tname, tfd.get());
    return std::move(b).err();
  }
  v.built = true;
  return publish_built(views, std::move(tname), std::move(tfd), name, key, where, v);
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
  // creation on a disk-backed base: docs/benchmarks.md's numbers).
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
    auto held = build_and_publish(views->get(), root.get(), m, *key, name, where, o.racy_window_ns, v);
    if (!held) return std::move(held).err();
    return finish(std::move(held->dir), std::move(held->fd));
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
