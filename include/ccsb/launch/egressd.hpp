// ccsb/launch/egressd.hpp — one egressd per restricted session (N1, N6, N7;
// launcher only; does I/O).
//
// spawn_egressd() spawns
//   egressd --listen-channel 4 [--allow PATTERN]... [--network off] [session options] --events 3
// (written by ccsb/protocol/egressd_args.hpp, which egressd parses it with)
// with fd 3 the write end of the events pipe and fd 4 egressd's end of the
// session's proxy channel (a SOCK_SEQPACKET socketpair, ccsb/protocol/
// proxy_channel.hpp: the sandbox's supervisor hands its proxy listeners over
// it), PR_SET_PDEATHSIG(SIGKILL) and its own process group (process.hpp),
// and returns at once, before egressd even reached execve (spawn_async: a
// failed exec is read from egressd_process::exec when egressd exits): the
// session starts bwrap concurrently and reads the
// event lines in its loop (ccsb/protocol/egressd_events.hpp, the header
// egressd writes them with). The first line is
// {"event":"ready","listenChannel":4,"confinement":{...}}; each
// {"event":"violation",...} becomes a session violation event
// (parse_egressd_line), the raw line kept in `raw`. A line the strict parser
// refuses is no event at all (nullopt): the session never guesses what it
// meant. egressd binds no socket of its own on the host.
//
// L7: egressd joins the session's cgroups (memory, pids, cpu) before it
// execs, as bwrap does, so what a sandbox makes its proxy hold (pending
// dials, tunnels, early data) counts against the session's --memory and
// --pids, never only against the host. A sandbox that fills its own limit
// can starve its own egressd (its network then fails closed), never another
// session's. With the rlimit fallback (no writable cgroup) egressd gets the
// sandbox's RLIMIT_DATA; RLIMIT_NPROC is left off: it counts per host uid,
// and every session's egressd shares one.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/protocol/egressd_args.hpp"
#include "ccsb/protocol/egressd_events.hpp"
#include "ccsb/session_settings.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/spec.hpp"

#include <picojson.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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
  spawned_child exec; // its exec_status: read with exec_outcome once it matters (not waited for)
  unique_fd events;   // read end of the --events pipe
  line_reader lines;
  bool ready{false};    // its {"event":"ready"} line was seen
  bool stopping{false}; // SIGTERM sent by the session (teardown)
};

struct egressd_line {
  std::string event;                          // "ready", "violation" or "testAttack"
  std::optional<sandbox_violation> violation; // for a violation: action, target, the raw line
  picojson::object fields;                    // the line's JSON object, every field checked
  protocol::egressd_events::event message;    // the same, typed
};

// nullopt for a line protocol::egressd_events::parse_line refuses.
inline std::optional<egressd_line> parse_egressd_line(const std::string& line) {
  egressd_line out;
  auto m = protocol::egressd_events::parse_line(line, &out.fields);
  if (!m) return std::nullopt;
  out.message = std::move(*m);
  out.event = out.fields.at("event").get<std::string>(); // a string: parse_line checked it
  if (const auto* v = std::get_if<protocol::egressd_events::violation>(&out.message))
    out.violation = sandbox_violation{std::string(protocol::egressd_events::kViolationAction), v->target, line, v->reason};
  return out;
}

struct egressd_options {
  std::string path;     // the egressd binary
  int channel{-1};      // egressd's end of the proxy channel (the caller keeps the other)
  network_rule network; // allowlist and networkEnabled (N4, N6)
  egress_settings egress; // the session's egressd options (--egress-opt, ccsbd's "egress")
  // The session's limits (limits.hpp), joined in the child before execve
  // like bwrap: cgroup.procs (v2) and v1 `tasks` descriptors, and the
  // rlimits of the rlimit fallback.
  std::vector<int> cgroup_procs;
  std::vector<int> cgroup_tasks;
  std::vector<std::pair<int, rlim_t>> rlimits;
  std::optional<uid_t> user;    // --user UID:UID (a root launcher's leased uid), else egressd's default
  std::uint64_t max_tunnels{0}; // --max-tunnels (0: egressd's default)
};

// egressd's descriptor numbers.
inline constexpr int kEgressdEventsFd = 3;
inline constexpr int kEgressdChannelFd = 4;

// egressd's command line for `o` (ccsb/protocol/egressd_args.hpp, the
// header egressd parses it with).
inline protocol::egressd_args egressd_args_for(const egressd_options& o) {
  protocol::egressd_args a;
  a.listen_channel = kEgressdChannelFd;
  if (o.network.enabled) a.allow = o.network.allow;
  else a.network = false;
  if (o.network.enabled && o.network.kind == network_kind::open) a.open_network = true;
  if (o.user) a.user = protocol::egressd_user{*o.user, *o.user};
  if (o.max_tunnels != 0)
    a.max_tunnels = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.max_tunnels, 0xffffffffu));
  a.allow_upstream = o.egress.allow_upstream;
  a.resolve = o.egress.resolve;
  a.dns_server = o.egress.dns_server;
  a.events = std::to_string(kEgressdEventsFd);
  return a;
}

inline result<egressd_process> spawn_egressd(const egressd_options& o) {
  egressd_process e;
  if (o.channel < 0) return make_error(errc::invalid_argument, "egressd", "no proxy channel");
  auto p = make_pipe();
  if (!p) return std::move(p).err();
  unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return sys_error("open /dev/null (egressd's stdin and stdout)");
  spawn_options s;
  s.path = o.path;
  s.argv = {o.path};
  for (auto& x : protocol::to_argv(egressd_args_for(o))) s.argv.push_back(std::move(x));
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.cgroup_procs = o.cgroup_procs;
  s.cgroup_tasks = o.cgroup_tasks;
  s.rlimits = o.rlimits;
  s.fds = {{0, null.get()}, {1, null.get()}, {2, 2}, {kEgressdEventsFd, p->write.get()}, {kEgressdChannelFd, o.channel}};
  auto c = spawn_async(s);
  if (!c) {
    error err = std::move(c).err();
    err.field = "egressd";
    return err;
  }
  e.pid = c->pid;
  e.exec = std::move(*c);
  p->write.reset();
  e.events = std::move(p->read);
  return e;
}

} // namespace ccsb::launch
