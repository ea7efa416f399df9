// Escape tests, network side (L3 N1 N2 N7 N8): the sandbox reaches nothing
// directly — host loopback TCP/UDP/DNS, abstract Unix sockets — and the
// proxies are the only way out: an allowed name works (curl, git over SSH),
// a denied one fails and is reported.
#include "escape_support.hpp"

using namespace escape;

TEST_CASE("L3: direct TCP to a host loopback service fails", "[L3][N1][escape]") {
  sandbox_fixture fx;
  tcp_listener host;
  std::string port = std::to_string(host.port);
  auto r = fx.ccsb("( echo PROBE > /dev/tcp/127.0.0.1/" + port + " ) 2>&1; echo @@devtcp=$?\n"
                   "/usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', " + port +
                   "), timeout=5)\" 2>&1 | tail -1; echo @@py=${PIPESTATUS[0]}\n"
                   "curl -sS --noproxy '*' --max-time 10 http://127.0.0.1:" + port + "/ 2>&1; echo @@curl=$?\n"
                   "( echo PROBE > /dev/tcp/localhost/" + port + " ) 2>&1; echo @@localhost=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("devtcp")));
  CHECK(failed(r.get("py")));
  CHECK(failed(r.get("curl")));
  CHECK(failed(r.get("localhost")));
  CHECK(host.accepted() == 0);
}

TEST_CASE("L3: UDP to a host loopback listener never arrives", "[L3][N1][escape]") {
  sandbox_fixture fx;
  udp_listener host;
  std::string port = std::to_string(host.port);
  auto r = fx.ccsb("for i in 1 2 3; do ( echo UDPPROBE > /dev/udp/127.0.0.1/" + port + " ) 2>&1; done; echo @@sent=1\n"
                   "/usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                   "[s.sendto(b'UDPPROBE', ('127.0.0.1', " + port + ")) for _ in range(3)]\" 2>&1; echo @@py=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("sent") == "1");
  CHECK(host.received().empty());
}

TEST_CASE("L3: a DNS query to a host-side resolver never arrives", "[L3][N1][escape]") {
  sandbox_fixture fx;
  udp_listener dns;  // stands in for a resolver on the host's 127.0.0.1
  std::string port = std::to_string(dns.port);
  // A real DNS query packet for allowed.test/A, sent to the host resolver and
  // to whatever /etc/resolv.conf names; an answer would print @@answer=...
  std::string py =
      "import socket, struct\n"
      "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(l)]) + l for l in "
      "b'exfil-probe.test'.split(b'.')) + b'\\x00' + struct.pack('>HH', 1, 1)\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)\n"
      "try:\n"
      "    s.sendto(q, ('127.0.0.1', " + port + ")); print('@@answer=' + repr(s.recv(512)))\n"
      "except OSError as e:\n"
      "    print('@@err=' + str(e))\n";
  auto r = fx.ccsb("/usr/bin/python3 -c \"" + py + "\"; echo @@py=$?\n"
                   "getent hosts exfil-probe.test; echo @@getent=$?");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("answer") == "<missing>");
  CHECK(failed(r.get("getent")));
  CHECK(dns.received().empty());
}

TEST_CASE("L3: an abstract Unix socket bound on the host is unreachable", "[L3][N1][escape]") {
  sandbox_fixture fx;
  abstract_listener host;
  auto r = fx.ccsb("curl -sS --max-time 5 --abstract-unix-socket " + host.name + " http://x/ 2>&1; echo @@curl=$?\n"
                   "/usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0" +
                   host.name + "')\" 2>&1 | tail -1; echo @@py=${PIPESTATUS[0]}\n"
                   "grep -c '@" + host.name + "' /proc/net/unix | sed 's/^/@@visible=/'");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("curl")));
  CHECK(failed(r.get("py")));
  CHECK(r.get("visible") == "0");
  CHECK(host.accepted() == 0);
}

TEST_CASE("L3: the sandbox's network namespace has only loopback", "[L3][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("ls /sys/class/net | sed 's/^/IF /'; echo @@ls=$?\n"
                   "awk 'NR>2 {print \"IFACE \" $1}' /proc/net/dev");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  std::stringstream ss(r.out);
  std::string line;
  std::set<std::string> ifaces;
  while (std::getline(ss, line))
    if (line.rfind("IFACE ", 0) == 0) ifaces.insert(line.substr(6));
  CHECK(ifaces == std::set<std::string>{"lo:"});
}

TEST_CASE("N8: the proxy does not relay to the host's loopback by default", "[N8][L3][escape]") {
  sandbox_fixture fx;
  http_upstream up("UPSTREAM-" + random_token());
  std::string port = std::to_string(up.port);
  // No --allow-upstream: an allowed name that resolves to loopback, and the
  // loopback literals in their tricky spellings, must all be refused.
  auto r = fx.ccsb("curl -sS -f -g --noproxy '' --max-time 20 -x http://127.0.0.1:3128 http://allowed.test:" + port +
                       "/ 2>&1; echo @@name=$?\n"
                   "for u in 127.0.0.1 2130706433 0x7f000001 0177.0.0.1 127.1 [::1] localhost; do\n"
                   "  curl -sS -f -g --noproxy '' --max-time 20 -x http://127.0.0.1:3128 http://$u:" + port +
                       "/ 2>&1 && echo @@literal=0\n"
                   "done\n"
                   "echo @@done=1",
                   {"--allow", "allowed.test", "--allow", "localhost", "--egress-opt", "--resolve",
                    "--egress-opt", "allowed.test=127.0.0.1"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("name")));
  CHECK(r.out.find("@@literal=0") == std::string::npos);
  CHECK(r.out.find(up.body) == std::string::npos);
  CHECK(up.requests == 0);
}

TEST_CASE("N2: an allowed name is reached through the HTTP proxy", "[N2][N4][L3][escape]") {
  sandbox_fixture fx;
  http_upstream up("ALLOWED-BODY-" + random_token());
  std::string port = std::to_string(up.port);
  auto r = fx.ccsb("echo @@http_proxy=$http_proxy\n"
                   "echo @@all_proxy=$ALL_PROXY\n"
                   "curl -sS -f --max-time 30 http://allowed.test:" + port + "/ 2>&1; rc=$?; echo; echo @@curl=$rc",
                   {"--allow", "allowed.test", "--egress-opt", "--resolve", "--egress-opt",
                    "allowed.test=127.0.0.1", "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  CHECK(r.get("http_proxy") == "http://127.0.0.1:3128");
  CHECK(r.get("all_proxy") == "socks5h://127.0.0.1:1080");
  CHECK(r.get("curl") == "0");
  CHECK(r.out.find(up.body) != std::string::npos);
  CHECK(up.requests >= 1);
  for (auto& e : read_events(fx.events)) CHECK(violation_of(e).second.find("allowed.test") == std::string::npos);
}

TEST_CASE("N7: a denied name fails through the proxy and is reported as a violation", "[N7][N4][L3][escape]") {
  sandbox_fixture fx;
  http_upstream up("DENIED-BODY-" + random_token());
  auto r = fx.ccsb("curl -sS -f --max-time 30 http://denied.test/ 2>&1; rc=$?; echo; echo @@curl=$rc\n"
                   "curl -sS -f --max-time 30 --socks5-hostname 127.0.0.1:1080 http://denied.test/ 2>&1; rc=$?; echo; "
                   "echo @@socks=$rc",
                   {"--allow", "allowed.test", "--egress-opt", "--resolve", "--egress-opt",
                    "denied.test=127.0.0.1", "--egress-opt", "--resolve", "--egress-opt", "allowed.test=127.0.0.1",
                    "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  ESCAPE_REQUIRE_RAN(r);
  std::string events = read_file(fx.events);
  INFO(r.describe() << "\n--- events ---\n" << events);
  CHECK(failed(r.get("curl")));
  CHECK(failed(r.get("socks")));
  CHECK(up.requests == 0);
  int violations = 0;
  for (auto& e : read_events(fx.events)) {
    auto [action, target] = violation_of(e);
    if (action == "network-outbound" && target == "denied.test:80") ++violations;
  }
  CHECK(violations >= 1);
}

namespace {

// A real sshd on the host's 127.0.0.1 serving a bare git repository.
struct git_sshd {
  std::string dir, repo, marker;
  int port = 0;
  host_daemon daemon;

  git_sshd(const sandbox_fixture& fx, const std::string& client_pub) {
    dir = fx.base + "/sshd";
    make_dirs(dir, 0700);
    marker = "GIT-CONTENT-" + random_token();
    run_host_ok({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir + "/hostkey"});
    write_file(dir + "/authorized_keys", read_file(client_pub), 0600);
    // A bare repository with one commit.
    std::string src = fx.base + "/gitsrc";
    make_dirs(src);
    run_host_ok({"/usr/bin/git", "init", "-q", src});
    write_file(src + "/HELLO", marker + "\n");
    run_host_ok({"/usr/bin/git", "-C", src, "add", "HELLO"});
    run_host_ok({"/usr/bin/git", "-C", src, "commit", "-q", "-m", "init"});
    repo = fx.base + "/srv/repo.git";
    make_dirs(fx.base + "/srv");
    run_host_ok({"/usr/bin/git", "clone", "-q", "--bare", src, repo});
    if (!file_exists("/run/sshd")) make_dirs("/run/sshd", 0755);  // sshd's privilege separation dir
    port = free_tcp_port();
    std::string cfg = "ListenAddress 127.0.0.1\n"
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
                      "LogLevel VERBOSE\n";
    write_file(dir + "/sshd_config", cfg, 0600);
    spawn_options o;
    o.argv = {"/usr/sbin/sshd", "-D", "-e", "-f", dir + "/sshd_config", "-p", std::to_string(port)};
    o.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"};
    daemon.start(o, port, "sshd");
  }
};

}  // namespace

TEST_CASE("N2: git over SSH reaches an allowed host through the SOCKS proxy", "[N2][N4][L3][escape]") {
  sandbox_fixture fx;
  // The client key lives in the worktree (~/.ssh is masked, by design).
  std::string keydir = fx.work + "/sshclient";
  make_dirs(keydir, 0700);
  run_host_ok({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", keydir + "/id_ed25519"});
  write_file(keydir + "/config",
             "Host *\n"
             "  IdentityFile " + keydir + "/id_ed25519\n"
             "  IdentitiesOnly yes\n"
             "  StrictHostKeyChecking no\n"
             "  UserKnownHostsFile /dev/null\n"
             "  BatchMode yes\n"
             "  LogLevel ERROR\n",
             0600);
  hand_to_sandbox_uid(keydir); // the sandboxed ssh (the sandbox's uid, L1) reads its key and config
  git_sshd sshd(fx, keydir + "/id_ed25519.pub");
  std::string url = "ssh://" + sandbox_fixture::user_name() + "@allowed-git.test:" + std::to_string(sshd.port) +
                    sshd.repo;
  auto r = fx.ccsb("echo \"@@git_ssh=$GIT_SSH_COMMAND\"\n"
                   "test -n \"$GIT_SSH_COMMAND\" || exit 3\n"
                   "export GIT_SSH_COMMAND=\"$GIT_SSH_COMMAND -F " + keydir + "/config\"\n"
                   "git clone -q " + url + " /tmp/clone 2>&1; echo @@clone=$?\n" // X1: no .git in a root
                   "cat /tmp/clone/HELLO\n"
                   // The same host without the proxy: no route at all.
                   "ssh -F " + keydir + "/config -p " + std::to_string(sshd.port) +
                       " -o ConnectTimeout=5 127.0.0.1 true 2>&1; echo @@direct=$?",
                   {"--allow", "allowed-git.test", "--egress-opt", "--resolve", "--egress-opt",
                    "allowed-git.test=127.0.0.1", "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  // ccsb-init's own SOCKS5 helper is ssh's ProxyCommand (no socat, B2).
  CHECK(r.get("git_ssh").find("/run/ccsb/ccsb-init --ssh-proxy 127.0.0.1:1080 %h %p") != std::string::npos);
  CHECK(r.get("clone") == "0");
  CHECK(r.out.find(sshd.marker) != std::string::npos);
  CHECK(failed(r.get("direct")));
}

TEST_CASE("N7: git over SSH to a name that is not allowed fails and is reported", "[N7][L3][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("git clone -q ssh://git@denied-git.test:22/repo.git /tmp/clone 2>&1; echo @@clone=$?",
                   {"--allow", "allowed-git.test"});
  ESCAPE_REQUIRE_RAN(r);
  std::string events = read_file(fx.events);
  INFO(r.describe() << "\n--- events ---\n" << events);
  CHECK(failed(r.get("clone")));
  // B2: the user reads that the allowlist said no (not a refused port).
  CHECK_THAT(r.out, Catch::Contains("ccsb: egress to denied-git.test:22 is denied by this session's network allowlist"));
  int violations = 0;
  for (auto& e : read_events(fx.events)) {
    auto [action, target] = violation_of(e);
    if (action == "network-outbound" && target == "denied-git.test:22") ++violations;
  }
  CHECK(violations >= 1);
}

TEST_CASE("B2: ssh through the proxy says a closed port refused, distinctly from an allowlist denial",
          "[B2][N2][L3][escape]") {
  sandbox_fixture fx;
  tcp_listener probe; // a port that is certainly closed once this listener is gone
  const std::string port = std::to_string(probe.port);
  probe.close();
  auto r = fx.ccsb("ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p " + port +
                       " -o ProxyCommand='/run/ccsb/ccsb-init --ssh-proxy 127.0.0.1:1080 %h %p' allowed-git.test true "
                       "2>&1; echo @@ssh=$?",
                   {"--allow", "allowed-git.test", "--egress-opt", "--resolve", "--egress-opt",
                    "allowed-git.test=127.0.0.1", "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("ssh")));
  CHECK_THAT(r.out, Catch::Contains("ccsb: allowed-git.test:" + port + " refused the connection"));
  CHECK_THAT(r.out, !Catch::Contains("denied by this session's network allowlist"));
}

TEST_CASE("L3: the sandbox sees no egressd socket and cannot take over a proxy port", "[L3][B2][escape]") {
  sandbox_fixture fx;
  // Every way a second socket could share 3128/1080: plain, SO_REUSEADDR,
  // SO_REUSEPORT, and an IPv6 wildcard that would also cover IPv4.
  std::string py =
      "import socket\n"
      "for port in (3128, 1080):\n"
      "    for fam, host, opts in ((socket.AF_INET, '127.0.0.1', ()), (socket.AF_INET, '127.0.0.1', (socket.SO_REUSEADDR,)),\n"
      "                            (socket.AF_INET, '127.0.0.1', (socket.SO_REUSEPORT,)),\n"
      "                            (socket.AF_INET, '127.0.0.1', (socket.SO_REUSEADDR, socket.SO_REUSEPORT)),\n"
      "                            (socket.AF_INET, '0.0.0.0', (socket.SO_REUSEPORT,)), (socket.AF_INET6, '::', (socket.SO_REUSEPORT,))):\n"
      "        s = socket.socket(fam, socket.SOCK_STREAM)\n"
      "        for o in opts: s.setsockopt(socket.SOL_SOCKET, o, 1)\n"
      "        try:\n"
      "            s.bind((host, port)); s.listen(1); print('@@took=%d/%s/%s' % (port, host, opts))\n"
      "        except OSError as e:\n"
      "            pass\n"
      "        s.close()\n"
      "print('@@done=1')\n";
  auto r = fx.ccsb("/usr/bin/python3 -c \"" + py + "\"\n"
                   "ls -la /run/ccsb/ 2>&1\n"
                   "find /run /tmp /var \"$PWD\" -type s 2>/dev/null | grep -c . | sed 's/^/@@sockets=/'\n"
                   "test -e /run/ccsb/egress; echo @@egressdir=$?\n"
                   "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://denied.test/ 2>&1; echo; echo @@ok=1");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("done") == "1");
  CHECK(r.get("took") == "<missing>");
  CHECK(r.get("egressdir") != "0");
  CHECK(r.get("sockets") == "0");
}

TEST_CASE("L3: no process in the sandbox holds the proxy channel to egressd", "[L3][B2][escape]") {
  sandbox_fixture fx;
  // Every descriptor of every process the command can see, taken with
  // pidfd_getfd where the kernel allows it, and its own: none may be a
  // SOCK_SEQPACKET socket (the channel) or a connected Unix socket to egressd.
  std::string py =
      "import ctypes, os, socket\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "found = []\n"
      "def check(fd, where):\n"
      "    try:\n"
      "        s = socket.socket(fileno=os.dup(fd))\n"
      "    except OSError:\n"
      "        return\n"
      "    try:\n"
      "        if s.type == socket.SOCK_SEQPACKET or s.family == socket.AF_UNIX: found.append(where)\n"
      "    finally:\n"
      "        s.detach()\n"
      "for fd in range(0, 256):\n"
      "    check(fd, 'self:%d' % fd)\n"
      "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
      "    pfd = libc.syscall(434, pid, 0)\n"
      "    if pfd < 0: continue\n"
      "    for fd in range(0, 256):\n"
      "        got = libc.syscall(438, pfd, fd, 0)\n"
      "        if got >= 0:\n"
      "            check(got, '%d:%d' % (pid, fd)); os.close(got)\n"
      "print('@@found=' + (','.join(found) or 'none'))\n";
  auto r = fx.ccsb("/usr/bin/python3 -c \"" + py + "\"");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("found") == "none");
}

TEST_CASE("N6: --network off denies even an allowlisted name and reports it", "[N6][N7][L3][escape]") {
  sandbox_fixture fx;
  http_upstream up("OFF-BODY-" + random_token());
  std::string port = std::to_string(up.port);
  auto r = fx.ccsb("curl -sS -f --max-time 30 http://allowed.test:" + port + "/ 2>&1; rc=$?; echo; echo @@curl=$rc",
                   {"--network", "off", "--allow", "allowed.test", "--egress-opt", "--resolve", "--egress-opt",
                    "allowed.test=127.0.0.1", "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << "\n--- events ---\n" << read_file(fx.events));
  CHECK(failed(r.get("curl")));
  CHECK(up.requests == 0);
  int violations = 0;
  for (auto& e : read_events(fx.events)) {
    auto [action, target] = violation_of(e);
    if (action == "network-outbound" && target == "allowed.test:" + port) ++violations;
  }
  CHECK(violations >= 1);
}
