// test_supervisor_waits.cpp — issue 26 items 3, 9 and 10, against the real
// ccsb-run, ccsb-init and bwrap:
//  * X1: nothing the broker performs for a command may hold up the
//    supervisor. A FIFO opened for writing without a reader (and for
//    reading with O_CREAT, which the broker performs too, without a
//    writer) waits for its partner while the session's timeouts, kills,
//    other execs and suspend go on; once the partner comes the data flows.
//    Opened on ccsb-init's only thread, the FIFO would let a timeout be
//    reported but never end the command, and the session's next exec
//    would never start. The same for a truncate or a write open that
//    waits for the break of a lease the command holds.
//  * T2: a destination is the session's own service only while the
//    session's sockets alone hold it: a host service of the same uid that
//    shares the port with SO_REUSEPORT never gets a connection from the
//    session (allowing every connect there would let the kernel hand
//    about half of them to the host).
//  * T2: name resolution in the terminal profile works for a dual-stack
//    name (glibc sends the A and AAAA queries with one sendmmsg; a filter
//    that failed sendmmsg with ENOSYS would make glibc give up: EAI_AGAIN).
#include "session_support.hpp"

#include <sys/syscall.h>

#include <atomic>
#include <filesystem>
#include <thread>

using namespace escape;
namespace L = ccsb::launch;

namespace {

// A UDP socket of the host bound to ip:port (SO_REUSEADDR), non-blocking.
int udp_socket(const char* ip, int port) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(fd >= 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  REQUIRE(::inet_pton(AF_INET, ip, &a.sin_addr) == 1);
  INFO("bind " << ip << ":" << port);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// A nameserver on `fd` until `stop`: every A query is answered 192.0.2.7,
// every AAAA query 2001:db8::7, anything else with no answer.
void serve_dns(int fd, const std::atomic<bool>& stop, std::atomic<int>& queries) {
  while (!stop) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    unsigned char q[512];
    sockaddr_storage from{};
    socklen_t fl = sizeof from;
    ssize_t n = ::recvfrom(fd, q, sizeof q, 0, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n < 12) continue;
    std::size_t at = 12;
    while (at < static_cast<std::size_t>(n) && q[at] != 0) at += q[at] + 1u;
    if (at + 5 > static_cast<std::size_t>(n)) continue;
    const unsigned type = (q[at + 1] << 8) | q[at + 2];
    const std::size_t qend = at + 5;
    ++queries;
    std::vector<unsigned char> r(q, q + qend);
    r[2] = 0x81; // QR, RD
    r[3] = 0x80; // RA, NOERROR
    r[4] = 0; r[5] = 1; // QDCOUNT
    r[6] = 0; r[7] = 0; r[8] = 0; r[9] = 0; r[10] = 0; r[11] = 0;
    std::vector<unsigned char> data;
    if (type == 1) data = {192, 0, 2, 7};
    if (type == 28) data = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
    if (!data.empty()) {
      r[7] = 1; // ANCOUNT
      unsigned char rr[] = {0xc0, 0x0c, static_cast<unsigned char>(type >> 8), static_cast<unsigned char>(type & 0xff),
                            0, 1, 0, 0, 0, 60, 0, static_cast<unsigned char>(data.size())};
      r.insert(r.end(), rr, rr + sizeof rr);
      r.insert(r.end(), data.begin(), data.end());
    }
    (void)::sendto(fd, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), fl);
  }
}

} // namespace

TEST_CASE("T2: a dual-stack name resolves in the terminal profile (A and AAAA through one sendmmsg)",
          "[T2][X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      // A private mount namespace for this ccsb-run binds a resolv.conf
      // naming the test's nameserver on 127.0.0.53:53.
      int dns = udp_socket("127.0.0.53", 53);
      std::atomic<bool> stop{false};
      std::atomic<int> queries{0};
      std::thread server(serve_dns, dns, std::cref(stop), std::ref(queries));
      write_file(fx.base + "/resolv.conf", "nameserver 127.0.0.53\noptions attempts:2 timeout:2\n", 0644);
      auto o = launch_options(
          fx, who, "terminal", fx.events, {},
          "cd " + fx.work + "\n" +
              py_probe("import socket\n"
                 "try:\n"
                 "    infos = socket.getaddrinfo('dual.ccsb-test.example', 80, socket.AF_UNSPEC, socket.SOCK_STREAM)\n"
                 "    print('@@addrs=' + ','.join(sorted(set(i[4][0] for i in infos))), flush=True)\n"
                 "except socket.gaierror as e:\n"
                 "    print('@@addrs=gaierror %s' % e, flush=True)\n"
                 // the raw call: two datagrams on a connected UDP socket, one sent
                 "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(('127.0.0.53', 53))\n"
                 "import ctypes, ctypes.util\n"
                 "libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
                 "class iovec(ctypes.Structure): _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
                 "class msghdr(ctypes.Structure): _fields_ = [('name', ctypes.c_void_p), ('namelen', ctypes.c_uint),\n"
                 "    ('iov', ctypes.POINTER(iovec)), ('iovlen', ctypes.c_size_t), ('control', ctypes.c_void_p),\n"
                 "    ('controllen', ctypes.c_size_t), ('flags', ctypes.c_int)]\n"
                 "class mmsghdr(ctypes.Structure): _fields_ = [('hdr', msghdr), ('len', ctypes.c_uint)]\n"
                 "b1 = ctypes.create_string_buffer(b'\\x12\\x34' + b'\\0' * 10 + b'\\0\\0\\1\\0\\1', 17)\n"
                 "b2 = ctypes.create_string_buffer(b'\\x56\\x78' + b'\\0' * 10 + b'\\0\\0\\x1c\\0\\1', 17)\n"
                 "iov = (iovec * 2)(iovec(ctypes.cast(b1, ctypes.c_void_p), 17), iovec(ctypes.cast(b2, ctypes.c_void_p), 17))\n"
                 "v = (mmsghdr * 2)()\n"
                 "for k in range(2):\n"
                 "    v[k].hdr.iov = ctypes.pointer(iov[k]); v[k].hdr.iovlen = 1; v[k].len = 999\n"
                 "n = libc.sendmmsg(u.fileno(), v, 2, 0)\n"
                 "print('@@mmsg=%d/%s/%d/%d' % (n, errno.errorcode.get(ctypes.get_errno(), 0) if n < 0 else '-', v[0].len, v[1].len), flush=True)\n"
                 // a destination behind sendmmsg's msg_name is decided like sendmsg's
                 "h = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                 "sa = ctypes.create_string_buffer(socket.inet_aton('127.0.0.1').rjust(8, b'\\0'), 16)\n"
                 "ctypes.memmove(sa, (ctypes.c_ushort * 2)(socket.AF_INET, socket.htons(9)), 4)\n"
                 "w = (mmsghdr * 1)(); w[0].hdr.name = ctypes.cast(sa, ctypes.c_void_p); w[0].hdr.namelen = 16\n"
                 "w[0].hdr.iov = ctypes.pointer(iov[0]); w[0].hdr.iovlen = 1\n"
                 "n = libc.sendmmsg(h.fileno(), w, 1, 0)\n"
                 "print('@@mmsg_host=%d/%s' % (n, errno.errorcode.get(ctypes.get_errno(), 0) if n < 0 else '-'), flush=True)\n"));
      std::vector<std::string> argv{"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                                    "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", fx.base + "/resolv.conf"};
      argv.insert(argv.end(), o.argv.begin(), o.argv.end());
      o.argv = argv;
      auto r = run(o);
      stop = true;
      server.join();
      ::close(dns);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("addrs") == "192.0.2.7,2001:db8::7");
      CHECK(queries >= 2);
      // One message sent, its length written back, the second left alone.
      CHECK(r.get("mmsg") == "1/-/17/999");
      CHECK(r.get("mmsg_host") == "-1/EPERM");
      CHECK(has_violation(fx, "network-outbound", "127.0.0.1:9"));
    }
  }
}

namespace {

// An in-process session (ccsb/launch/session.hpp) on the real bwrap, with
// every wait bounded (a supervisor that stalls fails the test, never hangs it).
struct session_fixture : sandbox_fixture {
  L::reactor r;
  std::vector<ccsb::sandbox_event> events;

  L::session_request request(ccsb::profile prof) { return native_request(*this, prof, "waits-" + random_token()); }

  std::unique_ptr<L::session> launch(ccsb::profile prof) {
    L::session_callbacks cb;
    cb.event = [this](const ccsb::sandbox_event& e) { events.push_back(e); };
    cb.output = [](L::exec_id, int, std::string_view) {};
    cb.log = [](const std::string&) {};
    auto s = L::session::launch(r, request(prof), cb);
    INFO((s ? std::string() : s.err().what()));
    REQUIRE(s);
    return std::move(*s);
  }

  L::exec_id start(L::session& s, const std::string& script, L::exec_options o = {}) {
    auto id = s.exec({"/bin/sh", "-c", "cd " + work + " && " + script}, o);
    INFO((id ? std::string() : id.err().what()));
    REQUIRE(id);
    return *id;
  }

  // Turns the reactor until `done` or `seconds` passed; false then.
  template <class Pred> bool turn_until(Pred done, int seconds = 60) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      if (!r.run_once(std::chrono::milliseconds(100))) return false;
    }
    return true;
  }

  std::string stdout_of(const L::session& s, L::exec_id id) const {
    std::string all;
    for (const auto& e : events)
      if (e.kind == ccsb::event_kind::stdout_ && e.exec_id == id && e.session_id == s.id()) all += e.data;
    return all;
  }

  std::vector<ccsb::sandbox_event> of(L::exec_id id, ccsb::event_kind k) const {
    std::vector<ccsb::sandbox_event> v;
    for (const auto& e : events)
      if (e.exec_id == id && e.kind == k) v.push_back(e);
    return v;
  }
};

// The session's supervisor (ccsb-init, PID 1 of the sandbox) on the host.
pid_t supervisor_of(L::session& s) {
  auto it = s.handle().details().find("pid");
  REQUIRE(it != s.handle().details().end());
  const auto bwrap_pid = static_cast<pid_t>(it->second.get<std::int64_t>());
  for (int i = 0; i < 500; ++i) {
    for (const auto& p : descendants(bwrap_pid))
      if (p.comm == "ccsb-init" && pid_in_its_namespace(p.pid) == "1") return p.pid;
    ::usleep(10 * 1000);
  }
  FAIL("no supervisor under bwrap " << bwrap_pid);
  return -1;
}

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

} // namespace

TEST_CASE("X1: a FIFO open the broker performs never holds up the supervisor: timeouts, kills, other execs, suspend",
          "[X1][S7][escape]") {
  session_fixture fx;
  auto s = fx.launch(ccsb::profile::dispatch);
  const pid_t init = supervisor_of(*s);
  const std::size_t fds_before = open_fds(init);
  INFO("supervisor fds before: " << fds_before);
  {
    auto id = fx.start(*s, "mkfifo w.fifo r.fifo && echo made");
    REQUIRE(fx.turn_until([&] { return s->finished(id); }));
    REQUIRE(fx.stdout_of(*s, id) == "made\n");
  }

  // A writer without a reader, ended by its timeout.
  L::exec_options t;
  t.timeout = std::chrono::milliseconds(1000);
  auto writer = fx.start(*s, "echo x > w.fifo; echo wrote", t);
  // A reader the broker performs (O_CREAT) without a writer, ended by a kill.
  auto reader = fx.start(*s, "python3 -c \"import os; os.open('r.fifo', os.O_RDONLY | os.O_CREAT); print('opened')\"");
  // Meanwhile another exec runs to its end.
  auto other = fx.start(*s, "echo other > other.txt && cat other.txt");
  REQUIRE(fx.turn_until([&] { return s->finished(other); }));
  CHECK(fx.stdout_of(*s, other) == "other\n");
  REQUIRE(fx.turn_until([&] { return s->finished(writer); }));
  REQUIRE(fx.of(writer, ccsb::event_kind::killed).size() == 1);
  CHECK(fx.of(writer, ccsb::event_kind::killed)[0].reason == "timeout");
  CHECK(fx.stdout_of(*s, writer).empty());
  REQUIRE(s->kill(reader));
  REQUIRE(fx.turn_until([&] { return s->finished(reader); }));
  CHECK(fx.of(reader, ccsb::event_kind::killed).size() == 1);
  CHECK(fx.stdout_of(*s, reader).empty());

  // The normal semantics: the writer waits until a reader comes, then the
  // data flows; the same for a reader the broker opens (O_CREAT).
  auto w2 = fx.start(*s, "echo data > w.fifo; echo wrote");
  auto mid = fx.start(*s, "echo between");
  REQUIRE(fx.turn_until([&] { return s->finished(mid); }));
  CHECK_FALSE(s->finished(w2));
  auto r2 = fx.start(*s, "cat w.fifo");
  REQUIRE(fx.turn_until([&] { return s->finished(w2) && s->finished(r2); }));
  CHECK(fx.stdout_of(*s, w2) == "wrote\n");
  CHECK(fx.stdout_of(*s, r2) == "data\n");
  auto r3 = fx.start(*s, "python3 -c \"import os; fd = os.open('r.fifo', os.O_RDONLY | os.O_CREAT); "
                         "print(os.read(fd, 64).decode().strip())\"");
  auto w3 = fx.start(*s, "sleep 0.3; echo flowed > r.fifo");
  REQUIRE(fx.turn_until([&] { return s->finished(r3) && s->finished(w3); }));
  CHECK(fx.stdout_of(*s, r3) == "flowed\n");

  // Suspend while a background writer left by a finished exec waits (the
  // session is warm): it returns, done or refused with its typed error (a
  // call waiting in the broker cannot be frozen), and the session goes on.
  auto bg = fx.start(*s, "(echo late > w.fifo) >/dev/null 2>&1 & echo started");
  REQUIRE(fx.turn_until([&] { return s->finished(bg); }));
  REQUIRE(s->handle().state() == ccsb::sandbox_state::warm);
  if (::geteuid() == 0) {
    auto sus = s->suspend();
    INFO((sus ? std::string("suspended") : sus.err().what()));
    if (sus) {
      REQUIRE(s->resume());
    } else {
      CHECK(sus.err().code == ccsb::errc::io_error);
    }
    CHECK(s->handle().state() == ccsb::sandbox_state::warm);
  }
  auto r4 = fx.start(*s, "cat w.fifo");
  REQUIRE(fx.turn_until([&] { return s->finished(r4); }));
  CHECK(fx.stdout_of(*s, r4) == "late\n");

  // Nothing left behind: the supervisor's descriptors are as before, and no
  // helper process remains.
  const bool settled = fx.turn_until([&] { return open_fds(init) == fds_before && descendants(init).empty(); }, 10);
  INFO("supervisor fds after: " << open_fds(init));
  for (const auto& p : descendants(init)) UNSCOPED_INFO("left under the supervisor: " << p.pid << " " << p.comm);
  CHECK(settled);
  s->destroy();
}

TEST_CASE("X1: a thread waiting in a FIFO open does not hold up the other brokered calls of its process",
          "[X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto o = launch_options(
          fx, who, "dispatch", fx.events, {},
          "cd " + fx.work + "\n" +
              py_probe("import signal; signal.alarm(60)\n"
                 "os.mkfifo('p')\n"
                 "state = {}\n"
                 "def w():\n"
                 "    with open('p', 'w') as f: f.write('through'); state['w'] = 'ok'\n"
                 "th = threading.Thread(target=w); th.start(); time.sleep(0.3)\n"
                 "for i in range(20): open('made-%d.txt' % i, 'w').close()\n"
                 "print('@@while_waiting=%s' % state.get('w'), flush=True)\n"
                 "print('@@read=%s' % open('p').read(), flush=True)\n"
                 "th.join(5); print('@@writer=%s' % state.get('w'), flush=True)\n"
                 // a FIFO that appears under a name the broker saw as a file
                 "os.mkfifo('q'); fd = os.open('q', os.O_RDWR); print('@@rdwr=ok', flush=True)\n"
                 "nb = os.open('q', os.O_WRONLY | os.O_NONBLOCK); print('@@nonblock=ok', flush=True)\n"
                 "os.close(fd); os.close(nb)\n"
                 "t('nonblock_noreader', lambda: os.open('q', os.O_WRONLY | os.O_NONBLOCK))\n"));
      auto r = run(o);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("while_waiting") == "None"); // answered while the open waited
      CHECK(file_exists(fx.work + "/made-19.txt"));
      CHECK(r.get("read") == "through");
      CHECK(r.get("writer") == "ok");
      CHECK(r.get("rdwr") == "ok");
      CHECK(r.get("nonblock") == "ok");
      CHECK(r.get("nonblock_noreader") == "ENXIO");
    }
  }
}

TEST_CASE("X1: ccsb-run --timeout ends a command waiting in a FIFO open, for both launchers", "[X1][S5][escape]") {
  for (launcher who : kLaunchers) {
    for (const char* how : {"writer", "reader"}) {
      DYNAMIC_SECTION(name_of(who) << ", " << how) {
        sandbox_fixture fx;
        const std::string open_it = std::string(how) == "writer"
                                        ? "echo x > p"
                                        : "python3 -c \"import os; os.open('p', os.O_RDONLY | os.O_CREAT)\"";
        auto o = launch_options(fx, who, "dispatch", fx.events, {"--timeout", "2"},
                                "cd " + fx.work + "\nmkfifo p && echo @@made=1\n" + open_it + "\necho @@opened=1\n");
        o.timeout_seconds = 120; // a safety net: the old supervisor never ended it
        auto r = run(o);
        INFO(r.describe());
        CHECK_FALSE(r.timed_out);
        CHECK(r.get("made") == "1");
        CHECK(r.get("opened") == "<missing>");
        CHECK(r.exit_code != 0);
        bool timed = false;
        for (const auto& e : read_events(fx.events))
          if (str_field(e, "event") == "killed" && str_field(e, "reason") == "timeout") timed = true;
        CHECK(timed);
      }
    }
  }
}

namespace {

// A TCP listener (or a bound UDP socket) on 127.0.0.1:port with
// SO_REUSEPORT, made by a child as the sandbox's uid (the kernel shares a
// port between sockets of one uid only) and handed back; non-blocking.
int host_reuseport_listener(int port, int type = SOCK_STREAM) {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(kSandboxTestGid) != 0 || ::setuid(kSandboxTestUid) != 0)) ::_exit(2);
    int fd = ::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(3);
    if (type == SOCK_STREAM && ::listen(fd, 128) != 0) ::_exit(3);
    char c = 'L';
    iovec iov{&c, 1};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(h), &fd, sizeof fd);
    ::_exit(::sendmsg(pair[1], &m, 0) == 1 ? 0 : 4);
  }
  ::close(pair[1]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  INFO("host listener child status " << st);
  REQUIRE((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  char c = 0;
  iovec iov{&c, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  REQUIRE(::recvmsg(pair[0], &m, MSG_CMSG_CLOEXEC) == 1);
  ::close(pair[0]);
  int fd = -1;
  REQUIRE(CMSG_FIRSTHDR(&m) != nullptr);
  std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}

std::vector<std::string> datagrams(int fd) {
  std::vector<std::string> v;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) >= 0;) v.emplace_back(buf, static_cast<size_t>(n));
  return v;
}

int accepted(int fd) {
  int n = 0;
  for (int c; (c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) ::close(c);
  return n;
}

// A host service of the session's own host uid: a root launcher gives each
// session a uid of its own (nothing else can share its port then: the
// kernel refuses SO_REUSEPORT across uids), so these tests ask it for the
// shared uid explicitly (--run-as), the case where a host service can.
std::vector<std::string> same_uid_args(launcher who) {
  if (who == launcher::root && ::geteuid() == 0)
    return {"--run-as", std::to_string(kSandboxTestUid) + ":" + std::to_string(kSandboxTestGid)};
  return {};
}

bool wait_for_file(const std::string& path) {
  for (int i = 0; i < 1200; ++i) {
    if (file_exists(path)) return true;
    ::usleep(50 * 1000);
  }
  return false;
}

} // namespace

TEST_CASE("T2: a host service sharing the session's port (SO_REUSEPORT, same uid) never gets the session's "
          "connections",
          "[T2][X1][escape]") {
  for (launcher who : kLaunchers) {
    for (const char* order : {"host first", "session first"}) {
      DYNAMIC_SECTION(name_of(who) << ", " << order) {
        sandbox_fixture fx;
        const bool host_first = std::string(order) == "host first";
        const int port = free_tcp_port();
        int host = host_first ? host_reuseport_listener(port) : -1;
        const std::string p = std::to_string(port);
        // The session binds the same address and port with SO_REUSEPORT
        // and connects to it many times, in two spellings, while the host's
        // listener holds it too; then again once the host's has closed.
        auto o = launch_options(
            fx, who, "terminal", fx.events, same_uid_args(who),
            "cd " + fx.work + "\n" +
                py_probe("def c(fam, addr):\n"
                   "    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5); s.connect(addr); s.close()\n"
                   "def wait(name):\n"
                   "    deadline = time.time() + 60\n"
                   "    while not os.path.exists(name) and time.time() < deadline: time.sleep(0.05)\n"
                   "srv = socket.socket()\n"
                   "srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
                   "srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                   "t('bind', lambda: srv.bind(('127.0.0.1', " + p + ")))\n"
                   "srv.listen(128)\n"
                   "t('before', lambda: c(socket.AF_INET, ('127.0.0.1', " + p + ")))\n"
                   "open('listening', 'w').close(); wait('host-joined')\n"
                   "res = {}\n"
                   "for k in range(40):\n"
                   "    for name, fam, addr in (('v4', socket.AF_INET, ('127.0.0.1', " + p + ")),\n"
                   "                            ('mapped', socket.AF_INET6, ('::ffff:127.0.0.1', " + p + "))):\n"
                   "        try:\n"
                   "            c(fam, addr); r = 'ok'\n"
                   "        except OSError as e:\n"
                   "            r = errno.errorcode.get(e.errno, e.errno)\n"
                   "        res.setdefault(name, set()).add(r)\n"
                   "for name in sorted(res): print('@@%s=%s' % (name, ','.join(sorted(res[name]))), flush=True)\n"
                   "open('connected', 'w').close(); wait('host-left')\n"
                   "t('alone', lambda: c(socket.AF_INET, ('127.0.0.1', " + p + ")))\n"));
        o.timeout_seconds = 180;
        auto ch = spawn(o);
        const bool listening = wait_for_file(fx.work + "/listening");
        if (listening && !host_first) host = host_reuseport_listener(port);
        write_file(fx.work + "/host-joined", "", 0644);
        const bool connected = listening && wait_for_file(fx.work + "/connected");
        const int stolen = host >= 0 ? accepted(host) : -1;
        if (host >= 0) ::close(host);
        write_file(fx.work + "/host-left", "", 0644);
        auto r = collect(ch, o.timeout_seconds);
        ESCAPE_REQUIRE_RAN(r);
        INFO(r.describe());
        REQUIRE(listening);
        REQUIRE(connected);
        CHECK(r.get("bind") == "ok");
        CHECK(r.get("before") == (host_first ? "EPERM" : "ok"));
        CHECK(stolen == 0); // the host's listener never got a connection
        CHECK(r.get("v4") == "EPERM");
        CHECK(r.get("mapped") == "EPERM");
        CHECK(has_violation(fx, "network-outbound", "127.0.0.1:" + p));
        CHECK(r.get("alone") == "ok");
      }
    }
  }
}

TEST_CASE("X1: a truncate or a write open of a leased file waits in a helper, not in the supervisor",
          "[X1][escape]") {
  // The command holds a read lease and ignores SIGIO: the kernel makes a
  // truncate() or a write open wait for the lease break (lease-break-time,
  // 45 s by default). Made by the broker itself, both calls would hold up
  // every other brokered call of the session, so the lease holder could not
  // even create a file before the kernel revoked its lease.
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto o = launch_options(
          fx, who, "dispatch", fx.events, {},
          "cd " + fx.work + "\n" +
              py_probe("import fcntl, signal; signal.alarm(120)\n"
                 "signal.signal(signal.SIGIO, signal.SIG_IGN)\n"
                 "with open('leased.txt', 'w') as f: f.write('0123456789')\n"
                 "fd = os.open('leased.txt', os.O_RDONLY)\n"
                 "t('lease', lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK))\n"
                 "state = {}\n"
                 "def tr(): os.truncate('leased.txt', 4); state['truncate'] = 'ok'\n"
                 "def op():\n"
                 "    with open('leased.txt', 'a') as f: f.write('+')\n"
                 "    state['open'] = 'ok'\n"
                 "ths = [threading.Thread(target=tr), threading.Thread(target=op)]\n"
                 "for th in ths: th.start()\n"
                 "time.sleep(0.5)\n"
                 "for i in range(20): open('made-%d.txt' % i, 'w').close()\n"
                 "print('@@while_waiting=%s/%s' % (state.get('truncate'), state.get('open')), flush=True)\n"
                 "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)\n"
                 "for th in ths: th.join(30)\n"
                 "print('@@after=%s/%s' % (state.get('truncate'), state.get('open')), flush=True)\n"
                 "print('@@content=%s' % open('leased.txt').read(), flush=True)\n"));
      auto r = run(o);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      REQUIRE(r.get("lease") == "ok");
      CHECK(r.get("while_waiting") == "None/None"); // answered while both waited for the break
      CHECK(file_exists(fx.work + "/made-19.txt"));
      CHECK(r.get("after") == "ok/ok");
      const std::string content = r.get("content");
      CHECK((content == "0123+" || content == "0123")); // either order of the two
    }
  }
}

TEST_CASE("T2: a host UDP socket sharing the session's port (SO_REUSEPORT, same uid) never gets the session's "
          "datagrams",
          "[T2][X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      int probe = udp_socket("127.0.0.1", 0);
      sockaddr_in a{};
      socklen_t al = sizeof a;
      REQUIRE(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &al) == 0);
      ::close(probe);
      const std::string p = std::to_string(ntohs(a.sin_port));
      int host = host_reuseport_listener(ntohs(a.sin_port), SOCK_DGRAM);
      // The session's socket shares the port; 40 senders (the kernel picks
      // a group member by the sender's address and port) send to it.
      auto o = launch_options(
          fx, who, "terminal", fx.events, same_uid_args(who),
          "cd " + fx.work + "\n" +
              py_probe("srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                 "srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
                 "t('bind', lambda: srv.bind(('127.0.0.1', " + p + ")))\n"
                 "res = set()\n"
                 "for k in range(40):\n"
                 "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                 "    try:\n"
                 "        u.sendto(b'session', ('127.0.0.1', " + p + ")); res.add('ok')\n"
                 "    except OSError as e:\n"
                 "        res.add(errno.errorcode.get(e.errno, e.errno))\n"
                 "print('@@sent=%s' % ','.join(sorted(res)), flush=True)\n"));
      auto r = run(o);
      auto got = datagrams(host);
      ::close(host);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("bind") == "ok");
      CHECK(r.get("sent") == "EPERM");
      CHECK(got.empty());
      CHECK(has_violation(fx, "network-outbound", "127.0.0.1:" + p));
    }
  }
}

TEST_CASE("X1: a file the broker opened for the command is closed once the command closes it", "[X1][escape]") {
  // A broker that answered with ADDFD_FLAG_SEND and closed its own copy
  // afterwards would let the command run on while the file was still open
  // for writing: a lease right after the close would fail with EAGAIN and a
  // script written and run at once could get ETXTBSY.
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto o = launch_options(
          fx, who, "dispatch", fx.events, {},
          "cd " + fx.work + "\n" +
              py_probe("import fcntl, subprocess\n"
                 "lease = busy = 0\n"
                 "for i in range(400):\n"
                 "    name = 'r%d.sh' % (i % 20)\n"
                 "    with open(name, 'w') as f: f.write('#!/bin/sh\\nexit 0\\n')\n"
                 "    fd = os.open(name, os.O_RDONLY)\n"
                 "    try:\n"
                 "        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK); fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)\n"
                 "    except OSError as e:\n"
                 "        lease += e.errno == errno.EAGAIN\n"
                 "    os.close(fd)\n"
                 "for i in range(100):\n"
                 "    name = 'x%d.sh' % (i % 10)\n"
                 "    with open(name, 'w') as f: f.write('#!/bin/sh\\nexit 0\\n')\n"
                 "    os.chmod(name, 0o755)\n"
                 "    try:\n"
                 "        os.posix_spawn('./' + name, ['./' + name], {})\n"
                 "    except OSError as e:\n"
                 "        busy += e.errno == errno.ETXTBSY\n"
                 "print('@@lease_eagain=%d' % lease, flush=True)\n"
                 "print('@@etxtbsy=%d' % busy, flush=True)\n"));
      auto r = run(o);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("lease_eagain") == "0");
      CHECK(r.get("etxtbsy") == "0");
    }
  }
}
