// Helpers of the microvm tests (X4; docs/microvm.md): run the real ccsb-run
// with --backend microvm under TCG in a sandbox_fixture, drive the real
// ccsbd over its socket, and look at the host's processes and cgroups.
// Shared by every tests/microvm/ file.
#pragma once

#include "../escape/escape_support.hpp"

#include <grp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>

namespace microvm_test {

using namespace escape;

inline std::vector<std::string> as_nobody() {
  return {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
}

inline std::string guest_dir() { return bin_path("guest"); }

// The guest image's kernel version, from its manifest.
inline std::string image_kernel() {
  std::istringstream in(read_file(guest_dir() + "/manifest"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("kernel=", 0) == 0) return line.substr(7);
  return {};
}

inline std::string host_kernel() {
  utsname u{};
  ::uname(&u);
  return u.release;
}

// Every live process whose command line mentions `needle` (QEMU's names the
// fixture's paths in its -fsdev options).
inline std::vector<std::string> processes_naming(const std::string& needle) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string cmd = read_file(std::string("/proc/") + e->d_name + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos && cmd.find("qemu") != std::string::npos)
      out.push_back(std::string(e->d_name) + ": " + cmd.substr(0, 200));
  }
  ::closedir(d);
  return out;
}

// The cgroup of process `pid`: in the v2 hierarchy (controller ""), else in
// the v1 hierarchy of `controller`.
inline bool cgroup_v2() { return file_exists("/sys/fs/cgroup/cgroup.controllers"); }
inline std::string cgroup_of(const std::string& pid, const std::string& controller) {
  std::istringstream in(read_file("/proc/" + pid + "/cgroup"));
  std::string line;
  const std::string key = cgroup_v2() ? "0::" : ":" + controller + ":";
  while (std::getline(in, line)) {
    auto c = line.find(key);
    if (c != std::string::npos && (cgroup_v2() ? c == 0 : true)) return line.substr(c + key.size());
  }
  return {};
}

struct vm_run {
  bool unprivileged{false};
  std::vector<std::string> extra;
  std::vector<std::string> env_extra;
  int stdin_fd{-1}; // the command's stdin (else /dev/null)
};

inline proc_result run_vm(const sandbox_fixture& fx, const std::string& body, const vm_run& v = {}) {
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  INFO("guest image: " << guest_dir());
  REQUIRE(::access((guest_dir() + "/manifest").c_str(), R_OK) == 0);
  spawn_options o;
  if (v.unprivileged) o.argv = as_nobody();
  o.argv.insert(o.argv.end(), {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--events", fx.events});
  o.argv.insert(o.argv.end(), v.extra.begin(), v.extra.end());
  o.argv.insert(o.argv.end(), {"--", "/bin/bash", "-c", sandbox_fixture::wrap("echo \"@@kernel=$(uname -r)\"\n" + body)});
  o.env = fx.env();
  o.env.insert(o.env.end(), v.env_extra.begin(), v.env_extra.end());
  o.cwd = fx.work;
  if (v.stdin_fd >= 0) o.leak_fds.push_back({v.stdin_fd, 0});
  o.timeout_seconds = 240;
  return run(o);
}

// `body(unprivileged)` once per launcher, each a section of its own: root
// (QEMU as a session uid with idmapped binds) and uid 65534 through setpriv.
template <class Body> void for_each_launcher(Body body) {
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged launcher" : "root launcher")) { body(unprivileged); }
  }
}

// run_vm, and the proof that the script ran in the guest: its @@ran line
// and the guest image's kernel.
inline proc_result run_in_guest(const sandbox_fixture& fx, const std::string& body, const vm_run& v) {
  auto r = run_vm(fx, body, v);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("kernel") == image_kernel());
  return r;
}

// The directories named `name` (a cgroup's) in every hierarchy of
// /sys/fs/cgroup that holds one below the test process's own cgroup.
inline std::vector<std::string> cgroup_dirs_named(const std::string& name) {
  std::vector<std::string> out;
  std::vector<std::string> roots{"/sys/fs/cgroup" + cgroup_of("self", "")};
  if (!cgroup_v2())
    for (const char* c : {"memory", "pids", "freezer", "cpu", "unified"})
      roots.push_back(std::string("/sys/fs/cgroup/") + c + cgroup_of("self", c == std::string("unified") ? "" : c));
  for (const auto& r : roots) {
    const std::string d = r + (r.back() == '/' ? "" : "/") + name;
    struct stat st{};
    if (::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(d);
  }
  return out;
}

// One ccsbd of a test: the real daemon on a socket in a directory of its
// own (mode 0700, the daemon's), as root or as uid 65534, and one client
// connection to it speaking docs/ccsbd-protocol.md. Every line received is
// kept (`seen`) for the test's messages.
class daemon_client {
public:
  daemon_client(const sandbox_fixture& fx, bool unprivileged, const std::vector<std::string>& env_extra = {})
      : unprivileged_(unprivileged && ::geteuid() == 0) {
    REQUIRE(::access(bin_path("ccsbd").c_str(), X_OK) == 0);
    const std::string run_dir = fx.base + "/ccsbd-run";
    make_dirs(run_dir, 0700);
    if (unprivileged_) REQUIRE(::chown(run_dir.c_str(), 65534, 65534) == 0);
    sock_ = run_dir + "/ccsbd.sock";
    spawn_options o;
    if (unprivileged_) o.argv = as_nobody();
    o.argv.insert(o.argv.end(), {bin_path("ccsbd"), "--listen", "unix:" + sock_});
    o.env = fx.env();
    o.env.insert(o.env.end(), env_extra.begin(), env_extra.end());
    o.cwd = fx.work;
    proc_ = spawn(o);
    REQUIRE(proc_.pid > 0);
    for (int i = 0; i < 300 && !file_exists(sock_); ++i) ::usleep(100000);
    INFO("ccsbd did not create its socket " << sock_);
    REQUIRE(file_exists(sock_));
    connect();
  }
  daemon_client(const daemon_client&) = delete;
  daemon_client& operator=(const daemon_client&) = delete;
  ~daemon_client() {
    if (fd_ >= 0) ::close(fd_);
    if (proc_.pid > 0) {
      ::kill(proc_.pid, SIGTERM);
      (void)collect(proc_, 60);
    }
  }

  pid_t pid() const { return proc_.pid; }

  void send(const picojson::object& request) {
    const std::string line = picojson::value(request).serialize() + "\n";
    REQUIRE(::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size()));
  }

  // The next line from the daemon (an empty object when it closed the
  // connection or said nothing within `seconds`: a safety net, never an
  // assertion on time).
  picojson::object next(int seconds = 120) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        picojson::value v;
        const std::string err = picojson::parse(v, buf_.substr(0, nl));
        buf_.erase(0, nl + 1);
        REQUIRE(err.empty());
        REQUIRE(v.is<picojson::object>());
        seen.push_back(v.serialize());
        return v.get<picojson::object>();
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return {};
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) <= 0) continue;
      char b[65536];
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0) return {};
      buf_.append(b, static_cast<std::size_t>(n));
    }
  }

  // Sends `request` with a fresh id; the lines up to and including its
  // direct reply (the last; an empty object when none came).
  std::vector<picojson::object> request(picojson::object request, int seconds = 180) {
    const std::string id = "r" + std::to_string(++ids_);
    request["id"] = picojson::value(id);
    send(request);
    std::vector<picojson::object> got;
    for (;;) {
      auto line = next(seconds);
      got.push_back(line);
      if (line.empty() || str_field(line, "id") == id) return got;
    }
  }

  // Lines until one satisfies `pred` (the last; an empty object at the end).
  template <class Pred> std::vector<picojson::object> until(Pred pred, int seconds = 180) {
    std::vector<picojson::object> got;
    for (;;) {
      auto line = next(seconds);
      got.push_back(line);
      if (line.empty() || pred(line)) return got;
    }
  }

  std::string transcript() const {
    std::string t;
    for (const auto& l : seen) t += l + "\n";
    return t;
  }

  std::vector<std::string> seen;

private:
  // ccsbd serves peers of its own uid only (SO_PEERCRED, taken at
  // connect) whose namespaces it can read: for a daemon of uid 65534 a
  // dumpable child of that uid connects the socket (the parent reads it
  // once the child said so) and stays alive until the daemon has checked it
  // (the first line).
  void connect() {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(sock_.size() < sizeof a.sun_path);
    std::memcpy(a.sun_path, sock_.c_str(), sock_.size() + 1);
    if (!unprivileged_) {
      REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      hello_ = next(30);
    } else {
      int hold[2], done[2];
      REQUIRE(::pipe2(hold, O_CLOEXEC) == 0);
      REQUIRE(::pipe2(done, O_CLOEXEC) == 0);
      const pid_t c = ::fork();
      REQUIRE(c >= 0);
      if (c == 0) {
        ::close(hold[1]);
        ::close(done[0]);
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0 ||
            ::prctl(PR_SET_DUMPABLE, 1) != 0 || // the uid change cleared it: ccsbd reads the peer's namespaces
            ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
          ::_exit(1);
        (void)!::write(done[1], "c", 1);
        char x;
        while (::read(hold[0], &x, 1) < 0 && errno == EINTR) {
        }
        ::_exit(0);
      }
      ::close(hold[0]);
      ::close(done[1]);
      char x = 0;
      while (::read(done[0], &x, 1) < 0 && errno == EINTR) {
      }
      ::close(done[0]);
      if (x == 'c') hello_ = next(30);
      ::close(hold[1]);
      int st = 0;
      ::waitpid(c, &st, 0);
      INFO(transcript());
      REQUIRE(WIFEXITED(st));
      REQUIRE(WEXITSTATUS(st) == 0);
    }
    INFO(transcript());
    REQUIRE(str_field(hello_, "event") == "hello");
  }

  bool unprivileged_;
  std::string sock_;
  child proc_;
  int fd_{-1};
  std::string buf_;
  picojson::object hello_;
  int ids_{0};
};

// A launch request of a microvm session of the fixture's worktree.
inline picojson::object microvm_launch(const sandbox_fixture& fx, const std::string& session,
                                       std::optional<std::string> accel) {
  picojson::object bind{{"hostPath", picojson::value(fx.work)}};
  picojson::object spec{{"sessionId", picojson::value(session)},
                        {"workspaceId", picojson::value(std::string("ws"))},
                        {"bindMounts", picojson::value(picojson::array{picojson::value(bind)})},
                        {"guestWorkdir", picojson::value(fx.work)}};
  picojson::object q{{"op", picojson::value(std::string("launch"))},
                     {"spec", picojson::value(spec)},
                     {"backend", picojson::value(std::string("microvm"))}};
  if (accel) q["microvmAccel"] = picojson::value(*accel);
  return q;
}

inline picojson::object session_op(const std::string& op, const std::string& session) {
  return {{"op", picojson::value(op)}, {"sessionId", picojson::value(session)}};
}

inline picojson::object exec_op(const std::string& session, const std::vector<std::string>& argv) {
  picojson::array a;
  for (const auto& s : argv) a.push_back(picojson::value(s));
  return {{"op", picojson::value(std::string("exec"))},
          {"sessionId", picojson::value(session)},
          {"argv", picojson::value(a)}};
}

// A field of a nested object ("error" -> "code"), "" when absent.
inline std::string nested(const picojson::object& o, const std::string& outer, const std::string& inner) {
  auto it = o.find(outer);
  if (it == o.end() || !it->second.is<picojson::object>()) return {};
  return str_field(it->second.get<picojson::object>(), inner);
}

} // namespace microvm_test
