// P1-P8, T2, E1-E3, N2: compiling a spec into one backend-neutral policy.
#include "ccsb/policy.hpp"
#include "ccsb/session_environment.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

using namespace ccsb;

namespace {

// A host where /tmp and /var are symlinks (as on macOS) and
// /home/u/link-repo points into the protected checkout.
host_facts fake_host() {
  host_facts f;
  f.home = "/home/u";
  f.resolve = [](const std::string& p) -> std::optional<std::string> {
    static const std::map<std::string, std::string> links = {
        {"/tmp", "/private/tmp"}, {"/var", "/private/var"}, {"/home/u/link-repo", "/src/repo"}};
    for (const auto& [from, to] : links)
      if (p == from || p.rfind(from + "/", 0) == 0) return to + p.substr(from.size());
    if (p.rfind("/nonexistent", 0) == 0) return std::nullopt;
    return p;
  };
  f.kind = [](const std::string&) { return path_kind::missing; }; // no .git files
  f.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"LANG", "C.UTF-8"},
           {"GITHUB_TOKEN", "ghp_secret"}, {"LD_PRELOAD", "/evil.so"}, {"SOME_RANDOM", "x"}};
  return f;
}

sandbox_spec base_spec() {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/work/tree", "/work/tree", false}, {"/work/ref", "/work/ref", true}};
  s.protected_paths = {"/work/tree/orig"};
  s.runner_state_dirs = {"/home/u/.claude/run"};
  return s;
}

bool has_path(const std::vector<path_rule>& v, std::string_view p) {
  return std::any_of(v.begin(), v.end(), [&](const path_rule& r) { return r.path == p; });
}

} // namespace

TEST_CASE("P1: chat keeps bind mounts writable unless readOnly", "[P1]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK(has_path(pol->write_allow, "/work/tree"));
  CHECK_FALSE(has_path(pol->write_allow, "/work/ref"));
  auto tree = std::find_if(pol->mounts.begin(), pol->mounts.end(), [](auto& m) { return m.host_path == "/work/tree"; });
  REQUIRE(tree != pol->mounts.end());
  CHECK(tree->writable);
}

TEST_CASE("P1: review, plan and orchestrate make every bind mount read-only", "[P1]") {
  for (auto m : {mode::review, mode::plan, mode::orchestrate}) {
    auto spec = base_spec();
    spec.mode = m;
    auto pol = compile(spec, profile::dispatch, fake_host());
    REQUIRE(pol);
    for (const auto& mount : pol->mounts) {
      if (mount.host_path == "/home/u/.claude/run") continue; // P3
      INFO(mount.host_path);
      CHECK_FALSE(mount.writable);
    }
    CHECK_FALSE(has_path(pol->write_allow, "/work/tree"));
    for (const auto& g : pol->write_deny_globs) CHECK(g.root == "/home/u/.claude/run"); // only the state dir
  }
}

TEST_CASE("P2: protected paths are never writable, chat included", "[P2]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK(has_path(pol->write_deny, "/work/tree/orig"));
  for (const auto& a : pol->write_allow) CHECK_FALSE(within(a.path, "/work/tree/orig"));

  // A bind mount of the protected checkout itself becomes read-only.
  auto spec = base_spec();
  spec.bind_mounts.push_back({"/work/tree/orig", "/work/tree/orig", false});
  auto pol2 = compile(spec, profile::dispatch, fake_host());
  REQUIRE(pol2);
  for (const auto& m : pol2->mounts)
    if (m.host_path == "/work/tree/orig") CHECK_FALSE(m.writable);

  // A bind whose resolved spelling lands in a protected path is read-only,
  // exactly like one spelled literally there (decided on the resolved path).
  auto spec3 = base_spec();
  spec3.protected_paths = {"/src/repo"};
  spec3.bind_mounts = {{"/home/u/link-repo", "/home/u/link-repo", false}};
  auto pol3 = compile(spec3, profile::dispatch, fake_host());
  REQUIRE(pol3);
  for (const auto& m : pol3->mounts) CHECK_FALSE((m.host_path == "/src/repo" && m.writable));
  for (const auto& a : pol3->write_allow) CHECK_FALSE(within(a.path, "/src/repo"));

  // A runner state dir inside a protected path is refused.
  auto spec4 = base_spec();
  spec4.runner_state_dirs = {"/work/tree/orig/state"};
  auto pol4 = compile(spec4, profile::dispatch, fake_host());
  REQUIRE_FALSE(pol4);
  CHECK(pol4.err().field == "runnerStateDirs[0]");
}

TEST_CASE("P3: runner state dirs are writable in every mode", "[P3]") {
  for (auto m : {mode::chat, mode::review, mode::plan, mode::orchestrate}) {
    auto spec = base_spec();
    spec.mode = m;
    auto pol = compile(spec, profile::dispatch, fake_host());
    REQUIRE(pol);
    CHECK(has_path(pol->write_allow, "/home/u/.claude/run"));
  }
}

TEST_CASE("P4: the read-deny set covers the credential stores, each with a reason", "[P4]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  for (const char* p : {"/home/u/.ssh", "/home/u/.aws", "/home/u/.gnupg", "/home/u/.config/gh",
                        "/home/u/Library/Keychains", "/home/u/.netrc", "/home/u/.git-credentials",
                        "/home/u/.docker/config.json", "/home/u/.kube", "/home/u/.config/gcloud",
                        "/home/u/.azure", "/home/u/.npmrc", "/home/u/.pypirc"}) {
    INFO(p);
    CHECK(has_path(pol->read_deny, p));
  }
  for (const auto& r : pol->read_deny) CHECK_FALSE(r.why.empty());
  for (const auto& e : kReadDenyPaths) CHECK_FALSE(e.why.empty());
}

TEST_CASE("P5: the mandatory write-deny set holds inside writable roots", "[P5]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  for (const char* p : {"/home/u/.bashrc", "/home/u/.bash_profile", "/home/u/.bash_login", "/home/u/.profile",
                        "/home/u/.zshrc", "/home/u/.zshenv", "/home/u/.zprofile", "/home/u/.zlogin",
                        "/home/u/.gitconfig", "/home/u/.claude", "/home/u/.claude.json",
                        "/work/tree/.git/hooks", "/work/tree/.git/config", "/work/tree/.claude",
                        "/work/tree/orig"}) {
    INFO(p);
    CHECK(has_path(pol->write_deny, p));
  }
  // Read-only roots need no per-root entries.
  CHECK_FALSE(has_path(pol->write_deny, "/work/ref/.git/hooks"));
}

TEST_CASE("P3: a P5 default inside a runner state dir yields to it", "[P3][P5]") {
  auto spec = base_spec();
  spec.runner_state_dirs = {"/home/u/.claude"};
  auto pol = compile(spec, profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK_FALSE(has_path(pol->write_deny, "/home/u/.claude"));
  CHECK(has_path(pol->write_allow, "/home/u/.claude"));
  CHECK(has_path(pol->write_deny, "/home/u/.claude.json"));
}

TEST_CASE("P6: denied paths appear literally and resolved, globs untouched, no duplicates", "[P6]") {
  auto spec = base_spec();
  spec.bind_mounts.push_back({"/tmp/scratch", "/tmp/scratch", false});
  spec.protected_paths = {"/tmp/scratch/orig", "/nonexistent/repo", "/work/tree/orig", "/work/tree/orig/"};
  auto pol = compile(spec, profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK(has_path(pol->write_deny, "/tmp/scratch/orig"));
  CHECK(has_path(pol->write_deny, "/private/tmp/scratch/orig"));
  CHECK(has_path(pol->write_deny, "/nonexistent/repo")); // unresolvable: kept as written
  CHECK(has_path(pol->write_allow, "/private/tmp/scratch"));
  CHECK(has_path(pol->write_deny, "/private/tmp/scratch/.git/hooks"));
  auto dup = [](const std::vector<path_rule>& v) {
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i].path == v[i - 1].path) return true;
    return false;
  };
  CHECK_FALSE(dup(pol->read_deny));
  CHECK_FALSE(dup(pol->write_deny));
  CHECK_FALSE(dup(pol->write_allow));
  CHECK(std::is_sorted(pol->write_deny.begin(), pol->write_deny.end()));
  for (const auto& g : pol->write_deny_globs) CHECK(is_glob(g.glob()));
}

TEST_CASE("P7: dispatch requires the .env, *.key, *.pem globs in every writable root", "[P7]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK(pol->requires_glob_denials());
  std::vector<std::string> globs;
  for (const auto& g : pol->write_deny_globs) globs.push_back(g.glob());
  for (const char* g : {"/work/tree/**/.env", "/work/tree/**/*.key", "/work/tree/**/*.pem",
                        "/home/u/.claude/run/**/.env"}) {
    INFO(g);
    CHECK(std::find(globs.begin(), globs.end(), g) != globs.end());
  }
  auto spec_only = compile(base_spec(), profile::spec, fake_host());
  REQUIRE(spec_only);
  CHECK_FALSE(spec_only->requires_glob_denials());
  CHECK(spec_only->read_deny == pol->read_deny); // the same P4/P5 sets otherwise
  CHECK(spec_only->write_deny == pol->write_deny);
}

TEST_CASE("P8: compiling is deterministic and touches nothing", "[P8]") {
  auto a = compile(base_spec(), profile::dispatch, fake_host());
  auto b = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
  CHECK(a->network.kind == network_kind::proxied);
  CHECK(a->exec.deny_in_writable);
  CHECK_FALSE(a->exec.denied_binaries.empty());
}

TEST_CASE("P8: bad specs fail closed with the field named", "[P8][S2]") {
  auto rel = base_spec();
  rel.bind_mounts[0].host_path = "work/tree";
  auto r1 = compile(rel, profile::dispatch, fake_host());
  REQUIRE_FALSE(r1);
  CHECK(r1.err().field == "bindMounts[0].hostPath");

  auto guest = base_spec();
  guest.bind_mounts[1].guest_path = "/elsewhere";
  auto r2 = compile(guest, profile::dispatch, fake_host());
  REQUIRE_FALSE(r2);
  CHECK(r2.err().field == "bindMounts[1].guestPath");

  auto pat = base_spec();
  pat.egress_allowlist = {"ok.example.com", "*.com"};
  auto r3 = compile(pat, profile::dispatch, fake_host());
  REQUIRE_FALSE(r3);
  CHECK(r3.err().field == "egressAllowlist[1]");

  auto prot = base_spec();
  prot.protected_paths = {"relative/path"};
  auto r4 = compile(prot, profile::dispatch, fake_host());
  REQUIRE_FALSE(r4);
  CHECK(r4.err().field == "protectedPaths[0]");
}

TEST_CASE("T2: the terminal profile: home and workdir writable, network open, core secrets denied", "[T2]") {
  auto spec = base_spec();
  spec.guest_workdir = "/work/tree";
  auto pol = compile(spec, profile::terminal, fake_host());
  REQUIRE(pol);
  CHECK(pol->network.kind == network_kind::open);
  CHECK(has_path(pol->write_allow, "/home/u"));
  CHECK(has_path(pol->write_allow, "/work/tree"));
  for (const char* p : {"/home/u/.ssh", "/home/u/.aws", "/home/u/.gnupg", "/home/u/.config/gh",
                        "/home/u/Library/Keychains"})
    CHECK(has_path(pol->read_deny, p));
  CHECK_FALSE(pol->requires_glob_denials());
  CHECK(pol->workdir == "/work/tree");
}

TEST_CASE("N6: networkEnabled false keeps the proxy with an empty allowlist", "[N6]") {
  auto spec = base_spec();
  spec.network_enabled = false;
  spec.egress_allowlist = {"example.com"};
  auto pol = compile(spec, profile::dispatch, fake_host());
  REQUIRE(pol);
  CHECK(pol->network.kind == network_kind::proxied);
  CHECK_FALSE(pol->network.enabled);
  CHECK(pol->network.allow.empty());
}

TEST_CASE("E1: the child environment is built explicitly", "[E1]") {
  auto pol = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(pol);
  auto has = [&](std::string_view n) {
    return std::any_of(pol->environment.begin(), pol->environment.end(), [&](const env_var& v) { return v.name == n; });
  };
  CHECK(has("PATH"));
  CHECK(has("HOME"));
  CHECK(has("LANG"));
  CHECK_FALSE(has("SOME_RANDOM")); // not passed by policy
  CHECK_FALSE(has("GITHUB_TOKEN"));
  CHECK_FALSE(has("LD_PRELOAD"));
}

TEST_CASE("E3: sanitisation removes credentials and injection vectors by rule", "[E3]") {
  env_list in = {{"PATH", "/bin"},          {"LD_PRELOAD", "x"},       {"ld_library_path", "x"},
                 {"DYLD_INSERT_LIBRARIES", "x"}, {"BASH_ENV", "x"},   {"BASH_FUNC_foo%%", "() { :; }"},
                 {"GITHUB_TOKEN", "x"},     {"MY_SERVICE_TOKEN", "x"}, {"AWS_SECRET_ACCESS_KEY", "x"},
                 {"AWS_PROFILE", "prod"},   {"ANTHROPIC_API_KEY", "x"}, {"db_password", "x"},
                 {"NODE_OPTIONS", "--require /x"}, {"GIT_CONFIG_PARAMETERS", "x"}, {"SSH_AUTH_SOCK", "/s"},
                 {"http_proxy", "http://evil"}, {"PYTHONPATH", "/x"}, {"TERM", "xterm"}, {"LANG", "C"},
                 {"", "x"},                 {"A=B", "x"},              {"EDITOR", "vim"}};
  auto out = sanitize_environment(in);
  std::vector<std::string> kept;
  for (const auto& v : out.kept) kept.push_back(v.name);
  CHECK(kept == std::vector<std::string>{"PATH", "TERM", "LANG"});
  CHECK(out.removed.size() == in.size() - 3);
  for (const auto& r : out.removed) CHECK_FALSE(r.why.empty());
}

TEST_CASE("N2: proxy variables point at the session's proxies", "[N2][E2][E4]") {
  auto env = proxy_environment("127.0.0.1:3128", "127.0.0.1:1080", "helper --ssh-proxy 127.0.0.1:1080 %h %p");
  std::map<std::string, std::string> m;
  for (const auto& v : env) m[v.name] = v.value;
  CHECK(m.size() == env.size()); // no variable twice
  CHECK(m["HTTP_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["https_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["ALL_PROXY"] == "socks5h://127.0.0.1:1080");
  CHECK(m["NO_PROXY"] == "localhost,127.0.0.1,::1");
  CHECK(m["no_proxy"] == "localhost,127.0.0.1,::1");
  CHECK(m["GIT_SSH_COMMAND"] ==
        "ssh -o ProxyCommand='helper --ssh-proxy 127.0.0.1:1080 %h %p' -o ControlMaster=no -o ControlPath=none");
  // E4: the clients with their own variables.
  CHECK(m["FTP_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["ftp_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["npm_config_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["npm_config_https_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["npm_config_noproxy"] == "localhost,127.0.0.1,::1");
  CHECK(m["YARN_HTTP_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["YARN_HTTPS_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["grpc_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["ws_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["wss_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["RSYNC_PROXY"] == "127.0.0.1:3128"); // host:port, rsync takes no scheme
  CHECK(m["JAVA_TOOL_OPTIONS"] == "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 "
                                  "-Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=localhost|127.*|[::1]");
  CHECK(m["NODE_USE_ENV_PROXY"] == "1");
  // Variables no client reads, or whose client reads the ones above: not set.
  for (const char* absent : {"YARN_NO_PROXY", "BUNDLE_HTTP_PROXY", "BUNDLE_HTTPS_PROXY", "DOCKER_HTTP_PROXY",
                             "DOCKER_HTTPS_PROXY", "CLOUDSDK_PROXY_TYPE", "CLOUDSDK_PROXY_ADDRESS", "PIP_PROXY",
                             "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "NODE_OPTIONS"})
    CHECK(m.count(absent) == 0);
  // The source of docs/clients.md's table names every variable that is set.
  for (const auto& [name, value] : m) {
    bool listed = std::any_of(std::begin(kProxyEnvironmentClients), std::end(kProxyEnvironmentClients),
                              [&](const proxy_variable_client& c) {
                                std::string names(c.name);
                                std::size_t at = names.find(name);
                                return at != std::string::npos &&
                                       (at + name.size() == names.size() || names[at + name.size()] == ',');
                              });
    INFO(name);
    CHECK(listed);
  }
}

TEST_CASE("N2: GIT_SSH_COMMAND names the known hosts it is given, and keeps sharing off", "[N2][E4]") {
  auto env = proxy_environment("127.0.0.1:3128", "127.0.0.1:1080", "helper %h %p", "/run/ccsb/known_hosts");
  std::map<std::string, std::string> m;
  for (const auto& v : env) m[v.name] = v.value;
  CHECK(m["GIT_SSH_COMMAND"] == "ssh -o ProxyCommand='helper %h %p' -o ControlMaster=no -o ControlPath=none "
                                "-o UserKnownHostsFile='/run/ccsb/known_hosts'");
  CHECK(m["GIT_SSH_COMMAND"].find("StrictHostKeyChecking") == std::string::npos);
}

TEST_CASE("E3: every variable the policy sets is one E3 removes when inherited", "[E3][E4]") {
  // So an inherited value can never sit beside (or be merged with) the
  // policy's: JAVA_TOOL_OPTIONS=-javaagent:… is gone before the policy's
  // own is added.
  for (const auto& v : proxy_environment("127.0.0.1:3128", "127.0.0.1:1080", "helper %h %p", "/k")) {
    INFO(v.name);
    CHECK_FALSE(environment_removal_reason(v.name, v.value).empty());
  }
  auto s = sanitize_environment({{"JAVA_TOOL_OPTIONS", "-javaagent:/tmp/evil.jar"}, {"PATH", "/usr/bin"}});
  CHECK(s.kept == env_list{{"PATH", "/usr/bin"}});
}

TEST_CASE("N2: the known hosts to hand ssh are the user's ~/.ssh/known_hosts, resolved, and ~/.ssh stays denied",
          "[N2][E4][P4]") {
  auto pol = compile(base_spec(), profile::spec, fake_host());
  REQUIRE(pol);
  CHECK(pol->ssh_known_hosts == std::vector<std::string>{"/home/u/.ssh/known_hosts"});
  CHECK(has_path(pol->read_deny, "/home/u/.ssh"));
  auto term = compile(base_spec(), profile::terminal, fake_host());
  REQUIRE(term);
  CHECK(term->ssh_known_hosts.empty()); // the terminal profile has no proxies and no GIT_SSH_COMMAND
}

TEST_CASE("P5: a writable .git directory gets its hooks and config denied directly", "[P5]") {
  auto spec = base_spec();
  spec.bind_mounts = {{"/work/repo/.git", "/work/repo/.git", false}};
  auto pol = compile(spec, profile::spec, fake_host());
  REQUIRE(pol);
  CHECK(has_path(pol->write_deny, "/work/repo/.git/hooks"));
  CHECK(has_path(pol->write_deny, "/work/repo/.git/config"));
  CHECK_FALSE(has_path(pol->write_deny, "/work/repo/.git/.git/hooks"));
  CHECK_FALSE(has_path(pol->write_deny, "/work/repo/.git/.bashrc"));
}

TEST_CASE("P5: a .git file in a writable mount is denied with the git paths of the directories it names, in every "
          "profile",
          "[P5][T2]") {
  auto f = fake_host();
  f.kind = [](const std::string& p) { return p == "/work/tree/.git" ? path_kind::file : path_kind::missing; };
  f.gitdirs = [](const std::string& p) {
    return p == "/work/tree/.git" ? std::vector<std::string>{"/repos/main/.git/worktrees/tree", "/repos/main/.git/"}
                                  : std::vector<std::string>{};
  };
  for (profile base : {profile::spec, profile::dispatch, profile::terminal}) {
    INFO(to_string(base));
    auto pol = compile(base_spec(), base, f);
    REQUIRE(pol);
    CHECK(has_path(pol->write_deny, "/work/tree/.git"));
    // The common dir: hooks and config; each: commondir and config.worktree;
    // the worktree's administrative directory: gitdir.
    for (const char* p : {"/repos/main/.git/hooks", "/repos/main/.git/config", "/repos/main/.git/commondir",
                          "/repos/main/.git/config.worktree", "/repos/main/.git/worktrees/tree/commondir",
                          "/repos/main/.git/worktrees/tree/config.worktree", "/repos/main/.git/worktrees/tree/gitdir"}) {
      INFO(p);
      CHECK(has_path(pol->write_deny, p));
    }
    CHECK_FALSE(has_path(pol->write_deny, "/repos/main/.git/worktrees/tree/hooks"));
    CHECK_FALSE(has_path(pol->write_deny, "/repos/main/.git/gitdir"));
    // Sorted, one entry per path (the renderers rely on it).
    CHECK(std::is_sorted(pol->write_deny.begin(), pol->write_deny.end()));
    CHECK(std::adjacent_find(pol->write_deny.begin(), pol->write_deny.end(), [](const path_rule& a, const path_rule& b) {
            return a.path == b.path;
          }) == pol->write_deny.end());
  }
  // Read-only mounts (review) have no .git file to deny; unknown git dirs
  // leave the file itself.
  auto review = base_spec();
  review.mode = mode::review;
  auto ro = compile(review, profile::spec, f);
  REQUIRE(ro);
  CHECK_FALSE(has_path(ro->write_deny, "/work/tree/.git"));
  f.gitdirs = nullptr;
  auto unknown = compile(base_spec(), profile::spec, f);
  REQUIRE(unknown);
  CHECK(has_path(unknown->write_deny, "/work/tree/.git"));
  CHECK_FALSE(has_path(unknown->write_deny, "/repos/main/.git/hooks"));
  // No path lookup: nothing can be decided about .git files (fail closed).
  f.kind = nullptr;
  auto none = compile(base_spec(), profile::spec, f);
  REQUIRE_FALSE(none);
  CHECK(none.err().field == "kind");
}

TEST_CASE("P7 L4: a policy with required globs runs only on a backend that enforces creation rules", "[P7][L4][X1]") {
  auto dispatch = compile(base_spec(), profile::dispatch, fake_host());
  REQUIRE(dispatch);
  REQUIRE(dispatch->requires_glob_denials());
  auto refused = check_enforceable(*dispatch, {.creation_rules = false});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unenforceable);
  CHECK(refused.err().field == "backend");
  CHECK_THAT(refused.err().message, Catch::Contains("P7/L4") && Catch::Contains(".env, *.key, *.pem") &&
                                        Catch::Contains("X1"));
  CHECK(check_enforceable(*dispatch, {.creation_rules = true}));
}

TEST_CASE("P5 L3 X1: the spec profile drops only the P7 globs: it needs the broker too and is refused without it",
          "[P5][L3][X1]") {
  auto spec = compile(base_spec(), profile::spec, fake_host());
  REQUIRE(spec);
  CHECK_FALSE(spec->requires_glob_denials());
  CHECK(spec->requires_broker());
  auto refused = check_enforceable(*spec, {.creation_rules = false});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unenforceable);
  CHECK(refused.err().field == "backend");
  CHECK_THAT(refused.err().message, Catch::Contains("P5/L3") && Catch::Contains("nested repositories") &&
                                        Catch::Contains("Unix sockets") && Catch::Contains("X1"));
  CHECK(check_enforceable(*spec, {.creation_rules = true}));
}

TEST_CASE("T2 T3: the terminal profile's open network runs only where the broker excepts the host's services",
          "[T2][T3][X1]") {
  auto terminal = compile(base_spec(), profile::terminal, fake_host());
  REQUIRE(terminal);
  CHECK(terminal->requires_broker());
  CHECK_FALSE(terminal->requires_glob_denials());
  auto refused = check_enforceable(*terminal, {.creation_rules = false});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unenforceable);
  CHECK(refused.err().field == "backend");
  CHECK_THAT(refused.err().message, Catch::Contains("T2") && Catch::Contains("link-local") && Catch::Contains("X1"));
  CHECK(check_enforceable(*terminal, {.creation_rules = true}));
}

TEST_CASE("P3: a runner state dir that is also a bind mount stays writable in review", "[P3][P1]") {
  auto spec = base_spec();
  spec.mode = mode::review;
  spec.bind_mounts.push_back({"/home/u/.claude/run", "/home/u/.claude/run", false});
  auto pol = compile(spec, profile::spec, fake_host());
  REQUIRE(pol);
  std::size_t n = 0;
  for (const auto& m : pol->mounts)
    if (m.host_path == "/home/u/.claude/run") {
      ++n;
      CHECK(m.writable);
    }
  CHECK(n == 1);
}

// ---------------------------------------------------------------------------
// Issue 7: path spellings (item 8), the P4/P5 sets as data (items 3, 4, 10),
// dangerous binds (item 12).
// ---------------------------------------------------------------------------

namespace {

// A host with symlinks: /lnk -> /real, /home/u/dots/ssh is the target of
// /home/u/.ssh, /etclink -> /etc, /homelink -> /home/u. Paths under
// /nonexistent and /real/missing do not resolve.
host_facts linked_host() {
  host_facts f = fake_host();
  f.resolve = [](const std::string& p) -> std::optional<std::string> {
    static const std::map<std::string, std::string> links = {
        {"/lnk", "/real"}, {"/etclink", "/etc"}, {"/homelink", "/home/u"}, {"/devlink", "/dev"}};
    if (p.rfind("/nonexistent", 0) == 0 || p.rfind("/real/missing", 0) == 0) return std::nullopt;
    for (const auto& [from, to] : links)
      if (p == from || p.rfind(from + "/", 0) == 0) return to + p.substr(from.size());
    return p;
  };
  return f;
}

const mount_rule* mount_at(const policy& pol, std::string_view p) {
  for (const auto& m : pol.mounts)
    if (m.host_path == p) return &m;
  return nullptr;
}

path_shape shape_of(const std::vector<path_rule>& v, std::string_view p) {
  for (const auto& r : v)
    if (r.path == p) return r.shape;
  FAIL("no rule for " << p);
  return path_shape::file;
}

sandbox_spec bare_spec() {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  return s;
}

} // namespace

TEST_CASE("P4: every P4 and P5 entry says what it is by nature and why", "[P4][P5]") {
  for (const auto& e : kReadDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kTerminalReadDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kSystemReadDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kShellStartupPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kHomeWriteDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kRootWriteDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kGitDirWriteDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kGitCommonDirWriteDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kGitWorktreeAdminWriteDenyPaths) CHECK_FALSE(e.why.empty());
  for (const auto& e : kNeverBoundTrees) CHECK_FALSE(e.why.empty());
  for (const auto& e : kNeverWritableTrees) CHECK_FALSE(e.why.empty());
  for (const auto& e : kNeverWritableItself) CHECK_FALSE(e.why.empty());
  // The shape is data, so a missing ~/.ssh gets a directory placeholder and
  // a missing ~/.netrc a file one (render/bwrap/render.hpp).
  auto pol = compile(base_spec(), profile::spec, fake_host());
  REQUIRE(pol);
  CHECK(shape_of(pol->read_deny, "/home/u/.ssh") == path_shape::dir);
  CHECK(shape_of(pol->read_deny, "/home/u/.kube") == path_shape::dir);
  CHECK(shape_of(pol->read_deny, "/home/u/.gnupg") == path_shape::dir);
  CHECK(shape_of(pol->read_deny, "/home/u/.netrc") == path_shape::file);
  CHECK(shape_of(pol->read_deny, "/home/u/.npmrc") == path_shape::file);
  CHECK(shape_of(pol->read_deny, "/home/u/.docker/config.json") == path_shape::file);
  CHECK(shape_of(pol->write_deny, "/home/u/.claude") == path_shape::dir);
  CHECK(shape_of(pol->write_deny, "/home/u/.local/bin") == path_shape::dir);
  CHECK(shape_of(pol->write_deny, "/home/u/.bashrc") == path_shape::file);
  CHECK(shape_of(pol->write_deny, "/work/tree/.git/hooks") == path_shape::dir);
  CHECK(shape_of(pol->write_deny, "/work/tree/.git/commondir") == path_shape::git_commondir);
  CHECK(shape_of(pol->write_deny, "/work/tree/orig") == path_shape::dir); // protected checkout
}

TEST_CASE("P5: the write-deny set covers SPEC P5 in HOME and in every writable root", "[P5]") {
  auto spec = base_spec();
  spec.bind_mounts.push_back({"/home/u", "/home/u", false});
  auto pol = compile(spec, profile::spec, fake_host());
  REQUIRE(pol);
  // Every shell start-up and logout file, in HOME and in a workspace root.
  for (const char* root : {"/home/u", "/work/tree"})
    for (const char* f : {".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
                          ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout"}) {
      std::string p = std::string(root) + "/" + f;
      INFO(p);
      CHECK(has_path(pol->write_deny, p));
    }
  // Files other programs execute or load from a writable HOME.
  for (const char* p : {"/home/u/.config/fish", "/home/u/.kshrc", "/home/u/.local/bin", "/home/u/bin",
                        "/home/u/.local/lib", "/home/u/.config/systemd",
                        "/home/u/.config/autostart", "/home/u/.gitconfig", "/home/u/.config/git", "/home/u/.vimrc",
                        "/home/u/.vim", "/home/u/.config/nvim", "/home/u/.emacs", "/home/u/.emacs.d",
                        "/home/u/.nanorc", "/home/u/.claude", "/home/u/.claude.json", "/home/u/.codex"}) {
    INFO(p);
    CHECK(has_path(pol->write_deny, p));
  }
  // Per-root tool configs that run commands, and git's redirecting files.
  for (const char* p : {"/work/tree/.gitconfig", "/work/tree/.gitmodules", "/work/tree/.vscode", "/work/tree/.idea",
                        "/work/tree/.mcp.json", "/work/tree/.claude", "/work/tree/.codex", "/work/tree/.cursor",
                        "/work/tree/.ripgreprc", "/work/tree/.git/hooks", "/work/tree/.git/config",
                        "/work/tree/.git/commondir", "/work/tree/.git/config.worktree"}) {
    INFO(p);
    CHECK(has_path(pol->write_deny, p));
  }
  // Decided to stay writable: project code, git's info/ and alternates.
  for (const char* p : {"/work/tree/Makefile", "/work/tree/.git/info", "/work/tree/.git/objects/info/alternates",
                        "/work/tree/.git/worktrees"})
    CHECK_FALSE(has_path(pol->write_deny, p));
  // A writable root that is a .git directory gets the git paths directly.
  auto gd = bare_spec();
  gd.bind_mounts = {{"/work/repo/.git", "/work/repo/.git", false}};
  auto gpol = compile(gd, profile::spec, fake_host());
  REQUIRE(gpol);
  for (const char* p : {"/work/repo/.git/hooks", "/work/repo/.git/config", "/work/repo/.git/commondir",
                        "/work/repo/.git/config.worktree"})
    CHECK(has_path(gpol->write_deny, p));
  CHECK_FALSE(has_path(gpol->write_deny, "/work/repo/.git/.vscode"));
}

TEST_CASE("P6: binds, HOME and denials are decided on the resolved spelling", "[P6][P8][P2][P4]") {
  // --bind LINK/ws where LINK -> /real: the mount, the writable root and the
  // per-root denials are at /real/ws; a protected checkout below it stays
  // read-only whichever spelling names it.
  auto s = bare_spec();
  s.bind_mounts = {{"/lnk/ws", "/lnk/ws", false}};
  s.protected_paths = {"/real/ws/orig"};
  auto pol = compile(s, profile::spec, linked_host());
  REQUIRE(pol);
  REQUIRE(pol->mounts.size() == 1);
  CHECK(pol->mounts[0].host_path == "/real/ws");
  CHECK(pol->mounts[0].guest_path == "/real/ws");
  CHECK(has_path(pol->write_allow, "/real/ws"));
  CHECK_FALSE(has_path(pol->write_allow, "/lnk/ws"));
  CHECK(has_path(pol->write_deny, "/real/ws/.git/hooks"));
  CHECK(has_path(pol->write_deny, "/lnk/ws/.git/hooks")); // P6: the literal spelling too
  CHECK(has_path(pol->write_deny, "/real/ws/orig"));
  CHECK(pol->workdir == "/real/ws");

  // A bind of a symlink to HOME: HOME's secrets are denied at the bound path.
  auto h = bare_spec();
  h.bind_mounts = {{"/homelink", "/homelink", false}};
  auto hp = compile(h, profile::spec, linked_host());
  REQUIRE(hp);
  REQUIRE(mount_at(*hp, "/home/u"));
  CHECK(mount_at(*hp, "/home/u")->writable);
  CHECK(has_path(hp->read_deny, "/home/u/.ssh"));
  CHECK(has_path(hp->write_deny, "/home/u/.bashrc"));

  // HOME itself given through a symlink: both spellings of every secret,
  // also of one that does not exist (resolved through its parent).
  auto f = linked_host();
  f.home = "/homelink";
  auto lp = compile(base_spec(), profile::spec, f);
  REQUIRE(lp);
  CHECK(has_path(lp->read_deny, "/homelink/.ssh"));
  CHECK(has_path(lp->read_deny, "/home/u/.ssh"));
  CHECK(has_path(lp->write_deny, "/home/u/.bashrc"));
}

TEST_CASE("P8: a path bound twice with different flags is read-only", "[P8][P1]") {
  // D/. and D// are D; the same path read-only and writable is read-only.
  for (const char* second : {"/work/tree/.", "/work/tree//", "/work/tree/", "/work/./tree"}) {
    INFO(second);
    auto s = bare_spec();
    s.bind_mounts = {{"/work/tree", "/work/tree", false}, {second, second, true}};
    auto pol = compile(s, profile::spec, fake_host());
    REQUIRE(pol);
    REQUIRE(pol->mounts.size() == 1);
    CHECK_FALSE(pol->mounts[0].writable);
    CHECK(pol->write_allow.empty());
  }
  // A symlink and its target, one read-only: read-only.
  auto s = bare_spec();
  s.bind_mounts = {{"/real/ws", "/real/ws", true}, {"/lnk/ws", "/lnk/ws", false}};
  auto pol = compile(s, profile::spec, linked_host());
  REQUIRE(pol);
  REQUIRE(pol->mounts.size() == 1);
  CHECK_FALSE(pol->mounts[0].writable);
  // The terminal profile's writable HOME yields to a read-only bind of HOME.
  auto t = bare_spec();
  t.bind_mounts = {{"/home/u", "/home/u", true}};
  auto tp = compile(t, profile::terminal, fake_host());
  REQUIRE(tp);
  REQUIRE(mount_at(*tp, "/home/u"));
  CHECK_FALSE(mount_at(*tp, "/home/u")->writable);
}

TEST_CASE("P8: a bind source or state dir that does not resolve is an error naming the field", "[P8][S2]") {
  auto s = base_spec();
  s.bind_mounts.push_back({"/nonexistent/ws", "/nonexistent/ws", false});
  auto r = compile(s, profile::spec, fake_host());
  REQUIRE_FALSE(r);
  CHECK(r.err().field == "bindMounts[2].hostPath");
  auto sd = base_spec();
  sd.runner_state_dirs = {"/home/u/.claude/run", "/nonexistent/state"};
  auto r2 = compile(sd, profile::spec, fake_host());
  REQUIRE_FALSE(r2);
  CHECK(r2.err().field == "runnerStateDirs[1]");
  // No resolver: nothing can be decided on resolved paths (fail closed).
  auto f = fake_host();
  f.resolve = nullptr;
  auto r3 = compile(base_spec(), profile::spec, f);
  REQUIRE_FALSE(r3);
  CHECK(r3.err().field == "resolve");
}

TEST_CASE("P8: binds of the host's system trees are refused, checked on the resolved spelling", "[P8][L1]") {
  struct refused {
    const char* path;
    bool read_only;
  };
  for (auto [path, ro] : {refused{"/", true}, refused{"/", false}, refused{"/etc", false},
                          refused{"/etclink", false}, refused{"/etc/cron.d", false}, refused{"/usr", false},
                          refused{"/usr/local/bin", false}, refused{"/bin", false}, refused{"/lib64", false},
                          refused{"/boot", false}, refused{"/var", false}, refused{"/home", false},
                          refused{"/tmp", false}, refused{"/dev", true}, refused{"/devlink", true},
                          refused{"/dev/kvm", true}, refused{"/proc", true}, refused{"/proc/1", true},
                          refused{"/sys", true}, refused{"/sys/fs/cgroup", false}}) {
    INFO(path << (ro ? ":ro" : ""));
    auto s = base_spec();
    s.bind_mounts.push_back({path, path, ro});
    auto r = compile(s, profile::spec, linked_host());
    REQUIRE_FALSE(r);
    CHECK(r.err().field == "bindMounts[2].hostPath");
  }
  // Read-only binds of /etc and /usr are fine: the secrets of /etc are masked.
  for (const char* ok_path : {"/etc", "/etclink", "/usr", "/var/lib/ci", "/tmp/job"}) {
    INFO(ok_path);
    auto s = base_spec();
    s.bind_mounts.push_back({ok_path, ok_path, std::string(ok_path).rfind("/tmp", 0) != 0 &&
                                                   std::string(ok_path).rfind("/var", 0) != 0});
    auto r = compile(s, profile::spec, linked_host());
    REQUIRE(r);
    for (const char* secret : {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key"})
      CHECK(has_path(r->read_deny, secret));
  }
  // In review mode a bind of /etc is read-only, so it is not refused.
  auto rv = base_spec();
  rv.mode = mode::review;
  rv.bind_mounts.push_back({"/etc", "/etc", false});
  CHECK(compile(rv, profile::spec, linked_host()));
  // The terminal profile's roots are checked too.
  auto t = bare_spec();
  t.guest_workdir = "/etc";
  auto tr = compile(t, profile::terminal, linked_host());
  REQUIRE_FALSE(tr);
  CHECK(tr.err().field == "guestWorkdir");
  auto root_home = linked_host();
  root_home.home = "/";
  auto th = compile(bare_spec(), profile::terminal, root_home);
  REQUIRE_FALSE(th);
  CHECK(th.err().field == "home");
}

TEST_CASE("P3: a runner state dir that is /, HOME or an ancestor of a P5 path is refused", "[P3][P5][P8]") {
  for (const char* dir : {"/", "/home/u", "/homelink", "/home", "/home/u/.config", "/home/u/.local", "/work/tree",
                          "/work", "/dev/shm", "/etc/ccsb"}) {
    INFO(dir);
    auto s = base_spec();
    s.runner_state_dirs = {"/home/u/.claude/run", dir};
    auto r = compile(s, profile::spec, linked_host());
    REQUIRE_FALSE(r);
    CHECK(r.err().field == "runnerStateDirs[1]");
  }
  // A state dir that IS a P5 path (a managed ~/.claude) or lies below one,
  // or elsewhere, is fine.
  for (const char* dir : {"/home/u/.claude", "/home/u/.claude/projects", "/home/u/.cache/runner", "/var/lib/runner"}) {
    INFO(dir);
    auto s = base_spec();
    s.runner_state_dirs = {dir};
    CHECK(compile(s, profile::spec, linked_host()));
  }
}

// ---------------------------------------------------------------------------
// Issue 11 (E4): toolchains on PATH are visible read-only.
// ---------------------------------------------------------------------------
namespace {

// A host where only the listed paths exist; `links` are symlinks.
host_facts toolchain_host(const std::string& path_var, std::vector<std::string> existing,
                          std::map<std::string, std::string> links = {}) {
  host_facts f;
  f.home = "/home/u";
  f.resolve = [existing, links](const std::string& p) -> std::optional<std::string> {
    for (const auto& [from, to] : links)
      if (p == from || p.rfind(from + "/", 0) == 0) return to + p.substr(from.size());
    for (const auto& e : existing)
      if (p == e || e.rfind(p + "/", 0) == 0 || p == "/") return p; // e and its ancestors exist
    return std::nullopt;
  };
  f.kind = [](const std::string&) { return path_kind::missing; }; // no .git files
  f.env = {{"PATH", path_var}, {"HOME", "/home/u"}};
  return f;
}

sandbox_spec work_spec() {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/work/tree", "/work/tree", false}};
  return s;
}

std::vector<std::string> toolchain_paths(const policy& pol) {
  std::vector<std::string> out;
  for (const auto& t : pol.toolchains) out.push_back(t.path);
  return out;
}

bool mounted_ro(const policy& pol, const std::string& p) {
  return std::any_of(pol.mounts.begin(), pol.mounts.end(),
                     [&](const mount_rule& m) { return m.host_path == p && !m.writable; });
}

bool noted(const policy& pol, const std::string& a, const std::string& b) {
  return std::any_of(pol.notes.begin(), pol.notes.end(), [&](const std::string& n) {
    return n.find(a) != std::string::npos && n.find(b) != std::string::npos;
  });
}

} // namespace

TEST_CASE("E4: PATH directories in HOME and the toolchain homes they need are visible read-only", "[E4][P8]") {
  auto facts = toolchain_host("/home/u/.cargo/bin:/usr/bin:/home/u/.pyenv/shims:/home/u/tools/bin:/opt/x/bin:"
                              "/home/u/missing/bin::relative/bin:/bin",
                              {"/work/tree", "/home/u/.cargo/bin", "/home/u/.rustup/toolchains", "/home/u/.pyenv/shims",
                               "/home/u/tools/bin", "/opt/x/bin", "/usr/bin", "/bin"});
  auto pol = compile(work_spec(), profile::spec, facts);
  REQUIRE(pol);
  CHECK(toolchain_paths(*pol) ==
        std::vector<std::string>{"/home/u/.cargo", "/home/u/.pyenv", "/home/u/.rustup", "/home/u/tools/bin"});
  for (const auto& p : toolchain_paths(*pol)) {
    INFO(p);
    CHECK(mounted_ro(*pol, p));
    CHECK_FALSE(has_path(pol->write_allow, p)); // never writable
  }
  // Outside HOME, missing, empty or relative entries add nothing.
  for (const auto& m : pol->mounts) {
    CHECK(m.host_path != "/opt/x/bin");
    CHECK(m.host_path.find("missing") == std::string::npos);
  }
  // The start-up details say what was added and why.
  CHECK(noted(*pol, "/home/u/.cargo", "visible read-only"));
  CHECK(noted(*pol, "/home/u/.rustup", "PATH has \"/home/u/.cargo/bin\""));
  CHECK(noted(*pol, "/home/u/tools/bin", "visible read-only"));
  // The secrets inside a toolchain home stay read-denied (the renderer masks them).
  CHECK(has_path(pol->read_deny, "/home/u/.cargo/credentials.toml"));
}

TEST_CASE("E4: a PATH entry that is, contains or lies in a secret, or is HOME, is never made visible", "[E4][P4]") {
  auto facts = toolchain_host("/home/u/.ssh:/home/u/.ssh/bin:/home/u:/home:/home/u/.config:/home/u/.aws/bin:"
                              "/home/u/.config/gh/bin:/home/u/.local",
                              {"/work/tree", "/home/u/.ssh/bin", "/home/u/.config/gh/bin", "/home/u/.aws/bin",
                               "/home/u/.local/share/keyrings"});
  auto pol = compile(work_spec(), profile::spec, facts);
  REQUIRE(pol);
  CHECK(pol->toolchains.empty());
  for (const auto& m : pol->mounts) CHECK(m.host_path == "/work/tree");
  CHECK(noted(*pol, "\"/home/u/.ssh\"", "lies inside the read-denied"));
  CHECK(noted(*pol, "\"/home/u/.ssh/bin\"", "lies inside the read-denied"));
  CHECK(noted(*pol, "\"/home/u/.aws/bin\"", "lies inside the read-denied"));
  CHECK(noted(*pol, "\"/home/u/.config/gh/bin\"", "lies inside the read-denied"));
  CHECK(noted(*pol, "\"/home/u\"", "is HOME"));
  CHECK(noted(*pol, "\"/home/u/.config\"", "contains the read-denied \"/home/u/.config/"));
  CHECK(noted(*pol, "\"/home/u/.local\"", "contains the read-denied"));
}

TEST_CASE("E4: a PATH entry in HOME that resolves outside HOME is not made visible", "[E4][P6]") {
  auto facts = toolchain_host("/home/u/bin:/home/u/etc-link", {"/work/tree", "/opt/elsewhere/bin", "/etc"},
                              {{"/home/u/bin", "/opt/elsewhere/bin"}, {"/home/u/etc-link", "/etc"}});
  auto pol = compile(work_spec(), profile::spec, facts);
  REQUIRE(pol);
  CHECK(pol->toolchains.empty());
  CHECK(noted(*pol, "/opt/elsewhere/bin", "resolves outside HOME"));
  CHECK(noted(*pol, "\"/etc\"", "resolves outside HOME"));
}

TEST_CASE("E4: a toolchain already visible through a bind keeps the bind's flags", "[E4][P1]") {
  auto facts = toolchain_host("/home/u/.cargo/bin", {"/work/tree", "/home/u/.cargo/bin", "/home/u/.rustup"});
  auto spec = work_spec();
  spec.bind_mounts.push_back({"/home/u/.cargo", "/home/u/.cargo", false}); // writable, on purpose
  auto pol = compile(spec, profile::spec, facts);
  REQUIRE(pol);
  CHECK(toolchain_paths(*pol) == std::vector<std::string>{"/home/u/.rustup"});
  CHECK(has_path(pol->write_allow, "/home/u/.cargo"));
  CHECK(has_path(pol->write_deny, "/home/u/.cargo/bin")); // P5 still holds inside the writable bind
  CHECK(noted(*pol, "/home/u/.cargo", "already makes it visible"));
}

TEST_CASE("E4: the option turns toolchains off and the terminal profile adds none (its HOME is bound)", "[E4][T2]") {
  auto facts = toolchain_host("/home/u/.cargo/bin", {"/work/tree", "/home/u/.cargo/bin", "/home/u/.rustup"});
  compile_options off;
  off.path_toolchains = false;
  auto pol = compile(work_spec(), profile::spec, facts, off);
  REQUIRE(pol);
  CHECK(pol->toolchains.empty());
  CHECK(pol->notes.empty());
  for (const auto& m : pol->mounts) CHECK(m.host_path == "/work/tree");
  auto term = compile(work_spec(), profile::terminal, facts);
  REQUIRE(term);
  CHECK(term->toolchains.empty());
}

TEST_CASE("P4 E4: the global configs of every installed version inside a toolchain home are read-denied",
          "[P4][E4]") {
  auto f = fake_host();
  const std::map<std::string, std::vector<std::string>> dirs = {
      {"/home/u/.nvm/versions/node", {"v18.19.0", "v20.11.0"}},
      {"/home/u/.pyenv/versions", {"3.12.1"}},
      {"/home/u/.sdkman/candidates/maven", {"3.9.6", "current"}},
  };
  f.kind = [dirs](const std::string& p) {
    for (const auto& [d, names] : dirs)
      if (within(d, p)) return path_kind::dir;
    for (const auto& [d, names] : dirs)
      for (const auto& n : names)
        if (within(p, d + "/" + n)) return path_kind::file;
    return path_kind::missing;
  };
  std::vector<std::string> listed;
  f.list_dir = [dirs, &listed](const std::string& d) {
    listed.push_back(d);
    auto it = dirs.find(d);
    return it == dirs.end() ? std::vector<std::string>{} : it->second;
  };
  auto pol = compile(base_spec(), profile::dispatch, f);
  REQUIRE(pol);
  CHECK(has_path(pol->read_deny, "/home/u/.nvm/versions/node/v18.19.0/etc/npmrc"));
  CHECK(has_path(pol->read_deny, "/home/u/.nvm/versions/node/v20.11.0/etc/npmrc"));
  CHECK(has_path(pol->read_deny, "/home/u/.pyenv/versions/3.12.1/pip.conf"));
  CHECK(has_path(pol->read_deny, "/home/u/.sdkman/candidates/maven/3.9.6/conf/settings.xml"));
  CHECK(has_path(pol->read_deny, "/home/u/.sdkman/candidates/maven/current/conf/settings.xml"));
  // Only homes that exist are listed; nothing is invented for the others.
  CHECK_FALSE(has_path(pol->read_deny, "/home/u/.rbenv/versions/*/etc/gemrc"));
  CHECK(std::find(listed.begin(), listed.end(), "/home/u/.rbenv/versions") == listed.end());

  // Without a directory listing, a home that may hold them refuses the launch.
  f.list_dir = nullptr;
  auto refused = compile(base_spec(), profile::dispatch, f);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().field == "list_dir");
  CHECK_THAT(refused.err().message, Catch::Contains("/home/u/.nvm/versions/node"));
}

TEST_CASE("X1 P2: a linked worktree whose common dir no writable bind reaches gets that dir as a brokered mount, "
          "with the branch its HEAD names at launch",
          "[X1][P2]") {
  auto f = fake_host();
  f.kind = [](const std::string& p) {
    if (p == "/work/tree/.git") return path_kind::file;
    if (p == "/repos/main/.git" || p == "/repos/main/.git/worktrees/tree") return path_kind::dir;
    return path_kind::missing;
  };
  f.gitdirs = [](const std::string& p) {
    return p == "/work/tree/.git" ? std::vector<std::string>{"/repos/main/.git/worktrees/tree", "/repos/main/.git"}
                                  : std::vector<std::string>{};
  };
  std::string head = "ref: refs/heads/feat/agent\n";
  f.git_head = [&](const std::string& p) -> std::optional<std::string> {
    if (p == "/repos/main/.git/worktrees/tree") return head;
    return std::nullopt;
  };
  for (profile base : {profile::spec, profile::dispatch}) {
    INFO(to_string(base));
    auto pol = compile(base_spec(), base, f);
    REQUIRE(pol);
    REQUIRE(pol->linked_worktrees.size() == 1);
    CHECK(pol->linked_worktrees[0] ==
          linked_worktree_rule{"/work/tree", "/repos/main/.git/worktrees/tree", "/repos/main/.git", "refs/heads/feat/agent"});
    CHECK(std::find(pol->mounts.begin(), pol->mounts.end(), mount_rule{"/repos/main/.git", "/repos/main/.git", true}) !=
          pol->mounts.end());
    CHECK(std::is_sorted(pol->mounts.begin(), pol->mounts.end()));
    // The git paths stay write-denied on top of the broker's rules.
    CHECK(has_path(pol->write_deny, "/repos/main/.git/config"));
    CHECK(has_path(pol->write_deny, "/repos/main/.git/worktrees/tree/gitdir"));
  }
  // The terminal profile, a detached HEAD, and a common dir bound writable.
  auto term = compile(base_spec(), profile::terminal, f);
  REQUIRE(term);
  CHECK(term->linked_worktrees.empty());
  for (std::string h : {"0123456789abcdef0123456789abcdef01234567\n", "ref: refs/tags/v1\n", "ref: refs/heads/a..b\n"}) {
    head = h;
    auto det = compile(base_spec(), profile::dispatch, f);
    REQUIRE(det);
    REQUIRE(det->linked_worktrees.size() == 1);
    CHECK(det->linked_worktrees[0].branch.empty());
  }
  auto bound = base_spec();
  bound.bind_mounts.push_back({"/repos/main", "/repos/main", false});
  auto w = compile(bound, profile::dispatch, f);
  REQUIRE(w);
  CHECK(w->linked_worktrees.empty());
  auto prot = bound;
  prot.protected_paths.push_back("/repos/main");
  auto p = compile(prot, profile::dispatch, f);
  REQUIRE(p);
  CHECK(p->linked_worktrees.size() == 1);
}

TEST_CASE("E4 L1: compile leaves out a toolchain the sandbox's host uid cannot reach, a host fact, and keeps it unset",
          "[E4][L1]") {
  auto facts = toolchain_host("/home/u/.cargo/bin:/home/u/tools/bin:/home/u/.cargo/extra",
                              {"/work/tree", "/home/u/.cargo/bin", "/home/u/.cargo/extra", "/home/u/.rustup",
                               "/home/u/tools/bin"});
  SECTION("unset: every toolchain the launcher reaches is made visible") {
    auto pol = compile(work_spec(), profile::spec, facts);
    REQUIRE(pol);
    CHECK(toolchain_paths(*pol) == std::vector<std::string>{"/home/u/.cargo", "/home/u/.rustup", "/home/u/tools/bin"});
    CHECK_FALSE(noted(*pol, "/home/u/.cargo", "not made visible"));
  }
  SECTION("set: what uid 65534 cannot reach is neither mounted nor listed, and a note says why") {
    std::vector<std::string> asked;
    facts.reach = host_facts::sandbox_reach{65534, [&](const std::string& p) {
                                              asked.push_back(p);
                                              return p != "/home/u/.cargo";
                                            }};
    auto pol = compile(work_spec(), profile::spec, facts);
    REQUIRE(pol);
    CHECK(toolchain_paths(*pol) == std::vector<std::string>{"/home/u/.rustup", "/home/u/tools/bin"});
    for (const auto& m : pol->mounts) CHECK(m.host_path != "/home/u/.cargo");
    CHECK(noted(*pol, "toolchain /home/u/.cargo not made visible", "the sandbox's host uid 65534 cannot reach it"));
    CHECK(std::count_if(pol->notes.begin(), pol->notes.end(), [](const std::string& n) {
            return n.find("not made visible") != std::string::npos;
          }) == 1); // one note, though two PATH entries lead to ~/.cargo
    CHECK_FALSE(noted(*pol, "/home/u/.cargo (PATH", "visible read-only"));
    // Asked only about toolchains compile chose, on their resolved paths.
    std::sort(asked.begin(), asked.end());
    CHECK(asked == std::vector<std::string>{"/home/u/.cargo", "/home/u/.rustup", "/home/u/tools/bin"});
  }
}

TEST_CASE("E1 N2 E5: session_environment is E1, the caller's additions under E3, then the moved HOME, the proxies "
          "and git's configuration, none of them inherited", "[E1][E3][E5][N2]") {
  policy pol;
  pol.home = "/home/u";
  pol.environment = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"LANG", "C"}};
  // What the caller adds: one replaces LANG; those E3 removes never reach
  // the command, whatever the launcher's own variables are named.
  pol.environment_additions = {{"LANG", "C.UTF-8"}, {"AGENT", "a1"}, {"GIT_CONFIG_COUNT", "9"},
                               {"GIT_CONFIG_KEY_0", "core.hooksPath"}, {"HTTPS_PROXY", "http://evil:1"}};
  pol.toolchains = {{"/home/u/.cargo", "cargo on PATH"}};
  environment_facts f;
  f.home = "/run/ccsb/home";
  f.proxy = proxy_endpoints{"127.0.0.1:3128", "127.0.0.1:1080", "helper %h %p", ""};
  f.git_excludes_file = "/run/ccsb/git-excludes";
  auto env = session_environment(pol, f);
  std::map<std::string, std::string> m;
  for (const auto& v : env) m[v.name] = v.value;
  CHECK(m.size() == env.size()); // no variable twice
  CHECK(env[0] == env_var{"PATH", "/usr/bin:/bin"});
  CHECK(env[1] == env_var{"HOME", "/run/ccsb/home"}); // replaced where it stood
  CHECK(m["LANG"] == "C.UTF-8");
  CHECK(m["AGENT"] == "a1");
  CHECK(m["CARGO_HOME"] == "/home/u/.cargo");
  CHECK(m["HTTPS_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["GIT_CONFIG_COUNT"] == "3");
  CHECK(m["GIT_CONFIG_KEY_0"] == "maintenance.auto");
  CHECK(m["GIT_CONFIG_VALUE_0"] == "false");
  CHECK(m["GIT_CONFIG_KEY_1"] == "gc.auto");
  CHECK(m["GIT_CONFIG_VALUE_1"] == "0");
  CHECK(m["GIT_CONFIG_KEY_2"] == "core.excludesFile");
  CHECK(m["GIT_CONFIG_VALUE_2"] == "/run/ccsb/git-excludes");
  // Without a proxy, a moved HOME or placeholders: E1 and the additions, and
  // git's maintenance settings alone.
  auto plain = session_environment(pol, {});
  std::map<std::string, std::string> p;
  for (const auto& v : plain) p[v.name] = v.value;
  CHECK(p["HOME"] == "/home/u");
  CHECK(p.count("CARGO_HOME") == 0);
  CHECK(p.count("HTTPS_PROXY") == 0);
  CHECK(p["GIT_CONFIG_COUNT"] == "2");
  CHECK(p.count("GIT_CONFIG_KEY_2") == 0);
  // none: the launcher's environment with the additions, E3 over both.
  auto host = host_environment({{"PATH", "/bin"}, {"GITHUB_TOKEN", "x"}}, {{"AGENT", "a1"}, {"LD_PRELOAD", "/x"}});
  CHECK(host == env_list{{"PATH", "/bin"}, {"AGENT", "a1"}});
}
