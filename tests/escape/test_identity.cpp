// L1 / E4: what a root launcher's session uid reaches on the host.
#include "escape_support.hpp"

using namespace escape;

namespace {

// root's HOME as on this machine: 0700, a cargo toolchain inside, all
// root's. Returns its path.
std::string root_home_with_cargo(const sandbox_fixture& f) {
  const std::string roothome = f.base + "/roothome";
  make_dirs(roothome + "/.cargo/bin");
  write_file(roothome + "/.cargo/bin/cargo", "#!/bin/sh\necho CARGO-RAN\n", 0755);
  for (const auto& p : {roothome, roothome + "/.cargo", roothome + "/.cargo/bin", roothome + "/.cargo/bin/cargo"})
    REQUIRE(::lchown(p.c_str(), 0, 0) == 0);
  REQUIRE(::chmod(roothome.c_str(), 0700) == 0);
  return roothome;
}

// ccsb-run (spec profile, `extra` options) from the work dir, owned by the
// sandbox uid 65534, with that HOME and its cargo first on PATH; the command
// says whether it ran and sees the toolchain, then runs `more`.
spawn_options cargo_run(const sandbox_fixture& f, const std::string& roothome, std::vector<std::string> extra,
                        const std::string& more) {
  spawn_options o;
  o.argv = {bin_path("ccsb-run"), "--profile", "spec"};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  o.argv.insert(o.argv.end(), {"--", "/bin/bash", "-c",
                               "echo @@ran=1; ls " + roothome + "/.cargo/bin >/dev/null 2>&1; echo @@visible=$?; " + more});
  o.env = {"HOME=" + roothome, "PATH=" + roothome + "/.cargo/bin:/usr/bin:/bin", "LANG=C"};
  o.cwd = f.work;
  o.timeout_seconds = 60;
  return o;
}

} // namespace

TEST_CASE("E4 L1: a root launcher whose PATH names a toolchain in a 0700 root HOME runs it, read-only, from a session uid of its own",
          "[E4][L1][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  const std::string roothome = root_home_with_cargo(f);
  auto r = run(cargo_run(f, roothome, {},
                         "echo @@cargo=$(cargo); touch " + roothome + "/.cargo/bin/planted 2>/dev/null; echo @@write=$?"));
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.get("ran") == "1");
  // The toolchain's directory is idmapped read-only to the session uid
  // (its parents need not be searchable): visible and runnable, never
  // writable, and nothing else of root's HOME comes with it.
  CHECK(r.get("visible") == "0");
  CHECK(r.get("cargo") == "CARGO-RAN");
  CHECK(failed(r.get("write")));
  CHECK(!file_exists(roothome + "/.cargo/bin/planted"));
  CHECK(r.err.find("not made visible") == std::string::npos);
}

TEST_CASE("E4 L1: a root launcher running the sandbox as an asked uid leaves out, and names, a PATH toolchain that uid cannot reach",
          "[E4][L1][escape][root]") {
  if (::geteuid() != 0) FAIL("this test needs a root launcher (CI runs as root)");
  sandbox_fixture f;
  const std::string roothome = root_home_with_cargo(f);
  auto r = run(cargo_run(f, roothome, {"--run-as", "65534"}, ""));
  INFO(r.describe());
  // The shared uid 65534 cannot search the 0700 HOME: the toolchain is left
  // out before anything starts (bwrap would fail the run on its bind), and
  // the start-up lines say which and why.
  CHECK(r.exit_code == 0);
  CHECK(r.get("ran") == "1");
  CHECK(failed(r.get("visible")));
  CHECK(r.err.find("toolchain " + roothome + "/.cargo not made visible: the sandbox's host uid 65534 cannot reach it") !=
        std::string::npos);
}
