// daemon_bench — what does a warm exec cost through ccsbd (S8), next to the
// in-process session API (S7)?
//
// One run, side by side, the same command (/bin/true) timed from the request
// to its exit:
//   (a) fork+exec      fork, execv and waitpid of /bin/true (the floor)
//   (b) in-process     session::exec in a warm session of this process, until
//                      its exit event (the session API a C++ server embeds)
//   (c) ccsbd, C++     a client of a ccsbd this bench starts: the exec request
//                      written to the socket until the `exit` event's line is
//                      read and parsed (picojson)
//   (d) ccsbd, Python  bench/launch/daemon_client.py (the standard library's
//                      socket and json), timed inside the client the same way
// The cases go round robin in rounds of --batch execs each, so a neighbour's
// load falls on all of them alike. Each case prints p50/p90/p99 and its p50
// against (b); "daemon share" is (c) - (b): what the daemon path adds over
// the in-process API (issue 28 item 10: at most 0.5 ms at p50).
//
//   daemon_bench [--runs N] [--batch K] [--profile dispatch|spec] [--python PATH]
// The sessions bind one scratch directory (owned by 65534 under a root
// launcher, as a server hands a worktree to its agent). Not run by ctest.
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/linux/host_probe.hpp"
#include "ccsb/launch/request_builder.hpp"
#include "ccsb/launch/session.hpp"

#include <picojson.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef CCSB_BIN_DIR
#define CCSB_BIN_DIR "."
#endif
#ifndef CCSB_BENCH_SOURCE_DIR
#define CCSB_BENCH_SOURCE_DIR "."
#endif

namespace {

namespace L = ccsb::launch;
using clk = std::chrono::steady_clock;

double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "daemon_bench: %s\n", why.c_str());
  std::exit(1);
}

pid_t spawn(const std::vector<std::string>& argv, int in, int out, int err) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) ::dup2(out, 1);
    if (err >= 0) ::dup2(err, 2);
    ::execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

// Time on a CPU, ns, of a process's main thread (ccsbd has one thread) or of
// this thread (/proc/thread-self): the scheduler's own account, so a busy
// machine stretches the latencies above but not these.
std::uint64_t oncpu_ns(const std::string& proc) {
  std::FILE* f = std::fopen((proc + "/schedstat").c_str(), "r");
  unsigned long long ns = 0;
  if (!f || std::fscanf(f, "%llu", &ns) != 1) die("cannot read " + proc + "/schedstat");
  std::fclose(f);
  return ns;
}

double fork_exec_true() {
  static const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  auto t = clk::now();
  pid_t pid = spawn({"/bin/true"}, -1, null, null);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return ms_since(t);
}

// (b): a warm session of this process, built as ccsbd builds its sessions.
struct in_process {
  L::reactor r;
  std::unique_ptr<L::session> s;
  std::size_t events{0};

  in_process(const std::string& work, ccsb::profile prof) {
    const ccsb::probe_result native = ccsb::probe_native(L::gather_probe_facts(L::unshare_check::skip));
    ccsb::sandbox_spec spec;
    spec.session_id = "bench-inproc-" + std::to_string(::getpid());
    spec.workspace_id = "bench";
    spec.bind_mounts.push_back({work, work, false});
    spec.guest_workdir = work;
    L::request_inputs in;
    in.spec = spec;
    in.prof = prof;
    L::session_request rq;
    rq.egressd_path = std::string(CCSB_BIN_DIR) + "/egressd";
    rq.init_path = std::string(CCSB_BIN_DIR) + "/ccsb-init";
    rq.landlock_abi = native.landlock_abi;
    auto built = L::build_session_request(std::move(in), std::move(rq), L::gather_host_facts());
    if (!built) die("in-process request: " + built.err().what());
    L::session_callbacks cb;
    cb.event = [this](const ccsb::sandbox_event&) { ++events; };
    auto x = L::session::launch(r, std::move(built->request), std::move(cb));
    if (!x) die("in-process launch: " + x.err().what());
    s = std::move(*x);
  }

  double exec_true() {
    auto t = clk::now();
    auto id = s->exec({"/bin/true"}, {});
    if (!id) die("in-process exec: " + id.err().what());
    (void)r.run_until([&] { return s->finished(*id); });
    const double ms = ms_since(t);
    if (s->exit_code(*id).value_or(-1) != 0) die("in-process: /bin/true failed");
    return ms;
  }
};

// A line-reading client of the socket (blocking).
class line_socket {
public:
  explicit line_socket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    for (int i = 0; ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
      if (i > 2000) die("cannot connect to ccsbd at " + path + ": " + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~line_socket() { ::close(fd_); }

  void send(const std::string& line) {
    std::string l = line + "\n";
    for (std::size_t off = 0; off < l.size();) {
      ssize_t n = ::write(fd_, l.data() + off, l.size() - off);
      if (n <= 0) die("write to ccsbd failed");
      off += static_cast<std::size_t>(n);
    }
  }

  picojson::object next() {
    std::size_t nl;
    while ((nl = buf_.find('\n')) == std::string::npos) {
      char b[65536];
      ssize_t n = ::read(fd_, b, sizeof b);
      if (n <= 0) die("ccsbd closed the connection");
      buf_.append(b, static_cast<std::size_t>(n));
    }
    picojson::value v;
    const std::string err = picojson::parse(v, buf_.substr(0, nl));
    buf_.erase(0, nl + 1);
    if (!err.empty() || !v.is<picojson::object>()) die("a line that is no JSON object: " + err);
    auto o = v.get<picojson::object>();
    if (o["event"].to_str() == "error") die("ccsbd: " + v.serialize());
    return o;
  }

private:
  int fd_{-1};
  std::string buf_;
};

// (c): the C++ client's session.
struct daemon_client {
  line_socket sock;
  std::string sid;
  std::int64_t rid{0};

  daemon_client(const std::string& path, const std::string& work, const std::string& profile)
      : sock(path), sid("bench-cpp-" + std::to_string(::getpid())) {
    (void)sock.next(); // hello
    sock.send(R"({"op":"launch","id":0,"profile":")" + profile + R"(","spec":{"sessionId":")" + sid +
              R"(","workspaceId":"bench","bindMounts":[{"hostPath":")" + work + R"("}],"guestWorkdir":")" + work +
              R"("}})");
    while (sock.next()["event"].to_str() != "ready") {
    }
  }

  double exec_true() {
    const std::int64_t id = ++rid;
    auto t = clk::now();
    sock.send(R"({"op":"exec","id":)" + std::to_string(id) + R"(,"sessionId":")" + sid + R"(","argv":["/bin/true"]})");
    double x = -1;
    for (;;) {
      auto e = sock.next();
      const std::string ev = e["event"].to_str();
      if (ev == "exec" && e["id"].is<double>() && static_cast<std::int64_t>(e["id"].get<double>()) == id)
        x = e["execId"].get<double>();
      else if (ev == "exit" && x >= 0 && e["execId"].is<double>() && e["execId"].get<double>() == x) {
        const double ms = ms_since(t);
        if (e["exitCode"].get<double>() != 0) die("ccsbd: /bin/true failed");
        return ms;
      }
    }
  }

  void destroy() {
    sock.send(R"({"op":"destroy","id":-1,"sessionId":")" + sid + R"("})");
    while (sock.next()["event"].to_str() != "handle") {
    }
  }
};

// (d): the Python client, one batch per line on its stdin.
struct python_client {
  pid_t pid{-1};
  int to{-1};
  std::FILE* from{nullptr};

  python_client(const std::string& python, const std::string& path, const std::string& work, const std::string& profile) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) die("pipe");
    pid = spawn({python, std::string(CCSB_BENCH_SOURCE_DIR) + "/daemon_client.py", path, work, profile}, in[0], out[1], -1);
    ::close(in[0]);
    ::close(out[1]);
    to = in[1];
    from = ::fdopen(out[0], "r");
    if (read_line() != "ready") die("the Python client did not get its session ready");
  }

  std::string read_line() {
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n = ::getline(&line, &cap, from);
    std::string s = n > 0 ? std::string(line, static_cast<std::size_t>(n)) : std::string();
    std::free(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  void batch(int k, std::vector<double>& into) {
    const std::string req = std::to_string(k) + "\n";
    if (::write(to, req.data(), req.size()) != static_cast<ssize_t>(req.size())) die("the Python client is gone");
    const std::string l = read_line();
    char* p = const_cast<char*>(l.c_str());
    for (int i = 0; i < k; ++i) {
      char* end = nullptr;
      double v = std::strtod(p, &end);
      if (end == p) die("the Python client failed: \"" + l + "\"");
      into.push_back(v);
      p = end;
    }
  }

  void finish() {
    ::close(to);
    int st = 0;
    ::waitpid(pid, &st, 0);
    std::fclose(from);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("the Python client exited with status " + std::to_string(st));
  }
};

void row(const char* name, const std::vector<double>& v, double base) {
  const double p50 = pct(v, 0.5);
  std::printf("%-26s p50 %7.3f ms  p90 %7.3f ms  p99 %7.3f ms  %+.3f ms  %5.2fx the in-process API\n", name, p50,
              pct(v, 0.9), pct(v, 0.99), p50 - base, base > 0 ? p50 / base : 0.0);
}

} // namespace

int main(int argc, char** argv) {
  int runs = 400, batch = 20;
  std::string profile = "dispatch", python = "/usr/bin/python3";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--batch") batch = std::atoi(argv[i + 1]);
    else if (a == "--profile") profile = argv[i + 1];
    else if (a == "--python") python = argv[i + 1];
    else die("unknown option " + a);
  }
  if (profile != "dispatch" && profile != "spec") die("--profile dispatch or spec");
  if (runs < 1 || batch < 1) die("--runs and --batch are at least 1");
  ::signal(SIGPIPE, SIG_IGN);

  char work[] = "/tmp/ccsb-daemon-bench-work-XXXXXX";
  char sockdir[] = "/tmp/ccsb-daemon-bench-sock-XXXXXX";
  if (!::mkdtemp(work) || !::mkdtemp(sockdir)) die("mkdtemp");
  ::chmod(work, 0755);
  if (::geteuid() == 0 && ::chown(work, 65534, 65534) != 0) die("chown of the scratch worktree");
  const std::string sock = std::string(sockdir) + "/ccsbd.sock";
  const std::string log = std::string(sockdir) + "/ccsbd.log";

  const int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t daemon = spawn({std::string(CCSB_BIN_DIR) + "/ccsbd", "--listen", "unix:" + sock}, null, null, logfd);

  const ccsb::profile prof = profile == "spec" ? ccsb::profile::spec : ccsb::profile::dispatch;
  in_process inproc(work, prof);
  daemon_client cpp(sock, work, profile);
  python_client py(python, sock, work, profile);

  std::vector<double> floor_ms, inproc_ms, cpp_ms, py_ms;
  const std::string daemon_proc = "/proc/" + std::to_string(daemon);
  std::uint64_t inproc_cpu = 0, daemon_cpp_cpu = 0, daemon_py_cpu = 0;
  // Warm-up: the first execs of a session and the first fork of a program.
  for (int i = 0; i < 5; ++i) {
    (void)fork_exec_true();
    (void)inproc.exec_true();
    (void)cpp.exec_true();
  }
  std::vector<double> discard;
  py.batch(5, discard);
  for (int done = 0; done < runs; done += batch) {
    const int k = std::min(batch, runs - done);
    for (int i = 0; i < k; ++i) floor_ms.push_back(fork_exec_true());
    std::uint64_t c0 = oncpu_ns("/proc/thread-self");
    for (int i = 0; i < k; ++i) inproc_ms.push_back(inproc.exec_true());
    inproc_cpu += oncpu_ns("/proc/thread-self") - c0;
    c0 = oncpu_ns(daemon_proc);
    for (int i = 0; i < k; ++i) cpp_ms.push_back(cpp.exec_true());
    daemon_cpp_cpu += oncpu_ns(daemon_proc) - c0;
    c0 = oncpu_ns(daemon_proc);
    py.batch(k, py_ms);
    daemon_py_cpu += oncpu_ns(daemon_proc) - c0;
  }
  py.finish();
  cpp.destroy();
  inproc.s->destroy();
  ::kill(daemon, SIGTERM);
  int st = 0;
  ::waitpid(daemon, &st, 0);

  const double base = pct(inproc_ms, 0.5);
  std::printf("daemon_bench: %d execs of /bin/true per case, round robin in batches of %d, profile %s\n", runs, batch,
              profile.c_str());
  row("fork+exec", floor_ms, base);
  row("in-process session API", inproc_ms, base);
  row("ccsbd, C++ client", cpp_ms, base);
  row("ccsbd, Python client", py_ms, base);
  const double share = pct(cpp_ms, 0.5) - base;
  std::printf("daemon share (ccsbd C++ p50 - in-process p50): %+.3f ms; target <= 0.5 ms: %s\n", share,
              share <= 0.5 ? "met" : "NOT met");
  const double per = 1e-3 / runs; // ns in total -> us per exec
  std::printf("CPU per exec (scheduler's account): launcher thread in-process %.1f us; ccsbd %.1f us (C++ client), "
              "%.1f us (Python client)\n",
              static_cast<double>(inproc_cpu) * per, static_cast<double>(daemon_cpp_cpu) * per,
              static_cast<double>(daemon_py_cpu) * per);
  std::printf("Python client's own share (Python p50 - C++ p50): %+.3f ms\n", pct(py_ms, 0.5) - pct(cpp_ms, 0.5));
  ::unlink(log.c_str());
  ::rmdir(sockdir);
  ::rmdir(work);
  return 0;
}
