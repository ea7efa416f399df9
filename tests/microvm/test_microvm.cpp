// The microvm backend (X4, B6; docs/microvm.md), against the real ccsb-run,
// QEMU and guest image: each case boots a real VM under QEMU's emulated CPU
// (TCG, opted into explicitly) and asserts what the command inside could not
// do, checked on the host. Every negative case also proves that the command
// ran in the guest (a "@@ran=1" line and the guest's kernel), so a launcher
// that starts nothing, or starts the command on the host, never passes.
//
// Both launchers: root (QEMU as a session uid of its own, the binds idmapped
// to it) and unprivileged (setpriv to uid 65534; QEMU as that uid).
#include "microvm_support.hpp"

using namespace escape;
using namespace microvm_test;

TEST_CASE("X4 P5: in the guest the command is no root, and .git's hooks and config and protected paths stay unwritten",
          "[X4][P5][microvm]") {
  for_each_launcher([](bool unprivileged) {
    sandbox_fixture fx;
    const std::string tok = random_token();
    vm_run v;
    v.unprivileged = unprivileged;
    v.extra = {"--protect", fx.protected_dir};
    auto r = run_in_guest(fx,
                          "echo \"@@uid=$(id -u)\"\n"
                          "echo " + tok + " > notes.txt && echo @@wrote=1\n"
                          "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit 2>/dev/null && echo @@hook=written\n"
                          "printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config 2>/dev/null && echo @@config=written\n"
                          "mv .git/config .git/config.old 2>/dev/null && echo @@config=moved\n"
                          "echo CHANGED >> " + fx.protected_file + " 2>/dev/null && echo @@protected=written\n"
                          "touch " + fx.protected_dir + "/new 2>/dev/null && echo @@protected=created\n"
                          "umount .git/config 2>/dev/null; umount -l " + fx.protected_dir + " 2>/dev/null\n"
                          "echo CHANGED >> " + fx.protected_file + " 2>/dev/null && echo @@after_umount=written\n",
                          v);
    CHECK(r.get("uid") != "0");
    CHECK(r.get("wrote") == "1");
    CHECK(read_file(fx.work + "/notes.txt") == tok + "\n");
    CHECK(r.get("hook") == "<missing>");
    CHECK(r.get("config") == "<missing>");
    CHECK(r.get("protected") == "<missing>");
    CHECK(r.get("after_umount") == "<missing>");
    CHECK_FALSE(file_exists(fx.work + "/.git/hooks/pre-commit"));
    CHECK(read_file(fx.work + "/.git/config") == fx.git_config_text);
    CHECK(read_file(fx.protected_file) == fx.protected_text);
    CHECK_FALSE(file_exists(fx.protected_dir + "/new"));
  });
}

TEST_CASE("X4 B6: an explicit microvm request without KVM and without the TCG opt-in fails loudly with the reason",
          "[X4][B6][microvm]") {
  // This host's premise: no /dev/kvm (a host with KVM would take the request).
  REQUIRE(::access("/dev/kvm", F_OK) != 0);
  sandbox_fixture fx;
  const std::string witness = fx.work + "/ran-somewhere";
  spawn_options o;
  o.argv = {ccsb_run_path(), "--backend", "microvm", "--", "/bin/bash", "-c", "touch " + witness};
  o.env = fx.env();
  o.cwd = fx.work;
  auto r = run(o);
  INFO(r.describe());
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Catch::Contains("no KVM here"));
  CHECK_THAT(r.err, Catch::Contains("/dev/kvm"));
  CHECK_THAT(r.err, Catch::Contains("CCSB_MICROVM_ACCEL=tcg"));
  CHECK_THAT(r.err, Catch::Contains("microvm is never replaced silently"));
  CHECK_FALSE(file_exists(witness));
}

TEST_CASE("X4 B6: a missing guest image fails loudly, naming where it was looked for", "[X4][B6][microvm]") {
  sandbox_fixture fx;
  const std::string witness = fx.work + "/ran-somewhere";
  const std::string missing = fx.base + "/no-guest-here";
  for (bool by_env : {true, false}) {
    spawn_options o;
    o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg"};
    if (!by_env) o.argv.insert(o.argv.end(), {"--guest-dir", missing});
    o.argv.insert(o.argv.end(), {"--", "/bin/bash", "-c", "touch " + witness});
    o.env = fx.env();
    if (by_env) o.env.push_back("CCSB_GUEST_DIR=" + missing);
    o.cwd = fx.work;
    auto r = run(o);
    INFO((by_env ? "CCSB_GUEST_DIR" : "--guest-dir") << "\n" << r.describe());
    CHECK(r.exit_code == 125);
    CHECK_THAT(r.err, Catch::Contains("no usable guest image"));
    CHECK_THAT(r.err, Catch::Contains(missing + "/vmlinux is missing"));
    CHECK_FALSE(file_exists(witness));
  }
}

TEST_CASE("X4: uname -r in a microvm prints the guest kernel, not the host's", "[X4][microvm]") {
  sandbox_fixture fx;
  const std::string guest = image_kernel();
  REQUIRE_FALSE(guest.empty());
  REQUIRE(guest != host_kernel());
  const std::string handle = fx.base + "/handle.json";
  vm_run v;
  v.extra = {"--handle", handle};
  auto r = run_vm(fx, "uname -r", v);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("kernel") == guest);
  CHECK_THAT(r.out, Catch::Contains("\n" + guest + "\n"));
  CHECK_THAT(r.err, Catch::Contains("agent sandbox ON (microvm (tcg: emulated CPU)"));
  CHECK_THAT(r.err, Catch::Contains("session backend: microvm"));
  // The session's events carry the backend it really got.
  bool ready = false;
  for (const auto& e : read_events(fx.events))
    if (str_field(e, "event") == "ready") ready = true;
  CHECK(ready);
  // The handle says what the session got: the backend and its accelerator.
  const std::string h = read_file(handle);
  CHECK_THAT(h, Catch::Contains("\"backend\":\"microvm\""));
  CHECK_THAT(h, Catch::Contains("microvm (tcg: emulated CPU)"));
  CHECK_THAT(h, Catch::Contains(guest));
}

TEST_CASE("X4: a write in a writable bind reaches the host, a read-only bind stays unwritten and cannot be remounted",
          "[X4][microvm]") {
  for_each_launcher([](bool unprivileged) {
    sandbox_fixture fx;
    const std::string ro = fx.base + "/ro";
    make_dirs(ro);
    write_file(ro + "/kept", "ORIGINAL\n");
    if (::geteuid() == 0) REQUIRE(::nftw(ro.c_str(), chown_cb, 8, FTW_PHYS) == 0);
    const std::string tok = random_token();
    vm_run v;
    v.unprivileged = unprivileged;
    v.extra = {"--bind", ro + ":ro"};
    auto r = run_in_guest(fx,
                          "echo " + tok + " > " + fx.work + "/from-guest && echo @@wrote=1\n"
                          // the guest mount is read-only...
                          "echo x > " + ro + "/new 2>/dev/null && echo @@ro_first=written\n"
                          "echo CHANGED > " + ro + "/kept 2>/dev/null && echo @@ro_first=changed\n"
                          // ...the guest user cannot remount it (and QEMU serves it readonly=on)
                          "mount -o remount,rw " + ro + " 2>/dev/null && echo @@remount=1\n"
                          "echo x > " + ro + "/new 2>/dev/null && echo @@ro_after=written\n"
                          "echo CHANGED > " + ro + "/kept 2>/dev/null && echo @@ro_after=changed\n"
                          "rm -f " + ro + "/kept 2>/dev/null; mv " + ro + "/kept " + ro + "/moved 2>/dev/null\n"
                          // the host's system tree is read-only the same way
                          "mount -o remount,rw /usr 2>/dev/null && echo @@usr_remount=1\n"
                          "echo x > /usr/ccsb-guest-wrote-" + tok + " 2>/dev/null && echo @@usr=written\n",
                          v);
    CHECK(r.get("wrote") == "1");
    CHECK(read_file(fx.work + "/from-guest") == tok + "\n");
    CHECK(r.get("remount") == "<missing>");
    CHECK(r.get("usr_remount") == "<missing>");
    CHECK(r.get("ro_first") == "<missing>");
    CHECK(r.get("ro_after") == "<missing>");
    CHECK(r.get("usr") == "<missing>");
    CHECK_FALSE(file_exists(ro + "/new"));
    CHECK_FALSE(file_exists(ro + "/moved"));
    CHECK(read_file(ro + "/kept") == "ORIGINAL\n");
    CHECK_FALSE(file_exists("/usr/ccsb-guest-wrote-" + tok));
  });
}

TEST_CASE("X4 P4: a bind holding a HOME secret is refused, and the guest sees no host secret", "[X4][P4][microvm]") {
  sandbox_fixture fx;
  SECTION("binding HOME (it holds ~/.ssh) is refused before anything boots") {
    const std::string witness = fx.work + "/ran-somewhere";
    spawn_options o;
    o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--bind", fx.home,
              "--", "/bin/bash", "-c", "touch " + witness};
    o.env = fx.env();
    o.cwd = fx.work;
    auto r = run(o);
    INFO(r.describe());
    CHECK(r.exit_code == 125);
    CHECK_THAT(r.err, Catch::Contains(fx.home + "/.ssh"));
    CHECK_THAT(r.err, Catch::Contains("never shares a secret (P4)"));
    CHECK_FALSE(file_exists(witness));
    CHECK(processes_naming(fx.home).empty());
  }
  SECTION("a bind of the .ssh directory itself is refused") {
    spawn_options o;
    o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--bind", fx.home + "/.ssh:ro",
              "--", "/bin/true"};
    o.env = fx.env();
    o.cwd = fx.work;
    auto r = run(o);
    INFO(r.describe());
    CHECK(r.exit_code == 125);
    CHECK_THAT(r.err, Catch::Contains("never shares a secret (P4)"));
  }
  SECTION("inside, neither the host's ~/.ssh nor its ~/.aws is there") {
    auto r = run_vm(fx, "cat " + fx.home + "/.ssh/id_rsa " + fx.home + "/.aws/credentials 2>/dev/null\n"
                        "echo \"@@home_entries=$(ls -A ~ | wc -l)\"\n"
                        "[ -e " + fx.home + " ] && echo @@host_home=1\n"
                        "grep -rl " + fx.ssh_marker + " /tmp /root /run " + fx.work + " 2>/dev/null | sed 's/^/@@found=/'\n");
    ESCAPE_REQUIRE_RAN(r);
    CHECK(r.get("kernel") == image_kernel());
    CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
    CHECK(r.out.find(fx.aws_marker) == std::string::npos);
    CHECK(r.get("host_home") == "<missing>");
    CHECK(r.get("found") == "<missing>");
    CHECK(r.get("home_entries") == "0"); // HOME inside is an empty tmpfs
  }
}

TEST_CASE("X4 N: the guest has no network interface but lo, and reaches no host listener", "[X4][microvm]") {
  sandbox_fixture fx;
  // A listener on every host address: a guest with a NIC (user-mode or
  // bridged networking) would reach it through the gateway or the host's IP.
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(s >= 0);
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  REQUIRE(::listen(s, 8) == 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  std::string targets;
  for (const char* ip : {"10.0.2.2", "10.0.2.15", "192.168.122.1", "172.17.0.1"}) targets += std::string(" ") + ip;
  auto r = run_vm(fx, "ls /sys/class/net | tr '\\n' ' ' | sed 's/ $//; s/^/@@ifaces=/'; echo\n"
                      "for ip in" + targets + "; do timeout 3 bash -c \"echo hi > /dev/tcp/$ip/" + port +
                      "\" 2>/dev/null && echo @@reached=$ip; done\n"
                      "getent hosts localhost >/dev/null && echo @@lo_name=1\n"
                      "timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1 | grep -q refused && echo @@lo_up=1\n");
  pollfd p{s, POLLIN, 0};
  const int pending = ::poll(&p, 1, 0);
  ::close(s);
  ESCAPE_REQUIRE_RAN(r);
  CHECK(r.get("kernel") == image_kernel());
  CHECK(r.get("ifaces") == "lo");
  CHECK(r.get("reached") == "<missing>");
  CHECK(r.get("lo_up") == "1"); // lo is up: a refused connection, not "network unreachable"
  CHECK(pending == 0);          // nothing arrived at the host listener
}

TEST_CASE("X4 L7: QEMU runs in a cgroup of its own with the session's memory limit", "[X4][L7][microvm]") {
  sandbox_fixture fx;
  const std::string started = fx.work + "/started";
  spawn_options o;
  o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--memory", "1536M", "--pids", "300",
            "--", "/bin/bash", "-c", "touch " + started + "; sleep 600"};
  o.env = fx.env();
  o.cwd = fx.work;
  child c = spawn(o);
  REQUIRE(c.pid > 0);
  for (int i = 0; i < 1200 && !file_exists(started); ++i) ::usleep(100000);
  auto vms = processes_naming(fx.work);
  std::string cg, memory_max, pids_max;
  if (vms.size() == 1) {
    const std::string pid = vms[0].substr(0, vms[0].find(':'));
    cg = cgroup_of(pid, "memory");
    if (cgroup_v2()) {
      memory_max = read_file("/sys/fs/cgroup" + cg + "/memory.max");
      pids_max = read_file("/sys/fs/cgroup" + cg + "/pids.max");
    } else {
      memory_max = read_file("/sys/fs/cgroup/memory" + cg + "/memory.limit_in_bytes");
      pids_max = read_file("/sys/fs/cgroup/pids" + cgroup_of(pid, "pids") + "/pids.max");
    }
  }
  ::kill(c.pid, SIGTERM);
  ::usleep(200000);
  ::kill(c.pid, SIGTERM);
  auto r = collect(std::move(c), 120);
  INFO(r.describe());
  REQUIRE(file_exists(started));
  REQUIRE(vms.size() == 1);
  INFO("QEMU's cgroup: " << cg << ", the test's: " << cgroup_of("self", "memory"));
  CHECK(cg != cgroup_of("self", "memory"));
  CHECK(memory_max == std::to_string(1536ull << 20) + "\n");
  CHECK(pids_max == "300\n");
}

TEST_CASE("X4: the end of a session leaves no QEMU process, whatever ends it", "[X4][microvm]") {
  sandbox_fixture fx;
  SECTION("the command ends") {
    auto r = run_vm(fx, "true");
    ESCAPE_REQUIRE_RAN(r);
    CHECK(processes_naming(fx.work).empty());
  }
  SECTION("ccsb-run is stopped by SIGTERM (twice) while the command runs, or killed") {
    for (int sig : {SIGTERM, SIGKILL}) {
      INFO("signal " << sig);
      const std::string started = fx.work + "/started-" + std::to_string(sig);
      spawn_options o;
      o.argv = {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--", "/bin/bash", "-c",
                "touch " + started + "; sleep 600"};
      o.env = fx.env();
      o.cwd = fx.work;
      child c = spawn(o);
      REQUIRE(c.pid > 0);
      for (int i = 0; i < 1200 && !file_exists(started); ++i) ::usleep(100000);
      REQUIRE(file_exists(started));
      REQUIRE_FALSE(processes_naming(fx.work).empty()); // the VM is there while the command runs
      ::kill(c.pid, sig);
      if (sig == SIGTERM) {
        ::usleep(200000);
        ::kill(c.pid, sig);
      }
      auto r = collect(std::move(c), 120);
      INFO(r.describe());
      // QEMU dies with its launcher (PR_SET_PDEATHSIG) even when that was
      // SIGKILLed; wait for the kernel to deliver it, then look.
      for (int i = 0; i < 100 && !processes_naming(fx.work).empty(); ++i) ::usleep(100000);
      CHECK(processes_naming(fx.work).empty());
    }
  }
}
