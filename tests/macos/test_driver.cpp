// The macOS driver (seatbelt_driver.hpp) on Linux, against stand-ins: a
// fake sandbox-exec (records its argv and environment, then runs the
// command) and a fake `log` (prints one denial line for the tag it is asked
// for, and one for another session). egressd is the real one, listening on
// 127.0.0.1 TCP ports (N1). What the real sandbox-exec and log do is left to
// mac_only/.
#include "sbpl_eval.hpp"

#include "ccsb/launch/macos/seatbelt_driver.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace ccsb;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

} // namespace

TEST_CASE("M8: the driver runs sandbox-exec -p PROFILE -- COMMAND with the explicit environment and reports denials",
          "[M8][M6][N1][N2][E1][S5]") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ccsb-driver-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "run");
  fs::create_directories(d / "ws");
  const std::string dir = d.string();
  script(dir + "/sandbox-exec",
         "[ \"$1\" = -p ] || exit 90\n"
         "printf '%s' \"$2\" > '" + dir + "/profile.sb'\n"
         "[ \"$3\" = -- ] || exit 91\n"
         "env > '" + dir + "/env.txt'\n"
         "shift 3\nexec \"$@\"\n");
  script(dir + "/log",
         "tag=$(printf '%s' \"$5\" | sed 's/.*\"\\(.*\\)\"/\\1/')\n"
         "printf '%s\\n' \"$*\" > '" + dir + "/log_argv.txt'\n"
         "printf '{\"eventMessage\":\"Sandbox: cat(7) deny(1) file-read-data \\\\/Users\\\\/u\\\\/.ssh\\\\/id_rsa\\\\n%s\"}\\n' \"$tag\"\n"
         "printf '{\"eventMessage\":\"Sandbox: cat(8) deny(1) file-read-data \\\\/x\\\\nccsb-other-11111111\"}\\n'\n"
         "exec sleep 30\n");

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

  launch::macos::driver_request req;
  req.pol = *pol;
  req.command = {"/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 7"};
  req.sandbox_exec = dir + "/sandbox-exec";
  req.log_tool = dir + "/log";
  req.egressd_path = std::string(CCSB_BIN_DIR) + "/egressd";
  req.run_dir = dir + "/run";
  req.nonce = "abcdef12";
  req.log_drain = std::chrono::milliseconds(800);
  std::vector<sandbox_event> events;
  std::string out, err;
  launch::macos::driver_callbacks cb;
  cb.event = [&](const sandbox_event& e) { events.push_back(e); };
  cb.output = [&](int stream, std::string_view b) { (stream == 1 ? out : err).append(b); };
  auto r = launch::macos::run_seatbelt(req, cb);
  if (!r) FAIL(r.err().what());
  CHECK(*r == 7);
  CHECK(out == "out\n" + dir + "/ws\n");
  CHECK(err == "err\n");

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

  // Events: starting, ready, output, exactly the session's own denial, exit last.
  REQUIRE(events.size() >= 4);
  CHECK(events.front().kind == event_kind::starting);
  CHECK(events.back().kind == event_kind::exit);
  CHECK(events.back().exit_code == 7);
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
  launch::macos::driver_request req;
  req.command = {"true"};
  req.run_dir = "/tmp";
  req.pol.network.kind = network_kind::proxied;
  auto r = launch::macos::run_seatbelt(req, {});
  REQUIRE_FALSE(r);
  CHECK(r.err().field == "egressd");
}

TEST_CASE("B2: the macOS platform boundary refuses off macOS", "[B2]") {
  auto d = launch::macos::user_temp_dir();
  CHECK(d.has_value() == launch::macos::is_macos);
  if (!d) CHECK(d.err().code == errc::backend_unavailable);
}
