// The macOS driver (seatbelt_driver.hpp) on Linux, through the session API
// (S7: one launch, several execs), with both child-exit watches of the
// reactor (pidfd, and the SIGCHLD self-pipe a Mac uses), against stand-ins: a
// fake sandbox-exec (records its argv and environment, then runs the
// command) and a fake `log` (prints one denial line for the tag it is asked
// for, and one for another session). egressd is the real one, listening on
// 127.0.0.1 TCP ports (N1). What the real sandbox-exec and log do is left to
// mac_only/.
#include "sbpl_eval.hpp"
#include "stand_ins.hpp"

#include "ccsb/launch/macos/seatbelt_driver.hpp"
#include "ccsb/launch/session.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace ccsb;

using stand_ins::script;
using stand_ins::slurp;

TEST_CASE("M8: the driver runs sandbox-exec -p PROFILE -- COMMAND with the explicit environment and reports denials",
          "[M8][M6][N1][N2][E1][S5][S7]") {
  namespace fs = std::filesystem;
  const launch::exit_watch mode = GENERATE(launch::exit_watch::sigchld, launch::exit_watch::pidfd);
  INFO((mode == launch::exit_watch::sigchld ? "sigchld (the macOS default)" : "pidfd"));
  fs::path d = fs::temp_directory_path() / ("ccsb-driver-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "run");
  fs::create_directories(d / "ws");
  const std::string dir = d.string();
  stand_ins::sandbox_exec(dir + "/sandbox-exec", dir);
  stand_ins::log(dir + "/log", dir);

  sandbox_spec s;
  s.session_id = "drv1";
  s.workspace_id = "w";
  s.bind_mounts = {{dir + "/ws", dir + "/ws", false}};
  s.guest_workdir = dir + "/ws";
  host_facts hf;
  hf.home = "/Users/u";
  hf.resolve = [](const std::string& p) -> std::optional<std::string> { return p; };
  hf.kind = [](const std::string&) { return path_kind::missing; }; // no .git files
  hf.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/Users/u"}, {"GITHUB_TOKEN", "ghp_x"}};
  auto pol = compile(s, profile::dispatch, hf);
  REQUIRE(pol);

  launch::macos::driver_options opt;
  opt.pol = *pol;
  opt.sandbox_exec = dir + "/sandbox-exec";
  opt.log_tool = dir + "/log";
  opt.egressd_path = std::string(CCSB_BIN_DIR) + "/egressd";
  opt.run_dir = dir + "/run";
  opt.nonce = "abcdef12";
  opt.log_drain = std::chrono::milliseconds(800);
  std::vector<sandbox_event> events;
  std::string out, err;
  launch::session_callbacks cb;
  cb.event = [&](const sandbox_event& e) { events.push_back(e); };
  cb.output = [&](launch::exec_id, int stream, std::string_view b) { (stream == 1 ? out : err).append(b); };
  launch::session_request sr;
  sr.session_id = "drv1";
  sr.pol = *pol;
  launch::reactor reactor(mode);
  auto sess = launch::session::launch(reactor, sr, cb, std::make_unique<launch::macos::seatbelt_driver>(opt));
  if (!sess) FAIL(sess.err().what());
  auto& s1 = **sess;
  auto id = s1.exec({"/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 7"}, {});
  REQUIRE(id);
  REQUIRE(reactor.run_until([&] { return s1.finished(*id); }));
  CHECK(s1.exit_code(*id) == 7);
  CHECK(out == "out\n" + dir + "/ws\n");
  CHECK(err == "err\n");
  // A second exec in the same session: same profile, same egressd.
  launch::exec_options eo;
  eo.env = {{"CCSB_X", "y"}};
  auto id2 = s1.exec({"/bin/sh", "-c", "echo \"$CCSB_X\""}, eo);
  REQUIRE(id2);
  REQUIRE(reactor.run_until([&] { return s1.finished(*id2); }));
  CHECK(s1.exit_code(*id2) == 0);
  CHECK(out == "out\n" + dir + "/ws\ny\n");
  launch::exec_options tty;
  tty.terminal = protocol::terminal_size{24, 80};
  auto refused = s1.exec({"/bin/true"}, tty);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unsupported);
  CHECK(s1.suspend().err().code == errc::unsupported);
  s1.destroy();

  // The profile it was given: the real egressd ports, the tag, the temp dir.
  auto prof = sbeval::load(slurp(dir + "/profile.sb"));
  std::string env = slurp(dir + "/env.txt");
  auto var = [&](const std::string& k) {
    auto at = env.find("\n" + k + "=");
    if (at == std::string::npos && env.rfind(k + "=", 0) == 0) at = 0; else if (at != std::string::npos) ++at;
    if (at == std::string::npos) return std::string("<unset>");
    auto nl = env.find('\n', at);
    return env.substr(at + k.size() + 1, nl - at - k.size() - 1);
  };
  std::string http = var("HTTP_PROXY");
  REQUIRE(http.rfind("http://127.0.0.1:", 0) == 0);
  std::string port = http.substr(17);
  CHECK(sbeval::decide(prof, "network-outbound", "ip:localhost:" + port));
  CHECK_FALSE(sbeval::decide(prof, "network-outbound", "ip:localhost:3128"));
  CHECK(var("TMPDIR") == dir + "/run/tmp/");
  CHECK(var("GITHUB_TOKEN") == "<unset>");
  CHECK(sbeval::decide(prof, "file-write-create", dir + "/run/tmp/x"));
  CHECK(slurp(dir + "/log_argv.txt").find("ENDSWITH \"ccsb-drv1-abcdef12\"") != std::string::npos);

  // Events: starting, ready, output, exactly the session's own denial, an exit per exec.
  REQUIRE(events.size() >= 4);
  CHECK(events.front().kind == event_kind::starting);
  CHECK(events[1].kind == event_kind::ready);
  std::vector<int> exits;
  for (const auto& e : events)
    if (e.kind == event_kind::exit) exits.push_back(e.exit_code);
  CHECK(exits == std::vector<int>{7, 0});
  std::vector<sandbox_violation> v;
  for (const auto& e : events) {
    CHECK(e.session_id == std::optional<std::string>("drv1"));
    if (e.kind == event_kind::violation) v.push_back(e.violation);
  }
  REQUIRE(v.size() == 1);
  CHECK(v[0].action == "file-read-data");
  CHECK(v[0].target == "/Users/u/.ssh/id_rsa");
  fs::remove_all(d);
}

TEST_CASE("M6: the driver refuses to run a proxied policy without egressd, and parses egressd's ready ports", "[M6][N1]") {
  auto p = launch::macos::parse_ready_ports(R"({"event":"ready","http":"127.0.0.1:50001","socks":"127.0.0.1:50002"})");
  REQUIRE(p);
  CHECK(p->first == 50001);
  CHECK(p->second == 50002);
  CHECK_FALSE(launch::macos::parse_ready_ports(R"({"event":"ready","http":"unix:/x","socks":"127.0.0.1:1"})"));
  CHECK_FALSE(launch::macos::parse_ready_ports(R"({"event":"ready","http":"127.0.0.1:0","socks":"127.0.0.1:1"})"));
  CHECK_FALSE(launch::macos::parse_ready_ports(R"({"event":"violation"})"));
  launch::macos::driver_options opt;
  opt.run_dir = "/tmp";
  opt.pol.network.kind = network_kind::proxied;
  launch::reactor reactor;
  launch::session_request sr;
  sr.session_id = "drv2";
  auto r = launch::session::launch(reactor, sr, {}, std::make_unique<launch::macos::seatbelt_driver>(opt));
  REQUIRE_FALSE(r);
  CHECK(r.err().field == "egressd");
}

TEST_CASE("B2: the macOS platform boundary refuses off macOS", "[B2]") {
  auto d = sys::this_platform::user_temp_dir();
  CHECK(d.has_value() == sys::this_platform::real_macos);
  if (!d) CHECK(d.err().code == errc::backend_unavailable);
  // Nor is a Seatbelt driver made: no run dir anywhere.
  auto drv = launch::macos::make_seatbelt_driver({}, "", {});
  CHECK(drv.has_value() == sys::this_platform::real_macos);
}

// start_exec's child makes itself a session leader with setsid() after
// fork; a kill of its exec before that found no process group (ESRCH) and
// was lost: the exec ran to its end (the two-sessions test below failed 1
// run in 10 that way). A child that has not left its parent's group stands
// for that moment here: the signal must still reach it.
TEST_CASE("S7: a kill of a Seatbelt exec that has not made its own group yet still reaches it", "[S7][M8]") {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) ::pause(); // still in the test's process group, like start_exec's child before setsid()
  }
  // The driver's kill step itself: the moment before setsid() cannot be held open through the driver.
  launch::macos::detail::signal_group(child, SIGKILL);
  int st = 0;
  pid_t got = 0;
  for (int i = 0; i < 200 && got == 0; ++i) {
    got = ::waitpid(child, &st, WNOHANG);
    if (got == 0) ::usleep(10000);
  }
  if (got == 0) { // not reached: clean up, then fail
    ::kill(child, SIGKILL);
    ::waitpid(child, &st, 0);
  }
  REQUIRE(got == child);
  CHECK(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGKILL);
}

TEST_CASE("S7: two Seatbelt sessions on one reactor (SIGCHLD watch): each gets its own exits, kill ends only its exec",
          "[S7][M8]") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ccsb-driver2-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string dir = d.string();
  script(dir + "/sandbox-exec", "shift 3\nexec \"$@\"\n");
  script(dir + "/log", "exec sleep 30\n");
  launch::reactor reactor(launch::exit_watch::sigchld);
  struct one {
    std::unique_ptr<launch::session> s;
    std::vector<sandbox_event> events;
    std::string out;
  };
  one a, b;
  for (auto* x : {&a, &b}) {
    const std::string name = x == &a ? "a" : "b";
    fs::create_directories(d / ("run-" + name));
    launch::macos::driver_options opt;
    opt.pol.session_id = "two-" + name;
    opt.pol.network.kind = network_kind::open; // no egressd: this test is about exits
    opt.pol.workdir = dir;
    opt.sandbox_exec = dir + "/sandbox-exec";
    opt.log_tool = dir + "/log";
    opt.run_dir = dir + "/run-" + name;
    opt.nonce = "nonce" + name + "123";
    opt.log_drain = std::chrono::milliseconds(0);
    launch::session_callbacks cb;
    cb.event = [x](const sandbox_event& e) { x->events.push_back(e); };
    cb.output = [x](launch::exec_id, int, std::string_view bytes) { x->out.append(bytes); };
    launch::session_request sr;
    sr.session_id = opt.pol.session_id;
    auto s = launch::session::launch(reactor, sr, cb, std::make_unique<launch::macos::seatbelt_driver>(opt));
    if (!s) FAIL(s.err().what());
    x->s = std::move(*s);
  }
  // A child of the test itself, outside both sessions: never reaped by them.
  pid_t foreign = ::fork();
  if (foreign == 0) ::_exit(42);
  auto slow = a.s->exec({"/bin/sh", "-c", "sleep 0.3; echo a-done; exit 3"}, {});
  auto fast = b.s->exec({"/bin/sh", "-c", "echo b-done; exit 4"}, {});
  auto doomed = b.s->exec({"/bin/sleep", "30"}, {});
  REQUIRE(slow);
  REQUIRE(fast);
  REQUIRE(doomed);
  REQUIRE(reactor.run_until([&] { return b.s->finished(*fast); }));
  CHECK(b.s->exit_code(*fast) == 4);
  CHECK_FALSE(a.s->finished(*slow));
  REQUIRE(b.s->kill(*doomed, "stop"));
  REQUIRE(reactor.run_until([&] { return a.s->finished(*slow) && b.s->finished(*doomed); }));
  CHECK(a.s->exit_code(*slow) == 3);
  CHECK(b.s->exit_code(*doomed) == 128 + SIGKILL);
  CHECK(a.out == "a-done\n");
  CHECK(b.out == "b-done\n");
  int st = 0;
  CHECK(::waitpid(foreign, &st, 0) == foreign);
  CHECK(WEXITSTATUS(st) == 42);
  a.s->destroy();
  b.s->destroy();
  auto exits = [](const one& x) {
    std::vector<int> v;
    for (const auto& e : x.events)
      if (e.kind == event_kind::exit) v.push_back(e.exit_code);
    return v;
  };
  CHECK(exits(a) == std::vector<int>{3});
  CHECK(exits(b) == std::vector<int>{4, 128 + SIGKILL});
  fs::remove_all(d);
}

TEST_CASE("L8: the Seatbelt driver's run-dir removal never follows a symlink", "[L8][S7]") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ccsb-rmtree-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "outside" / "keep");
  std::ofstream(d / "outside" / "keep" / "file") << "x";
  fs::create_directories(d / "run" / "tmp" / "sub");
  std::ofstream(d / "run" / "tmp" / "sub" / "f") << "y";
  fs::create_directory_symlink(d / "outside", d / "run" / "tmp" / "link");
  fs::create_symlink(d / "outside" / "keep" / "file", d / "run" / "tmp" / "filelink");
  int pfd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(pfd >= 0);
  // The run-dir removal step itself, on a tree planted with symlinks out of it.
  CHECK(launch::macos::detail::remove_tree_at(pfd, "run") == 0);
  ::close(pfd);
  CHECK_FALSE(fs::exists(d / "run"));
  CHECK(fs::exists(d / "outside" / "keep" / "file"));
  fs::remove_all(d);
}

TEST_CASE("E5: a Seatbelt session has a private scratch HOME with only the host's git identity, gone with the session",
          "[E5][S7]") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ccsb-home-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "run");
  fs::create_directories(d / "ws");
  const std::string dir = d.string();
  stand_ins::sandbox_exec(dir + "/sandbox-exec", dir);
  stand_ins::log(dir + "/log", dir);
  sandbox_spec s;
  s.session_id = "home1";
  s.workspace_id = "w";
  s.bind_mounts = {{dir + "/ws", dir + "/ws", false}};
  s.guest_workdir = dir + "/ws";
  s.network_enabled = false;
  host_facts hf;
  hf.home = "/Users/u";
  hf.resolve = [](const std::string& p) -> std::optional<std::string> { return p; };
  hf.kind = [](const std::string&) { return path_kind::missing; };
  hf.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/Users/u"}};
  auto pol = compile(s, profile::dispatch, hf);
  REQUIRE(pol);
  struct variant {
    bwrap_facts::git_identity id;
    std::string gitconfig, note;
  };
  for (const auto& v : {variant{{"Mac Person", "mac@example.com"},
                                "[user]\n\tname = \"Mac Person\"\n\temail = \"mac@example.com\"\n",
                                "git identity: user.name and user.email copied into"},
                        variant{{"Evil\n[core]\n\tsshCommand = x", "mac@example.com"},
                                "[user]\n\temail = \"mac@example.com\"\n", "user.name holds a control character"}}) {
    INFO(v.note);
    launch::macos::driver_options opt;
    opt.pol = *pol;
    opt.sandbox_exec = dir + "/sandbox-exec";
    opt.log_tool = dir + "/log";
    opt.egressd_path = std::string(CCSB_BIN_DIR) + "/egressd";
    opt.run_dir = dir + "/run";
    opt.nonce = "abcdef12";
    opt.log_drain = std::chrono::milliseconds(200);
    opt.git_identity = v.id;
    std::string out, log;
    launch::session_callbacks cb;
    cb.event = [](const sandbox_event&) {};
    cb.output = [&](launch::exec_id, int stream, std::string_view b) {
      if (stream == 1) out.append(b);
    };
    cb.log = [&](const std::string& l) { log += l + "\n"; };
    launch::session_request sr;
    sr.session_id = "home1";
    sr.pol = *pol;
    launch::reactor reactor(launch::exit_watch::sigchld);
    auto sess = launch::session::launch(reactor, sr, cb, std::make_unique<launch::macos::seatbelt_driver>(opt));
    if (!sess) FAIL(sess.err().what());
    auto& s1 = **sess;
    auto id = s1.exec({"/bin/sh", "-c", "echo \"$HOME\"; cat \"$HOME/.gitconfig\"; ls -A \"$HOME\"; stat -c %a \"$HOME\""},
                      {});
    REQUIRE(id);
    REQUIRE(reactor.run_until([&] { return s1.finished(*id); }));
    CHECK(s1.exit_code(*id) == 0);
    const std::string home = dir + "/run/home";
    CHECK(out == home + "\n" + v.gitconfig + ".gitconfig\n700\n");
    CHECK(log.find(v.note) != std::string::npos);
    CHECK(fs::exists(home));
    s1.destroy();
    CHECK_FALSE(fs::exists(home)); // removed with the session, also from a run dir the driver did not make
    auto prof = sbeval::load(slurp(dir + "/profile.sb"));
    CHECK(sbeval::decide(prof, "file-write-create", home + "/.npm/x"));
    CHECK_FALSE(sbeval::decide(prof, "process-exec", home + "/bin/tool"));
    CHECK(slurp(dir + "/env.txt").find("\nHOME=" + home + "\n") != std::string::npos);
  }
  fs::remove_all(d);
}
