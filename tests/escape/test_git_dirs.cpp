// X1 / P5 (issue 26 items 2, 6, 7, 11): what the broker treats as git
// directories and tool configurations, at any depth, through the real
// ccsb-run in the dispatch profile, for a root and an unprivileged launcher.
// Each attack is checked where it matters: on the host after the run (a
// host `git status` that would run the planted core.fsmonitor, a file that
// must not exist), besides the errno and the violation events.
#include "escape_support.hpp"

using namespace escape;

namespace {

proc_result dispatch_as(const sandbox_fixture& fx, launcher who, const std::string& body) {
  return run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.home}, "W=" + fx.work + "\ncd \"$W\"\n" + body));
}

// A python3 program run in the worktree; t(NAME, F) prints @@NAME=ok or
// @@NAME=<errno name>.
std::string py_calls(const std::string& code) {
  return "python3 - <<'PY'\nimport os, errno, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "def t(name, f):\n    try:\n        f(); print('@@%s=ok' % name)\n    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))\n"
         "def renameat2(a, b, flags):\n    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:\n"
         "        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))\n" +
         code + "\nPY\n";
}

// The config of a planted git directory: its work tree is the directory
// above it, and core.fsmonitor runs `touch MARKER` on the host's `git status`.
std::string evil_config(const std::string& marker) {
  return "[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = touch " + marker +
         "\\n";
}

// `git status` in `dir` on the host, as the user would run it there
// (safe.directory: the sandbox's files belong to another uid).
void host_git_status(const std::string& dir) {
  (void)run_host({"/usr/bin/git", "-c", "safe.directory=*", "-C", dir, "status"}, dir);
}

} // namespace

TEST_CASE("X1 P5: a git directory planted under any name, in place or staged and moved, never runs code in the host's "
          "git status",
          "[X1][P5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string m = fx.base + "/pwned-";
      // plant DIR NAME ORDER: config first or HEAD first; each step's status is printed.
      const std::string plant =
          "plant() { d=$1; mkdir -p \"$d/objects\" \"$d/refs\" 2>/dev/null\n"
          "  if [ \"$3\" = head-first ]; then ( echo 'ref: refs/heads/main' > \"$d/HEAD\" ) 2>/dev/null; echo @@$2_head=$?; fi\n"
          "  ( printf '" + evil_config(m + "'$2'") + "' > \"$d/config\" ) 2>/dev/null; echo @@$2_config=$?\n"
          "  if [ \"$3\" != head-first ]; then ( echo 'ref: refs/heads/main' > \"$d/HEAD\" ) 2>/dev/null; echo @@$2_head=$?; fi; }\n";
      auto r = dispatch_as(fx, who, plant +
          "mkdir docs deep\n"
          "plant docs docs config-first\n"
          "plant deep/a/b/c/d deep head-first\n"
          // Staged: built under an innocent name, then the HEAD renamed into place, then the directory moved.
          "mkdir -p stage/objects stage/refs && printf '" + evil_config(m + "stage") + "' > stage/config\n"
          "echo 'ref: refs/heads/main' > stage/HEAD.txt; mv stage/HEAD.txt stage/HEAD 2>/dev/null; echo @@stage_mv_head=$?\n"
          "ln stage/HEAD.txt stage/HEAD 2>/dev/null; echo @@stage_ln_head=$?\n"
          "ln -s refs/heads/main stage/HEAD 2>/dev/null; echo @@stage_symlink_head=$?\n"
          "mkdir -p docs2/sub && mv stage docs2/sub/repo 2>/dev/null; echo @@stage_mv_dir=$?\n"
          // Staged in the private /tmp (no rule there), then copied in or moved in.
          "mkdir -p /tmp/st/objects /tmp/st/refs && echo 'ref: refs/heads/main' > /tmp/st/HEAD && "
          "printf '" + evil_config(m + "tmp") + "' > /tmp/st/config\n"
          "mv /tmp/st docs3 2>/dev/null; echo @@tmp_mv=$?\n"
          "cp -r /tmp/st docs3 2>/dev/null; echo @@tmp_cp=$?\n"
          // A bare repository, made by git itself, then configured.
          "git init -q --bare bare.git >/dev/null 2>&1; echo @@bare_init=$?\n"
          "( printf '" + evil_config(m + "bare") + "' >> bare.git/config ) 2>/dev/null; echo @@bare_config=$?\n" +
          py_calls("os.makedirs('pyd/objects'); os.makedirs('pyd/refs')\n"
                   "t('mknod_head', lambda: os.mknod('pyd/HEAD', 0o100644))\n"
                   "t('mkdir_head', lambda: os.mkdir('pyd/HEAD'))\n"
                   "open('pyd/h', 'w').write('ref: refs/heads/main\\n')\n"
                   "t('rename_head', lambda: os.rename('pyd/h', 'pyd/HEAD'))\n"
                   "t('noreplace_head', lambda: renameat2('pyd/h', 'pyd/HEAD', 1))\n"
                   "fd = os.open('pyd/h', os.O_RDONLY)\n"
                   "t('link_fd_head', lambda: os.link('/proc/self/fd/%d' % fd, 'pyd/HEAD'))\n"
                   "t('open_head', lambda: os.close(os.open('pyd/HEAD', os.O_CREAT | os.O_WRONLY, 0o644)))\n"
                   "fd2 = os.open('pyd', os.O_RDONLY | os.O_DIRECTORY)\n"
                   "t('openat_head', lambda: os.close(os.open('HEAD', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd2)))\n"));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"docs_head", "deep_head", "stage_mv_head", "stage_ln_head", "stage_symlink_head",
                            "tmp_mv", "tmp_cp", "bare_init"}) {
        INFO(k);
        CHECK(failed(r.get(k)));
      }
      for (const char* k : {"mknod_head", "mkdir_head", "rename_head", "noreplace_head", "link_fd_head", "open_head",
                            "openat_head"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      CHECK(r.get("docs_config") == "0"); // a file named config in an ordinary directory stays allowed
      CHECK(has_violation(fx, "file-write-create", fx.work + "/docs/HEAD"));
      for (const char* d : {"/docs", "/deep/a/b/c/d", "/stage", "/docs2/sub/repo", "/docs3", "/bare.git", "/pyd"}) {
        INFO(d);
        if (file_exists(fx.work + d)) host_git_status(fx.work + d);
      }
      for (const char* n : {"docs", "deep", "stage", "tmp", "bare"}) {
        INFO(n);
        CHECK_FALSE(file_exists(m + n));
      }
      for (const char* p : {"/docs/HEAD", "/deep/a/b/c/d/HEAD", "/stage/HEAD", "/docs3/HEAD", "/bare.git/HEAD", "/pyd/HEAD"}) {
        INFO(p);
        CHECK_FALSE(file_exists(fx.work + p));
      }
    }
  }
}

TEST_CASE("X1 P5: a git directory present at launch under any name keeps its config, hooks and commondir, and is "
          "never moved",
          "[X1][P5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string fix = fx.work + "/tests/fixtures/repo.git";
      make_dirs(fx.work + "/tests/fixtures");
      run_host_ok({"/usr/bin/git", "init", "-q", "--bare", fix});
      make_dirs(fix + "/hooks");
      const std::string config = read_file(fix + "/config");
      const std::string m = fx.base + "/pwned-fixture";
      auto r = dispatch_as(fx, who,
          "F=tests/fixtures/repo.git\n"
          "( printf '" + evil_config(m) + "' >> $F/config ) 2>/dev/null; echo @@append=$?\n"
          "( echo '#!/bin/sh' > $F/hooks/post-update ) 2>/dev/null; echo @@hook=$?\n"
          "( echo . > $F/commondir ) 2>/dev/null; echo @@commondir=$?\n"
          "( echo x > $F/config.worktree ) 2>/dev/null; echo @@config_worktree=$?\n"
          "mv $F tests/fixtures/moved.git 2>/dev/null; echo @@move=$?\n"
          "mkdir -p evil && printf '" + evil_config(m) + "' > evil/config && mkdir -p $F/worktrees\n"
          "mv evil $F/worktrees/evil 2>/dev/null; echo @@move_in=$?\n"
          "ln -s ../../evil $F/worktrees/link 2>/dev/null; echo @@symlink_in=$?\n"
          "( echo x > $F/description ) 2>/dev/null; echo @@description=$?\n" +
          py_calls("F = 'tests/fixtures/repo.git'\n"
                   "fd = os.open(F + '/config', os.O_RDONLY)\n"
                   "t('reopen', lambda: os.close(os.open('/proc/self/fd/%d' % fd, os.O_WRONLY | os.O_APPEND)))\n"
                   "open('c', 'w').write('[core]\\n')\n"
                   "t('rename_over', lambda: os.rename('c', F + '/config'))\n"
                   "t('exchange', lambda: renameat2('c', F + '/config', 2))\n"
                   "t('unlink', lambda: os.unlink(F + '/config'))\n"));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"append", "hook", "commondir", "config_worktree", "move", "move_in", "symlink_in"}) {
        INFO(k);
        CHECK(failed(r.get(k)));
      }
      for (const char* k : {"reopen", "rename_over", "exchange", "unlink"}) {
        INFO(k);
        CHECK(r.get(k) == "EACCES");
      }
      CHECK(r.get("description") == "0"); // the rest of the git directory stays writable
      CHECK(read_file(fix + "/config") == config);
      CHECK_FALSE(file_exists(fix + "/hooks/post-update"));
      CHECK_FALSE(file_exists(fix + "/commondir"));
      CHECK_FALSE(file_exists(fix + "/worktrees/evil"));
      CHECK(has_violation(fx, "file-write*", fix + "/config"));
      host_git_status(fix);
      CHECK_FALSE(file_exists(m));
    }
  }
}

TEST_CASE("X1 P5: normal git work keeps working beside the git-directory rules (commit, branch, stash, a file "
          "named config or HEAD's reflog)",
          "[X1][P5][escape]") {
  sandbox_fixture fx;
  auto r = dispatch_as(fx, launcher::root,
      "export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t\n"
      "mkdir -p src && echo 'x = 1' > src/config && echo @@config_file=$?\n"
      "git add -A && git commit -qm one >/dev/null 2>&1; echo @@commit=$?\n"
      "git checkout -q -b topic 2>/dev/null; echo @@branch=$?\n"
      "echo y >> src/config && git commit -qam two >/dev/null 2>&1; echo @@commit2=$?\n"
      "git checkout -q - 2>/dev/null; echo @@back=$?\n"
      "echo z >> src/config; git stash -q 2>/dev/null; echo @@stash=$?\n"
      "git stash pop -q 2>/dev/null; echo @@pop=$?\n"
      "git status --porcelain >/dev/null 2>&1; echo @@status=$?\n");
  ESCAPE_REQUIRE_RAN(r);
  for (const char* k : {"config_file", "commit", "branch", "commit2", "back", "stash", "pop", "status"}) {
    INFO(k);
    CHECK(r.get(k) == "0");
  }
  CHECK(file_exists(fx.work + "/.git/logs/HEAD"));
  CHECK(read_file(fx.work + "/.git/HEAD").find("refs/heads/") != std::string::npos);
  auto v = violations(fx);
  INFO("violations: " << v.size());
  for (const auto& [a, t] : v) INFO(a << " " << t);
  CHECK(v.empty()); // item 11: git's clean-up rmdir of a non-empty .git is no violation
}

TEST_CASE("X1: a call that fails on its own (rmdir of a non-empty directory, a missing name, an existing target) is "
          "answered as the kernel would and reported as no violation",
          "[X1][P5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      make_dirs(fx.work + "/pkg/.vscode");
      write_file(fx.work + "/.env", "S=1\n");
      auto r = dispatch_as(fx, who, py_calls(
          "t('rmdir_git', lambda: os.rmdir('.git'))\n"
          "t('rmdir_hooks', lambda: os.rmdir('.git/hooks'))\n"
          "t('unlink_git', lambda: os.unlink('.git'))\n"
          "t('rmdir_env', lambda: os.rmdir('.env'))\n"
          "t('rename_missing', lambda: os.rename('missing', '.env'))\n"
          "t('rename_missing_git', lambda: os.rename('missing', '.git/config'))\n"
          "t('exchange_missing', lambda: renameat2('.env', 'missing', 2))\n"
          "open('plain', 'w').write('x')\n"
          "t('noreplace', lambda: renameat2('plain', '.env', 1))\n"
          "t('link_existing', lambda: os.link('plain', '.env'))\n"
          "t('excl_existing', lambda: os.open('.env', os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
          "os.mkdir('d')\n"
          "t('dir_over_nonempty', lambda: os.rename('d', '.git'))\n"
          "t('rmdir_empty_denied', lambda: os.rmdir('pkg/.vscode'))\n"));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("rmdir_git") == "ENOTEMPTY");
      CHECK(r.get("rmdir_hooks") == "ENOTEMPTY");
      CHECK(r.get("unlink_git") == "EISDIR");
      CHECK(r.get("rmdir_env") == "ENOTDIR");
      CHECK(r.get("rename_missing") == "ENOENT");
      CHECK(r.get("rename_missing_git") == "ENOENT");
      CHECK(r.get("exchange_missing") == "ENOENT");
      CHECK(r.get("noreplace") == "EEXIST");
      CHECK(r.get("link_existing") == "EEXIST");
      CHECK(r.get("excl_existing") == "EEXIST");
      CHECK(r.get("dir_over_nonempty") == "ENOTEMPTY");
      // A call that would succeed is still denied and reported.
      CHECK(r.get("rmdir_empty_denied") == "EACCES");
      CHECK(file_exists(fx.work + "/pkg/.vscode"));
      auto v = violations(fx);
      REQUIRE(v.size() == 1);
      CHECK(v[0].first == "file-write*");
      CHECK(v[0].second == fx.work + "/pkg/.vscode");
    }
  }
}

TEST_CASE("P5 X1: tool configurations are denied at any depth below a root (cargo, npm, yarn, editors, agents, "
          "mise, Mercurial), a directory of one is never moved or linked into place, project files stay writable",
          "[X1][P5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      make_dirs(fx.work + "/old");
      write_file(fx.work + "/old/.npmrc", "registry=x\n");
      const std::vector<std::string> denied = {
          "pkg/.cargo/config.toml", "pkg/.cargo/config", "pkg/.npmrc", "pkg/.yarnrc", "pkg/.yarnrc.yml",
          "a/b/c/d/.npmrc", "a/b/.cargo/config.toml", "pkg/.vscode/tasks.json", "pkg/.claude/settings.json",
          "pkg/.mcp.json", "pkg/.mise.toml", "pkg/mise.toml", "pkg/.config/mise/config.toml",
          "pkg/.config/mise/conf.d/a.toml", "pkg/.mise/conf.d/b.toml", "pkg/.hg/hgrc",
          "pkg/.pre-commit-config.yaml", "pkg/.husky/pre-commit", "pkg/.gitmodules"};
      std::string body = "mkdir -p pkg/.cargo pkg/.hg pkg/.config a/b/c/d a/b/.cargo\n";
      for (std::size_t i = 0; i < denied.size(); ++i)
        body += "( mkdir -p \"$(dirname " + denied[i] + ")\" 2>/dev/null; echo x > " + denied[i] +
                " ) 2>/dev/null; echo @@d" + std::to_string(i) + "=$?\n";
      body += "mkdir -p x && echo '[build]' > x/config.toml && mkdir -p q\n"
              "mv x q/.cargo 2>/dev/null; echo @@mv_dir=$?\n"
              "ln -s ../x q/.mise 2>/dev/null; echo @@symlink_dir=$?\n"
              "( echo y >> old/.npmrc ) 2>/dev/null; echo @@write_old=$?\n"
              "rm -f old/.npmrc 2>/dev/null; echo @@rm_old=$?\n"
              "echo '{}' > pkg/package.json && echo all: > pkg/Makefile && echo 'export A=1' > pkg/.envrc && "
              "echo x > pkg/.cargo/notes.txt && echo @@project=$?\n";
      auto r = dispatch_as(fx, who, body);
      ESCAPE_REQUIRE_RAN(r);
      for (std::size_t i = 0; i < denied.size(); ++i) {
        INFO(denied[i]);
        CHECK(failed(r.get("d" + std::to_string(i))));
        CHECK_FALSE(file_exists(fx.work + "/" + denied[i]));
      }
      CHECK(failed(r.get("mv_dir")));
      CHECK(failed(r.get("symlink_dir")));
      CHECK_FALSE(file_exists(fx.work + "/q/.cargo/config.toml"));
      CHECK_FALSE(file_exists(fx.work + "/q/.mise"));
      CHECK(failed(r.get("write_old")));
      CHECK(failed(r.get("rm_old")));
      CHECK(read_file(fx.work + "/old/.npmrc") == "registry=x\n");
      CHECK(r.get("project") == "0");
      CHECK(has_violation(fx, "file-write-create", fx.work + "/pkg/.cargo/config.toml"));
      CHECK(has_violation(fx, "file-write-create", fx.work + "/a/b/c/d/.npmrc"));
    }
  }
}

TEST_CASE("P5: the shell start-up files that were missed (.bash_completion, .inputrc, zsh's compiled and dump "
          "files, completion directories) are denied in HOME and in every root",
          "[X1][P5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::vector<std::string> denied = {
          fx.work + "/.bash_completion",
          fx.work + "/.inputrc",
          fx.home + "/.bash_completion",
          fx.home + "/.inputrc",
          fx.home + "/.zshrc.zwc",
          fx.home + "/.zshenv.zwc",
          fx.home + "/.zcompdump",
          fx.home + "/.oh-my-zsh/custom/evil.zsh",
          fx.home + "/.local/share/bash-completion/completions/git",
          fx.home + "/.local/share/fish/generated_completions/git.fish"};
      std::string body;
      for (std::size_t i = 0; i < denied.size(); ++i)
        body += "( mkdir -p \"$(dirname " + denied[i] + ")\" 2>/dev/null; echo 'touch /tmp/x' > " + denied[i] +
                " ) 2>/dev/null; echo @@d" + std::to_string(i) + "=$?\n";
      auto r = dispatch_as(fx, who, body);
      ESCAPE_REQUIRE_RAN(r);
      for (std::size_t i = 0; i < denied.size(); ++i) {
        INFO(denied[i]);
        CHECK(failed(r.get("d" + std::to_string(i))));
        CHECK_FALSE(file_exists(denied[i]));
      }
      CHECK(has_violation(fx, "file-write-create", fx.work + "/.bash_completion"));
    }
  }
}

TEST_CASE("X1: a second thread flipping the directory of a new HEAD between .git and an ordinary directory never "
          "creates the HEAD outside .git",
          "[X1][P5][escape]") {
  sandbox_fixture fx;
  auto r = dispatch_as(fx, launcher::root, py_calls(
      "import threading\n"
      "os.makedirs('plain/objects'); os.makedirs('plain/refs')\n"
      "stop = False\n"
      "def flip():\n"
      "    while not stop:\n"
      "        for to in ('.git', 'plain'):\n"
      "            try: os.symlink(to, 'f.tmp'); os.rename('f.tmp', 'flip')\n"
      "            except OSError: pass\n"
      "th = threading.Thread(target=flip); th.start()\n"
      "made = denied = 0\n"
      "for i in range(3000):\n"
      "    try:\n"
      "        os.close(os.open('flip/HEAD', os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)); made += 1\n"
      "    except OSError as e:\n"
      "        denied += 1\n"
      "stop = True; th.join()\n"
      "print('@@made=%d' % made); print('@@denied=%d' % denied)\n"
      "print('@@plain_head=%s' % os.path.lexists('plain/HEAD'))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("plain_head") == "False");
  CHECK_FALSE(file_exists(fx.work + "/plain/HEAD"));
  // Both sides were hit: the opens through .git went through, the others were denied.
  CHECK(r.get("made") != "0");
  CHECK(r.get("denied") != "0");
  CHECK(read_file(fx.work + "/.git/HEAD").find("ref: refs/heads/") == 0);
}
