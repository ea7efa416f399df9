// X1 / P5 / P7 / L3: the broker's decision, without a kernel.
#include <catch2/catch.hpp>

#include "ccsb/broker/decide.hpp"
#include "ccsb/broker/git_object.hpp"

using namespace ccsb::broker;

namespace {
git_facts none_facts() { return {}; }
rule_set dispatch_rules() { return {{"/w", "/home/u"}, {".env", "*.key", "*.pem"}, {}, true, true, false, {}}; }
}

TEST_CASE("X1: P7 names are denied at any depth of every writable root", "[X1][P7]") {
  auto r = dispatch_rules();
  for (const char* p : {"/w/.env", "/w/a/b/c/.env", "/w/x.pem", "/home/u/deep/er/id.key", "/w/.pem", "/w/a.b.key"}) {
    INFO(p);
    auto v = decide(r, op::create, p);
    CHECK_FALSE(v.allowed);
    CHECK(v.action == "file-write-create");
    CHECK(v.target == p);
  }
  for (const char* p : {"/w/.env.example", "/w/x.pem.txt", "/w/key", "/w/a.keys", "/w/env", "/w/.envrc"}) {
    INFO(p);
    CHECK(decide(r, op::create, p).allowed);
  }
}

TEST_CASE("X1: existing P7 names are not writable, replaceable or removable (file-write*)", "[X1][P7]") {
  auto r = dispatch_rules();
  for (op o : {op::write, op::replace, op::remove}) {
    auto v = decide(r, o, "/w/srv.pem");
    CHECK_FALSE(v.allowed);
    CHECK(v.action == "file-write*");
  }
}

TEST_CASE("X1: outside every writable root nothing is decided here", "[X1]") {
  auto r = dispatch_rules();
  CHECK(decide(r, op::create, "/tmp/x.pem").allowed);
  CHECK(decide(r, op::create, "/wx/x.pem").allowed); // prefix, not a parent
  CHECK(decide(r, op::create, "/tmp/.git/config").allowed);
}

TEST_CASE("X1: paths that are not absolute and normal are denied (fail closed)", "[X1]") {
  auto r = dispatch_rules();
  for (const char* p : {"", "w/a", "/w/../etc/x", "/w/./a", "/w//a", "/w/a/"}) {
    INFO(p);
    CHECK_FALSE(decide(r, op::create, p).allowed);
  }
}

TEST_CASE("P5: git paths in every .git directory below a root, nested repos and submodules included", "[X1][P5]") {
  auto r = dispatch_rules();
  for (const char* p : {"/w/.git/config", "/w/.git/hooks", "/w/.git/hooks/pre-commit", "/w/sub/.git/config",
                        "/w/a/b/.git/hooks/post-checkout", "/w/.git/commondir", "/w/.git/config.worktree",
                        "/w/.git/worktrees/wt/gitdir", "/w/.git/worktrees/wt/commondir",
                        "/w/.git/modules/lib/config", "/w/.git/modules/a/b/hooks/x",
                        "/w/.git/modules/a/modules/b/config"}) {
    INFO(p);
    CHECK_FALSE(decide(r, op::create, p).allowed);
  }
  for (const char* p : {"/w/.git/index", "/w/.git/index.lock", "/w/.git/config.lock", "/w/.git/refs/heads/config",
                        "/w/.git/objects/ab/cdef", "/w/.git/logs/refs/heads/hooks", "/w/.git/info/exclude",
                        "/w/.git/modules/lib/refs/heads/config", "/w/.git/gitdir", "/w/config", "/w/hooks/x",
                        "/w/.git/COMMIT_EDITMSG"}) {
    INFO(p);
    CHECK(decide(r, op::create, p).allowed);
  }
}

TEST_CASE("P5: a root that is itself a .git directory", "[X1][P5]") {
  rule_set r{{"/repo/.git"}, {".env"}, {}, true, true, false, {}};
  CHECK_FALSE(decide(r, op::create, "/repo/.git/config").allowed);
  CHECK_FALSE(decide(r, op::create, "/repo/.git/hooks/x").allowed);
  CHECK(decide(r, op::create, "/repo/.git/index").allowed);
}

TEST_CASE("X1: no .git entry below a root is created, replaced or removed", "[X1][P5]") {
  auto r = dispatch_rules();
  for (op o : {op::create, op::write, op::replace, op::remove}) {
    CHECK_FALSE(decide(r, o, "/w/.git").allowed);
    CHECK_FALSE(decide(r, o, "/w/wt/.git").allowed);
  }
  CHECK(decide(r, op::create, "/w/.gitignore").allowed);
  CHECK(decide(r, op::create, "/w/x.git").allowed);
}

TEST_CASE("X1: directories moved into and symlinks created in a .git directory", "[X1][P5]") {
  auto r = dispatch_rules();
  CHECK_FALSE(decide_into_git(r, "/w/.git/modules/m").allowed);
  CHECK_FALSE(decide_into_git(r, "/w/sub/.git/x").allowed);
  CHECK(decide_into_git(r, "/w/sub/x").allowed);
  CHECK(decide_into_git(r, "/w/.git").allowed); // the .git name itself is decide()'s
  CHECK(decide_into_git(r, "/tmp/.git/x").allowed);
}

namespace {
rule_set absent_rules() {
  auto r = dispatch_rules();
  r.absent_denied = {"/w/.bashrc", "/w/.vscode", "/w/.cargo/config.toml", "/w/a/b/c"};
  return r;
}
} // namespace

TEST_CASE("P5 X1: an absent write-denied name and everything below it is never created or written or removed",
          "[X1][P5]") {
  auto r = absent_rules();
  for (const char* p : {"/w/.bashrc", "/w/.vscode", "/w/.vscode/tasks.json", "/w/.cargo/config.toml",
                        "/w/.cargo/config.toml/x", "/w/a/b/c", "/w/a/b/c/d/e"}) {
    INFO(p);
    auto c = decide(r, op::create, p);
    CHECK_FALSE(c.allowed);
    CHECK(c.action == "file-write-create");
    CHECK(c.target == p);
    CHECK_THAT(c.reason, Catch::Contains("P5"));
    for (op o : {op::write, op::replace, op::remove}) {
      auto v = decide(r, o, p);
      CHECK_FALSE(v.allowed);
      CHECK(v.action == "file-write*");
    }
  }
  // Neighbours, ancestors and prefixes stay creatable (mkdir .cargo works).
  for (const char* p : {"/w/.bashrc2", "/w/.bash", "/w/.cargo", "/w/.cargo/other", "/w/a", "/w/a/b", "/w/a/bc",
                        "/w/.vscode-x"}) {
    INFO(p);
    CHECK(decide(r, op::create, p).allowed);
  }
  // Outside every root too: the list holds whatever the roots say.
  r.roots.clear();
  CHECK_FALSE(decide(r, op::create, "/w/.bashrc").allowed);
}

TEST_CASE("P5 X1: a rename or link or symlink onto a strict ancestor of an absent denied name is denied",
          "[X1][P5]") {
  auto r = absent_rules();
  for (const char* p : {"/w/.cargo", "/w/a", "/w/a/b", "/w", "/"}) {
    INFO(p);
    auto v = decide_over_absent(r, op::create, p);
    CHECK_FALSE(v.allowed);
    CHECK(v.action == "file-write-create");
    CHECK(v.target == p);
    CHECK(decide_over_absent(r, op::replace, p).action == "file-write*");
  }
  // The name itself is decide()'s; siblings and prefixes are not ancestors.
  for (const char* p : {"/w/.bashrc", "/w/.cargo2", "/w/a/bc", "/w/x", "/tmp/.cargo"}) {
    INFO(p);
    CHECK(decide_over_absent(r, op::create, p).allowed);
  }
  CHECK_FALSE(decide_over_absent(r, op::create, "/w/../w/.cargo").allowed); // fail closed
  CHECK(decide_over_absent(dispatch_rules(), op::create, "/w/.cargo2").allowed);
}

TEST_CASE("P5 X1: the git rules already hold a root's own git paths but not deeper ones or other names",
          "[X1][P5]") {
  auto r = dispatch_rules();
  for (const char* p : {"/w/.git/hooks", "/w/.git/config", "/w/.git/commondir", "/w/.git/config.worktree",
                        "/home/u/.git/hooks"}) {
    INFO(p);
    CHECK(covers_absent(r, p));
  }
  rule_set gitroot{{"/repo/.git"}, {}, {}, true, true, false, {}};
  CHECK(covers_absent(gitroot, "/repo/.git/hooks"));
  // .git/worktrees/wt is no .git entry: a rename onto it is not denied by name.
  for (const char* p : {"/w/.bashrc", "/w/.git/worktrees/wt/gitdir", "/w/.git/modules/m/config", "/tmp/.git/hooks"}) {
    INFO(p);
    CHECK_FALSE(covers_absent(r, p));
  }
  r.git = false;
  CHECK_FALSE(covers_absent(r, "/w/.git/hooks"));
  // Listed names do not count: only what the other rules hold.
  auto a = absent_rules();
  CHECK_FALSE(covers_absent(a, "/w/.bashrc"));
}

TEST_CASE("P5 X1: tool configurations are denied at any depth, in every form", "[X1][P5]") {
  auto r = dispatch_rules();
  for (const char* p : {"/w/pkg/.cargo/config.toml", "/w/pkg/.cargo/config", "/w/pkg/.npmrc", "/w/a/b/c/.yarnrc",
                        "/w/pkg/.yarnrc.yml", "/w/.npmrc", "/w/pkg/.vscode", "/w/pkg/.vscode/tasks.json",
                        "/w/x/.claude/settings.json", "/w/x/.mcp.json", "/w/x/.husky/pre-commit", "/w/x/.gitmodules",
                        "/w/x/.pre-commit-config.yaml", "/w/x/.mise.toml", "/w/x/mise.toml",
                        "/w/x/.config/mise/config.toml", "/w/x/.config/mise/conf.d/a.toml",
                        "/w/x/.mise/conf.d/b.toml", "/w/x/.hg/hgrc", "/w/x/.jj/repo/config.toml",
                        "/home/u/deep/.cargo/config.toml"}) {
    INFO(p);
    auto c = decide(r, op::create, p);
    CHECK_FALSE(c.allowed);
    CHECK(c.action == "file-write-create");
    CHECK_THAT(c.reason, Catch::Contains("P5"));
    for (op o : {op::write, op::replace, op::remove}) CHECK(decide(r, o, p).action == "file-write*");
  }
  // Project files and the directories on the way stay allowed.
  for (const char* p : {"/w/pkg/.cargo", "/w/pkg/.cargo/notes.txt", "/w/pkg/package.json", "/w/pkg/Makefile",
                        "/w/pkg/.envrc", "/w/pkg/config.toml", "/w/pkg/.hg", "/w/pkg/.config", "/w/pkg/.tool-versions",
                        "/w/pkg/uv.toml", "/w/pkg/.npmrc.txt", "/w/pkg/cargo/config.toml", "/tmp/.npmrc"}) {
    INFO(p);
    CHECK(decide(r, op::create, p).allowed);
  }
  // A rename, link or symlink onto a directory of a longer one may bring one in.
  for (const char* p : {"/w/pkg/.cargo", "/w/.cargo", "/w/a/.hg", "/w/a/.config", "/w/a/.jj/repo", "/w/a/mise"}) {
    INFO(p);
    auto v = decide_over_absent(r, op::create, p);
    CHECK_FALSE(v.allowed);
    CHECK(v.target == p);
  }
  for (const char* p : {"/w/pkg/cargo", "/w/pkg/.cargo2", "/w/a/b", "/tmp/.cargo"}) {
    INFO(p);
    CHECK(decide_over_absent(r, op::create, p).allowed);
  }
}

TEST_CASE("X1: which directories' HEAD a decision depends on", "[X1][P5]") {
  auto r = dispatch_rules();
  using v = std::vector<std::string>;
  CHECK(git_probes(r, "/w/docs/config", false) == v{"/w/docs"});
  CHECK(git_probes(r, "/w/docs/hooks/pre-commit", false) == v{"/w/docs"});
  CHECK(git_probes(r, "/w/b.git/worktrees/x/gitdir", false) == v{"/w/b.git"});
  CHECK(git_probes(r, "/w/config", false) == v{"/w"});
  CHECK(git_probes(r, "/w/docs/readme", false).empty());
  CHECK(git_probes(r, "/w/a/b/link", true) == v{"/w", "/w/a", "/w/a/b"});
  CHECK(git_probes(r, "/tmp/x/config", false).empty());
  r.git = false;
  CHECK(git_probes(r, "/w/docs/config", false).empty());
}

TEST_CASE("X1: a HEAD is created only where git writes one in an existing repository", "[X1][P5]") {
  auto r = dispatch_rules();
  git_facts none;
  for (const char* p : {"/w/HEAD", "/w/docs/HEAD", "/w/a/b/c/HEAD", "/w/b.git/HEAD", "/w/x.git/worktrees/w/HEAD",
                        "/w/.gitx/HEAD", "/home/u/HEAD"}) {
    INFO(p);
    auto d = decide_git_dir(r, op::create, p, none, false);
    CHECK_FALSE(d.allowed);
    CHECK(d.action == "file-write-create");
    CHECK(d.target == p);
  }
  for (const char* p : {"/w/.git/HEAD", "/w/.git/logs/HEAD", "/w/.git/refs/remotes/origin/HEAD",
                        "/w/.git/logs/refs/remotes/origin/HEAD", "/w/.git/worktrees/wt/HEAD",
                        "/w/.git/worktrees/wt/logs/HEAD", "/w/.git/modules/a/b/HEAD", "/w/sub/.git/HEAD",
                        "/tmp/x/HEAD", "/w/docs/HEAD.lock", "/w/docs/ORIG_HEAD"}) {
    INFO(p);
    CHECK(decide_git_dir(r, op::create, p, none, false).allowed);
  }
  // An existing HEAD may be replaced, written, removed: the directory already is what it is.
  for (op o : {op::write, op::replace, op::remove}) CHECK(decide_git_dir(r, o, "/w/docs/HEAD", none, false).allowed);
  // Not beside the names git reads, even inside .git.
  git_facts beside;
  beside.beside_git_names = true;
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/.git/refs/remotes/o/HEAD", beside, false).allowed);
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/.git/worktrees/wt/HEAD", beside, false).allowed);
  rule_set gitroot{{"/repo/.git"}, {}, {}, true, true, false, {}};
  CHECK(decide_git_dir(gitroot, op::create, "/repo/.git/HEAD", none, false).allowed);
  CHECK(decide_git_dir(gitroot, op::create, "/repo/.git/logs/HEAD", none, false).allowed);
  CHECK_FALSE(decide_git_dir(gitroot, op::create, "/repo/.git/x/HEAD", none, false).allowed);
  r.git = false;
  CHECK(decide_git_dir(r, op::create, "/w/docs/HEAD", none, false).allowed);
}

TEST_CASE("P5 X1: in a directory that holds HEAD, git's names are denied as in .git, nothing is placed, it never moves",
          "[X1][P5]") {
  auto r = dispatch_rules();
  git_facts f;
  f.head_dirs = {"/w/fix/repo.git"};
  for (const char* p : {"/w/fix/repo.git/config", "/w/fix/repo.git/hooks", "/w/fix/repo.git/hooks/post-update",
                        "/w/fix/repo.git/commondir", "/w/fix/repo.git/config.worktree",
                        "/w/fix/repo.git/worktrees/x/gitdir", "/w/fix/repo.git/modules/m/config"}) {
    INFO(p);
    for (op o : {op::create, op::write, op::replace, op::remove}) {
      auto d = decide_git_dir(r, o, p, f, false);
      CHECK_FALSE(d.allowed);
      CHECK(d.action == (o == op::create ? "file-write-create" : "file-write*"));
      CHECK_THAT(d.reason, Catch::Contains("/w/fix/repo.git"));
    }
  }
  for (const char* p : {"/w/fix/repo.git/description", "/w/fix/repo.git/refs/heads/config", "/w/fix/repo.git/info/exclude",
                        "/w/fix/config", "/w/fix/repo.git"}) {
    INFO(p);
    CHECK(decide_git_dir(r, op::create, p, f, false).allowed);
  }
  // A directory or symlink placed anywhere inside it.
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/fix/repo.git/worktrees/evil", f, true).allowed);
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/fix/repo.git/x", f, true).allowed);
  CHECK(decide_git_dir(r, op::create, "/w/fix/other", f, true).allowed);
  // The root itself holding HEAD.
  git_facts atroot;
  atroot.head_dirs = {"/w"};
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/config", atroot, false).allowed);
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/hooks/x", atroot, false).allowed);
  // Facts that do not concern the path change nothing.
  git_facts elsewhere;
  elsewhere.head_dirs = {"/w/other", "relative", "/w/fix/repo.git/config"};
  CHECK(decide_git_dir(r, op::create, "/w/fix/repo.git/config", elsewhere, false).allowed);
  git_facts moved;
  moved.moves_head_dir = true;
  auto m = decide_git_dir(r, op::create, "/w/docs/repo", moved, true);
  CHECK_FALSE(m.allowed);
  CHECK(m.action == "file-write-create");
  CHECK(decide_git_dir(r, op::create, "/tmp/repo", moved, true).allowed); // outside every root
  CHECK_FALSE(decide_git_dir(r, op::create, "/w/../w/x", none_facts(), false).allowed);
}

TEST_CASE("X1: calls that fail on their own are known without performing them", "[X1]") {
  name_facts missing{}, file{true, false, false}, empty_dir{true, true, true}, full_dir{true, true, false};
  CHECK(remove_fails(false, missing) == ENOENT);
  CHECK(remove_fails(true, missing) == ENOENT);
  CHECK(remove_fails(true, file) == ENOTDIR);
  CHECK(remove_fails(false, empty_dir) == EISDIR);
  CHECK(remove_fails(true, full_dir) == ENOTEMPTY);
  CHECK(remove_fails(true, empty_dir) == 0);
  CHECK(remove_fails(false, file) == 0);
  CHECK(rename_fails(missing, file, false, false) == ENOENT);
  CHECK(rename_fails(file, missing, true, false) == ENOENT);
  CHECK(rename_fails(file, file, true, false) == 0);
  CHECK(rename_fails(file, file, false, true) == EEXIST);
  CHECK(rename_fails(file, missing, false, true) == 0);
  CHECK(rename_fails(full_dir, file, false, false) == ENOTDIR);
  CHECK(rename_fails(file, empty_dir, false, false) == EISDIR);
  CHECK(rename_fails(file, full_dir, false, false) == EISDIR);
  CHECK(rename_fails(empty_dir, full_dir, false, false) == ENOTEMPTY);
  CHECK(rename_fails(full_dir, empty_dir, false, false) == 0);
  CHECK(rename_fails(file, file, false, false) == 0);
}

TEST_CASE("L3: pathname Unix connects only to the session's own sockets", "[X1][L3]") {
  auto r = dispatch_rules();
  auto v = decide_unix_connect(r, "/w/host.sock", false);
  CHECK_FALSE(v.allowed);
  CHECK(v.action == "network-outbound");
  CHECK(v.target == "unix:/w/host.sock");
  CHECK(decide_unix_connect(r, "/w/mine.sock", true).allowed);
}

TEST_CASE("X1: the rule set survives ccsb-init's arguments", "[X1]") {
  auto r = absent_rules();
  auto a = to_args(r);
  rule_set back = rule_set::none();
  REQUIRE(a.size() % 2 == 0);
  for (std::size_t i = 0; i < a.size(); i += 2) {
    REQUIRE(is_broker_option(a[i]));
    REQUIRE(parse_arg(back, a[i], a[i + 1]));
  }
  CHECK(back == r);
  CHECK_FALSE(parse_arg(back, "--broker-root", "relative"));
  CHECK_FALSE(parse_arg(back, "--broker-root", "/a/../b"));
  CHECK_FALSE(parse_arg(back, "--broker-name", "a/b"));
  CHECK_FALSE(parse_arg(back, "--broker-git", "yes"));
  CHECK_FALSE(parse_arg(back, "--broker-nope", "x"));
  for (const char* bad : {"", "relative", "/a/../b", "/a/", "/", "/a//b"}) {
    INFO(bad);
    auto e = parse_arg(back, "--broker-deny", bad);
    REQUIRE_FALSE(e);
    CHECK_THAT(e.err().what(), Catch::Contains("--broker-deny"));
  }
  CHECK(back == r); // a refused option changes nothing
}

namespace {
rule_set linked_rules(std::string branch) {
  rule_set r = dispatch_rules();
  r.roots.push_back("/p/orig/.git");
  r.linked.push_back({"/p/orig/.git/worktrees/a1", std::move(branch)});
  return r;
}
} // namespace

TEST_CASE("X1 P2: in a linked worktree's common dir only its admin dir, new objects and its own branch change",
          "[X1][P2]") {
  auto r = linked_rules("refs/heads/feat/a1");
  const std::string C = "/p/orig/.git";
  for (op o : {op::create, op::write, op::replace, op::remove})
    for (const char* p : {"/worktrees/a1/index", "/worktrees/a1/logs/HEAD", "/worktrees/a1/rebase-merge/done",
                          "/refs/heads/feat/a1", "/refs/heads/feat/a1.lock", "/logs/refs/heads/feat/a1",
                          "/logs/refs/heads/feat/a1.lock", "/refs/stash", "/logs/refs/stash.lock"}) {
      INFO(p << " " << to_string(o));
      CHECK(decide(r, o, C + p).allowed);
    }
  for (const char* p : {"/objects/ab", "/refs/heads/feat", "/logs", "/logs/refs/heads/feat", "/objects/ab/tmp_obj_x1"})
    CHECK(decide(r, op::create, C + p).allowed);
  CHECK(decide(r, op::remove, C + "/objects/ab/tmp_obj_x1").allowed);
  CHECK_FALSE(decide(r, op::replace, C + "/objects/ab/tmp_obj_x1").allowed);
  const std::string obj = "/objects/ab/" + std::string(38, 'c');
  CHECK(linked_object_id(r, C + obj) == "ab" + std::string(38, 'c'));
  CHECK(linked_object_id(r, "/w/.git" + obj).empty());
  for (op o : {op::create, op::write, op::replace, op::remove}) {
    INFO(to_string(o));
    CHECK_FALSE(decide(r, o, C + obj).allowed); // named by the broker only, after its check
    for (const char* p : {"/refs/heads/main", "/refs/heads/feat/a2", "/refs/heads/feat/a1x", "/refs/tags/v1",
                          "/packed-refs", "/packed-refs.lock", "/config", "/hooks/pre-commit", "/info/exclude",
                          "/HEAD", "/description", "/objects/pack/pack-1.pack", "/objects/info/alternates",
                          "/objects/incoming-x/ab", "/worktrees/a2/HEAD", "/worktrees/a1/commondir",
                          "/worktrees/a1/gitdir", "/worktrees/a1/config.worktree", "/worktrees/a1/hooks/x",
                          "/logs/refs/heads/main", "/objects/ab/" "0123"}) {
      INFO(p);
      CHECK_FALSE(decide(r, o, C + p).allowed);
    }
  }
  for (const char* p : {"/refs/heads/feat", "/refs/heads", "/objects/ab", "/worktrees/a1", "/worktrees"}) {
    INFO(p);
    CHECK_FALSE(decide(r, op::remove, C + p).allowed);
  }
  // The original's working files, wherever visible; a root nested in it stays a root.
  CHECK_FALSE(decide(r, op::write, "/p/orig/README").allowed);
  CHECK_FALSE(decide(r, op::create, "/p/orig/new").allowed);
  auto nested = r;
  nested.roots.push_back("/p/orig/.wt/a1");
  CHECK(decide(nested, op::create, "/p/orig/.wt/a1/file").allowed);
  // A detached HEAD: no branch moves.
  auto d = linked_rules("");
  CHECK_FALSE(decide(d, op::create, C + "/refs/heads/feat/a1.lock").allowed);
  CHECK(decide(d, op::write, C + "/worktrees/a1/HEAD").allowed);
  // Two worktrees of one common dir: each its own admin dir.
  auto two = linked_rules("refs/heads/a1");
  two.linked.push_back({"/p/orig/.git/worktrees/a2", "refs/heads/a2"});
  CHECK(decide(two, op::write, C + "/worktrees/a2/index").allowed);
  CHECK(decide(two, op::create, C + "/refs/heads/a2.lock").allowed);
  CHECK_FALSE(decide(two, op::create, C + "/refs/heads/a3.lock").allowed);
}

TEST_CASE("X1 P2: a linked worktree survives ccsb-init's arguments, and only a branch ref is taken", "[X1][P2]") {
  auto r = linked_rules("refs/heads/feat/a1");
  r.linked.push_back({"/p/orig/.git/worktrees/a2", ""});
  auto a = to_args(r);
  rule_set back = rule_set::none();
  for (std::size_t i = 0; i + 1 < a.size(); i += 2) REQUIRE(parse_arg(back, a[i], a[i + 1]));
  CHECK(back.linked == r.linked);
  for (const char* bad : {"/p/orig/.git/worktrees/a1", "refs/tags/v1:/p/.git/worktrees/a", "refs/heads/a:/p/.git/a",
                          "refs/heads/a..b:/p/.git/worktrees/a", "refs/heads/a.lock:/p/.git/worktrees/a",
                          "refs/heads/a b:/p/.git/worktrees/a", "refs/heads/a:relative/worktrees/a",
                          "refs/heads/a:/worktrees/a"}) {
    INFO(bad);
    CHECK_FALSE(parse_arg(back, "--broker-linked", bad));
  }
  CHECK(is_branch_ref("refs/heads/feature/x-1"));
  CHECK_FALSE(is_branch_ref("refs/heads/"));
  CHECK_FALSE(is_branch_ref("refs/heads/.hidden"));
  CHECK_FALSE(is_branch_ref("refs/heads/a/"));
}

TEST_CASE("X1 P5: git worktree add inside a root is stopped before it writes", "[X1][P5]") {
  auto r = dispatch_rules();
  CHECK_FALSE(decide(r, op::create, "/w/.git/worktrees").allowed);
  CHECK_FALSE(decide(r, op::create, "/w/.git/worktrees/x").allowed);
  CHECK_FALSE(decide(r, op::create, "/w/sub/.git/worktrees/x").allowed);
  CHECK(decide(r, op::write, "/w/.git/worktrees/x/index").allowed);
  CHECK(decide(r, op::remove, "/w/.git/worktrees/x").allowed); // git worktree prune
  CHECK(is_branch_lock(r, "/w/.git/refs/heads/x.lock"));
  CHECK(is_branch_lock(r, "/w/.git/refs/heads/a/b.lock"));
  CHECK_FALSE(is_branch_lock(r, "/w/.git/refs/tags/x.lock"));
  CHECK_FALSE(is_branch_lock(r, "/w/.git/refs/heads/x"));
  CHECK_FALSE(is_branch_lock(r, "/tmp/.git/refs/heads/x.lock"));
  const std::vector<std::string> add{"git", "-C", "d", "worktree", "add", "../x"};
  const std::vector<std::string> add_path{"/usr/bin/git", "worktree", "add", "-b", "n", "x"};
  const std::vector<std::string> list{"git", "worktree", "list"};
  const std::vector<std::string> other{"/bin/sh", "worktree", "add"};
  CHECK(is_git_worktree_add(add));
  CHECK(is_git_worktree_add(add_path));
  CHECK_FALSE(is_git_worktree_add(list));
  CHECK_FALSE(is_git_worktree_add(other));
}

TEST_CASE("X1 P2: a loose object's name is the SHA-1 of its inflated bytes", "[X1][P2]") {
  auto id = [](std::string_view bytes) {
    sha1 h;
    h.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    return h.hex();
  };
  using namespace std::string_view_literals;
  CHECK(id("blob 0\0"sv) == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"); // git's empty blob
  CHECK(id("blob 6\0hello\n"sv) == "ce013625030ba8dba906f756967f9e9ca394464a");
  CHECK(id(std::string(1000, 'a')) == "291e9a6c66994949b57ba5e650361e98fc36b1ba");
  CHECK(loose_object_header_ok("blob 6\0hello\n"sv, 13));
  CHECK_FALSE(loose_object_header_ok("blob 6\0hello\n"sv, 14));
  CHECK_FALSE(loose_object_header_ok("evil 6\0hello\n"sv, 13));
  CHECK_FALSE(loose_object_header_ok("blob \0"sv, 6));
}
