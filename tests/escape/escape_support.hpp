// escape_support.hpp — drives the real `ccsb-run` for the escape tests.
//
// The bubblewrap habit (STYLE.md): run the real binary, attempt the escape,
// and assert what the sandbox could NOT do — plus, wherever possible, that the
// host is unchanged (the marker did not leak, the file kept its bytes, nothing
// arrived at the host listener). Every negative test also proves that the
// sandboxed command really ran (a "@@ran=1" line), so a launcher that fails to
// start anything can never make an escape test pass.
//
// Processes are started with fork + execve and an argv vector; no shell string
// is built on the host side (the sandboxed side runs `bash -c SCRIPT`, where
// SCRIPT only embeds paths this fixture created).
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <picojson.h>

#include "ccsb_test/process.hpp"
#include "ccsb_test/temp_dir.hpp"

namespace escape {

// CCSB_TEST_BIN_DIR runs the suite against other binaries (e.g. an older
// build, to show that a new attack test fails there).
inline std::string bin_path(const std::string& name) {
  const char* o = std::getenv("CCSB_TEST_BIN_DIR");
  return std::string(o && *o ? o : CCSB_BIN_DIR) + "/" + name;
}

// L1: a root launcher runs the sandbox as the workdir's owner (else nobody),
// never as host root. Fixtures built by a root test process are handed to
// that unprivileged uid, as a server would hand a worktree to its agent user.
inline constexpr uid_t kSandboxTestUid = 65534;
inline constexpr gid_t kSandboxTestGid = 65534;
inline int chown_cb(const char* p, const struct stat*, int, struct FTW*) {
  return ::lchown(p, kSandboxTestUid, kSandboxTestGid);
}
// CCSB_ESCAPE_ROOT_OWNED=1 keeps fixtures root's (for runs against a
// launcher that still ran sandboxes as host root).
inline void hand_to_sandbox_uid(const std::string& root) {
  if (const char* k = std::getenv("CCSB_ESCAPE_ROOT_OWNED"); k && std::string(k) == "1") return;
  if (::geteuid() == 0 && ::nftw(root.c_str(), chown_cb, 32, FTW_PHYS) != 0)
    FAIL("chown -R " << root << ": " << std::strerror(errno));
}
inline std::string ccsb_run_path() { return bin_path("ccsb-run"); }

inline bool file_exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& p, const std::string& data, mode_t mode = 0644) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) FAIL("open(" << p << ") for writing: " << std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) { ::close(fd); FAIL("write(" << p << "): " << std::strerror(errno)); }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  ::chmod(p.c_str(), mode);
}

inline void make_dirs(const std::string& p, mode_t mode = 0755) {
  std::string cur;
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += "/" + part;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
      FAIL("mkdir(" << cur << "): " << std::strerror(errno));
  }
}

inline std::string random_token() {
  std::random_device rd;
  std::mt19937_64 g(rd() ^ (static_cast<uint64_t>(::getpid()) << 32) ^
                    static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) s += hex[g() % 16];
  return s;
}

// ---------------------------------------------------------------------------
// process running

// What a run printed; "@@key=value" lines of the sandboxed script read by key.
struct proc_result : ccsb_test::output {
  proc_result() = default;
  proc_result(ccsb_test::output o) : ccsb_test::output(std::move(o)) {}

  std::map<std::string, std::string> kv() const {
    std::map<std::string, std::string> m;
    std::stringstream ss(out);
    std::string line;
    while (std::getline(ss, line)) {
      if (line.rfind("@@", 0) != 0) continue;
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      m[line.substr(2, eq - 2)] = line.substr(eq + 1);
    }
    return m;
  }
  std::string get(const std::string& k) const {
    auto m = kv();
    auto it = m.find(k);
    return it == m.end() ? std::string("<missing>") : it->second;
  }
};

struct spawn_options {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  // Host descriptors to hand to the child WITHOUT close-on-exec: {parent fd, child fd}.
  std::vector<std::pair<int, int>> leak_fds;
  int timeout_seconds = 180;  // a safety net against hangs, never an assertion
};

using child = ccsb_test::captured_child;

// The child in a process group of its own (a timeout kills everything it
// started), stdin /dev/null, stdout and stderr captured.
inline child spawn(const spawn_options& o) {
  REQUIRE(!o.argv.empty());
  ccsb_test::process_options p;
  p.argv = o.argv;
  p.env = o.env;
  p.cwd = o.cwd;
  p.inherit = o.leak_fds;
  p.own_process_group = true;
  return ccsb_test::spawn_captured(p);
}

inline proc_result collect(child c, int timeout_seconds = 180) {
  return ccsb_test::collect(c, std::chrono::seconds(timeout_seconds));
}

inline proc_result run(const spawn_options& o) { return collect(spawn(o), o.timeout_seconds); }

inline proc_result run_host(std::vector<std::string> argv, const std::string& cwd = {}) {
  spawn_options o;
  o.argv = std::move(argv);
  o.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/nonexistent", "LANG=C",
           "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=escape", "GIT_AUTHOR_EMAIL=escape@example.invalid",
           "GIT_COMMITTER_NAME=escape", "GIT_COMMITTER_EMAIL=escape@example.invalid"};
  o.cwd = cwd;
  o.timeout_seconds = 60;
  return run(o);
}

inline void run_host_ok(std::vector<std::string> argv, const std::string& cwd = {}) {
  auto r = run_host(argv, cwd);
  INFO("host helper: " << argv[0] << "\n" << r.describe());
  REQUIRE(r.exit_code == 0);
}

// ---------------------------------------------------------------------------
// /proc helpers (host view)

struct proc_info {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';
  unsigned long long start = 0;
  std::string comm;
  std::string cmdline;
};

inline std::optional<proc_info> read_proc(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return std::nullopt;
  auto lp = stat.find('('), rp = stat.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos) return std::nullopt;
  proc_info p;
  p.pid = pid;
  p.comm = stat.substr(lp + 1, rp - lp - 1);
  std::istringstream rest(stat.substr(rp + 2));
  std::vector<std::string> f;
  std::string tok;
  while (rest >> tok) f.push_back(tok);
  if (f.size() < 20) return std::nullopt;
  p.state = f[0][0];
  p.ppid = std::stoi(f[1]);
  p.start = std::stoull(f[19]);
  std::string cl = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& ch : cl) if (ch == '\0') ch = ' ';
  p.cmdline = cl;
  return p;
}

inline std::vector<proc_info> all_procs() {
  std::vector<proc_info> v;
  DIR* d = ::opendir("/proc");
  if (!d) return v;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (auto p = read_proc(static_cast<pid_t>(pid))) v.push_back(*p);
  }
  ::closedir(d);
  return v;
}

inline std::vector<proc_info> descendants(pid_t root) {
  auto procs = all_procs();
  std::set<pid_t> tree{root};
  bool grew = true;
  while (grew) {
    grew = false;
    for (auto& p : procs)
      if (!tree.count(p.pid) && tree.count(p.ppid)) { tree.insert(p.pid); grew = true; }
  }
  std::vector<proc_info> out;
  for (auto& p : procs)
    if (p.pid != root && tree.count(p.pid)) out.push_back(p);
  return out;
}

// The last NSpid of /proc/PID/status: the pid inside its own namespace.
// The supervisor is the ccsb-init whose pid there is 1; a child it forked
// keeps the name ccsb-init until its exec.
inline std::string pid_in_its_namespace(pid_t pid) {
  std::istringstream st(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(st, line);)
    if (line.rfind("NSpid:", 0) == 0) {
      auto last = line.find_last_of(" \t");
      return last == std::string::npos ? std::string() : line.substr(last + 1);
    }
  return {};
}

// Alive = same pid and start time, and not a zombie.
inline bool still_alive(const proc_info& p) {
  auto now = read_proc(p.pid);
  return now && now->start == p.start && now->state != 'Z' && now->state != 'X';
}

// ---------------------------------------------------------------------------
// host-side listeners on loopback (the things the sandbox must NOT reach)

struct tcp_listener {
  int fd = -1;
  int port = 0;
  tcp_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~tcp_listener() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // Number of connections that completed the handshake (non-blocking).
  int accepted() {
    int n = 0;
    for (;;) {
      int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      ++n;
      ::close(c);
    }
    return n;
  }
};

struct udp_listener {
  int fd = -1;
  int port = 0;
  udp_listener() {
    fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~udp_listener() { if (fd >= 0) ::close(fd); }
  std::vector<std::string> received() {
    std::vector<std::string> v;
    char buf[2048];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0) break;
      v.emplace_back(buf, static_cast<size_t>(n));
    }
    return v;
  }
};

struct abstract_listener {
  int fd = -1;
  std::string name;
  abstract_listener() : name("ccsb-escape-" + random_token()) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
    REQUIRE(::listen(fd, 16) == 0);
  }
  ~abstract_listener() { if (fd >= 0) ::close(fd); }
  int accepted() {
    int n = 0;
    for (;;) {
      int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      ++n;
      ::close(c);
    }
    return n;
  }
};

// A minimal HTTP/1.0 upstream on the host's 127.0.0.1: answers every request
// with `body` and counts requests. Runs on its own thread.
struct http_upstream {
  int fd = -1;
  int port = 0;
  std::string body;
  std::atomic<bool> stop{false};
  std::atomic<int> requests{0};
  std::thread th;
  explicit http_upstream(std::string b) : body(std::move(b)) {
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
    th = std::thread([this] { loop(); });
  }
  void loop() {
    while (!stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      ++requests;
      std::string resp = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      ::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  ~http_upstream() {
    stop = true;
    if (th.joinable()) th.join();
    ::close(fd);
  }
};

inline bool tcp_port_accepts(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

inline int free_tcp_port() {
  tcp_listener l;
  return l.port;  // closed on return; a small race, acceptable for a test peer
}

// A daemon a test runs on the host's 127.0.0.1:PORT (sshd, rsync --daemon):
// started, waited for (bounded) until the port accepts, a test failure with
// its output when it exits or never listens, SIGTERM when it goes.
struct host_daemon {
  child c;
  host_daemon() = default;
  host_daemon(const host_daemon&) = delete;
  host_daemon& operator=(const host_daemon&) = delete;
  void start(const spawn_options& o, int port, const std::string& what) {
    c = spawn(o);
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = tcp_port_accepts(port);
      if (!up) {
        if (::waitpid(c.pid, nullptr, WNOHANG) == c.pid) break;
        ::usleep(100000);
      }
    }
    if (!up) {
      ::kill(c.pid, SIGKILL);
      auto r = collect(c, 5);
      c.pid = -1;
      FAIL(what << " did not start on 127.0.0.1:" << port << "\n" << r.describe());
    }
  }
  ~host_daemon() {
    if (c.pid > 0) {
      ::kill(c.pid, SIGTERM);
      collect(c, 10);
    }
  }
};

// ---------------------------------------------------------------------------
// events file (S5): one JSON object per line

inline std::vector<picojson::object> read_events(const std::string& path) {
  std::vector<picojson::object> v;
  std::stringstream ss(read_file(path));
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty()) continue;
    picojson::value val;
    std::string e = picojson::parse(val, line);
    if (e.empty() && val.is<picojson::object>()) v.push_back(val.get<picojson::object>());
  }
  return v;
}

inline std::string str_field(const picojson::object& o, const std::string& k) {
  auto it = o.find(k);
  if (it == o.end() || !it->second.is<std::string>()) return {};
  return it->second.get<std::string>();
}

// A violation's action/target, accepting both the flat form of the ccsb-run
// contract ({"event":"violation","action":..,"target":..}) and the nested
// form of ccsb/spec.hpp ({"event":"violation","violation":{"action":..}}).
inline std::pair<std::string, std::string> violation_of(const picojson::object& o) {
  if (str_field(o, "event") != "violation") return {};
  auto it = o.find("violation");
  if (it != o.end() && it->second.is<picojson::object>()) {
    auto& in = it->second.get<picojson::object>();
    return {str_field(in, "action"), str_field(in, "target")};
  }
  return {str_field(o, "action"), str_field(o, "target")};
}

// ---------------------------------------------------------------------------
// the fixture: a temp HOME with fake secrets, a git worktree, a protected
// checkout inside it, and a host file outside every bind

// The fixtures' base directory: $CCSB_ESCAPE_TMP, else /tmp.
inline std::string escape_tmp_root() {
  const char* root = std::getenv("CCSB_ESCAPE_TMP");
  return root && *root ? root : "/tmp";
}

struct sandbox_fixture {
  ccsb_test::temp_dir tmp{"ccsb-escape", escape_tmp_root(), 0755};
  std::string base, home, work, protected_dir, protected_file, outside, outside_file;
  std::string ssh_marker, aws_marker, protected_text, bashrc_text, gitconfig_text, hostfile_text;
  std::string git_config_text;
  std::string events;

  sandbox_fixture() {
    base = tmp.path();
    if (std::getenv("CCSB_ESCAPE_KEEP")) tmp.keep();
    home = base + "/home";
    work = base + "/work";
    outside = base + "/outside";
    protected_dir = work + "/checkouts/main";
    protected_file = protected_dir + "/README";
    outside_file = outside + "/hostfile";
    events = base + "/events.jsonl";
    auto tok = random_token();
    ssh_marker = "CCSB-SECRET-SSH-" + tok;
    aws_marker = "CCSB-SECRET-AWS-" + tok;
    protected_text = "ORIGINAL-CHECKOUT-" + tok + "\n";
    bashrc_text = "# original bashrc " + tok + "\n";
    gitconfig_text = "[user]\n\tname = original-" + tok + "\n";
    hostfile_text = "HOST-FILE-" + tok + "\n";

    make_dirs(home + "/.ssh", 0700);
    write_file(home + "/.ssh/id_rsa",
               "-----BEGIN OPENSSH PRIVATE KEY-----\n" + ssh_marker + "\n-----END OPENSSH PRIVATE KEY-----\n",
               0600);
    write_file(home + "/.ssh/authorized_keys", "# none\n", 0600);
    make_dirs(home + "/.aws", 0700);
    write_file(home + "/.aws/credentials",
               "[default]\naws_access_key_id = AKIA" + tok + "\naws_secret_access_key = " + aws_marker + "\n", 0600);
    write_file(home + "/.bashrc", bashrc_text);
    write_file(home + "/.gitconfig", gitconfig_text);
    make_dirs(home + "/.claude");
    write_file(home + "/.claude/settings.json", "{}\n");

    make_dirs(work);
    run_host_ok({"/usr/bin/git", "init", "-q", work});
    git_config_text = read_file(work + "/.git/config");
    make_dirs(protected_dir);
    write_file(protected_file, protected_text);

    make_dirs(outside);
    write_file(outside_file, hostfile_text, 0600);
    hand_to_sandbox_uid(base);
    // The host file outside every bind stays root's: the sandbox must not
    // reach it through any path, whatever its uid may write.
    if (::geteuid() == 0) ::lchown(outside_file.c_str(), 0, 0);
  }

  std::vector<std::string> env() const {
    return {"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C", "TERM=dumb",
            "USER=" + user_name(), "LOGNAME=" + user_name()};
  }

  static std::string user_name() {
    passwd* pw = ::getpwuid(::getuid());
    return pw ? pw->pw_name : "root";
  }

  // ccsb-run [--profile spec --bind HOME --protect CHECKOUT --events FILE] EXTRA -- bash -c SCRIPT
  // HOME is bound writable on purpose: the masks (P4) and the write-deny
  // re-binds (P5) must hold inside a writable root, not because HOME is absent.
  std::vector<std::string> ccsb_argv(const std::vector<std::string>& extra, const std::string& script,
                                     const std::string& profile = "spec") const {
    std::vector<std::string> a{ccsb_run_path(), "--profile", profile, "--bind", home, "--protect",
                               protected_dir, "--events", events};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {"--", "/bin/bash", "-c", script});
    return a;
  }

  // The sandboxed script starts with "@@ran=1" and ends with "exit 0", so a
  // non-zero exit or a missing marker means the sandbox itself failed.
  static std::string wrap(const std::string& body) {
    return "echo @@ran=1\n" + body + "\nexit 0\n";
  }

  proc_result ccsb(const std::string& body, const std::vector<std::string>& extra = {},
                   std::vector<std::pair<int, int>> leak = {}) const {
    REQUIRE_THAT(ccsb_run_path(), Catch::Matchers::Contains("ccsb-run"));
    INFO("ccsb-run binary: " << ccsb_run_path());
    REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
    spawn_options o;
    o.argv = ccsb_argv(extra, wrap(body));
    o.env = env();
    o.cwd = work;
    o.leak_fds = std::move(leak);
    return run(o);
  }
};

// The (action, target) of every violation event in a run's events file.
inline std::vector<std::pair<std::string, std::string>> violations(const sandbox_fixture& fx) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& e : read_events(fx.events))
    if (auto p = violation_of(e); !p.first.empty()) v.push_back(p);
  return v;
}

inline bool has_violation(const sandbox_fixture& fx, const std::string& action, const std::string& target) {
  for (const auto& [a, t] : violations(fx))
    if (a == action && t == target) return true;
  return false;
}

// The reason of the first violation of `action` on `target` ("" when none
// says one, or no such violation).
inline std::string violation_reason(const sandbox_fixture& fx, const std::string& action, const std::string& target) {
  for (const auto& e : read_events(fx.events)) {
    if (violation_of(e) != std::pair<std::string, std::string>{action, target}) continue;
    auto it = e.find("violation");
    return it != e.end() && it->second.is<picojson::object>() ? str_field(it->second.get<picojson::object>(), "reason")
                                                               : str_field(e, "reason");
  }
  return {};
}

// A host-side Unix socket at `path` (SOCK_STREAM listening, or SOCK_DGRAM),
// non-blocking, mode 0777 so the sandbox's uid could reach it.
inline int host_unix_socket(const std::string& path, int type) {
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  if (type == SOCK_STREAM) REQUIRE(::listen(fd, 4096) == 0);
  ::chmod(path.c_str(), 0777);
  return fd;
}

// A python3 program run inside the sandbox; `t(name, f)` prints @@name=ok or
// @@name=ERRNO (the errno's name).
inline std::string py_probe(const std::string& code) {
  return "python3 - <<'PY'\nimport socket, errno, os, sys, time, threading\n"
         "def t(name, f):\n"
         "    try:\n"
         "        f(); print('@@%s=ok' % name, flush=True)\n"
         "    except OSError as e:\n"
         "        print('@@%s=%s' % (name, errno.errorcode.get(e.errno, e.errno)), flush=True)\n" +
         code + "\nPY";
}

// The command really ran inside the sandbox: a negative result is real.
#define ESCAPE_REQUIRE_RAN(r)                              \
  do {                                                     \
    INFO((r).describe());                                  \
    REQUIRE((r).exit_code == 0);                           \
    REQUIRE((r).get("ran") == "1");                        \
  } while (0)

inline bool failed(const std::string& rc) { return rc != "0" && rc != "<missing>"; }

// Who starts ccsb-run: the test process (root in CI), or uid 65534 through
// setpriv (bwrap then works through a user namespace). Tests that hold for
// both loop over kLaunchers.
enum class launcher { root, unprivileged };

inline const char* name_of(launcher l) { return l == launcher::root ? "root launcher" : "unprivileged launcher"; }

inline constexpr launcher kLaunchers[] = {launcher::root, launcher::unprivileged};

// Hands whatever the test added to the fixture to the sandbox's uid (the
// fixture's own rule), keeping the outside file root's.
inline void settle(const sandbox_fixture& fx) {
  hand_to_sandbox_uid(fx.base);
  if (::geteuid() == 0) ::lchown(fx.outside_file.c_str(), 0, 0);
}

inline std::vector<std::string> launcher_prefix(launcher who) {
  // A test process that is not root is already an unprivileged launcher.
  if (who == launcher::unprivileged && ::geteuid() == 0)
    return {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  return {};
}

// ccsb-run --profile PROFILE --events EVENTS ARGS -- bash -c wrap(BODY), in
// the worktree (bound writable by default), as `who`. EVENTS is removed
// first: ccsb-run refuses one that belongs to another user, and the two
// launchers are different users.
inline spawn_options launch_options(const sandbox_fixture& fx, launcher who, const std::string& profile,
                                    const std::string& events, const std::vector<std::string>& args,
                                    const std::string& body) {
  settle(fx);
  ::unlink(events.c_str());
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  if (who == launcher::unprivileged && ::geteuid() == 0) REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);
  spawn_options o;
  o.argv = launcher_prefix(who);
  for (const auto& a : std::vector<std::string>{ccsb_run_path(), "--profile", profile, "--events", events})
    o.argv.push_back(a);
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  for (const auto& a : std::vector<std::string>{"--", "/bin/bash", "-c", sandbox_fixture::wrap(body)})
    o.argv.push_back(a);
  o.env = fx.env();
  o.cwd = fx.work;
  return o;
}

}  // namespace escape
