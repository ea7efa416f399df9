// The /etc view (L1, L8; issue 9): ccsb/launch/etc_view.hpp against a fake
// source tree on the real file system (its root injected; the launcher reads
// /), in a private run-dir base of the test's own. What a view holds, that
// every change of a source makes a new key and a view with the new content
// while an unchanged tree reuses the view, that nothing planted at the
// view's places is followed or used, and that a held view is never swept.
// The end-to-end tests with bwrap are tests/escape/test_etc_view.cpp.
// No timing assertions; tests that cannot run fail.
#include "ccsb/launch/etc_view.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ccsb;
using namespace ccsb::launch;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct stat lstat_of(const std::string& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) st.st_mode = 0;
  return st;
}

bool exists(const std::string& p) { return lstat_of(p).st_mode != 0; }

std::string link_of(const std::string& p) {
  std::error_code ec;
  auto t = fs::read_symlink(p, ec);
  return ec ? std::string("<none>") : t.string();
}

// A fake host: <dir>/src is the source root (its etc/ and usr/), <dir>/base
// a private run-dir base.
struct fake_tree {
  ccsb_test::temp_dir tmp{"ccsb-etcview-test", "/tmp", 0755}; // removed with its mode-0000 masks
  std::string dir, root, base;
  explicit fake_tree(uid_t owner = ::geteuid()) {
    dir = tmp.path();
    root = dir + "/src";
    base = dir + "/base";
    fs::create_directories(root + "/etc");
    REQUIRE(::mkdir(base.c_str(), 0700) == 0);
    if (owner != ::geteuid()) REQUIRE(::chown(base.c_str(), owner, owner) == 0);
    // The listed entries, as Debian has them (each kind once).
    file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
    file("etc/group", "root:x:0:\n");
    file("etc/ssl/openssl.cnf", "[ default ]\n");
    file("etc/ssl/certs/a.pem", "CERT-A\n");
    link("etc/ssl/certs/b.pem", "a.pem");
    file("etc/ssl/private/host.key", "SECRET-KEY\n", 0600);
    ::chmod(at("etc/ssl/private").c_str(), 0710);
    file("etc/ssl/tool", "#!/bin/sh\n", 04755);
    REQUIRE(::mkfifo(at("etc/ssl/fifo").c_str(), 0644) == 0);
    link("etc/alternatives/editor", "/usr/bin/vim.basic");
    file("usr/share/zoneinfo/UTC", "TZif-UTC\n");
    file("usr/share/zoneinfo/CET", "TZif-CET!\n");
    link("etc/localtime", "/usr/share/zoneinfo/UTC"); // absolute: resolved inside the root
    file("usr/lib/os-release", "ID=fake\n");
    link("etc/os-release", "../usr/lib/os-release");
    file("usr/share/terminfo/x/xterm", "xterm-entry\n");
    link("etc/terminfo", "../usr/share/terminfo"); // a listed symlink to a directory
    link("etc/debian_version", "../nonexistent");   // dangling: left out
    file("etc/ssh/ssh_config", "Host *\n");
    file("etc/shadow", "root:HASH:::::::\n", 0600); // never listed
  }

  std::string at(const std::string& rel) const { return root + "/" + rel; }
  void file(const std::string& rel, const std::string& content, mode_t mode = 0644) {
    fs::create_directories(fs::path(at(rel)).parent_path());
    std::ofstream(at(rel), std::ios::trunc | std::ios::binary) << content;
    REQUIRE(::chmod(at(rel).c_str(), mode) == 0);
  }
  void link(const std::string& rel, const std::string& to) {
    fs::create_directories(fs::path(at(rel)).parent_path());
    REQUIRE(::symlink(to.c_str(), at(rel).c_str()) == 0);
  }
  // A symlink replaced by a new one (a rename over it: a new inode).
  void relink(const std::string& rel, const std::string& to) {
    REQUIRE(::symlink(to.c_str(), (at(rel) + ".new").c_str()) == 0);
    REQUIRE(::rename((at(rel) + ".new").c_str(), at(rel).c_str()) == 0);
  }
  // File systems stamp times at the clock's tick, so a change right after
  // a walk may keep the times it saw; a published view's record is never
  // that recent (etc_view_options::racy_window_ns). These tests publish at
  // once (window 0), so a change also moves the mtime of what it changed
  // (or of its directory) a second away from any recorded one (back: a time
  // in the future would be "racy").
  void later(const std::string& rel) const {
    struct stat st = lstat_of(at(rel));
    REQUIRE(st.st_mode != 0);
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    t[1].tv_sec -= 1;
    REQUIRE(::utimensat(AT_FDCWD, at(rel).c_str(), t, AT_SYMLINK_NOFOLLOW) == 0);
  }

  // What lstat says below the source root (the renderer's facts there).
  std::function<path_kind(const std::string&)> kind() const {
    return [r = root](const std::string& p) { return lstat_kind(r + p); };
  }
  etc_manifest manifest() const {
    policy pol;
    pol.network.kind = network_kind::proxied;
    return minimal_etc(pol, kind());
  }
  etc_view_options options() const {
    etc_view_options o;
    o.source_root = root;
    o.racy_window_ns = 0;
    return o;
  }
  std::string views() const { return base + "/" + kEtcViewsDir; }
};

result<etc_view> acquire(const fake_tree& t, bool sweep = true) {
  auto o = t.options();
  o.sweep = sweep;
  return acquire_etc_view(t.manifest(), t.base, o);
}

etc_view acquire_ok(const fake_tree& t, bool sweep = true) {
  auto v = acquire(t, sweep);
  if (!v) FAIL(v.err().what());
  return std::move(*v);
}

std::string key_name(const fake_tree& t) {
  auto k = etc_view_key_of(t.manifest(), t.options());
  if (!k) FAIL(k.err().what());
  return k->name;
}

bool mentions(const std::vector<std::string>& notes, const std::string& what) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(what) != std::string::npos; });
}

// Runs `fn` in a child as uid/gid 65534 without supplementary groups (an
// unprivileged launcher); its exit code (0: every check held).
int as_nobody(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(100);
    ::_exit(fn());
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Checks what a view of fake_tree holds; "" or what is wrong.
std::string check_content(const std::string& v, bool as_root) {
  std::ostringstream bad;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) bad << what << "; ";
  };
  auto mode = [](const std::string& p) { return lstat_of(p).st_mode & 07777; };
  expect(slurp(v + "/passwd") == "root:x:0:0:root:/root:/bin/sh\n", "passwd content");
  expect(S_ISREG(lstat_of(v + "/passwd").st_mode) && mode(v + "/passwd") == 0444, "passwd is a 0444 copy");
  expect(S_ISDIR(lstat_of(v + "/ssl").st_mode) && mode(v + "/ssl") == 0755, "ssl directory 0755");
  expect(slurp(v + "/ssl/certs/a.pem") == "CERT-A\n" && mode(v + "/ssl/certs/a.pem") == 0644, "a.pem copy");
  expect(link_of(v + "/ssl/certs/b.pem") == "a.pem", "b.pem symlink text");
  expect(S_ISDIR(lstat_of(v + "/ssl/private").st_mode) && mode(v + "/ssl/private") == 0, "private: a 0000 mask");
  expect(!exists(v + "/ssl/private/host.key"), "nothing of the secret");
  expect(mode(v + "/ssl/tool") == 0755, "setuid bit dropped");
  expect(!exists(v + "/ssl/fifo"), "FIFO left out");
  expect(link_of(v + "/alternatives/editor") == "/usr/bin/vim.basic", "alternatives symlink text");
  expect(S_ISREG(lstat_of(v + "/localtime").st_mode) && slurp(v + "/localtime") == "TZif-UTC\n" &&
             mode(v + "/localtime") == 0644,
         "localtime followed (inside the root) and copied with its mode");
  expect(slurp(v + "/os-release") == "ID=fake\n", "os-release followed");
  expect(slurp(v + "/terminfo/x/xterm") == "xterm-entry\n", "terminfo followed to a directory");
  expect(!exists(v + "/debian_version"), "a dangling listed symlink left out");
  expect(mode(v + "/ssh") == 0755 && mode(v + "/ssh/ssh_config") == 0444 && slurp(v + "/ssh/ssh_config") == "Host *\n",
         "ssh/ssh_config below a created 0755 directory");
  expect(!exists(v + "/shadow"), "shadow not listed");
  expect(mode(v) == 0755, "the view's root 0755");
  if (as_root) expect(lstat_of(v + "/ssl/certs/a.pem").st_uid == 1234 && lstat_of(v + "/ssl/certs/a.pem").st_gid == 5678,
                      "as root a copy keeps its source's owner");
  return bad.str();
}

} // namespace

TEST_CASE("L1: the /etc view holds what bwrap's /etc shows: 0444 copies, trees, followed symlinks, masks",
          "[L1][L8][P4]") {
  fake_tree t;
  REQUIRE(::geteuid() == 0); // the suite runs as root; the unprivileged case below drops to 65534
  REQUIRE(::chown(t.at("etc/ssl/certs/a.pem").c_str(), 1234, 5678) == 0);
  const etc_manifest m = t.manifest();
  CHECK(m.masks == std::vector<etc_mask>{{"/etc/ssl/private", true}});
  auto v = acquire_ok(t);
  CHECK(v.built);
  CHECK(v.published);
  CHECK(v.path == t.views() + "/" + v.name + "/etc");
  CHECK(check_content(v.path, true) == "");
  CHECK((lstat_of(t.views()).st_mode & 07777) == 0711);
  CHECK((lstat_of(t.views() + "/" + v.name).st_mode & 07777) == 0711);
  // Held: a sweep cannot take it.
  {
    unique_fd other(::open((t.views() + "/" + v.name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(other);
    CHECK(::flock(other.get(), LOCK_EX | LOCK_NB) != 0);
    CHECK(::flock(other.get(), LOCK_SH | LOCK_NB) == 0);
  }
  // A root launcher does not put a listed file others may not read into a
  // view every uid can reach.
  ::chmod(t.at("etc/group").c_str(), 0640);
  auto refused = acquire(t);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().field == "/etc/group");
  CHECK_THAT(refused.err().message, Catch::Contains("others may not read it"));
}

TEST_CASE("L1: an unprivileged launcher's /etc view holds the same, and its sweep removes its own masks",
          "[L1][L8][P4]") {
  fake_tree t(65534);
  fs::permissions(t.dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec |
                             fs::perms::others_read | fs::perms::group_read);
  CHECK(as_nobody([&] {
          auto v = acquire(t);
          if (!v || !v->built || !v->published) return 1;
          if (!check_content(v->path, false).empty()) return 2;
          if (lstat_of(v->path + "/passwd").st_uid != 65534) return 3;
          return 0;
        }) == 0);
  // The source changes; the next unprivileged launch builds anew and sweeps
  // the old view, its mode-0000 mask included.
  t.file("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
  CHECK(as_nobody([&] {
          auto v = acquire(t);
          if (!v || !v->built) return 1;
          if (slurp(v->path + "/passwd") != "root:x:0:0:root:/root:/bin/bash\n") return 2;
          if (!mentions(v->notes, "removed an /etc view nobody holds")) return 3;
          unique_fd views(::open(t.views().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
          // The views directory as the sweep's own listing step reads it.
          auto names = etc_view_detail::names_in(views.get());
          return names.size() == 1 && names[0] == v->name ? 0 : 4;
        }) == 0);
  // The source the launcher cannot read: no view (bwrap's layout).
  ::chmod(t.at("etc/ssl/certs/a.pem").c_str(), 0600);
  t.later("etc/ssl/certs/a.pem");
  CHECK(as_nobody([&] {
          auto v = acquire(t);
          return !v && v.err().field == "/etc/ssl/certs/a.pem" ? 0 : 1;
        }) == 0);
}

TEST_CASE("L1 L8: each change of a source makes a new key and view, an unchanged tree reuses the view unbuilt",
          "[L1][L8]") {
  fake_tree t;
  auto first = acquire_ok(t);
  REQUIRE(first.built);
  const std::string name0 = first.name;
  first.hold.reset();
  // Unchanged: the same view, not rebuilt.
  {
    const ino_t ino = lstat_of(t.views() + "/" + name0).st_ino;
    auto again = acquire_ok(t);
    CHECK_FALSE(again.built);
    CHECK(again.published);
    CHECK(again.name == name0);
    CHECK(lstat_of(t.views() + "/" + name0).st_ino == ino);
  }
  struct change {
    std::string what;
    std::function<void()> apply;
    std::function<bool(const std::string&)> seen; // in the new view
  };
  const std::vector<change> changes = {
      {"a file's content (same size)",
       [&] {
         t.file("etc/ssl/certs/a.pem", "CERT-Z\n");
         t.later("etc/ssl/certs/a.pem");
       },
       [](const std::string& v) { return slurp(v + "/ssl/certs/a.pem") == "CERT-Z\n"; }},
      {"a listed file's content",
       [&] { t.file("etc/passwd", "root:x:0:0::/:/bin/false\n"); },
       [](const std::string& v) { return slurp(v + "/passwd") == "root:x:0:0::/:/bin/false\n"; }},
      {"a chmod", [&] { ::chmod(t.at("etc/ssl/openssl.cnf").c_str(), 0600); },
       [](const std::string& v) { return (lstat_of(v + "/ssl/openssl.cnf").st_mode & 07777) == 0600; }},
      {"a symlink replaced",
       [&] {
         t.relink("etc/ssl/certs/b.pem", "c.pem");
         t.later("etc/ssl/certs");
       },
       [](const std::string& v) { return link_of(v + "/ssl/certs/b.pem") == "c.pem"; }},
      {"an entry added",
       [&] {
         t.file("etc/ssl/certs/new.pem", "NEW\n");
         t.later("etc/ssl/certs");
       },
       [](const std::string& v) { return slurp(v + "/ssl/certs/new.pem") == "NEW\n"; }},
      {"an entry removed",
       [&] {
         fs::remove(t.at("etc/ssl/openssl.cnf"));
         t.later("etc/ssl");
       },
       [](const std::string& v) { return !exists(v + "/ssl/openssl.cnf"); }},
      {"a listed symlink pointed elsewhere", [&] { t.relink("etc/localtime", "/usr/share/zoneinfo/CET"); },
       [](const std::string& v) { return slurp(v + "/localtime") == "TZif-CET!\n"; }},
      {"a listed symlink's target written (same size)",
       [&] {
         t.file("usr/share/zoneinfo/CET", "TZif-CET2\n");
         t.later("usr/share/zoneinfo/CET");
       },
       [](const std::string& v) { return slurp(v + "/localtime") == "TZif-CET2\n"; }},
      {"a listed entry appears", [&] { t.file("etc/gitconfig", "[core]\n"); },
       [](const std::string& v) { return slurp(v + "/gitconfig") == "[core]\n"; }},
  };
  std::vector<std::string> names{name0};
  for (const auto& c : changes) {
    INFO(c.what);
    c.apply();
    const std::string want = key_name(t);
    CHECK(std::find(names.begin(), names.end(), want) == names.end()); // a new key
    auto v = acquire_ok(t);
    CHECK(v.built);
    CHECK(v.name == want);
    CHECK(c.seen(v.path));
    CHECK(mentions(v.notes, "removed an /etc view nobody holds")); // the previous one
    names.push_back(v.name);
    v.hold.reset();
    auto again = acquire_ok(t);
    CHECK_FALSE(again.built);
    CHECK(again.name == want);
  }
}

TEST_CASE("L8: a tree that changed moments ago gets no view (bwrap's layout), nothing is built", "[L8][L1]") {
  fake_tree t;
  auto o = t.options();
  o.racy_window_ns = kEtcViewRacyWindowNs; // the launcher's: the fresh tree is "racy"
  auto k = etc_view_key_of(t.manifest(), o);
  REQUIRE(k);
  CHECK(k->racy);
  auto v = acquire_etc_view(t.manifest(), t.base, o);
  REQUIRE_FALSE(v);
  CHECK(v.err().field == t.views());
  CHECK_THAT(v.err().message, Catch::Contains("changed within the last 2000 ms"));
  CHECK(fs::is_empty(t.views()));
  // The same tree once it has been still long enough (a zero window here).
  auto later = acquire_ok(t);
  CHECK(later.published);
  CHECK(later.name == k->name);
}

TEST_CASE("L8: a symlink, a file, another uid's or a world-writable directory at etc-views is never followed or used",
          "[L8]") {
  for (const char* what : {"symlink", "file", "other uid", "writable by others"}) {
    DYNAMIC_SECTION(what) {
      fake_tree t;
      const std::string decoy = t.dir + "/decoy";
      REQUIRE(::mkdir(decoy.c_str(), 0755) == 0);
      const std::string views = t.views();
      if (std::string(what) == "symlink") REQUIRE(::symlink(decoy.c_str(), views.c_str()) == 0);
      if (std::string(what) == "file") std::ofstream(views) << "x";
      if (std::string(what) == "other uid") {
        REQUIRE(::mkdir(views.c_str(), 0711) == 0);
        REQUIRE(::chown(views.c_str(), 65534, 65534) == 0);
      }
      if (std::string(what) == "writable by others") {
        REQUIRE(::mkdir(views.c_str(), 0700) == 0);
        REQUIRE(::chmod(views.c_str(), 0777) == 0);
      }
      auto v = acquire(t);
      REQUIRE_FALSE(v);
      CHECK_THAT(v.err().what(), Catch::Contains(views));
      CHECK(sweep_etc_views(t.base).empty());
      CHECK(fs::is_empty(decoy)); // nothing created through the link
      if (std::string(what) != "symlink" && std::string(what) != "file") CHECK(fs::is_empty(views));
    }
  }
}

TEST_CASE("L8: something planted at the view's name is never followed, used or removed: bwrap's layout", "[L8]") {
  for (const char* what : {"symlink", "file", "other uid", "writable by others"}) {
    DYNAMIC_SECTION(what) {
      fake_tree t;
      const std::string name = key_name(t);
      auto key = etc_view_key_of(t.manifest(), t.options());
      REQUIRE(key);
      REQUIRE(::mkdir(t.views().c_str(), 0711) == 0);
      // A decoy that looks like a complete view of this very key.
      const std::string decoy = t.dir + "/decoy";
      auto fake_view = [&](const std::string& d) {
        REQUIRE(::mkdir(d.c_str(), 0711) == 0);
        REQUIRE(::mkdir((d + "/etc").c_str(), 0755) == 0);
        std::ofstream(d + "/etc/passwd") << "EVIL\n";
        std::ofstream(d + "/key") << key->text;
        ::chmod((d + "/key").c_str(), 0600);
        std::ofstream(d + "/locked");
      };
      const std::string at = t.views() + "/" + name;
      if (std::string(what) == "symlink") {
        fake_view(decoy);
        REQUIRE(::symlink(decoy.c_str(), at.c_str()) == 0);
      }
      if (std::string(what) == "file") std::ofstream(at) << key->text;
      if (std::string(what) == "other uid") {
        fake_view(at);
        for (const auto& p : {at, at + "/etc", at + "/etc/passwd", at + "/key", at + "/locked"})
          REQUIRE(::lchown(p.c_str(), 65534, 65534) == 0);
      }
      if (std::string(what) == "writable by others") {
        fake_view(at);
        REQUIRE(::chmod(at.c_str(), 0777) == 0);
      }
      auto v = acquire(t);
      REQUIRE_FALSE(v);
      CHECK(v.err().field == at);
      CHECK_THAT(v.err().message, Catch::Contains("neither followed, used nor removed"));
      // Nothing built, nothing swept, the planted entry untouched (the sweep's own listing step).
      auto views = etc_view_detail::open_views(t.base, false);
      REQUIRE(views);
      CHECK(etc_view_detail::names_in(views->get()) == std::vector<std::string>{name});
      CHECK(sweep_etc_views(t.base).empty());
      CHECK(exists(at));
      if (std::string(what) == "symlink") CHECK(slurp(decoy + "/etc/passwd") == "EVIL\n");
      else if (std::string(what) != "file") CHECK(slurp(at + "/etc/passwd") == "EVIL\n");
    }
  }
}

TEST_CASE("L8: a directory of ours at the view's name that is no complete view of its key is replaced, unless held",
          "[L8]") {
  fake_tree t;
  const std::string name = key_name(t);
  const std::string at = t.views() + "/" + name;
  REQUIRE(::mkdir(t.views().c_str(), 0711) == 0);
  REQUIRE(::mkdir(at.c_str(), 0711) == 0);
  std::ofstream(at + "/locked");
  std::ofstream(at + "/key") << "ccsb etc view v0: another key\n"; // a sweep cut short, or another key's
  ::chmod((at + "/key").c_str(), 0600);
  {
    // Held by a session: left alone; this launch gets a private view.
    unique_fd held(::open(at.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(::flock(held.get(), LOCK_SH) == 0);
    auto v = acquire(t, false);
    REQUIRE_FALSE(v);
    CHECK_THAT(v.err().message, Catch::Contains("another key that a session holds"));
    CHECK(slurp(at + "/key") == "ccsb etc view v0: another key\n");
  }
  auto v = acquire_ok(t);
  CHECK(v.published);
  CHECK(v.name == name);
  CHECK(mentions(v.notes, "removed an incomplete /etc view"));
  CHECK(check_content(v.path, false) == "");
}

TEST_CASE("L8: a held view is never swept, an unheld one of another key is", "[L8][L1]") {
  fake_tree t;
  auto held = acquire_ok(t);
  const std::string old_path = held.path;
  t.file("etc/passwd", "changed\n");
  auto next = acquire_ok(t); // sweeps
  CHECK(next.name != held.name);
  CHECK_FALSE(mentions(next.notes, "removed"));
  CHECK(check_content(old_path, false) == ""); // intact while held
  held.hold.reset();
  next.hold.reset();
  auto again = acquire_ok(t);
  CHECK_FALSE(again.built);
  CHECK(mentions(again.notes, "removed an /etc view nobody holds: " + t.views() + "/" + held.name));
  CHECK_FALSE(exists(old_path));
}

TEST_CASE("L8: the half-built view of a SIGKILLed launcher is swept, a fresh or a held one is not", "[L8][S4]") {
  fake_tree t;
  // A launcher's build steps themselves, so that one can be killed between them.
  auto views = etc_view_detail::open_views(t.base, true);
  REQUIRE(views);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto temp = etc_view_detail::make_temp(views->get(), t.views());
    if (!temp) ::_exit(1);
    ::mkdirat(temp->second.get(), "etc", 0700);
    ::mkdirat(temp->second.get(), "etc/ssl", 0);
    ::raise(SIGKILL); // mid-build
    ::_exit(2);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFSIGNALED(st));
  auto names = etc_view_detail::names_in(views->get());
  REQUIRE(names.size() == 1);
  const std::string killed = t.views() + "/" + names[0];
  CHECK(exists(killed + "/etc/ssl"));
  // A fresh one (made, its lock not yet taken: no marker) and a held one.
  const std::string fresh = t.views() + "/t-fresh";
  REQUIRE(::mkdir(fresh.c_str(), 0700) == 0);
  auto live = etc_view_detail::make_temp(views->get(), t.views());
  REQUIRE(live);
  CHECK(sweep_etc_views(t.base) == std::vector<std::string>{killed});
  CHECK_FALSE(exists(killed));
  CHECK(exists(fresh));
  CHECK(exists(t.views() + "/" + live->first));
}

TEST_CASE("L8: sessions started while other launchers sweep keep their /etc view whole", "[L8][L1]") {
  fake_tree t;
  const std::string expect = slurp(t.at("etc/passwd"));
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The "sessions": acquire (each launch sweeps too), check the view
    // while holding it across the parent's sweeps, let go, again.
    for (int i = 0; i < 150; ++i) {
      auto v = acquire(t);
      if (!v) ::_exit(1);
      for (int k = 0; k < 5; ++k) {
        if (slurp(v->path + "/passwd") != expect) ::_exit(2);
        if (slurp(v->path + "/ssl/certs/a.pem") != "CERT-A\n") ::_exit(3);
        ::usleep(200);
      }
    }
    ::_exit(0);
  }
  int st = 0;
  int sweeps = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    (void)sweep_etc_views(t.base);
    ++sweeps;
  }
  INFO("parent sweeps: " << sweeps);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("L1: the key's text parses back line by line, and the listing oracle gives the same key as readdir",
          "[L1][L8]") {
  fake_tree t;
  auto v = acquire_ok(t);
  auto plain = etc_view_key_of(t.manifest(), t.options());
  auto with_oracle = etc_view_key_of(t.manifest(), t.options(), t.base);
  REQUIRE(plain);
  REQUIRE(with_oracle);
  CHECK(plain->text == with_oracle->text);
  CHECK(plain->name == v.name);
  // The key's record format itself.
  auto lines = etc_view_detail::parse_record(plain->text);
  REQUIRE(lines);
  std::string joined;
  for (const auto& l : *lines) joined += l.whole;
  CHECK(joined == plain->text);
  CHECK(lines->front().tag == 'H');
  // A changed tree is read where it changed, though the oracle is older.
  t.file("etc/ssl/certs/new.pem", "NEW\n");
  t.later("etc/ssl/certs");
  auto after = etc_view_key_of(t.manifest(), t.options(), t.base);
  auto after_plain = etc_view_key_of(t.manifest(), t.options());
  REQUIRE(after);
  REQUIRE(after_plain);
  CHECK(after->text == after_plain->text);
  CHECK(after->text.find("/etc/ssl/certs/new.pem") != std::string::npos);
}

TEST_CASE("L1: the /etc view's bounds fail into bwrap's layout", "[L1][L8]") {
  fake_tree t;
  for (int i = 0; i < static_cast<int>(kEtcViewMaxEntries) + 1; ++i)
    REQUIRE(::symlink("x", (t.at("etc/alternatives/") + "l" + std::to_string(i)).c_str()) == 0);
  auto v = acquire(t);
  REQUIRE_FALSE(v);
  CHECK_THAT(v.err().message, Catch::Contains("more than " + std::to_string(kEtcViewMaxEntries) + " entries"));
  CHECK(sweep_etc_views(t.base).empty());
}
