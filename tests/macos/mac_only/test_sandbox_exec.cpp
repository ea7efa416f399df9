// Runs only on a Mac (tests/macos/CMakeLists.txt builds it when APPLE): the
// rendered profile is accepted by the real /usr/bin/sandbox-exec and the
// kernel enforces it. `ctest -R macos_native` on a Mac; nothing here runs on
// Linux CI.
#include "ccsb/render/seatbelt/render.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace ccsb;

namespace {
std::optional<std::string> real(const std::string& p) {
  char buf[4096];
  if (!::realpath(p.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

int run(const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> av;
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
} // namespace

TEST_CASE("M3: sandbox-exec accepts the chat profile, the worktree is writable, .env and the secrets are not",
          "[M3][M7][M2][mac]") {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ccsb-mac-" + std::to_string(::getpid()));
  fs::create_directories(d / "ws");
  fs::create_directories(d / "home/.ssh");
  std::ofstream(d / "home/.ssh/id_rsa") << "secret";
  std::string ws = *real((d / "ws").string()), home = *real((d / "home").string());
  sandbox_spec s;
  s.session_id = "mac1";
  s.workspace_id = "w";
  s.bind_mounts = {{ws, ws, false}};
  s.guest_workdir = ws;
  host_facts hf;
  hf.home = home;
  hf.resolve = real;
  hf.kind = [](const std::string&) { return path_kind::missing; }; // the fixture has no .git file
  hf.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", home}};
  auto pol = compile(s, profile::dispatch, hf);
  REQUIRE(pol);
  seatbelt_facts f;
  f.http_port = 3128;
  f.socks_port = 1080;
  f.session_tag = seatbelt_tag("mac1", "test0001");
  auto prof = render_seatbelt(*pol, f);
  REQUIRE(prof);
  auto sh = [&](const std::string& script) {
    return run({std::string(kSandboxExec), "-p", prof->text, "--", "/bin/sh", "-c", script});
  };
  CHECK(sh("touch '" + ws + "/ok'") == 0);
  CHECK(fs::exists(ws + "/ok"));
  CHECK(sh("touch '" + ws + "/.env'") != 0);
  CHECK_FALSE(fs::exists(ws + "/.env"));
  CHECK(sh("cat '" + home + "/.ssh/id_rsa'") != 0);
  CHECK(sh("touch '" + home + "/x'") != 0);
  CHECK(sh("mv '" + ws + "/.git' '" + ws + "/g2' 2>/dev/null; mkdir -p '" + ws + "/.git/hooks'") != 0);
  CHECK(sh("cp /bin/echo '" + ws + "/e' && '" + ws + "/e' hi") != 0); // M5
  fs::remove_all(d);
}
