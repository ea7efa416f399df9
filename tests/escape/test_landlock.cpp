// X2: Landlock inside the sandbox, the second layer. Each test shows the
// layer stopping an attack ON ITS OWN: the mount layer is made deliberately
// wrong (real bwrap started by the test with a plan that exposes too much),
// and ccsb-init applies the ruleset computed from the policy, as the
// launcher does. A control run of the same wrong plan without Landlock
// shows the attack works there, so the assertion is about Landlock.
#include "escape_support.hpp"

#include "ccsb/confine/landlock.hpp"

using namespace escape;

namespace {

struct wrong_plan {
  // Not under /tmp, which the policy's Landlock rules grant (the sandbox's
  // private /tmp): the fixture must be outside every grant.
  ccsb_test::temp_dir tmp{"ccsb-landlock", "/var/tmp"};
  std::string base, work, ro_dir, extra, secret;
  wrong_plan() {
    base = tmp.path();
    work = base + "/work";
    ro_dir = base + "/reference"; // the policy binds it read-only
    extra = base + "/host-only";  // the policy does not list it at all
    for (const auto& d : {work, ro_dir, extra}) REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    secret = extra + "/secret.txt";
    write_file(secret, "HOST-ONLY-SECRET\n", 0644);
    write_file(ro_dir + "/README", "reference\n", 0644);
  }

  ccsb::policy policy() const {
    ccsb::policy p;
    p.mounts = {{work, work, true}, {ro_dir, ro_dir, false}};
    return p;
  }

  // The whole host root visible (its /tmp too, where a build's ccsb-init
  // may live), the reference dir writable, no network namespace of its own
  // when `share_net`: everything the policy forbids.
  proc_result run(const std::string& script, bool landlock, bool share_net = false) const {
    // init_exec starts the sandbox with the exec channel and sends the script as its one exec.
    std::vector<std::string> argv{bin_path("init_exec"), work, "3", "/bin/bash", "-c", "echo @@ran=1\n" + script, "--",
                                  "/usr/bin/bwrap", "--unshare-user", "--disable-userns", "--unshare-pid",
                                  "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                  "--bind", ro_dir, ro_dir, "--bind", work, work};
    if (!share_net) argv.push_back("--unshare-net");
    argv.insert(argv.end(), {"--chdir", work, bin_path("ccsb-init"), "--exec-channel", "3"});
    if (landlock) {
      // What the launcher passes: the ruleset computed from the policy.
      auto args = ccsb::confine::to_init_args(ccsb::confine::landlock_rules_for(policy(), share_net));
      argv.insert(argv.end(), args.begin(), args.end());
    }
    spawn_options o;
    o.argv = argv;
    o.env = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp"};
    o.timeout_seconds = 60;
    return escape::run(o);
  }
};

} // namespace

TEST_CASE("X2: Landlock alone refuses a write the policy makes read-only and a read the policy never granted",
          "[X2][L1][escape]") {
  wrong_plan w;
  const std::string script = "echo planted > " + w.ro_dir + "/planted 2>/dev/null; echo @@write_ro=$?\n"
                             "cat " + w.secret + " 2>/dev/null; echo @@read_extra=$?\n"
                             "ls " + w.extra + " >/dev/null 2>&1; echo @@list_extra=$?\n"
                             "cat " + w.ro_dir + "/README >/dev/null; echo @@read_ro=$?\n"
                             "echo ok > " + w.work + "/made && cat " + w.work + "/made >/dev/null; echo @@write_work=$?\n"
                             "cat /root/.bashrc /etc/shadow >/dev/null 2>&1; echo @@read_root=$?\n"
                             "/usr/bin/true; echo @@exec_usr=$?";
  // The control: without Landlock the wrong plan lets every attack through.
  auto bare = w.run(script, false);
  INFO("without Landlock:\n" << bare.describe());
  REQUIRE(bare.get("ran") == "1");
  REQUIRE(bare.get("write_ro") == "0");
  REQUIRE(bare.get("read_extra") == "0");
  REQUIRE(::unlink((w.ro_dir + "/planted").c_str()) == 0);

  auto r = w.run(script, true);
  INFO("with Landlock:\n" << r.describe());
  REQUIRE(r.get("ran") == "1");
  CHECK(r.get("write_ro") != "0");
  CHECK(::access((w.ro_dir + "/planted").c_str(), F_OK) != 0);
  CHECK(r.get("read_extra") != "0");
  CHECK(r.out.find("HOST-ONLY-SECRET") == std::string::npos);
  CHECK(r.get("list_extra") == "0"); // names may be listed (READ_DIR beneath /), contents not
  CHECK(r.get("read_ro") == "0");
  CHECK(r.get("write_work") == "0");
  CHECK(r.get("read_root") != "0");
  CHECK(r.get("exec_usr") == "0");
}

TEST_CASE("X2: sharing the host network namespace, Landlock lets a proxied command connect only to the proxy ports",
          "[X2][L3][escape]") {
  wrong_plan w;
  tcp_listener host; // a host loopback service the proxied command must not reach
  const std::string py =
      "import socket, errno\n"
      "def attempt(port):\n"
      "    s = socket.socket()\n"
      "    try:\n"
      "        s.connect(('127.0.0.1', port)); return 'connected'\n"
      "    except OSError as e:\n"
      "        return errno.errorcode.get(e.errno, str(e.errno))\n"
      "print('@@host=' + attempt(" + std::to_string(host.port) + "))\n"
      "print('@@proxy=' + attempt(3128))\n"
      "s = socket.socket()\n"
      "try:\n"
      "    s.bind(('127.0.0.1', 0)); s.listen(1); print('@@bind=bound')\n"
      "except OSError as e:\n"
      "    print('@@bind=' + errno.errorcode.get(e.errno, str(e.errno)))\n";
  const std::string script = "/usr/bin/python3 -c \"" + py + "\"";
  auto bare = w.run(script, false, true);
  INFO("without Landlock:\n" << bare.describe());
  REQUIRE(bare.get("host") == "connected");
  auto r = w.run(script, true, true);
  INFO("with Landlock:\n" << r.describe());
  CHECK(r.get("host") == "EACCES");
  // Landlock lets the proxy port through: nothing listens there on the host,
  // so the kernel answers, not Landlock.
  CHECK(r.get("proxy") == "ECONNREFUSED");
  CHECK(r.get("bind") == "EACCES");
}

TEST_CASE("X2: the command cannot signal a process outside its Landlock domain, only its own", "[X2][X3][escape]") {
  sandbox_fixture fx;
  auto r = fx.ccsb("kill -0 1 2>/dev/null; echo @@pid1=$?\n"
                   "sleep 30 & child=$!; kill -TERM $child; echo @@child=$?; wait $child",
                   {"--handle", fx.base + "/handle.json"});
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  // PID 1 is ccsb-init (--as-pid-1), in the command's own domain: kill -0
  // passes, and the kernel's rule for a namespace's init drops what is sent
  // (test_process.cpp, "neither stop nor kill nor terminate its supervisor").
  CHECK(r.get("pid1") == "0");
  CHECK(r.get("child") == "0");
  // The handle says what applied.
  std::string handle = read_file(fx.base + "/handle.json");
  CHECK_THAT(handle, Catch::Contains("\"landlock\":\"abi "));
  CHECK_THAT(handle, Catch::Contains("\"landlockAbi\":")); // what the probe found
  CHECK_THAT(handle, Catch::Contains("signals scoped"));
  // X3: and how the session's egressd confined itself.
  CHECK_THAT(handle, Catch::Contains("\"egressdConfinement\":{"));
  CHECK_THAT(handle, Catch::Contains("\"seccomp\":\"allowlist\""));
}
