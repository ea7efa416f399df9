// L1, B2, B4, B6 (issue 11): ccsb-run inside the walls an unprivileged
// container or a hardened host puts around it. Each wall is built for real
// by outer_env.c (a user namespace with user.max_user_namespaces = 0, Docker's
// seccomp rules for namespaces, Docker's masked /proc, a read-only /proc), and
// the real ccsb-run must refuse (exit 125, nothing runs) with a B4 line and a
// refusal that name the cause and its fix — and only that cause. Each wall
// has a control: the same harness without the blocking piece runs the
// sandbox, so a refusal is the wall's doing, not the harness's.
// AppArmor is not on this host: its causes are unit-tested from injected
// facts (tests/core/test_backend.cpp), not here.
#include "escape_support.hpp"

using namespace escape;

namespace {

const char* const kCauses[] = {"unsupported-kernel", "sysctl-max-user-namespaces", "sysctl-unprivileged-userns-clone",
                               "seccomp", "apparmor", "proc-masked", "proc-read-only", "no-permission"};

// outer_env WALL... -- ccsb-run [--profile PROFILE ... EXTRA] -- bash -c SCRIPT
proc_result run_walled(const sandbox_fixture& fx, const std::vector<std::string>& wall,
                       const std::vector<std::string>& extra, const std::string& script,
                       const std::string& profile = "spec") {
  // Building the walls needs root; a host where it cannot be done fails.
  REQUIRE(::geteuid() == 0);
  const std::string outer = bin_path("outer_env");
  REQUIRE(::access(outer.c_str(), X_OK) == 0);
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  spawn_options o;
  o.argv = {outer};
  o.argv.insert(o.argv.end(), wall.begin(), wall.end());
  o.argv.push_back("--");
  for (const auto& a : fx.ccsb_argv(extra, script, profile)) o.argv.push_back(a);
  o.env = fx.env();
  o.cwd = fx.work;
  o.timeout_seconds = 120;
  return run(o);
}

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind(prefix, 0) == 0) return line;
  return {};
}

const std::string kB4Blocked =
    "no OS-native agent sandbox on this host (bwrap cannot create its user namespace (cause: ";

// Refused, nothing ran, and both the B4 line and the refusal name `cause`
// (no other) and carry `fix`; `seen` is a piece of what the probe found.
void check_blocked(const proc_result& r, const std::string& cause, const std::string& seen, const std::string& fix,
                   const std::string& refusal_prefix) {
  INFO(r.describe());
  CHECK(r.exit_code == 125);
  CHECK(r.out.find("@@ran=1") == std::string::npos);
  std::string b4 = line_starting(r.err, "no OS-native agent sandbox on this host (");
  REQUIRE_FALSE(b4.empty());
  CHECK_THAT(b4, Catch::StartsWith(kB4Blocked + cause + "): "));
  CHECK_THAT(b4, Catch::Contains(seen));
  CHECK_THAT(b4, Catch::Contains("; fix: " + fix));
  std::string refusal = line_starting(r.err, "ccsb-run: backend: ");
  CHECK_THAT(refusal, Catch::StartsWith("ccsb-run: backend: " + refusal_prefix + " (bwrap cannot create its user "
                                        "namespace (cause: " + cause + "): "));
  CHECK_THAT(refusal, Catch::Contains("; fix: " + fix));
  for (const char* other : kCauses)
    if (cause != other) CHECK(r.err.find(std::string("(cause: ") + other + ")") == std::string::npos);
  // Never a step down to the host (B6: nothing may claim a sandbox it lacks).
  CHECK(r.err.find("session backend: none") == std::string::npos);
}

const std::string kDefault = "the native sandbox cannot start on this host";

void check_runs(const proc_result& r) {
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("@@ran=1") != std::string::npos);
  CHECK_THAT(line_starting(r.err, "agent sandbox ON ("), Catch::StartsWith("agent sandbox ON (bubblewrap"));
  CHECK(r.err.find("session backend: native") != std::string::npos);
  CHECK(r.err.find("(cause: ") == std::string::npos);
}

const std::string kSysctlSeen = "clone(CLONE_NEWUSER) failed with ENOSPC: user namespaces are disabled: "
                                "/proc/sys/user/max_user_namespaces is 0";
const std::string kSysctlFix = "raise it where it is set";
const std::string kSeccompSeen = "clone(CLONE_NEWUSER) failed with EPERM while the sysctls allow it, and a seccomp "
                                 "filter is installed";
const std::string kSeccompFix = "allow namespace creation in the seccomp profile of the container";
const std::string kProcFix = "give the container an unmasked /proc (docker run --security-opt systempaths=unconfined";

} // namespace

TEST_CASE("L1: user.max_user_namespaces = 0 in an enclosing user namespace is named with its fix",
          "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"userns-max0", "--as-nobody"}, {}, "echo @@ran=1"), "sysctl-max-user-namespaces",
                kSysctlSeen, kSysctlFix, kDefault);
}

TEST_CASE("L1: a root launcher's probe meets the sysctl as the nobody its bwrap runs as", "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"userns-max0"}, {}, "echo @@ran=1"), "sysctl-max-user-namespaces", kSysctlSeen,
                kSysctlFix, kDefault);
}

TEST_CASE("L1: control - the same enclosing user namespace without the sysctl runs the sandbox", "[L1][B2][escape]") {
  sandbox_fixture fx;
  check_runs(run_walled(fx, {"userns", "--as-nobody"}, {}, "echo @@ran=1"));
}

TEST_CASE("L1: Docker's default seccomp rules for namespaces are named with their fix", "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"seccomp-docker", "--as-nobody"}, {}, "echo @@ran=1"), "seccomp", kSeccompSeen,
                kSeccompFix, kDefault);
}

TEST_CASE("L1: a seccomp filter denying only CLONE_NEWUSER, under a root launcher, is named with its fix",
          "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"seccomp-newuser"}, {}, "echo @@ran=1"), "seccomp", kSeccompSeen, kSeccompFix,
                kDefault);
}

TEST_CASE("L1: README's container seccomp recipe runs the default dispatch profile, broker included",
          "[L1][B2][X1][escape]") {
  // Docker's denials with the recipe's additions allowed (outer_env.c
  // kRecipeAllows): the full sandbox runs, as nobody and under a root
  // launcher, and the X1 broker still refuses a new *.pem.
  for (bool nobody : {true, false}) {
    INFO((nobody ? "as nobody" : "as root"));
    sandbox_fixture fx;
    std::vector<std::string> wall{"seccomp-docker-ccsb"};
    if (nobody) wall.push_back("--as-nobody");
    auto r = run_walled(fx, wall, {},
                        "echo @@ran=1; ( echo x > " + fx.work + "/new.pem ) 2>/dev/null; echo @@pem=$?", "dispatch");
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(r.get("ran") == "1");
    CHECK(r.get("pem") != "0");
    CHECK_FALSE(file_exists(fx.work + "/new.pem"));
    CHECK(r.err.find("session backend: native (profile dispatch)") != std::string::npos);
    CHECK(r.err.find("(cause: ") == std::string::npos);
  }
}

TEST_CASE("L1: every call README's container seccomp recipe adds is needed, and a missing one is named",
          "[L1][B2][B4][L4][escape]") {
  // bwrap's calls: the probe finds the denied one before bwrap runs.
  for (const char* call : {"clone", "unshare", "mount", "umount2", "pivot_root", "sethostname"}) {
    INFO("without " << call);
    sandbox_fixture fx;
    auto r = run_walled(fx, {"seccomp-docker-ccsb", "--as-nobody", "--without", call}, {}, "echo @@ran=1", "dispatch");
    check_blocked(r, "seccomp", "", kSeccompFix, kDefault);
  }
  // pidfd_getfd: the X1 broker's; without it dispatch is refused (L4).
  sandbox_fixture fx;
  auto r = run_walled(fx, {"seccomp-docker-ccsb", "--as-nobody", "--without", "pidfd_getfd"}, {}, "echo @@ran=1",
                      "dispatch");
  INFO(r.describe());
  CHECK(r.exit_code == 125);
  CHECK(r.out.find("@@ran=1") == std::string::npos);
  CHECK(r.err.find("plain bubblewrap cannot forbid creating a new file") != std::string::npos);
  CHECK(r.err.find("(cause: ") == std::string::npos);
}

TEST_CASE("L1: control - a seccomp filter that denies nothing (Seccomp: 2) runs the sandbox", "[L1][B2][escape]") {
  sandbox_fixture fx;
  check_runs(run_walled(fx, {"seccomp-none", "--as-nobody"}, {}, "echo @@ran=1"));
}

TEST_CASE("L1: Docker's masked /proc is named with its fix", "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"proc-masked", "--as-nobody"}, {}, "echo @@ran=1"), "proc-masked",
                "mounting proc failed with EPERM: /proc has mounts over paths below it (", kProcFix, kDefault);
}

TEST_CASE("L1: a read-only /proc is named with its fix", "[L1][B2][B4][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"proc-ro", "--as-nobody"}, {}, "echo @@ran=1"), "proc-read-only",
                "failed with EROFS: /proc is mounted read-only", "mount /proc read-write; " + kProcFix, kDefault);
}

TEST_CASE("L1: control - a private mount namespace with /proc as it was runs the sandbox", "[L1][B2][escape]") {
  sandbox_fixture fx;
  check_runs(run_walled(fx, {"mountns", "--as-nobody"}, {}, "echo @@ran=1"));
}

TEST_CASE("B6: an explicit --backend native on a blocked host is refused with the cause", "[B6][L1][escape]") {
  sandbox_fixture fx;
  check_blocked(run_walled(fx, {"seccomp-docker", "--as-nobody"}, {"--backend", "native"}, "echo @@ran=1"), "seccomp",
                kSeccompSeen, kSeccompFix, "native was requested but this host cannot provide it");
}

TEST_CASE("B6: --backend none on a blocked host runs on the host and says so", "[B6][B8][L1][escape]") {
  sandbox_fixture fx;
  auto r = run_walled(fx, {"seccomp-docker", "--as-nobody"}, {"--backend", "none"}, "echo @@ran=1");
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("@@ran=1") != std::string::npos);
  CHECK_THAT(line_starting(r.err, "no OS-native agent sandbox on this host ("),
             Catch::StartsWith(kB4Blocked + "seccomp): "));
  CHECK(r.err.find("session backend: none — the command runs on the host WITHOUT a sandbox") != std::string::npos);
}
