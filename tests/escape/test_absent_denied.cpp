// Escape tests, issue 9 (X1, P5, S4): under the broker (the dispatch
// profile) the write-denied names that do not exist in a writable root
// (`.bashrc`, `.vscode`, `.cargo/config`, ...) are broker rules instead of
// placeholder mounts. Each test runs the real ccsb-run with a root launcher
// and with an unprivileged one (uid 65534 through setpriv) and checks: the
// name cannot be created directly, through a symlinked parent, by renaming a
// ready-made directory or a file onto it, by a hard link, or by a symlink
// over it or its parent, each with EACCES and a violation event; a second
// session sharing the worktree is held the same; and the launcher leaves no
// host file in the worktree, so git status there stays as it was. Before
// this change the same attacks failed with EROFS or EEXIST (a read-only
// placeholder mount, no violation event) and the launcher created ~35
// placeholders in the host worktree for the session's life.
#include "escape_support.hpp"

#include <dirent.h>

using namespace escape;

namespace {

spawn_options dispatch_options(const sandbox_fixture& fx, launcher who, const std::string& events,
                               const std::vector<std::string>& args, const std::string& body) {
  return launch_options(fx, who, "dispatch", events, args, body);
}

bool violation_in(const std::string& events, const std::string& action, const std::string& target) {
  for (const auto& e : read_events(events))
    if (violation_of(e) == std::make_pair(action, target)) return true;
  return false;
}

// A python3 program run inside the sandbox from directory `dir`; t(NAME, F)
// prints @@NAME=ok or @@NAME=<errno name>.
std::string py_in(const std::string& dir, const std::string& code) {
  return "cd " + dir + " && python3 - <<'PY'\nimport os, errno\n"
         "def t(name, f):\n"
         "    try:\n"
         "        f(); print('@@%s=ok' % name)\n"
         "    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))\n"
         "def touch(p): os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))\n" +
         code + "\nPY";
}

// The names directly in `dir`, sorted (the host's view).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (std::string n = e->d_name; n != "." && n != "..") out.push_back(n);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string host_git_status(const sandbox_fixture& fx) {
  auto r = run_host({"/usr/bin/git", "-c", "safe.directory=*", "-C", fx.work, "status", "--porcelain", "--ignored",
                     "--untracked-files=all"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return r.out;
}

} // namespace

TEST_CASE("P5 X1: under the broker absent denied names cannot be created nor brought in by rename or link or symlink",
          "[P5][X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string w = fx.work;
      auto r = run(dispatch_options(fx, who, fx.events, {}, py_in(w, R"(
t('touch_bashrc', lambda: touch('.bashrc'))
t('mkdir_vscode', lambda: os.mkdir('.vscode'))
t('mkdir_cargo', lambda: os.mkdir('.cargo'))
t('cargo_config', lambda: touch('.cargo/config'))
t('symlink_c2', lambda: os.symlink('.cargo', 'c2'))
t('via_c2', lambda: touch('c2/config'))
t('rmdir_cargo', lambda: os.rmdir('.cargo'))
os.makedirs('dwc')
with open('dwc/config', 'w') as f: f.write('[build]\nrustc-wrapper = "/tmp/pwned"\n')
t('mv_dir_cargo', lambda: os.rename('dwc', '.cargo'))
t('symlink_cargo', lambda: os.symlink('dwc', '.cargo'))
t('symlink_bashrc', lambda: os.symlink('/tmp/x', '.bashrc'))
with open('f1', 'w') as f: f.write('evil\n')
t('rename_bashrc', lambda: os.rename('f1', '.bashrc'))
t('link_bashrc', lambda: os.link('f1', '.bashrc'))
t('control', lambda: touch('src.txt'))
)")));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"mkdir_cargo", "symlink_c2", "rmdir_cargo", "control"}) {
        INFO(k);
        CHECK(r.get(k) == "ok");
      }
      for (const char* k : {"touch_bashrc", "mkdir_vscode", "cargo_config", "via_c2", "mv_dir_cargo", "symlink_cargo",
                            "symlink_bashrc", "rename_bashrc", "link_bashrc"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      // Each denial is a violation naming the full path the call would
      // have created (the symlinked parent resolved).
      for (const auto& t : {w + "/.bashrc", w + "/.vscode", w + "/.cargo/config", w + "/.cargo"}) {
        INFO(t);
        CHECK(violation_in(fx.events, "file-write-create", t));
      }
      for (const char* p : {"/.bashrc", "/.vscode", "/.cargo", "/.cargo/config"}) {
        INFO(p);
        CHECK_FALSE(file_exists(w + p));
      }
      CHECK(file_exists(w + "/src.txt"));
      CHECK(read_file(w + "/dwc/config").find("pwned") != std::string::npos); // it stayed where it was made
    }
  }
}

TEST_CASE("X1 S4: the dispatch launcher creates no host file in the worktree and git status there is unchanged",
          "[X1][P5][S4][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string sig = fx.base + "/sig";
      make_dirs(sig);
      const std::string started = sig + "/started", go = sig + "/go";
      const auto before = entries(fx.work);
      const std::string status_before = host_git_status(fx);
      auto o = dispatch_options(fx, who, fx.events, {"--bind", sig},
                                "git -C " + fx.work + " status --porcelain >/dev/null; echo @@status=$?\n"
                                "touch " + started + "\n"
                                "n=0; while [ ! -e " + go + " ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done");
      child c = spawn(o);
      // Wait for the sandbox to reach its pause (a safety bound, not a timing assertion).
      for (int i = 0; i < 3000 && !file_exists(started); ++i) ::usleep(100000);
      const bool paused = file_exists(started);
      const auto during = entries(fx.work);
      const std::string status_during = host_git_status(fx);
      write_file(go, "");
      auto r = collect(c);
      REQUIRE(paused);
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("status") == "0");
      CHECK(during == before); // no .bashrc, .vscode, .cargo/ ... while the session runs
      CHECK(status_during == status_before);
      CHECK(entries(fx.work) == before);
      CHECK_FALSE(file_exists(fx.work + "/.git/commondir"));
      CHECK_FALSE(file_exists(fx.work + "/.git/config.worktree"));
      CHECK(host_git_status(fx) == status_before);
    }
  }
}

TEST_CASE("P5 X1 S4: a second session sharing the worktree is held to the same absent denied names",
          "[P5][X1][S4][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string w = fx.work;
      const std::string sig = fx.base + "/sig";
      make_dirs(sig);
      const std::string started = sig + "/started", go = sig + "/go";
      const std::string events_b = fx.base + "/events-b.jsonl";
      // Session A holds the worktree and attacks after B has run.
      auto a = dispatch_options(fx, who, fx.events, {"--bind", sig},
                                "touch " + started + "\n"
                                "n=0; while [ ! -e " + go + " ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done\n"
                                "cd " + w + "; ( touch .zshrc ) 2>/dev/null; echo @@a_zshrc=$?\n"
                                "ls -A | grep -c -x -E '\\.(bashrc|vscode|zshrc|mcp\\.json)'; echo @@a_seen=$?");
      child ca = spawn(a);
      for (int i = 0; i < 3000 && !file_exists(started); ++i) ::usleep(100000);
      const bool paused = file_exists(started);
      auto rb = run(dispatch_options(fx, who, events_b, {}, py_in(w, R"(
t('b_bashrc', lambda: touch('.bashrc'))
t('b_mcp', lambda: touch('.mcp.json'))
t('b_vscode', lambda: os.mkdir('.vscode'))
t('b_control', lambda: touch('b.txt'))
)")));
      write_file(go, "");
      auto ra = collect(ca);
      REQUIRE(paused);
      ESCAPE_REQUIRE_RAN(rb);
      ESCAPE_REQUIRE_RAN(ra);
      CHECK(rb.get("b_control") == "ok");
      for (const char* k : {"b_bashrc", "b_mcp", "b_vscode"}) {
        INFO(k);
        CHECK(rb.get(k) == "EACCES");
      }
      CHECK(violation_in(events_b, "file-write-create", w + "/.bashrc"));
      CHECK(violation_in(events_b, "file-write-create", w + "/.vscode"));
      CHECK(ra.get("a_zshrc") != "0");
      CHECK(ra.get("a_seen") == "1"); // grep found none of the names inside A either
      CHECK(violation_in(fx.events, "file-write-create", w + "/.zshrc"));
      for (const char* p : {"/.bashrc", "/.mcp.json", "/.vscode", "/.zshrc"}) {
        INFO(p);
        CHECK_FALSE(file_exists(w + p));
      }
      CHECK(file_exists(w + "/b.txt"));
    }
  }
}
