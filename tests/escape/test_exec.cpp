// S7 / S3 / S4 / T4 / X1: sessions with exec calls through the C++ API
// (ccsb/launch/session.hpp), in this process, against the real bwrap,
// ccsb-init and egressd: one launch, many execs in the same sandbox (no new
// bwrap, no new egressd), concurrent execs with their own events, kill and
// timeouts per exec, typed errors for illegal calls, several sessions on one
// reactor, and what a hostile command can do to its own session.
#include <catch2/catch.hpp>

#include "session_support.hpp"

#include <sys/wait.h>
#include <termios.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

using namespace escape;
namespace L = ccsb::launch;

namespace {

struct api_fixture : sandbox_fixture {
  L::reactor r;
  std::vector<ccsb::sandbox_event> events;
  std::map<std::string, std::map<L::exec_id, std::string>> out; // session -> exec -> stdout
  std::vector<std::string> logs;

  L::session_request request(ccsb::profile prof = ccsb::profile::spec, const std::string& sid = "") {
    return native_request(*this, prof, sid.empty() ? "api-" + random_token() : sid);
  }

  // A request whose supervisor never reports ready: `script` (a shell
  // script that exits) stands in for ccsb-init. It lies in a directory of
  // the launcher's own (the fixture belongs to the sandbox's uid): a helper
  // another uid could write is refused before anything starts (L8,
  // helpers.hpp).
  L::session_request failing_start_request(const std::string& name, const std::string& script) {
    auto q = request(ccsb::profile::spec);
    const std::string bogus = launcher_dir() + "/" + name;
    write_file(bogus, script, 0755);
    q.init_path = bogus;
    return q;
  }
  // A directory of the launcher's own for stand-in helpers, made once.
  const std::string& launcher_dir() {
    if (!helper_dir) helper_dir.emplace("ccsb-escape-helper", "/tmp", 0755);
    return helper_dir->path();
  }
  std::optional<ccsb_test::temp_dir> helper_dir;

  L::session_callbacks callbacks() {
    L::session_callbacks cb;
    cb.event = [this](const ccsb::sandbox_event& e) { events.push_back(e); };
    cb.output = [this](L::exec_id, int, std::string_view) {};
    cb.log = [this](const std::string& s) { logs.push_back(s); };
    return cb;
  }

  std::unique_ptr<L::session> launch(ccsb::profile prof = ccsb::profile::spec, const std::string& sid = "") {
    auto s = L::session::launch(r, request(prof, sid), callbacks());
    INFO((s ? std::string() : s.err().what()));
    for (const auto& l : logs) UNSCOPED_INFO(l);
    REQUIRE(s);
    REQUIRE((*s)->handle().state() == ccsb::sandbox_state::warm);
    return std::move(*s);
  }

  L::exec_id start(L::session& s, const std::string& script, L::exec_options o = {}) {
    auto id = s.exec({"/bin/sh", "-c", script}, o);
    INFO((id ? std::string() : id.err().what()));
    REQUIRE(id);
    return *id;
  }

  void wait(L::session& s, L::exec_id id) {
    auto w = r.run_until([&] { return s.finished(id); });
    REQUIRE(w);
  }

  // What the exec wrote to stdout, from its `stdout` events (execId, sessionId).
  std::string stdout_of(const L::session& s, L::exec_id id) const {
    std::string all;
    for (const auto& e : events)
      if (e.kind == ccsb::event_kind::stdout_ && e.exec_id == id && e.session_id == s.id()) all += e.data;
    return all;
  }

  int run(L::session& s, const std::string& script, std::string* output = nullptr, L::exec_options o = {}) {
    auto id = start(s, script, o);
    wait(s, id);
    if (output) *output = stdout_of(s, id);
    auto code = s.exit_code(id);
    REQUIRE(code);
    return *code;
  }

  std::vector<ccsb::sandbox_event> of(L::exec_id id, ccsb::event_kind k) const {
    std::vector<ccsb::sandbox_event> v;
    for (const auto& e : events)
      if (e.exec_id == id && e.kind == k) v.push_back(e);
    return v;
  }
};

std::int64_t detail_int(const ccsb::sandbox_handle& h, const std::string& k) {
  auto it = h.details().find(k);
  REQUIRE(it != h.details().end());
  REQUIRE(it->second.is<std::int64_t>());
  return it->second.get<std::int64_t>();
}

// The bwraps this process started (one per sandbox; ccsb-init is its PID 1).
int bwraps_of_this_process() {
  int n = 0;
  for (const auto& p : descendants(::getpid()))
    if (p.comm == "bwrap" && p.ppid == ::getpid()) ++n;
  return n;
}

} // namespace

TEST_CASE("S7: one session runs many execs in one sandbox, with one bwrap and one egressd", "[S7][S3][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  const auto bwrap_pid = detail_int(s->handle(), "pid");
  const auto egressd_pid = detail_int(s->handle(), "egressdPid");
  std::string o;
  // The sandbox's own /tmp (a tmpfs of this sandbox) keeps what the first exec wrote.
  REQUIRE(fx.run(*s, "echo first > /tmp/mark-$PPID; echo one", &o) == 0);
  CHECK(o == "one\n");
  for (int i = 0; i < 5; ++i) {
    REQUIRE(fx.run(*s, "cat /tmp/mark-*; echo n=" + std::to_string(i), &o) == 0);
    CHECK(o == "first\nn=" + std::to_string(i) + "\n");
  }
  CHECK(detail_int(s->handle(), "pid") == bwrap_pid);
  CHECK(detail_int(s->handle(), "egressdPid") == egressd_pid);
  CHECK(bwraps_of_this_process() == 1);
  // Exit codes are per exec.
  CHECK(fx.run(*s, "exit 7") == 7);
  CHECK(fx.run(*s, "kill -TERM $$") == 128 + SIGTERM);
  CHECK(s->handle().state() == ccsb::sandbox_state::warm);
  s->destroy();
  CHECK(s->handle().state() == ccsb::sandbox_state::destroyed);
  CHECK(bwraps_of_this_process() == 0);
}

TEST_CASE("S7: concurrent execs in one session each get their own output, exit and execId", "[S7][S5][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  auto a = fx.start(*s, "read x < /dev/null; sleep 0.3; echo A-out; echo A-err >&2; exit 3");
  auto b = fx.start(*s, "echo B-out; exit 4");
  CHECK(s->handle().state() == ccsb::sandbox_state::active);
  fx.wait(*s, a);
  fx.wait(*s, b);
  CHECK(a != b);
  CHECK(fx.stdout_of(*s, a) == "A-out\n");
  CHECK(fx.stdout_of(*s, b) == "B-out\n");
  REQUIRE(fx.of(a, ccsb::event_kind::stderr_).size() == 1);
  CHECK(fx.of(a, ccsb::event_kind::stderr_)[0].data == "A-err\n");
  CHECK(fx.of(b, ccsb::event_kind::stderr_).empty());
  REQUIRE(fx.of(a, ccsb::event_kind::exit).size() == 1);
  CHECK(fx.of(a, ccsb::event_kind::exit)[0].exit_code == 3);
  CHECK(fx.of(b, ccsb::event_kind::exit)[0].exit_code == 4);
  // Every exec event names the session.
  for (const auto& e : fx.events) CHECK(e.session_id == s->id());
  CHECK(s->handle().state() == ccsb::sandbox_state::warm); // back from active once none runs
}

TEST_CASE("S7: an exec sets its own workdir and environment additions, and E3 refuses a forbidden one by name",
          "[S7][E3][escape]") {
  api_fixture fx;
  make_dirs(fx.work + "/sub dir");
  hand_to_sandbox_uid(fx.work);
  auto s = fx.launch();
  L::exec_options o;
  o.workdir = fx.work + "/sub dir";
  o.env = {{"CCSB_EXEC_VAR", "value-1"}};
  std::string out;
  REQUIRE(fx.run(*s, "pwd; echo \"$CCSB_EXEC_VAR\"; echo \"$HTTPS_PROXY\"", &out, o) == 0);
  CHECK(out == fx.work + "/sub dir\nvalue-1\nhttp://127.0.0.1:3128\n");
  // The addition belongs to that exec only.
  REQUIRE(fx.run(*s, "pwd; echo \"[$CCSB_EXEC_VAR]\"", &out) == 0);
  CHECK(out == fx.work + "\n[]\n");
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"LD_PRELOAD", "/tmp/x.so"}, {"HTTPS_PROXY", "http://evil.example:1"}, {"AWS_SECRET_ACCESS_KEY", "x"}}) {
    L::exec_options bad;
    bad.env = {{name, value}};
    auto id = s->exec({"/bin/true"}, bad);
    REQUIRE_FALSE(id);
    CHECK(id.err().code == ccsb::errc::invalid_argument);
    CHECK_THAT(id.err().what(), Catch::Contains("env." + name));
  }
  L::exec_options rel;
  rel.workdir = "relative";
  CHECK_FALSE(s->exec({"/bin/true"}, rel));
  CHECK_FALSE(s->exec({}, {}));
  // A missing workdir or command: the exec fails (125/127), the session stays warm.
  L::exec_options gone;
  gone.workdir = fx.work + "/missing";
  auto g = s->exec({"/bin/true"}, gone);
  REQUIRE(g);
  fx.wait(*s, *g);
  REQUIRE(s->start_failure(*g));
  CHECK(s->start_failure(*g)->first == 125);
  CHECK_THAT(s->start_failure(*g)->second, Catch::Contains("chdir"));
  auto nf = s->exec({"no-such-command-" + random_token()}, {});
  REQUIRE(nf);
  fx.wait(*s, *nf);
  REQUIRE(s->start_failure(*nf));
  CHECK(s->start_failure(*nf)->first == 127);
  CHECK(fx.run(*s, "echo still", &out) == 0);
  CHECK(out == "still\n");
}

TEST_CASE("S7: kill and a timeout end one exec with killed then exit, and the session goes on", "[S7][S5][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  // A shell that started a background job in its own process group: kill
  // reaches the whole exec (its session), not only the shell.
  auto id = fx.start(*s, "sh -c 'set -m; sleep 300 & echo $! > /tmp/bg; wait' & echo started; wait");
  REQUIRE(fx.r.run_until([&] { return fx.stdout_of(*s, id) == "started\n"; }));
  REQUIRE(s->kill(id, "stop"));
  fx.wait(*s, id);
  auto killed = fx.of(id, ccsb::event_kind::killed);
  REQUIRE(killed.size() == 1);
  CHECK(killed[0].reason == "stop");
  CHECK(fx.of(id, ccsb::event_kind::exit)[0].exit_code == 128 + SIGKILL);
  std::string out;
  REQUIRE(fx.run(*s, "sleep 0.2; kill -0 $(cat /tmp/bg) 2>/dev/null && echo alive || echo gone", &out) == 0);
  CHECK(out == "gone\n");
  L::exec_options t;
  t.timeout = std::chrono::milliseconds(300);
  auto slow = fx.start(*s, "sleep 300", t);
  fx.wait(*s, slow);
  REQUIRE(fx.of(slow, ccsb::event_kind::killed).size() == 1);
  CHECK(fx.of(slow, ccsb::event_kind::killed)[0].reason == "timeout");
  CHECK(fx.run(*s, "echo next", &out) == 0);
  CHECK(out == "next\n");
  CHECK_FALSE(s->kill(9999));
}

TEST_CASE("S4: illegal session calls are typed errors: suspended, not suspended, destroyed", "[S7][S4][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  auto resumed = s->resume();
  REQUIRE_FALSE(resumed);
  CHECK(resumed.err().code == ccsb::errc::illegal_transition);
  auto sus = s->suspend();
  // A root launcher has a freezer cgroup (v2, or v1's freezer controller).
  if (::geteuid() == 0) {
    INFO((sus ? std::string() : sus.err().what()));
    REQUIRE(sus);
    CHECK(s->handle().state() == ccsb::sandbox_state::suspended);
    auto e = s->exec({"/bin/true"}, {});
    REQUIRE_FALSE(e);
    CHECK(e.err().code == ccsb::errc::illegal_transition);
    CHECK_THAT(e.err().what(), Catch::Contains("suspended"));
    REQUIRE(s->resume());
    CHECK(s->handle().state() == ccsb::sandbox_state::warm);
  } else {
    // Without a freezer cgroup the call says so; the session is unchanged.
    REQUIRE_FALSE(sus);
    CHECK(sus.err().code == ccsb::errc::unsupported);
    CHECK(s->handle().state() == ccsb::sandbox_state::warm);
  }
  std::string out;
  CHECK(fx.run(*s, "echo after", &out) == 0);
  CHECK(out == "after\n");
  s->destroy();
  auto e = s->exec({"/bin/true"}, {});
  REQUIRE_FALSE(e);
  CHECK(e.err().code == ccsb::errc::handle_destroyed);
  CHECK(s->suspend().err().code == ccsb::errc::handle_destroyed);
  s->destroy(); // idempotent
}

TEST_CASE("S7: a suspended session's commands do not run until it is resumed", "[S7][escape]") {
  api_fixture fx;
  if (::geteuid() != 0) FAIL("needs a root launcher (a freezer cgroup)");
  auto s = fx.launch();
  // A background job counts into a file of the worktree (the host reads it).
  const std::string tick = fx.work + "/tick";
  std::string out;
  REQUIRE(fx.run(*s, "(i=0; while :; do i=$((i+1)); echo $i > tick.tmp; mv tick.tmp tick; sleep 0.02; done) "
                     ">/dev/null 2>&1 & echo ok",
                 &out) == 0);
  auto value = [&] {
    std::string t = read_file(tick);
    return t.empty() ? 0 : std::stoi(t);
  };
  for (int i = 0; i < 200 && value() < 3; ++i) ::usleep(10 * 1000);
  REQUIRE(value() >= 3);
  REQUIRE(s->suspend()); // returns once the kernel reports the cgroup frozen
  const int frozen_at = value();
  ::usleep(300 * 1000);
  CHECK(value() == frozen_at);
  REQUIRE(s->resume());
  for (int i = 0; i < 300 && value() <= frozen_at; ++i) ::usleep(10 * 1000);
  CHECK(value() > frozen_at);
}

// The X1 broker's filter waits killably once ccsb-init has received a
// notification (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), and the cgroup
// freezer cannot freeze a task in that wait: a freeze that caught ccsb-init
// between receiving a command's request and answering it never completed
// (CI: suspend failed, the cgroup stuck FREEZING). A command that creates
// files without pause keeps a request in flight nearly all the time.
TEST_CASE("S7 X1: suspend completes while a command's brokered calls are in flight", "[S7][X1][escape]") {
  api_fixture fx;
  if (::geteuid() != 0) FAIL("needs a root launcher (a freezer cgroup)");
  auto s = fx.launch(ccsb::profile::dispatch);
  REQUIRE(fx.run(*s, "(while :; do : > busy.tmp; done) >/dev/null 2>&1 & echo ok") == 0);
  ::usleep(100 * 1000);
  for (int i = 0; i < 20; ++i) {
    INFO("round " << i);
    auto r = s->suspend();
    INFO((r ? std::string() : r.err().what()));
    REQUIRE(r);
    REQUIRE(s->resume());
    ::usleep(20 * 1000);
  }
}

// A suspend that did not finish in time once left the freezer FROZEN behind
// the session's back (state warm again), and destroy() then waited forever
// for bwrap: a frozen process does not die of SIGKILL. Here the freezer is
// set behind the session's back after a suspend and resume; destroy() must
// still end, and the sandbox's processes with it.
TEST_CASE("S7 L7: destroy ends a session whose freezer was left frozen", "[S7][L7][escape]") {
  api_fixture fx;
  if (::geteuid() != 0) FAIL("needs a root launcher (a freezer cgroup)");
  auto s = fx.launch();
  REQUIRE(fx.run(*s, "sleep 30 >/dev/null 2>&1 & echo ok") == 0);
  REQUIRE(s->suspend());
  REQUIRE(s->resume());
  const auto& details = s->handle().details();
  REQUIRE(details.count("runDir"));
  const std::string name = std::filesystem::path(details.at("runDir").get<std::string>()).filename().string();
  std::ifstream self("/proc/self/cgroup");
  std::string freezer;
  for (std::string line; std::getline(self, line);)
    if (line.find(":freezer:") != std::string::npos) freezer = line.substr(line.find(":freezer:") + 9);
  const std::string state = "/sys/fs/cgroup/freezer" + freezer + "/" + name + "/freezer.state";
  REQUIRE(file_exists(state));
  { std::ofstream(state) << "FROZEN" << std::flush; }
  for (int i = 0; i < 300 && read_file(state).find("FROZEN") != 0; ++i) ::usleep(10000);
  REQUIRE(read_file(state).find("FROZEN") == 0);
  std::atomic<bool> done{false};
  std::thread t([&] {
    s->destroy();
    done = true;
  });
  for (int i = 0; i < 1000 && !done; ++i) ::usleep(10000);
  const bool ended = done;
  if (!ended) std::ofstream(state) << "THAWED" << std::flush; // unblock it, then fail
  t.join();
  CHECK(ended);
  CHECK(s->handle().state() == ccsb::sandbox_state::destroyed);
}

TEST_CASE("X1: each exec's broker denials carry its execId", "[S7][X1][S6][escape]") {
  api_fixture fx;
  auto s = fx.launch(ccsb::profile::dispatch);
  auto a = fx.start(*s, "echo x > a.pem; echo x > a.txt");
  fx.wait(*s, a);
  auto b = fx.start(*s, "echo x > b.key");
  fx.wait(*s, b);
  auto va = fx.of(a, ccsb::event_kind::violation);
  auto vb = fx.of(b, ccsb::event_kind::violation);
  REQUIRE(va.size() == 1);
  REQUIRE(vb.size() == 1);
  CHECK(va[0].violation.target == fx.work + "/a.pem");
  CHECK(vb[0].violation.target == fx.work + "/b.key");
  CHECK(file_exists(fx.work + "/a.txt"));
  CHECK_FALSE(file_exists(fx.work + "/a.pem"));
  CHECK_FALSE(file_exists(fx.work + "/b.key"));
}

TEST_CASE("X1: a Unix socket one exec bound is the session's own for the next exec", "[S7][X1][escape]") {
  api_fixture fx;
  auto s = fx.launch(ccsb::profile::dispatch);
  const std::string py =
      "import socket, os\n"
      "s = socket.socket(socket.AF_UNIX); s.bind('srv.sock'); s.listen(1)\n"
      "print('listening', flush=True)\n"
      "c, _ = s.accept(); c.sendall(b'hello'); c.close()\n";
  write_file(fx.work + "/srv.py", py);
  hand_to_sandbox_uid(fx.work);
  auto server = fx.start(*s, "exec /usr/bin/python3 srv.py");
  REQUIRE(fx.r.run_until([&] { return fx.stdout_of(*s, server) == "listening\n" || s->finished(server); }));
  REQUIRE(fx.stdout_of(*s, server) == "listening\n");
  std::string out;
  CHECK(fx.run(*s,
               "/usr/bin/python3 -c \"import socket; c = socket.socket(socket.AF_UNIX); c.connect('srv.sock'); "
               "print(c.recv(5).decode())\"",
               &out) == 0);
  CHECK(out == "hello\n");
  fx.wait(*s, server);
  for (const auto& e : fx.events) CHECK(e.kind != ccsb::event_kind::violation);
}

TEST_CASE("T4: an exec with a terminal has a controlling tty of the asked size, and resize reaches it",
          "[T4][S7][escape]") {
  api_fixture fx;
  auto s = fx.launch(ccsb::profile::terminal);
  L::exec_options o;
  o.terminal = ccsb::protocol::terminal_size{30, 100};
  auto id = fx.start(*s, "tty; stty size; read x; stty size; echo done-$x", o);
  REQUIRE(fx.r.run_until([&] { return fx.stdout_of(*s, id).find("30 100") != std::string::npos || s->finished(id); }));
  CHECK_THAT(fx.stdout_of(*s, id), Catch::StartsWith("/dev/pts/"));
  REQUIRE(s->resize(id, 40, 120));
  REQUIRE(s->write_stdin(id, "go\n"));
  fx.wait(*s, id);
  const std::string text = fx.stdout_of(*s, id);
  CHECK_THAT(text, Catch::Contains("30 100"));
  CHECK_THAT(text, Catch::Contains("40 120"));
  CHECK_THAT(text, Catch::Contains("done-go"));
  CHECK(s->exit_code(id) == 0);
  // Without a terminal: no tty, and resize is refused.
  std::string out;
  CHECK(fx.run(*s, "tty || true", &out) == 0);
  CHECK(out == "not a tty\n");
}

TEST_CASE("S7: several sessions share one reactor and one thread, each with its own events", "[S7][escape]") {
  api_fixture fx;
  auto s1 = fx.launch();
  auto s2 = fx.launch();
  CHECK(s1->id() != s2->id());
  auto a = fx.start(*s1, "sleep 0.2; echo one");
  auto b = fx.start(*s2, "echo two");
  fx.wait(*s2, b);
  fx.wait(*s1, a);
  CHECK(fx.stdout_of(*s1, a) == "one\n");
  CHECK(fx.stdout_of(*s2, b) == "two\n");
  // Exec ids count per session (both are 1 here): sessionId tells the events apart.
  CHECK(a == b);
  CHECK(bwraps_of_this_process() == 2);
  s1->destroy();
  std::string out;
  CHECK(fx.run(*s2, "echo alive", &out) == 0);
  CHECK(out == "alive\n");
  s2->destroy();
  CHECK(bwraps_of_this_process() == 0);
}

TEST_CASE("S7: destroy ends running execs with an exit event and leaves no process behind", "[S7][S3][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  auto id = fx.start(*s, "sleep 300 & sleep 300");
  REQUIRE(fx.r.run_once(std::chrono::milliseconds(100)));
  s->destroy();
  REQUIRE(fx.of(id, ccsb::event_kind::exit).size() == 1);
  CHECK(fx.of(id, ccsb::event_kind::exit)[0].exit_code == 128 + SIGKILL);
  CHECK(descendants(::getpid()).empty());
}

// A command cannot kill its supervisor any more (it is the sandbox's PID 1:
// test_process.cpp); the host can, and a dead supervisor still ends only its
// own session, typed.
TEST_CASE("S7: a supervisor killed from the host ends its own session, typed, and nothing else", "[S7][L3][escape]") {
  api_fixture fx;
  auto other = fx.launch();
  auto s = fx.launch();
  auto id = fx.start(*s, "kill -KILL $PPID; kill -KILL 1; sleep 300");
  // The command's own kills do nothing; the host kills the supervisor.
  const auto bwrap_pid = static_cast<pid_t>(detail_int(s->handle(), "pid"));
  pid_t init = -1;
  for (int i = 0; i < 500 && init < 0; ++i) {
    for (const auto& p : descendants(bwrap_pid))
      if (p.comm == "ccsb-init" && pid_in_its_namespace(p.pid) == "1") init = p.pid; // not a child before its exec
    if (init < 0) ::usleep(10 * 1000);
  }
  REQUIRE(init > 0);
  REQUIRE(::kill(init, SIGKILL) == 0);
  fx.wait(*s, id);
  REQUIRE(fx.r.run_until([&] { return s->handle().state() == ccsb::sandbox_state::error; }));
  CHECK_THAT(s->handle().details().at("lastError").get<std::string>(), Catch::Contains("sandbox"));
  auto next = s->exec({"/bin/true"}, {});
  REQUIRE_FALSE(next);
  CHECK(next.err().code == ccsb::errc::illegal_transition);
  std::string out;
  CHECK(fx.run(*other, "echo unaffected", &out) == 0);
  CHECK(out == "unaffected\n");
}

// A caller's callbacks may call back into the session that called them:
// tear it down when a command exits, start the next command from the exit
// of the last, stop everything on some output. destroy() from an exit event
// must not clear the execs while finish() still holds an iterator into
// them, and destroy() must not emit exits while iterating execs a callback
// can change.
TEST_CASE("S7: callbacks may call back into their session: destroy or exec from an exit event, destroy from output",
          "[S7][escape]") {
  api_fixture fx;
  L::session* self = nullptr;
  int exits = 0;
  auto cb = fx.callbacks();
  SECTION("destroy from the exit event of one of two running execs") {
    cb.event = [&](const ccsb::sandbox_event& e) {
      fx.events.push_back(e);
      if (e.kind != ccsb::event_kind::exit) return;
      ++exits;
      if (self) self->destroy();
    };
    auto s = L::session::launch(fx.r, fx.request(), cb);
    REQUIRE(s);
    self = s->get();
    auto slow = fx.start(**s, "sleep 300");
    auto quick = fx.start(**s, "exit 3");
    REQUIRE(fx.r.run_until([&] { return (*s)->finished(quick) && (*s)->finished(slow); }));
    CHECK((*s)->handle().state() == ccsb::sandbox_state::destroyed);
    CHECK(exits == 2); // each exec's exit, once
    CHECK((*s)->exit_code(quick) == 3);
    CHECK((*s)->exit_code(slow) == 137);
    auto again = (*s)->exec({"/bin/true"}, {});
    REQUIRE_FALSE(again);
    CHECK(again.err().code == ccsb::errc::handle_destroyed);
  }
  SECTION("exec from an exit event: the next command runs in the same session") {
    std::optional<L::exec_id> next;
    cb.event = [&](const ccsb::sandbox_event& e) {
      fx.events.push_back(e);
      if (e.kind != ccsb::event_kind::exit || next || !self) return;
      auto id = self->exec({"/bin/sh", "-c", "echo second"}, {});
      if (id) next = *id;
    };
    auto s = L::session::launch(fx.r, fx.request(), cb);
    REQUIRE(s);
    self = s->get();
    auto first = fx.start(**s, "echo first");
    fx.wait(**s, first);
    REQUIRE(next);
    fx.wait(**s, *next);
    CHECK(fx.stdout_of(**s, first) == "first\n");
    CHECK(fx.stdout_of(**s, *next) == "second\n");
    CHECK((*s)->exit_code(*next) == 0);
  }
  SECTION("destroy from an output event, then destroy again from the exits it emits") {
    bool stopped = false;
    cb.output = [&](L::exec_id, int, std::string_view) {
      if (stopped || !self) return;
      stopped = true;
      self->destroy();
    };
    cb.event = [&](const ccsb::sandbox_event& e) {
      fx.events.push_back(e);
      if (e.kind != ccsb::event_kind::exit) return;
      ++exits;
      if (self) self->destroy(); // a no-op while, and after, the session is destroyed
    };
    auto s = L::session::launch(fx.r, fx.request(), cb);
    REQUIRE(s);
    self = s->get();
    auto quiet = fx.start(**s, "sleep 300");
    auto loud = fx.start(**s, "echo hi; sleep 300");
    REQUIRE(fx.r.run_until([&] { return (*s)->finished(quiet) && (*s)->finished(loud); }));
    CHECK(stopped);
    CHECK(exits == 2);
    CHECK((*s)->exit_code(quiet) == 137);
    CHECK((*s)->exit_code(loud) == 137);
    CHECK((*s)->handle().state() == ccsb::sandbox_state::destroyed);
  }
  SECTION("destroy from egressd's violation event") {
    int violations = 0;
    cb.event = [&](const ccsb::sandbox_event& e) {
      fx.events.push_back(e);
      if (e.kind == ccsb::event_kind::exit) ++exits;
      if (e.kind != ccsb::event_kind::violation) return;
      ++violations;
      if (self) self->destroy();
    };
    auto s = L::session::launch(fx.r, fx.request(), cb);
    REQUIRE(s);
    self = s->get();
    auto id = fx.start(**s, "curl -s -o /dev/null -x http://127.0.0.1:3128 http://denied-by-egressd.invalid/; "
                            "curl -s -o /dev/null -x http://127.0.0.1:3128 http://denied-again.invalid/; sleep 300");
    fx.wait(**s, id);
    CHECK(violations >= 1);
    CHECK(exits == 1);
    CHECK((*s)->exit_code(id) == 137);
    CHECK((*s)->handle().state() == ccsb::sandbox_state::destroyed);
  }
  SECTION("destroy from the handle's callback as the session turns warm: no `ready` after it, nothing left") {
    int readies = 0;
    cb.event = [&](const ccsb::sandbox_event& e) {
      fx.events.push_back(e);
      if (e.kind == ccsb::event_kind::ready) ++readies;
    };
    cb.handle = [&](const ccsb::sandbox_handle& h) {
      if (h.state() == ccsb::sandbox_state::warm && self) self->destroy();
    };
    auto started = L::session::start(fx.r, fx.request(), cb); // async: the caller has it before `ready`
    REQUIRE(started);
    self = started->get();
    REQUIRE(fx.r.run_until([&] { return self->handle().state() != ccsb::sandbox_state::created; }));
    REQUIRE(fx.r.run_until([&] { return self->handle().state() == ccsb::sandbox_state::destroyed; }));
    CHECK(readies == 0);
    auto next = self->exec({"/bin/true"}, {});
    REQUIRE_FALSE(next);
    CHECK(next.err().code == ccsb::errc::handle_destroyed);
    std::vector<proc_info> left;
    for (int i = 0; i < 100; ++i) {
      left.clear();
      for (auto& p : descendants(::getpid()))
        if (p.comm == "bwrap" || p.comm == "ccsb-init" || p.comm == "egressd") left.push_back(p);
      if (left.empty()) break;
      ::usleep(50 * 1000);
    }
    CHECK(left.empty());
  }
}

// A server may drop a session it just started or asked for an exec in,
// before the reactor turned (ccsbd reads a launch and a destroy in one
// batch): the none driver's reports still due (ready, started, exec-failed)
// must not reach the deleted session: still scheduled, they would run on
// freed memory at the reactor's next turn.
TEST_CASE("S7 S8: a session deleted before its driver's reports are due gets none of them", "[S7][S8][escape]") {
  api_fixture fx;
  int reports = 0;
  auto cb = fx.callbacks();
  cb.event = [&](const ccsb::sandbox_event&) { ++reports; };
  auto none_request = [&] {
    auto q = fx.request();
    q.chosen = ccsb::backend::none;
    q.host_env = {{"PATH", "/usr/bin:/bin"}};
    return q;
  };
  SECTION("ready still due") {
    auto s = L::session::start(fx.r, none_request(), cb);
    REQUIRE(s);
    s->reset();
  }
  SECTION("started and exec-failed still due") {
    auto s = L::session::start(fx.r, none_request(), cb);
    REQUIRE(s);
    REQUIRE(fx.r.run_until([&] { return (*s)->can_exec(); }));
    REQUIRE((*s)->exec({"/bin/true"}, {}));
    REQUIRE((*s)->exec({"no-such-command-" + random_token()}, {}));
    s->reset();
  }
  CHECK(fx.r.idle()); // nothing of the deleted session is left scheduled
  const int at_delete = reports;
  REQUIRE(fx.r.run_once(std::chrono::milliseconds(50)));
  CHECK(reports == at_delete);
}

TEST_CASE("S7: the exec channel is the supervisor's alone: a command has 0-2 only and cannot send exec requests",
          "[S7][L3][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  // Every descriptor of the command and of its parent (the supervisor),
  // through /proc and pidfd_getfd: none is a socket of the exec channel.
  const std::string py =
      "import ctypes, os, socket\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "mine = sorted(int(f) for f in os.listdir('/proc/self/fd'))\n"
      "print('fds', [f for f in mine if f > 2 and os.path.exists('/proc/self/fd/%d' % f) and "
      "not os.readlink('/proc/self/fd/%d' % f).startswith('/proc/')])\n"
      "pfd = libc.syscall(434, os.getppid(), 0)\n"
      "got = [fd for fd in range(256) if pfd >= 0 and libc.syscall(438, pfd, fd, 0) >= 0]\n"
      "print('taken', got)\n"
      "print('parent', open('/proc/%d/comm' % os.getppid()).read().strip())\n";
  write_file(fx.work + "/probe.py", py);
  hand_to_sandbox_uid(fx.work);
  std::string out;
  REQUIRE(fx.run(*s, "exec /usr/bin/python3 probe.py", &out) == 0);
  CHECK(out == "fds []\ntaken []\nparent ccsb-init\n");
}

// The launcher never sends a request the supervisor refuses; if one comes
// (here: an exec with two stdio descriptors instead of three), the
// supervisor answers exec-failed for its id with the parser's reason; a
// refusal only logged would leave the launcher waiting for the exec forever
// (the runner's timeout would end this test).
TEST_CASE("S7: an exec request the supervisor refuses gets exec-failed with the reason, not silence", "[S7][escape]") {
  sandbox_fixture fx;
  spawn_options o;
  o.argv = {bin_path("init_exec"), fx.work, "1", "/bin/true", "--", "/usr/bin/bwrap", "--unshare-user",
            "--disable-userns", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/", "--dev",
            "/dev", "--proc", "/proc", "--chdir", fx.work, bin_path("ccsb-init"), "--exec-channel", "3"};
  o.env = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "INIT_EXEC_STDIO=2"};
  o.timeout_seconds = 20; // it answers at once
  auto r = run(o);
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Catch::Contains("exec-failed: exec channel message refused: supervisor: exec with 2 descriptors, expected 3"));
}

// issue 9: the native driver queues an exec made while the session is still
// starting (the exec channel exists from bwrap's spawn): the command runs
// once the sandbox is ready, the session reports ready (warm) and then
// active, and the exec's events are the usual ones. ccsb-run launches this
// way, so a launch and its first command need no round trip in between.
TEST_CASE("S7 S4: an exec made while the session starts is queued, runs once it is ready, and keeps the state order",
          "[S7][S4][escape]") {
  api_fixture fx;
  std::vector<ccsb::sandbox_state> states; // as published, in order
  auto cb = fx.callbacks();
  cb.handle = [&](const ccsb::sandbox_handle& h) {
    if (states.empty() || states.back() != h.state()) states.push_back(h.state());
  };
  auto started = L::session::start(fx.r, fx.request(ccsb::profile::dispatch), cb);
  REQUIRE(started);
  auto& s = **started;
  REQUIRE(s.handle().state() == ccsb::sandbox_state::created);
  REQUIRE(s.can_exec());
  auto id = s.exec({"/bin/sh", "-c", "echo queued; touch made.txt; exit 7"}, {});
  INFO((id ? std::string() : id.err().what()));
  REQUIRE(id);
  CHECK(s.handle().state() == ccsb::sandbox_state::created); // not active before it is warm
  fx.wait(s, *id);
  CHECK(s.exit_code(*id) == 7);
  CHECK(fx.stdout_of(s, *id) == "queued\n");
  CHECK(file_exists(fx.work + "/made.txt")); // it ran in the sandbox's workdir
  // The published states, in order: warm (`ready`), then active, then warm again.
  using st = ccsb::sandbox_state;
  CHECK(states == std::vector<st>{st::warm, st::active, st::warm});
  CHECK(std::count_if(fx.events.begin(), fx.events.end(), [](const ccsb::sandbox_event& e) {
          return e.kind == ccsb::event_kind::ready;
        }) == 1);
  // Denials of the broker carry the queued exec's id like any other's.
  auto denied = s.exec({"/bin/sh", "-c", "echo x > k.pem"}, {});
  REQUIRE(denied);
  fx.wait(s, *denied);
  CHECK(s.exit_code(*denied) != 0);
  CHECK_FALSE(fx.of(*denied, ccsb::event_kind::violation).empty());
}

TEST_CASE("S7: a start that fails ends the exec queued before it with 125 and the start's reason", "[S7][S4][escape]") {
  api_fixture fx;
  // It says why and exits.
  auto q = fx.failing_start_request("not-ccsb-init.sh",
                                    "#!/bin/sh\necho 'ccsb-init stand-in: refusing to start' >&2\nexit 125\n");
  auto started = L::session::start(fx.r, q, fx.callbacks());
  REQUIRE(started);
  auto& s = **started;
  auto id = s.exec({"/bin/sh", "-c", "echo never"}, {});
  REQUIRE(id);
  fx.wait(s, *id);
  REQUIRE(s.start_error());
  CHECK(s.handle().state() == ccsb::sandbox_state::destroyed);
  auto failure = s.start_failure(*id);
  REQUIRE(failure);
  CHECK(failure->first == 125);
  CHECK(failure->second == s.start_error()->what());
  CHECK_THAT(failure->second, Catch::Contains("refusing to start"));
  CHECK(s.exit_code(*id) == 125);
  CHECK(fx.stdout_of(s, *id).empty());
  CHECK_FALSE(s.can_exec());
  auto after = s.exec({"/bin/true"}, {});
  REQUIRE_FALSE(after);
  CHECK(after.err().code == ccsb::errc::handle_destroyed);
}

namespace {

// A pty of this test's own: {master, slave}; the slave plays the
// launcher's terminal.
std::pair<L::unique_fd, L::unique_fd> launcher_terminal() {
  L::unique_fd m(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  REQUIRE(m);
  REQUIRE(::grantpt(m.get()) == 0);
  REQUIRE(::unlockpt(m.get()) == 0);
  L::unique_fd tty(::open(::ptsname(m.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
  REQUIRE(tty);
  return {std::move(m), std::move(tty)};
}

} // namespace

// T4: ccsb-run attaches its own terminal (raw mode) to a queued terminal
// exec before the sandbox is ready; a start that fails must give the
// terminal back as it was, since the session is destroyed without the exec
// ever finishing.
TEST_CASE("T4 S7: a failed start gives back the launcher's terminal that a queued terminal exec put in raw mode",
          "[T4][S7][escape]") {
  api_fixture fx;
  auto q = fx.failing_start_request("not-ccsb-init-tty.sh", "#!/bin/sh\nexit 125\n");
  // The launcher's terminal: the slave of a pty of our own.
  auto [m, tty] = launcher_terminal();
  termios before{};
  REQUIRE(::tcgetattr(tty.get(), &before) == 0);
  REQUIRE((before.c_lflag & ICANON) != 0);
  auto started = L::session::start(fx.r, q, fx.callbacks());
  REQUIRE(started);
  auto& s = **started;
  L::exec_options o;
  o.terminal = ccsb::protocol::terminal_size{24, 80};
  auto id = s.exec({"/bin/sh"}, o);
  REQUIRE(id);
  REQUIRE(s.attach_terminal(*id, tty.get()));
  termios raw{};
  REQUIRE(::tcgetattr(tty.get(), &raw) == 0);
  CHECK((raw.c_lflag & ICANON) == 0); // raw while it waits
  fx.wait(s, *id);
  REQUIRE(s.start_error());
  termios after{};
  REQUIRE(::tcgetattr(tty.get(), &after) == 0);
  CHECK(after.c_lflag == before.c_lflag);
  CHECK(after.c_iflag == before.c_iflag);
  CHECK(after.c_oflag == before.c_oflag);
}

// T4: destroy() while a terminal exec is attached gives the launcher's
// terminal back entirely: cooked mode, and no watch left on it. A watch left
// behind would go on reading the terminal (the user's keystrokes swallowed,
// and its callback outliving the session).
TEST_CASE("T4 S7: destroy of a session with an attached terminal stops reading the launcher's terminal",
          "[T4][S7][escape]") {
  api_fixture fx;
  auto s = fx.launch();
  auto [m, tty] = launcher_terminal();
  L::exec_options o;
  o.terminal = ccsb::protocol::terminal_size{24, 80};
  auto id = s->exec({"/bin/sh", "-c", "sleep 30"}, o);
  REQUIRE(id);
  REQUIRE(s->attach_terminal(*id, tty.get()));
  s->destroy();
  termios after{};
  REQUIRE(::tcgetattr(tty.get(), &after) == 0);
  CHECK((after.c_lflag & ICANON) != 0);
  // The user types a line: it is the launcher's to read, not the session's.
  REQUIRE(::write(m.get(), "typed\n", 6) == 6);
  pollfd p{tty.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  for (int i = 0; i < 5; ++i) REQUIRE(fx.r.run_once(std::chrono::milliseconds(20)));
  p.revents = 0;
  REQUIRE(::poll(&p, 1, 0) == 1);
  char buf[16] = {};
  CHECK(::read(tty.get(), buf, sizeof buf) == 6);
}

// bwrap and egressd are spawned without waiting for their execve (issue 9):
// a program that cannot be executed still ends the start with the failed
// step, the path and errno, as when the launcher waited for it.
TEST_CASE("S7: bwrap or egressd that cannot be executed fails the start with execve, the path and errno", "[S7][S4][escape]") {
  api_fixture fx;
  const std::string broken = fx.launcher_dir() + "/broken-interpreter"; // a helper the launcher trusts (L8)
  write_file(broken, "#!/nonexistent/interpreter\n", 0755);
  for (const char* which : {"bwrap", "egressd"}) {
    INFO(which);
    auto q = fx.request(ccsb::profile::spec);
    (std::string(which) == "bwrap" ? q.bwrap_path : q.egressd_path) = broken;
    auto started = L::session::start(fx.r, q, fx.callbacks());
    std::optional<ccsb::error> why;
    if (!started) {
      why = started.err();
    } else {
      auto* s = started->get();
      REQUIRE(fx.r.run_until([&] { return s->handle().state() != ccsb::sandbox_state::created; }));
      REQUIRE(s->start_error());
      why = *s->start_error();
      CHECK(s->handle().state() == ccsb::sandbox_state::destroyed);
    }
    CHECK_THAT(why->what(), Catch::Contains("execve " + broken + ": No such file or directory"));
  }
}

// bwrap is spawned before the policy is rendered and fed its options after
// (render/bwrap/render.hpp "Spawned first, fed later"; issue 9). A start that fails
// in between must kill that bwrap and run nothing. The failure here is the
// first step after the spawn: an unprivileged launcher whose run-dir base
// holds a regular file where the placeholder registry belongs.
TEST_CASE("S7 L8: a start that fails after bwrap was spawned leaves no bwrap behind and runs nothing",
          "[S7][L8][escape]") {
  sandbox_fixture fx;
  const std::string xdg = fx.base + "/xdg";
  make_dirs(xdg + "/ccsb", 0700);
  ::chmod(xdg.c_str(), 0700);
  write_file(xdg + "/ccsb/placeholders", "not a directory\n", 0600);
  const std::string marker = fx.work + "/ran";
  auto o = launch_options(fx, launcher::unprivileged, "spec", fx.events, {}, "touch " + marker);
  o.env.push_back("XDG_RUNTIME_DIR=" + xdg);
  auto r = run(o);
  INFO(r.describe());
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Catch::Contains(xdg + "/ccsb/placeholders"));
  CHECK_THAT(r.err, Catch::Contains("not a directory"));
  CHECK_FALSE(file_exists(marker));
  // Nothing of that launch runs on: bwrap (and egressd) had the launcher's
  // working directory, the fixture's worktree.
  std::string left;
  for (const auto& p : all_procs()) {
    char target[4096];
    const std::string cwd = "/proc/" + std::to_string(p.pid) + "/cwd";
    const ssize_t n = ::readlink(cwd.c_str(), target, sizeof target - 1);
    if (n > 0 && std::string(target, static_cast<std::size_t>(n)) == fx.work)
      left += std::to_string(p.pid) + " " + p.comm + " [" + p.cmdline + "]\n";
  }
  CHECK(left.empty());
}

// A launcher started with a standard descriptor closed (`<&-`, a daemon's
// stdin) must not let its own descriptors take those numbers: the first
// descriptor ccsb-run made (its reactor's signal self-pipe) became fd 0, and
// the sandboxed command got that pipe's read end as its stdin, where the
// launcher's "/dev/null when stdin is closed" check saw an open fd 0.
TEST_CASE("S7 L8: a launcher started with stdin closed gives the command /dev/null, not a descriptor of its own",
          "[S7][L8][escape]") {
  sandbox_fixture fx;
  spawn_options o;
  o.argv = {"/bin/sh", "-c", "exec \"$@\" 0<&-", "sh"};
  for (const auto& a : fx.ccsb_argv({}, sandbox_fixture::wrap("echo @@stdin=$(readlink /proc/self/fd/0)")))
    o.argv.push_back(a);
  o.env = fx.env();
  o.cwd = fx.work;
  auto r = run(o);
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.get("stdin") == "/dev/null");
}

// Execs queued while the session starts wait in the exec channel's socket
// buffer until ccsb-init reads them; a full buffer (the launcher's end is
// non-blocking) must delay the request, not refuse the exec with EAGAIN.
TEST_CASE("S7 S4: execs queued before ready that fill the exec channel's buffer all run", "[S7][S4][escape]") {
  api_fixture fx;
  auto started = L::session::start(fx.r, fx.request(ccsb::profile::spec), fx.callbacks());
  REQUIRE(started);
  auto& s = **started;
  REQUIRE(s.handle().state() == ccsb::sandbox_state::created);
  REQUIRE(s.can_exec());
  const std::string big(100 * 1024, 'x'); // under kMaxMessage; three exceed the default socket buffer
  std::vector<L::exec_id> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = s.exec({"/bin/sh", "-c", "echo " + std::to_string(i), "sh", big}, {});
    INFO("exec " << i << ": " << (id ? std::string() : id.err().what()));
    REQUIRE(id);
    ids.push_back(*id);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    fx.wait(s, ids[i]);
    CHECK(s.exit_code(ids[i]) == 0);
    CHECK(fx.stdout_of(s, ids[i]) == std::to_string(i) + "\n");
  }
}
