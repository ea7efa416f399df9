// Escape tests, the /etc view (issue 9; L1, L8): the launcher binds a cached
// host directory at /etc instead of having bwrap build it. Against the real
// ccsb-run + bwrap, with a root launcher (the sandbox as uid 65534) and an
// unprivileged one (uid 65534 through setpriv): /etc inside is the same as
// with bwrap's own layout (CCSB_ETC_VIEW=off), read-only, the run-dir base
// out of reach, nothing planted at the view's places is followed or used,
// and a sweep while a session runs leaves its /etc whole.
#include "escape_support.hpp"

#include "ccsb/etc_manifest.hpp"
#include "ccsb/launch/etc_view.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/run_dir.hpp"

#include <grp.h>

using namespace escape;

namespace {

// The sandbox's /etc, one line per entry (type, mode, path, symlink target),
// the digest of every file it can read, whether /etc/ssl/private is readable,
// and the mount at /etc (its root in the host's file system, its type).
const std::string kListEtc =
    "cd /etc || exit 3\n"
    "find . -printf 'L %y %m %p %l\\n' | LC_ALL=C sort\n"
    "find . -type f -readable -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sed 's/^/D /'\n"
    "ls /etc/ssl/private >/dev/null 2>&1; echo @@private_ls=$?\n"
    "cat /etc/ssl/private/* >/dev/null 2>&1; echo @@private_cat=$?\n"
    "awk '$5 == \"/etc\" { print \"@@etc_root=\" $4; for (i = 7; $i != \"-\"; i++) ; print \"@@etc_fs=\" $(i + 1) }' "
    "/proc/self/mountinfo\n";

std::string lines_with(const std::string& out, const std::string& prefix) {
  std::string r;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind(prefix, 0) == 0) r += line + "\n";
  return r;
}

proc_result run_etc(const sandbox_fixture& fx, launcher who, const std::string& body, bool view,
                    std::vector<std::string> env_extra = {}, const std::vector<std::string>& args = {}) {
  auto o = launch_options(fx, who, "spec", fx.events, args, body);
  if (!view) o.env.push_back("CCSB_ETC_VIEW=off");
  for (auto& e : env_extra) o.env.push_back(std::move(e));
  return run(o);
}

const char* kFallbackLine = "the minimal /etc is built by bwrap, not bound from a view: ";

// The key an unprivileged launcher (uid 65534) computes for the spec
// profile's /etc (it holds the euid): its name, then its text.
std::pair<std::string, std::string> view_key_as_nobody() {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(p[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(1);
    ccsb::policy pol;
    pol.network.kind = ccsb::network_kind::proxied;
    auto k = ccsb::launch::etc_view_key_of(ccsb::minimal_etc(pol, ccsb::launch::lstat_kind));
    if (!k) ::_exit(2);
    const std::string out = k->name + "\n" + k->text;
    std::size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::write(p[1], out.data() + off, out.size() - off);
      if (n <= 0) ::_exit(3);
      off += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  const auto nl = out.find('\n');
  REQUIRE(nl != std::string::npos);
  return {out.substr(0, nl), out.substr(nl + 1)};
}

// An unprivileged launcher's private run-dir base: $XDG_RUNTIME_DIR/ccsb
// below the fixture, the uid's own.
std::string private_base(const sandbox_fixture& fx) {
  const std::string xdg = fx.base + "/xdg";
  make_dirs(xdg + "/ccsb", 0700);
  ::chmod(xdg.c_str(), 0700);
  return xdg;
}

} // namespace

TEST_CASE("L1: /etc from the view is bwrap's: names, types, modes, symlink targets, contents, the mask",
          "[L1][L8][P4][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto with = run_etc(fx, who, kListEtc, true);
      auto without = run_etc(fx, who, kListEtc, false);
      ESCAPE_REQUIRE_RAN(with);
      ESCAPE_REQUIRE_RAN(without);
      INFO(with.err << "\n" << without.err);
      // Each run had the layout it asked for.
      CHECK_THAT(with.get("etc_root"), Catch::Contains("/etc-views/v-"));
      CHECK_THAT(with.err, !Catch::Contains(kFallbackLine));
      CHECK(without.get("etc_fs") == "tmpfs");
      CHECK_THAT(without.err, Catch::Contains(std::string(kFallbackLine) + "CCSB_ETC_VIEW"));
      // bwrap is spawned for the view's layout, before the plan exists: the
      // plan without a view copies /etc files in, so a second bwrap holds them.
      CHECK_THAT(with.err, !Catch::Contains("bwrap is started again"));
      CHECK_THAT(without.err, Catch::Contains("bwrap is started again"));
      const std::string listing = lines_with(with.out, "L ");
      CHECK(listing.size() > 1000); // the whole minimal /etc, not an empty directory
      CHECK_THAT(listing, Catch::Contains("L f 444 ./passwd \n"));
      CHECK_THAT(listing, Catch::Contains("L d 0 ./ssl/private \n"));
      CHECK(listing == lines_with(without.out, "L "));
      CHECK(lines_with(with.out, "D ") == lines_with(without.out, "D "));
      CHECK_THAT(lines_with(with.out, "D "), Catch::Contains("./passwd"));
      CHECK(failed(with.get("private_ls")));
      CHECK(failed(with.get("private_cat")));
      CHECK(failed(without.get("private_ls")));
    }
  }
}

TEST_CASE("L1 L8: /etc bound from the view is read-only, and the run-dir base behind it is out of reach",
          "[L1][L8][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string handle = fx.base + "/handle.json"; // outside every writable bind (L8)
      auto r = run_etc(fx, who,
                       "touch /etc/ccsb-new 2>&1 | sed 's/^/@@touch=/'\n"
                       "echo x >> /etc/passwd 2>/dev/null; echo @@append=$?\n"
                       "mkdir /etc/ssl/x 2>/dev/null; echo @@mkdir=$?\n"
                       "rm -f /etc/hosts 2>/dev/null; echo @@rm=$?\n"
                       "chmod 666 /etc/group 2>/dev/null; echo @@chmod=$?\n"
                       "root=$(awk '$5 == \"/etc\" { print $4 }' /proc/self/mountinfo)\n"
                       "echo @@etc_root=$root\n"
                       "ls \"$root\" >/dev/null 2>&1; echo @@root_ls=$?\n"
                       "ls \"$(dirname \"$root\")\" >/dev/null 2>&1; echo @@views_ls=$?\n"
                       "ls /run/ccsb-sessions >/dev/null 2>&1; echo @@base_ls=$?\n"
                       "[ \"$(stat -c %d:%i /etc/..)\" = \"$(stat -c %d:%i /)\" ]; echo @@parent_is_root=$?\n",
                       true, {}, {"--handle", handle});
      ESCAPE_REQUIRE_RAN(r);
      CHECK_THAT(r.get("etc_root"), Catch::Contains("/etc-views/v-"));
      CHECK_THAT(r.get("touch"), Catch::Contains("Read-only file system"));
      CHECK(failed(r.get("append")));
      CHECK(failed(r.get("mkdir")));
      CHECK(failed(r.get("rm")));
      CHECK(failed(r.get("chmod")));
      CHECK(failed(r.get("root_ls")));
      CHECK(failed(r.get("views_ls")));
      CHECK(failed(r.get("base_ls")));
      CHECK(r.get("parent_is_root") == "0");
      // On the host: the view named in the handle is unchanged.
      picojson::value h;
      REQUIRE(picojson::parse(h, read_file(handle)).empty());
      const std::string view = h.get("details").get("etcView").to_str();
      CHECK_THAT(view, Catch::EndsWith("/etc"));
      CHECK(file_exists(view + "/passwd"));
      CHECK_FALSE(file_exists(view + "/ccsb-new"));
      CHECK_FALSE(file_exists(view + "/ssl/x"));
      CHECK(file_exists(view + "/hosts"));
      struct stat st{};
      REQUIRE(::stat((view + "/group").c_str(), &st) == 0);
      CHECK((st.st_mode & 07777) == 0444);
    }
  }
}

TEST_CASE("L8: a symlink planted at an unprivileged launcher's etc-views or view's name: not followed, bwrap's layout",
          "[L8][escape]") {
  const auto [name, key] = view_key_as_nobody();
  for (const char* where : {"etc-views", "the view's name"}) {
    DYNAMIC_SECTION(where) {
      sandbox_fixture fx;
      const std::string xdg = private_base(fx);
      const std::string views = xdg + "/ccsb/etc-views";
      const std::string decoy = fx.base + "/decoy";
      make_dirs(decoy + "/etc");
      // What a complete view of this very key would look like.
      write_file(decoy + "/etc/passwd", "EVIL-PASSWD\n");
      write_file(decoy + "/key", key, 0600);
      write_file(decoy + "/locked", "", 0600);
      if (std::string(where) == "etc-views") {
        REQUIRE(::symlink(decoy.c_str(), views.c_str()) == 0);
      } else {
        make_dirs(views, 0711);
        REQUIRE(::symlink(decoy.c_str(), (views + "/" + name).c_str()) == 0);
      }
      settle(fx);
      ::lchown(views.c_str(), 65534, 65534);
      auto r = run_etc(fx, launcher::unprivileged,
                       "head -c 11 /etc/passwd | sed 's/^/@@passwd=/'; echo\n"
                       "awk '$5 == \"/etc\" { for (i = 7; $i != \"-\"; i++) ; print \"@@etc_fs=\" $(i + 1) }' "
                       "/proc/self/mountinfo\n",
                       true, {"XDG_RUNTIME_DIR=" + xdg});
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("passwd") != "EVIL-PASSWD");
      CHECK_THAT(r.get("passwd"), Catch::StartsWith("root:x:0:0"));
      // bwrap's layout, and the reason on stderr.
      CHECK_THAT(r.err, Catch::Contains(kFallbackLine) && Catch::Contains(views));
      if (std::string(where) != "etc-views")
        CHECK_THAT(r.err, Catch::Contains("taken by not a directory") &&
                              Catch::Contains("neither followed, used nor removed"));
      CHECK(r.get("etc_fs") == "tmpfs");
      // Nothing was created, read as a view or removed through the link.
      CHECK(read_file(decoy + "/etc/passwd") == "EVIL-PASSWD\n");
      CHECK(read_file(decoy + "/key") == key);
      CHECK(file_exists(decoy + "/locked"));
      std::size_t entries = 0;
      for (DIR* d = ::opendir(decoy.c_str()); d;) {
        dirent* e = ::readdir(d);
        if (!e) {
          ::closedir(d);
          break;
        }
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++entries;
      }
      CHECK(entries == 3);
    }
  }
}

TEST_CASE("L8: a sweep while a session runs leaves that session's /etc whole (a held view is never removed)",
          "[L8][L1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string xdg = private_base(fx);
      settle(fx);
      const std::string ready = fx.work + "/ready";
      const std::string go = fx.work + "/go";
      const std::string list = "( cd /etc && find . -printf '%y %m %p %l\\n' | LC_ALL=C sort; "
                               "find . -type f -readable -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum ) | "
                               "sha256sum | cut -c1-64";
      auto o = launch_options(fx, who, "spec", fx.events, {},
                              "echo @@before=$(" + list + ")\n"
                              "touch " + ready + "\n"
                              "for i in $(seq 1200); do [ -e " + go + " ] && break; sleep 0.05; done\n"
                              "echo @@go=$([ -e " + go + " ] && echo 1)\n"
                              "echo @@after=$(" + list + ")\n"
                              "awk '$5 == \"/etc\" { print \"@@etc_root=\" $4 }' /proc/self/mountinfo\n");
      o.env.push_back("XDG_RUNTIME_DIR=" + xdg);
      child c = spawn(o);
      for (int i = 0; i < 1200 && !file_exists(ready); ++i) ::usleep(50 * 1000); // bounded wait, no assertion
      const bool started = file_exists(ready);
      // The sweep every launch runs, as the launcher's uid, over its base.
      const std::string base = who == launcher::root ? std::string(ccsb::launch::kRootRunDirBase) : xdg + "/ccsb";
      std::vector<std::string> swept;
      if (who == launcher::root) {
        swept = ccsb::launch::sweep_etc_views(base);
      } else {
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
          if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
              ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(1);
          (void)ccsb::launch::sweep_etc_views(base);
          ::_exit(0);
        }
        int st = 0;
        REQUIRE(::waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st));
      }
      write_file(go, "");
      ::chown(go.c_str(), 65534, 65534);
      auto r = collect(c, 180);
      REQUIRE(started);
      ESCAPE_REQUIRE_RAN(r);
      const std::string root = r.get("etc_root");
      CHECK_THAT(root, Catch::Contains("/etc-views/"));
      for (const auto& s : swept) CHECK_THAT(root, !Catch::Contains(s));
      CHECK(r.get("go") == "1");
      CHECK(r.get("before").size() == 64);
      CHECK(r.get("after") == r.get("before"));
    }
  }
}
