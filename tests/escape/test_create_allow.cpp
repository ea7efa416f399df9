// P7 exceptions (createAllow, issue 28 item 4) and unknown spec keys (S1,
// issue 28 item 7), through the real ccsb-run in the dispatch profile, with a
// root and an unprivileged launcher. Each exception test asserts what the
// command could create inside the exception and what it still could NOT
// create, move or link outside it (on the host, after the run).
// On main 3677f17 every test here fails: ccsb-run refuses --allow-create
// and --strict as unknown options (exit 125, nothing runs), and a spec's
// unknown key passes without a word.
#include "escape_support.hpp"

#include "ccsb/spec_json.hpp"

#include <fstream>

using namespace escape;

namespace {

proc_result dispatch_as(const sandbox_fixture& fx, launcher who, const std::vector<std::string>& args,
                        const std::string& body) {
  auto o = launch_options(fx, who, "dispatch", fx.events, args, body);
  o.timeout_seconds = 600;
  return run(o);
}

// python3 inside the sandbox, from the worktree; t(NAME, F) prints
// @@NAME=ok or @@NAME=<errno name>.
std::string py(const sandbox_fixture& fx, const std::string& code) {
  return "cd " + fx.work + " && /usr/bin/python3 - <<'PY'\nimport os, errno, threading\n"
         "def t(name, f):\n    try:\n        f(); print('@@%s=ok' % name, flush=True)\n    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)), flush=True)\n"
         "def mk(p, data='x'):\n    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)\n"
         "    os.write(fd, data.encode()); os.close(fd)\n" +
         code + "\nPY";
}

} // namespace

TEST_CASE("P7: python3 -m venv works with --allow-create '.venv/**', fails without and says how to fix it",
          "[P7][createAllow][escape]") {
  REQUIRE(::access("/usr/bin/python3", X_OK) == 0);
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    sandbox_fixture fx;
    const std::string body = "cd " + fx.work + " && /usr/bin/python3 -m venv .venv >/dev/null 2>&1; echo @@venv=$?\n"
                             "./.venv/bin/python -c 'import pip._vendor.certifi as c; open(c.where()).read()' 2>/dev/null; echo @@pip=$?";
    const std::string pem = fx.work + "/.venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem";
    auto denied = dispatch_as(fx, who, {}, body);
    ESCAPE_REQUIRE_RAN(denied);
    CHECK(denied.get("venv") != "0");
    CHECK_FALSE(file_exists(pem));
    CHECK(has_violation(fx, "file-write-create", pem));
    // The summary at exit names the rule and the exception that would fix it.
    CHECK_THAT(denied.err, Catch::Matchers::Contains("P7 denied creating 1 .env, *.key or *.pem name"));
    CHECK_THAT(denied.err, Catch::Matchers::Contains("--allow-create '.venv/**'"));

    ccsb_test::temp_dir::remove_tree(fx.work + "/.venv");
    auto allowed = dispatch_as(fx, who, {"--allow-create", ".venv/**"}, body);
    ESCAPE_REQUIRE_RAN(allowed);
    CHECK(allowed.get("venv") == "0");
    CHECK(allowed.get("pip") == "0");
    CHECK(file_exists(pem));
    CHECK_THAT(allowed.err, Catch::Matchers::Contains("createAllow (P7 exceptions"));
    CHECK_THAT(allowed.err, Catch::Matchers::Contains(fx.work + "/.venv/**"));
    CHECK(violations(fx).empty());
  }
}

TEST_CASE("P7: names leave a createAllow exception by no rename, link, symlink, dot-dot, case or lookalike",
          "[P7][createAllow][escape]") {
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    sandbox_fixture fx;
    write_file(fx.work + "/host.pem", "HOST\n"); // a P7 name present at launch
    auto r = dispatch_as(fx, who, {"--allow-create=.venv/**"}, py(fx, R"(
os.makedirs('.venv/certs', exist_ok=True)
t('link_in', lambda: os.link('host.pem', '.venv/h.pem'))
t('rename_in', lambda: os.rename('host.pem', '.venv/h.pem'))
t('inside', lambda: mk('.venv/x.pem'))
t('inside_deep', lambda: mk('.venv/certs/a.pem'))
t('inside_rename', lambda: os.rename('.venv/x.pem', '.venv/y.pem'))
t('rename_out', lambda: os.rename('.venv/y.pem', 'y.pem'))
t('link_out', lambda: os.link('.venv/y.pem', 'l.pem'))
t('symlink_out', lambda: os.symlink('.venv/y.pem', 's.pem'))
t('dir_out', lambda: os.rename('.venv/certs', 'certs'))
t('venv_away', lambda: os.rename('.venv', 'venv2'))
t('up_link', lambda: os.symlink('..', '.venv/up'))
t('via_up', lambda: mk('.venv/up/u.pem'))
t('dotdot', lambda: mk('.venv/certs/../../d.pem'))
t('slashes', lambda: mk('.venv//..//e.pem'))
os.makedirs('.VENV', exist_ok=True)
t('case', lambda: mk('.VENV/c.pem'))
os.makedirs('.v\u0435nv', exist_ok=True)
t('lookalike', lambda: mk('.v\u0435nv/k.pem'))
t('outside', lambda: mk('o.pem'))
t('dotenv', lambda: mk('.env'))
t('npmrc_inside', lambda: mk('.venv/.npmrc'))
# A second thread swaps the symlink .venv/sw between .venv/d (inside the
# exception) and .. (the root) while this one creates through it.
os.makedirs('.venv/d', exist_ok=True)
stop = False
def flip():
    n = 0
    while not stop:
        n += 1
        try:
            os.symlink('..' if n % 2 else 'd', '.venv/sw.tmp')
            os.replace('.venv/sw.tmp', '.venv/sw')
        except OSError:
            pass
th = threading.Thread(target=flip)
th.start()
for i in range(300):
    try:
        mk('.venv/sw/r%d.pem' % i)
    except OSError:
        pass
stop = True
th.join()
print('@@race_done=1')
)"));
    ESCAPE_REQUIRE_RAN(r);
    for (const char* k : {"inside", "inside_deep", "inside_rename"}) {
      INFO(k);
      CHECK(r.get(k) == "ok");
    }
    for (const char* k : {"link_in", "rename_in", "rename_out", "link_out", "symlink_out", "dir_out", "venv_away", "via_up", "dotdot", "slashes",
                          "case", "lookalike", "outside", "dotenv", "npmrc_inside"}) {
      INFO(k);
      CHECK(r.get(k) == "EACCES");
    }
    CHECK(r.get("up_link") == "ok"); // a symlink named up is no P7 name; what is created through it is decided
    CHECK(r.get("race_done") == "1");
    CHECK(read_file(fx.work + "/host.pem") == "HOST\n"); // an existing P7 name is not brought into the exception
    CHECK_FALSE(file_exists(fx.work + "/.venv/h.pem"));
    CHECK(file_exists(fx.work + "/.venv/y.pem"));
    CHECK(file_exists(fx.work + "/.venv/certs/a.pem"));
    for (const char* p : {"/y.pem", "/l.pem", "/s.pem", "/certs", "/venv2", "/u.pem", "/d.pem", "/e.pem", "/.VENV/c.pem",
                          "/.v\xd0\xb5nv/k.pem", "/o.pem", "/.env", "/.venv/.npmrc"}) {
      INFO(p);
      CHECK_FALSE(file_exists(fx.work + p));
    }
    for (int i = 0; i < 300; ++i) CHECK_FALSE(file_exists(fx.work + "/r" + std::to_string(i) + ".pem"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/y.pem"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/certs"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/u.pem"));
  }
}

TEST_CASE("P7: a .venv that is a symlink at launch leads where the exception does not apply",
          "[P7][createAllow][escape]") {
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    sandbox_fixture fx;
    make_dirs(fx.work + "/src");
    REQUIRE(::symlink("src", (fx.work + "/.venv").c_str()) == 0);
    auto r = dispatch_as(fx, who, {"--allow-create", ".venv/**"}, py(fx, "t('through', lambda: mk('.venv/x.pem'))"));
    ESCAPE_REQUIRE_RAN(r);
    CHECK(r.get("through") == "EACCES");
    CHECK_FALSE(file_exists(fx.work + "/src/x.pem"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/src/x.pem"));
  }
}

TEST_CASE("P7: cp .env.example .env and a package's .pem files with an exception, tar without one",
          "[P7][createAllow][escape]") {
  sandbox_fixture fx;
  // A package as npm packs it: package/ with test certificates.
  make_dirs(fx.outside + "/pkg/package/test");
  write_file(fx.outside + "/pkg/package/package.json", R"({"name":"pemmy","version":"1.0.0"})" "\n");
  write_file(fx.outside + "/pkg/package/index.js", "module.exports = 1;\n");
  write_file(fx.outside + "/pkg/package/test/test_cert.pem", "CERT\n");
  write_file(fx.outside + "/pkg/package/test/test_key.key", "KEY\n");
  run_host_ok({"/usr/bin/tar", "-C", fx.outside + "/pkg", "-czf", fx.work + "/pemmy-1.0.0.tgz", "package"});
  write_file(fx.work + "/.env.example", "A=1\n");
  const bool npm = ::access("/usr/bin/npm", X_OK) == 0;
  const std::string install =
      npm ? std::string("npm install --offline --no-audit --no-fund --ignore-scripts ./pemmy-1.0.0.tgz >/dev/null 2>&1")
          : std::string("mkdir -p node_modules/pemmy && tar -C node_modules/pemmy --strip-components=1 -xzf "
                        "pemmy-1.0.0.tgz");
  const std::string body = "cd " + fx.work + "\n" + install + "; echo @@install=$?\n"
                           "cp .env.example .env; echo @@env=$?\nmkdir -p sub && cp .env.example sub/.env; echo @@subenv=$?";
  const std::string cert = fx.work + "/node_modules/pemmy/test/test_cert.pem";
  for (launcher who : kLaunchers) {
    INFO(name_of(who) << (npm ? " (npm)" : " (tar)"));
    for (const char* p : {"/.env", "/sub/.env"}) ::unlink((fx.work + p).c_str());
    ccsb_test::temp_dir::remove_tree(fx.work + "/node_modules");
    auto without = dispatch_as(fx, who, {}, body);
    ESCAPE_REQUIRE_RAN(without);
    CHECK(without.get("env") != "0");
    CHECK_FALSE(file_exists(cert));
    CHECK(file_exists(fx.work + "/node_modules/pemmy/index.js"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/.env"));
    CHECK_THAT(without.err, Catch::Matchers::Contains("--allow-create"));

    ccsb_test::temp_dir::remove_tree(fx.work + "/node_modules");
    auto with = dispatch_as(fx, who, {"--allow-create", "node_modules/**", "--allow-create", ".env"}, body);
    ESCAPE_REQUIRE_RAN(with);
    CHECK(with.get("install") == "0");
    CHECK(with.get("env") == "0");
    CHECK(with.get("subenv") != "0"); // the exception is .env at the root, not at any depth
    CHECK(read_file(cert) == "CERT\n");
    CHECK(read_file(fx.work + "/node_modules/pemmy/test/test_key.key") == "KEY\n");
    CHECK(read_file(fx.work + "/.env") == "A=1\n");
    CHECK_FALSE(file_exists(fx.work + "/sub/.env"));
    CHECK(has_violation(fx, "file-write-create", fx.work + "/sub/.env"));
  }
}

TEST_CASE("P7: ccsb-run refuses createAllow patterns for a root, a .git dir, P5 names, .. and other dialects",
          "[P7][createAllow][escape]") {
  sandbox_fixture fx;
  struct bad {
    std::vector<std::string> args;
    const char* says;
  };
  const std::string spec = fx.base + "/spec.json";
  write_file(spec, R"({"sessionId":"ca","workspaceId":"w","createAllow":[".venv/**",")" + fx.work + R"(/**"]})");
  for (const auto& b : {bad{{"--allow-create", "**"}, "createAllow[0]"}, bad{{"--allow-create=*"}, "createAllow[0]"},
                        bad{{"--allow-create", ".git/**"}, ".git"}, bad{{"--allow-create", "a/../../x.pem"}, "\"..\""},
                        bad{{"--allow-create", ".vscode/**"}, "tool configuration"},
                        bad{{"--allow-create", "[ab].pem"}, "glob language"},
                        bad{{"--allow-create", ".venv/**", "--allow-create", fx.work + "/**"}, "createAllow[1]"},
                        bad{{"--allow-create", "/elsewhere/.env"}, "below no writable root"},
                        bad{{"--spec", spec}, "createAllow[1]"}}) {
    INFO(b.args.back());
    auto r = run(launch_options(fx, launcher::root, "dispatch", fx.events, b.args, "echo @@ran=1"));
    CHECK(r.exit_code == 125);
    CHECK(r.get("ran") == "<missing>");
    CHECK_THAT(r.err, Catch::Matchers::Contains(b.says));
  }
}

TEST_CASE("P7: the handle's details name the session's createAllow exceptions", "[P7][createAllow][escape]") {
  sandbox_fixture fx;
  const std::string handle = fx.base + "/handle.json";
  auto r = dispatch_as(fx, launcher::root, {"--handle", handle, "--allow-create", ".venv/**"}, "true");
  ESCAPE_REQUIRE_RAN(r);
  auto h = ccsb::parse_handle(read_file(handle));
  REQUIRE(h);
  auto it = h->details().find("createAllow");
  REQUIRE(it != h->details().end());
  REQUIRE(it->second.is<picojson::array>());
  REQUIRE(it->second.get<picojson::array>().size() == 1);
  CHECK(it->second.get<picojson::array>()[0].get<std::string>() == fx.work + "/.venv/**");
  ::unlink(handle.c_str());
  auto plain = dispatch_as(fx, launcher::root, {"--handle", handle}, "true");
  ESCAPE_REQUIRE_RAN(plain);
  auto h2 = ccsb::parse_handle(read_file(handle));
  REQUIRE(h2);
  CHECK(h2->details().count("createAllow") == 0); // never a default
}

TEST_CASE("S1: an unknown spec key is named with a suggestion, and --strict refuses it", "[S1][escape]") {
  sandbox_fixture fx;
  const std::string spec = fx.base + "/typo.json";
  write_file(spec, R"({"sessionId":"typo","workspaceId":"w","bindMounts":[{"hostPath":")" + fx.work +
                       R"("}],"protectedPath":[")" + fx.work + R"(/keep"]})");
  make_dirs(fx.work + "/keep");
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    auto warned = dispatch_as(fx, who, {"--spec", spec}, "true");
    ESCAPE_REQUIRE_RAN(warned);
    CHECK_THAT(warned.err, Catch::Matchers::Contains(
                               "spec.protectedPath is not a spec field and is ignored (did you mean protectedPaths?)"));
    auto strict = dispatch_as(fx, who, {"--strict", "--spec", spec}, "echo @@ran=1");
    CHECK(strict.exit_code == 125);
    CHECK(strict.get("ran") == "<missing>");
    CHECK_THAT(strict.err, Catch::Matchers::Contains("spec.protectedPath"));
    CHECK_THAT(strict.err, Catch::Matchers::Contains("--strict refuses unknown keys"));
  }
}
