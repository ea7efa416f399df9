// P1-P8, T2, E1-E3, N2: compiling a spec into one backend-neutral policy.
#include "ccsb/policy.hpp"

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
bool within(std::string_view p, std::string_view root) { return detail::within(p, root); }

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

  // A writable bind whose resolved spelling lands in a protected path is refused.
  auto spec3 = base_spec();
  spec3.protected_paths = {"/src/repo"};
  spec3.bind_mounts = {{"/home/u/link-repo", "/home/u/link-repo", false}};
  auto pol3 = compile(spec3, profile::dispatch, fake_host());
  REQUIRE_FALSE(pol3);
  CHECK(pol3.err().field == "protectedPaths");

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
  for (const auto& g : pol->write_deny_globs) CHECK(detail::is_glob(g.glob()));
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

TEST_CASE("N2: proxy variables point at the session's proxies", "[N2][E2]") {
  auto env = proxy_environment("127.0.0.1:3128", "127.0.0.1:1080");
  std::map<std::string, std::string> m;
  for (const auto& v : env) m[v.name] = v.value;
  CHECK(m["HTTP_PROXY"] == "http://127.0.0.1:3128");
  CHECK(m["https_proxy"] == "http://127.0.0.1:3128");
  CHECK(m["ALL_PROXY"] == "socks5h://127.0.0.1:1080");
  CHECK(m["NO_PROXY"] == "localhost,127.0.0.1,::1");
  CHECK_THAT(m["GIT_SSH_COMMAND"], Catch::Contains("SOCKS4A:127.0.0.1:%h:%p,socksport=1080"));
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
