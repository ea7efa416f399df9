// The macOS launcher as a Mac builds it, run on Linux (B2, S7, M6, M8, L1):
// ccsb-run-macsim is tools/ccsb-run/ccsb-run.cpp compiled with every macOS choice
// of ccsb/sys/platform.hpp (CCSB_LAUNCH_SIMULATE_MACOS): the Seatbelt
// driver picked through the boundary, the SIGCHLD exit watch, the self-pipe
// signals, no bwrap_driver. Only the Apple calls are Linux ones (the
// per-user temp dir comes from CCSB_SIMULATED_USER_TEMP_DIR), and
// sandbox-exec and log are stand-ins (CCSB_SIMULATED_SANDBOX_EXEC,
// CCSB_SIMULATED_LOG): the stand-in sandbox-exec keeps its profile and runs
// the command; the stand-in log prints one denial for the tag it is asked
// about. egressd is the real one. As root (CI) the launcher runs as nobody
// through setpriv: the macOS driver refuses a root launcher (L1), which is
// checked too.
#include "stand_ins.hpp"

#include "ccsb_test/process.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

using stand_ins::slurp;

struct sim {
  ccsb_test::temp_dir tmp{"ccsb-macsim", "/tmp", 0755};
  fs::path dir;
  std::string d;
  sim() {
    dir = tmp.path();
    fs::create_directories(dir / "ws");
    fs::create_directories(dir / "T");
    fs::create_directories(dir / "home");
    d = dir.string();
    ::chmod((d + "/T").c_str(), 0700);
    stand_ins::sandbox_exec(d + "/sandbox-exec", d + "/ws");
    stand_ins::log(d + "/log", d + "/ws");
    if (::geteuid() == 0)
      for (const auto& p : {d + "/ws", d + "/T", d + "/home"}) REQUIRE(::chown(p.c_str(), kNobody, kNobody) == 0);
  }

  std::vector<std::string> env() const {
    return {"PATH=/usr/bin:/bin", "HOME=" + d + "/home", "CCSB_SIMULATED_SANDBOX_EXEC=" + d + "/sandbox-exec",
            "CCSB_SIMULATED_LOG=" + d + "/log", "CCSB_SIMULATED_USER_TEMP_DIR=" + d + "/T",
            "CCSB_EGRESSD=" + std::string(CCSB_BIN_DIR) + "/egressd"};
  }

  // Starts ccsb-run-macsim ARGS in ws/ (as nobody when root, unless as_root),
  // stdout and stderr into ws/out and ws/err.
  pid_t start(const std::vector<std::string>& args, bool as_root = false) const {
    std::vector<std::string> av;
    if (::geteuid() == 0 && !as_root)
      av = {"/usr/bin/setpriv", "--reuid", std::to_string(kNobody), "--regid", std::to_string(kNobody), "--clear-groups"};
    av.push_back(std::string(CCSB_BIN_DIR) + "/ccsb-run-macsim");
    av.insert(av.end(), args.begin(), args.end());
    ccsb_test::process_options o;
    o.argv = av;
    o.env = env();
    o.cwd = d + "/ws";
    const int out = ::open((d + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open((d + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(out >= 0);
    REQUIRE(err >= 0);
    o.stdout_fd = out;
    o.stderr_fd = err;
    const pid_t p = ccsb_test::spawn(o);
    ::close(out);
    ::close(err);
    return p;
  }
  int wait(pid_t p) const {
    int st = 0;
    while (::waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  int run(const std::vector<std::string>& args, bool as_root = false) const { return wait(start(args, as_root)); }
  std::string out() const { return slurp(d + "/out"); }
  std::string err() const { return slurp(d + "/err"); }
};

bool gone(pid_t p) { return ::kill(p, 0) != 0 && errno == ESRCH; }

} // namespace

TEST_CASE("B2: the simulated macOS ccsb-run picks the Seatbelt driver through the platform boundary and runs the "
          "command under sandbox-exec",
          "[B2][S7][M6][M8][N1]") {
  sim s;
  const int code = s.run({"--bind", s.d + "/ws:ro", "--events", s.d + "/ws/events.jsonl", "--", "/bin/sh", "-c", "echo hi; echo oops >&2; exit 5"});
  INFO(s.err());
  CHECK(code == 5);
  CHECK(s.out() == "hi\n");
  CHECK(s.err().find("oops\n") != std::string::npos);
  CHECK(s.err().find("Seatbelt") != std::string::npos);             // B4: the macOS probe
  CHECK(s.err().find("session backend: native") != std::string::npos); // B6
  CHECK(s.err().find("applies no L7 limits") != std::string::npos);   // said, not silently dropped
  // The stand-in sandbox-exec got a Seatbelt profile with the real egressd's port.
  const std::string prof = s.d + "/ws/profile.sb";
  REQUIRE(fs::exists(prof));
  const std::string text = slurp(prof);
  CHECK(text.rfind("(version 1)", 0) == 0);
  CHECK(text.find("(allow default)") != std::string::npos);
  const std::string env = slurp(s.d + "/ws/env.txt");
  auto at = env.find("HTTP_PROXY=http://127.0.0.1:");
  REQUIRE(at != std::string::npos);
  const std::string port = env.substr(at + 28, env.find('\n', at) - at - 28);
  CHECK(port != "3128");
  CHECK(text.find("localhost:" + port) != std::string::npos); // M6: that port, not a default
  CHECK(env.find("TMPDIR=" + s.d + "/T/ccsb-") != std::string::npos); // the run dir under the user temp dir
  // M8: the stand-in log's denial for this session's tag is a violation event.
  const std::string events = slurp(s.d + "/ws/events.jsonl");
  CHECK(events.find("\"violation\"") != std::string::npos);
  CHECK(events.find("id_rsa") != std::string::npos);
  CHECK(events.find("\"exitCode\":5") != std::string::npos);
  // Nothing is left: the run dir removed, the log reader ended.
  CHECK(fs::is_empty(s.d + "/T"));
  const std::string pid = slurp(s.d + "/ws/log.pid");
  REQUIRE_FALSE(pid.empty());
  CHECK(gone(std::stoi(pid)));
}

TEST_CASE("S7: SIGTERM to the simulated macOS ccsb-run stops the command (self-pipe signals, SIGCHLD exits)",
          "[S7][S5]") {
  sim s;
  pid_t p = s.start({"--bind", s.d + "/ws:ro", "--events", s.d + "/ws/events.jsonl", "--", "/bin/sleep", "30"});
  // Wait until the command runs (the stand-in wrote its profile), then SIGTERM.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(s.d + "/ws/env.txt") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(fs::exists(s.d + "/ws/env.txt"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  // setpriv execs ccsb-run-macsim in place: p is the launcher itself.
  REQUIRE(::kill(p, SIGTERM) == 0);
  const int code = s.wait(p);
  INFO(s.err());
  CHECK(code == 128 + SIGKILL);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  const std::string events = slurp(s.d + "/ws/events.jsonl");
  CHECK(events.find("\"killed\"") != std::string::npos);
  CHECK(events.find("stop") != std::string::npos);
  CHECK(fs::is_empty(s.d + "/T"));
}

TEST_CASE("L8: the simulated macOS ccsb-run opens --events through the per-component no-symlink walk, and refuses a "
          "planted link",
          "[L8][B2]") {
  sim s;
  fs::create_directories(s.dir / "ws" / "real");
  fs::create_directory_symlink(s.dir / "ws" / "real", s.dir / "ws" / "link");
  if (::geteuid() == 0) REQUIRE(::chown((s.d + "/ws/real").c_str(), kNobody, kNobody) == 0);
  CHECK(s.run({"--bind", s.d + "/ws:ro", "--events", s.d + "/ws/link/events.jsonl", "--", "/bin/true"}) == 125);
  INFO(s.err());
  CHECK(s.err().find("--events: openat(O_NOFOLLOW) per component " + s.d + "/ws/link: ") != std::string::npos);
  CHECK_FALSE(fs::exists(s.dir / "ws" / "real" / "events.jsonl"));
  CHECK_FALSE(fs::exists(s.d + "/ws/env.txt")); // refused before anything ran
  CHECK(fs::is_empty(s.d + "/T"));               // and before the driver made its run dir
  // The real directory is accepted by the same walk.
  CHECK(s.run({"--bind", s.d + "/ws:ro", "--events", s.d + "/ws/real/events.jsonl", "--", "/bin/true"}) == 0);
  CHECK(fs::exists(s.dir / "ws" / "real" / "events.jsonl"));
}

TEST_CASE("L1: the simulated macOS ccsb-run refuses a root launcher (the Seatbelt driver changes no credentials)",
          "[L1][B2]") {
  if (::geteuid() != 0) {
    WARN("not root: nothing to check");
    return;
  }
  sim s;
  CHECK(s.run({"--", "/bin/true"}, true) == 125);
  CHECK(s.err().find("does not run sandboxes as root") != std::string::npos);
  CHECK_FALSE(fs::exists(s.d + "/ws/env.txt"));
}

TEST_CASE("B2: the simulated macOS ccsbd is built from the same sources (compiles and answers --help)", "[B2][S8]") {
  ccsb_test::process_options o;
  o.argv = {std::string(CCSB_BIN_DIR) + "/ccsbd-macsim", "--help"};
  CHECK(ccsb_test::run(o, std::chrono::seconds(60)).exit_code == 0);
}
