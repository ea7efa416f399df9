// E4, N2, N7 (issue 11): the client matrix. Each client runs for real inside
// `ccsb-run --profile spec` against file servers this test starts on the
// host's loopback (python3's http.server, plain and TLS with a test CA),
// under a name the session allows (it succeeds) and under one it does not
// (the client's own error, exactly one `violation` event, and no request at
// the server). Every name, allowed or not, resolves to the server (egressd
// `--resolve`): a proxy that let a denied name through would reach it. The
// clients come from scripts/install-deps.sh; a missing one fails the test.
#include "escape_support.hpp"

using namespace escape;

namespace {

// --allow for each allowed name; every name (allowed or denied) resolves to
// the host's loopback, where upstreams are allowed (the servers live there).
std::vector<std::string> matrix_session(const std::vector<std::string>& allowed,
                                        const std::vector<std::string>& denied) {
  std::vector<std::string> a;
  for (const auto& n : allowed) a.insert(a.end(), {"--allow", n});
  for (const auto& list : {allowed, denied})
    for (const auto& n : list) a.insert(a.end(), {"--egress-opt", "--resolve", "--egress-opt", n + "=127.0.0.1"});
  a.insert(a.end(), {"--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  return a;
}

int violations_for(const sandbox_fixture& fx, const std::string& target) {
  int n = 0;
  for (auto& e : read_events(fx.events)) {
    auto [action, t] = violation_of(e);
    if (action == "network-outbound" && t == target) ++n;
  }
  return n;
}

void require_tool(const std::string& path) {
  INFO("client missing: " << path << " (scripts/install-deps.sh installs it)");
  REQUIRE(::access(path.c_str(), X_OK) == 0);
}

// Writes a file the sandbox uid can read (the fixture was handed over before).
void write_for_sandbox(const std::string& path, const std::string& text) {
  write_file(path, text, 0644);
  if (::geteuid() == 0) ::lchown(path.c_str(), kSandboxTestUid, kSandboxTestGid);
}

// serve.py ROOT PORT LOG [CERT KEY]: static files from ROOT on 127.0.0.1,
// TLS when given a certificate; one "HOST METHOD PATH" line per request in
// LOG. A TLS connection ends with close_notify (openssl s_client counts an
// EOF without it as an error).
const char* kServePy = R"PY(
import functools, http.server, ssl, sys
root, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        with open(log, 'a') as f:
            f.write('%s %s %s\n' % (self.headers.get('Host', '-'), self.command, self.path))
class Server(http.server.ThreadingHTTPServer):
    def shutdown_request(self, request):
        if isinstance(request, ssl.SSLSocket):
            try:
                request.unwrap()
            except OSError:
                pass
        super().shutdown_request(request)
server = Server(('127.0.0.1', port), functools.partial(Handler, directory=root))
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
)PY";

// A test CA (in the worktree, for the sandboxed clients to trust) and one
// server certificate it signed for every name a test uses.
struct test_ca {
  std::string ca_pem, cert, key;
  test_ca(const sandbox_fixture& fx, const std::vector<std::string>& names) {
    const std::string dir = fx.base + "/ca";
    make_dirs(dir, 0700);
    const std::string ca_key = dir + "/ca.key";
    const std::string ca_host = dir + "/ca.pem";
    run_host_ok({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", ca_key, "-out", ca_host, "-days", "2", "-subj", "/CN=ccsb matrix test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"});
    std::string san = "subjectAltName=";
    for (size_t i = 0; i < names.size(); ++i) san += (i ? ",DNS:" : "DNS:") + names[i];
    cert = dir + "/server.pem";
    key = dir + "/server.key";
    run_host_ok({"/usr/bin/openssl", "req", "-x509", "-CA", ca_host, "-CAkey", ca_key, "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj",
                 "/CN=" + names.front(), "-addext", "basicConstraints=critical,CA:FALSE", "-addext", san});
    ca_pem = fx.work + "/matrix-ca.pem";
    write_for_sandbox(ca_pem, read_file(ca_host));
  }
};

// A static file server on the host's 127.0.0.1 (HTTPS when given a CA's
// certificate): `dir` holds what it serves, hello.txt carries `marker`.
struct file_server {
  std::string dir, log, marker;
  int port = 0;
  host_daemon daemon;
  file_server(const sandbox_fixture& fx, const std::string& tag, const test_ca* tls = nullptr) {
    dir = fx.base + "/srv-" + tag;
    log = fx.base + "/srv-" + tag + ".log";
    make_dirs(dir);
    marker = "MATRIX-" + tag + "-" + random_token();
    write_file(dir + "/hello.txt", marker + "\n");
    write_file(fx.base + "/serve.py", kServePy);
    write_file(log, "");
    port = free_tcp_port();
    spawn_options o;
    o.argv = {"/usr/bin/python3", fx.base + "/serve.py", dir, std::to_string(port), log};
    if (tls) o.argv.insert(o.argv.end(), {tls->cert, tls->key});
    o.env = {"PATH=/usr/bin:/bin", "LANG=C"};
    daemon.start(o, port, "python3 file server (" + tag + ")");
  }
  // Requests whose Host header names `host` (with or without the port).
  int requests_for(const std::string& host) const {
    std::stringstream ss(read_file(log));
    std::string line;
    int n = 0;
    while (std::getline(ss, line)) {
      const std::string h = line.substr(0, line.find(' '));
      if (h == host || h.rfind(host + ":", 0) == 0) ++n;
    }
    return n;
  }
  std::string url(const std::string& scheme, const std::string& host, const std::string& path) const {
    return scheme + "://" + host + ":" + std::to_string(port) + path;
  }
  std::string target(const std::string& host) const { return host + ":" + std::to_string(port); }
};

// A bare repository with one commit, served over git's dumb HTTP protocol
// from `srv` as /repo.git.
std::string serve_git_repo(const sandbox_fixture& fx, const file_server& srv) {
  const std::string marker = "GIT-HTTP-" + random_token();
  const std::string src = fx.base + "/gitsrc";
  make_dirs(src);
  run_host_ok({"/usr/bin/git", "init", "-q", src});
  write_file(src + "/HELLO", marker + "\n");
  run_host_ok({"/usr/bin/git", "-C", src, "add", "HELLO"});
  run_host_ok({"/usr/bin/git", "-C", src, "commit", "-q", "-m", "init"});
  run_host_ok({"/usr/bin/git", "clone", "-q", "--bare", src, srv.dir + "/repo.git"});
  run_host_ok({"/usr/bin/git", "-C", srv.dir + "/repo.git", "update-server-info"});
  return marker;
}

} // namespace

TEST_CASE("E4: curl over HTTPS (CONNECT, test CA) and over socks5h (ALL_PROXY) reaches an allowed name, a denied "
          "one fails with curl's error and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/curl");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"allowed-curl.test"}, denied{"denied-https.test", "denied-socks.test"};
  test_ca ca(fx, {"allowed-curl.test", "denied-https.test"});
  file_server tls(fx, "curl-tls", &ca);
  file_server plain(fx, "curl-plain");
  const std::string socks_env = "env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY ";
  auto r = fx.ccsb("echo \"@@all_proxy=$ALL_PROXY\"\n"
                   "curl -sS --max-time 30 --cacert " + ca.ca_pem + " " +
                       tls.url("https", "allowed-curl.test", "/hello.txt") + " | sed 's/^/@@https=/'\n"
                   "curl -sS --max-time 30 --cacert " + ca.ca_pem + " " +
                       tls.url("https", "denied-https.test", "/hello.txt") + " > " + fx.work +
                       "/https-denied.out 2>&1; echo @@https_denied_rc=$?\n"
                   // Only ALL_PROXY left: curl takes it for every scheme.
                   + socks_env + "curl -sS -v --max-time 30 -o " + fx.work + "/socks.body " +
                       plain.url("http", "allowed-curl.test", "/hello.txt") + " 2> " + fx.work +
                       "/socks.err; echo @@socks_rc=$?\n"
                   + socks_env + "curl -sS --max-time 30 " + plain.url("http", "denied-socks.test", "/hello.txt") +
                       " > " + fx.work + "/socks-denied.out 2>&1; echo @@socks_denied_rc=$?",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string https_denied = read_file(fx.work + "/https-denied.out");
  const std::string socks_denied = read_file(fx.work + "/socks-denied.out");
  INFO(r.describe() << "\n--- https denied ---\n" << https_denied << "\n--- socks ---\n"
                    << read_file(fx.work + "/socks.err") << "\n--- socks denied ---\n" << socks_denied
                    << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("all_proxy") == "socks5h://127.0.0.1:1080");
  CHECK(r.get("https") == tls.marker);
  CHECK(tls.requests_for("allowed-curl.test") == 1);
  CHECK(r.get("socks_rc") == "0");
  CHECK(read_file(fx.work + "/socks.body") == plain.marker + "\n");
  // The name went to the SOCKS proxy unresolved (socks5h).
  CHECK_THAT(read_file(fx.work + "/socks.err"), Catch::Contains("SOCKS5 connect to allowed-curl.test"));
  CHECK(plain.requests_for("allowed-curl.test") == 1);

  CHECK(r.get("https_denied_rc") == "56");
  CHECK_THAT(https_denied, Catch::Contains("CONNECT tunnel failed, response 403"));
  CHECK(tls.requests_for("denied-https.test") == 0);
  CHECK(violations_for(fx, tls.target("denied-https.test")) == 1);
  CHECK(r.get("socks_denied_rc") == "97");
  CHECK_THAT(socks_denied, Catch::Contains("Can't complete SOCKS5 connection to denied-socks.test"));
  CHECK(plain.requests_for("denied-socks.test") == 0);
  CHECK(violations_for(fx, plain.target("denied-socks.test")) == 1);
}

TEST_CASE("E4: wget over HTTP and HTTPS reaches an allowed name through the proxy, a denied one fails with wget's "
          "error and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/wget");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"allowed-wget.test"}, denied{"denied-wget.test", "denied-wgets.test"};
  test_ca ca(fx, {"allowed-wget.test", "denied-wgets.test"});
  file_server tls(fx, "wget-tls", &ca);
  file_server plain(fx, "wget-plain");
  auto r = fx.ccsb("wget -q -O - " + plain.url("http", "allowed-wget.test", "/hello.txt") +
                       " 2>/dev/null | sed 's/^/@@http=/'\n"
                   "wget -q -O - --ca-certificate=" + ca.ca_pem + " " +
                       tls.url("https", "allowed-wget.test", "/hello.txt") + " 2>/dev/null | sed 's/^/@@https=/'\n"
                   "wget -nv -O " + fx.work + "/no-http " + plain.url("http", "denied-wget.test", "/hello.txt") +
                       " > " + fx.work + "/http-denied.out 2>&1; echo @@http_denied_rc=$?\n"
                   "wget -nv -O " + fx.work + "/no-https --ca-certificate=" + ca.ca_pem + " " +
                       tls.url("https", "denied-wgets.test", "/hello.txt") + " > " + fx.work +
                       "/https-denied.out 2>&1; echo @@https_denied_rc=$?",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string http_denied = read_file(fx.work + "/http-denied.out");
  const std::string https_denied = read_file(fx.work + "/https-denied.out");
  INFO(r.describe() << "\n--- http denied ---\n" << http_denied << "\n--- https denied ---\n" << https_denied
                    << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("http") == plain.marker);
  CHECK(r.get("https") == tls.marker);
  CHECK(plain.requests_for("allowed-wget.test") == 1);
  CHECK(tls.requests_for("allowed-wget.test") == 1);
  // HTTP: the proxy's 403 is wget's server error (exit 8); HTTPS: the
  // CONNECT refusal (exit 4). wget retries neither.
  CHECK(r.get("http_denied_rc") == "8");
  CHECK_THAT(http_denied, Catch::Contains("ERROR 403: Forbidden."));
  CHECK(r.get("https_denied_rc") == "4");
  CHECK_THAT(https_denied, Catch::Contains("Proxy tunneling failed: Forbidden"));
  CHECK(read_file(fx.work + "/no-http").find(plain.marker) == std::string::npos);
  CHECK(read_file(fx.work + "/no-https").find(tls.marker) == std::string::npos);
  CHECK(plain.requests_for("denied-wget.test") == 0);
  CHECK(tls.requests_for("denied-wgets.test") == 0);
  CHECK(violations_for(fx, plain.target("denied-wget.test")) == 1);
  CHECK(violations_for(fx, tls.target("denied-wgets.test")) == 1);
}

TEST_CASE("E4: python urllib over HTTP and HTTPS reaches an allowed name through the proxy, a denied one fails with "
          "urllib's error and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/python3");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"allowed-py.test"}, denied{"denied-py.test", "denied-pys.test"};
  test_ca ca(fx, {"allowed-py.test", "denied-pys.test"});
  file_server tls(fx, "py-tls", &ca);
  file_server plain(fx, "py-plain");
  write_for_sandbox(fx.work + "/fetch.py",
                    "import ssl, sys, urllib.request\n"
                    "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
                    "for arg in sys.argv[2:]:\n"
                    "    tag, url = arg.split('=', 1)\n"
                    "    try:\n"
                    "        body = urllib.request.urlopen(url, context=ctx, timeout=30).read().decode().strip()\n"
                    "        print('@@%s_body=%s' % (tag, body))\n"
                    "    except Exception as e:\n"
                    "        print('@@%s_error=%r' % (tag, e))\n");
  auto r = fx.ccsb("/usr/bin/python3 " + fx.work + "/fetch.py " + ca.ca_pem +
                       " h=" + plain.url("http", "allowed-py.test", "/hello.txt") +
                       " s=" + tls.url("https", "allowed-py.test", "/hello.txt") +
                       " dh=" + plain.url("http", "denied-py.test", "/hello.txt") +
                       " ds=" + tls.url("https", "denied-pys.test", "/hello.txt") + " 2>&1",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("h_body") == plain.marker);
  CHECK(r.get("s_body") == tls.marker);
  CHECK(plain.requests_for("allowed-py.test") == 1);
  CHECK(tls.requests_for("allowed-py.test") == 1);
  CHECK(r.get("dh_body") == "<missing>");
  CHECK(r.get("dh_error") == "<HTTPError 403: 'Forbidden'>");
  CHECK(r.get("ds_body") == "<missing>");
  CHECK(r.get("ds_error") == "URLError(OSError('Tunnel connection failed: 403 Forbidden'))");
  CHECK(plain.requests_for("denied-py.test") == 0);
  CHECK(tls.requests_for("denied-pys.test") == 0);
  CHECK(violations_for(fx, plain.target("denied-py.test")) == 1);
  CHECK(violations_for(fx, tls.target("denied-pys.test")) == 1);
}

TEST_CASE("E4: git clone over HTTP and HTTPS reaches an allowed name through the proxy, a denied one fails with "
          "git's error and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/git");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"allowed-githttp.test"}, denied{"denied-githttp.test", "denied-gits.test"};
  test_ca ca(fx, {"allowed-githttp.test", "denied-gits.test"});
  file_server tls(fx, "git-tls", &ca);
  file_server plain(fx, "git-plain");
  const std::string marker = serve_git_repo(fx, plain);
  run_host_ok({"/usr/bin/cp", "-a", plain.dir + "/repo.git", tls.dir + "/repo.git"});
  const std::string ca_opt = "-c http.sslCAInfo=" + ca.ca_pem + " ";
  auto r = fx.ccsb("git clone -q " + plain.url("http", "allowed-githttp.test", "/repo.git") + // X1: clones go to /tmp
                       " /tmp/c-http 2>&1; echo @@http_rc=$?\n"
                   "cat /tmp/c-http/HELLO | sed 's/^/@@http=/'\n"
                   "git " + ca_opt + "clone -q " + tls.url("https", "allowed-githttp.test", "/repo.git") +
                       " /tmp/c-https 2>&1; echo @@https_rc=$?\n"
                   "cat /tmp/c-https/HELLO | sed 's/^/@@https=/'\n"
                   "git clone -q " + plain.url("http", "denied-githttp.test", "/repo.git") +
                       " /tmp/c-denied > " + fx.work + "/http-denied.out 2>&1; echo @@http_denied_rc=$?\n"
                   "git " + ca_opt + "clone -q " + tls.url("https", "denied-gits.test", "/repo.git") +
                       " /tmp/c-denieds > " + fx.work + "/https-denied.out 2>&1; echo @@https_denied_rc=$?\n"
                   "ls /tmp/c-denied/HELLO /tmp/c-denieds/HELLO 2>/dev/null | sed 's/^/@@denied_file=/'",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string http_denied = read_file(fx.work + "/http-denied.out");
  const std::string https_denied = read_file(fx.work + "/https-denied.out");
  INFO(r.describe() << "\n--- http denied ---\n" << http_denied << "\n--- https denied ---\n" << https_denied
                    << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("http_rc") == "0");
  CHECK(r.get("http") == marker);
  CHECK(r.get("https_rc") == "0");
  CHECK(r.get("https") == marker);
  CHECK(plain.requests_for("allowed-githttp.test") >= 1);
  CHECK(tls.requests_for("allowed-githttp.test") >= 1);
  CHECK(r.get("http_denied_rc") == "128");
  CHECK_THAT(http_denied, Catch::Contains("The requested URL returned error: 403"));
  CHECK_THAT(http_denied, Catch::Contains("egressd: Forbidden: not_allowlisted"));
  CHECK(r.get("https_denied_rc") == "128");
  CHECK_THAT(https_denied, Catch::Contains("CONNECT tunnel failed, response 403"));
  CHECK(r.get("denied_file") == "<missing>");
  CHECK(plain.requests_for("denied-githttp.test") == 0);
  CHECK(tls.requests_for("denied-gits.test") == 0);
  CHECK(violations_for(fx, plain.target("denied-githttp.test")) == 1);
  CHECK(violations_for(fx, tls.target("denied-gits.test")) == 1);
}

TEST_CASE("E4: pip installs a wheel from a local simple index under an allowed name over HTTPS, a denied index fails "
          "with pip's error and one violation per attempt", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/pip3");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"pkgs.test"}, denied{"denied-pkgs.test", "denied-once.test"};
  test_ca ca(fx, {"pkgs.test"});
  file_server idx(fx, "pip", &ca);
  // A PEP 503 index with one pure-Python wheel, built here.
  const std::string wheel_marker = "PIP-WHEEL-" + random_token();
  write_file(fx.base + "/mkwheel.py", R"PY(
import base64, hashlib, os, sys, zipfile
root, marker = sys.argv[1], sys.argv[2]
name = 'ccsb_probe-1.0.0-py3-none-any.whl'
files = {
    'ccsb_probe/__init__.py': 'MARKER = %r\n' % marker,
    'ccsb_probe-1.0.0.dist-info/METADATA': 'Metadata-Version: 2.1\nName: ccsb-probe\nVersion: 1.0.0\n',
    'ccsb_probe-1.0.0.dist-info/WHEEL':
        'Wheel-Version: 1.0\nGenerator: ccsb-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
def digest(b):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
record = ''.join('%s,%s,%d\n' % (p, digest(t.encode()), len(t.encode())) for p, t in files.items())
files['ccsb_probe-1.0.0.dist-info/RECORD'] = record + 'ccsb_probe-1.0.0.dist-info/RECORD,,\n'
os.makedirs(root + '/files')
os.makedirs(root + '/simple/ccsb-probe')
with zipfile.ZipFile(root + '/files/' + name, 'w') as z:
    for p, t in files.items():
        z.writestr(p, t)
sha = hashlib.sha256(open(root + '/files/' + name, 'rb').read()).hexdigest()
with open(root + '/simple/index.html', 'w') as f:
    f.write('<a href="ccsb-probe/">ccsb-probe</a>\n')
with open(root + '/simple/ccsb-probe/index.html', 'w') as f:
    f.write('<a href="../../files/%s#sha256=%s">%s</a>\n' % (name, sha, name))
)PY");
  run_host_ok({"/usr/bin/python3", fx.base + "/mkwheel.py", idx.dir, wheel_marker});
  // A denied index as pip has it by default: 5 retries, each warning with
  // the proxy's reason, one violation per attempt; with --retries 0 one
  // attempt and one violation (pip then names the reason only at -vv).
  const std::string pip = "pip3 --disable-pip-version-check --no-cache-dir ";
  auto denied_download = [&](const std::string& name, const std::string& opts, const std::string& out) {
    return pip + "download " + opts + "--no-deps -d " + fx.work + "/dl --cert " + ca.ca_pem + " --index-url " +
           idx.url("https", name, "/simple/") + " ccsb-probe > " + fx.work + "/" + out + " 2>&1";
  };
  auto r = fx.ccsb(pip + "install --no-deps --target " + fx.work + "/site --cert " + ca.ca_pem + " --index-url " +
                       idx.url("https", "pkgs.test", "/simple/") + " ccsb-probe > " + fx.work +
                       "/install.out 2>&1; echo @@install_rc=$?\n"
                   "PYTHONPATH=" + fx.work + "/site /usr/bin/python3 -c 'import ccsb_probe; "
                       "print(\"@@marker=\" + ccsb_probe.MARKER)'\n"
                   + denied_download("denied-pkgs.test", "", "denied.out") + "; echo @@denied_rc=$?\n" +
                   denied_download("denied-once.test", "--retries 0 ", "once.out") + "; echo @@once_rc=$?\n"
                   "ls " + fx.work + "/dl 2>/dev/null | sed 's/^/@@downloaded=/'",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string denied_out = read_file(fx.work + "/denied.out");
  const std::string once_out = read_file(fx.work + "/once.out");
  INFO(r.describe() << "\n--- install ---\n" << read_file(fx.work + "/install.out") << "\n--- denied ---\n"
                    << denied_out << "\n--- denied, --retries 0 ---\n" << once_out << "\n--- events ---\n"
                    << read_file(fx.events));
  CHECK(r.get("install_rc") == "0");
  CHECK(r.get("marker") == wheel_marker);
  CHECK(idx.requests_for("pkgs.test") >= 2); // the project page and the wheel
  CHECK(r.get("denied_rc") == "1");
  CHECK_THAT(denied_out, Catch::Contains("after connection broken by 'ProxyError('Cannot connect to proxy.', "
                                         "OSError('Tunnel connection failed: 403 Forbidden'))'"));
  CHECK_THAT(denied_out, Catch::Contains("ERROR: No matching distribution found for ccsb-probe"));
  CHECK(violations_for(fx, idx.target("denied-pkgs.test")) == 6);
  CHECK(r.get("once_rc") == "1");
  CHECK_THAT(once_out, Catch::Contains("ERROR: No matching distribution found for ccsb-probe"));
  CHECK(violations_for(fx, idx.target("denied-once.test")) == 1);
  CHECK(r.get("downloaded") == "<missing>");
  CHECK(idx.requests_for("denied-pkgs.test") == 0);
  CHECK(idx.requests_for("denied-once.test") == 0);
}

TEST_CASE("E4: openssl s_client -proxy tunnels TLS to an allowed name (verify return code 0), a denied one fails "
          "at CONNECT and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/openssl");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"allowed-tls.test"}, denied{"denied-tls.test"};
  test_ca ca(fx, {"allowed-tls.test", "denied-tls.test"});
  file_server tls(fx, "openssl", &ca);
  // s_client reads no proxy variable: -proxy takes HTTPS_PROXY's host:port.
  auto s_client = [&](const std::string& name, const std::string& out) {
    return "printf 'GET /hello.txt HTTP/1.0\\r\\nHost: " + name +
           "\\r\\n\\r\\n' | openssl s_client -ign_eof -proxy \"${HTTPS_PROXY#http://}\" -connect " + tls.target(name) +
           " -servername " + name + " -verify_hostname " + name + " -verify_return_error -CAfile " + ca.ca_pem +
           " > " + out + " 2>&1";
  };
  auto r = fx.ccsb(s_client("allowed-tls.test", fx.work + "/allowed.out") + "; echo @@allowed_rc=$?\n" +
                       s_client("denied-tls.test", fx.work + "/denied.out") + "; echo @@denied_rc=$?",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string allowed_out = read_file(fx.work + "/allowed.out");
  const std::string denied_out = read_file(fx.work + "/denied.out");
  INFO(r.describe() << "\n--- allowed ---\n" << allowed_out << "\n--- denied ---\n" << denied_out
                    << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("allowed_rc") == "0");
  CHECK_THAT(allowed_out, Catch::Contains("subject=CN = allowed-tls.test"));
  CHECK_THAT(allowed_out, Catch::Contains("issuer=CN = ccsb matrix test CA"));
  CHECK_THAT(allowed_out, Catch::Contains("Verify return code: 0 (ok)"));
  CHECK_THAT(allowed_out, Catch::Contains(tls.marker));
  CHECK(tls.requests_for("allowed-tls.test") == 1);
  // Denied: no handshake at all (s_client still prints its empty summary,
  // "Verify return code: 0" included, so the assertions are on what it
  // never got: a certificate, the body).
  CHECK(r.get("denied_rc") == "1");
  CHECK_THAT(denied_out, Catch::Contains("s_client: HTTP CONNECT failed, reason= 403 Forbidden"));
  CHECK_THAT(denied_out, Catch::Contains("no peer certificate available"));
  CHECK_THAT(denied_out, !Catch::Contains("subject=CN"));
  CHECK_THAT(denied_out, !Catch::Contains(tls.marker));
  CHECK(tls.requests_for("denied-tls.test") == 0);
  CHECK(violations_for(fx, tls.target("denied-tls.test")) == 1);
}

TEST_CASE("E4: go fetches a module from a GOPROXY under an allowed name through HTTP_PROXY and builds with it, a "
          "denied GOPROXY fails with go's error and is reported once", "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/go");
  sandbox_fixture fx;
  const std::vector<std::string> allowed{"proxy.golang.test"}, denied{"denied-goproxy.test"};
  file_server gp(fx, "goproxy");
  // The GOPROXY protocol is static files: MODULE/@v/{list,V.info,V.mod,V.zip}.
  const std::string mod_marker = "GO-MODULE-" + random_token();
  write_file(fx.base + "/mkmod.py", R"PY(
import os, sys, zipfile
root, mod, ver, marker = sys.argv[1:5]
d = os.path.join(root, mod, '@v')
os.makedirs(d, exist_ok=True)
gomod = 'module %s\n\ngo 1.19\n' % mod
with open(os.path.join(d, 'list'), 'a') as f:
    f.write(ver + '\n')
with open(os.path.join(d, ver + '.info'), 'w') as f:
    f.write('{"Version":"%s","Time":"2024-01-01T00:00:00Z"}\n' % ver)
with open(os.path.join(d, ver + '.mod'), 'w') as f:
    f.write(gomod)
with zipfile.ZipFile(os.path.join(d, ver + '.zip'), 'w') as z:
    z.writestr('%s@%s/go.mod' % (mod, ver), gomod)
    z.writestr('%s@%s/probe.go' % (mod, ver), 'package probe\n\nconst Marker = "%s"\n' % marker)
)PY");
  // v1.0.0 for the build; v1.1.0, also published, for the denied name: not
  // in the module cache, so a proxy that let it through would fetch it.
  for (const char* v : {"v1.0.0", "v1.1.0"})
    run_host_ok({"/usr/bin/python3", fx.base + "/mkmod.py", gp.dir, "example.test/probe", v, mod_marker});
  const std::string main_dir = fx.work + "/gomain";
  make_dirs(main_dir);
  write_file(main_dir + "/go.mod", "module ccsb.test/main\n\ngo 1.19\n\nrequire example.test/probe v1.0.0\n");
  write_file(main_dir + "/main.go",
             "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.test/probe\"\n)\n\n"
             "func main() { fmt.Println(\"@@go_marker=\" + probe.Marker) }\n");
  // A Go user's GOPATH (~/go), the sandbox uid's own.
  make_dirs(fx.home + "/go");
  hand_to_sandbox_uid(fx.home + "/go");
  hand_to_sandbox_uid(main_dir);
  // GOSUMDB=off: the checksum database is another name, not served here.
  auto r = fx.ccsb("export GOSUMDB=off GOFLAGS=-mod=mod\n"
                   "cd " + main_dir + "\n"
                   "GOPROXY=" + gp.url("http", "proxy.golang.test", "") + " go run . 2>&1; echo @@run_rc=$?\n"
                   "GOPROXY=" + gp.url("http", "denied-goproxy.test", "") +
                       " go mod download example.test/probe@v1.1.0 > " + fx.work +
                       "/denied.out 2>&1; echo @@denied_rc=$?",
                   matrix_session(allowed, denied));
  ESCAPE_REQUIRE_RAN(r);
  const std::string denied_out = read_file(fx.work + "/denied.out");
  INFO(r.describe() << "\n--- denied ---\n" << denied_out << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("run_rc") == "0");
  CHECK(r.get("go_marker") == mod_marker);
  CHECK(gp.requests_for("proxy.golang.test") >= 2); // the .mod and the .zip
  CHECK(r.get("denied_rc") == "1");
  CHECK_THAT(denied_out, Catch::Contains("reading " + gp.url("http", "denied-goproxy.test", "") +
                                         "/example.test/probe/@v/v1.1.0.info: 403 Forbidden"));
  CHECK_THAT(denied_out, Catch::Contains("server response: egressd: Forbidden: not_allowlisted"));
  CHECK(gp.requests_for("denied-goproxy.test") == 0);
  CHECK(violations_for(fx, gp.target("denied-goproxy.test")) == 1);
}
