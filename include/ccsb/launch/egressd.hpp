// ccsb/launch/egressd.hpp — one egressd per restricted session (N1, N6, N7;
// launcher only; does I/O).
//
// spawn_egressd() spawns
//   egressd --http-listen unix:<dir>/http.sock --socks-listen unix:<dir>/socks.sock
//           [--allow PATTERN]... [--network off] [extra options] --events 3
// (<dir> = egressd_options.socket_dir) with fd 3 the write end of a pipe,
// PR_SET_PDEATHSIG(SIGKILL) and its own process group (process.hpp), and
// returns at once: the session starts bwrap concurrently and reads the event
// lines in its loop. The first line is {"event":"ready","http":..,"socks":..};
// each {"event":"violation",...} becomes a session violation event
// (parse_egressd_line), the raw line kept in `raw`. start_egressd() is
// spawn_egressd() plus a bounded wait for the ready line, for callers that
// want egressd up before they go on.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render_bwrap.hpp"
#include "ccsb/spec.hpp"

#include <picojson.h>
#include <poll.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ccsb::launch {

// Splits a byte stream into lines (bounded: a line longer than kMax is cut).
class line_reader {
public:
  static constexpr std::size_t kMax = 64 * 1024;
  // Reads what is available; false on EOF or error.
  bool read_from(int fd) {
    char buf[8192];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    buf_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  std::optional<std::string> next() {
    auto nl = buf_.find('\n');
    if (nl == std::string::npos) {
      if (buf_.size() < kMax) return std::nullopt;
      nl = kMax;
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl);
      return line;
    }
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return line;
  }
  std::string rest() { return std::exchange(buf_, {}); }

private:
  std::string buf_;
};

struct egressd_process {
  pid_t pid{-1};
  unique_fd events; // read end of the --events pipe
  std::string http_socket;
  std::string socks_socket;
  line_reader lines;
  bool ready{false};    // its {"event":"ready"} line was seen
  bool stopping{false}; // SIGTERM sent by the session (teardown)
};

struct egressd_line {
  std::string event;
  std::optional<sandbox_violation> violation;
  picojson::object fields;
};

inline std::optional<egressd_line> parse_egressd_line(const std::string& line) {
  picojson::value v;
  std::string err = picojson::parse(v, line);
  if (!err.empty() || !v.is<picojson::object>()) return std::nullopt;
  egressd_line out;
  out.fields = v.get<picojson::object>();
  auto str = [&](const char* k) -> std::string {
    auto it = out.fields.find(k);
    return it != out.fields.end() && it->second.is<std::string>() ? it->second.get<std::string>() : std::string();
  };
  out.event = str("event");
  if (out.event == "violation") {
    sandbox_violation sv;
    sv.action = str("action");
    if (sv.action.empty()) sv.action = "network-outbound";
    sv.target = str("target");
    sv.raw = line;
    out.violation = sv;
  }
  return out;
}

struct egressd_options {
  std::string path;     // the egressd binary
  std::string socket_dir; // sockets go here (created by the caller, 0700)
  network_rule network; // allowlist and networkEnabled (N4, N6)
  std::vector<std::string> extra; // --egress-opt pass-through (tests: --allow-upstream, --resolve)
  std::chrono::milliseconds ready_within{10000};
  // umask for egressd's socket files: a sandbox running as another uid (a
  // root launcher, L1) must be able to connect (0111: sockets 0666; the
  // socket directory's 0710 group mode keeps everyone else out).
  std::optional<mode_t> umask;
};

inline result<egressd_process> spawn_egressd(const egressd_options& o) {
  egressd_process e;
  e.http_socket = o.socket_dir + "/" + std::string(kHttpSocketName);
  e.socks_socket = o.socket_dir + "/" + std::string(kSocksSocketName);
  auto p = make_pipe();
  if (!p) return std::move(p).err();
  unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  spawn_options s;
  s.path = o.path;
  s.argv = {o.path, "--http-listen", "unix:" + e.http_socket, "--socks-listen", "unix:" + e.socks_socket};
  if (o.network.enabled) {
    for (const auto& a : o.network.allow) {
      s.argv.push_back("--allow");
      s.argv.push_back(a);
    }
  } else {
    s.argv.push_back("--network");
    s.argv.push_back("off");
  }
  s.argv.insert(s.argv.end(), o.extra.begin(), o.extra.end());
  s.argv.push_back("--events");
  s.argv.push_back("3");
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.fds = {{0, null.get()}, {1, null.get()}, {2, 2}, {3, p->write.get()}};
  s.umask = o.umask;
  auto pid = spawn(s);
  if (!pid) {
    error err = std::move(pid).err();
    err.field = "egressd";
    return err;
  }
  e.pid = *pid;
  p->write.reset();
  e.events = std::move(p->read);
  return e;
}

inline result<egressd_process> start_egressd(const egressd_options& o) {
  auto spawned = spawn_egressd(o);
  if (!spawned) return std::move(spawned).err();
  egressd_process e = std::move(*spawned);
  // Wait for {"event":"ready"} (bounded).
  auto deadline = std::chrono::steady_clock::now() + o.ready_within;
  for (;;) {
    while (auto line = e.lines.next()) {
      auto parsed = parse_egressd_line(*line);
      if (parsed && parsed->event == "ready") return e;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      terminate(e.pid, std::chrono::milliseconds(500));
      return make_error(errc::io_error, "egressd",
                        "egressd did not report ready within " + std::to_string(o.ready_within.count()) + " ms");
    }
    pollfd pf{e.events.get(), POLLIN, 0};
    int r = ::poll(&pf, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return sys_error("poll (egressd events)");
    if (r > 0 && !e.lines.read_from(e.events.get())) {
      int status = terminate(e.pid, std::chrono::milliseconds(500));
      return make_error(errc::io_error, "egressd",
                        "egressd exited before it was ready (exit code " + std::to_string(exit_code_of(status)) + ")");
    }
  }
}

} // namespace ccsb::launch
