// Escape tests for the launcher's own boundary (issue: the Linux sandbox
// holds): the sandbox's host identity (L1), the launcher's output files and
// clean-up (L8), and resource limits (L7). Each test performs the attack
// against the real ccsb-run, bwrap and kernel and asserts what did NOT
// happen on the host; each was run against the previous launcher (with
// CCSB_TEST_BIN_DIR pointing at its build) and failed there.
#include "escape_support.hpp"

#include <sys/sysmacros.h>

using namespace escape;

namespace {

// The launcher as root (CI's case) or, `unprivileged`, as the fixture's
// owner through setpriv (a server running as an ordinary user).
std::vector<std::string> run_argv(const std::vector<std::string>& opts, const std::string& script,
                                  bool unprivileged = false) {
  std::vector<std::string> a;
  if (unprivileged) {
    REQUIRE(::geteuid() == 0); // setpriv needs root to drop to the fixture's uid
    a = {"/usr/bin/setpriv", "--reuid=" + std::to_string(kSandboxTestUid),
         "--regid=" + std::to_string(kSandboxTestGid), "--clear-groups", "--"};
  }
  a.push_back(ccsb_run_path());
  a.insert(a.end(), opts.begin(), opts.end());
  a.insert(a.end(), {"--", "/bin/bash", "-c", script});
  return a;
}

proc_result run_in(const sandbox_fixture& f, const std::vector<std::string>& opts, const std::string& script,
                   const std::string& cwd, bool unprivileged = false) {
  spawn_options o;
  o.argv = run_argv(opts, sandbox_fixture::wrap(script), unprivileged);
  o.env = f.env();
  o.cwd = cwd;
  return run(o);
}

// A host process whose cmdline contains `marker` (the sandboxed command as
// the host sees it), polled while the sandbox runs.
std::optional<pid_t> find_host_process(const std::string& marker, int tries = 400) {
  for (int i = 0; i < tries; ++i) {
    for (const auto& p : all_procs())
      if (p.cmdline.find(marker) != std::string::npos && p.comm == "sleep") return p.pid;
    ::usleep(25000);
  }
  return std::nullopt;
}

// "Uid:\treal\teffective\tsaved\tfs" of /proc/PID/status, host view.
std::vector<long> host_uids(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream f(line.substr(4));
      std::vector<long> v;
      long x;
      while (f >> x) v.push_back(x);
      return v;
    }
  return {};
}

// Waits (bounded) until `path` exists; the sandboxed side of a two-step test.
std::string wait_for_file_script(const std::string& path) {
  return "for i in $(seq 600); do [ -e '" + path + "' ] && break; sleep 0.05; done\n";
}

// The placeholder registry of the launcher these tests start: the run-dir
// base's (root: /run/ccsb-sessions; unprivileged: /tmp/ccsb-65534, as the
// fixture's environment has no XDG_RUNTIME_DIR).
std::string registry_dir(bool unprivileged) {
  return (unprivileged ? "/tmp/ccsb-" + std::to_string(kSandboxTestUid) : std::string("/run/ccsb-sessions")) +
         "/placeholders";
}

// The registry files whose bytes name anything under `prefix` (whatever the
// format: a path is stored as its bytes). Other sessions of other tests may
// share the registry, so tests look only for their own fixture's paths.
std::vector<std::string> registry_files_naming(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.' && read_file(dir + "/" + e->d_name).find(prefix) != std::string::npos)
      out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

// Placeholders exist only for missing READ-denied names (P4 secrets) inside a
// writable bind: under the X1 broker a missing WRITE-denied name (.bashrc,
// .zshrc, .claude, .git/hooks) is a broker rule and nothing is created on the
// host. So these tests use a workspace that is also HOME (the workdir, bound
// writable, is $HOME) and has none of ~/.ssh, ~/.netrc, ~/.kube and
// ~/.docker/config.json: each is occupied by a mode-0000 mask while a
// session runs. `.docker` is the topmost path created for config.json.
const char* const kMissingSecrets[] = {"/.ssh", "/.netrc", "/.kube", "/.docker"};

// A git worktree at `dir`, handed to the sandbox's uid, with no secret in it.
void make_home_workspace(const std::string& dir) {
  make_dirs(dir);
  run_host_ok({"/usr/bin/git", "init", "-q", dir});
  hand_to_sandbox_uid(dir);
}

// The fixture's environment with HOME=`home`.
std::vector<std::string> env_with_home(const sandbox_fixture& f, const std::string& home) {
  auto e = f.env();
  for (auto& v : e)
    if (v.rfind("HOME=", 0) == 0) v = "HOME=" + home;
  return e;
}

// ccsb-run OPTS -- bash -c wrap(SCRIPT) in `dir`, which is also HOME.
spawn_options home_options(const sandbox_fixture& f, const std::string& dir, const std::vector<std::string>& opts,
                           const std::string& script, bool unprivileged) {
  spawn_options o;
  o.argv = run_argv(opts, sandbox_fixture::wrap(script), unprivileged);
  o.env = env_with_home(f, dir);
  o.cwd = dir;
  return o;
}

// Creating each missing secret (through its mask) and each write-denied
// start-up name (through the broker), from a workspace that is HOME.
const char* const kWriteAttempts =
    "mkdir -p ~/.ssh 2>/dev/null; echo 'Host *' > ~/.ssh/config 2>/dev/null; echo @@ssh=$?\n"
    "echo 'machine h login u password PWNED' > ~/.netrc 2>/dev/null; echo @@netrc=$?\n"
    "mkdir -p ~/.kube 2>/dev/null; echo PWNED > ~/.kube/config 2>/dev/null; echo @@kube=$?\n"
    "mkdir -p ~/.docker 2>/dev/null; echo '{\"PWNED\":1}' > ~/.docker/config.json 2>/dev/null; echo @@docker=$?\n"
    "echo 'echo PWNED' > .bashrc 2>/dev/null; echo @@bashrc=$?\n"
    "echo 'echo PWNED' > .zshrc 2>/dev/null; echo @@zshrc=$?\n"
    "mkdir -p .git/hooks 2>/dev/null; printf '#!/bin/sh\\necho PWNED\\n' > .git/hooks/pre-commit 2>/dev/null; "
    "echo @@hook=$?\n"
    "mkdir -p .claude 2>/dev/null; echo '{}' > .claude/settings.json 2>/dev/null; echo @@claude=$?\n";

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

// The documented range of a root launcher's session uids
// (ccsb/launch/linux/session_uid.hpp), spelled out here on purpose: a change
// of the range must change this test and docs/design.md with it.
constexpr long kSessionUidFirst = 2046820352, kSessionUidLast = 2046820352 + 65535;
bool session_uid(long u) { return u >= kSessionUidFirst && u <= kSessionUidLast; }

// ccsb-run --profile spec -- bash -c SCRIPT in `cwd`, not waited for; the
// script ends by waiting for `stop` to appear in `cwd`, beside a `sleep
// MARKER` the host can find.
child start_waiting(const sandbox_fixture& f, const std::string& cwd, const std::string& marker,
                    const std::string& script) {
  return spawn({run_argv({"--profile", "spec"},
                         sandbox_fixture::wrap(script + "\nsleep " + marker +
                                               " & sp=$!; for i in $(seq 1200); do [ -e stop ] && break; "
                                               "sleep 0.05; done; kill $sp\n")),
                f.env(), cwd, {}, 180});
}

long st_uid_of(const std::string& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0 ? static_cast<long>(st.st_uid) : -1;
}

}  // namespace

TEST_CASE("L1: a root launcher's sandbox never runs as host uid 0 and cannot write /proc/sys",
          "[L1][L6][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  const std::string marker = "9" + std::to_string(100000 + std::random_device{}() % 800000);
  // The current core_pattern is written back unchanged: if the write ever
  // succeeds the test fails without having changed the host.
  auto child_ = spawn({run_argv({"--profile", "spec", "--bind", f.home},
                                sandbox_fixture::wrap(
                                    "cp=$(cat /proc/sys/kernel/core_pattern)\n"
                                    "printf '%s\\n' \"$cp\" > /proc/sys/kernel/core_pattern 2>/dev/null; echo @@core=$?\n"
                                    "echo 1 > /proc/sys/kernel/sysrq 2>/dev/null; echo @@sysrq=$?\n"
                                    "unshare -U true 2>/dev/null; echo @@userns=$?\n"
                                    "sleep " + marker + " & sp=$!; for i in $(seq 400); do [ -e stop ] && break; sleep 0.05; done; kill $sp\n")),
                     f.env(), f.work, {}, 180});
  auto pid = find_host_process(marker);
  REQUIRE(pid);
  auto uids = host_uids(*pid);
  write_file(f.work + "/stop", "");
  auto r = collect(child_);
  ESCAPE_REQUIRE_RAN(r);
  REQUIRE(uids.size() == 4);
  for (long u : uids) CHECK(u != 0); // host view of the sandboxed command
  CHECK(session_uid(uids[0]));        // a host uid of the session's own (issue 27)
  CHECK(failed(r.get("core")));
  CHECK(failed(r.get("sysrq")));
  CHECK(failed(r.get("userns")));
}

TEST_CASE("L1: a root launcher writes a root-owned workdir from a session uid of its own, files land root's, and --run-as 0 is refused",
          "[L1][L7][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  // Every container and CI runner: root launches in root's own directory.
  // Before per-session uids the sandbox ran as nobody and could not write it.
  const std::string rootws = f.base + "/rootws";
  make_dirs(rootws);
  REQUIRE(::lchown(rootws.c_str(), 0, 0) == 0);
  write_file(rootws + "/mine", "root's\n", 0644);
  REQUIRE(::lchown((rootws + "/mine").c_str(), 0, 0) == 0);
  const std::string marker = "9" + std::to_string(100000 + std::random_device{}() % 800000);
  auto c = start_waiting(f, rootws, marker,
                         "echo @@uid=$(id -u)\ntouch made; echo @@touch=$?\nmkdir -p d/e; echo @@mkdir=$?\n"
                         "echo more >> mine; echo @@append=$?\necho @@owner=$(stat -c %u made)");
  auto pid = find_host_process(marker);
  REQUIRE(pid);
  auto uids = host_uids(*pid);
  write_file(rootws + "/stop", "");
  auto r = collect(c);
  ESCAPE_REQUIRE_RAN(r);
  REQUIRE(uids.size() == 4);
  for (long u : uids) CHECK(session_uid(u)); // not nobody, not root: its own
  CHECK(r.get("uid") == "65534");            // what it sees itself as is unchanged
  CHECK(r.get("touch") == "0");
  CHECK(r.get("mkdir") == "0");
  CHECK(r.get("append") == "0");
  CHECK(r.get("owner") == "65534"); // its own, inside
  // On disk the files are the worktree owner's, not the session uid's.
  CHECK(st_uid_of(rootws + "/made") == 0);
  CHECK(st_uid_of(rootws + "/d/e") == 0);
  CHECK(read_file(rootws + "/mine") == "root's\nmore\n");
  CHECK(r.err.find("not writable by the sandbox's host uid") == std::string::npos);

  auto refused = run_in(f, {"--profile", "spec", "--run-as", "0"}, "true", f.work);
  CHECK(refused.exit_code == 125);
  CHECK(refused.err.find("runAs") != std::string::npos);
}

// A session of a root launcher writes a root-owned worktree as root on disk,
// so a symlink it plants there is root's too: its owner proves nothing. A
// later session given a path through that link would get the link's target
// idmapped to its own uid, writable: /etc, /root, /var/lib. Refused when the
// target is root's; the same directory named without the link is the
// caller's explicit choice and stays allowed.
TEST_CASE("L1 L8: a root-owned directory reached through a symlink an earlier session planted is not made writable",
          "[L1][L8][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  const std::string rootws = f.base + "/rootws";
  const std::string target = f.base + "/rootdir"; // stands for /etc or /root
  make_dirs(rootws);
  make_dirs(target + "/sub");
  for (const auto& d : {rootws, target, target + "/sub"}) REQUIRE(::lchown(d.c_str(), 0, 0) == 0);
  // Session A plants the links in its own worktree.
  auto a = run_in(f, {"--profile", "spec"},
                  "ln -s " + target + " link; echo @@ln=$?\nln -s " + target + "/sub sublink; echo @@ln2=$?", rootws);
  ESCAPE_REQUIRE_RAN(a);
  REQUIRE(a.get("ln") == "0");
  REQUIRE(a.get("ln2") == "0");
  REQUIRE(st_uid_of(rootws + "/link") == 0); // root's on disk, like anything session A made there
  // Session B is handed paths through them (bindMounts[0] is ccsb-run's
  // working directory): the link itself, a path below
  // it, a link to a directory below the target, and a runner state dir.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bind", rootws + "/link"}, "bindMounts[1].hostPath"},
      {{"--bind", rootws + "/link/sub"}, "bindMounts[1].hostPath"},
      {{"--bind", rootws + "/sublink"}, "bindMounts[1].hostPath"},
      {{"--bind", f.work, "--state-dir", rootws + "/link"}, "runnerStateDirs[0]"},
  };
  for (const auto& [opts, field] : cases) {
    std::vector<std::string> o = {"--profile", "spec"};
    o.insert(o.end(), opts.begin(), opts.end());
    INFO(opts.back());
    auto b = run_in(f, o, "touch " + target + "/planted " + target + "/sub/planted; echo @@touch=$?", f.work);
    INFO(b.describe());
    CHECK(b.exit_code == 125);
    CHECK(b.get("touch") == "<missing>");
    CHECK(b.err.find(field) != std::string::npos);
    CHECK(b.err.find("through a symlink") != std::string::npos);
    CHECK(::access((target + "/planted").c_str(), F_OK) != 0);
    CHECK(::access((target + "/sub/planted").c_str(), F_OK) != 0);
  }
  // Named without a link, the same directory is the caller's choice.
  auto direct = run_in(f, {"--profile", "spec", "--bind", target}, "touch " + target + "/chosen; echo @@touch=$?", f.work);
  ESCAPE_REQUIRE_RAN(direct);
  CHECK(direct.get("touch") == "0");
  // A link to a directory that is not root's keeps working (its owner's
  // files were that owner's session's before per-session uids too).
  const std::string userdir = f.base + "/userdir";
  make_dirs(userdir);
  REQUIRE(::lchown(userdir.c_str(), 1000, 1000) == 0);
  REQUIRE(::symlink(userdir.c_str(), (rootws + "/userlink").c_str()) == 0);
  auto user = run_in(f, {"--profile", "spec", "--bind", rootws + "/userlink"}, "touch " + userdir + "/made; echo @@touch=$?",
                     f.work);
  ESCAPE_REQUIRE_RAN(user);
  CHECK(user.get("touch") == "0");
}

TEST_CASE("L1: a root launcher's session in another user's worktree writes as that user, from a host uid of its own",
          "[L1][L7][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  const std::string userws = f.base + "/userws";
  make_dirs(userws);
  REQUIRE(::lchown(userws.c_str(), 1000, 1000) == 0);
  const std::string marker = "9" + std::to_string(100000 + std::random_device{}() % 800000);
  auto c = start_waiting(f, userws, marker, "echo @@uid=$(id -u)\ntouch made; echo @@touch=$?");
  auto pid = find_host_process(marker);
  REQUIRE(pid);
  auto uids = host_uids(*pid);
  write_file(userws + "/stop", "");
  auto r = collect(c);
  ESCAPE_REQUIRE_RAN(r);
  REQUIRE(uids.size() == 4);
  CHECK(session_uid(uids[0]));
  CHECK(r.get("uid") == "1000");
  CHECK(r.get("touch") == "0");
  CHECK(st_uid_of(userws + "/made") == 1000);
}

TEST_CASE("L1 L7: two sessions of a root launcher run as two host uids, so per-uid inotify instances are not shared",
          "[L1][L7][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  // fs.inotify.max_user_instances counts per host uid (ucounts are charged
  // to the uid that made each user namespace: the one bwrap runs as).
  // Session A takes every instance it can and holds them; session B, in a
  // worktree of the same owner, must still get one.
  const std::string wa = f.base + "/wa", wb = f.base + "/wb";
  make_dirs(wa);
  make_dirs(wb);
  settle(f);
  const std::string ma = "9" + std::to_string(100000 + std::random_device{}() % 800000);
  const std::string mb = "9" + std::to_string(100000 + std::random_device{}() % 800000);
  auto a = start_waiting(f, wa, ma,
                         "python3 -c 'import ctypes,sys,time,os\nlibc=ctypes.CDLL(None)\nfds=[]\n"
                         "while len(fds)<100000:\n  fd=libc.inotify_init()\n  if fd<0: break\n  fds.append(fd)\n"
                         "open(\"held\",\"w\").write(str(len(fds)))\n"
                         "while not os.path.exists(\"stop\"): time.sleep(0.05)' &\n"
                         "for i in $(seq 600); do [ -e held ] && break; sleep 0.05; done; echo @@held=$(cat held)");
  auto pa = find_host_process(ma);
  REQUIRE(pa);
  for (int i = 0; i < 600 && !file_exists(wa + "/held"); ++i) ::usleep(50000);
  REQUIRE(file_exists(wa + "/held"));
  auto b = start_waiting(f, wb, mb,
                         "python3 -c 'import ctypes\nprint(\"@@inotify=\" + str(int(ctypes.CDLL(None).inotify_init() >= 0)))'");
  auto pb = find_host_process(mb);
  REQUIRE(pb);
  auto ua = host_uids(*pa), ub = host_uids(*pb);
  write_file(wb + "/stop", "");
  auto rb = collect(b);
  write_file(wa + "/stop", "");
  auto ra = collect(a);
  ESCAPE_REQUIRE_RAN(ra);
  ESCAPE_REQUIRE_RAN(rb);
  REQUIRE(ua.size() == 4);
  REQUIRE(ub.size() == 4);
  CHECK(session_uid(ua[0]));
  CHECK(session_uid(ub[0]));
  CHECK(ua[0] != ub[0]);
  CHECK(std::stol("0" + read_file(wa + "/held")) > 0);
  CHECK(rb.get("inotify") == "1");
}

TEST_CASE("L1: under a root launcher the command can still reopen its own stdout and stderr", "[L1][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  // The output pipes are handed to the sandbox's uid; root-owned pipes would
  // make `> /dev/stdout` fail with EACCES for the unprivileged command.
  auto r = f.ccsb("echo reopened-out > /dev/stdout; echo @@out=$?\necho reopened-err > /dev/stderr; echo @@err=$?");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("out") == "0");
  CHECK(r.get("err") == "0");
  CHECK(r.out.find("reopened-out") != std::string::npos);
  CHECK(r.err.find("reopened-err") != std::string::npos);
}

TEST_CASE("L8: --events and --handle never write through a symlink the sandbox planted", "[L8][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  // `out` is writable to session 1 and read-only to session 2, the only
  // place the launcher accepts --events/--handle that a sandbox could have
  // touched. Session 1 plants links there to a host file outside every bind
  // and to the user's .bashrc (whose $(...) a login shell would run).
  const std::string out = f.base + "/out";
  make_dirs(out);
  hand_to_sandbox_uid(out);
  const std::string victim = f.outside_file;
  const std::string before = read_file(victim);
  const std::string bashrc_before = read_file(f.home + "/.bashrc");
  auto plant = f.ccsb("ln -s '" + victim + "' '" + out + "/h.json'; ln -s '" + f.home + "/.bashrc' '" + out +
                          "/ev.jsonl'; echo @@planted=$?",
                      {"--bind", out});
  ESCAPE_REQUIRE_RAN(plant);
  REQUIRE(plant.get("planted") == "0");
  auto still_links = [&] {
    struct stat st{};
    CHECK((::lstat((out + "/h.json").c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
    CHECK((::lstat((out + "/ev.jsonl").c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
  };
  // Session 2, with `out` read-only, is asked for relative --handle/--events
  // there.
  auto r = run_in(f, {"--profile", "spec", "--bind", f.home, "--bind", out + ":ro", "--handle", "h.json", "--events",
                      "ev.jsonl"},
                  "echo '$(touch /tmp/pwned)'", out, unpriv);
  INFO(r.describe());
  CHECK(r.exit_code == 125); // refused before anything ran
  CHECK(r.err.find("without following a link") != std::string::npos);
  CHECK(r.out.find("@@ran=1") == std::string::npos);
  CHECK(read_file(victim) == before);
  CHECK(read_file(f.home + "/.bashrc") == bashrc_before);
  still_links();
  // The same files with `out` writable: refused (the command could replace
  // them), nothing written, through the links or at a fresh name.
  auto w = run_in(f, {"--profile", "spec", "--bind", f.home, "--handle", "h.json", "--events", "ev.jsonl"},
                  "echo '$(touch /tmp/pwned)'", out, unpriv);
  INFO(w.describe());
  CHECK(w.exit_code == 125);
  CHECK(w.out.find("@@ran=1") == std::string::npos);
  CHECK(read_file(victim) == before);
  CHECK(read_file(f.home + "/.bashrc") == bashrc_before);
  still_links();
  for (const char* opt : {"--handle", "--events"}) {
    const std::string fresh = out + "/fresh-" + std::string(opt + 2) + ".json";
    auto n = run_in(f, {"--profile", "spec", opt, fresh}, "true", out, unpriv);
    INFO(opt << "\n" << n.describe());
    CHECK(n.exit_code == 125);
    CHECK(n.err.find(std::string(opt) + ": \"" + fresh + "\" lies inside the writable bind") != std::string::npos);
    CHECK(n.out.find("@@ran=1") == std::string::npos);
    CHECK(!file_exists(fresh));
  }
}

TEST_CASE("L8: the handle written after the command exits does not follow a link the command swapped in",
          "[L8][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  const std::string before = read_file(f.home + "/.bashrc");
  // The handle and events files of session B lie in `out`, read-only to B
  // (the launcher refuses them inside a writable bind) and writable to a
  // second sandbox A. While B runs, A's command replaces both files with
  // links to the user's .bashrc; B's command exits only after it saw the
  // swap, so B's final handle write comes after it.
  const std::string out = f.base + "/out";
  make_dirs(out);
  hand_to_sandbox_uid(out);
  const std::string b_up = f.work + "/b-up", swapped = out + "/swapped";
  const std::string h = out + "/h.json", ev = out + "/ev.jsonl";
  spawn_options oa;
  oa.env = f.env();
  oa.cwd = f.work;
  // A runs as the shared uid (--run-as): with a session uid of its own the
  // kernel would not let it remove the root launcher's files (their owner
  // is unmapped in its idmapped bind, EOVERFLOW), and the swap is the attack.
  std::vector<std::string> a_opts{"--profile", "spec", "--bind", out};
  if (!unpriv) a_opts.insert(a_opts.end(), {"--run-as", std::to_string(kSandboxTestUid) + ":" + std::to_string(kSandboxTestGid)});
  oa.argv = run_argv(a_opts,
                     sandbox_fixture::wrap(wait_for_file_script(b_up) + "[ -e '" + h + "' ] && [ -e '" + ev +
                                  "' ]; echo @@found=$?\n"
                                  "rm -f '" + h + "' '" + ev + "'; ln -s '" + f.home + "/.bashrc' '" + h +
                                  "'; ln -s '" + f.home + "/.bashrc' '" + ev + "'; echo @@swapped=$?\n"
                                  "touch '" + swapped + "'\n"),
                     unpriv);
  auto a = spawn(oa);
  auto rb = run_in(f, {"--profile", "spec", "--bind", f.home, "--bind", out + ":ro", "--handle", h, "--events", ev},
                   "touch '" + b_up + "'; echo @@up=$?\n" + wait_for_file_script(swapped) + "test -L '" + h +
                       "'; echo @@seen=$?",
                   f.work, unpriv);
  auto ra = collect(a);
  ESCAPE_REQUIRE_RAN(ra);
  ESCAPE_REQUIRE_RAN(rb);
  REQUIRE(rb.get("up") == "0");
  REQUIRE(ra.get("found") == "0"); // B's launcher had written both files
  REQUIRE(ra.get("swapped") == "0");
  REQUIRE(rb.get("seen") == "0");  // the swap happened before B's command exited
  CHECK(read_file(f.home + "/.bashrc") == before);
  // The links are still links (nothing renamed over them either).
  struct stat st{};
  REQUIRE(::lstat(h.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(::lstat(ev.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  // Where the command itself could swap them (inside a writable bind) the
  // launcher refuses the files: nothing runs, nothing is written.
  const std::string h2 = f.work + "/h.json", ev2 = f.work + "/ev.jsonl";
  auto w = run_in(f, {"--profile", "spec", "--bind", f.home, "--handle", h2, "--events", ev2},
                  "rm -f h.json ev.jsonl; ln -s '" + f.home + "/.bashrc' h.json; ln -s '" + f.home +
                      "/.bashrc' ev.jsonl; echo @@swapped=$?",
                  f.work, unpriv);
  INFO(w.describe());
  CHECK(w.exit_code == 125);
  CHECK(w.err.find("lies inside the writable bind") != std::string::npos);
  CHECK(w.out.find("@@ran=1") == std::string::npos);
  CHECK(!file_exists(h2));
  CHECK(!file_exists(ev2));
  CHECK(read_file(f.home + "/.bashrc") == before);
}

TEST_CASE("L8: one session's teardown and sweep never lift a second live session's placeholders",
          "[L8][P5][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  // The workspace is HOME and has no ~/.ssh, ~/.netrc, ~/.kube or
  // ~/.docker/config.json, so A's launcher creates mode-0000 placeholders
  // there. B starts while A runs and mounts over the same names. A ends
  // first, then a third launcher starts (and sweeps) while B is live; neither
  // clean-up may remove what B's masks sit on. Then B tries to create each
  // secret, and each write-denied start-up name (a broker rule: no
  // placeholder).
  const std::string hw = f.base + "/hw";
  make_home_workspace(hw);
  const std::string a_go = f.work + "/a-go", b_go = f.work + "/b-go";
  auto a = spawn(home_options(f, hw, {"--profile", "spec", "--bind", f.work}, wait_for_file_script(a_go), unpriv));
  for (int i = 0; i < 400 && !file_exists(hw + "/.netrc"); ++i) ::usleep(25000);
  REQUIRE(file_exists(hw + "/.netrc"));
  auto b = spawn(home_options(f, hw, {"--profile", "spec", "--bind", f.work},
                              wait_for_file_script(b_go) + "test -e ~/.ssh; echo @@ssh_present=$?\n" +
                                  "test -e ~/.netrc; echo @@netrc_present=$?\n" + kWriteAttempts,
                              unpriv));
  // B is up once its command runs: its first output line arrives.
  {
    pollfd p{b.out_fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 60000) == 1);
  }
  write_file(a_go, "");
  auto ra = collect(a);
  ESCAPE_REQUIRE_RAN(ra);
  // A third launcher starts (and sweeps) while B is still live.
  auto c = run(home_options(f, hw, {"--profile", "spec"}, "true", unpriv));
  ESCAPE_REQUIRE_RAN(c);
  // B's placeholders are still on the host.
  for (const char* p : kMissingSecrets) CHECK(file_exists(hw + p));
  write_file(b_go, "");
  auto rb = collect(b);
  ESCAPE_REQUIRE_RAN(rb);
  CHECK(rb.get("ssh_present") == "0"); // B's masks are still mounted
  CHECK(rb.get("netrc_present") == "0");
  for (const char* k : {"ssh", "netrc", "kube", "docker", "bashrc", "zshrc", "hook", "claude"}) {
    INFO(k);
    CHECK(failed(rb.get(k)));
  }
  // After all sessions nothing is left on the host: neither the secrets'
  // placeholders nor anything at the write-denied names (the broker created
  // nothing there).
  for (const char* p : kMissingSecrets) CHECK(!file_exists(hw + p));
  for (const char* p : {"/.bashrc", "/.zshrc", "/.claude", "/.git/hooks/pre-commit"}) {
    INFO(p);
    CHECK(!file_exists(hw + p));
  }
}

TEST_CASE("L8: a SIGKILLed launcher's placeholders and registry records are gone after the next launch, "
          "also when its workdir was deleted",
          "[L8][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  const std::string reg = registry_dir(unpriv);
  // Two launchers, each killed while its command runs, each in a workspace
  // that is HOME and lacks the secrets (so it gets read-deny placeholders):
  // `kept` stays, so the next launcher's sweep must remove the placeholders
  // there; `doomed` is deleted (a test fixture or a worktree removed after a
  // crash), so there is nothing left to remove and the registry must forget
  // it.
  const std::string kept = f.base + "/kept", doomed = f.base + "/doomed";
  std::vector<child> crashed;
  for (const auto& dir : {kept, doomed}) {
    make_home_workspace(dir);
    crashed.push_back(spawn(home_options(f, dir, {"--profile", "spec"}, "sleep 30", unpriv)));
    pollfd p{crashed.back().out_fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 60000) == 1); // "@@ran=1": the placeholders exist
    for (const char* s : kMissingSecrets) REQUIRE(file_exists(dir + s));
    REQUIRE(!registry_files_naming(reg, dir + "/").empty()); // and are registered
    // A write-denied name is a broker rule: nothing at it on the host.
    CHECK(!file_exists(dir + "/.zshrc"));
    CHECK(!file_exists(dir + "/.bashrc"));
  }
  for (auto& c : crashed) {
    ::kill(c.pid, SIGKILL); // the launcher only: no teardown runs
    auto r = collect(c, 30);
    CHECK(r.term_signal == SIGKILL);
  }
  // The crash left `kept`'s placeholders (they existed while it ran, above);
  // they are not checked again here: another test's launcher (ctest -j2,
  // the same uid's registry) may sweep them from this moment on, and CI once
  // failed on exactly that.
  // Another test's launcher may be sweeping these very placeholders at the
  // same time (ctest -j2: its sweep finds the killed sessions' records): an
  // entry gone under the walk is fine (temp_dir::remove_tree), and a walk cut short by
  // anything else is retried, bounded. CI once failed here without it.
  for (int i = 0; i < 300 && file_exists(doomed); ++i) {
    ccsb_test::temp_dir::remove_tree(doomed);
    if (file_exists(doomed)) ::usleep(100000);
  }
  if (file_exists(doomed)) {
    auto left = run_host({"/bin/ls", "-laR", doomed});
    auto rm = run_host({"/bin/rm", "-rf", doomed});
    FAIL("the deleted workdir would not go away:\n" << left.out << "\nrm -rf: " << rm.err);
  }
  // The next launch, in another directory, sweeps.
  auto next = run_in(f, {"--profile", "spec"}, "true", f.work, unpriv);
  ESCAPE_REQUIRE_RAN(next);
  for (const char* s : kMissingSecrets) {
    INFO(s);
    CHECK(!file_exists(kept + s));
  }
  // .claude is the created parent of ~/.claude/.credentials.json's mask.
  CHECK(!file_exists(kept + "/.claude"));
  INFO("registry files still naming the deleted workdir: " << joined(registry_files_naming(reg, doomed + "/")));
  CHECK(registry_files_naming(reg, doomed + "/").empty());
  INFO("registry files naming this fixture: " << joined(registry_files_naming(reg, f.base + "/")));
  CHECK(registry_files_naming(reg, f.base + "/").empty());
}

TEST_CASE("L8: the placeholder registry does not grow with repeated launches", "[L8][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  const std::string reg = registry_dir(unpriv);
  const std::string hw = f.base + "/hw";
  make_home_workspace(hw);
  for (int i = 0; i < 6; ++i) {
    INFO("launch " << i);
    // Launches in a workspace that is HOME and in one deleted afterwards,
    // each without the secrets, so each gets read-deny placeholders.
    const std::string gone = f.base + "/gone-" + std::to_string(i);
    make_home_workspace(gone);
    for (const auto& dir : {hw, gone}) {
      auto r = run(home_options(f, dir, {"--profile", "spec"},
                                "test -e ~/.ssh; echo @@ssh=$?\ntest -e ~/.netrc; echo @@netrc=$?", unpriv));
      ESCAPE_REQUIRE_RAN(r);
      CHECK(r.get("ssh") == "0"); // placeholders were created (and registered)
      CHECK(r.get("netrc") == "0");
      for (const char* s : kMissingSecrets) CHECK(!file_exists(dir + s));
      INFO("registry files naming this fixture: " << joined(registry_files_naming(reg, f.base + "/")));
      CHECK(registry_files_naming(reg, f.base + "/").empty());
    }
    ccsb_test::temp_dir::remove_tree(gone);
  }
}

TEST_CASE("L8: the stale-run-dir sweep acts on nothing a sandbox could have written", "[L8][escape]") {
  sandbox_fixture f;
  // What the old sweep trusted: a run dir in /tmp with a dead pid and a
  // placeholder list naming empty entries outside every bind.
  const std::string victim_dir = f.outside + "/empty-dir";
  const std::string victim_file = f.outside + "/empty-file";
  make_dirs(victim_dir);
  write_file(victim_file, "");
  const std::string fake = "/tmp/ccsb-forged-" + random_token().substr(0, 6);
  make_dirs(fake);
  write_file(fake + "/ccsb-run.pid", "999999999\n");
  write_file(fake + "/placeholders", victim_dir + "\n" + victim_file + "\n");
  auto r = f.ccsb("true");
  ESCAPE_REQUIRE_RAN(r);
  CHECK(file_exists(victim_dir));
  CHECK(file_exists(victim_file));
  ccsb_test::temp_dir::remove_tree(fake);
  // And a policy that would let the sandbox write ccsb's run-dir base is
  // refused before anything runs.
  const std::string base = ::geteuid() == 0 ? "/run/ccsb-sessions" : "/tmp/ccsb-" + std::to_string(::geteuid());
  auto refused = run_in(f, {"--profile", "spec", "--bind", base}, "true", f.work);
  CHECK(refused.exit_code == 125);
  CHECK(refused.err.find("run-dir base") != std::string::npos);
}

TEST_CASE("L7: /tmp, memory and process count are bounded, and the handle says how", "[L7][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  const std::string handle = f.base + "/handle.json";
  auto r = run_in(f,
                  {"--profile", "spec", "--tmp-size", "8M", "--memory", "256M", "--pids", "64", "--handle", handle},
                  // /tmp: 32 MiB into an 8 MiB cap.
                  "dd if=/dev/zero of=/tmp/big bs=1M count=32 2>/dev/null; echo @@dd=$?\n"
                  "echo @@tmpsize=$(stat -c %s /tmp/big)\n"
                  "rm -f /tmp/big\n"
                  // memory: 1 GiB touched in a 256 MiB session.
                  "python3 -c 'b = bytearray(1 << 30); print(len(b))' >/dev/null 2>&1; echo @@mem=$?\n"
                  // processes: 200 children held at once in a 64-process session.
                  "python3 -c '\n"
                  "import os, signal\n"
                  "kids = []\n"
                  "for i in range(200):\n"
                  "    try:\n"
                  "        pid = os.fork()\n"
                  "    except OSError:\n"
                  "        break\n"
                  "    if pid == 0:\n"
                  "        signal.pause()\n"
                  "    kids.append(pid)\n"
                  "print(\"@@started=%d\" % len(kids))\n"
                  "for k in kids: os.kill(k, signal.SIGKILL)\n"
                  "for k in kids: os.waitpid(k, 0)\n"
                  "'\n",
                  f.work, unpriv);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(failed(r.get("dd")));
  CHECK(std::stoll(r.get("tmpsize")) <= 8ll << 20);
  CHECK(failed(r.get("mem")));
  CHECK(std::stoi(r.get("started")) < 64);
  auto h = read_file(handle);
  INFO(h);
  if (!unpriv) {
    // Teardown killed and removed the session's cgroups: none is left under
    // this process's own memory/pids cgroup (the launcher's parent's).
    auto at = h.find("\"runDir\":\"");
    REQUIRE(at != std::string::npos);
    std::string run_dir = h.substr(at + 10, h.find('"', at + 10) - at - 10);
    std::string name = run_dir.substr(run_dir.rfind('/') + 1);
    std::istringstream cg(read_file("/proc/self/cgroup"));
    std::string line;
    int hierarchies = 0;
    while (std::getline(cg, line)) {
      for (const char* ctl : {":memory:", ":pids:"}) {
        auto c = line.find(ctl);
        if (c == std::string::npos) continue;
        std::string own = line.substr(c + std::strlen(ctl));
        std::string dir = std::string("/sys/fs/cgroup/") + (ctl[1] == 'm' ? "memory" : "pids") + (own == "/" ? "" : own);
        ++hierarchies;
        CHECK_FALSE(file_exists(dir + "/" + name));
      }
    }
    CHECK(hierarchies >= (h.find("cgroup-v1") != std::string::npos ? 2 : 0));
    CHECK((h.find("\"limits\":\"cgroup-v1\"") != std::string::npos ||
           h.find("\"limits\":\"cgroup-v2\"") != std::string::npos));
  } else {
    CHECK(h.find("\"limits\":\"rlimit\"") != std::string::npos);
  }
  CHECK(h.find("\"pidsMax\":64") != std::string::npos);
}

TEST_CASE("L7: an unprivileged launcher without cgroups says its sessions share the CPU, and refuses a --cpus cap "
          "instead of dropping it",
          "[L7][escape]") {
  sandbox_fixture f;
  const std::string handle = f.base + "/handle.json";
  auto r = run_in(f, {"--profile", "spec", "--handle", handle}, "echo @@ran=1", f.work, true);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.err);
  auto h = read_file(handle);
  INFO(h);
  CHECK(h.find("\"limits\":\"rlimit\"") != std::string::npos);
  CHECK(h.find("\"cpu\":\"none\"") != std::string::npos);
  CHECK(h.find("\"cpuMax\"") == std::string::npos);
  CHECK(r.err.find("no CPU separation") != std::string::npos); // the start-up log says so
  // A cap asked for where no cgroup can take it: refused, nothing runs.
  auto capped = run_in(f, {"--profile", "spec", "--cpus", "1.5"}, "touch ran-with-cap", f.work, true);
  CHECK(capped.exit_code == 125);
  CHECK(capped.err.find("cpus: a CPU cap of 1.5 was asked for") != std::string::npos);
  CHECK_FALSE(file_exists(f.work + "/ran-with-cap"));
}

TEST_CASE("L7: /dev/shm is capped like /tmp, and neither /dev nor / is a writable tmpfs", "[L7][escape]") {
  sandbox_fixture f;
  const bool unpriv = GENERATE(false, true);
  INFO("launcher: " << (unpriv ? "unprivileged (setpriv 65534)" : "root"));
  // 32 MiB into each place, with an 8 MiB /tmp cap and a 256 MiB session:
  // /dev/shm stops at the cap (ENOSPC), /dev and / take nothing (EROFS).
  std::string script;
  for (const auto& [name, path] : std::vector<std::pair<std::string, std::string>>{
           {"shm", "/dev/shm/big"}, {"dev", "/dev/big"}, {"root", "/big"}})
    script += "dd if=/dev/zero of=" + path + " bs=1M count=32 2>/dev/null; echo @@" + name + "=$?\n" +
              "echo @@" + name + "size=$(stat -c %s " + path + " 2>/dev/null || echo 0)\n" +
              "rm -f " + path + "\n";
  // A mkdir in /dev is refused too, and shared memory itself still works.
  script += "mkdir /dev/d 2>/dev/null; echo @@devdir=$?\n"
            "python3 -c 'from multiprocessing import shared_memory as s\n"
            "m = s.SharedMemory(create=True, size=1 << 20); m.buf[0] = 1; m.close(); m.unlink()'; echo @@shmok=$?\n"
            "echo @@mounts=$(grep -c -E ' /dev/shm tmpfs .*size=8192k' /proc/self/mounts)\n";
  auto r = run_in(f, {"--profile", "spec", "--tmp-size", "8M", "--memory", "256M"}, script, f.work, unpriv);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(failed(r.get("shm")));
  CHECK(std::stoll(r.get("shmsize")) <= 8ll << 20);
  CHECK(failed(r.get("dev")));
  CHECK(std::stoll(r.get("devsize")) == 0);
  CHECK(failed(r.get("root")));
  CHECK(std::stoll(r.get("rootsize")) == 0);
  CHECK(failed(r.get("devdir")));
  CHECK(r.get("shmok") == "0");
  CHECK(r.get("mounts") == "1");
}

TEST_CASE("P5: ccsb's placeholders are invisible to git inside, so git add -A commits none of them", "[P5][L2][escape]") {
  sandbox_fixture f;
  // The worktree is HOME (bound writable) and has none of ~/.ssh, ~/.netrc,
  // ~/.kube, ~/.docker/config.json, so each is occupied by a mode-0000
  // placeholder while the session runs. The write-denied start-up names
  // (.bashrc, .zshrc, ...) are broker rules and get nothing.
  const std::string hw = f.base + "/hw";
  make_home_workspace(hw);
  auto r = run(home_options(
      f, hw, {"--profile", "spec"},
      "echo real > real.txt\n"
      "echo @@placeholders=$(ls -A | grep -c -E '^(\\.ssh|\\.netrc|\\.kube|\\.docker)$')\n"
      "test -e .bashrc; echo @@bashrc=$?\n"
      "echo @@status=$(git status --porcelain --untracked-files=all 2>&1 | tr '\\n' ,)\n"
      "git add -A 2>&1; echo @@add=$?\n"
      "echo @@staged=$(git diff --cached --name-only | tr '\\n' ,)\n",
      false));
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("placeholders") == "4"); // the names really are occupied
  CHECK(failed(r.get("bashrc")));      // no write-deny placeholder
  CHECK(r.get("status") == "?? real.txt,");
  CHECK(r.get("add") == "0");
  // Only what the command made, nothing of ccsb's.
  CHECK(r.get("staged") == "real.txt,");
  for (const char* s : kMissingSecrets) CHECK(!file_exists(hw + s));
}

TEST_CASE("L1: a root launcher installed in a directory the sandbox uid cannot enter still starts ccsb-init",
          "[L1][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  // ccsb-run, ccsb-init and egressd copied into a root-only 0700 directory,
  // as a root server might install them; the sandbox runs as uid 65534. Not
  // inside the fixture: that belongs to uid 65534, which could replace them
  // (a helper another uid could write is refused, L8).
  ccsb_test::temp_dir bin_dir("ccsb-escape-private-bin");
  const std::string bin = bin_dir.path();
  REQUIRE(::chown(bin.c_str(), 0, 0) == 0);
  REQUIRE(::chmod(bin.c_str(), 0700) == 0);
  for (const char* prog : {"ccsb-run", "ccsb-init", "egressd"}) {
    write_file(bin + "/" + prog, read_file(bin_path(prog)), 0755);
    REQUIRE(::chown((bin + "/" + prog).c_str(), 0, 0) == 0);
  }
  spawn_options o;
  o.argv = {bin + "/ccsb-run", "--profile", "spec", "--", "/bin/bash", "-c", sandbox_fixture::wrap("echo @@uid=$(id -u)")};
  o.env = f.env();
  o.cwd = f.work;
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("uid") == "65534");
}
