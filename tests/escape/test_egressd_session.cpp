// L7 N9: a session's egressd inside the session's limits and under a host
// uid of its own (issue 30 item 6 and the uid left over): egressd joins the
// cgroups bwrap joins (or, with the rlimit fallback of a launcher without a
// writable cgroup, gets the sandbox's RLIMIT_DATA), its --max-tunnels is
// sized by the session's memory (ccsb/resource_limits.hpp
// egressd_max_tunnels), and a root launcher's session runs its egressd as a
// second leased session uid, so two sessions' proxies never share a uid.
// Read from /proc of the real egressd that ccsb-run started, the pid taken
// from the session's handle while its command waits.
#include "escape_support.hpp"

#include "ccsb/launch/linux/session_uid.hpp"
#include "ccsb/resource_limits.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <chrono>
#include <regex>
#include <thread>

using namespace escape;

namespace {

// The number after "KEY": in the handle's JSON, or -1.
long long handle_number(const std::string& handle, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(handle, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return -1;
  return std::stoll(m[1].str());
}

std::string handle_text(const std::string& handle, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(handle, m, std::regex("\"" + key + "\":\"([^\"]*)\""))) return {};
  return m[1].str();
}

// The field's first value in /proc/PID/status ("Uid:\t1\t1\t1\t1" -> the line's values).
std::string status_line(long long pid, const std::string& field) {
  std::string all = read_file("/proc/" + std::to_string(pid) + "/status");
  auto at = all.find("\n" + field + ":");
  if (at == std::string::npos) return {};
  auto end = all.find('\n', at + 1);
  std::string v = all.substr(at + field.size() + 2, end - at - field.size() - 2);
  while (!v.empty() && (v.front() == '\t' || v.front() == ' ')) v.erase(0, 1);
  return v;
}

std::vector<std::string> cmdline(long long pid) {
  std::string raw = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < raw.size(); ++i)
    if (raw[i] == '\0') {
      out.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// "Max data size" soft limit of /proc/PID/limits.
std::string data_limit(long long pid) {
  std::string all = read_file("/proc/" + std::to_string(pid) + "/limits");
  auto at = all.find("Max data size");
  if (at == std::string::npos) return {};
  std::istringstream line(all.substr(at + 13, all.find('\n', at) - at - 13));
  std::string soft;
  line >> soft;
  return soft;
}

// A session whose command waits for `go` in the worktree; the handle is read
// once the launcher wrote egressd's pid into it.
struct waiting_session {
  std::string handle_path, go;
  child c;
  std::string handle;

  waiting_session(sandbox_fixture& fx, launcher who, const std::string& name, const std::vector<std::string>& args)
      : handle_path(fx.base + "/" + name + ".json"), go(fx.work + "/" + name + ".go") {
    ::unlink(handle_path.c_str());
    std::vector<std::string> a{"--handle", handle_path};
    a.insert(a.end(), args.begin(), args.end());
    auto o = launch_options(fx, who, "spec", fx.base + "/" + name + ".events", a,
                            "i=0; while [ ! -e '" + go + "' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                            "echo @@waited=$i");
    c = spawn(o);
    for (int i = 0; i < 1200; ++i) {
      handle = read_file(handle_path);
      if (handle.find("\"state\":\"active\"") != std::string::npos && handle_number(handle, "egressdPid") > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  proc_result finish() {
    write_file(go, "", 0644);
    done = true;
    return collect(std::move(c));
  }
  // A check that failed before finish(): the session is not left waiting.
  ~waiting_session() {
    if (done) return;
    ::kill(c.pid, SIGTERM);
    int st = 0;
    ::waitpid(c.pid, &st, 0);
    ::close(c.out_fd);
    ::close(c.err_fd);
  }
  bool done{false};
};

} // namespace

TEST_CASE("L7 N9: egressd runs in the session's cgroup (or under its rlimits), with --max-tunnels sized by the "
          "session's memory, for a root and an unprivileged launcher",
          "[L7][N9][escape]") {
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    sandbox_fixture fx;
    waiting_session s(fx, who, who == launcher::root ? "root" : "unpriv", {"--memory", "256M"});
    INFO(s.handle);
    const long long egressd = handle_number(s.handle, "egressdPid"), bwrap = handle_number(s.handle, "pid");
    REQUIRE(egressd > 0);
    REQUIRE(bwrap > 0);
    const std::string mechanism = handle_text(s.handle, "limits");
    const std::string egressd_cgroup = read_file("/proc/" + std::to_string(egressd) + "/cgroup");
    const std::string bwrap_cgroup = read_file("/proc/" + std::to_string(bwrap) + "/cgroup");
    const std::string run_dir = handle_text(s.handle, "runDir");
    REQUIRE(!egressd_cgroup.empty());
    // egressd is where bwrap is: the session's cgroup(s), in every hierarchy.
    CHECK(egressd_cgroup == bwrap_cgroup);
    if (mechanism == "cgroup-v2" || mechanism == "cgroup-v1") {
      const std::string name = run_dir.substr(run_dir.rfind('/') + 1);
      CHECK(egressd_cgroup.find("/" + name) != std::string::npos);
    } else {
      REQUIRE(mechanism == "rlimit");
      CHECK(data_limit(egressd) == std::to_string(256ull << 20));
    }
    if (who == launcher::root) CHECK(mechanism != "rlimit"); // a root launcher has a writable hierarchy here
    // --max-tunnels is the session memory's share: 256 MiB / 4 - 8 MiB over 48 KiB.
    const auto argv = cmdline(egressd);
    auto at = std::find(argv.begin(), argv.end(), "--max-tunnels");
    REQUIRE(at != argv.end());
    REQUIRE(at + 1 != argv.end());
    CHECK(at[1] == std::to_string(ccsb::egressd_max_tunnels(256ull << 20)));
    CHECK(at[1] == "1194");
    // Still confined (X3): no new privileges, its seccomp filter.
    CHECK(status_line(egressd, "NoNewPrivs") == "1");
    CHECK(status_line(egressd, "Seccomp") == "2");
    auto r = s.finish();
    ESCAPE_REQUIRE_RAN(r);
  }
}

TEST_CASE("N9: a root launcher runs each session's egressd as a leased uid of its own: two sessions' egressd "
          "processes have different uids, neither the sandbox's, and stay confined",
          "[N9][L7][escape]") {
  REQUIRE(::geteuid() == 0);
  sandbox_fixture fx;
  waiting_session a(fx, launcher::root, "a", {});
  waiting_session b(fx, launcher::root, "b", {});
  INFO(a.handle << "\n" << b.handle);
  std::vector<std::string> uids;
  for (const auto* s : {&a, &b}) {
    const long long egressd = handle_number(s->handle, "egressdPid");
    REQUIRE(egressd > 0);
    const std::string uid_line = status_line(egressd, "Uid"), gid_line = status_line(egressd, "Gid");
    const long long uid = handle_number(s->handle, "egressdUid");
    REQUIRE(uid > 0);
    // Real, effective, saved and file-system uid and gid all the leased one.
    const std::string u = std::to_string(uid);
    CHECK(uid_line == u + "\t" + u + "\t" + u + "\t" + u);
    CHECK(gid_line == u + "\t" + u + "\t" + u + "\t" + u);
    CHECK(uid >= ccsb::launch::kSessionUidBase);
    CHECK(uid < static_cast<long long>(ccsb::launch::kSessionUidBase) + ccsb::launch::kSessionUidCount);
    CHECK(uid != handle_number(s->handle, "hostUid")); // not the sandbox's own host uid
    CHECK(status_line(egressd, "Groups").empty());
    CHECK(status_line(egressd, "NoNewPrivs") == "1");
    CHECK(status_line(egressd, "Seccomp") == "2");
    CHECK(status_line(egressd, "CapEff") == "0000000000000000");
    // egressd's own report of its confinement (X3) names the leased uid.
    const auto conf = s->handle.find("\"egressdConfinement\":{");
    REQUIRE(conf != std::string::npos);
    const std::string confinement = s->handle.substr(conf, s->handle.find('}', conf) - conf);
    CHECK(confinement.find("\"uid\":" + u) != std::string::npos);
    CHECK(confinement.find("\"switchedUser\":true") != std::string::npos);
    CHECK(confinement.find("\"landlockStatus\":\"applied\"") != std::string::npos);
    CHECK(confinement.find("\"seccomp\":\"allowlist\"") != std::string::npos);
    uids.push_back(u);
  }
  CHECK(uids[0] != uids[1]);
  auto ra = a.finish();
  auto rb = b.finish();
  ESCAPE_REQUIRE_RAN(ra);
  ESCAPE_REQUIRE_RAN(rb);
  // The network still works through each (the leased uid serves the proxy).
  auto net = fx.ccsb("curl -sS -o /dev/null -w '%{http_code}' -x \"$HTTP_PROXY\" http://not-allowed.invalid/ ; "
                     "echo; echo @@done=1");
  ESCAPE_REQUIRE_RAN(net);
  CHECK(net.out.find("403") != std::string::npos);
}

TEST_CASE("L7: a flood of tunnels from the sandbox is refused by its egressd at the --max-tunnels the session's "
          "memory allows, each refusal a too_many_tunnels violation, for a root and an unprivileged launcher",
          "[L7][N7][escape]") {
  // A host listener that never accepts: connections complete in its
  // backlog, so every tunnel egressd opens to it stays up.
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(lfd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(lfd, 4096) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const std::uint64_t memory = 80ull << 20;
  const auto limit = ccsb::egressd_max_tunnels(memory);
  REQUIRE(limit == 256);
  const int attempts = static_cast<int>(limit) + 40;
  const std::string script =
      "python3 - <<'PY'\n"
      "import socket\n"
      "ok = refused = other = 0\n"
      "held = []\n"
      "for i in range(" + std::to_string(attempts) + "):\n"
      "    s = socket.create_connection(('127.0.0.1', 3128))\n"
      "    s.sendall(b'CONNECT allowed.test:" + port + " HTTP/1.1\\r\\nHost: allowed.test:" + port + "\\r\\n\\r\\n')\n"
      "    r = b''\n"
      "    while b'\\r\\n\\r\\n' not in r:\n"
      "        d = s.recv(4096)\n"
      "        if not d: break\n"
      "        r += d\n"
      "    line = r.split(b'\\r\\n')[0]\n"
      "    if b' 200 ' in line: ok += 1; held.append(s)\n"
      "    elif line: refused += 1; s.close(); last = line\n"
      "    else: other += 1; s.close()\n"
      "print('@@ok=%d' % ok)\n"
      "print('@@refused=%d' % refused)\n"
      "print('@@other=%d' % other)\n"
      "PY\n";
  for (launcher who : kLaunchers) {
    INFO(name_of(who));
    sandbox_fixture fx;
    const std::string events = fx.base + "/flood.events";
    auto r = run(launch_options(fx, who, "spec", events,
                                {"--memory", "80M", "--allow", "allowed.test", "--egress-opt", "--resolve",
                                 "--egress-opt", "allowed.test=127.0.0.1", "--egress-opt", "--allow-upstream",
                                 "--egress-opt", "127.0.0.0/8"},
                                script));
    ESCAPE_REQUIRE_RAN(r);
    const std::string ev = read_file(events);
    INFO(r.describe() << "\n--- events ---\n" << ev.substr(0, 4000));
    CHECK(r.get("ok") == std::to_string(limit));
    CHECK(r.get("refused") == std::to_string(attempts - static_cast<int>(limit)));
    CHECK(r.get("other") == "0");
    CHECK(ev.find("too_many_tunnels") != std::string::npos);
  }
  ::close(lfd);
}
