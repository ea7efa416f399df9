// X1 / P2 / P5 (issue 28 items 1 and 2): git from a linked worktree of a
// protected checkout, and `git worktree add` inside a writable root, through
// the real ccsb-run in the dispatch profile, with real git, for a root and an
// unprivileged launcher. What the session may change in the original's
// common git directory (its own admin dir, new objects, its own branch and
// the stash) works; every other write there, and each rename, link and
// symlink variant of it, is denied with a violation, and the host's git
// sees the original unchanged afterwards (`git log main`, tags, `git fsck`).
#include "escape_support.hpp"

using namespace escape;

namespace {

std::vector<std::string> host_git(const std::string& repo) {
  return {"/usr/bin/git", "-c", "safe.directory=*", "-c", "user.name=host", "-c", "user.email=host@example.invalid",
          "-C", repo};
}

std::string host_git_out(const std::string& repo, std::vector<std::string> args) {
  auto a = host_git(repo);
  a.insert(a.end(), args.begin(), args.end());
  auto r = run_host(a, repo);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::string s = r.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// The original checkout with one commit on main, a tag, a hook-free
// config, and two linked worktrees made on the host: `agent1` (the one
// bound) and `other` (another worktree's admin dir).
struct linked_repo {
  std::string repos, orig, common, wt, admin, other_admin, main_sha, tag_sha, object, object_bytes;
  // `feature`: a branch no worktree has checked out (git itself refuses to
  // move one that is, so only the broker stands between it and the session).
  explicit linked_repo(const sandbox_fixture& fx) {
    repos = fx.base + "/repos";
    orig = repos + "/orig";
    common = orig + "/.git";
    wt = repos + "/agent1";
    admin = common + "/worktrees/agent1";
    other_admin = common + "/worktrees/other";
    make_dirs(orig);
    run_host_ok({"/usr/bin/git", "init", "-q", "-b", "main", orig});
    write_file(orig + "/README", fx.protected_text);
    run_host_ok(host_git_args({"add", "README"}));
    run_host_ok(host_git_args({"commit", "-q", "-m", "base"}));
    run_host_ok(host_git_args({"tag", "v1"}));
    run_host_ok(host_git_args({"branch", "feature"}));
    run_host_ok(host_git_args({"worktree", "add", "-q", "-b", "agent1", wt}));
    run_host_ok(host_git_args({"worktree", "add", "-q", "-b", "other", repos + "/other"}));
    main_sha = host_git_out(orig, {"rev-parse", "main"});
    tag_sha = host_git_out(orig, {"rev-parse", "v1"});
    object = common + "/objects/" + main_sha.substr(0, 2) + "/" + main_sha.substr(2);
    object_bytes = read_file(object);
  }
  std::vector<std::string> host_git_args(std::vector<std::string> args) const {
    auto a = host_git(orig);
    a.insert(a.end(), args.begin(), args.end());
    return a;
  }
};

// How the original is visible in the sandbox.
enum class original { not_bound, read_only, protected_in_bind };

const char* name_of(original o) {
  switch (o) {
  case original::not_bound: return "original not bound";
  case original::read_only: return "original bound read-only";
  case original::protected_in_bind: return "original protected inside a writable bind";
  }
  return "";
}

std::vector<std::string> binds_for(const linked_repo& g, original o) {
  switch (o) {
  case original::not_bound: return {"--bind", g.wt};
  case original::read_only: return {"--bind", g.orig + ":ro", "--bind", g.wt};
  case original::protected_in_bind: return {"--bind", g.repos, "--bind", g.wt, "--protect", g.orig};
  }
  return {};
}

// A violation of either kind names `path` (a create when it was missing).
bool violation_at(const sandbox_fixture& fx, const std::string& path) {
  return has_violation(fx, "file-write*", path) || has_violation(fx, "file-write-create", path);
}

std::string py(const std::string& code) {
  return "python3 - <<'PY'\nimport os, errno\n"
         "def t(name, f):\n    try:\n        f(); print('@@%s=ok' % name)\n    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)))\n" +
         code + "\nPY\n";
}

} // namespace

TEST_CASE("X1 P2: a linked worktree of a protected checkout commits, amends, resets and stashes on its own branch, "
          "and nothing else of the original changes",
          "[X1][P2][P5][git][escape]") {
  for (launcher who : kLaunchers) {
    for (original o : {original::not_bound, original::read_only, original::protected_in_bind}) {
      DYNAMIC_SECTION(name_of(who) << ", " << name_of(o)) {
        sandbox_fixture fx;
        linked_repo g(fx);
        const std::string G = "git -c user.name=agent -c user.email=agent@example.invalid";
        const std::string C = g.common, A = g.admin;
        const std::string body =
            "cd " + g.wt + "\n" +
            // The work: commit, amend, reset on the own branch, stash and pop.
            "echo one > f && git add f && " + G + " commit -q -m one; echo @@commit=$?\n" +
            G + " commit -q --amend -m one-amended; echo @@amend=$?\n" +
            "echo two > g && git add g && " + G + " commit -q -m two; echo @@commit2=$?\n" +
            "git reset -q --hard HEAD~1; echo @@reset=$?\n" +
            "echo wip >> f && " + G + " stash -q; echo @@stash=$?\n" +
            "git stash pop -q; echo @@pop=$?\n" +
            G + " commit -q -am three; echo @@commit3=$?\n" +
            "echo @@head=$(git rev-parse HEAD)\n" +
            "echo @@log=$(git log --format=%s | tr '\\n' ,)\n" +
            // Other refs of the original.
            "git update-ref refs/heads/main HEAD 2>/dev/null; echo @@update_main=$?\n" +
            "git branch -f main HEAD 2>/dev/null; echo @@branch_f_main=$?\n" +
            "git update-ref refs/heads/feature HEAD 2>/dev/null; echo @@update_feature=$?\n" +
            "git branch -f feature HEAD 2>/dev/null; echo @@branch_f_feature=$?\n" +
            "git push -q . HEAD:feature 2>/dev/null; echo @@push_feature=$?\n" +
            "git tag -d v1 >/dev/null 2>&1; echo @@tag_d=$?\n" +
            "git branch newbranch 2>/dev/null; echo @@new_branch=$?\n" +
            "git pack-refs --all 2>/dev/null; echo @@pack_refs=$?\n" +
            py("C = '" + C + "'\nA = '" + A + "'\nobj = '" + g.object + "'\n"
               "def write(p, mode='a'):\n    with open(p, mode) as f: f.write('x')\n"
               // Existing objects: rewrite, truncate, chmod, delete, rename over, link out and write.
               "t('obj_write', lambda: write(obj, 'r+'))\n"
               "t('obj_truncate', lambda: os.truncate(obj, 0))\n"
               "t('obj_chmod', lambda: os.chmod(obj, 0o644))\n"
               "t('obj_unlink', lambda: os.unlink(obj))\n"
               "d = os.path.dirname(obj)\n"
               "t('tmp_create', lambda: write(d + '/tmp_obj_probe', 'w'))\n"
               "t('tmp_rename_over', lambda: os.rename(d + '/tmp_obj_probe', obj))\n"
               "t('tmp_unlink', lambda: os.unlink(d + '/tmp_obj_probe'))\n"
               "t('obj_link_tmp', lambda: os.link(obj, d + '/tmp_obj_alias'))\n"
               "t('obj_link_admin', lambda: os.link(obj, A + '/alias'))\n"
               "t('obj_rename_away', lambda: os.rename(obj, d + '/tmp_obj_moved'))\n"
               "t('pack', lambda: write(C + '/objects/pack/pack-1.pack', 'w'))\n"
               "t('alternates', lambda: write(C + '/objects/info/alternates', 'w'))\n"
               // New objects: named only after the broker checked a copy of
               // their content; the session's descriptor of its temporary
               // file never reaches the object.
               "import zlib\n"
               "good = zlib.compress(b'blob 6\\0hello\\n')\n"
               "hid = 'ce013625030ba8dba906f756967f9e9ca394464a'\n"
               "od = C + '/objects/' + hid[:2]\n"
               "os.makedirs(od, exist_ok=True)\n"
               "t('obj_direct_create', lambda: write(od + '/' + hid[2:], 'w'))\n"
               "def forged(name):\n"
               "    with open(od + '/tmp_obj_forged', 'wb') as f: f.write(zlib.compress(b'blob 5\\0evil\\n'))\n"
               "    os.rename(od + '/tmp_obj_forged', od + '/' + name)\n"
               "t('obj_forged_rename', lambda: forged(hid[2:]))\n"
               "t('obj_forged_link', lambda: os.link(od + '/tmp_obj_forged', od + '/' + hid[2:]))\n"
               "os.unlink(od + '/tmp_obj_forged')\n"
               "fd = os.open(od + '/tmp_obj_good', os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o444)\n"
               "os.write(fd, good)\n"
               "t('obj_good_link', lambda: os.link(od + '/tmp_obj_good', od + '/' + hid[2:]))\n"
               "os.lseek(fd, 0, 0); os.write(fd, zlib.compress(b'blob 6\\0EVIL!\\n')); os.close(fd)\n"
               "os.unlink(od + '/tmp_obj_good')\n"
               // Refs, config, hooks, other worktrees, the admin dir's own redirects.
               "t('main_write', lambda: write(C + '/refs/heads/main', 'w'))\n"
               "t('main_lock', lambda: write(C + '/refs/heads/main.lock', 'w'))\n"
               "t('tag_unlink', lambda: os.unlink(C + '/refs/tags/v1'))\n"
               "t('packed_refs', lambda: write(C + '/packed-refs'))\n"
               "t('config', lambda: write(C + '/config'))\n"
               "t('hook', lambda: write(C + '/hooks/post-checkout', 'w'))\n"
               "t('other_head', lambda: write(C + '/worktrees/other/HEAD', 'w'))\n"
               "t('own_gitdir', lambda: write(A + '/gitdir', 'w'))\n"
               "t('own_commondir', lambda: write(A + '/commondir', 'w'))\n"
               "t('own_config_worktree', lambda: write(A + '/config.worktree', 'w'))\n"
               "t('description', lambda: write(C + '/description'))\n"
               // Symlink, rename and hard-link variants onto refs/heads/main.
               "t('symlink_main', lambda: os.symlink('../../refs/heads/main', A + '/evil'))\n"
               "write(A + '/staged', 'w')\n"
               "t('rename_onto_main', lambda: os.rename(A + '/staged', C + '/refs/heads/main'))\n"
               "t('link_main_out', lambda: os.link(C + '/refs/heads/main', A + '/main-alias'))\n"
               "t('rename_main_away', lambda: os.rename(C + '/refs/heads/main', A + '/moved'))\n"
               "t('rename_heads_dir', lambda: os.rename(C + '/refs/heads', A + '/heads'))\n"
               // The original's working files, where they are visible.
               "t('orig_file', lambda: write('" + g.orig + "/README'))\n");
        auto r = run(launch_options(fx, who, "dispatch", fx.events, binds_for(g, o), body));
        ESCAPE_REQUIRE_RAN(r);
        for (const char* k : {"commit", "amend", "commit2", "reset", "stash", "pop", "commit3"}) {
          INFO(k);
          CHECK(r.get(k) == "0");
        }
        CHECK(r.get("log") == "three,one-amended,base,");
        for (const char* k : {"update_main", "branch_f_main", "update_feature", "branch_f_feature", "push_feature", "tag_d",
                              "new_branch", "pack_refs"}) {
          INFO(k);
          CHECK(failed(r.get(k)));
        }
        for (const char* k : {"obj_write", "obj_truncate", "obj_chmod", "obj_unlink", "tmp_rename_over", "obj_link_tmp",
                              "obj_link_admin", "obj_rename_away", "pack", "alternates", "main_write", "main_lock",
                              "tag_unlink", "packed_refs", "config", "hook", "other_head", "own_gitdir",
                              "own_commondir", "own_config_worktree", "description", "symlink_main",
                              "rename_onto_main", "link_main_out", "rename_main_away", "rename_heads_dir"}) {
          INFO(k);
          CHECK(r.get(k) == "EACCES");
        }
        CHECK(r.get("obj_direct_create") == "EACCES");
        CHECK(r.get("obj_forged_rename") == "EACCES");
        CHECK(r.get("obj_forged_link") == "EACCES");
        CHECK(r.get("obj_good_link") == "ok");
        CHECK(host_git_out(g.orig, {"cat-file", "-p", "ce013625030ba8dba906f756967f9e9ca394464a"}) == "hello");
        CHECK(r.get("tmp_create") == "ok");
        CHECK(r.get("tmp_unlink") == "ok");
        CHECK(r.get("orig_file") == "EACCES");
        // Each denial is a violation of the broker's.
        CHECK(has_violation(fx, "file-write-create", C + "/refs/heads/main.lock"));
        CHECK(has_violation(fx, "file-write*", g.object));
        CHECK(has_violation(fx, "file-write*", C + "/refs/tags/v1"));
        CHECK(violation_at(fx, C + "/packed-refs"));
        CHECK(has_violation(fx, "file-write*", C + "/config"));
        CHECK(has_violation(fx, "file-write-create", C + "/hooks/post-checkout"));
        CHECK(has_violation(fx, "file-write*", C + "/worktrees/other/HEAD"));
        CHECK(has_violation(fx, "file-write-create", A + "/evil"));
        CHECK(has_violation(fx, "file-write*", C + "/refs/heads/main"));
        CHECK(violation_at(fx, g.orig + "/README"));
        // The host's view: main, the tag and the objects as they were; the
        // session's branch holds its work; the repository is sound.
        CHECK(host_git_out(g.orig, {"rev-parse", "main"}) == g.main_sha);
        CHECK(host_git_out(g.orig, {"rev-parse", "v1"}) == g.tag_sha);
        CHECK(host_git_out(g.orig, {"rev-parse", "feature"}) == g.main_sha);
        CHECK(host_git_out(g.orig, {"log", "--format=%s", "main"}) == "base");
        CHECK(host_git_out(g.orig, {"rev-parse", "agent1"}) == r.get("head"));
        CHECK(host_git_out(g.orig, {"branch", "--list", "newbranch"}).empty());
        CHECK(read_file(g.object) == g.object_bytes);
        CHECK(read_file(g.orig + "/README") == fx.protected_text);
        CHECK_FALSE(file_exists(g.common + "/packed-refs"));
        CHECK_FALSE(file_exists(g.common + "/hooks/post-checkout"));
        auto fsck = g.host_git_args({"fsck", "--strict", "--no-dangling"});
        auto f = run_host(fsck, g.orig);
        INFO(f.describe());
        CHECK(f.exit_code == 0);
      }
    }
  }
}

TEST_CASE("X1 P2: a linked worktree whose HEAD was detached at launch moves no branch of the original",
          "[X1][P2][git][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      linked_repo g(fx);
      run_host_ok({"/usr/bin/git", "-c", "safe.directory=*", "-C", g.wt, "checkout", "-q", "--detach"});
      const std::string G = "git -c user.name=agent -c user.email=agent@example.invalid";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, binds_for(g, original::not_bound),
                                  "cd " + g.wt + "\necho one > f && git add f && " + G +
                                      " commit -q -m one; echo @@commit=$?\n"
                                      "git checkout -q agent1 2>/dev/null && " + G +
                                      " commit -q --allow-empty -m moved; echo @@move_agent1=$?\n"));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("commit") == "0"); // a detached commit writes the admin dir's HEAD and new objects only
      CHECK(failed(r.get("move_agent1")));
      CHECK(has_violation(fx, "file-write-create", g.common + "/refs/heads/agent1.lock"));
      CHECK(host_git_out(g.orig, {"rev-parse", "agent1"}) == g.main_sha);
      CHECK(host_git_out(g.orig, {"rev-parse", "main"}) == g.main_sha);
    }
  }
}

TEST_CASE("X1 P5: git worktree add inside a writable root fails in each form and leaves nothing behind",
          "[X1][P5][git][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto hg = [&](std::vector<std::string> args) {
        auto a = host_git(fx.work);
        a.insert(a.end(), args.begin(), args.end());
        run_host_ok(a);
      };
      hg({"commit", "-q", "--allow-empty", "-m", "base"});
      hg({"branch", "side"});
      const std::string before = host_git_out(fx.work, {"for-each-ref", "--format=%(refname) %(objectname)"});
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.work},
                                  "cd " + fx.work + "\n"
                                  "git worktree add -q sub/wt1 2>/dev/null; echo @@add_dwim=$?\n"
                                  "git worktree add -q -b newb sub/wt2 2>/dev/null; echo @@add_b=$?\n"
                                  "git -C . worktree add -q -B side2 sub/wt5 2>/dev/null; echo @@add_B=$?\n"
                                  "git worktree add -q --detach sub/wt3 2>/dev/null; echo @@add_detach=$?\n"
                                  "git worktree add -q sub/wt4 side 2>/dev/null; echo @@add_existing=$?\n"
                                  "git branch -q plain; echo @@plain_branch=$?\n"
                                  "git branch -q -D plain; echo @@plain_delete=$?\n"));
      ESCAPE_REQUIRE_RAN(r);
      for (const char* k : {"add_dwim", "add_b", "add_B", "add_detach", "add_existing"}) {
        INFO(k);
        CHECK(failed(r.get(k)));
      }
      // An ordinary branch below the root still works.
      CHECK(r.get("plain_branch") == "0");
      CHECK(r.get("plain_delete") == "0");
      CHECK(has_violation(fx, "file-write-create", fx.work + "/.git/refs/heads/wt1.lock"));
      CHECK(has_violation(fx, "file-write-create", fx.work + "/.git/refs/heads/newb.lock"));
      CHECK(has_violation(fx, "file-write-create", fx.work + "/.git/worktrees"));
      // Nothing left: no branch, no admin dir, no worktree directory.
      CHECK(host_git_out(fx.work, {"for-each-ref", "--format=%(refname) %(objectname)"}) == before);
      CHECK_FALSE(file_exists(fx.work + "/.git/worktrees"));
      CHECK_FALSE(file_exists(fx.work + "/sub"));
      CHECK_FALSE(file_exists(fx.work + "/.git/logs/refs/heads/wt1"));
      CHECK_FALSE(file_exists(fx.work + "/.git/logs/refs/heads/newb"));
      CHECK(host_git_out(fx.work, {"worktree", "list", "--porcelain"}).find("sub/") == std::string::npos);
    }
  }
}

TEST_CASE("X1 P2: a linked worktree on a nested branch whose ref is packed commits on it, and no sibling branch or "
          "packed-refs changes",
          "[X1][P2][git][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      linked_repo g(fx);
      const std::string wt = g.repos + "/nested";
      run_host_ok(g.host_git_args({"worktree", "add", "-q", "-b", "feat/a1", wt}));
      run_host_ok(g.host_git_args({"branch", "feat/a2"}));
      run_host_ok(g.host_git_args({"pack-refs", "--all", "--prune"}));
      REQUIRE_FALSE(file_exists(g.common + "/refs/heads/feat/a1"));
      const std::string packed = read_file(g.common + "/packed-refs");
      const std::string G = "git -c user.name=agent -c user.email=agent@example.invalid";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", g.orig + ":ro", "--bind", wt},
                                  "cd " + wt + "\necho one > f && git add f && " + G +
                                      " commit -q -m one; echo @@commit=$?\n"
                                      "echo @@head=$(git rev-parse HEAD)\n"
                                      "git update-ref refs/heads/feat/a2 HEAD 2>/dev/null; echo @@sibling=$?\n"
                                      "git update-ref refs/heads/feat/a1x HEAD 2>/dev/null; echo @@prefix=$?\n"
                                      "git branch -q -D feat/a2 2>/dev/null; echo @@delete_sibling=$?\n"));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("commit") == "0");
      CHECK(failed(r.get("sibling")));
      CHECK(failed(r.get("prefix")));
      CHECK(failed(r.get("delete_sibling")));
      CHECK(has_violation(fx, "file-write-create", g.common + "/refs/heads/feat/a2.lock"));
      CHECK(host_git_out(g.orig, {"rev-parse", "feat/a1"}) == r.get("head"));
      CHECK(host_git_out(g.orig, {"rev-parse", "feat/a2"}) == g.main_sha);
      CHECK(read_file(g.common + "/packed-refs") == packed);
      auto f = run_host(g.host_git_args({"fsck", "--strict", "--no-dangling"}), g.orig);
      INFO(f.describe());
      CHECK(f.exit_code == 0);
    }
  }
}

TEST_CASE("X1 P2: a second thread rewriting a temporary object while it is linked to its name never gets other "
          "content under that name",
          "[X1][P2][git][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      linked_repo g(fx);
      const std::string hid = "ce013625030ba8dba906f756967f9e9ca394464a"; // blob "hello\n"
      auto r = run(launch_options(
          fx, who, "dispatch", fx.events, {"--bind", g.wt},
          py("import zlib, threading\n"
             "od = '" + g.common + "/objects/ce'\n"
             "os.makedirs(od, exist_ok=True)\n"
             "good = zlib.compress(b'blob 6\\0hello\\n')\n"
             "evil = zlib.compress(b'blob 6\\0EVIL!\\n')\n"
             "tmp = od + '/tmp_obj_race'\n"
             "fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o444)\n"
             "os.write(fd, good)\n"
             "stop = False\n"
             "def flip():\n"
             "    i = 0\n"
             "    while not stop:\n"
             "        os.pwrite(fd, evil if i % 2 else good, 0); i += 1\n"
             "th = threading.Thread(target=flip); th.start()\n"
             "linked = False; denied = 0\n"
             "for _ in range(2000):\n"
             "    try:\n"
             "        os.link(tmp, od + '/" + hid.substr(2) + "'); linked = True; break\n"
             "    except OSError as e:\n"
             "        if e.errno != errno.EACCES: raise\n"
             "        denied += 1\n"
             "stop = True; th.join()\n"
             "print('@@linked=%s' % linked)\n"
             "os.unlink(tmp)\n"
             "print('@@leftover=%s' % any(n.startswith('tmp_obj') for n in os.listdir(od)))\n")));
      ESCAPE_REQUIRE_RAN(r);
      // A link that got through (while the content was good) made the
      // object in the original's common dir, holding nothing but its own
      // content; one that did not left no name.
      const bool there = file_exists(g.common + "/objects/ce/" + hid.substr(2));
      CHECK(there == (r.get("linked") == "True"));
      if (there) CHECK(host_git_out(g.orig, {"cat-file", "-p", hid}) == "hello");
      auto f = run_host(g.host_git_args({"fsck", "--strict", "--no-dangling"}), g.orig);
      INFO(f.describe());
      CHECK(f.exit_code == 0);
      CHECK(r.get("linked") != "<missing>");
      CHECK(r.get("leftover") == "False");
    }
  }
}

// git runs `git maintenance run --auto` after a commit, a merge or a fetch,
// and that takes objects/maintenance.lock in the common git directory, a
// name the broker denies there (only new objects may be created): every
// commit from a linked worktree left a violation. The session's git
// configuration (session_environment.hpp) turns automatic maintenance and
// gc off, so git does not try.
TEST_CASE("X1 E1: commits, a merge and gc --auto from a linked worktree try no maintenance lock, and the events "
          "hold no violation", "[X1][E1][git][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      linked_repo g(fx);
      const std::string G = "git -c user.name=agent -c user.email=agent@example.invalid";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, binds_for(g, original::read_only),
                                  "cd " + g.wt + "\necho one > f && git add f && " + G +
                                      " commit -q -m one; echo @@commit=$?\n" + G +
                                      " commit -q --allow-empty -m two; echo @@commit2=$?\n" + G +
                                      " merge -q --no-edit main; echo @@merge=$?\n"
                                      "git gc --auto -q; echo @@gc=$?\n"
                                      "echo @@maintenance=$(git config --get maintenance.auto)\n"));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("commit") == "0");
      CHECK(r.get("commit2") == "0");
      CHECK(r.get("merge") == "0");
      CHECK(r.get("gc") == "0");
      CHECK(r.get("maintenance") == "false");
      const auto v = violations(fx);
      for (const auto& [action, target] : v) UNSCOPED_INFO("violation " << action << " " << target);
      CHECK(v.empty());
      CHECK_FALSE(file_exists(g.common + "/objects/maintenance.lock"));
      CHECK(host_git_out(g.orig, {"rev-parse", "main"}) == g.main_sha);
    }
  }
}
