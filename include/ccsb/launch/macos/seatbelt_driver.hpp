// ccsb/launch/macos/seatbelt_driver.hpp — the launcher's macOS driver (M1-M8,
// N1, N2, S5). Plain POSIX (fork, execve, pipe, poll, waitpid), so the Linux
// build compiles it and tests it against stand-in programs; the only
// macOS-specific call is in platform.hpp.
//
//   run_seatbelt(request, callbacks) -> result<int>   the command's exit code
//
// The checklist, each step checked (a failure ends the session with a typed
// error, nothing runs with less than the policy):
//   1. egressd (proxied policies): started with --http-listen 127.0.0.1:0
//      --socks-listen 127.0.0.1:0 (N1: on macOS the sandbox shares the host
//      loopback, so the ports are TCP), and waited for: its {"event":"ready",
//      "http":"127.0.0.1:P","socks":"127.0.0.1:Q"} line gives the ports the
//      profile needs (parse_ready_ports). Rendering waits for it.
//   2. the session temp dir run_dir/tmp (0700), the profile rendered
//      (render_seatbelt) with the ports, the log tag (seatbelt_tag(session,
//      nonce)) and the temp dir, and the environment (seatbelt_environment).
//   3. the log reader (seatbelt_log_argv: `log stream --style ndjson` for the
//      tag) started BEFORE the command, so no early denial is missed.
//   4. `starting`, then sandbox-exec -p PROFILE -- COMMAND... with exactly
//      that environment (E1), the policy's workdir, its own process group,
//      stdout and stderr on pipes; `ready` once it is spawned.
//   5. until the command exits: its output (callbacks.output and
//      stdout/stderr events), egressd's violations (N7) and the log reader's
//      denials (M8) as `violation` events.
//   6. after it exits, the log reader is drained for request.log_drain (the
//      unified log delivers with a delay), then it and egressd get SIGTERM
//      and are reaped; `exit` is the last event.
#pragma once

#include "ccsb/launch/macos/platform.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render_seatbelt.hpp"
#include "ccsb/result.hpp"
#include "ccsb/seatbelt_log.hpp"
#include "ccsb/spec.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <picojson.h>

#include <cerrno>
#include <exception>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::launch::macos {

struct driver_request {
  policy pol;
  std::vector<std::string> command;
  std::string sandbox_exec{kSandboxExec};
  std::string log_tool{kLogTool};
  std::string egressd_path;            // required for a proxied policy
  std::vector<std::string> egress_opts; // passed through to egressd
  std::string run_dir;                 // an existing private (0700) directory of this session
  std::string nonce;                   // per launch, [A-Za-z0-9]{8,16}: part of the log tag
  std::chrono::milliseconds egress_ready_within{10000};
  std::chrono::milliseconds log_drain{1500};
};

struct driver_callbacks {
  std::function<void(const sandbox_event&)> event;
  std::function<void(int stream, std::string_view bytes)> output;
  std::function<void(const std::string&)> log;
};

// The two ports of egressd's ready line, or nullopt.
inline std::optional<std::pair<std::uint16_t, std::uint16_t>> parse_ready_ports(const std::string& line) {
  picojson::value v;
  try {
    if (!picojson::parse(v, line).empty() || !v.is<picojson::object>()) return std::nullopt;
  } catch (const std::exception&) { // a number that overflows a double
    return std::nullopt;
  }
  const auto& o = v.get<picojson::object>();
  auto port = [&](const char* k) -> std::optional<std::uint16_t> {
    auto it = o.find(k);
    if (it == o.end() || !it->second.is<std::string>()) return std::nullopt;
    const std::string& a = it->second.get<std::string>();
    const std::string prefix = "127.0.0.1:";
    if (a.rfind(prefix, 0) != 0 || a.size() == prefix.size() || a.size() > prefix.size() + 5) return std::nullopt;
    unsigned long n = 0;
    for (char c : a.substr(prefix.size())) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<unsigned long>(c - '0');
    }
    if (n == 0 || n > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(n);
  };
  auto ev = o.find("event");
  if (ev == o.end() || !ev->second.is<std::string>() || ev->second.get<std::string>() != "ready") return std::nullopt;
  auto h = port("http"), s = port("socks");
  if (!h || !s) return std::nullopt;
  return std::make_pair(*h, *s);
}

// A violation line of egressd's --events stream (N7), or nullopt.
inline std::optional<sandbox_violation> parse_egressd_violation(const std::string& line) {
  picojson::value v;
  try {
    if (!picojson::parse(v, line).empty() || !v.is<picojson::object>()) return std::nullopt;
  } catch (const std::exception&) { // a number that overflows a double
    return std::nullopt;
  }
  const auto& o = v.get<picojson::object>();
  auto str = [&](const char* k) -> std::string {
    auto it = o.find(k);
    return it != o.end() && it->second.is<std::string>() ? it->second.get<std::string>() : std::string();
  };
  if (str("event") != "violation") return std::nullopt;
  sandbox_violation sv{str("action"), str("target"), line};
  if (sv.action.empty()) sv.action = "network-outbound";
  return sv;
}

namespace detail {

struct child {
  pid_t pid{-1};
  int out{-1}; // read end of its stdout (or events pipe)
  int err{-1}; // read end of its stderr (-1: not captured)
};

inline error sys(const std::string& what) { return make_error(errc::io_error, what, std::strerror(errno)); }

// fork + execve with an explicit environment; `extra` is mapped to fd 3.
// stdin is /dev/null unless keep_stdin.
inline result<child> start(const std::vector<std::string>& argv, const env_list& env, const std::string& cwd,
                           bool capture_err, bool keep_stdin, bool own_group) {
  int out[2], err[2] = {-1, -1};
  if (::pipe(out) != 0) return sys("pipe");
  if (capture_err && ::pipe(err) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return sys("pipe");
  }
  std::vector<std::string> envs;
  for (const auto& v : env) envs.push_back(v.name + "=" + v.value);
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (auto& e : envs) ev.push_back(e.data());
  ev.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return sys("fork");
  if (pid == 0) {
    if (own_group) ::setpgid(0, 0);
    if (!keep_stdin) {
      int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
    }
    ::dup2(out[1], 1);
    if (capture_err) ::dup2(err[1], 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execve(av[0], av.data(), ev.data());
    ::_exit(127);
  }
  ::close(out[1]);
  if (capture_err) ::close(err[1]);
  return child{pid, out[0], capture_err ? err[0] : -1};
}

inline void stop(pid_t pid, bool group = false) {
  if (pid <= 0) return;
  ::kill(group ? -pid : pid, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    ::usleep(20000);
  }
  ::kill(group ? -pid : pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Lines from a descriptor.
struct lines {
  std::string buf;
  bool eof{false};
  template <class F> void read(int fd, F&& each) {
    char tmp[8192];
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0) {
      if (n == 0 || (errno != EINTR && errno != EAGAIN)) eof = true;
      return;
    }
    buf.append(tmp, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string l = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      each(l);
    }
    if (buf.size() > kMaxLogLine) buf.clear(); // an endless line is noise, not a denial
  }
};

} // namespace detail

inline result<int> run_seatbelt(const driver_request& req, const driver_callbacks& cb) {
  using namespace detail;
  auto emit = [&](sandbox_event e) {
    e.session_id = req.pol.session_id;
    if (cb.event) cb.event(e);
  };
  auto say = [&](const std::string& s) {
    if (cb.log) cb.log(s);
  };
  if (req.command.empty()) return make_error(errc::invalid_argument, "command", "no command");
  if (req.run_dir.empty() || req.run_dir.front() != '/')
    return make_error(errc::invalid_argument, "run_dir", "an absolute private run directory is required");
  const bool proxied = req.pol.network.kind == network_kind::proxied;

  // 1. egressd
  child egress;
  seatbelt_facts facts;
  auto cleanup = [&]() {
    stop(egress.pid);
    if (egress.out >= 0) ::close(egress.out);
  };
  lines egress_lines;
  if (proxied) {
    if (req.egressd_path.empty()) return make_error(errc::invalid_argument, "egressd", "a proxied run needs egressd");
    std::vector<std::string> av{req.egressd_path, "--http-listen", "127.0.0.1:0", "--socks-listen", "127.0.0.1:0"};
    if (req.pol.network.enabled) {
      for (const auto& a : req.pol.network.allow) {
        av.push_back("--allow");
        av.push_back(a);
      }
    } else {
      av.insert(av.end(), {"--network", "off"});
    }
    av.insert(av.end(), req.egress_opts.begin(), req.egress_opts.end());
    av.insert(av.end(), {"--events", "1"});
    auto e = start(av, {{"PATH", "/usr/bin:/bin"}}, "", false, false, false);
    if (!e) return std::move(e).err();
    egress = *e;
    auto deadline = std::chrono::steady_clock::now() + req.egress_ready_within;
    std::optional<std::pair<std::uint16_t, std::uint16_t>> ports;
    while (!ports) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || egress_lines.eof) {
        cleanup();
        return make_error(errc::io_error, "egressd", "egressd did not report its ports (ready) in time");
      }
      pollfd pf{egress.out, POLLIN, 0};
      if (::poll(&pf, 1, static_cast<int>(left.count())) > 0)
        egress_lines.read(egress.out, [&](const std::string& l) {
          if (!ports) ports = parse_ready_ports(l);
        });
    }
    facts.http_port = ports->first;
    facts.socks_port = ports->second;
  }

  // 2. temp dir, profile, environment
  facts.session_tag = seatbelt_tag(req.pol.session_id, req.nonce);
  facts.temp_dir = ccsb::detail::lexical_normal(req.run_dir + "/tmp");
  if (::mkdir(facts.temp_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    cleanup();
    return sys("mkdir " + facts.temp_dir);
  }
  facts.resolve = [](const std::string& p) {
    char buf[4096];
    if (::realpath(p.c_str(), buf)) return std::string(buf);
    return p;
  };
  auto profile = render_seatbelt(req.pol, facts);
  if (!profile) {
    cleanup();
    return std::move(profile).err();
  }
  for (const auto& n : profile->notes) say(n);
  env_list env = seatbelt_environment(req.pol, facts);

  // 3. the log reader
  auto reader = start(seatbelt_log_argv(req.log_tool, facts.session_tag), {{"PATH", "/usr/bin:/bin"}}, "", false,
                      false, false);
  if (!reader) {
    cleanup();
    return std::move(reader).err();
  }
  lines log_lines;

  // 4. the command
  auto kind_event = [](event_kind k) {
    sandbox_event e;
    e.kind = k;
    return e;
  };
  emit(kind_event(event_kind::starting));
  auto cmd = start(seatbelt_argv(req.sandbox_exec, *profile, req.command), env, req.pol.workdir, true, true, true);
  if (!cmd) {
    stop(reader->pid);
    ::close(reader->out);
    cleanup();
    return std::move(cmd).err();
  }
  emit(kind_event(event_kind::ready));

  auto on_violation = [&](const sandbox_violation& v) {
    sandbox_event e;
    e.kind = event_kind::violation;
    e.violation = v;
    emit(e);
  };
  auto on_egress = [&](const std::string& l) {
    auto p = parse_egressd_violation(l);
    if (p) on_violation(*p);
  };
  auto on_log = [&](const std::string& l) {
    if (auto v = parse_seatbelt_denial(l, facts.session_tag)) on_violation(*v);
  };

  // 5. supervise
  int status = 0;
  bool exited = false;
  int out_fd = cmd->out, err_fd = cmd->err;
  std::optional<std::chrono::steady_clock::time_point> drain_until;
  for (;;) {
    std::vector<pollfd> pf;
    if (out_fd >= 0) pf.push_back({out_fd, POLLIN, 0});
    if (err_fd >= 0) pf.push_back({err_fd, POLLIN, 0});
    if (egress.out >= 0 && !egress_lines.eof) pf.push_back({egress.out, POLLIN, 0});
    if (!log_lines.eof) pf.push_back({reader->out, POLLIN, 0});
    if (!exited && ::waitpid(cmd->pid, &status, WNOHANG) == cmd->pid) exited = true;
    if (exited && out_fd < 0 && err_fd < 0 && !drain_until)
      drain_until = std::chrono::steady_clock::now() + req.log_drain;
    if (drain_until && std::chrono::steady_clock::now() >= *drain_until) break;
    int r = ::poll(pf.data(), pf.size(), 50);
    if (r < 0 && errno != EINTR) break;
    for (const auto& p : pf) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (p.fd == out_fd || p.fd == err_fd) {
        char buf[65536];
        ssize_t n = ::read(p.fd, buf, sizeof buf);
        int stream = p.fd == out_fd ? 1 : 2;
        if (n <= 0) {
          ::close(p.fd);
          (stream == 1 ? out_fd : err_fd) = -1;
          continue;
        }
        std::string_view bytes(buf, static_cast<std::size_t>(n));
        if (cb.output) cb.output(stream, bytes);
        emit(stream == 1 ? sandbox_event::make_stdout(std::string(bytes)) : sandbox_event::make_stderr(std::string(bytes)));
      } else if (p.fd == egress.out) {
        egress_lines.read(egress.out, on_egress);
      } else {
        log_lines.read(reader->out, on_log);
      }
    }
  }
  if (!exited) ::waitpid(cmd->pid, &status, 0);

  // 6. teardown
  stop(reader->pid);
  ::close(reader->out);
  cleanup();
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
  emit(sandbox_event::make_exit(code));
  return code;
}

} // namespace ccsb::launch::macos
