// The microvm backend's pure decisions (X4, B6; ccsb/microvm.hpp) and its
// host<->agent protocol (ccsb/protocol/guest.hpp).
#include "ccsb/microvm.hpp"
#include "ccsb/protocol/guest.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ccsb;
namespace G = ccsb::protocol::guest;

namespace {

microvm::probe_facts ready_host() {
  microvm::probe_facts f;
  f.qemu_path = "/usr/bin/qemu-system-x86_64";
  f.kvm_problem = "/dev/kvm: No such file or directory";
  f.guest_dir = "/opt/ccsb/guest";
  f.image_kernel = "6.1.0-57-amd64";
  return f;
}

std::optional<std::string> identity(const std::string& p) { return p; }

std::vector<microvm::system_entry> merged_usr() {
  using K = microvm::system_entry::kind;
  return {{"/usr", K::directory, ""}, {"/etc", K::directory, ""}, {"/bin", K::symlink, "usr/bin"},
          {"/lib", K::symlink, "usr/lib"}, {"/lib64", K::symlink, "usr/lib64"}, {"/sbin", K::symlink, "usr/sbin"},
          {"/lib32", K::absent, ""}};
}

probe_result native_ok() {
  probe_result p;
  p.available = true;
  return p;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

} // namespace

TEST_CASE("X4 B6: without KVM the microvm probe takes TCG only on explicit opt-in", "[X4][B6]") {
  auto f = ready_host();
  auto a = microvm::probe(f);
  REQUIRE(a);
  CHECK_FALSE(a->vm.available);
  CHECK_THAT(a->vm.note, Catch::Contains("/dev/kvm: No such file or directory"));
  CHECK_THAT(a->vm.note, Catch::Contains("CCSB_MICROVM_ACCEL=tcg"));
  // B6: the explicit request fails with that reason; the default steps down, saying so.
  auto sel = select_backend(run_context::dispatch, backend::microvm, sandbox_switch::on, native_ok(), a->vm);
  REQUIRE_FALSE(sel);
  CHECK_THAT(sel.err().message, Catch::Contains("CCSB_MICROVM_ACCEL=tcg"));
  auto def = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, native_ok(), a->vm, true);
  REQUIRE(def);
  CHECK(def->chosen == backend::native);
  REQUIRE(def->log.size() == 1);
  CHECK_THAT(def->log[0], Catch::Contains("no KVM here"));

  f.accel_request = "tcg";
  f.accel_source = "CCSB_MICROVM_ACCEL";
  a = microvm::probe(f);
  REQUIRE(a);
  CHECK(a->vm.available);
  CHECK(a->chosen == microvm::accel::tcg);
  CHECK(a->vm.note == "microvm (tcg: emulated CPU)");
  CHECK_THAT(microvm::startup_line(*a), Catch::StartsWith("agent sandbox ON (microvm (tcg: emulated CPU)"));
  CHECK_THAT(microvm::startup_line(*a), Catch::Contains("6.1.0-57-amd64"));

  f.accel_request = "kvm";
  a = microvm::probe(f);
  REQUIRE(a);
  CHECK_FALSE(a->vm.available);
  CHECK_THAT(a->vm.note, Catch::Contains("KVM was asked for"));

  f.accel_request = "tgc";
  CHECK_FALSE(microvm::probe(f)); // a typo is an error, not "no microvm"

  f = ready_host();
  f.kvm_usable = true;
  a = microvm::probe(f);
  REQUIRE(a);
  CHECK(a->vm.available);
  CHECK(a->chosen == microvm::accel::kvm);
  CHECK(a->vm.note == "microvm (kvm)");
}

TEST_CASE("X4 B6: the microvm probe names a missing QEMU or guest image", "[X4][B6]") {
  auto f = ready_host();
  f.accel_request = "tcg";
  f.qemu_path.clear();
  auto a = microvm::probe(f);
  REQUIRE(a);
  CHECK_FALSE(a->vm.available);
  CHECK_THAT(a->vm.note, Catch::Contains("qemu-system-x86"));
  f = ready_host();
  f.accel_request = "tcg";
  f.image_problem = "/opt/ccsb/guest/vmlinux is missing";
  a = microvm::probe(f);
  REQUIRE(a);
  CHECK_FALSE(a->vm.available);
  CHECK_THAT(a->vm.note, Catch::Contains("/opt/ccsb/guest/vmlinux is missing"));
}

TEST_CASE("X4 P4: the microvm shares refuse any bind that holds or lies in a secret", "[X4][P4]") {
  const std::string home = "/home/u";
  auto ok = microvm::plan_shares({{"/home/u/src/p", "/home/u/src/p", false}, {"/data", "/data", true}}, merged_usr(),
                                 home, identity);
  REQUIRE(ok);
  // the system tree read-only, the links as the host has them, the binds
  REQUIRE(ok->shares.size() == 4);
  CHECK(ok->shares[0] == microvm::share_spec{"s0", "/usr", "/usr", false});
  CHECK(ok->shares[1] == microvm::share_spec{"s1", "/etc", "/etc", false});
  CHECK(ok->shares[2] == microvm::share_spec{"s2", "/home/u/src/p", "/home/u/src/p", true});
  CHECK(ok->shares[3] == microvm::share_spec{"s3", "/data", "/data", false});
  CHECK(ok->links.size() == 4);
  CHECK(ok->links[0] == G::link{"/bin", "usr/bin"});

  for (const char* bad : {"/home/u", "/home", "/home/u/.ssh", "/home/u/.config", "/home/u/.aws/sub", "/etc/ssl/private"}) {
    INFO(bad);
    auto r = microvm::plan_shares({{bad, "/x", false}}, merged_usr(), home, identity);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::unenforceable);
  }
  // Spelled innocently, resolving into a secret (a symlink to ~/.ssh).
  auto via_link = microvm::plan_shares({{"/work/keys", "/work/keys", true}}, merged_usr(), home,
                                       [](const std::string& p) -> std::optional<std::string> {
                                         return p == "/work/keys" ? std::optional<std::string>("/home/u/.ssh") : p;
                                       });
  REQUIRE_FALSE(via_link);
  CHECK_THAT(via_link.err().message, Catch::Contains("/home/u/.ssh"));
  // The guest's own file systems and the system tree are not bind targets.
  for (const char* g : {"/proc", "/dev/x", "/sys", "/tmp", "/", "/usr/local/x", "/bin", "/etc"}) {
    INFO(g);
    CHECK_FALSE(microvm::plan_shares({{"/data", g, false}}, merged_usr(), home, identity));
  }
  // Below the guest's tmpfs /tmp is fine (the agent mounts the share on it).
  CHECK(microvm::plan_shares({{"/tmp/w", "/tmp/w", false}}, merged_usr(), home, identity));
  CHECK_FALSE(microvm::plan_shares({{"/nonexistent", "/nonexistent", false}}, merged_usr(), home,
                                   [](const std::string&) -> std::optional<std::string> { return std::nullopt; }));
}

TEST_CASE("X4: QEMU's command line has no NIC, its own seccomp filter and read-only exports", "[X4]") {
  microvm::vm_config c;
  c.qemu = "/usr/bin/qemu-system-x86_64";
  c.a = microvm::accel::tcg;
  c.kernel = "/g/vmlinux";
  c.initrd = "/g/initramfs.cpio.gz";
  c.tsc_khz = 2096021;
  c.control_fd = 3;
  c.console_fd = 4;
  c.shares = {{"s0", "/usr", "/usr", false}, {"s1", "/w,readonly=off", "/w", true}};
  auto a = microvm::qemu_argv(c);
  CHECK(has(a, "-nodefaults"));
  CHECK(has(a, "-no-reboot"));
  CHECK(has(a, "tcg,thread=multi"));
  CHECK(has(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  CHECK(has(a, "console=ttyS0 panic=-1 quiet tsc_early_khz=2096021"));
  CHECK(has(a, "local,id=s0,path=/usr,security_model=none,readonly=on"));
  // A comma in a path cannot add an option (QEMU doubles it).
  CHECK(has(a, "local,id=s1,path=/w,,readonly=off,security_model=none"));
  for (const auto& x : a) {
    CHECK(x.find("netdev") == std::string::npos);
    CHECK(x != "-nic");
    CHECK(x != "-net");
  }
  c.a = microvm::accel::kvm;
  CHECK(has(microvm::qemu_argv(c), "kvm"));
}

TEST_CASE("X4: the guest protocol round-trips and its parsers are strict", "[X4]") {
  G::exec e{7, "/w", std::nullopt, {"sh", "-c", "echo a\tb\nc\\"}, {"PATH=/usr/bin", "X="}};
  G::frame_reader r;
  r.feed(G::encode(G::host_message(e)) + G::encode(G::host_message(G::poweroff{})));
  auto p = r.next();
  REQUIRE(p);
  REQUIRE(*p);
  auto back = G::decode_host(**p);
  REQUIRE(back);
  CHECK(std::get<G::exec>(*back) == e);
  auto p2 = r.next();
  REQUIRE(p2);
  REQUIRE(*p2);
  CHECK(std::holds_alternative<G::poweroff>(*G::decode_host(**p2)));

  G::output o{3, 2, std::string("bin\0ary\xff\n", 10)};
  G::frame_reader r2;
  r2.feed(G::encode(G::agent_message(o)));
  auto po = r2.next();
  REQUIRE(po);
  REQUIRE(*po);
  CHECK(std::get<G::output>(*G::decode_agent(**po)) == o);

  for (const char* bad : {"share\ts0\tusr\tro", "share\ts0\t/a/../b\tro", "share\tS 0\t/a\tro", "share\ts0\t/a\trw\tx",
                          "link\t/\tx", "exec\t1\trel\t-\t1\tsh\t0", "exec\t0\t/\t-\t1\tsh\t0", "exec\t1\t/\t-\t2\tsh\t0",
                          "exec\t1\t/\t-\t1\tsh\t1\tBAD NAME=x", "exec\t1\t/\t1\tsh\t0", "exec\t1\t/\t0:80\t1\tsh\t0",
                          "kill\t1\t99", "reboot", "", "share\ts0\t/a\\x00b\tro", "stdin\t1\t", "stdin\t0\tx",
                          "stdin-eof\t1\tx", "resize\t1\t24", "resize\t1\t24:0", "supervise\t--exec-channel\t5",
                          "supervise\t--proxy-channel\t4\t--proxy-listen\thttp=127.0.0.1:3128", "supervise\t--landlock-rx\t/usr",
                          "supervise\t--bogus\tx"}) {
    INFO(bad);
    CHECK_FALSE(G::decode_host(bad));
  }
  for (const char* bad : {"hello\t1", "exited\t1\texit\t256", "exited\t1\tsignal\t0", "output\t1\t3\tx",
                          "output\t1\t1\t", "exec-failed\t1\t1\tx", "started\t1\t0", "ready\tx",
                          "violation\t1\tfile-read\t/x\tP7", "violation\t1\tfile-write-create\t/x\t", "landlock\tsomething",
                          "stdin-ack\t0", "stdin-ack\t1\t2"}) {
    INFO(bad);
    CHECK_FALSE(G::decode_agent(bad));
  }
  // The step-4 messages: ccsb-init's options, a terminal exec, stdin, resize,
  // and the guest supervisor's events, each through its frame and back.
  ccsb::protocol::init_args ia;
  ia.exec_channel = G::kSupervisorChannelFd;
  ia.broker = ccsb::broker::rule_set{};
  ia.broker->roots = {"/w"};
  ia.broker->names = {"*.pem", ".env"};
  ia.broker->absent_denied = {"/w/.envrc"};
  ia.landlock = ccsb::confine::landlock_rules{};
  ia.landlock->read_exec = {"/usr"};
  ia.landlock->read_write = {"/w", "/tmp"};
  std::vector<G::host_message> hosts{G::supervise{ia},
                                     G::exec{8, "/w", ccsb::protocol::terminal_size{30, 100}, {"bash", "-i"}, {}},
                                     G::input{8, std::string("a\tb\x03\0", 4)}, G::input_eof{8},
                                     G::resize{8, {42, 132}}};
  for (const auto& m : hosts) {
    G::frame_reader fr;
    fr.feed(G::encode(m));
    auto f = fr.next();
    REQUIRE(f);
    REQUIRE(*f);
    auto back = G::decode_host(**f);
    INFO(**f);
    REQUIRE(back);
    CHECK(*back == m);
  }
  std::vector<G::agent_message> agents{G::guest_violation{3, "file-write-create", "/w/a\tb.pem", "P7: name matches *.pem"},
                                       G::guest_landlock{"abi 2: file system"}, G::stdin_ack{3}};
  for (const auto& m : agents) {
    G::frame_reader fr;
    fr.feed(G::encode(m));
    auto f = fr.next();
    REQUIRE(f);
    REQUIRE(*f);
    auto back = G::decode_agent(**f);
    INFO(**f);
    REQUIRE(back);
    CHECK(*back == m);
  }

  G::frame_reader big;
  big.feed(std::string("\x00\x10\x00\x01", 4));
  CHECK_FALSE(big.next()); // longer than kMaxFrame
  CHECK_FALSE(big.next()); // and it stays failed
  G::frame_reader empty;
  empty.feed(std::string("\x00\x00\x00\x00", 4));
  CHECK_FALSE(empty.next());
}

TEST_CASE("X4 P5: the write-denied paths inside writable shares become the guest's read-only paths", "[X4][P5]") {
  microvm::share_plan plan;
  plan.shares = {{"s0", "/usr", "/usr", false}, {"s1", "/real/w", "/w", true}, {"s2", "/ro", "/ro", false}};
  std::vector<path_rule> deny{{"/real/w/.git/hooks", "git hooks", path_shape::dir},
                              {"/real/w/.git/config", "git config", path_shape::file},
                              {"/real/w/.git/config", "twice", path_shape::file},
                              {"/real/wx/.git/hooks", "another tree", path_shape::dir},
                              {"/ro/.git/hooks", "read-only already", path_shape::dir},
                              {"/home/u/.bashrc", "not shared", path_shape::file}};
  auto g = microvm::protected_guest_paths(plan, deny);
  CHECK(g == std::vector<std::string>{"/w/.git/hooks", "/w/.git/config"});

  G::frame_reader r;
  r.feed(G::encode(G::host_message(G::protect{"/w/.git/hooks"})) + G::encode(G::host_message(G::user{65534, 65534})));
  auto a = r.next();
  REQUIRE(a);
  REQUIRE(*a);
  CHECK(std::get<G::protect>(*G::decode_host(**a)).guest_path == "/w/.git/hooks");
  auto b = r.next();
  REQUIRE(b);
  REQUIRE(*b);
  CHECK(std::get<G::user>(*G::decode_host(**b)) == G::user{65534, 65534});
  // Never guest root, never a relative or climbing path.
  for (const char* bad : {"user\t0\t0", "user\t1000\t0", "user\t1000", "protect\tw/.git", "protect\t/w/../etc", "protect\t/"}) {
    INFO(bad);
    CHECK_FALSE(G::decode_host(bad));
  }
}

TEST_CASE("X4 B6: the microvm probe names the opt-in of the caller that asks (ccsbd's launch field)", "[X4][B6]") {
  auto f = ready_host();
  f.opt_in = "the launch's \"microvmAccel\":\"tcg\", or CCSB_MICROVM_ACCEL=tcg in ccsbd's environment";
  auto a = microvm::probe(f);
  REQUIRE(a);
  CHECK_FALSE(a->vm.available);
  CHECK_THAT(a->vm.note, Catch::Contains("\"microvmAccel\":\"tcg\""));
  CHECK_THAT(a->vm.note, Catch::Contains("/dev/kvm: No such file or directory"));
  f.accel_request = "kvm";
  f.accel_source = "microvmAccel";
  a = microvm::probe(f);
  REQUIRE(a);
  CHECK_THAT(a->vm.note, Catch::Contains("KVM was asked for (microvmAccel=kvm)"));
}

TEST_CASE("X4 L7: only vm-PID-N cgroup names are read as a launcher's, the PID they name", "[X4][L7]") {
  CHECK(microvm::vm_cgroup_name(4242, 3) == "vm-4242-3");
  CHECK(microvm::stale_vm_cgroup_owner("vm-4242-3") == 4242L);
  CHECK(microvm::stale_vm_cgroup_owner(microvm::vm_cgroup_name(1, 1)) == 1L);
  for (const char* other : {"vm-", "vm-1", "vm-1-", "vm--1", "vm-0-1", "vm-12a-1", "vm-1-2x", "vm-1-2-3", "ccsb-s1",
                            "VM-1-1", "xvm-1-1", "vm-1234567890-1", "vm-1-1234567890", ".", ".."})
    CHECK_FALSE(microvm::stale_vm_cgroup_owner(other));
}

TEST_CASE("X4 X1 P7 X2: the guest's ccsb-init gets the native broker rules and Landlock ruleset at the guest's paths",
          "[X4][X1][P7][X2]") {
  microvm::share_plan plan;
  plan.shares = {{"s0", "/usr", "/usr", false}, {"s1", "/real/w", "/w", true}};
  policy pol;
  pol.mounts = {{"/real/w", "/w", true}};
  pol.write_allow = {{"/real/w", "worktree", path_shape::dir}};
  pol.write_deny = {{"/real/w/.git/hooks", "git hooks", path_shape::dir},
                    {"/real/w/.envrc", "direnv", path_shape::file},
                    {"/home/u/.bashrc", "not shared", path_shape::file}};
  pol.write_deny_globs = {{"/real/w", "*.pem", true, "P7"}};
  auto a = microvm::guest_supervisor_args(plan, pol);
  CHECK(a.exec_channel == G::kSupervisorChannelFd);
  REQUIRE(a.broker);
  // The same names the native renderer's broker_rules_for gives, rooted where the guest sees the share.
  CHECK(a.broker->names == ccsb::detail::broker_rules_for(pol).names);
  CHECK(std::find(a.broker->names.begin(), a.broker->names.end(), "*.pem") != a.broker->names.end());
  CHECK(a.broker->roots == std::vector<std::string>{"/w"});
  CHECK(std::find(a.broker->absent_denied.begin(), a.broker->absent_denied.end(), "/w/.envrc") !=
        a.broker->absent_denied.end());
  for (const auto& d : a.broker->absent_denied) CHECK(d.rfind("/w/", 0) == 0);
  REQUIRE(a.landlock);
  auto has = [](const std::vector<std::string>& v, const char* p) { return std::find(v.begin(), v.end(), p) != v.end(); };
  CHECK(has(a.landlock->read_write, "/w"));
  CHECK(has(a.landlock->read_write, "/root"));
  CHECK(has(a.landlock->read_exec, "/usr"));
  CHECK_FALSE(has(a.landlock->read_write, "/real/w"));
  CHECK_FALSE(a.landlock->restrict_tcp);
  // T2: the terminal profile's host-network rules stay off in the guest (its
  // loopback holds only the egress relay; egressd checks addresses).
  pol.network.kind = network_kind::open;
  CHECK(ccsb::detail::broker_rules_for(pol).host_net);
  CHECK_FALSE(microvm::guest_supervisor_args(plan, pol).broker->host_net);
  // It travels to the agent and back whole.
  auto back = G::decode_host(G::encode(G::host_message(G::supervise{a})).substr(4));
  REQUIRE(back);
  CHECK(std::get<G::supervise>(*back).args == a);
}
