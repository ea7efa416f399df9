// A microvm session through ccsbd (X4, S7, S8; docs/microvm.md): the real
// daemon launches a QEMU microVM (TCG, opted into by the launch's
// "microvmAccel"), runs commands in it, suspends and resumes it, destroys it;
// what each step did is checked on the host (QEMU's processes, its cgroup, a
// file the guest writes). Three VM boots in all.
#include "microvm_support.hpp"

using namespace escape;
using namespace microvm_test;

namespace {

std::string read_counter(const std::string& path) {
  std::string v = read_file(path);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

// The QEMU of the fixture (its -fsdev options name the worktree): its pid,
// "" when there is none or more than one.
std::string qemu_pid(const sandbox_fixture& fx) {
  auto vms = processes_naming(fx.work);
  return vms.size() == 1 ? vms[0].substr(0, vms[0].find(':')) : std::string();
}

// One exec through the daemon: its stdout and its exit code.
struct exec_result {
  std::string out, err;
  std::string exit_code{"<none>"};
};
exec_result exec_in(daemon_client& d, const std::string& session, const std::vector<std::string>& argv) {
  auto reply = d.request(exec_op(session, argv));
  INFO(d.transcript());
  REQUIRE(str_field(reply.back(), "event") == "exec");
  const auto id = reply.back().at("execId");
  exec_result r;
  d.until([&](const picojson::object& e) {
    if (e.count("execId") && e.at("execId") == id) {
      if (str_field(e, "event") == "stdout") r.out += str_field(e, "data");
      if (str_field(e, "event") == "stderr") r.err += str_field(e, "data");
      if (str_field(e, "event") == "exit") {
        r.exit_code = e.at("exitCode").serialize();
        return true;
      }
    }
    return false;
  });
  return r;
}

} // namespace

TEST_CASE("X4 S7: ccsbd runs a microvm session, suspend stops it, resume continues it, destroy (suspended) leaves no "
          "QEMU and no cgroup",
          "[X4][S7][S8][microvm]") {
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged daemon" : "root daemon")) {
      sandbox_fixture fx;
      daemon_client d(fx, unprivileged);
      const std::string sid = unprivileged ? "vm-nobody" : "vm-root";
      auto launched = d.request(microvm_launch(fx, sid, "tcg"), 240);
      INFO(d.transcript());
      REQUIRE(str_field(launched.back(), "event") == "ready");
      CHECK(nested(launched.back(), "handle", "backend") == "microvm");
      CHECK_THAT(launched.back().at("handle").serialize(), Catch::Contains("microvm (tcg: emulated CPU)"));
      const std::string pid = qemu_pid(fx);
      REQUIRE_FALSE(pid.empty());

      // exec: the guest's kernel, output and exit status of each command.
      auto uname = exec_in(d, sid, {"uname", "-r"});
      CHECK(uname.exit_code == "0");
      CHECK(uname.out == image_kernel() + "\n");
      CHECK(uname.out != host_kernel() + "\n");
      auto failing = exec_in(d, sid, {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
      CHECK(failing.out == "out\n");
      CHECK(failing.err == "err\n");
      CHECK(failing.exit_code == "3");

      // QEMU's cgroup (a root daemon's; an unprivileged one has rlimits).
      std::string vm_cgroup;
      if (!unprivileged) {
        const std::string cg = cgroup_of(pid, cgroup_v2() ? "" : "memory");
        vm_cgroup = cg.substr(cg.rfind('/') + 1);
        INFO("QEMU's cgroup: " << cg);
        REQUIRE(vm_cgroup.rfind("vm-" + std::to_string(d.pid()) + "-", 0) == 0);
        REQUIRE_FALSE(cgroup_dirs_named(vm_cgroup).empty());
      }

      // A counter the guest advances in the writable bind (renamed into
      // place: never read half-written), in the background: S4 suspends a
      // warm session (no exec running), whose processes go on.
      const std::string counter = fx.work + "/counter";
      auto loop = exec_in(d, sid, {"/bin/sh", "-c",
                                   "setsid /bin/sh -c 'i=0; while :; do i=$((i+1)); echo $i > counter.new && "
                                   "mv counter.new counter; sleep 0.1; done' </dev/null >/dev/null 2>&1 &"});
      REQUIRE(loop.exit_code == "0");
      for (int i = 0; i < 1200 && read_counter(counter).empty(); ++i) ::usleep(100000);
      REQUIRE_FALSE(read_counter(counter).empty());

      auto suspended = d.request(session_op("suspend", sid));
      INFO((suspended.back().empty() ? std::string("no reply") : picojson::value(suspended.back()).serialize()));
      REQUIRE(str_field(suspended.back(), "event") == "handle");
      CHECK(nested(suspended.back(), "handle", "state") == "suspended");
      const std::string frozen_at = read_counter(counter);
      std::vector<std::string> polls;
      for (int i = 0; i < 10; ++i) {
        ::usleep(300000);
        polls.push_back(read_counter(counter));
      }
      INFO("counter at suspend " << frozen_at);
      for (const auto& p : polls) CHECK(p == frozen_at);

      auto resumed = d.request(session_op("resume", sid));
      INFO((resumed.back().empty() ? std::string("no reply") : picojson::value(resumed.back()).serialize()));
      REQUIRE(str_field(resumed.back(), "event") == "handle");
      CHECK(nested(resumed.back(), "handle", "state") == "warm");
      std::string after = frozen_at;
      for (int i = 0; i < 600 && after == frozen_at; ++i) {
        ::usleep(100000);
        after = read_counter(counter);
      }
      CHECK(after != frozen_at);

      // destroy of a suspended VM: QEMU is gone when the reply comes, and
      // its cgroup with it.
      auto again = d.request(session_op("suspend", sid));
      CHECK(nested(again.back(), "handle", "state") == "suspended");
      auto destroyed = d.request(session_op("destroy", sid));
      CHECK(str_field(destroyed.back(), "event") == "handle");
      CHECK(nested(destroyed.back(), "handle", "state") == "destroyed");
      CHECK(processes_naming(fx.work).empty());
      CHECK(::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0);
      if (!vm_cgroup.empty()) CHECK(cgroup_dirs_named(vm_cgroup).empty());
    }
  }
}

TEST_CASE("X4 L7: the QEMU cgroups of a SIGKILLed microvm launcher are removed when ccsbd starts",
          "[X4][L7][microvm]") {
  REQUIRE(::geteuid() == 0); // only a root launcher makes cgroups here
  sandbox_fixture fx;
  const std::string started = fx.work + "/started";
  spawn_options o;
  o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--",
            "/bin/bash", "-c", "touch " + started + "; sleep 600"};
  o.env = fx.env();
  o.cwd = fx.work;
  child c = spawn(o);
  REQUIRE(c.pid > 0);
  for (int i = 0; i < 1200 && !file_exists(started); ++i) ::usleep(100000);
  REQUIRE(file_exists(started));
  const std::string pid = qemu_pid(fx);
  REQUIRE_FALSE(pid.empty());
  const std::string cg = cgroup_of(pid, cgroup_v2() ? "" : "memory");
  const std::string name = cg.substr(cg.rfind('/') + 1);
  INFO("QEMU's cgroup: " << cg);
  REQUIRE(name == "vm-" + std::to_string(c.pid) + "-1");
  ::kill(c.pid, SIGKILL);
  (void)collect(std::move(c), 60);
  for (int i = 0; i < 100 && !processes_naming(fx.work).empty(); ++i) ::usleep(100000);
  REQUIRE(processes_naming(fx.work).empty()); // QEMU died with its launcher
  // The launcher ran no teardown: its cgroups are still there...
  REQUIRE_FALSE(cgroup_dirs_named(name).empty());
  // ...until the next daemon starts.
  daemon_client d(fx, false);
  INFO("left: " << cgroup_dirs_named(name).size());
  CHECK(cgroup_dirs_named(name).empty());
}

TEST_CASE("X4 B6: ccsbd refuses an explicit microvm launch it cannot meet, with a typed error naming the reason",
          "[X4][B6][S8][microvm]") {
  // This host's premise: no /dev/kvm (a host with KVM would take the launch).
  REQUIRE(::access("/dev/kvm", F_OK) != 0);
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged daemon" : "root daemon")) {
      sandbox_fixture fx;
      daemon_client d(fx, unprivileged);
      // Neither the launch nor the daemon's environment opts into TCG.
      auto r = d.request(microvm_launch(fx, "no-opt-in", std::nullopt));
      INFO(d.transcript());
      const auto& e = r.back();
      REQUIRE(str_field(e, "event") == "error");
      CHECK(str_field(e, "op") == "launch");
      CHECK(nested(e, "error", "code") == "backend_unavailable");
      CHECK(nested(e, "error", "field") == "backend");
      CHECK_THAT(nested(e, "error", "message"), Catch::Contains("/dev/kvm"));
      CHECK_THAT(nested(e, "error", "message"), Catch::Contains("\"microvmAccel\":\"tcg\""));
      CHECK_THAT(nested(e, "error", "message"), Catch::Contains("microvm is never replaced silently"));
      // A KVM request where there is none: the same, never TCG instead.
      auto k = d.request(microvm_launch(fx, "kvm-asked", std::string("kvm")));
      CHECK(nested(k.back(), "error", "code") == "backend_unavailable");
      CHECK_THAT(nested(k.back(), "error", "message"), Catch::Contains("KVM was asked for (microvmAccel=kvm)"));
      // A bad accelerator, or one without backend microvm: the field named.
      auto bad = d.request(microvm_launch(fx, "bad", std::string("fast")));
      CHECK(nested(bad.back(), "error", "code") == "invalid_argument");
      CHECK(nested(bad.back(), "error", "field") == "microvmAccel");
      auto native = microvm_launch(fx, "native", std::string("tcg"));
      native["backend"] = picojson::value(std::string("native"));
      auto n = d.request(native);
      CHECK(nested(n.back(), "error", "code") == "invalid_argument");
      CHECK(nested(n.back(), "error", "field") == "microvmAccel");
      CHECK(processes_naming(fx.work).empty()); // nothing booted
    }
  }
}
