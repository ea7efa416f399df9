// End-to-end tests of ccsb-run with real bwrap, ccsb-init and egressd (no mocks).
// Tests that cannot run (no bwrap, no egressd) FAIL; none is skipped.
// No timing assertions: waits are bounded polls, never "took less than".
#include "ccsb/broker/kernel_probe.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/limits.hpp"
#include "ccsb/launch/placeholders.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/userns_probe.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"
#include "ccsb_test/process.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <regex>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace ccsb;
namespace fs = std::filesystem;

namespace {

const std::string kBin = CCSB_BIN_DIR;

struct run_result {
  int exit_code{-1};
  std::string out, err;
};

// A fresh fake home with a secret, and a project directory as the cwd.
struct scratch {
  std::string root, home, proj;
  ccsb_test::temp_dir tmp{"ccsb-linux-test"};
  scratch() {
    root = tmp.path();
    home = root + "/home";
    proj = root + "/proj";
    fs::create_directories(home + "/.ssh");
    fs::create_directories(proj);
    std::ofstream(home + "/.ssh/id_rsa") << "TOPSECRET-KEY\n";
    // L1: as root the sandbox runs as the workdir's owner, never host root;
    // hand the scratch tree to an unprivileged uid as a server would.
    if (::geteuid() == 0)
      for (auto& e : fs::recursive_directory_iterator(root))
        REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
    if (::geteuid() == 0) REQUIRE(::lchown(root.c_str(), 65534, 65534) == 0);
  }
  std::string file(const std::string& name) const { return root + "/" + name; }
};

env_list base_env(const scratch& s) {
  return {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", s.home}, {"LANG", "C.UTF-8"}};
}

std::vector<std::string> ccsb_run(std::vector<std::string> args) {
  args.insert(args.begin(), kBin + "/ccsb-run");
  return args;
}

ccsb_test::process_options options(const std::vector<std::string>& argv, const env_list& env,
                                   const std::string& cwd) {
  REQUIRE(::access((kBin + "/ccsb-run").c_str(), X_OK) == 0);
  REQUIRE(::access((kBin + "/ccsb-init").c_str(), X_OK) == 0);
  REQUIRE(::access((kBin + "/egressd").c_str(), X_OK) == 0);
  ccsb_test::process_options o;
  o.argv = argv;
  for (const auto& v : env) o.env.push_back(v.name + "=" + v.value);
  o.cwd = cwd;
  o.own_process_group = true;
  return o;
}

pid_t start(const std::vector<std::string>& argv, const env_list& env, const std::string& cwd, int out_fd, int err_fd) {
  auto o = options(argv, env, cwd);
  o.stdout_fd = out_fd;
  o.stderr_fd = err_fd;
  return ccsb_test::spawn(o);
}

run_result run(const std::vector<std::string>& argv, const env_list& env, const std::string& cwd) {
  auto done = ccsb_test::run(options(argv, env, cwd), std::chrono::seconds(120));
  run_result r;
  r.exit_code = done.term_signal ? 128 + done.term_signal : done.exit_code;
  r.out = std::move(done.out);
  r.err = std::move(done.err);
  return r;
}

std::vector<sandbox_event> read_events(const std::string& path) {
  std::vector<sandbox_event> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    auto v = parse_json(line);
    REQUIRE(v);
    auto e = event_from_json(*v);
    if (!e) FAIL("bad event line: " << line << ": " << e.err().what());
    out.push_back(*e);
  }
  return out;
}

std::vector<event_kind> kinds_without_output(const std::vector<sandbox_event>& ev) {
  std::vector<event_kind> k;
  for (const auto& e : ev)
    if (e.kind != event_kind::stdout_ && e.kind != event_kind::stderr_) k.push_back(e.kind);
  return k;
}

std::string joined(const std::vector<sandbox_event>& ev, event_kind k) {
  std::string s;
  for (const auto& e : ev)
    if (e.kind == k) s += e.data;
  return s;
}

picojson::object read_handle(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  picojson::value v;
  std::string err = picojson::parse(v, ss.str());
  if (!err.empty() || !v.is<picojson::object>()) return {};
  return v.get<picojson::object>();
}

std::string handle_state(const std::string& path) {
  auto h = read_handle(path);
  auto it = h.find("state");
  return it != h.end() && it->second.is<std::string>() ? it->second.get<std::string>() : "";
}

std::int64_t handle_int(const std::string& path, const std::string& key) {
  auto h = read_handle(path);
  const auto& d = h["details"];
  if (!d.is<picojson::object>()) return -1;
  auto o = d.get<picojson::object>();
  return o.count(key) && o[key].is<std::int64_t>() ? o[key].get<std::int64_t>() : -1;
}

std::string handle_str(const std::string& path, const std::string& key) {
  auto h = read_handle(path);
  const auto& d = h["details"];
  if (!d.is<picojson::object>()) return "";
  auto o = d.get<picojson::object>();
  return o.count(key) && o[key].is<std::string>() ? o[key].get<std::string>() : "";
}

// Live (not zombie) processes whose command line contains `token`.
std::vector<pid_t> processes_with(const std::string& token) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    pid_t pid = std::atoi(e->d_name);
    if (pid == ::getpid()) continue;
    std::ifstream c("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(c)), {});
    if (cmd.find(token) == std::string::npos) continue;
    std::ifstream st("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(st)), {});
    auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
    out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

bool alive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(st)), {});
  if (stat.empty()) return false;
  auto close = stat.rfind(')');
  return !(close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

template <class F> bool eventually(F f, int seconds = 30) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return f();
}

std::string spec_file(const scratch& s, const std::string& session_id) {
  std::string path = s.file("spec.json");
  std::ofstream(path) << "{\"sessionId\":\"" << session_id << "\",\"workspaceId\":\"w\",\"bindMounts\":[{\"hostPath\":\""
                      << s.proj << "\",\"guestPath\":\"" << s.proj << "\"}],\"guestWorkdir\":\"" << s.proj << "\"}";
  return path;
}

} // namespace

TEST_CASE("S5: ccsb-run --profile spec -- echo hi streams starting, ready, stdout, exit", "[S5][L1][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--events", s.file("ev"), "--", "echo", "hi"}), base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "hi\n");
  auto ev = read_events(s.file("ev"));
  CHECK(kinds_without_output(ev) == std::vector<event_kind>{event_kind::starting, event_kind::ready, event_kind::exit});
  CHECK(joined(ev, event_kind::stdout_) == "hi\n");
  REQUIRE(!ev.empty());
  CHECK(ev.back().exit_code == 0);
}

TEST_CASE("L1: the sandbox's /etc is minimal and read-only — no copied file's descriptor reaches the command", "[L1][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--", "sh", "-c",
                         "head -c 5 /etc/passwd; echo; test -e /etc/shadow || echo no-shadow; "
                         "echo x > /etc/passwd || echo ro-file; touch /etc/new || echo ro-dir; "
                         "mkdir /etc/ssl/x || echo ro-ssl; ls /proc/self/fd | tr '\\n' ' '"}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "root:\nno-shadow\nro-file\nro-dir\nro-ssl\n0 1 2 3 ");
  CHECK_THAT(r.err, Catch::Contains("Read-only file system"));
}

TEST_CASE("S7: ccsb-run --help explains every option of its usage line, with examples", "[S7][launcher]") {
  scratch s;
  auto h = run(ccsb_run({"--help"}), base_env(s), s.proj);
  CHECK(h.exit_code == 0);
  CHECK_THAT(h.out, Catch::Contains("Examples"));
  CHECK_THAT(h.out, Catch::Contains("Exit status"));
  // Every option the usage line (printed for a bad option) names is explained.
  auto bad = run(ccsb_run({"--no-such-option"}), base_env(s), s.proj);
  CHECK(bad.exit_code != 0);
  std::regex opt("--[a-z][a-z-]*");
  std::size_t seen = 0;
  for (auto it = std::sregex_iterator(bad.err.begin(), bad.err.end(), opt); it != std::sregex_iterator(); ++it) {
    if (it->str() == "--no-such-option") continue;
    ++seen;
    INFO(it->str());
    CHECK_THAT(h.out, Catch::Contains("  " + it->str()));
  }
  CHECK(seen >= 20);
}

TEST_CASE("B4: exactly one start-up line, first on stderr", "[B4][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--", "true"}), base_env(s), s.proj);
  CHECK(r.exit_code == 0);
  CHECK(r.err.rfind("agent sandbox ON (bubblewrap", 0) == 0);
  CHECK_THAT(r.err, Catch::Contains("profile spec"));
  // B6: the badge follows the B4 line.
  auto nl = r.err.find('\n');
  REQUIRE(nl != std::string::npos);
  CHECK(r.err.substr(nl + 1).rfind("ccsb-run: session backend: native (profile spec)\n", 0) == 0);
  auto r2 = run(ccsb_run({"--sandbox", "off", "--", "true"}), base_env(s), s.proj);
  CHECK(r2.err.rfind("agent sandbox DISABLED by --sandbox off\n", 0) == 0);
}

TEST_CASE("L2: a read-denied secret cannot be read, listed or overwritten", "[L2][P4][launcher]") {
  scratch s;
  // The host's HOME is bound read-only; HOME inside is the E5 scratch HOME,
  // so the script names the host's path ($1).
  auto r = run(ccsb_run({"--profile", "spec", "--network", "off", "--bind", s.home + ":ro", "--", "sh", "-c",
                         "cat \"$1/.ssh/id_rsa\"; ls \"$1/.ssh\"; echo x > \"$1/.ssh/id_rsa\"; echo done", "sh", s.home}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "done\n");
  CHECK(r.out.find("TOPSECRET") == std::string::npos);
  CHECK(r.err.find("TOPSECRET") == std::string::npos);
  CHECK_THAT(r.err, Catch::Contains("Permission denied"));
  std::ifstream f(s.home + "/.ssh/id_rsa");
  std::string content((std::istreambuf_iterator<char>(f)), {});
  CHECK(content == "TOPSECRET-KEY\n");
}

TEST_CASE("L2: P5 paths in a writable worktree stay read-only — placeholders are removed afterwards", "[L2][P5][launcher]") {
  scratch s;
  fs::create_directories(s.proj + "/.git/hooks");
  std::ofstream(s.proj + "/.git/config") << "[core]\n";
  auto r = run(ccsb_run({"--profile", "spec", "--network", "off", "--", "sh", "-c",
                         "echo evil > .git/hooks/pre-commit; echo evil >> .git/config; mkdir .claude/x; "
                         "mv .git .git2; echo ok > file.txt"}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(s.proj + "/.git/hooks/pre-commit"));
  std::ifstream cfg(s.proj + "/.git/config");
  std::string c((std::istreambuf_iterator<char>(cfg)), {});
  CHECK(c == "[core]\n");
  CHECK(fs::exists(s.proj + "/.git"));      // pinned: rename refused
  CHECK_FALSE(fs::exists(s.proj + "/.git2"));
  CHECK(fs::exists(s.proj + "/file.txt"));  // the worktree itself is writable
  CHECK_FALSE(fs::exists(s.proj + "/.claude")); // placeholder removed at teardown
  CHECK_FALSE(fs::exists(s.proj + "/.bashrc"));
}

TEST_CASE("L4 X1: the dispatch profile runs only with the creation-rule broker, else it is refused naming P7/L4",
          "[L4][P7][X1][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--", "sh", "-c", "echo k > a.pem; echo pem=$?; echo n > a.txt; echo txt=$?"}), base_env(s),
               s.proj);
  INFO(r.out << r.err);
  if (ccsb::broker::creation_rules_supported().ok) {
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("pem=1") || Catch::Contains("pem=2"));
    CHECK_THAT(r.out, Catch::Contains("txt=0"));
    CHECK_FALSE(fs::exists(s.proj + "/a.pem"));
    CHECK(fs::exists(s.proj + "/a.txt"));
  } else {
    CHECK(r.exit_code == 125);
    CHECK_THAT(r.err, Catch::Contains("P7/L4"));
    CHECK_THAT(r.err, Catch::Contains("--profile spec"));
  }
}

TEST_CASE("L3: the sandbox network namespace has only loopback", "[L3][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--", "cat", "/proc/net/dev"}), base_env(s), s.proj);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.out);
  std::string line;
  std::vector<std::string> ifaces;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    ifaces.push_back(name);
  }
  CHECK(ifaces == std::vector<std::string>{"lo"});
}

TEST_CASE("N7: a denied connection through the bridge becomes a violation event", "[N7][N6][L3][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--network", "off", "--events", s.file("ev"), "--", "curl", "-s",
                         "-o", "/dev/null", "http://denied.invalid/"}),
               base_env(s), s.proj);
  INFO(r.err);
  auto ev = read_events(s.file("ev"));
  bool seen = false;
  for (const auto& e : ev)
    if (e.kind == event_kind::violation && e.violation.action == "network-outbound" &&
        e.violation.target == "denied.invalid:80")
      seen = true;
  CHECK(seen);
}

TEST_CASE("L1: an unprivileged user gets the same sandbox through a user namespace", "[L1][L3][P4][N7][launcher]") {
  // ccsb-run as uid/gid 65534 (setpriv, util-linux): bwrap then needs
  // --unshare-user. The three programs are copied next to each other into the
  // scratch dir so the build directory's permissions do not matter.
  scratch s;
  const uid_t nobody = 65534;
  const std::string bin = s.file("bin");
  fs::create_directories(bin);
  fs::create_directories(s.file("out")); // the events file, outside every writable bind (L8)
  for (const char* prog : {"ccsb-run", "ccsb-init", "egressd"})
    fs::copy_file(kBin + "/" + prog, bin + "/" + prog);
  for (const auto& p : {s.root, bin})
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  for (const auto& p : fs::recursive_directory_iterator(s.root))
    if (p.path().string().rfind(bin, 0) != 0) REQUIRE(::chown(p.path().c_str(), nobody, nobody) == 0);
  REQUIRE(::chown(s.home.c_str(), nobody, nobody) == 0);
  REQUIRE(::chown(s.proj.c_str(), nobody, nobody) == 0);
  REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);

  const std::string ev = s.file("out") + "/events.jsonl";
  auto r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin + "/ccsb-run",
                "--profile", "spec", "--bind", s.home + ":ro", "--network", "off", "--events", ev, "--", "sh", "-c",
                "cat \"$HOME/.ssh/id_rsa\"; echo \"cat=$?\"; id -u; tail -n +3 /proc/net/dev | cut -d: -f1; "
                "curl -s -o /dev/null http://denied.invalid/; echo made > \"$PWD/made-by-sandbox\""},
               base_env(s), s.proj);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("TOPSECRET") == std::string::npos); // P4: masked for this user too
  CHECK(r.out.find("cat=1") != std::string::npos);
  CHECK(r.out.find("65534") != std::string::npos);     // no privilege gained inside
  CHECK(r.out.find("    lo\n") != std::string::npos);  // L3: only loopback
  CHECK(r.out.find("eth") == std::string::npos);
  struct stat st{};
  REQUIRE(::stat((s.proj + "/made-by-sandbox").c_str(), &st) == 0); // the worktree stays writable
  CHECK(st.st_uid == nobody);
  bool seen = false;
  for (const auto& e : read_events(ev))
    if (e.kind == event_kind::violation && e.violation.target == "denied.invalid:80") seen = true;
  CHECK(seen); // N7: egressd (running as the user) reported the denial
}

TEST_CASE("S5: timeout kills the sandbox and reports killed", "[S5][launcher]") {
  scratch s;
  std::string secs = "6" + std::to_string(::getpid()) + "1";
  auto r = run(ccsb_run({"--profile", "spec", "--timeout", "1", "--events", s.file("ev"), "--", "sleep", secs}),
               base_env(s), s.proj);
  CHECK(r.exit_code == 137);
  auto ev = read_events(s.file("ev"));
  bool killed = false;
  for (const auto& e : ev)
    if (e.kind == event_kind::killed && e.reason == "timeout" && e.signal == SIGKILL) killed = true;
  CHECK(killed);
  CHECK(eventually([&] { return processes_with(secs).empty(); }));
}

TEST_CASE("S4: teardown leaves no process and removes the run dir", "[S4][S3][launcher]") {
  scratch s;
  std::string token = "ccsbteardown" + std::to_string(::getpid());
  auto r = run(ccsb_run({"--profile", "spec", "--spec", spec_file(s, token), "--handle", s.file("handle"), "--", "sh",
                         "-c", "sleep 600 & echo started; exit 3"}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(handle_state(s.file("handle")) == "destroyed");
  std::string run_dir = handle_str(s.file("handle"), "runDir");
  REQUIRE(!run_dir.empty());
  CHECK_FALSE(fs::exists(run_dir));
  CHECK_FALSE(alive(static_cast<pid_t>(handle_int(s.file("handle"), "egressdPid"))));
  CHECK_FALSE(alive(static_cast<pid_t>(handle_int(s.file("handle"), "pid"))));
  // The background sleep died with the sandbox's PID namespace; nothing
  // carrying the session's run dir (egressd) is left.
  CHECK(eventually([&] { return processes_with(run_dir).empty(); }));
}

namespace {

// Every cgroup directory named `name` under /sys/fs/cgroup (any hierarchy).
std::vector<std::string> cgroup_dirs_named(const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator("/sys/fs/cgroup", fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it.depth() > 6) it.disable_recursion_pending();
    if (it->is_directory(ec) && !it->is_symlink(ec) && it->path().filename() == name) out.push_back(it->path().string());
  }
  return out;
}

} // namespace

TEST_CASE("S4 L8: a SIGKILLed launcher takes the sandbox and egressd with it — the next launch sweeps its run dir and its cgroups", "[S4][N1][L8][launcher]") {
  scratch s;
  std::string token = "ccsbkill" + std::to_string(::getpid());
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  auto env = base_env(s);
  fs::create_directories(s.file("xdg"));
  env.push_back({"XDG_RUNTIME_DIR", s.file("xdg")});
  pid_t pid = start(ccsb_run({"--profile", "spec", "--spec", spec_file(s, token), "--handle", s.file("handle"), "--",
                              "sh", "-c", "sleep 9" + token.substr(8) + "0 & exec sleep 9" + token.substr(8) + "1"}),
                    env, s.proj, null.get(), null.get());
  REQUIRE(eventually([&] { return handle_state(s.file("handle")) == "active"; }));
  pid_t egressd = static_cast<pid_t>(handle_int(s.file("handle"), "egressdPid"));
  pid_t bwrap = static_cast<pid_t>(handle_int(s.file("handle"), "pid"));
  std::string run_dir = handle_str(s.file("handle"), "runDir");
  REQUIRE(alive(egressd));
  REQUIRE(alive(bwrap));
  const std::string s0 = "9" + token.substr(8) + "0", s1 = "9" + token.substr(8) + "1";
  REQUIRE(eventually([&] { return !processes_with(s1).empty(); }));
  // The session's cgroups carry its run dir's name (a root launcher has
  // them: v2, or v1's memory, pids and freezer).
  const auto cgroups = cgroup_dirs_named(fs::path(run_dir).filename().string());
  if (::geteuid() == 0) REQUIRE_FALSE(cgroups.empty());
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(eventually([&] { return !alive(egressd) && !alive(bwrap); }));
  CHECK(eventually([&] { return processes_with(s0).empty() && processes_with(s1).empty(); }));
  CHECK(eventually([&] { return processes_with(run_dir).empty(); }));
  // A SIGKILLed launcher cannot clean up its run dir; the next launcher's
  // sweep removes it (and the still-empty placeholders). As root the base
  // (/run/ccsb-sessions) is shared by every launcher on the host, so under
  // ctest -j2 another test's launcher may be the one that sweeps it (any
  // launcher's sweep takes every dead launcher's dir). Nothing but a sweep
  // removes it, so its absence after this launch proves one ran; with a
  // private base (not root) it must have been this launch's.
  auto r = run(ccsb_run({"--profile", "spec", "--", "true"}), env, s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const bool we_swept = r.err.find("removed a stale run dir of a dead launcher: " + run_dir) != std::string::npos;
  if (::geteuid() != 0) CHECK(we_swept); // a private base: nobody else sweeps it
  CHECK_FALSE(fs::exists(run_dir));
  CHECK_FALSE(fs::exists(s.proj + "/.claude")); // the placeholder bwrap created went with it
  // L8: and its cgroups, which nobody else removes (a SIGKILLed root
  // launcher's would otherwise stay for good).
  for (const auto& d : cgroups) {
    INFO(d);
    CHECK_FALSE(fs::exists(d));
  }
  if (we_swept)
    for (const auto& d : cgroups) CHECK_THAT(r.err, Catch::Contains("removed its cgroup: " + d));
}

namespace {

// The pids of the process tree under `root` (root included), from /proc.
std::vector<pid_t> process_tree(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> kids;
  DIR* d = ::opendir("/proc");
  if (!d) return {};
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream st("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(st)), {});
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    kids[ppid].push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  std::vector<pid_t> out{root};
  for (std::size_t i = 0; i < out.size(); ++i)
    for (pid_t k : kids[out[i]]) out.push_back(k);
  return out;
}

std::vector<std::string> tids_of(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec))
    out.push_back(e.path().filename().string());
  return out;
}

} // namespace

TEST_CASE("L7: every process and every thread of a root launcher's session, the command's later threads and children "
          "included, and its egressd, is in each of the session's cgroups",
          "[L7][launcher][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root): only root gets cgroups");
  scratch s;
  const std::string token = "ccsbcg" + std::to_string(::getpid());
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  // Three threads, then a child of fork that starts a thread of its own.
  const std::string py = "import os, threading, time\n"
                         "def idle(): time.sleep(120)\n"
                         "for _ in range(3): threading.Thread(target=idle, daemon=True).start()\n"
                         "if os.fork() == 0:\n"
                         "    threading.Thread(target=idle, daemon=True).start()\n"
                         "time.sleep(120)\n";
  pid_t pid = start(ccsb_run({"--profile", "spec", "--handle", s.file("handle"), "--", "python3", "-c", py, token}),
                    base_env(s), s.proj, null.get(), null.get());
  REQUIRE(eventually([&] { return handle_state(s.file("handle")) == "active"; }));
  const pid_t bwrap = static_cast<pid_t>(handle_int(s.file("handle"), "pid"));
  const std::string name = fs::path(handle_str(s.file("handle"), "runDir")).filename().string();
  CHECK(handle_str(s.file("handle"), "limits").rfind("cgroup-", 0) == 0);
  // Both pythons are up with all their threads (4 and 2); ccsb-run's own
  // command line names the token too, so only bwrap's tree counts.
  REQUIRE(eventually([&] {
    std::size_t pythons = 0, threads = 0;
    const auto tree = process_tree(bwrap);
    for (pid_t q : processes_with(token))
      if (std::find(tree.begin(), tree.end(), q) != tree.end()) {
        ++pythons;
        threads += tids_of(q).size();
      }
    return pythons == 2 && threads == 6;
  }));
  const auto tree = process_tree(bwrap);
  std::set<std::string> tids;
  for (pid_t q : tree)
    for (const auto& t : tids_of(q)) tids.insert(t);
  INFO("the sandbox's threads (bwrap's tree): " << tids.size());
  CHECK(tids.size() >= 8); // bwrap, ccsb-init (its PID 1), the two pythons' 6 threads
  // Each thread, as /proc shows it: in the session's cgroup of every
  // hierarchy the session uses (v2, or v1's memory, pids and freezer).
  const auto dirs = cgroup_dirs_named(name);
  REQUIRE_FALSE(dirs.empty());
  for (pid_t q : tree)
    for (const auto& t : tids_of(q)) {
      std::ifstream cg("/proc/" + std::to_string(q) + "/task/" + t + "/cgroup");
      std::string line, lines;
      int in_session = 0;
      while (std::getline(cg, line)) {
        lines += line + "\n";
        if (line.size() > name.size() && line.compare(line.size() - name.size() - 1, std::string::npos, "/" + name) == 0)
          ++in_session;
      }
      INFO("thread " << t << " of pid " << q << ":\n" << lines);
      CHECK(in_session == static_cast<int>(dirs.size()));
    }
  // And as each cgroup lists them: exactly the sandbox's threads and the
  // session's egressd (L7: it runs in the session's limits too).
  const pid_t egressd = static_cast<pid_t>(handle_int(s.file("handle"), "egressdPid"));
  REQUIRE(egressd > 0);
  for (const auto& t : tids_of(egressd)) tids.insert(t);
  for (const auto& d : dirs) {
    const bool v2 = fs::exists(d + "/cgroup.threads");
    std::ifstream in(d + (v2 ? "/cgroup.threads" : "/tasks"));
    std::set<std::string> listed;
    for (std::string t; in >> t;) listed.insert(t);
    INFO(d);
    CHECK(listed == tids);
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(eventually([&] { return processes_with(token).empty(); }));
}

namespace {

std::string first_line_of(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The session's CPU setting as its cgroup on the host shows it: {share,
// max} from cpu.weight and cpu.max (v2) or cpu.shares and
// cpu.cfs_quota_us + cpu.cfs_period_us (v1, as "QUOTA PERIOD"); one entry
// per cgroup of the session that has the cpu controller.
std::vector<std::pair<std::string, std::string>> cpu_settings_of(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& d : cgroup_dirs_named(name)) {
    if (fs::exists(d + "/cpu.weight"))
      out.emplace_back(first_line_of(d + "/cpu.weight"), first_line_of(d + "/cpu.max"));
    else if (fs::exists(d + "/cpu.shares"))
      out.emplace_back(first_line_of(d + "/cpu.shares"),
                       first_line_of(d + "/cpu.cfs_quota_us") + " " + first_line_of(d + "/cpu.cfs_period_us"));
  }
  return out;
}

} // namespace

TEST_CASE("L7: a root launcher's session has a cpu cgroup of its own at the documented equal share, and --cpus 0.5 "
          "caps it at 50000 per 100000",
          "[L7][launcher][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root): only root gets cgroups");
  for (const bool capped : {false, true}) {
    INFO((capped ? "--cpus 0.5" : "default limits"));
    scratch s;
    const std::string token = "ccsbcpu" + std::to_string(::getpid()) + (capped ? "c" : "d");
    launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    std::vector<std::string> args{"--profile", "spec", "--handle", s.file("handle")};
    if (capped) args.insert(args.end(), {"--cpus", "0.5"});
    args.insert(args.end(), {"--", "sh", "-c", "exec sleep 120", token});
    pid_t pid = start(ccsb_run(args), base_env(s), s.proj, null.get(), null.get());
    REQUIRE(eventually([&] { return handle_state(s.file("handle")) == "active"; }));
    const std::string h = s.file("handle");
    const std::string name = fs::path(handle_str(h, "runDir")).filename().string();
    const std::string mech = handle_str(h, "cpu");
    INFO("details.cpu " << mech);
    REQUIRE((mech == "cgroup-v1" || mech == "cgroup-v2"));
    const bool v2 = mech == "cgroup-v2";
    const std::string share = std::to_string(v2 ? ccsb::kCpuWeight : ccsb::kCpuShares);
    const std::string max = capped ? "50000 100000" : (v2 ? "max 100000" : "-1 100000");
    CHECK(handle_int(h, v2 ? "cpuWeight" : "cpuShares") == (v2 ? 100 : 1024));
    CHECK(handle_str(h, "cpuMax") == (capped ? "50000 100000" : "max 100000"));
    // On the host: exactly one cgroup of the session carries cpu, with the
    // documented share and the cap.
    const auto settings = cpu_settings_of(name);
    REQUIRE(settings.size() == 1);
    CHECK(settings[0].first == share);
    CHECK(settings[0].second == max);
    // The command is in it: its cpu line (v1) or its v2 line ends in the
    // session's name.
    std::optional<pid_t> cmd;
    const pid_t bwrap = static_cast<pid_t>(handle_int(h, "pid"));
    REQUIRE(eventually([&] {
      for (pid_t q : process_tree(bwrap))
        if (first_line_of("/proc/" + std::to_string(q) + "/comm") == "sleep") cmd = q;
      return cmd.has_value();
    }));
    std::ifstream cg("/proc/" + std::to_string(*cmd) + "/cgroup");
    bool in_cpu = false;
    for (std::string line; std::getline(cg, line);) {
      const bool cpu_line = v2 ? line.rfind("0::", 0) == 0 : line.find(":cpu:") != std::string::npos ||
                                                                 line.find(":cpu,") != std::string::npos ||
                                                                 line.find(",cpu:") != std::string::npos ||
                                                                 line.find(",cpu,") != std::string::npos;
      if (cpu_line && line.size() > name.size() && line.compare(line.size() - name.size() - 1, std::string::npos, "/" + name) == 0)
        in_cpu = true;
    }
    CHECK(in_cpu);
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(eventually([&] { return processes_with(token).empty(); }));
    CHECK(eventually([&] { return cpu_settings_of(name).empty(); })); // teardown removed it
  }
}

TEST_CASE("L7: a malformed --cpus is refused naming the flag, and the command never runs", "[L7][launcher]") {
  scratch s;
  for (const char* bad : {"", "0", "-1", "abc", "1.2345", "1e3", "0.001", " 1", "1.", ".5", "2000", "1,5"}) {
    INFO("--cpus \"" << bad << "\"");
    auto r = run(ccsb_run({"--profile", "spec", "--cpus", bad, "--", "touch", s.proj + "/ran"}), base_env(s), s.proj);
    CHECK(r.exit_code == 125);
    CHECK_THAT(r.err, Catch::Contains("--cpus: expected a number of CPUs"));
    CHECK_FALSE(fs::exists(s.proj + "/ran"));
  }
}

TEST_CASE("E1: the launcher's own variables do not reach the sandbox unless passed", "[E1][launcher]") {
  scratch s;
  auto env = base_env(s);
  env.push_back({"CCSB_TEST_LAUNCHER_ONLY", "leak"});
  auto r = run(ccsb_run({"--profile", "spec", "--", "env"}), env, s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("CCSB_TEST_LAUNCHER_ONLY") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("LANG=C.UTF-8"));
  CHECK_THAT(r.out, Catch::Contains("HTTP_PROXY=http://127.0.0.1:3128")); // N2
  auto r2 = run(ccsb_run({"--profile", "spec", "--env", "CCSB_TEST_LAUNCHER_ONLY", "--", "env"}), env, s.proj);
  CHECK_THAT(r2.out, Catch::Contains("CCSB_TEST_LAUNCHER_ONLY=leak"));
}

TEST_CASE("E1 E3: ccsb-run refuses an --env that E3 removes or that it does not have, naming env.NAME",
          "[E1][E3][launcher]") {
  scratch s;
  auto env = base_env(s);
  env.push_back({"GITHUB_TOKEN", "ghp_secret"});
  for (const auto& [arg, field] : std::vector<std::pair<std::string, std::string>>{
           {"GIT_AUTHOR_NAME=agent", "env.GIT_AUTHOR_NAME"},
           {"GITHUB_TOKEN", "env.GITHUB_TOKEN"},
           {"LD_PRELOAD=/x.so", "env.LD_PRELOAD"},
           {"CCSB_TEST_NOT_SET_ANYWHERE", "env.CCSB_TEST_NOT_SET_ANYWHERE"}}) {
    auto r = run(ccsb_run({"--profile", "spec", "--env", arg, "--", "/bin/echo", "ran"}), env, s.proj);
    INFO(arg << "\n" << r.err);
    CHECK(r.exit_code == 125);
    CHECK(r.out.find("ran") == std::string::npos);
    CHECK_THAT(r.err, Catch::Contains(field));
  }
}

TEST_CASE("L8: --events and --handle inside a writable bind are refused before anything runs, so the command "
          "cannot replace them",
          "[L8][launcher]") {
  scratch s;
  for (const char* opt : {"--events", "--handle"}) {
    const std::string inside = s.proj + "/out.json";
    auto r = run(ccsb_run({"--profile", "spec", opt, inside, "--", "/bin/echo", "ran"}), base_env(s), s.proj);
    INFO(opt << "\n" << r.err);
    CHECK(r.exit_code == 125);
    CHECK(r.out.find("ran") == std::string::npos);
    CHECK_THAT(r.err, Catch::Contains(std::string(opt) + ": \"" + inside + "\" lies inside the writable bind"));
    CHECK(::access(inside.c_str(), F_OK) != 0);
    // Outside every writable bind (here: read-only) it is written.
    const std::string ro = s.proj + "/sub/out.json";
    ::mkdir((s.proj + "/sub").c_str(), 0755);
    auto ok = run(ccsb_run({"--profile", "spec", "--bind", s.proj + "/sub:ro", opt, ro, "--", "/bin/echo", "ran"}),
                  base_env(s), s.proj + "/sub");
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
    CHECK(::access(ro.c_str(), F_OK) == 0);
  }
}

TEST_CASE("ccsb-run accepts the GNU --name=value form for every option with a value, and refuses it for a flag",
          "[launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile=spec", "--env=CCSB_GNU_FORM=a=b", "--timeout=60", "--", "/bin/sh", "-c",
                         "echo \"v=$CCSB_GNU_FORM\""}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("v=a=b"));
  auto flag = run(ccsb_run({"--profile=spec", "--no-pty=yes", "--", "/bin/true"}), base_env(s), s.proj);
  CHECK(flag.exit_code == 125);
  CHECK_THAT(flag.err, Catch::Contains("--no-pty takes no value"));
  auto bad = run(ccsb_run({"--profile=nonsense", "--", "/bin/true"}), base_env(s), s.proj);
  CHECK(bad.exit_code == 125);
  CHECK_THAT(bad.err, Catch::Contains("--profile: expected dispatch, terminal or spec"));
}

TEST_CASE("S6 P7: ccsb-run sums up the session's denials on stderr at exit, also with --quiet, which keeps only "
          "the start-up line and the badge otherwise",
          "[S6][P7][B4][launcher]") {
  scratch s;
  const std::string body = "echo k > a.pem; echo k > b.pem; echo k > c.key; echo k > .env; echo ok > notes.txt";
  for (const bool quiet : {false, true}) {
    std::vector<std::string> args{"--profile", "dispatch"};
    if (quiet) args.push_back("--quiet");
    args.insert(args.end(), {"--", "/bin/sh", "-c", body});
    auto r = run(ccsb_run(args), base_env(s), s.proj);
    INFO((quiet ? "--quiet\n" : "") << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("ccsb-run: 4 denials in this session: file-write-create " + s.proj +
                                      "/a.pem, file-write-create " + s.proj + "/b.pem"));
    CHECK_THAT(r.err, Catch::Contains("(+1 more; --events lists each)"));
    CHECK_THAT(r.err, Catch::StartsWith("agent sandbox ON"));        // B4 stays
    CHECK_THAT(r.err, Catch::Contains("ccsb-run: session backend:")); // B6 stays
    // The informational lines (the sandbox's uid, Landlock, ...) go with --quiet.
    CHECK((r.err.find("Landlock") == std::string::npos) == quiet);
  }
  // No denial, no summary.
  auto clean = run(ccsb_run({"--profile", "dispatch", "--", "/bin/true"}), base_env(s), s.proj);
  CHECK(clean.exit_code == 0);
  CHECK(clean.err.find("denial") == std::string::npos);
}

TEST_CASE("E3: backend none runs on the host with a sanitised environment and no proxies", "[E3][B8][launcher]") {
  scratch s;
  auto env = base_env(s);
  env.push_back({"GITHUB_TOKEN", "ghp_secret"});
  env.push_back({"LD_LIBRARY_PATH", "/nonexistent"});
  env.push_back({"BASH_ENV", "/tmp/evil"});
  env.push_back({"CCSB_PLAIN", "kept"});
  auto r = run(ccsb_run({"--profile", "spec", "--backend", "none", "--", "env"}), env, s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("GITHUB_TOKEN") == std::string::npos);
  CHECK(r.out.find("LD_LIBRARY_PATH") == std::string::npos);
  CHECK(r.out.find("BASH_ENV") == std::string::npos);
  CHECK(r.out.find("HTTP_PROXY") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("CCSB_PLAIN=kept"));
  CHECK_THAT(r.out, Catch::Contains("PATH=/usr/local/bin:/usr/bin:/bin"));
  CHECK_THAT(r.out, Catch::Contains("HOME=" + s.home));
}

TEST_CASE("T3: ccsb-run never shows a native badge while running on the host", "[T3][B6][T2][launcher]") {
  scratch s;
  // ccsb-run selects with dispatch semantics for every profile: the terminal
  // profile gets the sandbox by default (T2 policy), the badge says so.
  auto r = run(ccsb_run({"--profile", "terminal", "--handle", s.file("h"), "--", "sh", "-c",
                         "cat \"$HOME/.ssh/id_rsa\"; touch \"$HOME/ok\"; echo done"}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "done\n");
  CHECK(r.out.find("TOPSECRET") == std::string::npos);
  CHECK(r.err.find("TOPSECRET") == std::string::npos);
  CHECK(fs::exists(s.home + "/ok")); // T2: $HOME writable
  auto nl = r.err.find('\n');
  REQUIRE(nl != std::string::npos);
  CHECK(r.err.rfind("agent sandbox ON (bubblewrap", 0) == 0);
  CHECK(r.err.substr(nl + 1).rfind("ccsb-run: session backend: native (profile terminal)\n", 0) == 0);
  auto h = read_handle(s.file("h"));
  CHECK(h["backend"].to_str() == "native");
  CHECK(handle_str(s.file("h"), "backend") == "native");

  // The explicit opt-out runs on the host, and the badge says exactly that.
  auto r2 = run(ccsb_run({"--profile", "terminal", "--backend", "none", "--handle", s.file("h2"), "--", "cat",
                          s.home + "/.ssh/id_rsa"}),
                base_env(s), s.proj);
  INFO(r2.err);
  CHECK(r2.exit_code == 0);
  CHECK(r2.out == "TOPSECRET-KEY\n"); // on the host: nothing is masked
  CHECK_THAT(r2.err, Catch::Contains("ccsb-run: session backend: none — the command runs on the host WITHOUT a sandbox\n"));
  CHECK(r2.err.find("session backend: native") == std::string::npos);
  auto h2 = read_handle(s.file("h2"));
  CHECK(h2["backend"].to_str() == "none");
  CHECK(handle_str(s.file("h2"), "backend") == "none");

  // --sandbox off: the same honest badge.
  auto r3 = run(ccsb_run({"--profile", "terminal", "--sandbox", "off", "--", "true"}), base_env(s), s.proj);
  CHECK(r3.exit_code == 0);
  CHECK_THAT(r3.err, Catch::Contains("session backend: none — the command runs on the host WITHOUT a sandbox"));
  CHECK(r3.err.find("session backend: native") == std::string::npos);
}

TEST_CASE("B6: an explicit microvm request is a loud error", "[B6][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--backend", "microvm", "--", "true"}), base_env(s), s.proj);
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Catch::Contains("microvm"));
}

// A launcher SIGKILLed while its session was suspended leaves frozen
// cgroups, and a process frozen by the v1 freezer does not die of SIGKILL
// until it is thawed: the next launcher's sweep must thaw (the freezer
// hierarchy first) before it kills, or the stale cgroups stay and their
// processes with them.
TEST_CASE("L8 L7: the sweep removes a dead launcher's cgroups whose processes are frozen", "[L8][L7][launcher]") {
  if (::geteuid() != 0) FAIL("needs a root launcher (cgroup v1 freezer)");
  std::ifstream self("/proc/self/cgroup");
  std::map<std::string, std::string> own;
  for (std::string line; std::getline(self, line);) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    own[line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
  }
  REQUIRE(own.count("freezer"));
  const std::string name = "ccsb-test-frozen-" + std::to_string(::getpid());
  std::vector<std::string> dirs;
  for (const char* c : {"freezer", "memory", "pids"}) {
    const std::string d = std::string("/sys/fs/cgroup/") + c + own[c] + "/" + name;
    REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    dirs.push_back(d);
  }
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  for (const auto& d : dirs) {
    std::ofstream procs(d + "/cgroup.procs");
    procs << child << std::flush;
    REQUIRE(procs.good());
  }
  { std::ofstream(dirs[0] + "/freezer.state") << "FROZEN" << std::flush; }
  auto state = [&] {
    std::ifstream f(dirs[0] + "/freezer.state");
    std::string v;
    f >> v;
    return v;
  };
  for (int i = 0; i < 200 && state() != "FROZEN"; ++i) ::usleep(10000);
  REQUIRE(state() == "FROZEN");
  auto removed = launch::session_limits::remove_stale(name);
  CHECK(removed.size() == 3);
  int st = 0;
  pid_t got = 0;
  for (int i = 0; i < 200 && got == 0; ++i) {
    got = ::waitpid(child, &st, WNOHANG);
    if (got == 0) ::usleep(10000);
  }
  if (got == 0) { // left behind: thaw, kill, remove, then fail
    std::ofstream(dirs[0] + "/freezer.state") << "THAWED" << std::flush;
    ::kill(child, SIGKILL);
    ::waitpid(child, &st, 0);
    for (const auto& d : dirs) ::rmdir(d.c_str());
  }
  REQUIRE(got == child);
  CHECK(WIFSIGNALED(st));
  for (const auto& d : dirs) CHECK(::access(d.c_str(), F_OK) != 0);
}

// The launcher spawns bwrap before the policy exists and writes its options
// later (render/bwrap/render.hpp "Spawned first, fed later"). A launcher that dies
// before writing any leaves bwrap an empty option list at EOF: no bind at
// all, so the program on its argv (ccsb-init at its sandbox path) does not
// exist in the empty root bwrap builds, and nothing runs.
TEST_CASE("L1 S7: a bwrap whose options never come runs nothing", "[L1][S7][launcher]") {
  const auto bwrap = launch::which("bwrap", "/usr/local/bin:/usr/bin:/bin");
  REQUIRE(bwrap);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  launch::unique_fd ours(sv[0]), theirs(sv[1]);
  int pp[2];
  REQUIRE(::pipe2(pp, O_CLOEXEC) == 0);
  launch::unique_fd err_r(pp[0]), err_w(pp[1]);
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  launch::spawn_options o;
  o.path = *bwrap;
  o.argv = bwrap_spawn_argv(*bwrap, 4, 64);
  o.fds = {{0, null.get()}, {1, err_w.get()}, {2, err_w.get()}, {4, theirs.get()}};
  if (::geteuid() == 0) o.run_as = launch::spawn_options::credentials{65534, 65534}; // as the launcher runs it
  auto pid = launch::spawn(o);
  REQUIRE(pid);
  theirs.reset();
  err_w.reset();
  ours.reset(); // the launcher is gone
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = ::read(err_r.get(), buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  REQUIRE(::waitpid(*pid, &status, 0) == *pid);
  INFO(err);
  CHECK(launch::exit_code_of(status) != 0);
  CHECK_THAT(err, Catch::Contains("/run/ccsb/ccsb-init"));
}

// bwrap is spawned before the policy exists (render/bwrap/render.hpp "Spawned
// first, fed later"), so its argv names none of it: not bwrap's options, not
// ccsb-init's (the dispatch profile's broker rules name worktree paths).
// PID 1 is ccsb-init itself (--as-pid-1); bwrap's own argv, shown on the
// host, is the spawn argv: `bwrap --args 4 -- /run/ccsb/ccsb-init --options-fd 64`.
TEST_CASE("L1: bwrap's options always go through --args FD — PID 1's cmdline shows no policy", "[L1][launcher]") {
  for (const char* profile : {"spec", "dispatch"}) {
    INFO(profile);
    scratch s;
    auto r = run(ccsb_run({"--profile", profile, "--bind", s.home + ":ro", "--", "sh", "-c",
                           "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo hi"}),
                 base_env(s), s.proj);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "/run/ccsb/ccsb-init --options-fd 64 \nhi\n");
    CHECK(r.out.find(s.root) == std::string::npos); // no bind, mask, run dir or broker path
  }
}

TEST_CASE("S5: SIGTERM to the launcher stops the sandbox and reports killed (stop)", "[S5][S4][launcher]") {
  scratch s;
  std::string secs = "7" + std::to_string(::getpid()) + "3";
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  pid_t pid = start(ccsb_run({"--profile", "spec", "--events", s.file("ev"), "--handle", s.file("h"), "--", "sleep", secs}),
                    base_env(s), s.proj, null.get(), null.get());
  REQUIRE(eventually([&] { return handle_state(s.file("h")) == "active"; }));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(launch::exit_code_of(status) == 137);
  auto ev = read_events(s.file("ev"));
  bool stopped = false;
  for (const auto& e : ev)
    if (e.kind == event_kind::killed && e.reason == "stop") stopped = true;
  CHECK(stopped);
  CHECK(handle_state(s.file("h")) == "destroyed");
  CHECK(eventually([&] { return processes_with(secs).empty(); }));
}

namespace {

// A run dir as make_run_dir leaves it; `marker`: its `locked` file exists
// (the owner got as far as taking its lock).
std::string make_fake_run_dir(const std::string& base, const std::string& name, bool marker) {
  std::string d = base + "/" + name;
  fs::create_directories(d + "/mask/dir");
  fs::permissions(d + "/mask/dir", fs::perms::none); // as a real run dir has it
  if (marker) std::ofstream(d + "/" + launch::kLockedMarker);
  return d;
}

} // namespace

TEST_CASE("S4 L8: the start-up sweep removes only run dirs and placeholders that no live launcher holds",
          "[S4][L8][launcher]") {
  scratch s;
  // The launcher's base: /run/ccsb-sessions for root, $XDG_RUNTIME_DIR/ccsb otherwise.
  auto env = base_env(s);
  std::string xdg = s.file("xdg");
  fs::create_directories(xdg);
  fs::permissions(xdg, fs::perms::owner_all);
  if (::geteuid() != 0) env.push_back({"XDG_RUNTIME_DIR", xdg});
  const std::string base = ::geteuid() == 0 ? std::string(launch::kRootRunDirBase) : xdg + "/ccsb";
  REQUIRE(launch::ensure_private_dir(base, ::geteuid() == 0 ? 0711 : 0700));
  const std::string tag = std::to_string(::getpid());
  // Stale: its owner died (lock free) after taking it (marker).
  std::string stale = make_fake_run_dir(base, "ccsb-stale-" + tag, true);
  // Live: locked.
  std::string live = make_fake_run_dir(base, "ccsb-live-" + tag, true);
  launch::unique_fd lock(::open(live.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(::flock(lock.get(), LOCK_EX | LOCK_NB) == 0);
  // Fresh: created, not yet locked (no marker): never swept.
  std::string fresh = make_fake_run_dir(base, "ccsb-fresh-" + tag, false);
  // Not named ccsb-*: never looked at.
  std::string other = make_fake_run_dir(base, "other-" + tag, true);

  // Placeholders: registered by a launcher that then died (its set is gone
  // without removing anything), one still held by a live launcher, one a
  // user has since written to, and an unregistered empty file.
  {
    auto dead = launch::placeholder_set::open(base);
    REQUIRE(dead);
    REQUIRE(dead->create(s.proj + "/ph-dir", true));
    REQUIRE(dead->create(s.proj + "/ph-file", false));
    REQUIRE(dead->create(s.proj + "/ph-full", false));
    REQUIRE(dead->create(s.proj + "/ph-held", false));
  } // locks released, as when a launcher is SIGKILLed
  auto alive = launch::placeholder_set::open(base);
  REQUIRE(alive);
  REQUIRE(alive->hold(s.proj + "/ph-held"));
  ::chmod((s.proj + "/ph-full").c_str(), 0644);
  std::ofstream(s.proj + "/ph-full") << "user content\n";
  std::ofstream(s.proj + "/not-ours");

  auto r = run(ccsb_run({"--profile", "spec", "--network", "off", "--", "true"}), env, s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(fresh));
  CHECK(fs::exists(other));
  // As root the base (/run/ccsb-sessions) is shared by every launcher on the
  // host: under ctest -j2 another test's launcher may sweep the stale dir
  // first (as in the SIGKILLed-launcher test above). Nothing but a sweep
  // removes it, so its absence proves one ran; with a private base (not
  // root) it must have been this launch's, and this launch says so.
  if (::geteuid() != 0) CHECK_THAT(r.err, Catch::Contains("removed a stale run dir of a dead launcher: " + stale));
  CHECK_FALSE(fs::exists(s.proj + "/ph-dir"));
  CHECK_FALSE(fs::exists(s.proj + "/ph-file"));
  CHECK(fs::exists(s.proj + "/ph-full"));
  CHECK(fs::exists(s.proj + "/ph-held"));
  CHECK(fs::exists(s.proj + "/not-ours"));
  // The last holder's release removes the held one.
  auto gone = alive->release_and_remove();
  CHECK(gone == std::vector<std::string>{s.proj + "/ph-held"});
  CHECK_FALSE(fs::exists(s.proj + "/ph-held"));
  for (const auto& d : {live, fresh, other}) {
    fs::permissions(d + "/mask/dir", fs::perms::owner_all);
    fs::remove_all(d);
  }
}

TEST_CASE("S3: a failed start keeps its reason visible in the final handle (details.lastError)", "[S3][S4][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--handle", s.file("h"), "--", "/nonexistent/ccsb-no-such-command"}),
               base_env(s), s.proj);
  CHECK(r.exit_code == 125);
  CHECK(handle_state(s.file("h")) == "destroyed");
  std::string why = handle_str(s.file("h"), "lastError");
  CHECK_THAT(why, Catch::Contains("/nonexistent/ccsb-no-such-command"));
  CHECK_THAT(r.err, Catch::Contains("/nonexistent/ccsb-no-such-command"));
}

TEST_CASE("L3: egressd dying before the command starts fails the run — the command never runs", "[L3][N1][launcher]") {
  scratch s;
  auto r = run(ccsb_run({"--profile", "spec", "--egressd", "/bin/false", "--handle", s.file("h"), "--", "touch",
                         s.proj + "/ran"}),
               base_env(s), s.proj);
  INFO(r.err);
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Catch::Contains("egressd exited before the command started"));
  CHECK_FALSE(fs::exists(s.proj + "/ran"));
  CHECK_THAT(handle_str(s.file("h"), "lastError"), Catch::Contains("egressd"));
}

TEST_CASE("E3: backend none end to end — no credential or injection family of a hostile host environment reaches the command",
          "[E3][B8][launcher]") {
  scratch s;
  fs::create_directories(s.file("xdg"));
  // One or more members of every family; each value is distinctive, so its
  // absence from the command's `env` shows it did not reach it.
  const env_list hostile = {
      // Credentials in values.
      {"DATABASE_URL", "postgres://app:e3dbpw@db.internal:5432/app"},
      {"REDIS_URL", "redis://:e3redispw@cache.internal:6379/0"},
      {"MONGODB_URI", "mongodb+srv://admin:e3mongopw@cluster0.example.net/prod"},
      {"PIP_INDEX_URL", "https://ci:e3pippw@pkgs.example.com/simple"},
      {"PGCONN", "host=db user=app password=e3pgpw"},
      {"HTTP_HEADERS", "Authorization: Bearer e3bearer0123456789"},
      {"SSH_IDENTITY", "-----BEGIN OPENSSH PRIVATE KEY-----\ne3pem\n-----END OPENSSH PRIVATE KEY-----"},
      {"MY_GH", "ghp_E3aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0"},
      {"CHAT_BOT", "xoxb-0000000000-e3slackbot0123"},
      {"LLM", "sk-ant-api03-E3llm0123456789abcdefghij"},
      {"CLOUD_ID", "AKIAE3E3E3E3E3E3E3E3"},
      {"ID_DOC", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJlM2p3dCJ9.e3sig"},
      // Credential names.
      {"SENTRY_DSN", "https://e3sentry@o1.ingest.example.io/42"},
      {"SLACK_WEBHOOK_URL", "https://hooks.example.com/services/e3webhook"},
      {"MYSQL_PWD", "e3mysqlpwd"},
      {"STRIPE_KEY", "e3stripekey"},
      {"BW_SESSION", "e3bwsession"},
      {"OP_SESSION_team", "e3opsession"},
      {"CI_JOB_JWT", "e3cijobjwt"},
      {"TF_VAR_db_pass", "e3tfvarpass"},
      {"KRB5CCNAME", "FILE:/tmp/e3krb5cc"},
      {"SSL_CERT_FILE", "/tmp/e3-evil-ca.pem"},
      // Host services.
      {"DOCKER_HOST", "unix:///tmp/e3docker.sock"},
      {"DBUS_SESSION_BUS_ADDRESS", "unix:path=/tmp/e3bus"},
      {"XDG_RUNTIME_DIR", s.file("xdg")},
      {"TMUX", "/tmp/e3tmux,1,0"},
      {"DISPLAY", ":e3"},
      // Injection vectors.
      {"GCONV_PATH", "/tmp/e3gconv"},
      {"GLIBC_TUNABLES", "glibc.e3.unknown=1"},
      {"PYTHONWARNINGS", "ignore::e3evil.Warning"},
      {"PYTHONBREAKPOINT", "e3evil.hook"},
      {"PYTHONUSERBASE", "/tmp/e3userbase"},
      {"XDG_CONFIG_HOME", "/tmp/e3config"},
      {"XDG_DATA_DIRS", "/tmp/e3data"},
      {"RUSTC_WRAPPER", "/tmp/e3rustcwrapper"},
      {"CARGO_BUILD_RUSTC_WRAPPER", "/tmp/e3cargowrapper"},
      {"LUA_INIT", "os.execute('e3lua')"},
      {"PERL5DB", "BEGIN { system q(e3perl) }"},
      {"PHPRC", "/tmp/e3php.ini"},
      {"NPM_CONFIG_SCRIPT_SHELL", "/tmp/e3npmshell"},
      {"CONFIG_SHELL", "/tmp/e3configshell"},
      {"JAVA_HOME", "/tmp/e3jdk"},
      {"CFLAGS", "-fplugin=/tmp/e3plugin.so"},
      {"FZF_DEFAULT_COMMAND", "e3fzfcommand"},
      {"PS1", "$(e3prompt)"},
      {"PS0", "`e3backquote`"},
      {"PROMPT_COMMAND", "e3promptcommand"},
      {"BASH_ENV", "/tmp/e3bashenv"},
  };
  const env_list benign = {
      {"USER", "e3user"},    {"TERM", "xterm-256color"}, {"TZ", "Europe/Berlin"},
      {"NO_COLOR", "1"},     {"CI", "true"},             {"PYTHONUNBUFFERED", "1"},
      {"RUST_BACKTRACE", "1"}, {"XDG_SESSION_TYPE", "wayland"}, {"KEYBOARD_LAYOUT", "de"},
      {"PS2", "> "},         {"DOCS_URL", "https://docs.example.com/guide?page=2"},
  };
  auto env = base_env(s);
  env.insert(env.end(), hostile.begin(), hostile.end());
  env.insert(env.end(), benign.begin(), benign.end());
  auto r = run(ccsb_run({"--profile", "spec", "--backend", "none", "--", "env"}), env, s.proj);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string out = "\n" + r.out;
  for (const auto& v : hostile) {
    INFO(v.name << "=" << v.value);
    CHECK(out.find("\n" + v.name + "=") == std::string::npos);
    CHECK(out.find(v.value) == std::string::npos);
  }
  for (const auto& v : benign) CHECK_THAT(out, Catch::Contains("\n" + v.name + "=" + v.value + "\n"));
  CHECK_THAT(out, Catch::Contains("\nPATH=/usr/local/bin:/usr/bin:/bin\n"));
  CHECK_THAT(out, Catch::Contains("\nHOME=" + s.home + "\n"));
  CHECK_THAT(out, Catch::Contains("\nLANG=C.UTF-8\n"));
}

namespace {

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

} // namespace

TEST_CASE("S4 L8: a run dir is removed whole, and each removed inode goes when the unlinked set is released",
          "[S4][L8][launcher]") {
  scratch s;
  const std::string base = s.root + "/base";
  REQUIRE(launch::ensure_private_dir(base, 0700));
  auto rd = launch::make_run_dir("rm-test", base, std::nullopt);
  REQUIRE(rd);
  std::ofstream(rd->path + "/extra") << "with content, so it has a block\n";
  fs::create_directories(rd->path + "/deep/er");
  REQUIRE(::symlink("/etc/passwd", (rd->path + "/link").c_str()) == 0);
  const std::size_t before = open_descriptors();
  {
    launch::unlinked_inodes later;
    launch::remove_run_dir(rd->path, later);
    // Every name is gone at once (the symlink removed, never followed) ...
    CHECK_FALSE(fs::exists(fs::symlink_status(rd->path)));
    CHECK(fs::exists("/etc/passwd"));
    CHECK(open_descriptors() > before); // ... the inodes are still held
    later.keep(std::move(rd->lock));
    later.release();
    CHECK(open_descriptors() == before - 1); // the lock descriptor went with them
  }
  CHECK(fs::is_empty(base));
}

namespace {

// The mask sources' entries as `ls -lR` would list them: name, type, mode, size.
std::string describe_sources(const std::string& dir) {
  std::string out;
  for (const char* e : {"", "/mask", "/empty", "/mask/file", "/mask/dir", "/empty/file", "/empty/dir", "/empty/commondir"}) {
    struct stat st {};
    if (::lstat((dir + e).c_str(), &st) != 0) {
      out += std::string(e) + " missing\n";
      continue;
    }
    char line[128];
    std::snprintf(line, sizeof line, "%s %s %o %lld uid %u\n", e, S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : "other",
                  st.st_mode & 07777, static_cast<long long>(S_ISREG(st.st_mode) ? st.st_size : 0), st.st_uid);
    out += line;
  }
  return out;
}

const std::string kSourcesListing = " dir 755 0 uid 0\n/mask dir 755 0 uid 0\n/empty dir 755 0 uid 0\n/mask/file file 0 0 uid 0\n"
                                    "/mask/dir dir 0 0 uid 0\n/empty/file file 444 0 uid 0\n/empty/dir dir 555 0 uid 0\n"
                                    "/empty/commondir file 444 2 uid 0\n";

std::string expected_sources() {
  std::string want = kSourcesListing;
  const std::string uid = "uid " + std::to_string(::geteuid());
  for (std::size_t at = 0; (at = want.find("uid 0", at)) != std::string::npos; at += uid.size()) want.replace(at, 5, uid);
  return want;
}

} // namespace

TEST_CASE("L8 (issue 9): the mask sources are made once per base, checked on every launch, and never taken from a planted link",
          "[L8][P4][launcher]") {
  scratch s;
  const std::string base = s.root + "/base";
  REQUIRE(launch::ensure_private_dir(base, 0700));
  const std::string dir = base + "/" + launch::kMaskSourcesDir;
  // Made on first use, as the renderer names them.
  auto first = launch::ensure_mask_sources(base);
  REQUIRE(first);
  CHECK(*first == dir);
  CHECK(describe_sources(dir) == expected_sources());
  const auto src = mask_sources_for(*first);
  CHECK(src.mask_file == dir + "/mask/file");
  CHECK(src.git_commondir == dir + "/empty/commondir");
  // Reused: the same inodes the next time.
  struct stat a {}, b {};
  REQUIRE(::lstat(src.mask_dir.c_str(), &a) == 0);
  REQUIRE(launch::ensure_mask_sources(base));
  REQUIRE(::lstat(src.mask_dir.c_str(), &b) == 0);
  CHECK(a.st_ino == b.st_ino);

  // A symlink in its place, to a directory that looks right but holds a
  // file: never used, never followed (the target stays as it was).
  const std::string decoy = s.root + "/decoy";
  fs::rename(dir, decoy);
  std::ofstream(decoy + "/empty/file.secret") << "x";
  REQUIRE(::symlink(decoy.c_str(), dir.c_str()) == 0);
  auto relinked = launch::ensure_mask_sources(base);
  REQUIRE(relinked);
  CHECK_FALSE(fs::is_symlink(dir));
  CHECK(describe_sources(dir) == expected_sources());
  CHECK(fs::exists(decoy + "/empty/file.secret"));
  CHECK(fs::exists(decoy + "/mask/file"));

  // Tampered entries (a mask that became readable and holds data, a
  // placeholder directory that became a file): the set is replaced whole.
  ::chmod(src.mask_file.c_str(), 0644);
  std::ofstream(src.mask_file) << "secret";
  REQUIRE(launch::ensure_mask_sources(base));
  CHECK(describe_sources(dir) == expected_sources());
  ::chmod(src.empty_dir.c_str(), 0700);
  fs::remove(src.empty_dir);
  std::ofstream(src.empty_dir) << "";
  REQUIRE(launch::ensure_mask_sources(base));
  CHECK(describe_sources(dir) == expected_sources());
  // Not a directory at all.
  fs::remove_all(dir);
  std::ofstream(dir) << "";
  REQUIRE(launch::ensure_mask_sources(base));
  CHECK(describe_sources(dir) == expected_sources());

  // Launchers racing on an empty base: every one gets the complete set, and
  // no temporary or set-aside directory is left.
  fs::remove_all(dir);
  std::vector<std::thread> racers;
  std::atomic<int> good{0};
  for (int i = 0; i < 8; ++i)
    racers.emplace_back([&] {
      if (auto r = launch::ensure_mask_sources(base); r && describe_sources(*r) == expected_sources()) ++good;
    });
  for (auto& t : racers) t.join();
  CHECK(good == 8);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(base)) names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{launch::kMaskSourcesDir});
}

TEST_CASE("B2 L1: a success of the user-namespace trial is remembered under its key, anything else runs it again",
          "[B2][L1][launcher]") {
  scratch s;
  const std::string cache = s.root + "/" + launch::kUsernsTrialFile;
  auto read = [&] {
    std::ifstream f(cache);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  auto first = launch::run_userns_trial_cached(cache);
  REQUIRE(first.tried); // this host can create user namespaces (the suite's premise)
  REQUIRE(first.failed_at == userns_step::none);
  const std::string want = read();
  CHECK_THAT(want, Catch::StartsWith(std::string(launch::kUsernsTrialMagic)));
  CHECK(want == std::string(launch::kUsernsTrialMagic) + launch::userns_trial_key(launch::userns_host_settings()));
  struct stat a{};
  REQUIRE(::stat(cache.c_str(), &a) == 0);
  CHECK((a.st_mode & 07777) == 0600);
  // Remembered: the same answer, the file untouched.
  auto second = launch::run_userns_trial_cached(cache);
  CHECK(second == first);
  struct stat b{};
  REQUIRE(::stat(cache.c_str(), &b) == 0);
  CHECK(b.st_ino == a.st_ino);
  // Another key (a setting changed): the trial runs and the file is rewritten.
  {
    std::string other = want;
    other.replace(other.find("max_user_namespaces"), 3, "MAX");
    std::ofstream(cache, std::ios::trunc) << other;
  }
  CHECK(launch::run_userns_trial_cached(cache) == first);
  CHECK(read() == want);
  // A file others may write is not taken (it is replaced after a new trial).
  REQUIRE(::chmod(cache.c_str(), 0622) == 0);
  REQUIRE(::stat(cache.c_str(), &a) == 0);
  CHECK(launch::run_userns_trial_cached(cache) == first);
  REQUIRE(::stat(cache.c_str(), &b) == 0);
  CHECK(b.st_ino != a.st_ino);
  CHECK((b.st_mode & 07777) == 0600);
  // forget: the next launch runs the trial again.
  launch::forget_userns_trial(cache);
  CHECK_FALSE(fs::exists(cache));
}

// The X1 broker's kernel probe is remembered like the trial (issue 9): only a
// success, under the trial's key plus Yama's ptrace_scope; a changed key, a
// file others may write or a symlink runs the probe again.
TEST_CASE("X1 B2: a success of the broker's kernel probe is remembered under its key, anything else probes again",
          "[X1][B2][launcher]") {
  scratch s;
  const std::string cache = s.root + "/" + launch::kBrokerProbeFile;
  auto read = [&] {
    std::ifstream f(cache);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  REQUIRE(ccsb::broker::creation_rules_supported().ok); // this kernel has them (the suite's premise)
  auto first = launch::creation_rules_supported_cached(cache);
  REQUIRE(first.ok);
  const std::string want = read();
  CHECK_THAT(want, Catch::StartsWith(std::string(launch::kBrokerProbeMagic)) && Catch::Contains("ptrace_scope"));
  CHECK_THAT(want, Catch::Contains(launch::userns_trial_key(launch::userns_host_settings())));
  struct stat a{}, b{};
  REQUIRE(::stat(cache.c_str(), &a) == 0);
  CHECK((a.st_mode & 07777) == 0600);
  CHECK(launch::creation_rules_supported_cached(cache).ok);
  REQUIRE(::stat(cache.c_str(), &b) == 0);
  CHECK(b.st_ino == a.st_ino); // remembered: untouched
  // Another key: probed again, the file rewritten with today's key.
  {
    std::string other = want;
    other.replace(other.find("ptrace_scope"), 6, "PTRACE");
    std::ofstream(cache, std::ios::trunc) << other;
  }
  REQUIRE(::stat(cache.c_str(), &a) == 0);
  CHECK(launch::creation_rules_supported_cached(cache).ok);
  CHECK(read() == want);
  REQUIRE(::stat(cache.c_str(), &b) == 0);
  CHECK(b.st_ino != a.st_ino);
  // A symlink to a file holding the right text is not followed.
  const std::string decoy = s.root + "/decoy";
  std::ofstream(decoy) << want;
  ::chmod(decoy.c_str(), 0600);
  fs::remove(cache);
  REQUIRE(::symlink(decoy.c_str(), cache.c_str()) == 0);
  CHECK(launch::creation_rules_supported_cached(cache).ok);
  CHECK_FALSE(fs::is_symlink(cache));
  CHECK(read() == want);
  // A failed start forgets it.
  launch::forget_userns_trial(cache);
  CHECK_FALSE(fs::exists(cache));
}
