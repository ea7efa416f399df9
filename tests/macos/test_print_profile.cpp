// ccsb-run --print-profile seatbelt|bwrap (issue 12): prints what would run
// and exits 0 without running anything; 125 with a reason when refused.
#include "sbpl_eval.hpp"

#include "ccsb_test/process.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct run_result {
  int status{-1};
  std::string out, err;
};

// Runs ccsb-run ARGS in `dir` with the test's environment.
run_result ccsb_run(std::vector<std::string> args, const std::string& dir) {
  ccsb_test::process_options o;
  o.argv = {std::string(CCSB_BIN_DIR) + "/ccsb-run"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e; ++e) o.env.push_back(*e);
  o.cwd = dir;
  auto done = ccsb_test::run(o, std::chrono::seconds(120));
  return {done.term_signal ? -1 : done.exit_code, std::move(done.out), std::move(done.err)};
}

// A fresh directory with an empty ws/ in it, removed at the end of the test.
struct fresh_dir {
  ccsb_test::temp_dir tmp;
  explicit fresh_dir(const std::string& name) : tmp("ccsb-print-" + name, "/tmp", 0755) {
    std::filesystem::create_directories(tmp.path() + "/ws");
  }
};

} // namespace

TEST_CASE("M1: --print-profile seatbelt prints the profile and runs nothing", "[M1][M6][P6]") {
  fresh_dir dir("sb");
  const std::string& d = dir.tmp.path();
  std::ofstream(d + "/spec.json") << R"({"sessionId":"p1","workspaceId":"w","bindMounts":[{"hostPath":")" << d
                                   << R"(/ws"}],"guestWorkdir":")" << d << R"(/ws"})";
  auto r = ccsb_run({"--spec", "spec.json", "--print-profile", "seatbelt", "--", "sh", "-c", "touch ran"}, d);
  CHECK(r.status == 0);
  CHECK_FALSE(std::filesystem::exists(d + "/ws/ran"));
  CHECK_FALSE(std::filesystem::exists(d + "/ran"));
  auto p = sbeval::load(r.out);
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:3128"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:1080"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:22"));
  // The macOS path facts: the bind under /tmp is writable in its /private spelling.
  std::string ws = d + "/ws";
  std::string mac_ws = ws.rfind("/tmp/", 0) == 0 ? "/private" + ws : ws;
  CHECK(sbeval::decide(p, "file-write-create", mac_ws + "/x.c"));
  CHECK_FALSE(sbeval::decide(p, "file-write-create", mac_ws + "/.env"));
  CHECK_FALSE(sbeval::decide(p, "file-read-data", "/private/etc/shadow"));
  CHECK(r.out.find("ccsb-p1-print") != std::string::npos);
}

TEST_CASE("M6: --proxy-ports sets the ports, a bad value is refused with 125", "[M6]") {
  fresh_dir dir("ports");
  const std::string& d = dir.tmp.path();
  auto r = ccsb_run({"--bind", "ws", "--print-profile", "seatbelt", "--proxy-ports", "41000,41001", "--", "true"}, d);
  CHECK(r.status == 0);
  auto p = sbeval::load(r.out);
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:41000"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:41001"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:3128"));
  for (std::string bad : {"1", "0,1", "1,1", "70000,1", "a,b", "1,2,3"}) {
    INFO(bad);
    auto b = ccsb_run({"--print-profile", "seatbelt", "--proxy-ports", bad, "--", "true"}, d);
    CHECK(b.status == 125);
    CHECK(b.out.empty());
  }
}

TEST_CASE("P8: --print-profile exits 125 with a reason when the policy is refused", "[P8]") {
  fresh_dir dir("refused");
  const std::string& d = dir.tmp.path();
  auto r = ccsb_run({"--bind", "/proc", "--print-profile", "seatbelt", "--", "true"}, d);
  CHECK(r.status == 125);
  CHECK(r.out.empty());
  CHECK(r.err.find("/proc") != std::string::npos);
  auto b = ccsb_run({"--print-profile", "nonsense", "--", "true"}, d);
  CHECK(b.status == 125);
}

TEST_CASE("L1: --print-profile bwrap prints the bubblewrap argv one argument per line", "[L1]") {
  fresh_dir dir("bwrap");
  const std::string& d = dir.tmp.path();
  auto r = ccsb_run({"--profile", "spec", "--print-profile", "bwrap", "--", "sh", "-c", "touch ran"}, d);
  CHECK(r.status == 0);
  CHECK_FALSE(std::filesystem::exists(d + "/ran"));
  CHECK(r.out.rfind("bwrap\n", 0) == 0);
  CHECK(r.out.find("\n--unshare-user\n") != std::string::npos);
  CHECK(r.out.find("\n--\n") != std::string::npos);
  CHECK(r.out.find("\n/run/ccsb/ccsb-init\n--exec-channel\n3\n") != std::string::npos);
  // S7: the command is not on bwrap's argv; it goes over the exec channel.
  CHECK(r.out.find("\n# sh\n# -c\n# touch ran\n") != std::string::npos);
}
