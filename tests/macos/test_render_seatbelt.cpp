// Golden and behaviour tests of the Seatbelt renderer (M1-M7, P4-P7, T2,
// N2) and its escaper. Everything here runs on Linux: the macOS path facts
// are injected (macos_resolve), and sbpl_eval.hpp decides operations on the
// rendered profile the way Seatbelt does for its rule shapes. What only a Mac
// can check (that sandbox-exec accepts the profile and the kernel enforces
// it) is in tests/macos/mac_only/ and docs/macos.md.
// Golden files: tests/macos/golden/<name>.sb; regenerate after a deliberate
// change with CCSB_UPDATE_GOLDEN=1 and review the diff like code.
#include "sbpl_eval.hpp"

#include "ccsb/render/seatbelt/render.hpp"
#include "ccsb_test/golden.hpp"
#include "ccsb_test/result.hpp"
#include "ccsb_test/specs.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <fstream>
#include <set>
#include <sstream>

using namespace ccsb;
using ccsb_test::kMacWorktree;
using ccsb_test::require_ok;
using ccsb_test::worktree_spec;

namespace {

const std::string kTag = "ccsb-s1-0123abcd";

host_facts mac_facts(const std::string& home = "/Users/u") {
  host_facts f;
  f.home = home;
  f.resolve = [](const std::string& p) -> std::optional<std::string> { return macos_resolve(p); };
  f.kind = [](const std::string&) { return path_kind::missing; }; // no .git files
  f.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", home}, {"LANG", "en_US.UTF-8"}, {"AWS_SECRET_ACCESS_KEY", "x"}};
  return f;
}

seatbelt_facts sb_facts() {
  seatbelt_facts f;
  f.http_port = 3128;
  f.socks_port = 1080;
  f.session_tag = kTag;
  f.temp_dir = "/private/var/folders/xy/abc/T/ccsb-s1";
  f.resolve = macos_resolve;
  return f;
}

policy compile_ok(const sandbox_spec& s, profile p, const host_facts& hf = mac_facts()) {
  return require_ok(compile(s, p, hf));
}

// The rendered profile's text.
std::string profile_text(const policy& pol, const seatbelt_facts& f = sb_facts()) {
  return require_ok(render_seatbelt(pol, f)).text;
}

const ccsb_test::golden_dir kGolden{"tests/macos/golden", ".sb"};

// Every string atom of the profile, decoded.
std::set<std::string> atoms(const std::string& text) {
  auto forms = sbpl::parse_sbpl(text);
  REQUIRE(forms);
  std::set<std::string> out;
  std::vector<const sbpl::sbpl_node*> todo;
  for (const auto& f : *forms) todo.push_back(&f);
  while (!todo.empty()) {
    auto n = todo.back();
    todo.pop_back();
    if (n->k == sbpl::sbpl_node::kind::string) out.insert(n->text);
    for (const auto& c : n->items) todo.push_back(&c);
  }
  return out;
}

const std::string kHostile = "/Users/u/we \"ird\" \\ (x) ; [a]{1}+^$|.d \xc3\xa9";

sandbox_spec hostile_spec() {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{kHostile, kHostile, false}};
  s.protected_paths = {"/Users/u/repos/*-orig", "/Users/u/a\")(allow default)(\""};
  s.exec_grant_roots = {kHostile + "/bin"};
  return s;
}

} // namespace

// ---------------------------------------------------------------------------
// Golden profiles.

TEST_CASE("M1: golden profile for chat mode (dispatch)", "[M1][M2][M3][M4][M5][M6][M7][golden]") {
  kGolden.check("chat", profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
}

TEST_CASE("M1: golden profile for review mode (dispatch)", "[M1][P1][golden]") {
  kGolden.check("review", profile_text(compile_ok(worktree_spec(mode::review, kMacWorktree), profile::dispatch)));
}

TEST_CASE("M1: golden profile for plan mode (dispatch)", "[M1][P1][golden]") {
  kGolden.check("plan", profile_text(compile_ok(worktree_spec(mode::plan, kMacWorktree), profile::dispatch)));
}

TEST_CASE("M1: golden profile for orchestrate mode (dispatch)", "[M1][P1][golden]") {
  kGolden.check("orchestrate", profile_text(compile_ok(worktree_spec(mode::orchestrate, kMacWorktree), profile::dispatch)));
}

TEST_CASE("T2: golden profile for the terminal profile", "[T2][golden]") {
  sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
  s.bind_mounts = {};
  s.protected_paths = {};
  s.guest_workdir = "/Users/u/wt";
  kGolden.check("terminal", profile_text(compile_ok(s, profile::terminal)));
}

TEST_CASE("M7: golden profile for a spec with hostile paths", "[M7][golden]") {
  kGolden.check("hostile", profile_text(compile_ok(hostile_spec(), profile::dispatch)));
}

TEST_CASE("P3: golden profile with a runner state dir and networkEnabled false", "[P3][N6][golden]") {
  sandbox_spec s = worktree_spec(mode::review, kMacWorktree);
  s.runner_state_dirs = {"/Users/u/.claude"};
  s.network_enabled = false;
  kGolden.check("state_dir", profile_text(compile_ok(s, profile::dispatch)));
}

// ---------------------------------------------------------------------------
// Behaviour, decided on the rendered profile.

TEST_CASE("M1: the profile starts with version 1 and allow default", "[M1]") {
  auto forms = sbpl::parse_sbpl(profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
  REQUIRE(forms);
  REQUIRE(forms->size() > 2);
  CHECK((*forms)[0].items[0].text == "version");
  CHECK((*forms)[1].items[0].text == "allow");
  CHECK((*forms)[1].items[1].text == "default");
}

TEST_CASE("M2: every read-deny path is unreadable, both spellings", "[M2][P4][P6]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto p = sbeval::load(profile_text(pol));
  for (const auto& r : pol.read_deny) {
    INFO(r.path);
    CHECK_FALSE(sbeval::decide(p, "file-read-data", r.path));
    CHECK_FALSE(sbeval::decide(p, "file-read-data", r.path + "/below"));
  }
  CHECK_FALSE(sbeval::decide(p, "file-read-data", "/Users/u/.ssh/id_ed25519"));
  CHECK_FALSE(sbeval::decide(p, "file-read-metadata", "/private/etc/shadow"));
  CHECK(sbeval::decide(p, "file-read-data", "/Users/u/.sshx"));
  CHECK(sbeval::decide(p, "file-read-data", "/Users/u/wt/src/main.c"));
  CHECK(sbeval::decide(p, "file-read-data", "/usr/lib/libSystem.B.dylib"));
}

TEST_CASE("M3: writes only in the writable roots, devices and the temp dir, P2/P5 denied inside", "[M3][P2][P5]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto p = sbeval::load(profile_text(pol));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/src/new.c"));
  CHECK(sbeval::decide(p, "file-write-data", "/Users/u/wt"));
  CHECK(sbeval::decide(p, "file-write-data", "/dev/null"));
  CHECK(sbeval::decide(p, "file-write-data", "/dev/ttys003"));
  CHECK(sbeval::decide(p, "file-write-create", "/private/var/folders/xy/abc/T/ccsb-s1/x"));
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/dev/disk0"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/notes.txt"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/private/tmp/x"));
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/Users/u/repos/orig/README"));     // P2
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/.git/hooks/pre-commit")); // P5
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/Users/u/wt/.git/config"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/.vscode/tasks.json"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/.zshrc"));
  CHECK(sbeval::decide(p, "file-write-data", "/Users/u/wt/.git/index"));
  for (const auto& d : pol.write_deny)
    if (!is_glob(d.path)) {
      INFO(d.path);
      CHECK_FALSE(sbeval::decide(p, "file-write-create", d.path));
    }
}

TEST_CASE("M3: review, plan and orchestrate write nothing but devices and the temp dir", "[M3][P1]") {
  for (mode m : {mode::review, mode::plan, mode::orchestrate}) {
    auto p = sbeval::load(profile_text(compile_ok(worktree_spec(m, kMacWorktree), profile::dispatch)));
    CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/src/new.c"));
    CHECK(sbeval::decide(p, "file-write-data", "/dev/null"));
    CHECK(sbeval::decide(p, "file-write-create", "/private/var/folders/xy/abc/T/ccsb-s1/x"));
  }
}

TEST_CASE("P4: a read-denied path that does not exist cannot be created", "[P4][M3]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto p = sbeval::load(profile_text(pol));
  // Even inside a writable HOME (terminal), see T2 below; here via the rule itself.
  for (const auto& r : pol.read_deny) {
    INFO(r.path);
    CHECK_FALSE(sbeval::decide(p, "file-write-create", r.path));
    CHECK_FALSE(sbeval::decide(p, "file-write-create", r.path + "/config"));
  }
}

TEST_CASE("M4: no unlink of a denied path or of any of its ancestors", "[M4]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto p = sbeval::load(profile_text(pol));
  std::vector<std::string> denied;
  for (const auto& r : pol.read_deny) denied.push_back(r.path);
  for (const auto& r : pol.write_deny)
    if (!is_glob(r.path)) denied.push_back(r.path);
  for (const auto& d : denied) {
    INFO(d);
    CHECK_FALSE(sbeval::decide(p, "file-write-unlink", d));
    CHECK_FALSE(sbeval::decide(p, "file-write-unlink", d + "/x"));
    for (const auto& a : ancestors_of(d)) {
      INFO(a);
      CHECK_FALSE(sbeval::decide(p, "file-write-unlink", a));
    }
  }
  // `mv .git .git2` fails; removing an ordinary file in the worktree works.
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", "/Users/u/wt/.git"));
  CHECK(sbeval::decide(p, "file-write-unlink", "/Users/u/wt/src/old.c"));
  CHECK(sbeval::decide(p, "file-write-unlink", "/Users/u/wt/.git/index.lock"));
}

TEST_CASE("M5: no exec from writable dirs except beneath execGrantRoots, never the dangerous binaries", "[M5]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto p = sbeval::load(profile_text(pol));
  CHECK_FALSE(sbeval::decide(p, "process-exec", "/Users/u/wt/a.out"));
  CHECK_FALSE(sbeval::decide(p, "process-exec-interpreter", "/Users/u/wt/run.sh"));
  CHECK_FALSE(sbeval::decide(p, "process-exec", "/private/var/folders/xy/abc/T/ccsb-s1/payload"));
  CHECK(sbeval::decide(p, "process-exec", "/Users/u/wt/node_modules/.bin/tsc"));
  CHECK(sbeval::decide(p, "process-exec", "/bin/sh"));
  CHECK(sbeval::decide(p, "process-exec", "/usr/bin/git"));
  for (const auto& b : kDangerousBinaries) {
    INFO(b.path);
    CHECK_FALSE(sbeval::decide(p, "process-exec", std::string(b.path)));
  }
}

TEST_CASE("M5: a grant root cannot re-open a dangerous binary", "[M5]") {
  sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
  s.exec_grant_roots = {"/usr/bin"};
  auto p = sbeval::load(profile_text(compile_ok(s, profile::dispatch)));
  CHECK_FALSE(sbeval::decide(p, "process-exec", "/usr/bin/sudo"));
  CHECK(sbeval::decide(p, "process-exec", "/usr/bin/true"));
}

TEST_CASE("M6: only the two proxy ports on localhost plus DNS, no loopback, no Unix sockets", "[M6][N1]") {
  auto p = sbeval::load(profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:3128"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:1080"));
  CHECK(sbeval::decide(p, "network-outbound", "unix:/private/var/run/mDNSResponder"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:22"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:5432"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:93.184.216.34:443"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "unix:/private/tmp/com.apple.launchd.x/Listeners"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "unix:/var/run/docker.sock"));
  CHECK_FALSE(sbeval::decide(p, "network-bind", "ip:localhost:8080"));
  CHECK_FALSE(sbeval::decide(p, "network-inbound", "ip:localhost:8080"));
}

TEST_CASE("M6: the ports come from the facts, networkEnabled false drops DNS too", "[M6][N6]") {
  auto f = sb_facts();
  f.http_port = 50001;
  f.socks_port = 50002;
  sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
  s.network_enabled = false;
  auto prof = render_seatbelt(compile_ok(s, profile::dispatch), f);
  REQUIRE(prof);
  auto p = sbeval::load(prof->text);
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:50001"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:50002"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:3128"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "unix:/private/var/run/mDNSResponder"));
}

TEST_CASE("M7: P7 globs as anchored regexes at any depth of every writable root", "[M7][P7]") {
  auto p = sbeval::load(profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/.env"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/a/b/c/.env"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/certs/server.key"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/wt/x.pem"));
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", "/Users/u/wt/old.pem"));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/.env.example"));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/x.pem.txt"));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/keys.md"));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/a.keyx"));
}

TEST_CASE("M7: hostile paths stay inside their strings and regexes", "[M7]") {
  auto pol = compile_ok(hostile_spec(), profile::dispatch);
  std::string text = profile_text(pol);
  auto forms = sbpl::parse_sbpl(text);
  REQUIRE(forms);
  // The top-level form count equals the number of rule lines: nothing added.
  std::size_t rule_lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '(') ++rule_lines;
  CHECK(forms->size() == rule_lines);
  auto a = atoms(text);
  CHECK(a.count(kHostile));
  CHECK(a.count("/Users/u/a\")(allow default)(\""));
  auto p = sbeval::load(text);
  CHECK(sbeval::decide(p, "file-write-create", kHostile + "/src/x.c"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", kHostile + "/src/.env"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", kHostile + "/deep/er/k.pem"));
  CHECK(sbeval::decide(p, "process-exec", kHostile + "/bin/tool"));
  CHECK_FALSE(sbeval::decide(p, "process-exec", kHostile + "/a.out"));
  // the protected glob is a glob (P6 leaves it alone): every match is denied
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/Users/u/repos/main-orig/README"));
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", "/Users/u/repos/main-orig"));
  // The allow-default breakout attempt is only a denied path.
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/a\")(allow default)(\""));
}

TEST_CASE("M7: control bytes and non-UTF-8 are refused with the field named", "[M7]") {
  for (std::string bad : {std::string("/Users/u/a\nb"), std::string("/Users/u/a\rb"), std::string("/Users/u/a\x7f"),
                          std::string("/Users/u/\xff\xfe"), std::string("/Users/u/\xc0\xaf"),
                          std::string("/Users/u/\xed\xa0\x80")}) {
    sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
    s.protected_paths = {bad};
    auto pol = compile(s, profile::dispatch, mac_facts());
    REQUIRE(pol);
    auto prof = render_seatbelt(*pol, sb_facts());
    REQUIRE_FALSE(prof);
    CHECK(prof.err().code == errc::invalid_argument);
    CHECK(prof.err().field.rfind("write_deny[", 0) == 0);
    CHECK(prof.err().message.find("M7") != std::string::npos);
  }
  CHECK_FALSE(sbpl::sbpl_string(std::string("a\0b", 3), "x"));
}

TEST_CASE("M7: the escaper round-trips quotes, backslashes and parentheses", "[M7]") {
  for (std::string s : {"", "\"", "\\", "\\\"", "(deny default)", "a;b", "\xe2\x9c\x93", "\"))(allow file-write*) (\""}) {
    auto q = sbpl::sbpl_string(s, "x");
    REQUIRE(q);
    auto forms = sbpl::parse_sbpl("(x " + *q + ")");
    REQUIRE(forms);
    REQUIRE(forms->size() == 1);
    REQUIRE((*forms)[0].items.size() == 2);
    CHECK((*forms)[0].items[1].text == s);
  }
  auto re = sbpl::glob_regex("/a.b/**/*.pem", "x");
  REQUIRE(re);
  CHECK(*re == "^/a\\.b/(.*/)?[^/]*\\.pem(/.*)?$");
  auto lit = sbpl::glob_regex("/r*(x)", "/**/.env", "x");
  REQUIRE(lit);
  CHECK(*lit == "^/r\\*\\(x\\)/(.*/)?\\.env(/.*)?$");
}

TEST_CASE("M8: every deny carries the session tag", "[M8]") {
  auto p = sbeval::load(profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
  std::size_t denies = 0;
  for (const auto& r : p.rules)
    if (!r.allow) {
      ++denies;
      CHECK(r.message == kTag);
    }
  CHECK(denies > 100);
  CHECK(seatbelt_tag("s1", "0123abcd") == kTag);
  CHECK(seatbelt_tag("a\"b c)", "x y") == "ccsb-a_b_c_-x_y");
  auto f = sb_facts();
  f.session_tag = "bad\"tag)";
  auto prof = render_seatbelt(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch), f);
  REQUIRE_FALSE(prof);
  CHECK(prof.err().field == "facts.session_tag");
}

// ---------------------------------------------------------------------------
// P6 and the macOS path facts.

TEST_CASE("P6: a denial under /tmp is emitted for /private/tmp too", "[P6]") {
  sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
  s.protected_paths = {"/tmp/orig"};
  auto text = profile_text(compile_ok(s, profile::dispatch));
  auto a = atoms(text);
  CHECK(a.count("/tmp/orig"));
  CHECK(a.count("/private/tmp/orig"));
  auto p = sbeval::load(text);
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/private/tmp/orig/x"));
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", "/private/tmp"));
}

TEST_CASE("P6: a denial under /var/folders is emitted for /private/var/folders too", "[P6]") {
  sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
  s.protected_paths = {"/var/folders/xy/abc/T/checkout"};
  auto a = atoms(profile_text(compile_ok(s, profile::dispatch)));
  CHECK(a.count("/var/folders/xy/abc/T/checkout"));
  CHECK(a.count("/private/var/folders/xy/abc/T/checkout"));
}

TEST_CASE("P6: a denial under /etc is emitted for /private/etc too", "[P6]") {
  auto text = profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch));
  auto a = atoms(text);
  for (const auto& e : kSystemReadDenyPaths) {
    INFO(e.path);
    CHECK(a.count(std::string(e.path)));
    CHECK(a.count("/private" + std::string(e.path)));
  }
  auto p = sbeval::load(text);
  CHECK_FALSE(sbeval::decide(p, "file-read-data", "/private/etc/sudoers"));
}

TEST_CASE("P6: macos_resolve maps /tmp, /var and /etc only", "[P6]") {
  CHECK(macos_resolve("/tmp") == "/private/tmp");
  CHECK(macos_resolve("/var/folders/x") == "/private/var/folders/x");
  CHECK(macos_resolve("/etc/hosts") == "/private/etc/hosts");
  CHECK(macos_resolve("/tmpx") == "/tmpx");
  CHECK(macos_resolve("/Users/u") == "/Users/u");
  CHECK(macos_resolve("/private/tmp") == "/private/tmp");
}

TEST_CASE("P8: a writable /private/tmp or /private/etc root is refused on macOS", "[P8][M3]") {
  for (std::string root : {"/private/tmp", "/private/var", "/private/etc/x", "/private/usr/x"}) {
    sandbox_spec s = worktree_spec(mode::chat, kMacWorktree);
    s.bind_mounts = {{root, root, false}};
    s.protected_paths = {};
    auto pol = compile(s, profile::spec, mac_facts());
    if (!pol) continue; // the policy refused it already
    auto prof = render_seatbelt(*pol, sb_facts());
    INFO(root);
    REQUIRE_FALSE(prof);
    CHECK(prof.err().field.rfind("write_allow[", 0) == 0);
  }
}

// ---------------------------------------------------------------------------
// T2 and the environment.

TEST_CASE("T2: HOME and the workdir writable, network open but no loopback, core secrets denied", "[T2][P4]") {
  sandbox_spec s;
  s.session_id = "t1";
  s.workspace_id = "w";
  s.guest_workdir = "/Users/u/wt";
  auto pol = compile_ok(s, profile::terminal);
  auto p = sbeval::load(profile_text(pol));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/notes.txt"));
  CHECK(sbeval::decide(p, "file-write-create", "/Users/u/wt/x"));
  CHECK(sbeval::decide(p, "process-exec", "/Users/u/wt/a.out"));
  for (auto secret : {"/Users/u/.ssh", "/Users/u/.aws", "/Users/u/.gnupg", "/Users/u/.config/gh", "/Users/u/Library/Keychains"}) {
    INFO(secret);
    CHECK_FALSE(sbeval::decide(p, "file-read-data", std::string(secret) + "/x"));
    CHECK_FALSE(sbeval::decide(p, "file-write-create", std::string(secret)));
    CHECK_FALSE(sbeval::decide(p, "file-write-create", std::string(secret) + "/authorized_keys"));
    CHECK_FALSE(sbeval::decide(p, "file-write-unlink", std::string(secret)));
  }
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", "/Users/u/.config"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:93.184.216.34:443"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:5432"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "unix:/private/tmp/com.apple.launchd.x/Listeners"));
  CHECK(sbeval::decide(p, "network-outbound", "unix:/private/var/run/mDNSResponder"));
  auto prof = render_seatbelt(pol, sb_facts());
  REQUIRE(prof);
  CHECK(std::any_of(prof->notes.begin(), prof->notes.end(),
                    [](const std::string& n) { return n.find("link-local") != std::string::npos; }));
}

TEST_CASE("N2: the child environment points the proxies at 127.0.0.1 and TMPDIR at the session temp dir", "[N2][E1][N1]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  auto env = seatbelt_environment(pol, sb_facts());
  auto get = [&](const std::string& k) -> std::string {
    for (const auto& v : env)
      if (v.name == k) return v.value;
    return "<unset>";
  };
  CHECK(get("HTTP_PROXY") == "http://127.0.0.1:3128");
  CHECK(get("https_proxy") == "http://127.0.0.1:3128");
  CHECK(get("ALL_PROXY") == "socks5h://127.0.0.1:1080");
  CHECK(get("GIT_SSH_COMMAND") ==
        "ssh -o ProxyCommand='/usr/bin/nc -X 5 -x 127.0.0.1:1080 %h %p' -o ControlMaster=no -o ControlPath=none");
  CHECK(get("TMPDIR") == "/private/var/folders/xy/abc/T/ccsb-s1/");
  CHECK(get("AWS_SECRET_ACCESS_KEY") == "<unset>");
  CHECK(get("HOME") == "/Users/u");
  auto argv = seatbelt_argv(kSandboxExec, seatbelt_profile{"(version 1)\n", {}}, {"sh", "-c", "x"});
  CHECK(argv == std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", "(version 1)\n", "--", "sh", "-c", "x"});
}

TEST_CASE("M6: a proxied profile needs both egressd ports", "[M6]") {
  auto f = sb_facts();
  f.socks_port = 0;
  auto prof = render_seatbelt(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch), f);
  REQUIRE_FALSE(prof);
  CHECK(prof.err().field == "facts.http_port");
}

// ---------------------------------------------------------------------------
// P7 exceptions (createAllow) and the scratch HOME (E5).

namespace {

sandbox_spec create_allow_spec(std::vector<std::string> globs) {
  auto s = worktree_spec(mode::chat, kMacWorktree);
  s.create_allow = std::move(globs);
  return s;
}

bool ere(const std::string& re, const std::string& path) {
  return std::regex_search(path, std::regex(re, std::regex::extended));
}

} // namespace

TEST_CASE("P7: createAllow patterns become exact anchored regexes, every metacharacter escaped",
          "[P7][M7][createAllow]") {
  const std::string ng = std::string(sbpl::kNotGitComponent);
  auto re = [](const std::string& p) {
    auto r = sbpl::create_allow_regex(p, "createAllow[0]");
    if (!r) FAIL(r.err().what());
    return *r;
  };
  CHECK(re("/Users/u/wt/.venv/**") == "^/Users/u/wt/\\.venv(/" + ng + ")+$");
  CHECK(re("/Users/u/wt/.env") == "^/Users/u/wt/\\.env$");
  CHECK(re("/Users/u/wt/*/node_modules/**") == "^/Users/u/wt/" + ng + "/node_modules(/" + ng + ")+$");
  CHECK(re("/w/*.egg-info/x.pem") == "^/w/[^/]*\\.egg-info/x\\.pem$");
  CHECK(re("/w/a.b+c(d)|e^$/**") == "^/w/a\\.b\\+c\\(d\\)\\|e\\^\\$(/" + ng + ")+$");
  CHECK(re("/w/caf\xc3\xa9/**") == "^/w/caf\xc3\xa9(/" + ng + ")+$");
}

TEST_CASE("P7: a createAllow pattern that has no exact Seatbelt regex is refused with its field", "[P7][createAllow]") {
  for (const char* bad : {"/w/cert?/x.pem", "/w/[ab].pem", "/w/{a,b}/**", "/w/a\\*", "/w/a**", "/w/**/x.pem",
                          "/w/.g*/x.pem", "/w/*git/x.pem", "/w/.git/x.pem", "/w/../x.pem", "/w/./x.pem", "/w//x.pem",
                          ".venv/**", "", "/w/a\nb/**", "/w/\xff/**"}) {
    INFO(bad);
    auto r = sbpl::create_allow_regex(bad, "createAllow[3]");
    REQUIRE_FALSE(r);
    CHECK(r.err().field == "createAllow[3]");
  }
}

TEST_CASE("P7: a createAllow regex matches exactly the paths create_allow::matches accepts", "[P7][createAllow]") {
  const std::vector<std::string> patterns = {
      "/w/.venv/**", "/w/.env", "/w/*/node_modules/**", "/w/*.egg-info/**", "/w/a/*/**", "/w/*/*.pem",
      "/w/x*y/**", "/w/a.b/**", "/w/*", "/w/*/*/**"};
  std::vector<std::string> comps = {".git", ".gi", ".gitx", "x.git", ".GIT", "git.", "abcd", ".gjt", ".hit", ".gat",
                                    "a", "ab", "abc", "abcde", ".venv", ".env", "node_modules", "x.pem", "k.key",
                                    "foo.egg-info", "a.b", "axb", "a", "xy", "xzzy", "caf\xc3\xa9", "\xc3\xa9\xc3\xa9",
                                    ".e"};
  std::vector<std::string> paths = {"/w", "/x/.venv/a", "/wx/.venv/a"};
  for (const auto& a : comps) {
    paths.push_back("/w/" + a);
    for (const auto& b : comps) {
      paths.push_back("/w/" + a + "/" + b);
      for (const char* c : {"x.pem", ".git", "node_modules", "d"}) paths.push_back("/w/" + a + "/" + b + "/" + c);
    }
  }
  int agree = 0;
  for (const auto& p : patterns) {
    auto r = sbpl::create_allow_regex(p, "createAllow[0]");
    REQUIRE(r);
    for (const auto& path : paths) {
      INFO(p << " ~ " << path << " regex " << *r);
      REQUIRE(ere(*r, path) == create_allow::matches(p, path));
      ++agree;
    }
  }
  CHECK(agree > 10000);
}

TEST_CASE("P7: with createAllow the P7 names are creatable and removable inside each exception and nowhere else",
          "[P7][M7][M4][createAllow]") {
  auto pol = compile_ok(create_allow_spec({".venv/**", "*/node_modules/**", ".env"}), profile::dispatch);
  REQUIRE(pol.create_allow.size() == 3);
  auto prof = render_seatbelt(pol, sb_facts());
  if (!prof) FAIL(prof.err().what());
  auto p = sbeval::load(prof->text);
  const std::string W = "/Users/u/wt";
  for (const std::string x : {"/.venv/lib/python3.12/site-packages/pip/_vendor/certifi/cacert.pem", "/.venv/x.key",
                              "/.venv/a/.env", "/.venv/x.pem/inner", "/pkg/node_modules/p/test/test_cert.pem", "/.env"}) {
    INFO(x);
    for (const char* op : {"file-write-create", "file-write-data", "file-write-unlink"}) {
      INFO(op);
      CHECK(sbeval::decide(p, op, W + x));
    }
  }
  // Outside the exceptions P7 holds: another place, a case variant, a .git
  // component where a wildcard stands, depth the pattern does not name.
  for (const std::string x : {"/x.pem", "/src/.env", "/.VENV/x.pem", "/.venv2/x.pem", "/node_modules/p/k.pem",
                              "/.git/node_modules/k.pem", "/pkg/.git/node_modules/k.pem", "/.venv/.git/x.pem",
                              "/.venv/a/.git/b/x.pem", "/sub/.env", "/a/b/node_modules/k.pem"}) {
    INFO(x);
    CHECK_FALSE(sbeval::decide(p, "file-write-create", W + x));
    CHECK_FALSE(sbeval::decide(p, "file-write-unlink", W + x));
  }
  // Everything else denied stays denied, also where an exception reaches.
  CHECK_FALSE(sbeval::decide(p, "file-write-create", W + "/.git/hooks/pre-commit"));
  CHECK_FALSE(sbeval::decide(p, "file-write-data", W + "/.git/config"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", W + "/.vscode/x.pem"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", W + "/.vscode/node_modules/k.pem")); // P5 inside an exception
  CHECK_FALSE(sbeval::decide(p, "file-write-unlink", W + "/.vscode/node_modules/k.pem"));
  CHECK_FALSE(sbeval::decide(p, "file-write-data", "/Users/u/repos/orig/README"));
  CHECK_FALSE(sbeval::decide(p, "process-exec", W + "/.venv/bin/tool"));
  CHECK(sbeval::decide(p, "file-write-create", W + "/.venv/lib/x.py"));
  for (const auto& d : pol.write_deny)
    if (!is_glob(d.path)) {
      INFO(d.path);
      CHECK_FALSE(sbeval::decide(p, "file-write-create", d.path));
      CHECK_FALSE(sbeval::decide(p, "file-write-unlink", d.path));
      for (const auto& a : ancestors_of(d.path)) {
        INFO(a);
        CHECK_FALSE(sbeval::decide(p, "file-write-unlink", a));
      }
    }
  for (const auto& r : pol.read_deny) {
    INFO(r.path);
    CHECK_FALSE(sbeval::decide(p, "file-write-create", r.path));
    CHECK_FALSE(sbeval::decide(p, "file-read-data", r.path));
  }
  // Without the exceptions the same paths are denied (the exceptions are what allowed them).
  auto plain = sbeval::load(profile_text(compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch)));
  CHECK_FALSE(sbeval::decide(plain, "file-write-create", W + "/.venv/x.key"));
  CHECK_FALSE(sbeval::decide(plain, "file-write-create", W + "/.env"));
  CHECK(std::any_of(prof->notes.begin(), prof->notes.end(),
                    [](const std::string& n) { return n.find("createAllow") != std::string::npos; }));
}

TEST_CASE("P7: golden profile with createAllow exceptions", "[P7][createAllow][golden]") {
  kGolden.check("create_allow", profile_text(compile_ok(create_allow_spec({".venv/**", "*/node_modules/**"}),
                                                    profile::dispatch)));
}

TEST_CASE("P7: a createAllow exception Seatbelt cannot say exactly, or one inside a denied path, is refused",
          "[P7][createAllow]") {
  auto q = render_seatbelt(compile_ok(create_allow_spec({"cert?/x.pem"}), profile::dispatch), sb_facts());
  REQUIRE_FALSE(q);
  CHECK(q.err().code == errc::unenforceable);
  CHECK(q.err().field == "createAllow[0]");
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  pol.create_allow = {"/Users/u/wt/.vscode/sub/**"};
  auto inside = render_seatbelt(pol, sb_facts());
  REQUIRE_FALSE(inside);
  CHECK(inside.err().code == errc::unenforceable);
  CHECK(inside.err().field == "createAllow[0]");
}

TEST_CASE("E5: the scratch HOME is writable, not executable, and HOME in the environment", "[E5][M3][M5]") {
  auto pol = compile_ok(worktree_spec(mode::chat, kMacWorktree), profile::dispatch);
  CHECK(seatbelt_scratch_home_needed(pol));
  auto f = sb_facts();
  f.scratch_home = "/private/var/folders/xy/abc/T/ccsb-s1/home";
  auto p = sbeval::load(profile_text(pol, f));
  CHECK(sbeval::decide(p, "file-write-create", f.scratch_home + "/.npm/_cacache/x"));
  CHECK(sbeval::decide(p, "file-write-data", f.scratch_home + "/.gitconfig"));
  CHECK_FALSE(sbeval::decide(p, "process-exec", f.scratch_home + "/.local/bin/tool"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", "/Users/u/.npmrc"));
  pol.toolchains = {{"/Users/u/.cargo", "cargo on PATH"}, {"/Users/u/.nvm", "nvm on PATH"}};
  auto env = seatbelt_environment(pol, f);
  auto get = [&](const std::string& k) -> std::string {
    for (const auto& v : env)
      if (v.name == k) return v.value;
    return "<unset>";
  };
  CHECK(get("HOME") == f.scratch_home);
  CHECK(get("CARGO_HOME") == "/Users/u/.cargo");
  CHECK(get("NVM_DIR") == "/Users/u/.nvm");
  CHECK(get("RUSTUP_HOME") == "<unset>");
  auto bad = f;
  bad.scratch_home = "relative/home";
  auto r = render_seatbelt(pol, bad);
  REQUIRE_FALSE(r);
  CHECK(r.err().field == "facts.scratch_home");
  // A writable HOME (the terminal profile, a writable bind of HOME) gets none.
  sandbox_spec t;
  t.session_id = "t1";
  t.workspace_id = "w";
  t.guest_workdir = "/Users/u/wt";
  CHECK_FALSE(seatbelt_scratch_home_needed(compile_ok(t, profile::terminal)));
  auto h = worktree_spec(mode::chat, kMacWorktree);
  h.bind_mounts.push_back({"/Users/u", "/Users/u", false});
  CHECK_FALSE(seatbelt_scratch_home_needed(compile_ok(h, profile::dispatch)));
}
