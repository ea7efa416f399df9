// egressd confines itself after start-up (X3, N9): no privileges, no file
// system, an allowlist of system calls. Checked from outside (/proc), by
// attacks egressd is told to try after `ready` (--test-attack, one layer at a
// time, so each layer is shown to stop each attack on its own, and without
// confinement, so the attack itself is shown to work), and by every other
// test of the suite: support.hpp requires the default egressd to be confined
// and fails any test whose egressd logged a seccomp denial (hook below).
#include "support.hpp"

#include "seccomp_allowlist.hpp"

#include <catch2/catch.hpp>

#include <pwd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <exception>
#include <set>

using namespace etest;

namespace {

// A denial in any test's egressd is a failure of that test (a system call
// missing from the allowlist must show up here, not in production).
const bool kDenialHookInstalled = [] {
  seccomp_denial_hook() = [](const std::string& text) {
    if (std::uncaught_exceptions() > 0) { // the test is failing already; do not assert while unwinding
      std::fprintf(stderr, "%s", text.c_str());
      return;
    }
    FAIL_CHECK(text);
  };
  return true;
}();

std::map<std::string, std::string> proc_status(pid_t pid) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    out[line.substr(0, colon)] = v;
  }
  return out;
}

long landlock_abi() { return ::syscall(444 /* landlock_create_ruleset */, nullptr, 0, 1U); }

passwd nobody() {
  passwd* p = ::getpwnam("nobody");
  if (!p) fatal("this host has no user 'nobody' (egressd's default when started as root)");
  return *p;
}

void require_root() {
  if (::geteuid() != 0) fatal("the X3 tests start egressd as root to check the switch to an unprivileged user");
}

std::string field_str(const picojson::object& o, const std::string& k) {
  auto it = o.find(k);
  return it != o.end() && it->second.is<std::string>() ? it->second.get<std::string>() : std::string();
}
double field_num(const picojson::object& o, const std::string& k) {
  auto it = o.find(k);
  return it != o.end() && it->second.is<double>() ? it->second.get<double>() : -1;
}
bool field_bool(const picojson::object& o, const std::string& k) {
  auto it = o.find(k);
  return it != o.end() && it->second.is<bool>() && it->second.get<bool>();
}

// egressd with `layers` ("--no-confine" or a --confine value) that tries
// `attack` once after ready; returns its testAttack event.
struct attacked {
  std::unique_ptr<etest::egressd> e;
  std::optional<event> result;
};

attacked attack(const std::string& layers, const std::string& spec) {
  attacked a;
  std::vector<std::string> args = std_args({"--test-attack", spec});
  if (layers == "--no-confine") args.push_back("--no-confine");
  else args.insert(args.end(), {"--confine", layers});
  etest::egressd::options o;
  o.binary = etest::egressd_attack_path();
  o.expect_seccomp_denials = layers.find("seccomp") != std::string::npos || layers == "all";
  a.e = std::make_unique<etest::egressd>(args, o);
  a.result = a.e->wait_for([](const event& ev) { return ev.name() == "testAttack"; });
  return a;
}

int errno_of(const event& ev) { return static_cast<int>(field_num(ev.obj, "errno")); }
bool blocked(const event& ev) { return field_bool(ev.obj, "blocked"); }

// A file only root can read, in a directory only root can enter.
struct secret_file {
  temp_dir dir;
  std::string path = dir.file("secret");
  secret_file() {
    write_file(path, "secret\n");
    ::chmod(path.c_str(), 0600);
    ::chmod(dir.path().c_str(), 0700);
  }
};

} // namespace

TEST_CASE("X3: from outside, a running egressd has NoNewPrivs 1, Seccomp 2, no capabilities and runs as nobody",
          "[X3][N9][egressd]") {
  require_root();
  upstream up(upstream::mode::echo);
  etest::egressd e(std_args());
  auto st = proc_status(e.pid());
  const passwd nb = nobody();
  const std::string uid = std::to_string(nb.pw_uid), gid = std::to_string(nb.pw_gid);
  CHECK(st["NoNewPrivs"] == "1");
  CHECK(st["Seccomp"] == "2");
  CHECK(st["Seccomp_filters"] == "1");
  for (const char* k : {"CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"}) {
    INFO(k);
    CHECK(st[k] == "0000000000000000");
  }
  CHECK(st["Uid"] == uid + "\t" + uid + "\t" + uid + "\t" + uid);
  CHECK(st["Gid"] == gid + "\t" + gid + "\t" + gid + "\t" + gid);
  CHECK(st["Groups"].empty());
  CHECK(st["Threads"] == "1");
  // Not dumpable: its /proc entries belong to root, so a process of the same
  // (unprivileged) uid can neither ptrace it nor read its descriptors.
  struct stat fdst{};
  REQUIRE(::lstat(("/proc/" + std::to_string(e.pid()) + "/fd").c_str(), &fdst) == 0);
  CHECK(fdst.st_uid == 0);

  // The ready event says the same, and keeps its other fields.
  const auto& ready = e.ready();
  CHECK(!ready.str("http").empty());
  CHECK(!ready.str("socks").empty());
  auto c = confinement_of(ready.obj);
  INFO(ready.line);
  CHECK(field_str(c, "layers") == "privileges,landlock,seccomp");
  CHECK(field_str(c, "how") == "default");
  CHECK(field_bool(c, "noNewPrivs"));
  CHECK(field_num(c, "uid") == nb.pw_uid);
  CHECK(field_num(c, "gid") == nb.pw_gid);
  CHECK(field_bool(c, "switchedUser"));
  CHECK(field_str(c, "capabilities") == "none");
  const long abi = landlock_abi();
  REQUIRE(abi >= 1); // this host has Landlock: the layer must be on
  CHECK(field_num(c, "landlock") == abi);
  CHECK(field_str(c, "landlockStatus") == "applied");
  CHECK(field_str(c, "landlockFs") == "none");
  if (abi >= 4) CHECK(field_str(c, "landlockTcpBind") == "denied");
  CHECK(field_bool(c, "landlockScoped") == (abi >= 6));
  CHECK(field_str(c, "seccomp") == "allowlist");
  CHECK(field_num(c, "seccompSyscalls") > 20);
  // Nothing degraded: no confinement line on stderr.
  CHECK(e.stderr_text().find("confinement") == std::string::npos);

  // And it serves, HTTP and SOCKS5, confined.
  CHECK(proxy_still_serves(e, up));
  auto fd = tcp_connect(e.socks_port());
  auto r = socks::connect_name(fd.get(), "allowed.test", up.port());
  CHECK(r.code == 0);
  send_all(fd.get(), "ping");
  CHECK(recv_n(fd.get(), 4) == "ping");
}

TEST_CASE("X3: opening a file after ready fails under each layer alone, and succeeds unconfined", "[X3][N9][egressd]") {
  require_root();
  secret_file secret;
  upstream up(upstream::mode::echo);
  {
    auto a = attack("--no-confine", "open=" + secret.path);
    REQUIRE(a.result);
    INFO(a.result->line);
    CHECK_FALSE(blocked(*a.result)); // the attack works when nothing stops it
  }
  for (const auto& [layers, want] : std::vector<std::pair<std::string, int>>{
           {"privileges", EACCES}, {"landlock", EACCES}, {"seccomp", EPERM}, {"all", EPERM}}) {
    INFO("--confine " + layers);
    auto a = attack(layers, "open=" + secret.path);
    REQUIRE(a.result);
    INFO(a.result->line);
    CHECK(blocked(*a.result));
    CHECK(errno_of(*a.result) == want);
    CHECK(proxy_still_serves(*a.e, up));
  }
  // Landlock closes the file system to world-readable files too.
  {
    auto a = attack("landlock", "open=/etc/hostname");
    REQUIRE(a.result);
    CHECK(blocked(*a.result));
    CHECK(errno_of(*a.result) == EACCES);
  }
}

TEST_CASE("X3: executing a program after ready fails under Landlock alone and seccomp alone, and succeeds unconfined",
          "[X3][N9][egressd]") {
  require_root();
  const std::string echo = find_tool("echo");
  upstream up(upstream::mode::echo);
  {
    // Unconfined, egressd becomes the program: its line reaches the events pipe.
    etest::egressd::options o;
    o.binary = etest::egressd_attack_path();
    auto a = std::make_unique<etest::egressd>(std_args({"--no-confine", "--test-attack", "exec=" + echo}), o);
    auto line = a->wait_for([](const event& ev) { return ev.line == "egressd-test-attack-exec-succeeded"; });
    CHECK(line.has_value());
    CHECK(a->wait_exit_status() == 0);
  }
  for (const auto& [layers, want] :
       std::vector<std::pair<std::string, int>>{{"landlock", EACCES}, {"seccomp", EPERM}, {"all", EPERM}}) {
    INFO("--confine " + layers);
    auto a = attack(layers, "exec=" + echo);
    REQUIRE(a.result);
    INFO(a.result->line);
    CHECK(blocked(*a.result));
    CHECK(errno_of(*a.result) == want);
    CHECK(a.e->alive());
    CHECK(proxy_still_serves(*a.e, up));
  }
}

TEST_CASE("X3: binding a new port after ready fails under each layer alone, and succeeds unconfined",
          "[X3][N9][egressd]") {
  require_root();
  upstream up(upstream::mode::echo);
  // The privilege layer stops ports below ip_unprivileged_port_start (the
  // capability is gone); Landlock (ABI 4) and seccomp stop every port.
  isolate_network();
  const int unprivileged_start = std::atoi(read_file("/proc/sys/net/ipv4/ip_unprivileged_port_start").c_str());
  REQUIRE(unprivileged_start > 80);
  REQUIRE(landlock_abi() >= 4);
  for (const std::string spec : {"bind=127.0.0.1:80", "bind=127.0.0.1:0", "bind=[::1]:0"}) {
    INFO(spec);
    auto a = attack("--no-confine", spec);
    REQUIRE(a.result);
    INFO(a.result->line);
    CHECK_FALSE(blocked(*a.result));
  }
  struct want {
    std::string layers, spec;
    int err;
  };
  for (const auto& w : std::vector<want>{{"privileges", "bind=127.0.0.1:80", EACCES},
                                         {"landlock", "bind=127.0.0.1:80", EACCES},
                                         {"landlock", "bind=127.0.0.1:0", EACCES},
                                         {"landlock", "bind=[::1]:0", EACCES},
                                         {"seccomp", "bind=127.0.0.1:0", EPERM},
                                         {"all", "bind=127.0.0.1:0", EPERM}}) {
    INFO("--confine " + w.layers + " " + w.spec);
    auto a = attack(w.layers, w.spec);
    REQUIRE(a.result);
    INFO(a.result->line);
    CHECK(blocked(*a.result));
    CHECK(field_str(a.result->obj, "step") == "bind");
    CHECK(errno_of(*a.result) == w.err);
    CHECK(proxy_still_serves(*a.e, up));
  }
}

TEST_CASE("X3: a system call outside the allowlist fails with EPERM, is logged once, and never kills egressd",
          "[X3][N9][egressd]") {
  require_root();
  upstream up(upstream::mode::echo);
  etest::egressd::options o;
  o.binary = etest::egressd_attack_path();
  o.expect_seccomp_denials = true;
  etest::egressd e(std_args({"--test-attack", "open=/etc/hostname", "--test-attack", "open=/etc/passwd", "--test-attack",
                      "exec=/bin/true", "--test-attack", "open=/etc/hosts"}),
            o);
  std::vector<event> got; // the four outcomes, in order
  while (got.size() < 4) {
    auto ev = e.next_event();
    REQUIRE(ev);
    if (ev->name() == "testAttack") got.push_back(*ev);
  }
  for (const auto& ev : got) {
    INFO(ev.line);
    CHECK(blocked(ev));
    CHECK(errno_of(ev) == EPERM);
  }
  CHECK(e.alive());
  CHECK(proxy_still_serves(e, up));
  auto err = e.stderr_text();
  INFO(err);
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto p = err.find(needle); p != std::string::npos; p = err.find(needle, p + 1)) ++n;
    return n;
  };
  CHECK(count("egressd: seccomp: denied system call openat (") == 1); // three opens, one line
  CHECK(count("egressd: seccomp: denied system call execve (") == 1);
  CHECK(count("egressd: seccomp: denied") == 2);
  CHECK(err.find("failed with EPERM") != std::string::npos);
  // SIGTERM still drains and exits 0: the filter covers the shutdown path.
  CHECK(e.signal_and_wait(SIGTERM) == 0);
}

TEST_CASE("X3: --no-confine is named on stderr and in the ready event, and nothing is confined", "[X3][egressd]") {
  require_root();
  etest::egressd e(std_args({"--no-confine"}));
  auto c = confinement_of(e.ready().obj);
  INFO(e.ready().line);
  CHECK(field_str(c, "layers") == "none");
  CHECK(field_str(c, "how") == "--no-confine");
  CHECK_FALSE(field_bool(c, "noNewPrivs"));
  CHECK(field_num(c, "landlock") == 0);
  CHECK(field_str(c, "landlockStatus") == "off");
  CHECK(field_str(c, "seccomp") == "off");
  CHECK(field_str(c, "capabilities") == "kept");
  CHECK(e.stderr_text().find("confinement off (--no-confine") != std::string::npos);
  auto st = proc_status(e.pid());
  CHECK(st["NoNewPrivs"] == "0");
  CHECK(st["Seccomp"] == "0");
  CHECK(st["Uid"].rfind("0\t", 0) == 0);

  // A partial choice is named too.
  etest::egressd p(std_args({"--confine", "seccomp,landlock"}));
  auto pc = confinement_of(p.ready().obj);
  CHECK(field_str(pc, "layers") == "landlock,seccomp");
  CHECK(field_str(pc, "how") == "--confine seccomp,landlock");
  CHECK(p.stderr_text().find("layers off: privileges") != std::string::npos);
}

TEST_CASE("X3: --user UID:GID is the user a root-started egressd serves as", "[X3][egressd]") {
  require_root();
  etest::egressd e(std_args({"--user", "4242:4343"}));
  auto st = proc_status(e.pid());
  CHECK(st["Uid"] == "4242\t4242\t4242\t4242");
  CHECK(st["Gid"] == "4343\t4343\t4343\t4343");
  CHECK(st["Groups"].empty());
  CHECK(st["CapEff"] == "0000000000000000");
  struct stat fdst{};
  REQUIRE(::lstat(("/proc/" + std::to_string(e.pid()) + "/fd").c_str(), &fdst) == 0);
  CHECK(fdst.st_uid == 0); // not dumpable
  auto c = confinement_of(e.ready().obj);
  CHECK(field_num(c, "uid") == 4242);
  CHECK(field_num(c, "gid") == 4343);
}

TEST_CASE("X3: started by an unprivileged user, egressd keeps its uid, drops every capability and confines itself",
          "[X3][N9][egressd]") {
  require_root();
  const std::string setpriv = find_tool("setpriv");
  const passwd nb = nobody();
  // A copy the unprivileged user can reach whatever the build directory's modes.
  temp_dir bin;
  ::chmod(bin.path().c_str(), 0755);
  const std::string copy = bin.file("egressd");
  std::filesystem::copy_file(egressd_path(), copy);
  ::chmod(copy.c_str(), 0755);
  const std::vector<std::string> as_nobody{setpriv, "--reuid", std::to_string(nb.pw_uid), "--regid",
                                           std::to_string(nb.pw_gid), "--clear-groups", "--"};
  upstream up(upstream::mode::echo);
  etest::egressd::options o;
  o.exec_through = as_nobody;
  o.binary = copy;
  etest::egressd e(std_args(), o);
  auto st = proc_status(e.pid());
  const std::string uid = std::to_string(nb.pw_uid);
  CHECK(st["Uid"] == uid + "\t" + uid + "\t" + uid + "\t" + uid);
  CHECK(st["NoNewPrivs"] == "1");
  CHECK(st["Seccomp"] == "2");
  for (const char* k : {"CapEff", "CapPrm", "CapInh", "CapAmb"}) {
    INFO(k);
    CHECK(st[k] == "0000000000000000");
  }
  auto c = confinement_of(e.ready().obj);
  INFO(e.ready().line);
  CHECK_FALSE(field_bool(c, "switchedUser"));
  CHECK(field_num(c, "uid") == nb.pw_uid);
  CHECK(field_str(c, "capabilities") == "none");
  CHECK(field_str(c, "landlockStatus") == "applied");
  CHECK(field_str(c, "seccomp") == "allowlist");
  CHECK(proxy_still_serves(e, up));

  // Not root: --user cannot switch, and egressd does not start.
  std::vector<std::string> argv = as_nobody;
  argv.push_back(copy);
  for (const auto& a : std_args({"--user", "4242"})) argv.push_back(a);
  auto r = run(argv, 20000);
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("\"ready\"") == std::string::npos);
  CHECK(r.err.find("cannot switch to 4242:4242") != std::string::npos);
}

TEST_CASE("X3: confinement options are validated before anything starts (exit 2)", "[X3][egressd]") {
  require_egressd();
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--confine", "bogus"},
                                                               {"--confine", ""},
                                                               {"--confine", "seccomp,"},
                                                               {"--confine", "seccomp,files"},
                                                               {"--no-confine=yes"},
                                                               {"--user", "0"},
                                                               {"--user", "1000:0"},
                                                               {"--user", "nobody"},
                                                               {"--user", "1000:"},
                                                               {"--user", "4294967295"},
                                                               {"--user", "1000", "--no-confine"},
                                                               {"--user", "1000", "--confine", "seccomp"}}) {
    std::vector<std::string> argv{egressd_path(), "--http-listen", "127.0.0.1:0"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    auto r = run(argv, 20000);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
  }
  // egressd-attack's own option, malformed.
  for (const auto& bad : std::vector<std::string>{"delete=/etc/passwd", "open=relative/path", "open=", "bind=unix:/tmp/x",
                                                  "bind=nonsense"}) {
    auto r = run({etest::egressd_attack_path(), "--http-listen", "127.0.0.1:0", "--test-attack", bad}, 20000);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--test-attack") != std::string::npos);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
  }
}

TEST_CASE("X3: the egressd that ships has no --test-attack: the option is refused as unknown and nothing is tried",
          "[X3][egressd]") {
  require_egressd();
  for (const auto& form : std::vector<std::vector<std::string>>{{"--test-attack", "open=/etc/hostname"},
                                                                 {"--test-attack=open=/etc/hostname"}}) {
    std::vector<std::string> argv{egressd_path(), "--http-listen", "127.0.0.1:0", "--no-confine"};
    argv.insert(argv.end(), form.begin(), form.end());
    auto r = run(argv, 20000);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("unknown option") != std::string::npos);
    CHECK(r.out.find("testAttack") == std::string::npos);
    CHECK(r.out.find("\"ready\"") == std::string::npos);
  }
}

TEST_CASE("X3: a confined egressd still dies with the process that started it (the uid switch keeps PDEATHSIG)",
          "[X3][N9][egressd]") {
  require_root();
  require_egressd();
  isolate_network();
  // Orphans come to this process, so the test can wait for egressd.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  struct reset_subreaper {
    ~reset_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
  } reset;
  std::vector<std::string> args{egressd_path()};
  for (auto& a : std_args()) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  int ev[2], pids[2];
  REQUIRE(::pipe2(ev, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(pids, O_CLOEXEC) == 0);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) { // stands in for ccsb-run: starts egressd with PR_SET_PDEATHSIG(SIGKILL), then waits
    pid_t g = ::fork();
    if (g == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      ::dup2(devnull, 0);
      ::dup2(ev[1], 1);
      ::dup2(devnull, 2);
      ::execve(argv[0], argv.data(), envp);
      ::_exit(127);
    }
    ssize_t w = ::write(pids[1], &g, sizeof g);
    (void)w;
    for (;;) ::pause();
  }
  ::close(ev[1]);
  ::close(pids[1]);
  ::close(devnull);
  pid_t eg = -1;
  REQUIRE(::read(pids[0], &eg, sizeof eg) == static_cast<ssize_t>(sizeof eg));
  ::close(pids[0]);
  line_reader lr(ev[0]);
  auto ready = lr.next(kWaitMs);
  REQUIRE(ready);
  INFO(*ready);
  REQUIRE(ready->find("\"switchedUser\":true") != std::string::npos);
  CHECK(proc_status(eg)["Uid"].rfind(std::to_string(nobody().pw_uid) + "\t", 0) == 0);
  // The "launcher" dies; egressd must follow.
  kill_and_reap(launcher);
  auto code = wait_exit(eg, kWaitMs);
  if (!code) kill_and_reap(eg);
  REQUIRE(code.has_value());
  CHECK(*code == 128 + SIGKILL);
}

TEST_CASE("X3: on Unix-socket listeners a confined egressd leaves its socket files and the next egressd replaces them",
          "[X3][egressd]") {
  require_root();
  upstream up(upstream::mode::echo);
  temp_dir dir;
  ::chmod(dir.path().c_str(), 0755);
  const std::string hs = dir.file("http.sock");
  std::vector<std::string> args{"--http-listen", "unix:" + hs, "--no-baseline", "--allow-upstream", "127.0.0.0/8",
                                "--allow", "allowed.test", "--resolve", "allowed.test=127.0.0.1"};
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    etest::egressd e(args);
    auto fd = unix_connect(hs);
    auto r = http_connect(fd.get(), "allowed.test:" + std::to_string(up.port()));
    CHECK(r.status == 200);
    fd.reset();
    CHECK(e.signal_and_wait(SIGTERM) == 0);
    struct stat st{};
    CHECK(::lstat(hs.c_str(), &st) == 0); // no unlink: the file system is closed
    CHECK(S_ISSOCK(st.st_mode));
  }
}

TEST_CASE("X3: the seccomp allowlist holds nothing that opens, executes, binds, forks, signals others, changes "
          "credentials or traces",
          "[X3][N9][egressd]") {
  namespace t = ::egressd::seccomp_table;
  const std::set<std::string_view> forbidden{
      "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "execve", "execveat", "fork",
      "vfork", "clone", "clone3", "bind", "listen", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir",
      "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod", "fchmod", "fchmodat",
      "chown", "fchown", "fchownat", "lchown", "stat", "lstat", "access", "faccessat", "faccessat2", "readlink",
      "readlinkat", "statx", "kill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal",
      "pidfd_open", "pidfd_getfd", "ptrace", "process_vm_readv", "process_vm_writev", "prctl", "arch_prctl",
      "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
      "capset", "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "bpf", "mount",
      "umount2", "pivot_root", "chroot", "unshare", "setns", "mprotect", "pkey_mprotect", "memfd_create",
      "init_module", "finit_module", "kexec_load", "socketpair", "sendmsg", "io_uring_setup", "userfaultfd",
      "perf_event_open", "keyctl", "add_key", "request_key", "personality", "setrlimit", "prlimit64",
      "rt_sigaction", "sigaltstack", "mknod", "mknodat", "fanotify_init", "inotify_init1", "ioperm", "iopl"};
  std::set<std::string_view> seen;
  for (const auto& e : t::allowed()) {
    INFO(e.name);
    CHECK(forbidden.count(e.name) == 0);
    CHECK(seen.insert(e.name).second); // listed once
    CHECK(!e.user.empty());
    CHECK(!e.why.empty());
    if (e.name == "socket") {
      CHECK(e.how == t::match::one_of32);
      CHECK(e.arg == 0);
      CHECK(std::set<std::uint64_t>(e.values.begin(), e.values.begin() + e.count) ==
            std::set<std::uint64_t>{AF_INET, AF_INET6});
    }
    if (e.name == "mmap") {
      CHECK(e.how == t::match::bits_clear);
      CHECK(e.values[0] == PROT_EXEC);
    }
    if (e.name == "ioctl") {
      CHECK(e.how == t::match::one_of32);
      CHECK(e.count == 1);
      CHECK(e.values[0] == FIONBIO);
    }
    if (e.name == "newfstatat") {
      CHECK(e.how == t::match::bits_set);
      CHECK(e.values[0] == AT_EMPTY_PATH);
    }
    if (e.name == "tgkill") CHECK(e.how == t::match::self_pid);
  }
  // What the event loop, the relay and the proxy channel cannot do without.
  for (const char* need : {"splice", "pipe2", "accept", "recvmsg", "getsockopt", "getsockname", "newfstatat",
                           "epoll_ctl", "timerfd_settime", "connect", "socket", "rt_sigreturn", "exit_group"}) {
    INFO(need);
    CHECK(seen.count(need) == 1);
  }
}
