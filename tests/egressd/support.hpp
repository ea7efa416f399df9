// tests/egressd/support.hpp — black-box harness for the egressd integration
// tests (N1, N3-N8).
//
// Everything here drives real processes and real sockets:
//   * egressd itself, spawned with fork+exec from an argv vector (no shell),
//     its JSON-line events read from a pipe with poll() and a deadline;
//   * loopback upstreams that count every accepted connection, so a test can
//     assert that a denied request never reached its target;
//   * a UDP DNS server answering A records from a table (or never answering);
//   * `openssl s_server` as a TLS upstream with a throwaway certificate;
//   * real `curl` and raw sockets as clients.
//
// Safety: before the first process or socket is made, the test process moves
// into a private network namespace that holds only loopback. Every child
// (egressd, curl, openssl) inherits it, so a proxy bug that tries to reach
// 169.254.169.254 or a private address fails with ENETUNREACH instead of
// sending a packet off this machine. A host where that is impossible fails
// the test (it does not skip).
//
// Deadlines below only bound waiting so a broken egressd cannot hang ctest;
// no test asserts a duration.
#pragma once

#include <picojson.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ccsb/launch/process.hpp"
#include "ccsb_test/process.hpp"
#include "ccsb_test/temp_dir.hpp"

namespace etest {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Generous bounds for waiting; never asserted.
constexpr int kWaitMs = 10000;
constexpr int kCurlMaxTime = 60; // seconds, passed to curl --max-time

[[noreturn]] inline void fatal(const std::string& what) { throw std::runtime_error(what); }

inline std::string errno_text(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

// ---------------------------------------------------------------------------
// Private network namespace with loopback only.

inline void isolate_network() {
  static bool done = false;
  static std::string failure;
  if (done) {
    if (!failure.empty()) fatal(failure);
    return;
  }
  done = true;
  if (::unshare(CLONE_NEWNET) != 0) {
    failure = errno_text("unshare(CLONE_NEWNET)") +
              " — the egressd tests need a private network namespace so that no packet can leave loopback; run them as "
              "root or with CAP_SYS_ADMIN";
    fatal(failure);
  }
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (s < 0 || ::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    failure = errno_text("SIOCGIFFLAGS lo");
    fatal(failure);
  }
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
    failure = errno_text("SIOCSIFFLAGS lo up");
    fatal(failure);
  }
  ::close(s);
  // Writes to a socket whose peer vanished must not kill the test process.
  ::signal(SIGPIPE, SIG_IGN);
}

// ---------------------------------------------------------------------------
// Small RAII helpers.

// The launcher's descriptor owner (one implementation for library and tests).
using ccsb::launch::unique_fd;

// The tests' one temporary directory type (ccsb_test/temp_dir.hpp).
class temp_dir : public ccsb_test::temp_dir {
public:
  temp_dir() : ccsb_test::temp_dir("ccsb-egressd") {}
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) fatal("cannot write " + path);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline int ms_left(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// ---------------------------------------------------------------------------
// Tools and paths.

inline std::string egressd_path() { return std::string(CCSB_BIN_DIR) + "/egressd"; }
// egressd with --test-attack (egressd/test_attack.hpp; tests only).
inline std::string egressd_attack_path() { return std::string(CCSB_BIN_DIR) + "/egressd-attack"; }

inline void require_egressd() {
  if (::access(egressd_path().c_str(), X_OK) != 0)
    fatal("egressd not found at " + egressd_path() + " (build the egressd target first)");
}

inline std::string find_tool(const std::string& name) {
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  fatal(name + " not found on this host: the egressd tests need it as a real client/peer "
               "(scripts/install-deps.sh installs it)");
}

inline std::vector<std::string> child_env() {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=/nonexistent"};
}

// ---------------------------------------------------------------------------
// Processes: fork + execve of an argv vector.

struct spawn_options {
  int stdin_fd = -1;  // -1: /dev/null
  int stdout_fd = -1; // -1: /dev/null
  int stderr_fd = -1; // -1: /dev/null
  std::vector<std::pair<int, int>> extra_fds; // {source fd in parent, fd number in child}
  rlim_t nofile = 0;  // >0: RLIMIT_NOFILE of the child, soft and hard (so the child cannot raise it)
};

// The tests' one spawn (ccsb_test/process.hpp), inside the private network
// namespace, with child_env().
inline ccsb_test::process_options process_options_of(const std::vector<std::string>& argv, const spawn_options& o) {
  isolate_network();
  ccsb_test::process_options p;
  p.argv = argv;
  p.env = child_env();
  p.stdin_fd = o.stdin_fd;
  p.stdout_fd = o.stdout_fd;
  p.stderr_fd = o.stderr_fd;
  p.inherit = o.extra_fds;
  if (o.nofile) p.rlimits = {{RLIMIT_NOFILE, o.nofile}};
  return p;
}

inline pid_t spawn(const std::vector<std::string>& argv, const spawn_options& o = {}) {
  return ccsb_test::spawn(process_options_of(argv, o));
}

// Waits for pid; returns exit code, 128+signal, or nullopt when the deadline
// passed (the process is then left running).
inline std::optional<int> wait_exit(pid_t pid, int timeout_ms) {
  auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    } else if (r < 0 && errno != EINTR) {
      return std::nullopt;
    }
    if (clock_type::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

inline void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

struct run_result {
  int exit_code = -1; // 128+signal when killed; -1 when it had to be killed at the deadline
  bool timed_out = false;
  std::string out, err;
  std::string describe() const {
    return "exit=" + std::to_string(exit_code) + (timed_out ? " (timed out)" : "") + "\nstdout:\n" + out +
           "\nstderr:\n" + err;
  }
};

// Runs argv to completion with stdout/stderr captured.
inline run_result run(const std::vector<std::string>& argv, int timeout_ms = 120000, spawn_options o = {}) {
  auto done = ccsb_test::run(process_options_of(argv, o), std::chrono::milliseconds(timeout_ms));
  run_result r;
  r.timed_out = done.timed_out;
  r.exit_code = done.timed_out ? -1 : done.term_signal ? 128 + done.term_signal : done.exit_code;
  r.out = std::move(done.out);
  r.err = std::move(done.err);
  return r;
}

// ---------------------------------------------------------------------------
// JSON lines.

struct event {
  std::string line;
  picojson::object obj;
  bool is_json = false;

  std::string str(const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end() || !it->second.is<std::string>()) return {};
    return it->second.get<std::string>();
  }
  bool has(const std::string& key) const { return obj.count(key) != 0; }
  std::string name() const { return str("event"); }
};

inline event parse_event(const std::string& line) {
  event e;
  e.line = line;
  picojson::value v;
  std::string err = picojson::parse(v, line);
  if (err.empty() && v.is<picojson::object>()) {
    e.obj = v.get<picojson::object>();
    e.is_json = true;
  }
  return e;
}

inline std::optional<picojson::object> parse_object(const std::string& text) {
  picojson::value v;
  std::string err = picojson::parse(v, text);
  if (!err.empty() || !v.is<picojson::object>()) return std::nullopt;
  return v.get<picojson::object>();
}

// All string values of a JSON object, recursively (used where the contract
// names a value but not its key).
inline void collect_strings(const picojson::value& v, std::vector<std::string>& out) {
  if (v.is<std::string>()) out.push_back(v.get<std::string>());
  else if (v.is<picojson::object>())
    for (const auto& [k, x] : v.get<picojson::object>()) collect_strings(x, out);
  else if (v.is<picojson::array>())
    for (const auto& x : v.get<picojson::array>()) collect_strings(x, out);
}

// Reads a pipe line by line with deadlines.
class line_reader {
public:
  explicit line_reader(int fd = -1) : fd_(fd) {}
  void reset(int fd) {
    fd_.reset(fd);
    buf_.clear();
    eof_ = false;
  }
  // The next complete line, or nullopt at EOF / deadline.
  std::optional<std::string> next(int timeout_ms) {
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (eof_ || !fd_) return std::nullopt;
      pollfd p{fd_.get(), POLLIN, 0};
      int n = ::poll(&p, 1, ms_left(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      char tmp[8192];
      ssize_t got = ::read(fd_.get(), tmp, sizeof tmp);
      if (got > 0) {
        buf_.append(tmp, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        eof_ = true;
      }
    }
  }
  bool eof() const { return eof_; }
  std::string pending() const { return buf_; }

private:
  unique_fd fd_;
  std::string buf_;
  bool eof_ = false;
};

// ---------------------------------------------------------------------------
// egressd under test.

struct listen_addr {
  std::string text; // as in the ready event
  uint16_t port = 0;
  std::string host; // "127.0.0.1", "::1" or "" for unix
  std::string unix_path;
};

inline listen_addr parse_listen_addr(const std::string& s) {
  listen_addr a;
  a.text = s;
  if (s.rfind("unix:", 0) == 0) {
    a.unix_path = s.substr(5);
    return a;
  }
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return a;
  a.host = s.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  try {
    int p = std::stoi(s.substr(colon + 1));
    if (p > 0 && p < 65536) a.port = static_cast<uint16_t>(p);
  } catch (...) {
  }
  return a;
}

// egressd confines itself after start-up (X3): a system call missing from
// its seccomp allowlist fails with EPERM and leaves one "egressd: seccomp:
// denied system call ..." line on its stderr. Every egressd a test starts is
// checked for such lines when it is destroyed, and each is reported here:
// test_confine.cpp makes it a test failure, so a missing call shows up in
// whichever test reaches it.
inline std::function<void(const std::string&)>& seccomp_denial_hook() {
  static std::function<void(const std::string&)> hook = [](const std::string& text) {
    std::fprintf(stderr, "%s", text.c_str());
  };
  return hook;
}

// The "confinement" object of a ready event (empty when absent).
inline picojson::object confinement_of(const picojson::object& ready) {
  auto it = ready.find("confinement");
  if (it == ready.end() || !it->second.is<picojson::object>()) return {};
  return it->second.get<picojson::object>();
}

class egressd {
public:
  struct options {
    bool expect_ready = true;
    bool expect_seccomp_denials = false; // the test provokes denials on purpose (test_confine.cpp)
    std::vector<std::string> exec_through; // a program that execs egressd with its arguments (setpriv ... --)
    std::string binary;                    // egressd to run; empty: egressd_path()
    rlim_t nofile = 0;
    bool events_on_fd3 = false; // pass "--events 3" and read fd 3; stdout goes to a file
    std::vector<std::pair<int, int>> extra_fds; // {fd here, fd number in egressd}
  };

  explicit egressd(std::vector<std::string> args) : egressd(std::move(args), options{}) {}
  egressd(std::vector<std::string> args, options o) : args_(std::move(args)), expect_denials_(o.expect_seccomp_denials) {
    require_egressd();
    std::vector<std::string> argv = o.exec_through;
    argv.push_back(o.binary.empty() ? egressd_path() : o.binary);
    argv.insert(argv.end(), args_.begin(), args_.end());
    if (o.events_on_fd3) {
      argv.push_back("--events");
      argv.push_back("3");
    }
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) fatal(errno_text("pipe2"));
    err_path_ = dir_.file("egressd.stderr");
    out_path_ = dir_.file("egressd.stdout");
    unique_fd err(::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    unique_fd stdout_file(::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    spawn_options so;
    if (o.events_on_fd3) {
      so.stdout_fd = stdout_file.get();
      so.extra_fds.push_back({out[1], 3});
    } else {
      so.stdout_fd = out[1];
    }
    so.stderr_fd = err.get();
    so.nofile = o.nofile;
    for (auto m : o.extra_fds) so.extra_fds.push_back(m);
    pid_ = spawn(argv, so);
    ::close(out[1]);
    events_.reset(out[0]);
    if (o.expect_ready) wait_ready();
  }
  ~egressd() {
    kill_and_reap(pid_);
    if (expect_denials_) return;
    std::string denials;
    std::istringstream in(stderr_text());
    for (std::string line; std::getline(in, line);)
      if (line.find("egressd: seccomp: denied") != std::string::npos) denials += line + "\n";
    if (!denials.empty())
      seccomp_denial_hook()("egressd " + join_args() + "\nhit system calls missing from its seccomp allowlist:\n" +
                            denials);
  }
  egressd(const egressd&) = delete;
  egressd& operator=(const egressd&) = delete;

  pid_t pid() const { return pid_; }
  const listen_addr& http() const { return http_; }
  const listen_addr& socks() const { return socks_; }
  uint16_t http_port() const { return http_.port; }
  uint16_t socks_port() const { return socks_.port; }
  const event& ready() const { return ready_; }
  std::string stderr_text() const { return read_file(err_path_); }
  // What egressd wrote to stdout when events went elsewhere (events_on_fd3).
  std::string stdout_text() const { return read_file(out_path_); }
  std::string describe() const { return "egressd " + join_args() + "\nstderr:\n" + stderr_text(); }

  // The next event line (JSON or not), or nullopt at EOF / deadline.
  std::optional<event> next_event(int timeout_ms = kWaitMs) {
    auto line = events_.next(timeout_ms);
    if (!line) return std::nullopt;
    event e = parse_event(*line);
    seen_.push_back(e);
    return e;
  }

  // Events already received plus any that arrive before the deadline and match.
  std::optional<event> wait_for(const std::function<bool(const event&)>& pred, int timeout_ms = kWaitMs) {
    for (std::size_t i = consumed_; i < seen_.size(); ++i)
      if (pred(seen_[i])) return seen_[i];
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto e = next_event(ms_left(deadline));
      if (!e) return std::nullopt;
      if (pred(*e)) return e;
    }
  }

  // A violation for exactly this target ("host:port").
  std::optional<event> wait_violation(const std::string& target, int timeout_ms = kWaitMs) {
    return wait_for([&](const event& e) { return e.name() == "violation" && e.str("target") == target; },
                    timeout_ms);
  }
  std::optional<event> wait_any_violation(int timeout_ms = kWaitMs) {
    return wait_for([&](const event& e) { return e.name() == "violation"; }, timeout_ms);
  }
  // Forget events seen so far for later wait_for calls.
  void mark() {
    drain(0);
    consumed_ = seen_.size();
  }
  // Reads whatever is available within timeout_ms.
  void drain(int timeout_ms) {
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    while (next_event(ms_left(deadline))) {
    }
  }
  const std::vector<event>& seen() const { return seen_; }
  // Reads events until `n` received since the last mark() match pred (bounded); returns the count.
  std::size_t count_until(const std::function<bool(const event&)>& pred, std::size_t n, int timeout_ms = kWaitMs) {
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      std::size_t c = 0;
      for (std::size_t i = consumed_; i < seen_.size(); ++i)
        if (pred(seen_[i])) ++c;
      if (c >= n || !next_event(ms_left(deadline))) return c;
    }
  }
  std::size_t violations_since_mark() {
    drain(0);
    std::size_t n = 0;
    for (std::size_t i = consumed_; i < seen_.size(); ++i)
      if (seen_[i].name() == "violation") ++n;
    return n;
  }
  std::string seen_text() const {
    std::string s;
    for (const auto& e : seen_) s += e.line + "\n";
    return s;
  }

  // Sends sig and waits for the exit status (nullopt: still running at the deadline).
  std::optional<int> signal_and_wait(int sig, int timeout_ms = kWaitMs) {
    ::kill(pid_, sig);
    return wait_exit_status(timeout_ms);
  }
  std::optional<int> wait_exit_status(int timeout_ms = kWaitMs) {
    auto code = wait_exit(pid_, timeout_ms);
    if (code) pid_ = -1;
    return code;
  }
  bool alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0 && !is_zombie(); }

  std::size_t fd_count() const {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      ++n;
    return n;
  }
  // utime + stime of the process so far, in clock ticks (/proc/PID/stat).
  long long cpu_ticks() const {
    std::string st = read_file("/proc/" + std::to_string(pid_) + "/stat");
    auto rp = st.rfind(')');
    if (rp == std::string::npos) return -1;
    std::istringstream ss(st.substr(rp + 2));
    std::string field;
    long long utime = -1, stime = -1;
    // Fields after the command: 3 state ... 14 utime, 15 stime.
    for (int i = 3; i <= 15 && ss >> field; ++i) {
      if (i == 14) utime = std::atoll(field.c_str());
      if (i == 15) stime = std::atoll(field.c_str());
    }
    return utime < 0 || stime < 0 ? -1 : utime + stime;
  }
  // Lines egressd wrote to stderr so far.
  std::size_t stderr_lines() const {
    std::string t = stderr_text();
    return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
  }
  long rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
  }

private:
  bool is_zombie() const {
    std::string st = read_file("/proc/" + std::to_string(pid_) + "/stat");
    auto rp = st.rfind(')');
    return rp != std::string::npos && rp + 2 < st.size() && st[rp + 2] == 'Z';
  }
  std::string join_args() const {
    std::string s;
    for (const auto& a : args_) s += "'" + a + "' ";
    return s;
  }
  void wait_ready() {
    auto line = events_.next(kWaitMs);
    if (!line) {
      auto code = wait_exit(pid_, 200);
      if (code) pid_ = -1;
      fatal("egressd printed no ready event (exit: " + (code ? std::to_string(*code) : std::string("still running")) +
            ")\n" + describe());
    }
    ready_ = parse_event(*line);
    seen_.push_back(ready_);
    consumed_ = seen_.size();
    if (!ready_.is_json || ready_.name() != "ready")
      fatal("the first line of egressd is not a ready event: " + *line + "\n" + describe());
    http_ = parse_listen_addr(ready_.str("http"));
    socks_ = parse_listen_addr(ready_.str("socks"));
    // Unless a test chose its layers, egressd runs confined (X3): every test
    // of the suite is then also a test of the confinement.
    bool chose = std::find_if(args_.begin(), args_.end(), [](const std::string& a) {
                   return a == "--no-confine" || a.rfind("--confine", 0) == 0;
                 }) != args_.end();
    if (!chose) {
      auto c = confinement_of(ready_.obj);
      auto str = [&](const char* k) {
        auto it = c.find(k);
        return it != c.end() && it->second.is<std::string>() ? it->second.get<std::string>() : std::string();
      };
      auto it = c.find("noNewPrivs");
      bool nnp = it != c.end() && it->second.is<bool>() && it->second.get<bool>();
      bool landlock = str("landlockStatus") == "applied" || str("landlockStatus").rfind("unavailable", 0) == 0;
      if (!nnp || str("seccomp") != "allowlist" || !landlock || str("capabilities") != "none")
        fatal("egressd did not confine itself by default: " + ready_.line + "\n" + describe());
    }
  }

  std::vector<std::string> args_;
  bool expect_denials_ = false;
  temp_dir dir_;
  std::string err_path_, out_path_;
  pid_t pid_ = -1;
  line_reader events_;
  event ready_;
  listen_addr http_, socks_;
  std::vector<event> seen_;
  std::size_t consumed_ = 0;
};

// The usual test configuration: loopback listeners, no baseline, one
// allowlisted test name that resolves to 127.0.0.1 and one resolvable name
// that is not allowlisted.
inline std::vector<std::string> std_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"--http-listen",  "127.0.0.1:0",       "--socks-listen", "127.0.0.1:0",
                             "--no-baseline",  "--allow-upstream",  "127.0.0.0/8",    "--allow",
                             "allowed.test",   "--resolve",         "allowed.test=127.0.0.1",
                             "--resolve",      "other.test=127.0.0.1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// ---------------------------------------------------------------------------
// Sockets.

inline void set_timeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

inline unique_fd tcp_connect(uint16_t port, const std::string& host = "127.0.0.1") {
  isolate_network();
  bool v6 = host.find(':') != std::string::npos;
  unique_fd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fatal(errno_text("socket"));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc;
  if (v6) {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    ::inet_pton(AF_INET6, host.c_str(), &sa.sin6_addr);
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  if (rc != 0) fatal(errno_text(("connect " + host + ":" + std::to_string(port)).c_str()));
  set_timeouts(fd.get(), kWaitMs);
  return fd;
}

inline unique_fd unix_connect(const std::string& path) {
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    fatal(errno_text(("connect unix:" + path).c_str()));
  set_timeouts(fd.get(), kWaitMs);
  return fd;
}

// Connects to a listener from a ready event (TCP or unix).
inline unique_fd connect_to(const listen_addr& a) {
  if (!a.unix_path.empty()) return unix_connect(a.unix_path);
  return tcp_connect(a.port, a.host.empty() ? "127.0.0.1" : a.host);
}

// A port on 127.0.0.1 where nothing listens (bound once, then closed).
inline uint16_t closed_port(const std::string& host = "127.0.0.1") {
  isolate_network();
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until `want` bytes, EOF, error or deadline.
inline std::string recv_n(int fd, std::size_t want, int timeout_ms = kWaitMs) {
  std::string out;
  auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < want) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, want - out.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

struct eof_result {
  std::string data;
  bool eof = false;   // orderly EOF
  bool reset = false; // ECONNRESET or other error
};

inline eof_result recv_to_eof(int fd, int timeout_ms = kWaitMs) {
  eof_result r;
  auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return r;
    char buf[65536];
    ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) {
      r.eof = true;
      return r;
    }
    if (got < 0) {
      r.reset = true;
      return r;
    }
    r.data.append(buf, static_cast<std::size_t>(got));
  }
}

// True when the peer closed (EOF or reset) before the deadline.
inline bool peer_closes(int fd, int timeout_ms = kWaitMs) {
  auto r = recv_to_eof(fd, timeout_ms);
  return r.eof || r.reset;
}

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct http_response {
  int status = -1; // -1: no parsable status line (closed, reset or garbage)
  std::string status_line;
  std::multimap<std::string, std::string> headers; // lower-case names
  std::string body;
  std::string raw;
  bool closed = false; // connection closed while/after reading
  std::string header(const std::string& name) const {
    auto it = headers.find(lower(name));
    return it == headers.end() ? std::string() : it->second;
  }
};

// Reads one response. head_only: stop after the blank line (CONNECT);
// otherwise read a Content-Length body, or to EOF when there is none.
inline http_response read_response(int fd, bool head_only = false, int timeout_ms = kWaitMs) {
  http_response r;
  auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  std::string buf;
  std::size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char c[4096];
    // Byte-exact: peek, then consume only up to the end of the head.
    ssize_t got = ::recv(fd, c, sizeof c, MSG_PEEK);
    if (got <= 0) {
      r.closed = true;
      break;
    }
    std::string view = buf + std::string(c, static_cast<std::size_t>(got));
    auto e = view.find("\r\n\r\n");
    std::size_t take = static_cast<std::size_t>(got);
    if (e != std::string::npos) {
      take = e + 4 - buf.size();
      head_end = e + 4;
    }
    ssize_t done = ::recv(fd, c, take, 0);
    if (done <= 0) {
      r.closed = true;
      break;
    }
    buf.append(c, static_cast<std::size_t>(done));
    if (buf.size() > (1u << 20)) break;
  }
  r.raw = buf;
  auto eol = buf.find("\r\n");
  r.status_line = buf.substr(0, eol);
  if (r.status_line.rfind("HTTP/1.", 0) == 0 && r.status_line.size() >= 12) {
    try {
      r.status = std::stoi(r.status_line.substr(9, 3));
    } catch (...) {
    }
  }
  if (head_end != std::string::npos && eol != std::string::npos) {
    std::size_t pos = eol + 2;
    while (pos < head_end - 2) {
      auto e = buf.find("\r\n", pos);
      std::string line = buf.substr(pos, e - pos);
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
        r.headers.emplace(lower(line.substr(0, colon)), v);
      }
      pos = e + 2;
    }
  }
  if (head_only || r.status < 0 || r.closed) return r;
  auto cl = r.header("content-length");
  if (!cl.empty()) {
    r.body = recv_n(fd, std::stoul(cl), ms_left(deadline));
  } else if (r.status != 204 && r.status != 304 && !(r.status >= 100 && r.status < 200)) {
    auto rest = recv_to_eof(fd, ms_left(deadline));
    r.body = rest.data;
    r.closed = rest.eof || rest.reset;
  }
  return r;
}

// Sends "CONNECT authority HTTP/1.1" with a matching Host header and reads the reply head.
inline http_response http_connect(int fd, const std::string& authority, const std::string& host_header = "") {
  std::string req = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + (host_header.empty() ? authority : host_header) +
                    "\r\n\r\n";
  send_all(fd, req);
  return read_response(fd, true);
}

// ---------------------------------------------------------------------------
// SOCKS5 (RFC 1928), raw.

namespace socks {
constexpr uint8_t kConnect = 1, kBind = 2, kUdpAssociate = 3;
constexpr uint8_t kIPv4 = 1, kDomain = 3, kIPv6 = 4;

struct reply {
  int code = -1; // REP byte; -1: connection closed or garbage
  std::string raw;
};

// Greeting offering "no authentication"; returns the chosen method or -1.
inline int greet(int fd, std::string methods = std::string(1, '\0')) {
  std::string g;
  g += '\x05';
  g += static_cast<char>(methods.size());
  g += methods;
  if (!send_all(fd, g)) return -1;
  std::string r = recv_n(fd, 2);
  if (r.size() != 2 || r[0] != 5) return -1;
  return static_cast<uint8_t>(r[1]);
}

inline std::string port_bytes(uint16_t port) {
  return std::string{static_cast<char>(port >> 8), static_cast<char>(port & 0xff)};
}

inline std::string domain_addr(const std::string& name) {
  std::string a;
  a += static_cast<char>(kDomain);
  a += static_cast<char>(name.size());
  a += name;
  return a;
}
inline std::string ipv4_addr(const std::string& dotted) {
  in_addr a{};
  ::inet_pton(AF_INET, dotted.c_str(), &a);
  std::string s(1, static_cast<char>(kIPv4));
  s.append(reinterpret_cast<const char*>(&a), 4);
  return s;
}
inline std::string ipv6_addr(const std::string& text) {
  in6_addr a{};
  ::inet_pton(AF_INET6, text.c_str(), &a);
  std::string s(1, static_cast<char>(kIPv6));
  s.append(reinterpret_cast<const char*>(&a), 16);
  return s;
}

// Sends a request (VER CMD RSV ATYP ADDR PORT) and reads the whole reply.
inline reply request(int fd, uint8_t cmd, const std::string& atyp_addr, uint16_t port) {
  std::string req{'\x05', static_cast<char>(cmd), '\x00'};
  req += atyp_addr;
  req += port_bytes(port);
  reply r;
  if (!send_all(fd, req)) return r;
  r.raw = recv_n(fd, 4);
  if (r.raw.size() < 4 || r.raw[0] != 5) return r;
  std::size_t rest = 0;
  switch (static_cast<uint8_t>(r.raw[3])) {
  case kIPv4: rest = 4 + 2; break;
  case kIPv6: rest = 16 + 2; break;
  case kDomain: {
    std::string l = recv_n(fd, 1);
    rest = (l.empty() ? 0 : static_cast<uint8_t>(l[0])) + 2;
    r.raw += l;
    break;
  }
  default: break;
  }
  r.raw += recv_n(fd, rest);
  r.code = static_cast<uint8_t>(r.raw[1]);
  return r;
}

// Greeting + CONNECT to a domain name.
inline reply connect_name(int fd, const std::string& name, uint16_t port) {
  if (greet(fd) != 0) return {};
  return request(fd, kConnect, domain_addr(name), port);
}
} // namespace socks

// ---------------------------------------------------------------------------
// Loopback upstream: thread per connection, counts accepted connections.

class upstream {
public:
  enum class mode {
    echo,        // echoes every byte until EOF
    http,        // HTTP/1.1 server, records request heads, keep-alive
    half_close,  // reads to EOF, then replies "received N bytes\n" and closes
    shut_first,  // sends "bye\n", shuts down its write side, records what it reads until EOF
    reset_mid,   // HTTP: promises 1 MiB, sends part of it, then resets the connection
    silent,      // accepts and never sends; holds until the client closes
  };

  explicit upstream(mode m, const std::string& bind_host = "127.0.0.1") : mode_(m) {
    isolate_network();
    bool v6 = bind_host.find(':') != std::string::npos;
    lfd_.reset(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(lfd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
      sockaddr_in6 sa{};
      sa.sin6_family = AF_INET6;
      ::inet_pton(AF_INET6, bind_host.c_str(), &sa.sin6_addr);
      rc = ::bind(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      socklen_t len = sizeof sa;
      ::getsockname(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
      port_ = ntohs(sa.sin6_port);
    } else {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      ::inet_pton(AF_INET, bind_host.c_str(), &sa.sin_addr);
      rc = ::bind(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      socklen_t len = sizeof sa;
      ::getsockname(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
      port_ = ntohs(sa.sin_port);
    }
    if (rc != 0 || ::listen(lfd_.get(), 4096) != 0) fatal(errno_text("upstream bind/listen"));
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~upstream() {
    stop_ = true;
    acceptor_.join();
    std::vector<std::thread> workers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
      workers.swap(workers_);
    }
    for (auto& t : workers) t.join();
  }

  uint16_t port() const { return port_; }
  int accepts() const { return accepts_.load(); }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::string after_shutdown() const {
    std::lock_guard<std::mutex> lock(mu_);
    return after_shutdown_;
  }
  // Waits until `n` connections have finished being served (bounded).
  bool wait_finished(int n, int timeout_ms = kWaitMs) const {
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    while (finished_.load() < n) {
      if (clock_type::now() >= deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }

private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{lfd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++accepts_;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.push_back(fd);
      workers_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void finish(int fd, bool rst = false) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns_.erase(std::remove(conns_.begin(), conns_.end(), fd), conns_.end());
    }
    if (rst) {
      linger l{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd);
    ++finished_;
  }

  void serve(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[65536];
    switch (mode_) {
    case mode::echo:
      for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0 || !send_all(fd, std::string_view(buf, static_cast<std::size_t>(n)))) break;
      }
      return finish(fd);
    case mode::half_close: {
      std::size_t total = 0;
      for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        total += static_cast<std::size_t>(n);
      }
      send_all(fd, "received " + std::to_string(total) + " bytes\n");
      return finish(fd);
    }
    case mode::shut_first: {
      send_all(fd, "bye\n");
      ::shutdown(fd, SHUT_WR);
      std::string got;
      for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, static_cast<std::size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        after_shutdown_ += got;
      }
      return finish(fd);
    }
    case mode::silent:
      while (::recv(fd, buf, sizeof buf, 0) > 0) {
      }
      return finish(fd);
    case mode::http:
    case mode::reset_mid: serve_http(fd); return;
    }
  }

  void serve_http(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      auto end = in.find("\r\n\r\n");
      while (end == std::string::npos) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return finish(fd);
        in.append(buf, static_cast<std::size_t>(n));
        end = in.find("\r\n\r\n");
      }
      std::string head = in.substr(0, end + 4);
      in.erase(0, end + 4);
      std::string lhead = lower(head);
      std::size_t body_len = 0;
      auto cl = lhead.find("\r\ncontent-length:");
      if (cl != std::string::npos) body_len = std::strtoul(lhead.c_str() + cl + 17, nullptr, 10);
      while (in.size() < body_len) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return finish(fd);
        in.append(buf, static_cast<std::size_t>(n));
      }
      std::string body_in = in.substr(0, body_len);
      in.erase(0, body_len);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(head + body_in);
      }
      if (mode_ == mode::reset_mid) {
        std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + std::string(4096, 'x');
        send_all(fd, resp);
        std::this_thread::sleep_for(20ms);
        return finish(fd, true);
      }
      std::string path = head.substr(0, head.find("\r\n"));
      std::string body = "upstream-ok " + path + "\n";
      std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Upstream: ccsb-test\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body;
      if (!send_all(fd, resp)) return finish(fd);
      if (lhead.find("\r\nconnection: close") != std::string::npos) return finish(fd);
    }
  }

  mode mode_;
  unique_fd lfd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepts_{0};
  std::atomic<int> finished_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
  std::vector<std::string> requests_;
  std::string after_shutdown_;
};

// ---------------------------------------------------------------------------
// Scripted HTTP upstream: answers every request head it parses with fixed
// bytes, records every head (with its Content-Length body) it sees, and
// counts connections. After answering it either closes (the response is then
// close-delimited when it has no framing) or keeps parsing the same stream
// like a server that ignores "Connection: close": whatever follows the first
// request is read as further requests, so a smuggled request shows up in
// requests().

class scripted_upstream {
public:
  enum class after { close, keep_reading };

  explicit scripted_upstream(std::string response, after a = after::close)
      : response_(std::move(response)), after_(a) {
    isolate_network();
    lfd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(lfd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (::bind(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(lfd_.get(), 128) != 0)
      fatal(errno_text("scripted upstream bind/listen"));
    socklen_t len = sizeof sa;
    ::getsockname(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~scripted_upstream() {
    stop_ = true;
    thread_.join();
  }
  scripted_upstream(const scripted_upstream&) = delete;
  scripted_upstream& operator=(const scripted_upstream&) = delete;

  uint16_t port() const { return port_; }
  int accepts() const { return accepts_.load(); }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

private:
  // One connection at a time is enough for these tests; each is served to EOF.
  void loop() {
    while (!stop_) {
      pollfd p{lfd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      unique_fd fd(::accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd) continue;
      ++accepts_;
      set_timeouts(fd.get(), kWaitMs);
      serve(fd.get());
    }
  }
  void serve(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      auto end = in.find("\r\n\r\n");
      while (end == std::string::npos) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<std::size_t>(n));
        end = in.find("\r\n\r\n");
      }
      std::string head = in.substr(0, end + 4);
      in.erase(0, end + 4);
      std::string lhead = head;
      for (auto& c : lhead) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::size_t body_len = 0;
      auto cl = lhead.find("\r\ncontent-length:");
      if (cl != std::string::npos) body_len = std::strtoul(lhead.c_str() + cl + 17, nullptr, 10);
      while (in.size() < body_len) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
      std::size_t take = std::min(body_len, in.size());
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(head + in.substr(0, take));
      }
      in.erase(0, take);
      if (!send_all(fd, response_) || after_ == after::close) return;
    }
  }

  std::string response_;
  after after_;
  unique_fd lfd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepts_{0};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
};

// ---------------------------------------------------------------------------
// UDP DNS server on 127.0.0.1: A records from a table; AAAA queries get an
// empty NOERROR answer; unknown names NXDOMAIN; or never answers at all.

class dns_server {
public:
  // held: queries are kept unanswered until release() (a lookup the test
  // knows is in flight).
  dns_server(std::map<std::string, std::vector<std::string>> a_records, bool never_answer = false, bool held = false)
      : table_(std::move(a_records)), never_(never_answer), held_(held) {
    isolate_network();
    fd_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fatal(errno_text("dns bind"));
    socklen_t len = sizeof sa;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~dns_server() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  int queries() const { return queries_.load(); }
  // Waits (bounded) until n queries arrived.
  bool wait_queries(int n, int timeout_ms = kWaitMs) const {
    auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    while (queries_.load() < n) {
      if (clock_type::now() >= deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }
  void release() { held_ = false; }

private:
  struct query {
    std::vector<unsigned char> q;
    sockaddr_storage from{};
    socklen_t flen = 0;
  };
  void loop() {
    std::vector<query> pending;
    while (!stop_) {
      if (!held_ && !pending.empty()) {
        for (auto& x : pending) answer(x.q.data(), static_cast<ssize_t>(x.q.size()), x.from, x.flen);
        pending.clear();
      }
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      unsigned char q[1500];
      sockaddr_storage from{};
      socklen_t flen = sizeof from;
      ssize_t n = ::recvfrom(fd_.get(), q, sizeof q, 0, reinterpret_cast<sockaddr*>(&from), &flen);
      if (n < 12) continue;
      ++queries_;
      if (never_) continue;
      if (held_) {
        pending.push_back({std::vector<unsigned char>(q, q + n), from, flen});
        continue;
      }
      answer(q, n, from, flen);
    }
  }
  void answer(const unsigned char* q, ssize_t n, sockaddr_storage& from, socklen_t flen) {
    {
      // Question: QNAME labels, QTYPE, QCLASS.
      std::size_t pos = 12;
      std::string name;
      while (pos < static_cast<std::size_t>(n) && q[pos] != 0) {
        std::size_t l = q[pos];
        if (pos + 1 + l >= static_cast<std::size_t>(n)) break;
        if (!name.empty()) name += '.';
        name.append(reinterpret_cast<const char*>(q + pos + 1), l);
        pos += 1 + l;
      }
      pos += 1;
      if (pos + 4 > static_cast<std::size_t>(n)) return;
      uint16_t qtype = static_cast<uint16_t>(q[pos] << 8 | q[pos + 1]);
      std::size_t qend = pos + 4;
      auto it = table_.find(lower(name));
      std::vector<unsigned char> r(q, q + qend);
      r[2] = static_cast<unsigned char>(0x84 | (q[2] & 0x01)); // QR, AA, RD copied
      r[3] = static_cast<unsigned char>(0x80 | (it == table_.end() ? 3 : 0)); // RA, NXDOMAIN?
      r[4] = 0;
      r[5] = 1;
      r[6] = r[7] = r[8] = r[9] = r[10] = r[11] = 0;
      std::size_t answers = 0;
      if (it != table_.end() && qtype == 1) {
        for (const auto& ip : it->second) {
          in_addr a{};
          ::inet_pton(AF_INET, ip.c_str(), &a);
          unsigned char rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};
          r.insert(r.end(), rr, rr + sizeof rr);
          auto* b = reinterpret_cast<unsigned char*>(&a);
          r.insert(r.end(), b, b + 4);
          ++answers;
        }
      }
      r[7] = static_cast<unsigned char>(answers);
      ::sendto(fd_.get(), r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), flen);
    }
  }

  std::map<std::string, std::vector<std::string>> table_;
  bool never_;
  std::atomic<bool> held_{false};
  unique_fd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> queries_{0};
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// TLS upstream: `openssl s_server -www` with a throwaway self-signed cert
// for allowed.test.

class tls_upstream {
public:
  tls_upstream() {
    std::string openssl = find_tool("openssl");
    cert_ = dir_.file("cert.pem");
    std::string key = dir_.file("key.pem");
    auto gen = run({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert_, "-days", "2", "-subj", "/CN=allowed.test", "-addext",
                    "subjectAltName=DNS:allowed.test"});
    if (gen.exit_code != 0) fatal("openssl req failed: " + gen.describe());
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) fatal(errno_text("pipe2"));
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) fatal(errno_text("pipe2"));
    spawn_options so;
    so.stdout_fd = out[1];
    so.stdin_fd = in[0]; // kept open: s_server quits on stdin EOF in some modes
    pid_ = spawn({openssl, "s_server", "-accept", "127.0.0.1:0", "-cert", cert_, "-key", key, "-www"}, so);
    ::close(out[1]);
    ::close(in[0]);
    stdin_.reset(in[1]);
    line_reader lr(out[0]);
    for (;;) {
      auto line = lr.next(kWaitMs);
      if (!line) fatal("openssl s_server printed no ACCEPT line");
      if (line->rfind("ACCEPT", 0) == 0) {
        port_ = parse_listen_addr(line->substr(7)).port;
        break;
      }
    }
    out_ = std::move(lr);
  }
  ~tls_upstream() { kill_and_reap(pid_); }
  uint16_t port() const { return port_; }
  const std::string& cert() const { return cert_; }

private:
  temp_dir dir_;
  std::string cert_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  unique_fd stdin_;
  line_reader out_;
};

// ---------------------------------------------------------------------------
// curl.

struct curl_result {
  run_result run;
  std::string body;
  int http_code = -1;    // %{http_code}
  int connect_code = -1; // %{http_connect}: the proxy's reply to CONNECT
  int exit_code() const { return run.exit_code; }
  std::string describe() const {
    return "curl exit=" + std::to_string(run.exit_code) + " http_code=" + std::to_string(http_code) +
           " http_connect=" + std::to_string(connect_code) + "\nbody:\n" + body + "\nstderr:\n" + run.err;
  }
};

inline curl_result curl(std::vector<std::string> args) {
  std::vector<std::string> argv{find_tool("curl"), "-q", "-sS", "--max-time", std::to_string(kCurlMaxTime),
                                "-w", "\nCCSB-CODES %{http_code} %{http_connect}\n"};
  argv.insert(argv.end(), args.begin(), args.end());
  curl_result r;
  r.run = run(argv, (kCurlMaxTime + 30) * 1000);
  auto m = r.run.out.rfind("\nCCSB-CODES ");
  if (m != std::string::npos) {
    r.body = r.run.out.substr(0, m);
    std::istringstream ss(r.run.out.substr(m + 12));
    ss >> r.http_code >> r.connect_code;
  } else {
    r.body = r.run.out;
  }
  return r;
}

// The decimal port of any upstream stand-in (upstream, scripted_upstream, ...).
template <class Upstream> std::string port_of(const Upstream& u) { return std::to_string(u.port()); }

inline std::string http_proxy_url(const egressd& e) { return "http://127.0.0.1:" + std::to_string(e.http_port()); }
inline std::string socks_proxy(const egressd& e) { return "127.0.0.1:" + std::to_string(e.socks_port()); }

// A complete request through the proxy on a fresh connection, as a liveness probe.
inline bool proxy_still_serves(const egressd& e, const upstream& up) {
  auto fd = tcp_connect(e.http_port());
  auto r = http_connect(fd.get(), "allowed.test:" + std::to_string(up.port()));
  if (r.status != 200) return false;
  return true;
}

} // namespace etest
