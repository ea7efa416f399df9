// T2 / X1 / L3: the broker's network rules on the real kernel through the
// real ccsb-run.
//  * The terminal profile shares the host's network: it must reach the open
//    network (a destination outside the host: a peer network namespace on a
//    veth pair) but not the host's own loopback services, its own
//    addresses, link-local and metadata addresses or its abstract sockets,
//    by connect, sendto or sendmsg, in any address spelling; DNS reaches
//    the nameserver resolv.conf names; the session's own servers stay
//    reachable. Without the broker in the terminal profile every
//    "unreachable" assertion here fails (the host's listeners accept).
//  * Any broker profile: a Unix socket name a second session swaps for a
//    symlink to a host socket between the check and the connect reaches
//    nothing (a broker that connects by name again after its check would
//    reach it); a datagram sent with sendto/sendmsg to a host socket never
//    arrives (both calls are brokered, not only connect); a connect that
//    waits does not stall the broker (it does not connect synchronously).
#include "escape_support.hpp"

#include <sched.h>

#include <atomic>
#include <thread>

using namespace escape;

namespace {

proc_result in_profile(const sandbox_fixture& fx, const std::string& profile, const std::string& body,
                       const std::vector<std::string>& prefix = {}) {
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  spawn_options o;
  o.argv = prefix;
  for (const auto& a : std::vector<std::string>{ccsb_run_path(), "--profile", profile, "--events", fx.events, "--",
                                                "/bin/bash", "-c", sandbox_fixture::wrap("cd " + fx.work + "\n" + body)})
    o.argv.push_back(a);
  o.env = fx.env();
  o.cwd = fx.work;
  return run(o);
}

proc_result terminal(const sandbox_fixture& fx, const std::string& body, const std::vector<std::string>& prefix = {}) {
  return in_profile(fx, "terminal", body, prefix);
}

int bound_socket(int family, int type, const char* ip, int port = 0) {
  int fd = ::socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(fd >= 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<std::uint16_t>(port));
    REQUIRE(::inet_pton(AF_INET, ip, &a->sin_addr) == 1);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<std::uint16_t>(port));
    REQUIRE(::inet_pton(AF_INET6, ip, &a->sin6_addr) == 1);
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    len = sizeof *a;
  }
  INFO("bind " << ip << ":" << port);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0);
  if (type == SOCK_STREAM) REQUIRE(::listen(fd, 64) == 0);
  return fd;
}

int port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0);
  return ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                 : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

int pending_connections(int fd) {
  int n = 0;
  for (int c; (c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) ::close(c);
  return n;
}

std::vector<std::string> datagrams(int fd) {
  std::vector<std::string> v;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) >= 0;) v.emplace_back(buf, static_cast<size_t>(n));
  return v;
}

// A destination outside the host: a network namespace on a veth pair. The
// host end (HOST_IP) becomes one of the host's own addresses; the peer end
// (PEER_IP) is another machine as far as the host's routing goes.
struct peer_netns {
  std::string name, veth_host, veth_peer, host_ip, peer_ip, unassigned_ip;
  int tcp = -1, udp = -1;

  peer_netns() {
    static std::atomic<int> seq{0};
    int id = (static_cast<int>(::getpid()) * 7 + seq++) % 200 + 20;
    name = "ccsb-t2-" + std::to_string(::getpid()) + "-" + std::to_string(id);
    veth_host = "ct2h" + std::to_string(id) + "x" + std::to_string(::getpid() % 1000);
    veth_peer = "ct2p" + std::to_string(id) + "x" + std::to_string(::getpid() % 1000);
    std::string net = "10.231." + std::to_string(id) + ".";
    host_ip = net + "1";
    peer_ip = net + "2";
    unassigned_ip = net + "77";
    REQUIRE(::geteuid() == 0); // CI runs the escape tests as root
    run_host_ok({"/usr/sbin/ip", "netns", "add", name});
    run_host_ok({"/usr/sbin/ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_peer});
    run_host_ok({"/usr/sbin/ip", "link", "set", veth_peer, "netns", name});
    run_host_ok({"/usr/sbin/ip", "addr", "add", host_ip + "/24", "dev", veth_host});
    run_host_ok({"/usr/sbin/ip", "link", "set", veth_host, "up"});
    run_host_ok({"/usr/sbin/ip", "-n", name, "addr", "add", peer_ip + "/24", "dev", veth_peer});
    run_host_ok({"/usr/sbin/ip", "-n", name, "link", "set", veth_peer, "up"});
    run_host_ok({"/usr/sbin/ip", "-n", name, "link", "set", "lo", "up"});
    // Listeners inside: a thread enters the namespace, creates them, leaves.
    std::string ns = "/run/netns/" + name;
    std::thread([&] {
      int nsfd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) return;
      ::close(nsfd);
      for (int i = 0; i < 50; ++i) { // the address may still be tentative for a moment
        int t = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        ::inet_pton(AF_INET, peer_ip.c_str(), &a.sin_addr);
        if (::bind(t, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(t, 64) == 0) {
          tcp = t;
          break;
        }
        ::close(t);
        ::usleep(20000);
      }
      int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      ::inet_pton(AF_INET, peer_ip.c_str(), &a.sin_addr);
      if (::bind(u, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) udp = u;
    }).join();
    REQUIRE(tcp >= 0);
    REQUIRE(udp >= 0);
  }
  ~peer_netns() {
    if (tcp >= 0) ::close(tcp);
    if (udp >= 0) ::close(udp);
    (void)run_host({"/usr/sbin/ip", "netns", "del", name});
    (void)run_host({"/usr/sbin/ip", "link", "del", veth_host});
  }
};

} // namespace

TEST_CASE("T2: a terminal reaches neither the host's loopback services nor its own addresses, in any spelling",
          "[T2][X1][escape]") {
  sandbox_fixture fx;
  peer_netns peer; // gives the host a second address of its own (HOST_IP)
  int tcp4 = bound_socket(AF_INET, SOCK_STREAM, "127.0.0.1");
  int tcp6 = bound_socket(AF_INET6, SOCK_STREAM, "::1");
  int any = bound_socket(AF_INET, SOCK_STREAM, "0.0.0.0");
  int udp4 = bound_socket(AF_INET, SOCK_DGRAM, "127.0.0.1");
  const std::string p4 = std::to_string(port_of(tcp4)), p6 = std::to_string(port_of(tcp6)),
                    pany = std::to_string(port_of(any)), pu = std::to_string(port_of(udp4));
  auto r = terminal(fx, "( echo PROBE > /dev/tcp/127.0.0.1/" + p4 + " ) 2>/dev/null; echo @@devtcp=$?\n"
                        "curl -sS --noproxy '*' --max-time 10 http://localhost:" + p4 + "/ >/dev/null 2>&1; echo @@curl=$?\n" +
                        py_probe("def c(fam, addr):\n"
                           "    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(10); s.connect(addr)\n"
                           "t('v4', lambda: c(socket.AF_INET, ('127.0.0.1', " + p4 + ")))\n"
                           "t('alias', lambda: c(socket.AF_INET, ('127.8.9.10', " + pany + ")))\n"
                           "t('zero', lambda: c(socket.AF_INET, ('0.0.0.0', " + pany + ")))\n"
                           "t('mapped', lambda: c(socket.AF_INET6, ('::ffff:127.0.0.1', " + p4 + ")))\n"
                           "t('v6', lambda: c(socket.AF_INET6, ('::1', " + p6 + ")))\n"
                           "t('own_addr', lambda: c(socket.AF_INET, ('" + peer.host_ip + "', " + pany + ")))\n"
                           "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                           "t('sendto', lambda: u.sendto(b'SENDTO', ('127.0.0.1', " + pu + ")))\n"
                           "t('sendmsg', lambda: u.sendmsg([b'SEND', b'MSG'], [], 0, ('127.0.0.1', " + pu + ")))\n"
                           "t('udpconnect', lambda: u.connect(('127.0.0.1', " + pu + ")))\n"
                           "tfo = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
                           "t('fastopen', lambda: tfo.sendto(b'GET / HTTP/1.0\\r\\n\\r\\n', socket.MSG_FASTOPEN, ('127.0.0.1', " + p4 + ")))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(failed(r.get("devtcp")));
  CHECK(failed(r.get("curl")));
  for (const char* k : {"v4", "alias", "zero", "mapped", "v6", "own_addr", "sendto", "sendmsg", "udpconnect", "fastopen"}) {
    INFO(k);
    CHECK(r.get(k) == "EPERM");
  }
  CHECK(pending_connections(tcp4) == 0);
  CHECK(pending_connections(tcp6) == 0);
  CHECK(pending_connections(any) == 0);
  CHECK(datagrams(udp4).empty());
  CHECK(has_violation(fx, "network-outbound", "127.0.0.1:" + p4));
  CHECK(has_violation(fx, "network-outbound", "[::1]:" + p6));
  CHECK(has_violation(fx, "network-outbound", peer.host_ip + ":" + pany));
  CHECK(has_violation(fx, "network-outbound", "127.0.0.1:" + pu));
  for (int fd : {tcp4, tcp6, any, udp4}) ::close(fd);
}

TEST_CASE("T2: link-local and metadata addresses fail with EPERM before a packet leaves", "[T2][X1][escape]") {
  sandbox_fixture fx;
  // Without the broker these time out or are unreachable (ETIMEDOUT,
  // ENETUNREACH, EHOSTUNREACH); EPERM is the broker's answer.
  auto r = terminal(fx, py_probe("def c(fam, addr):\n"
                           "    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3); s.connect(addr)\n"
                           "t('aws', lambda: c(socket.AF_INET, ('169.254.169.254', 80)))\n"
                           "t('ecs', lambda: c(socket.AF_INET, ('169.254.170.2', 80)))\n"
                           "t('alibaba', lambda: c(socket.AF_INET, ('100.100.100.200', 80)))\n"
                           "t('aws6', lambda: c(socket.AF_INET6, ('fd00:ec2::254', 80)))\n"
                           "t('ll6', lambda: c(socket.AF_INET6, ('fe80::1', 80, 0, 1)))\n"
                           "t('nat64', lambda: c(socket.AF_INET6, ('64:ff9b::a9fe:a9fe', 80)))\n"
                           "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                           "t('udp', lambda: u.sendto(b'x', ('169.254.169.254', 53)))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  for (const char* k : {"aws", "ecs", "alibaba", "aws6", "ll6", "nat64", "udp"}) {
    INFO(k);
    CHECK(r.get(k) == "EPERM");
  }
  CHECK(has_violation(fx, "network-outbound", "169.254.169.254:80"));
  CHECK(has_violation(fx, "network-outbound", "[fd00:ec2::254]:80"));
}

TEST_CASE("T2: the open network works (TCP, sendto, sendmsg to an address outside the host), and a connect "
          "that waits does not hold up the session's other brokered calls",
          "[T2][X1][escape]") {
  sandbox_fixture fx;
  peer_netns peer;
  const std::string tp = std::to_string(port_of(peer.tcp)), up = std::to_string(port_of(peer.udp));
  auto r = terminal(fx, "curl -sS --noproxy '*' --max-time 10 -o /dev/null http://" + peer.peer_ip + ":" + tp +
                        "/ 2>/dev/null; echo @@curl_ran=1\n" +
                        py_probe("def c(addr):\n"
                           "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(10); s.connect(addr); s.sendall(b'HELLO')\n"
                           "t('tcp', lambda: c(('" + peer.peer_ip + "', " + tp + ")))\n"
                           "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                           "t('sendto', lambda: u.sendto(b'SENDTO', ('" + peer.peer_ip + "', " + up + ")))\n"
                           "t('sendmsg', lambda: u.sendmsg([b'SEND', b'MSG'], [], 0, ('" + peer.peer_ip + "', " + up + ")))\n"
                           // A blocking connect to an address nobody answers (ARP fails after
                           // seconds) on one thread; file creations on another finish first.
                           "state = {'connect': None}\n"
                           "def slow():\n"
                           "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
                           "    try:\n"
                           "        s.connect(('" + peer.unassigned_ip + "', 9)); state['connect'] = 'ok'\n"
                           "    except OSError as e:\n"
                           "        state['connect'] = errno.errorcode.get(e.errno, e.errno)\n"
                           "th = threading.Thread(target=slow); th.start(); time.sleep(0.3)\n"
                           "for i in range(20): open('made-%d.txt' % i, 'w').close()\n"
                           "print('@@while_waiting=%s' % state['connect'], flush=True)\n"
                           "th.join(); print('@@slow=%s' % state['connect'])\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("tcp") == "ok");
  CHECK(r.get("sendto") == "ok");
  CHECK(r.get("sendmsg") == "ok");
  CHECK(pending_connections(peer.tcp) >= 2); // curl and python
  auto got = datagrams(peer.udp);
  CHECK(std::find(got.begin(), got.end(), "SENDTO") != got.end());
  CHECK(std::find(got.begin(), got.end(), "SENDMSG") != got.end());
  CHECK(r.get("while_waiting") == "None"); // the creations were answered while the connect still waited
  CHECK(r.get("slow") != "ok");
  CHECK(file_exists(fx.work + "/made-19.txt"));
  CHECK(violations(fx).empty());
}

TEST_CASE("T2: the session's own server on localhost is reachable, a side binding does not open the host's port",
          "[T2][X1][escape]") {
  sandbox_fixture fx;
  int host_tcp = bound_socket(AF_INET, SOCK_STREAM, "127.0.0.1");
  const std::string hp = std::to_string(port_of(host_tcp));
  auto r = terminal(fx, py_probe("srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(4)\n"
                           "port = srv.getsockname()[1]\n"
                           "def c(fam, addr):\n"
                           "    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5); s.connect(addr)\n"
                           "t('own', lambda: c(socket.AF_INET, ('127.0.0.1', port)))\n"
                           "w = socket.socket(socket.AF_INET6); w.bind(('::', 0)); w.listen(4)\n"
                           "wp = w.getsockname()[1]\n"
                           "t('own_wild_v4', lambda: c(socket.AF_INET, ('127.0.0.1', wp)))\n"
                           "t('own_wild_v6', lambda: c(socket.AF_INET6, ('::1', wp)))\n"
                           // the host's port, bound by the session on another loopback address and as UDP
                           "side = socket.socket(); side.bind(('127.0.0.2', " + hp + ")); side.listen(1)\n"
                           "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(('127.0.0.1', " + hp + "))\n"
                           "t('host', lambda: c(socket.AF_INET, ('127.0.0.1', " + hp + ")))\n"
                           "us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); us.bind(('127.0.0.1', 0))\n"
                           "t('own_udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', us.getsockname()))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("own") == "ok");
  CHECK(r.get("own_wild_v4") == "ok");
  CHECK(r.get("own_wild_v6") == "ok");
  CHECK(r.get("own_udp") == "ok");
  CHECK(r.get("host") == "EPERM");
  CHECK(pending_connections(host_tcp) == 0);
  ::close(host_tcp);
}

TEST_CASE("T2: DNS reaches the loopback nameserver resolv.conf names, and nothing else on that address",
          "[T2][X1][escape]") {
  sandbox_fixture fx;
  // The host's resolver is systemd-resolved's stub here: a private mount
  // namespace for this one ccsb-run binds a resolv.conf naming 127.0.0.53.
  int dns = bound_socket(AF_INET, SOCK_DGRAM, "127.0.0.53", 53);
  int other = bound_socket(AF_INET, SOCK_DGRAM, "127.0.0.53");
  const std::string op = std::to_string(port_of(other));
  write_file(fx.base + "/resolv.conf", "nameserver 127.0.0.53\noptions attempts:1 timeout:1\n", 0644);
  auto r = terminal(fx,
                    "getent hosts ccsb-t2-probe.example >/dev/null; echo @@getent_ran=1\n" +
                        py_probe("u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                           "t('other', lambda: u.sendto(b'OTHER', ('127.0.0.53', " + op + ")))\n"),
                    {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                     "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", fx.base + "/resolv.conf"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  auto queries = datagrams(dns);
  CHECK_FALSE(queries.empty());
  bool named = false;
  for (const auto& q : queries) named = named || q.find("ccsb-t2-probe") != std::string::npos;
  CHECK(named);
  CHECK(r.get("other") == "EPERM");
  CHECK(datagrams(other).empty());
  ::close(dns);
  ::close(other);
}

TEST_CASE("T2: an abstract Unix socket bound on the host is unreachable from a terminal, the session's own is",
          "[T2][X1][escape]") {
  sandbox_fixture fx;
  std::string name = "ccsb-t2-abstract-" + random_token();
  int ls = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(ls >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  REQUIRE(::bind(ls, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0);
  REQUIRE(::listen(ls, 8) == 0);
  auto r = terminal(fx, py_probe("c = socket.socket(socket.AF_UNIX)\n"
                           "t('host', lambda: c.connect('\\0" + name + "'))\n"
                           "srv = socket.socket(socket.AF_UNIX); srv.bind('\\0mine-" + name + "'); srv.listen(1)\n"
                           "t('own', lambda: socket.socket(socket.AF_UNIX).connect('\\0mine-" + name + "'))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("host") == "EPERM");
  CHECK(r.get("own") == "ok");
  CHECK(pending_connections(ls) == 0);
  ::close(ls);
}

TEST_CASE("X1 L3: a socket name a second session swaps for a symlink to a host socket after the check reaches nothing",
          "[X1][L3][escape]") {
  // Inside one session every rename goes through the same single-threaded
  // broker, so it cannot land between that broker's check and its connect;
  // a second session on the same worktree has a broker of its own. Session
  // A flips "target" between a hard link to session B's own socket (allowed
  // for B) and a symlink to the host's socket (denied) while B connects.
  sandbox_fixture fx;
  std::string host_path = fx.work + "/host.sock";
  int ls = host_unix_socket(host_path, SOCK_STREAM);
  hand_to_sandbox_uid(fx.base);
  proc_result flipper;
  std::thread a_session([&] {
    flipper = in_profile(fx, "dispatch",
                         py_probe("while not os.path.exists('mine.sock'): time.sleep(0.01)\n"
                            "n = 0\n"
                            "while not os.path.exists('stop'):\n"
                            "    os.link('mine.sock', 'tmp-own'); os.rename('tmp-own', 'target')\n"
                            "    os.symlink('host.sock', 'tmp-evil'); os.rename('tmp-evil', 'target')\n"
                            "    n += 1\n"
                            "print('@@flips=%d' % n)\n"));
  });
  auto r = in_profile(fx, "dispatch",
                      py_probe("srv = socket.socket(socket.AF_UNIX); srv.bind('mine.sock'); srv.listen(4096)\n"
                         "srv.setblocking(False)\n"
                         "while not os.path.exists('target'): time.sleep(0.01)\n"
                         "ok = 0\n"
                         "for i in range(20000):\n"
                         "    c = socket.socket(socket.AF_UNIX)\n"
                         "    try:\n"
                         "        c.connect('target'); ok += 1\n"
                         "    except OSError:\n"
                         "        pass\n"
                         "    c.close()\n"
                         "    try:\n"
                         "        while True: srv.accept()[0].close()\n"
                         "    except BlockingIOError:\n"
                         "        pass\n"
                         "open('stop', 'w').close()\n"
                         "print('@@own_ok=%d' % ok)\n"));
  a_session.join();
  ESCAPE_REQUIRE_RAN(flipper);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe() << flipper.describe());
  CHECK(std::stoi(r.get("own_ok")) > 0);   // the race really ran both ways
  CHECK(std::stoi(flipper.get("flips")) > 100);
  CHECK(pending_connections(ls) == 0);
  ::close(ls);
}

TEST_CASE("X1 L3: sendto and sendmsg to a host datagram socket in the worktree never arrive, while SCM_RIGHTS through "
          "the brokered sendmsg still passes descriptors",
          "[X1][L3][escape]") {
  sandbox_fixture fx;
  std::string host_path = fx.work + "/host.dgram";
  int hs = host_unix_socket(host_path, SOCK_DGRAM);
  hand_to_sandbox_uid(fx.base);
  auto r = in_profile(fx, "dispatch",
                      py_probe("u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                         "t('sendto', lambda: u.sendto(b'SENDTO', 'host.dgram'))\n"
                         "t('sendmsg', lambda: u.sendmsg([b'SENDMSG'], [], 0, 'host.dgram'))\n"
                         "mine = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); mine.bind('mine.dgram')\n"
                         "t('own', lambda: u.sendto(b'OWN', 'mine.dgram'))\n"
                         "print('@@own_got=%s' % mine.recv(100).decode())\n"
                         "open('passed.txt', 'w').write('PASSED-THROUGH')\n"
                         "x, y = socket.socketpair()\n"
                         "f = os.open('passed.txt', os.O_RDONLY)\n"
                         "t('rights', lambda: socket.send_fds(x, [b'fd'], [f]))\n"
                         "msg, fds, flags, addr = socket.recv_fds(y, 100, 4)\n"
                         "print('@@rights_got=%s' % os.read(fds[0], 100).decode())\n"
                         "big = b'B' * (3 << 20)\n"
                         "p, q = socket.socketpair()\n"
                         "def reader():\n"
                         "    n = 0\n"
                         "    while n < len(big):\n"
                         "        n += len(q.recv(1 << 16))\n"
                         "    print('@@stream_read=%d' % n, flush=True)\n"
                         "th = threading.Thread(target=reader); th.start()\n"
                         "sent = 0\n"
                         "while sent < len(big): sent += p.sendmsg([big[sent:]])\n"
                         "th.join()\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("sendto") == "EPERM");
  CHECK(r.get("sendmsg") == "EPERM");
  CHECK(r.get("own") == "ok");
  CHECK(r.get("own_got") == "OWN");
  CHECK(r.get("rights") == "ok");
  CHECK(r.get("rights_got") == "PASSED-THROUGH");
  CHECK(std::stoi(r.get("stream_read")) >= (3 << 20));
  CHECK(datagrams(hs).empty());
  CHECK(has_violation(fx, "network-outbound", "unix:" + host_path));
  ::close(hs);
}

TEST_CASE("X1: a connect that waits (a Unix listener's full backlog) does not hold up the session's other brokered "
          "calls",
          "[X1][L3][escape]") {
  // A broker that connected synchronously would stall on the waiting
  // connect: the file creations below would never get an answer, and the
  // alarm would kill the program (no markers).
  sandbox_fixture fx;
  auto r = in_profile(fx, "dispatch",
                      py_probe("import signal; signal.alarm(60)\n"
                         "srv = socket.socket(socket.AF_UNIX); srv.bind('q.sock'); srv.listen(0)\n"
                         "fill = []\n"
                         "while len(fill) < 64:\n"
                         "    c = socket.socket(socket.AF_UNIX); c.setblocking(False)\n"
                         "    try:\n"
                         "        c.connect('q.sock'); fill.append(c)\n"
                         "    except BlockingIOError:\n"
                         "        break\n"
                         "print('@@filled=%d' % len(fill), flush=True)\n"
                         "state = {}\n"
                         "def slow():\n"
                         "    s = socket.socket(socket.AF_UNIX)\n"
                         "    s.connect('q.sock'); state['c'] = 'ok'\n"
                         "th = threading.Thread(target=slow); th.start(); time.sleep(0.3)\n"
                         "for i in range(20): open('made-%d.txt' % i, 'w').close()\n"
                         "print('@@while_waiting=%s' % state.get('c'), flush=True)\n"
                         "srv.setblocking(False)\n"
                         "deadline = time.time() + 30\n"
                         "while th.is_alive() and time.time() < deadline:\n"
                         "    try:\n"
                         "        srv.accept()\n"
                         "    except BlockingIOError:\n"
                         "        time.sleep(0.01)\n"
                         "th.join(1); print('@@slow=%s' % state.get('c'))\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(std::stoi(r.get("filled")) < 64);      // the backlog really filled up
  CHECK(r.get("while_waiting") == "None");     // answered while the connect waited
  CHECK(r.get("slow") == "ok");                // and the connect completed once there was room
  CHECK(file_exists(fx.work + "/made-19.txt"));
}

TEST_CASE("T2: an unprivileged launcher's terminal is held to the same network rules", "[T2][X1][L1][escape]") {
  // ccsb-run as uid/gid 65534 (setpriv): bwrap in a user namespace, the
  // broker as that user. The programs are copied out of the build directory.
  REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);
  sandbox_fixture fx;
  const std::string bin = fx.base + "/bin";
  make_dirs(bin);
  for (const char* prog : {"ccsb-run", "ccsb-init", "egressd"}) write_file(bin + "/" + prog, read_file(bin_path(prog)), 0755);
  int host = bound_socket(AF_INET, SOCK_STREAM, "127.0.0.1");
  const std::string hp = std::to_string(port_of(host));
  spawn_options o;
  o.argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin + "/ccsb-run",
            "--profile", "terminal", "--", "/bin/bash", "-c",
            sandbox_fixture::wrap("cd " + fx.work + "\nid -u | sed 's/^/@@uid=/'\n" +
                                  py_probe("def c(addr):\n"
                                     "    s = socket.socket(); s.settimeout(5); s.connect(addr)\n"
                                     "t('host', lambda: c(('127.0.0.1', " + hp + ")))\n"
                                     "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
                                     "t('own', lambda: c(srv.getsockname()))\n"))};
  o.env = {"HOME=" + fx.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "USER=nobody", "LOGNAME=nobody"};
  o.cwd = fx.work;
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("uid") == "65534");
  CHECK(r.get("host") == "EPERM");
  CHECK(r.get("own") == "ok");
  CHECK(pending_connections(host) == 0);
  ::close(host);
}
