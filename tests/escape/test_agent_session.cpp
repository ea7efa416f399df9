// P2 P7 E1-E4 S5 S7 (issue 28 "Done means"): one complete agent session
// through the real ccsb-run in the dispatch profile, as a dispatching server
// runs it, for a root and an unprivileged launcher. The original checkout is
// protected (P2) and its linked worktree, made on the host before launch, is
// the writable root. In one session the agent commits on the worktree's
// branch with the scratch HOME's identity, makes a Python venv and installs
// a local wheel into it with no index, and runs `npm install` of a package
// from a registry stand-in on the host's loopback (reached through egressd
// under an allowed name) whose tarball ships `.pem` and `.key` test files.
// What the user configures is only the allowlist (`--allow`) and the two
// exceptions (`--allow-create '.venv/**' --allow-create 'node_modules/**'`);
// the `--egress-opt` lines exist because the stand-in lives on loopback,
// which egressd refuses as an upstream by default. Without the exceptions
// the same session fails: the venv has no pip (certifi's cacert.pem) and
// node_modules lacks the package's certificates.
#include "escape_support.hpp"

#include <mutex>

using namespace escape;

namespace {

// A registry stand-in on the host's 127.0.0.1: GET PATH answers the body
// registered for PATH (the request target in origin or absolute form), 404
// otherwise. Counts the requests per path.
struct registry_standin {
  int fd = -1;
  int port = 0;
  std::map<std::string, std::string> bodies;
  std::map<std::string, int> hits;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::thread th;

  registry_standin() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  void start() { th = std::thread([this] { loop(); }); }
  int hits_of(const std::string& path) {
    std::lock_guard<std::mutex> l(mu);
    return hits.count(path) ? hits[path] : 0;
  }
  void loop() {
    while (!stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{10, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string target;
      if (auto sp = req.find(' '); sp != std::string::npos)
        target = req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1);
      if (target.rfind("http://", 0) == 0) {
        auto slash = target.find('/', 7);
        target = slash == std::string::npos ? "/" : target.substr(slash);
      }
      std::string status = "404 Not Found", body = "not here\n", type = "text/plain";
      {
        std::lock_guard<std::mutex> l(mu);
        ++hits[target];
        if (auto it = bodies.find(target); it != bodies.end()) {
          status = "200 OK";
          body = it->second;
          type = target.size() > 4 && target.substr(target.size() - 4) == ".tgz" ? "application/octet-stream"
                                                                               : "application/json";
        }
      }
      std::string resp = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      for (size_t off = 0; off < resp.size();) {
        ssize_t n = ::send(c, resp.data() + off, resp.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::close(c);
    }
  }
  ~registry_standin() {
    stop = true;
    if (th.joinable()) th.join();
    ::close(fd);
  }
};

std::vector<std::string> host_git(const std::string& repo, std::vector<std::string> args) {
  std::vector<std::string> a{"/usr/bin/git", "-c", "safe.directory=*", "-c", "user.name=host",
                             "-c", "user.email=host@example.invalid", "-C", repo};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

std::string host_git_out(const std::string& repo, std::vector<std::string> args) {
  auto r = run_host(host_git(repo, std::move(args)), repo);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::string s = r.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string host_python(const std::string& code, std::vector<std::string> args = {}) {
  std::vector<std::string> a{"/usr/bin/python3", "-c", code};
  a.insert(a.end(), args.begin(), args.end());
  auto r = run_host(a);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::string s = r.out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Every name below `dir` that P7 covers (.env, *.key, *.pem), as paths.
void p7_names_below(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string p = dir + "/" + n;
    auto ends = [&](const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
    if (n == ".env" || ends(".key") || ends(".pem")) out.push_back(p);
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) p7_names_below(p, out);
  }
  ::closedir(d);
}

bool below(const std::string& p, const std::string& dir) { return p.rfind(dir + "/", 0) == 0; }

} // namespace

TEST_CASE("P2 P7 E4: a complete agent session in the dispatch profile commits from a linked worktree of a protected "
          "checkout, installs a wheel into a venv and an npm package with .pem files from a loopback registry, "
          "with only the allowlist and the exceptions configured",
          "[P2][P7][E4][S5][S7][agent][escape]") {
  REQUIRE(::access("/usr/bin/python3", X_OK) == 0);
  {
    INFO("npm and the python3 venv module come from scripts/install-deps.sh");
    REQUIRE(::access("/usr/bin/npm", X_OK) == 0);
    REQUIRE(::access("/usr/bin/node", X_OK) == 0);
    REQUIRE(run_host({"/usr/bin/python3", "-c", "import venv, ensurepip"}).exit_code == 0);
  }
  for (launcher who : kLaunchers) {
    for (bool exceptions : {true, false}) {
      DYNAMIC_SECTION(name_of(who) << (exceptions ? ", with the exceptions" : ", without the exceptions")) {
        sandbox_fixture fx;
        const std::string tok = random_token();
        // The host user's git identity, carried into the scratch HOME (E5).
        write_file(fx.home + "/.gitconfig", "[user]\n\tname = Agent Host\n\temail = agent.host@example.com\n");

        // The original checkout, protected, and its linked worktree on the host.
        const std::string repos = fx.base + "/repos", orig = repos + "/orig", wt = repos + "/agent1";
        make_dirs(orig);
        run_host_ok({"/usr/bin/git", "init", "-q", "-b", "main", orig});
        write_file(orig + "/README", fx.protected_text);
        write_file(orig + "/.gitignore", ".venv/\nnode_modules/\ndist/\n");
        run_host_ok(host_git(orig, {"add", "README", ".gitignore"}));
        run_host_ok(host_git(orig, {"commit", "-q", "-m", "base"}));
        run_host_ok(host_git(orig, {"worktree", "add", "-q", "-b", "agent1", wt}));
        const std::string main_sha = host_git_out(orig, {"rev-parse", "main"});

        // A wheel with a module and a certificate, as a local build would leave it.
        make_dirs(wt + "/dist");
        const std::string wheel = wt + "/dist/ccsbprobe-1.0-py3-none-any.whl";
        host_python(R"(
import base64, hashlib, sys, zipfile
files = {
    'ccsbprobe/__init__.py': ("VALUE = '" + sys.argv[2] + "'\n").encode(),
    'ccsbprobe/certs/test_cert.pem': b'WHEEL-CERT\n',
    'ccsbprobe-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\nName: ccsbprobe\nVersion: 1.0\n',
    'ccsbprobe-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: ccsb-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
record = ''
for n, b in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
    record += '%s,sha256=%s,%d\n' % (n, h, len(b))
record += 'ccsbprobe-1.0.dist-info/RECORD,,\n'
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for n, b in files.items():
        z.writestr(n, b)
    z.writestr('ccsbprobe-1.0.dist-info/RECORD', record)
)", {wheel, tok});

        // The npm package: package/ with test certificates, as npm packs it.
        make_dirs(fx.outside + "/pkg/package/test");
        write_file(fx.outside + "/pkg/package/package.json",
                   R"({"name":"pemmy","version":"1.0.0","main":"index.js"})" "\n");
        write_file(fx.outside + "/pkg/package/index.js", "module.exports = 'PEMMY-" + tok + "';\n");
        write_file(fx.outside + "/pkg/package/test/test_cert.pem", "NPM-CERT\n");
        write_file(fx.outside + "/pkg/package/test/test_key.key", "NPM-KEY\n");
        const std::string tgz = fx.outside + "/pemmy-1.0.0.tgz";
        run_host_ok({"/usr/bin/tar", "--owner=0", "--group=0", "-C", fx.outside + "/pkg", "-czf", tgz, "package"});
        const std::string integrity =
            "sha512-" + host_python("import base64, hashlib, sys; "
                                    "print(base64.b64encode(hashlib.sha512(open(sys.argv[1], 'rb').read()).digest()).decode())",
                                    {tgz});
        const std::string shasum =
            host_python("import hashlib, sys; print(hashlib.sha1(open(sys.argv[1], 'rb').read()).hexdigest())", {tgz});

        registry_standin reg;
        const std::string host = "registry.test", port = std::to_string(reg.port);
        const std::string tarball_path = "/pemmy/-/pemmy-1.0.0.tgz";
        reg.bodies["/pemmy"] =
            R"({"name":"pemmy","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"pemmy","version":"1.0.0",)"
            R"("main":"index.js","dist":{"tarball":"http://)" + host + ":" + port + tarball_path +
            R"(","integrity":")" + integrity + R"(","shasum":")" + shasum + R"("}}}})";
        reg.bodies[tarball_path] = read_file(tgz);
        reg.start();

        // The agent's session: one script, the commands an agent would run.
        const std::string body =
            "cd " + wt + "\n"
            "echo @@home=$HOME\n"
            // git: work, commit on the worktree's branch with the scratch HOME's identity.
            "printf 'print(1)\\n' > app.py && git add app.py && git commit -q -m 'agent: app'; echo @@commit=$?\n"
            "echo @@head=$(git rev-parse HEAD)\n"
            "echo @@author=\"$(git log -1 --format='%an <%ae>')\"\n"
            // Python: a venv and a local wheel, no index.
            "/usr/bin/python3 -m venv .venv >venv.log 2>&1; echo @@venv=$?\n"
            "./.venv/bin/pip install -q --no-index --disable-pip-version-check dist/ccsbprobe-1.0-py3-none-any.whl"
            " >pip.log 2>&1; echo @@pip=$?\n"
            "echo @@import=$(./.venv/bin/python -c 'import ccsbprobe; print(ccsbprobe.VALUE)' 2>/dev/null)\n"
            // npm: a package from the registry stand-in, through egressd.
            "npm install --no-audit --no-fund --no-update-notifier --registry=http://" + host + ":" + port +
            "/ pemmy >npm.log 2>&1; echo @@npm=$?\n"
            "echo @@require=$(node -e 'console.log(require(\"pemmy\"))' 2>/dev/null)\n"
            // Outside the exceptions P7 still holds.
            "echo stray > stray.pem 2>/dev/null; echo @@stray=$?\n"
            "mkdir -p src && echo x > src/.env 2>/dev/null; echo @@srcenv=$?\n";
        std::vector<std::string> args{"--bind", repos, "--bind", wt, "--protect", orig, "--allow", host,
                                      "--egress-opt", "--resolve", "--egress-opt", host + "=127.0.0.1",
                                      "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"};
        if (exceptions)
          args.insert(args.end(), {"--allow-create", ".venv/**", "--allow-create", "node_modules/**"});
        auto o = launch_options(fx, who, "dispatch", fx.events, args, body);
        o.timeout_seconds = 600;
        auto r = run(o);
        ESCAPE_REQUIRE_RAN(r);
        INFO("venv.log:\n" << read_file(wt + "/venv.log") << "\npip.log:\n" << read_file(wt + "/pip.log")
                           << "\nnpm.log:\n" << read_file(wt + "/npm.log") << "\nevents:\n" << read_file(fx.events));

        // git: the commit is the host's agent1, by the host identity; main and the original are unchanged.
        CHECK(r.get("commit") == "0");
        CHECK(r.get("author") == "Agent Host <agent.host@example.com>");
        CHECK(host_git_out(orig, {"rev-parse", "agent1"}) == r.get("head"));
        CHECK(host_git_out(orig, {"log", "-1", "--format=%s", "agent1"}) == "agent: app");
        CHECK(host_git_out(orig, {"rev-parse", "main"}) == main_sha);
        CHECK(read_file(orig + "/README") == fx.protected_text);
        CHECK(reg.hits_of("/pemmy") >= 1);

        const std::string venv_pem = wt + "/.venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem";
        const std::string wheel_pem = wt + "/.venv/lib/python3.11/site-packages/ccsbprobe/certs/test_cert.pem";
        const std::string npm_pem = wt + "/node_modules/pemmy/test/test_cert.pem";
        const std::string npm_key = wt + "/node_modules/pemmy/test/test_key.key";
        std::vector<std::string> p7;
        p7_names_below(repos, p7);
        if (exceptions) {
          CHECK(r.get("venv") == "0");
          CHECK(r.get("pip") == "0");
          CHECK(r.get("import") == tok);
          CHECK(r.get("npm") == "0");
          CHECK(r.get("require") == "PEMMY-" + tok);
          CHECK(reg.hits_of(tarball_path) >= 1);
          CHECK(file_exists(venv_pem));
          CHECK(read_file(wheel_pem) == "WHEEL-CERT\n");
          CHECK(read_file(npm_pem) == "NPM-CERT\n");
          CHECK(read_file(npm_key) == "NPM-KEY\n");
          CHECK_THAT(r.err, Catch::Matchers::Contains("createAllow (P7 exceptions"));
          // Nothing P7 names was created outside the exceptions.
          for (const auto& p : p7) {
            INFO(p);
            CHECK((below(p, wt + "/.venv") || below(p, wt + "/node_modules")));
          }
        } else {
          CHECK(r.get("venv") != "0");
          CHECK(r.get("import") != tok);
          CHECK_FALSE(file_exists(venv_pem));
          CHECK_FALSE(file_exists(npm_pem));
          CHECK_FALSE(file_exists(npm_key));
          CHECK(has_violation(fx, "file-write-create", venv_pem));
          // npm may extract through a staging name: the certificate's own name is what was denied.
          bool npm_denied = false;
          for (const auto& [a, t] : violations(fx))
            npm_denied = npm_denied || (a == "file-write-create" && below(t, wt + "/node_modules") &&
                                        t.size() > 19 && t.substr(t.size() - 19) == "/test/test_cert.pem");
          CHECK(npm_denied);
          CHECK_THAT(r.err, Catch::Matchers::Contains("run it again with --allow-create '.venv/**'"));
          CHECK(p7.empty());
        }
        // A P7 name outside the exceptions is still denied and reported.
        CHECK(r.get("stray") != "0");
        CHECK(r.get("srcenv") != "0");
        CHECK_FALSE(file_exists(wt + "/stray.pem"));
        CHECK_FALSE(file_exists(wt + "/src/.env"));
        CHECK(has_violation(fx, "file-write-create", wt + "/stray.pem"));
        CHECK(has_violation(fx, "file-write-create", wt + "/src/.env"));
        CHECK_THAT(r.err, Catch::Matchers::Contains("denials in this session"));
        if (exceptions) {
          // ...and those two are the session's only denials (git's
          // auto-maintenance is off: no lock in the original's common git
          // dir after the commit).
          int p7_denials = 0;
          for (const auto& [a, t] : violations(fx)) {
            INFO(a << " " << t);
            CHECK(a == "file-write-create");
            CHECK((t == wt + "/stray.pem" || t == wt + "/src/.env"));
            ++p7_denials;
          }
          CHECK(p7_denials == 2);
        }
      }
    }
  }
}
