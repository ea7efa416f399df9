// ccsb-run --print-profile seatbelt|bwrap (issue 12): prints what would run
// and exits 0 without running anything; 125 with a reason when refused.
#include "sbpl_eval.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct run_result {
  int status{-1};
  std::string out;
};

// Runs ccsb-run with `args` (shell-quoted by the caller's literals, no user
// input) in a fresh directory; stdout captured, stderr to a file.
run_result ccsb_run(const std::string& args, const std::string& dir) {
  std::string cmd = "cd '" + dir + "' && '" + std::string(CCSB_BIN_DIR) + "/ccsb-run' " + args + " 2>'" + dir +
                    "/stderr.txt'";
  run_result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("ccsb-print-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d / "ws");
  return d.string();
}

} // namespace

TEST_CASE("M1: --print-profile seatbelt prints the profile and runs nothing", "[M1][M6][P6]") {
  std::string d = fresh_dir("sb");
  std::ofstream(d + "/spec.json") << R"({"sessionId":"p1","workspaceId":"w","bindMounts":[{"hostPath":")" << d
                                   << R"(/ws"}],"guestWorkdir":")" << d << R"(/ws"})";
  auto r = ccsb_run("--spec spec.json --print-profile seatbelt -- sh -c 'touch ran'", d);
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
  std::filesystem::remove_all(d);
}

TEST_CASE("M6: --proxy-ports sets the ports, a bad value is refused with 125", "[M6]") {
  std::string d = fresh_dir("ports");
  auto r = ccsb_run("--bind ws --print-profile seatbelt --proxy-ports 41000,41001 -- true", d);
  CHECK(r.status == 0);
  auto p = sbeval::load(r.out);
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:41000"));
  CHECK(sbeval::decide(p, "network-outbound", "ip:localhost:41001"));
  CHECK_FALSE(sbeval::decide(p, "network-outbound", "ip:localhost:3128"));
  for (std::string bad : {"1", "0,1", "1,1", "70000,1", "a,b", "1,2,3"}) {
    INFO(bad);
    auto b = ccsb_run("--print-profile seatbelt --proxy-ports '" + bad + "' -- true", d);
    CHECK(b.status == 125);
    CHECK(b.out.empty());
  }
  std::filesystem::remove_all(d);
}

TEST_CASE("P8: --print-profile exits 125 with a reason when the policy is refused", "[P8]") {
  std::string d = fresh_dir("refused");
  auto r = ccsb_run("--bind /proc --print-profile seatbelt -- true", d);
  CHECK(r.status == 125);
  CHECK(r.out.empty());
  std::ifstream err(d + "/stderr.txt");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  CHECK(text.find("/proc") != std::string::npos);
  auto b = ccsb_run("--print-profile nonsense -- true", d);
  CHECK(b.status == 125);
  std::filesystem::remove_all(d);
}

TEST_CASE("L1: --print-profile bwrap prints the bubblewrap argv one argument per line", "[L1]") {
  std::string d = fresh_dir("bwrap");
  auto r = ccsb_run("--profile spec --print-profile bwrap -- sh -c 'touch ran'", d);
  CHECK(r.status == 0);
  CHECK_FALSE(std::filesystem::exists(d + "/ran"));
  CHECK(r.out.rfind("bwrap\n", 0) == 0);
  CHECK(r.out.find("\n--unshare-user\n") != std::string::npos);
  CHECK(r.out.find("\n--\n") != std::string::npos);
  CHECK(r.out.find("\n/run/ccsb/ccsb-init\n--exec-channel\n3\n") != std::string::npos);
  // S7: the command is not on bwrap's argv; it goes over the exec channel.
  CHECK(r.out.find("\n# sh\n# -c\n# touch ran\n") != std::string::npos);
  std::filesystem::remove_all(d);
}
