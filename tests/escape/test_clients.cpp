// E4, N2, L1, P4, P5 (issue 11): real toolchains inside `ccsb-run --profile
// spec`. Each client runs for real inside the sandbox against a server this
// test starts on the host's loopback under a name the session allows (egressd
// resolves it to 127.0.0.1); a name the session does not allow must fail with
// the client's own clear error and exactly one `violation` event. The clients
// come from scripts/install-deps.sh (Debian packages); a missing one fails
// the test, it never skips.
#include "escape_support.hpp"

using namespace escape;

namespace {

// --allow NAME for every name, each resolved to the host's loopback, and
// loopback upstreams allowed (the test servers live there).
std::vector<std::string> allow_loopback(std::initializer_list<std::string> allowed,
                                        std::initializer_list<std::string> resolved_too = {}) {
  std::vector<std::string> a;
  for (const auto& n : allowed) a.insert(a.end(), {"--allow", n});
  for (const auto& list : {allowed, resolved_too})
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
void write_for_sandbox(const std::string& path, const std::string& text, mode_t mode = 0644) {
  write_file(path, text, mode);
  if (::geteuid() == 0) ::lchown(path.c_str(), kSandboxTestUid, kSandboxTestGid);
}

const char* kJavaProbe = R"JAVA(
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

// java Probe.java TAG httpclient|urlconnection URL: prints @@TAG_status, @@TAG_body or @@TAG_error.
public class Probe {
  public static void main(String[] a) {
    String tag = a[0];
    System.out.println("@@" + tag + "_injected=" + System.getProperty("ccsb.injected"));
    System.out.println("@@" + tag + "_proxy=" + System.getProperty("http.proxyHost") + ":" + System.getProperty("http.proxyPort"));
    try {
      int status;
      String body;
      if (a[1].equals("httpclient")) {
        HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(20)).build();
        HttpRequest req = HttpRequest.newBuilder(URI.create(a[2])).timeout(Duration.ofSeconds(30)).build();
        HttpResponse<String> r = c.send(req, HttpResponse.BodyHandlers.ofString());
        status = r.statusCode();
        body = r.body();
      } else {
        HttpURLConnection c = (HttpURLConnection) new URL(a[2]).openConnection();
        c.setConnectTimeout(20000);
        c.setReadTimeout(30000);
        status = c.getResponseCode();
        InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream();
        body = in == null ? "" : new String(in.readAllBytes());
        System.out.println("@@" + tag + "_usingproxy=" + c.usingProxy());
      }
      System.out.println("@@" + tag + "_status=" + status);
      System.out.println("@@" + tag + "_body=" + body.trim().replace('\n', ' '));
    } catch (Exception e) {
      System.out.println("@@" + tag + "_error=" + e);
    }
  }
}
)JAVA";

} // namespace

TEST_CASE("E4: Java HttpClient and HttpURLConnection reach an allowed name through the proxy, a denied one fails "
          "and is reported once",
          "[E4][N2][N7][L1][escape]") {
  require_tool("/usr/bin/java");
  sandbox_fixture fx;
  http_upstream up("JAVA-BODY-" + random_token());
  const std::string port = std::to_string(up.port);
  write_for_sandbox(fx.work + "/Probe.java", kJavaProbe);
  // An inherited JVM option (an injection vector, E3) must be gone: the
  // policy's JAVA_TOOL_OPTIONS replaces it, never merges with it. (Passed
  // with --env it is refused outright: tests/linux/test_launcher.cpp.)
  std::vector<std::string> extra = allow_loopback({"allowed.test"}, {"denied-client.test", "denied-url.test"});
  spawn_options o;
  o.argv = fx.ccsb_argv(extra, sandbox_fixture::wrap(
                                   "echo \"@@jto=$JAVA_TOOL_OPTIONS\"\n"
                                   "cd " + fx.work + "\n"
                                   "java Probe.java hc httpclient http://allowed.test:" + port + "/ 2>&1\n"
                                   "java Probe.java uc urlconnection http://allowed.test:" + port + "/ 2>&1\n"
                                   "java Probe.java dhc httpclient http://denied-client.test:" + port + "/ 2>&1\n"
                                   "java Probe.java duc urlconnection http://denied-url.test:" + port + "/ 2>&1\n"));
  o.env = fx.env();
  o.env.push_back("JAVA_TOOL_OPTIONS=-Dccsb.injected=1 -Dhttp.proxyHost=evil.example");
  o.cwd = fx.work;
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  // The JVM started (its /etc/java-17-openjdk is in the minimal /etc) and
  // took the policy's options alone.
  CHECK(r.out.find("Error loading java.security") == std::string::npos);
  CHECK(r.get("jto") == "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 "
                        "-Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=localhost|127.*|[::1]");
  CHECK(r.get("hc_injected") == "null");
  CHECK(r.get("hc_proxy") == "127.0.0.1:3128");
  // Allowed: both APIs get the upstream's body through the proxy.
  CHECK(r.get("hc_status") == "200");
  CHECK(r.get("hc_body") == up.body);
  CHECK(r.get("uc_status") == "200");
  CHECK(r.get("uc_body") == up.body);
  CHECK(r.get("uc_usingproxy") == "true");
  CHECK(up.requests == 2);
  // Denied: the proxy's 403 and its reason reach the program; one event each.
  CHECK(r.get("dhc_status") == "403");
  CHECK_THAT(r.get("dhc_body"), Catch::Contains("egressd: Forbidden"));
  CHECK(r.get("duc_status") == "403");
  CHECK_THAT(r.get("duc_body"), Catch::Contains("egressd: Forbidden"));
  CHECK(violations_for(fx, "denied-client.test:" + port) == 1);
  CHECK(violations_for(fx, "denied-url.test:" + port) == 1);
  CHECK(violations_for(fx, "allowed.test:" + port) == 0);
}

TEST_CASE("E4: npm reaches a registry document under an allowed name through its proxy config, a denied registry "
          "fails with E403 and is reported once",
          "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/npm");
  sandbox_fixture fx;
  const std::string marker = "NPM-DESC-" + random_token();
  // A registry document (packument) for one package; the upstream answers
  // every path with it.
  http_upstream up("{\"name\":\"ccsb-probe\",\"dist-tags\":{\"latest\":\"1.0.0\"},\"versions\":{\"1.0.0\":"
                   "{\"name\":\"ccsb-probe\",\"version\":\"1.0.0\",\"description\":\"" + marker +
                   "\",\"dist\":{\"tarball\":\"http://registry.test/ccsb-probe-1.0.0.tgz\"}}}}");
  const std::string port = std::to_string(up.port);
  auto r = fx.ccsb("echo \"@@npm_proxy=$npm_config_proxy\"\n"
                   "echo \"@@npm_noproxy=$npm_config_noproxy\"\n"
                   "npm view ccsb-probe description --registry=http://registry.test:" + port +
                       "/ 2>&1 | sed 's/^/@@view=/'\n"
                   "npm view ccsb-probe description --registry=http://denied-registry.test:" + port +
                       "/ > " + fx.work + "/denied.out 2>&1; echo @@denied_rc=$?\n"
                   "grep -m1 'npm error code' " + fx.work + "/denied.out | sed 's/^/@@denied=/'",
                   allow_loopback({"registry.test"}, {"denied-registry.test"}));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- denied ---\n" << read_file(fx.work + "/denied.out") << "\n--- events ---\n"
                    << read_file(fx.events));
  CHECK(r.get("npm_proxy") == "http://127.0.0.1:3128");
  CHECK(r.get("npm_noproxy") == "localhost,127.0.0.1,::1");
  CHECK(r.get("view") == marker);
  CHECK(up.requests >= 1);
  CHECK(failed(r.get("denied_rc")));
  CHECK(r.get("denied") == "npm error code E403");
  CHECK(violations_for(fx, "denied-registry.test:" + port) == 1);
}

TEST_CASE("E4: Node 20 routes: fetch through undici's ProxyAgent and http.get through https-proxy-agent reach an "
          "allowed name, a denied one fails and is reported once, plain fetch honours the proxy only where "
          "NODE_USE_ENV_PROXY is supported",
          "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/node");
  sandbox_fixture fx;
  http_upstream up("NODE-BODY-" + random_token());
  const std::string port = std::to_string(up.port);
  // The Debian packages node-undici and node-https-proxy-agent live in
  // /usr/share/nodejs (Debian's node searches it; other builds need
  // NODE_PATH, which the command sets itself: E3 never passes one in).
  write_for_sandbox(fx.work + "/fetch.js",
                    "const url = process.argv[3], tag = process.argv[2];\n"
                    "if (process.argv[4] === 'agent') {\n"
                    "  const { ProxyAgent, setGlobalDispatcher } = require('undici');\n"
                    "  setGlobalDispatcher(new ProxyAgent(process.env.HTTPS_PROXY));\n"
                    "}\n"
                    "fetch(url).then(async r => { console.log(`@@${tag}_status=${r.status}`);\n"
                    "  console.log(`@@${tag}_body=${(await r.text()).trim()}`); })\n"
                    "  .catch(e => console.log(`@@${tag}_error=${e} ${e.cause || ''}`));\n");
  write_for_sandbox(fx.work + "/get.js",
                    "const http = require('http');\n"
                    "const { HttpsProxyAgent } = require('https-proxy-agent');\n"
                    "const tag = process.argv[2];\n"
                    "http.get(process.argv[3], { agent: new HttpsProxyAgent(process.env.HTTP_PROXY) }, r => {\n"
                    "  let b = ''; r.on('data', d => b += d);\n"
                    "  r.on('end', () => { console.log(`@@${tag}_status=${r.statusCode}`); "
                    "console.log(`@@${tag}_body=${b.trim()}`); });\n"
                    "}).on('error', e => console.log(`@@${tag}_error=${e}`));\n");
  auto r = fx.ccsb("export NODE_PATH=/usr/share/nodejs\n"
                   "echo \"@@node_version=$(node -p 'process.versions.node')\"\n"
                   "echo \"@@use_env_proxy=$NODE_USE_ENV_PROXY\"\n"
                   "cd " + fx.work + "\n"
                   "node fetch.js agent http://allowed.test:" + port + "/ agent 2>&1\n"
                   "node get.js get http://allowed.test:" + port + "/ 2>&1\n"
                   "node fetch.js dagent http://denied-fetch.test:" + port + "/ agent 2>&1\n"
                   "node get.js dget http://denied-get.test:" + port + "/ 2>&1\n"
                   "node fetch.js plain http://allowed.test:" + port + "/ 2>&1\n",
                   allow_loopback({"allowed.test"}, {"denied-fetch.test", "denied-get.test"}));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("use_env_proxy") == "1");
  CHECK(r.get("agent_status") == "200");
  CHECK(r.get("agent_body") == up.body);
  CHECK(r.get("get_status") == "200");
  CHECK(r.get("get_body") == up.body);
  // Denied: undici tunnels through CONNECT; the 5.15 of Debian 12 turns the
  // proxy's 403 into "fetch failed" (cause: "Request was cancelled"), so the
  // violation event is what names the target. https-proxy-agent hands the
  // 403 and egressd's reason back as the response.
  CHECK(r.get("dagent_status") == "<missing>");
  CHECK_THAT(r.get("dagent_error"), Catch::Contains("fetch failed"));
  CHECK_THAT(r.get("dget_body"), Catch::Contains("egressd: Forbidden"));
  CHECK(r.get("dget_status") == "403");
  CHECK(violations_for(fx, "denied-fetch.test:" + port) == 1);
  CHECK(violations_for(fx, "denied-get.test:" + port) == 1);
  // Plain fetch: Node 24 and 22.21+ honour NODE_USE_ENV_PROXY; older Node
  // ignores every proxy variable, and with no DNS inside it cannot leave.
  const std::string v = r.get("node_version");
  int major = std::atoi(v.c_str()), minor = std::atoi(v.substr(v.find('.') + 1).c_str());
  if (major >= 24 || (major == 22 && minor >= 21)) {
    CHECK(r.get("plain_status") == "200");
  } else {
    CHECK(r.get("plain_status") == "<missing>");
    CHECK_THAT(r.get("plain_error"), Catch::Contains("fetch failed"));
  }
  const int expected = (major >= 24 || (major == 22 && minor >= 21)) ? 3 : 2;
  CHECK(up.requests == expected);
}

TEST_CASE("E4: ftp:// goes to the proxy (FTP_PROXY), which refuses it and reports the target", "[E4][N2][N7][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("echo \"@@ftp_proxy=$ftp_proxy\"\n"
                   "curl -sS --max-time 30 -o /dev/null -w '%{http_code}' ftp://allowed.test/file 2>&1 | "
                   "sed 's/^/@@code=/'; echo",
                   allow_loopback({"allowed.test"}));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("ftp_proxy") == "http://127.0.0.1:3128");
  // Without FTP_PROXY curl would try a direct connection, fail to resolve
  // the name inside and leave no event; with it the refusal is named.
  CHECK(r.get("code").rfind("4", 0) == 0);
  CHECK(violations_for(fx, "allowed.test:21") == 1);
}

namespace {

// An rsync daemon on the host's 127.0.0.1 serving one read-only module.
struct rsync_daemon {
  std::string dir, marker;
  int port = 0;
  host_daemon daemon;
  explicit rsync_daemon(const sandbox_fixture& fx) {
    dir = fx.base + "/rsyncd";
    make_dirs(dir + "/mod");
    marker = "RSYNC-CONTENT-" + random_token();
    write_file(dir + "/mod/hello.txt", marker + "\n", 0644);
    port = free_tcp_port();
    write_file(dir + "/rsyncd.conf",
               "use chroot = no\n"
               "pid file = " + dir + "/rsyncd.pid\n"
               "[mod]\n  path = " + dir + "/mod\n  read only = yes\n  uid = " + std::to_string(::getuid()) +
                   "\n  gid = " + std::to_string(::getgid()) + "\n",
               0644);
    spawn_options o;
    o.argv = {"/usr/bin/rsync", "--daemon", "--no-detach", "--address=127.0.0.1", "--port=" + std::to_string(port),
              "--config=" + dir + "/rsyncd.conf", "--log-file=" + dir + "/log"};
    o.env = {"PATH=/usr/bin:/bin"};
    daemon.start(o, port, "rsync --daemon");
  }
};

} // namespace

TEST_CASE("E4: rsync's daemon protocol goes through the proxy (RSYNC_PROXY), a denied name fails and is reported once",
          "[E4][N2][N7][escape]") {
  require_tool("/usr/bin/rsync");
  sandbox_fixture fx;
  rsync_daemon d(fx);
  const std::string port = std::to_string(d.port);
  auto r = fx.ccsb("echo \"@@rsync_proxy=$RSYNC_PROXY\"\n"
                   "rsync rsync://allowed-rsync.test:" + port + "/mod/hello.txt " + fx.work +
                       "/got.txt 2>&1; echo @@rsync=$?\n"
                   "cat " + fx.work + "/got.txt 2>/dev/null | sed 's/^/@@got=/'\n"
                   "rsync rsync://denied-rsync.test:" + port + "/mod/hello.txt " + fx.work +
                       "/no.txt > " + fx.work + "/denied.out 2>&1; echo @@denied_rc=$?",
                   allow_loopback({"allowed-rsync.test"}, {"denied-rsync.test"}));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- denied ---\n" << read_file(fx.work + "/denied.out") << "\n--- events ---\n"
                    << read_file(fx.events));
  CHECK(r.get("rsync_proxy") == "127.0.0.1:3128");
  CHECK(r.get("rsync") == "0");
  CHECK(r.get("got") == d.marker);
  CHECK(failed(r.get("denied_rc")));
  CHECK_THAT(read_file(fx.work + "/denied.out"), Catch::Contains("403"));
  CHECK_FALSE(file_exists(fx.work + "/no.txt"));
  CHECK(violations_for(fx, "denied-rsync.test:" + port) == 1);
}

namespace {

// A real sshd on the host's 127.0.0.1 serving a bare git repository; its
// host key is the caller's to put into (or leave out of) a known_hosts file.
struct known_host_sshd {
  std::string dir, repo, marker, host_pub;
  int port = 0;
  host_daemon daemon;

  known_host_sshd(const sandbox_fixture& fx, const std::string& client_pub) {
    dir = fx.base + "/sshd";
    make_dirs(dir, 0700);
    marker = "GIT-CONTENT-" + random_token();
    run_host_ok({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir + "/hostkey"});
    host_pub = read_file(dir + "/hostkey.pub");
    while (!host_pub.empty() && (host_pub.back() == '\n' || host_pub.back() == '\r')) host_pub.pop_back();
    write_file(dir + "/authorized_keys", read_file(client_pub), 0600);
    std::string src = fx.base + "/gitsrc";
    make_dirs(src);
    run_host_ok({"/usr/bin/git", "init", "-q", src});
    write_file(src + "/HELLO", marker + "\n");
    run_host_ok({"/usr/bin/git", "-C", src, "add", "HELLO"});
    run_host_ok({"/usr/bin/git", "-C", src, "commit", "-q", "-m", "init"});
    repo = fx.base + "/srv/repo.git";
    make_dirs(fx.base + "/srv");
    run_host_ok({"/usr/bin/git", "clone", "-q", "--bare", src, repo});
    if (!file_exists("/run/sshd")) make_dirs("/run/sshd", 0755); // sshd's privilege separation dir
    port = free_tcp_port();
    write_file(dir + "/sshd_config",
               "ListenAddress 127.0.0.1\n"
               "HostKey " + dir + "/hostkey\n"
               "PidFile none\n"
               "AuthorizedKeysFile " + dir + "/authorized_keys\n"
               "PasswordAuthentication no\n"
               "KbdInteractiveAuthentication no\n"
               "PubkeyAuthentication yes\n"
               "PermitRootLogin prohibit-password\n"
               "AllowUsers " + sandbox_fixture::user_name() + "\n"
               "StrictModes no\n"
               "UsePAM no\n"
               "LogLevel VERBOSE\n",
               0600);
    spawn_options o;
    o.argv = {"/usr/sbin/sshd", "-D", "-e", "-f", dir + "/sshd_config", "-p", std::to_string(port)};
    o.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"};
    daemon.start(o, port, "sshd");
  }
};

struct ssh_clone_result {
  proc_result r;
  std::string known_hosts_before, known_hosts_after, marker, events;
};

// git clone over ssh inside the sandbox, with strict host key checking as
// ssh has it by default: no StrictHostKeyChecking, no UserKnownHostsFile of
// the test's own; only what GIT_SSH_COMMAND (the policy) says.
ssh_clone_result clone_with_known_hosts(bool key_is_known) {
  sandbox_fixture fx;
  std::string keydir = fx.work + "/sshclient";
  make_dirs(keydir, 0700);
  run_host_ok({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", keydir + "/id_ed25519"});
  hand_to_sandbox_uid(keydir);
  known_host_sshd sshd(fx, keydir + "/id_ed25519.pub");
  const std::string name = "allowed-git.test";
  const std::string entry = "[" + name + "]:" + std::to_string(sshd.port);
  std::string other_key;
  if (!key_is_known) {
    run_host_ok({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", fx.base + "/otherkey"});
    other_key = read_file(fx.base + "/otherkey.pub");
  }
  // The user's ~/.ssh/known_hosts on the host (~/.ssh itself stays masked).
  std::string kh = key_is_known ? entry + " " + sshd.host_pub + "\n"
                                : "[other.test]:22 " + other_key; // the server's key is unknown
  write_file(fx.home + "/.ssh/known_hosts", kh, 0644);
  std::string url = "ssh://" + sandbox_fixture::user_name() + "@" + name + ":" + std::to_string(sshd.port) + sshd.repo;
  auto r = fx.ccsb("echo \"@@git_ssh=$GIT_SSH_COMMAND\"\n"
                   "export GIT_SSH_COMMAND=\"$GIT_SSH_COMMAND -i " + keydir +
                       "/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes\"\n"
                   "git clone -q " + url + " /tmp/clone 2>&1; echo @@clone=$?\n" // X1: no .git in a root
                   "cat /tmp/clone/HELLO 2>/dev/null | sed 's/^/@@hello=/'\n"
                   "cat /run/ccsb/known_hosts > /dev/null 2>&1; echo @@copy_readable=$?\n"
                   "echo planted >> /run/ccsb/known_hosts 2>/dev/null\n"
                   "cat " + fx.home + "/.ssh/known_hosts 2>&1; echo @@home_kh=$?\n"
                   "cat " + fx.home + "/.ssh/id_rsa 2>&1; echo @@key=$?",
                   allow_loopback({name}));
  return {r, kh, read_file(fx.home + "/.ssh/known_hosts"), sshd.marker, read_file(fx.events)};
}

} // namespace

TEST_CASE("N2: git over ssh checks the host key against the user's known hosts, without StrictHostKeyChecking=no",
          "[N2][E4][P4][escape]") {
  auto res = clone_with_known_hosts(true);
  const auto& r = res.r;
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << res.events);
  CHECK_THAT(r.get("git_ssh"), Catch::Contains("-o UserKnownHostsFile='/run/ccsb/known_hosts'"));
  CHECK_THAT(r.get("git_ssh"), Catch::Contains("-o ControlMaster=no -o ControlPath=none"));
  CHECK_THAT(r.get("git_ssh"), Catch::Contains("ProxyCommand='/run/ccsb/ccsb-init --ssh-proxy 127.0.0.1:1080 %h %p'"));
  CHECK_THAT(r.get("git_ssh"), !Catch::Contains("StrictHostKeyChecking"));
  CHECK(r.get("clone") == "0");
  CHECK(r.get("hello") == res.marker);
  CHECK(r.get("copy_readable") == "0");
  // ~/.ssh stays read-denied: neither the host's file nor the key is readable there.
  CHECK(failed(r.get("home_kh")));
  CHECK(failed(r.get("key")));
  CHECK(r.out.find("OPENSSH PRIVATE KEY") == std::string::npos);
  // The host's file is unchanged, whatever the sandbox did to its copy.
  CHECK(res.known_hosts_after == res.known_hosts_before);
  // bwrap was spawned holding the copy's source (render/bwrap/render.hpp "Spawned
  // first, fed later"): the launch needed no second bwrap.
  CHECK_THAT(r.err, !Catch::Contains("bwrap is started again"));
}

TEST_CASE("N2: git over ssh to a host whose key is not known fails with ssh's host key error", "[N2][E4][escape]") {
  auto res = clone_with_known_hosts(false);
  const auto& r = res.r;
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << res.events);
  CHECK(failed(r.get("clone")));
  CHECK(r.get("hello") == "<missing>");
  CHECK_THAT(r.out, Catch::Contains("Host key verification failed"));
  // Not a network denial: the allowlist let the connection through.
  CHECK_THAT(r.out, !Catch::Contains("denied by this session's network allowlist"));
  CHECK(res.known_hosts_after == res.known_hosts_before);
}

namespace {

// ccsb-run --profile spec with the caller's own PATH; HOME is NOT bound (only
// the workdir is), so whatever of HOME is visible comes from PATH.
proc_result run_with_path(const sandbox_fixture& fx, const std::string& path_var, const std::string& body,
                          const std::vector<std::string>& extra = {}) {
  spawn_options o;
  o.argv = {ccsb_run_path(), "--profile", "spec", "--events", fx.events};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  o.argv.insert(o.argv.end(), {"--", "/bin/bash", "-c", sandbox_fixture::wrap(body)});
  o.env = {"HOME=" + fx.home, "PATH=" + path_var, "LANG=C", "TERM=dumb", "USER=" + sandbox_fixture::user_name(),
           "LOGNAME=" + sandbox_fixture::user_name()};
  o.cwd = fx.work;
  return run(o);
}

} // namespace

TEST_CASE("E4: toolchains on PATH inside HOME run inside, read-only, secrets stay masked, the start-up details name "
          "them, --no-path-toolchains turns it off",
          "[E4][P4][P5][L1][escape]") {
  sandbox_fixture fx;
  const std::string token = random_token();
  // A fake rustup layout: ~/.cargo/bin/cargo runs what ~/.rustup holds.
  make_dirs(fx.home + "/.cargo/bin");
  make_dirs(fx.home + "/.rustup/toolchains/stable/bin");
  write_file(fx.home + "/.rustup/toolchains/stable/bin/rustc-version", "RUSTUP-" + token + "\n");
  write_file(fx.home + "/.cargo/bin/cargo",
             "#!/bin/sh\necho \"@@cargo=$(cat " + fx.home + "/.rustup/toolchains/stable/bin/rustc-version)\"\n", 0755);
  write_file(fx.home + "/.cargo/credentials.toml", "[registry]\ntoken = \"CARGO-SECRET-" + token + "\"\n", 0600);
  // A plain tool directory, and a PATH entry that is a secret store.
  make_dirs(fx.home + "/tools/bin");
  write_file(fx.home + "/tools/bin/mytool", "#!/bin/sh\necho @@mytool=ran\n", 0755);
  write_file(fx.home + "/.ssh/ssh-tool", "#!/bin/sh\necho @@ssh_tool=ran\n", 0755);
  hand_to_sandbox_uid(fx.home);
  const std::string path_var = fx.home + "/.cargo/bin:" + fx.home + "/tools/bin:" + fx.home + "/.ssh:" + fx.home +
                               ":/usr/local/bin:/usr/bin:/bin";
  const std::string body = "cargo; echo @@cargo_rc=$?\n"
                           "mytool; echo @@mytool_rc=$?\n"
                           "ssh-tool; echo @@ssh_tool_rc=$?\n"
                           "touch " + fx.home + "/.cargo/bin/planted 2>/dev/null; echo @@write_bin=$?\n"
                           "touch " + fx.home + "/.rustup/planted 2>/dev/null; echo @@write_rustup=$?\n"
                           "touch " + fx.home + "/tools/bin/planted 2>/dev/null; echo @@write_tools=$?\n"
                           "cat " + fx.home + "/.cargo/credentials.toml 2>&1; echo @@cred=$?\n"
                           "cat " + fx.home + "/.ssh/id_rsa 2>&1; echo @@sshkey=$?\n"
                           "cat " + fx.home + "/.aws/credentials 2>&1; echo @@aws=$?\n"
                           "ls " + fx.home + "/.bashrc 2>&1; echo @@bashrc=$?";
  auto r = run_with_path(fx, path_var, body, {"--handle", fx.base + "/tc-handle.json"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("cargo") == "RUSTUP-" + token);
  // The handle's details list them too.
  const std::string handle = read_file(fx.base + "/tc-handle.json");
  CHECK_THAT(handle, Catch::Contains("\"toolchains\":[{"));
  picojson::value hv;
  REQUIRE(picojson::parse(hv, handle).empty());
  bool cargo_listed = false;
  for (const auto& t : hv.get("details").get("toolchains").get<picojson::array>())
    cargo_listed = cargo_listed || t.get("path").to_str() == fx.home + "/.cargo";
  CHECK(cargo_listed);
  CHECK(r.get("mytool") == "ran");
  // Never writable, never a secret.
  CHECK(failed(r.get("write_bin")));
  CHECK(failed(r.get("write_rustup")));
  CHECK(failed(r.get("write_tools")));
  CHECK_FALSE(file_exists(fx.home + "/.cargo/bin/planted"));
  CHECK_FALSE(file_exists(fx.home + "/tools/bin/planted"));
  CHECK(failed(r.get("cred")));
  CHECK(r.out.find("CARGO-SECRET-") == std::string::npos);
  CHECK(failed(r.get("ssh_tool_rc")));
  CHECK(r.get("ssh_tool") == "<missing>");
  CHECK(failed(r.get("sshkey")));
  CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
  CHECK(failed(r.get("aws")));
  CHECK(r.out.find(fx.aws_marker) == std::string::npos);
  CHECK(failed(r.get("bashrc"))); // HOME itself on PATH is not made visible
  // The start-up details say what was added, and what not and why.
  CHECK_THAT(r.err, Catch::Contains("toolchain \"" + fx.home + "/.cargo\" (PATH has \"" + fx.home +
                                    "/.cargo/bin\") visible read-only"));
  CHECK_THAT(r.err, Catch::Contains("toolchain \"" + fx.home + "/.rustup\""));
  CHECK_THAT(r.err, Catch::Contains("toolchain \"" + fx.home + "/tools/bin\""));
  CHECK_THAT(r.err, Catch::Contains("toolchain \"" + fx.home + "/.ssh\" (PATH has \"" + fx.home +
                                    "/.ssh\") not added: it lies inside the read-denied"));
  CHECK_THAT(r.err, Catch::Contains("toolchain \"" + fx.home + "\" (PATH has \"" + fx.home + "\") not added: it is HOME"));

  // Off: none of it is there.
  auto off = run_with_path(fx, path_var, body, {"--no-path-toolchains"});
  ESCAPE_REQUIRE_RAN(off);
  INFO(off.describe());
  CHECK(off.get("cargo") == "<missing>");
  CHECK(failed(off.get("cargo_rc")));
  CHECK(failed(off.get("mytool_rc")));
  CHECK_THAT(off.err, !Catch::Contains("toolchain"));
}

TEST_CASE("L1: the minimal /etc has what the JVM, ssh and locales read, and keeps the host's secrets out",
          "[L1][E4][P4][escape]") {
  sandbox_fixture fx;
  REQUIRE(file_exists("/etc/shadow")); // the host has them: their absence inside is the sandbox's doing
  auto r = fx.ccsb("for f in /etc/shadow /etc/gshadow /etc/sudoers /etc/ssh/sshd_config /etc/ssh/ssh_host_ed25519_key "
                   "/etc/ssh/ssh_host_rsa_key /etc/ssh/ssh_host_ecdsa_key; do\n"
                   "  if [ -e \"$f\" ]; then echo \"@@present=$f\"; fi\n"
                   "done\n"
                   "ls /etc/ssl/private > /dev/null 2>&1; echo @@ssl_private=$?\n"
                   "ls /etc/ssh | tr '\\n' ' ' | sed 's/^/@@etc_ssh=/'; echo\n"
                   "head -c 20 /usr/lib/jvm/java-17-openjdk-amd64/conf/security/java.security > /dev/null 2>&1 || "
                   "head -c 20 /etc/java-17-openjdk/security/java.security > /dev/null; echo @@java_security=$?\n"
                   "test -r /etc/ssh/ssh_config; echo @@ssh_config=$?\n"
                   "touch /etc/ccsb-planted 2>/dev/null; echo @@etc_write=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("present") == "<missing>");
  CHECK(failed(r.get("ssl_private")));
  CHECK_THAT(r.get("etc_ssh"), !Catch::Contains("ssh_host_"));
  CHECK_THAT(r.get("etc_ssh"), !Catch::Contains("sshd_config"));
  CHECK(r.get("java_security") == "0");
  CHECK(r.get("ssh_config") == "0");
  CHECK(failed(r.get("etc_write")));
  CHECK_FALSE(file_exists("/etc/ccsb-planted"));
}
