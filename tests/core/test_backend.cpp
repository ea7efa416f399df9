// B1-B8, T1, T3: host probe and backend selection, every row on any host.
#include "ccsb/backend.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <map>
#include <string>
#include <vector>

using namespace ccsb;

namespace {
probe_facts linux_facts(bool bwrap, bool unshare = true) {
  probe_facts f;
  f.platform = platform::linux_;
  f.has_bwrap = bwrap;
  f.can_unshare = unshare;
  return f;
}
probe_result available_native() { return probe_native(linux_facts(true)); }
probe_result unavailable_native() { return probe_native(linux_facts(false)); }
} // namespace

TEST_CASE("B2: macOS offers Seatbelt", "[B2]") {
  probe_facts f;
  f.platform = platform::macos;
  f.has_sandbox_exec = true;
  auto r = probe_native(f);
  CHECK(r.available);
  CHECK_FALSE(r.requires_install);
  CHECK(r.note == "sandbox-exec (Seatbelt) — namespace isolation, no kernel boundary");
}

TEST_CASE("B2: Linux and WSL2 with bwrap offer bubblewrap (no socat: L3)", "[B2][L3]") {
  for (auto p : {platform::linux_, platform::wsl2}) {
    auto f = linux_facts(true);
    f.platform = p;
    auto r = probe_native(f);
    CHECK(r.available);
    CHECK(r.note == "bubblewrap — namespace isolation, no kernel boundary");
    CHECK(r.missing.empty());
  }
}

TEST_CASE("X2: the probe reports the kernel's Landlock ABI, which never decides availability", "[X2][B2]") {
  auto f = linux_facts(true);
  f.landlock_abi = 7;
  auto r = probe_native(f);
  CHECK(r.available);
  CHECK(r.landlock_abi == 7);
  f.landlock_abi = 0;
  CHECK(probe_native(f).available);
  CHECK(probe_native(f).landlock_abi == 0);
}

TEST_CASE("B2: a missing bwrap names exactly the missing package", "[B2]") {
  auto res = probe_native(linux_facts(false));
  CHECK_FALSE(res.available);
  CHECK(res.requires_install);
  CHECK(res.missing == std::vector<std::string>{"bubblewrap"});
  CHECK(res.hint == "apt-get install bubblewrap");
}

TEST_CASE("B2: a bwrap that cannot unshare is not available", "[B2]") {
  auto f = linux_facts(true, false);
  f.unshare_error = "bwrap: No permissions to create new namespace";
  auto r = probe_native(f);
  CHECK_FALSE(r.available);
  CHECK_FALSE(r.requires_install);
  CHECK_THAT(r.hint, Catch::Contains("No permissions to create new namespace"));
}

TEST_CASE("B7: Windows and other platforms have no native sandbox", "[B7][B2]") {
  for (auto p : {platform::windows, platform::other}) {
    probe_facts f;
    f.platform = p;
    f.has_bwrap = f.can_unshare = f.has_sandbox_exec = true; // tools do not matter
    auto r = probe_native(f);
    CHECK_FALSE(r.available);
    CHECK_FALSE(r.requires_install);
    CHECK(r.hint == "Native sandbox is not offered on this platform");
    auto s = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, r, {});
    REQUIRE(s);
    CHECK(s->chosen == backend::none);
  }
}

TEST_CASE("B3: --sandbox accepts on/off in any case and nothing else", "[B3]") {
  CHECK(*parse_sandbox_switch("on") == sandbox_switch::on);
  CHECK(*parse_sandbox_switch("ON") == sandbox_switch::on);
  CHECK(*parse_sandbox_switch("Off") == sandbox_switch::off);
  for (const char* bad : {"", "yes", "true", "1", "o n", "onn"}) {
    auto r = parse_sandbox_switch(bad, "CC_SERVER_SANDBOX");
    REQUIRE_FALSE(r);
    CHECK(r.err().field == "CC_SERVER_SANDBOX");
    CHECK_THAT(r.err().message, Catch::Contains("\"on\" or \"off\""));
  }
}

TEST_CASE("B4: exactly one start-up line per outcome", "[B4]") {
  CHECK(startup_line(sandbox_switch::on, available_native()) ==
        "agent sandbox ON (bubblewrap — namespace isolation, no kernel boundary)");
  CHECK(startup_line(sandbox_switch::on, unavailable_native()) ==
        "no OS-native agent sandbox on this host (apt-get install bubblewrap)");
  CHECK(startup_line(sandbox_switch::off, available_native()) == "agent sandbox DISABLED by --sandbox off");
}

TEST_CASE("B5: dispatch wraps in native only when available and on", "[B5][B8]") {
  struct row { bool avail; sandbox_switch sw; backend expect; };
  const row rows[] = {
      {true, sandbox_switch::on, backend::native},
      {false, sandbox_switch::on, backend::none},
      {true, sandbox_switch::off, backend::none},
      {false, sandbox_switch::off, backend::none},
  };
  for (const auto& r : rows) {
    auto s = select_backend(run_context::dispatch, std::nullopt, r.sw, r.avail ? available_native() : unavailable_native(), {});
    REQUIRE(s);
    CHECK(s->chosen == r.expect);
  }
}

TEST_CASE("B6: explicit microvm without a runtime is a typed error", "[B6]") {
  auto s = select_backend(run_context::dispatch, backend::microvm, sandbox_switch::on, available_native(),
                          {false, "no KVM"});
  REQUIRE_FALSE(s);
  CHECK(s.err().code == errc::backend_unavailable);
  CHECK_THAT(s.err().message, Catch::Contains("no KVM"));
  auto ok = select_backend(run_context::dispatch, backend::microvm, sandbox_switch::on, available_native(), {true, ""});
  REQUIRE(ok);
  CHECK(ok->chosen == backend::microvm);
}

TEST_CASE("B6: only an unspecified default steps down, and says so", "[B6]") {
  auto s = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, available_native(),
                          {false, "no KVM"}, /*prefer_microvm=*/true);
  REQUIRE(s);
  CHECK(s->chosen == backend::native);
  REQUIRE(s->log.size() == 1);
  CHECK_THAT(s->log[0], Catch::Contains("steps down to native"));
  // Explicit native never becomes microvm or none silently.
  auto n = select_backend(run_context::dispatch, backend::native, sandbox_switch::on, unavailable_native(), {true, ""});
  REQUIRE_FALSE(n);
  CHECK(n.err().code == errc::backend_unavailable);
  auto off = select_backend(run_context::dispatch, backend::native, sandbox_switch::off, available_native(), {});
  REQUIRE_FALSE(off);
  CHECK_THAT(off.err().message, Catch::Contains("--sandbox off"));
}

TEST_CASE("T1: terminals default to none and get native only on request", "[T1][T3]") {
  auto d = select_backend(run_context::terminal, std::nullopt, sandbox_switch::on, available_native(), {});
  REQUIRE(d);
  CHECK(d->chosen == backend::none);
  auto n = select_backend(run_context::terminal, backend::native, sandbox_switch::on, available_native(), {});
  REQUIRE(n);
  CHECK(n->chosen == backend::native);
  // T3: unsupported wrapping fails instead of showing a native badge.
  auto f = select_backend(run_context::terminal, backend::native, sandbox_switch::on, unavailable_native(), {});
  REQUIRE_FALSE(f);
}

TEST_CASE("B1: an explicit backend request is parsed strictly", "[B1][B6]") {
  CHECK(*parse_backend_request("native") == backend::native);
  CHECK(*parse_backend_request("none") == backend::none);
  CHECK(*parse_backend_request("microvm") == backend::microvm);
  CHECK_FALSE(parse_backend_request("docker"));
  CHECK_FALSE(parse_backend_request("Native"));
  CHECK(from_name(std::string_view("docker")) == backend::native);
}

// ---------------------------------------------------------------------------
// L1 (issue 11): why the user namespace cannot be created, from injected facts.

namespace {
userns_facts failed(userns_step at, int err) {
  userns_facts f;
  f.tried = true;
  f.failed_at = at;
  f.error = err;
  f.max_user_namespaces = 15000;
  return f;
}

struct cause_row {
  const char* what;
  userns_facts facts;
  userns_cause cause;
  const char* found; // a piece of what the probe saw
  const char* fix;   // a piece of the fix
};

std::vector<cause_row> cause_rows() {
  std::vector<cause_row> rows;
  auto max0 = failed(userns_step::clone_user, ENOSPC);
  max0.max_user_namespaces = 0;
  rows.push_back({"max_user_namespaces = 0", max0, userns_cause::sysctl_max_user_namespaces,
                  "/proc/sys/user/max_user_namespaces is 0", "sysctl -w user.max_user_namespaces="});
  rows.push_back({"an enclosing namespace's limit (ENOSPC, this one allows)", failed(userns_step::clone_user, ENOSPC),
                  userns_cause::sysctl_max_user_namespaces,
                  "user.max_user_namespaces (15000 here) of this or an enclosing",
                  "sysctl -w user.max_user_namespaces="});
  auto debian = failed(userns_step::clone_user, EPERM);
  debian.unprivileged_userns_clone = 0;
  rows.push_back({"Debian's unprivileged_userns_clone = 0", debian, userns_cause::sysctl_unprivileged_userns_clone,
                  "/proc/sys/kernel/unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1"});
  auto seccomp = failed(userns_step::clone_user, EPERM);
  seccomp.seccomp_mode = 2;
  seccomp.unprivileged_userns_clone = 1;
  rows.push_back({"a seccomp filter (Docker's default profile)", seccomp, userns_cause::seccomp,
                  "failed with EPERM while the sysctls allow it", "--security-opt seccomp="});
  auto seccomp_net = failed(userns_step::clone_others, EPERM);
  seccomp_net.seccomp_mode = 2;
  rows.push_back({"a seccomp filter that allows CLONE_NEWUSER only", seccomp_net, userns_cause::seccomp,
                  "clone(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS) failed with EPERM inside",
                  "--security-opt seccomp="});
  auto aa_map = failed(userns_step::uid_map, EACCES);
  aa_map.apparmor_restrict = 1;
  aa_map.apparmor_label = "unconfined";
  rows.push_back({"Ubuntu 24.04: restricted, uid_map denied", aa_map, userns_cause::apparmor,
                  "apparmor_restrict_unprivileged_userns is 1 and the process is unconfined", "userns, }"});
  auto aa_lo = failed(userns_step::loopback, EPERM);
  aa_lo.apparmor_restrict = 1;
  rows.push_back({"Ubuntu 24.04: restricted, loopback fails (RTM_NEWADDR)", aa_lo, userns_cause::apparmor,
                  "bringing up lo (SIOCSIFFLAGS) failed with EPERM", "kernel.apparmor_restrict_unprivileged_userns=0"});
  auto aa_profile = failed(userns_step::mount_private, EACCES);
  aa_profile.apparmor_label = "docker-default (enforce)";
  rows.push_back({"a confining profile (docker-default) denies mounts", aa_profile, userns_cause::apparmor,
                  "the AppArmor profile docker-default (enforce) denies it", "apparmor=unconfined"});
  auto aa_create = failed(userns_step::clone_user, EACCES);
  aa_create.apparmor_label = "some-profile (enforce)";
  aa_create.seccomp_mode = 2;
  rows.push_back({"a confining profile without userns denies creation", aa_create, userns_cause::apparmor,
                  "AppArmor denies creating it (profile some-profile (enforce))", "userns, }"});
  auto masked = failed(userns_step::mount_proc, EPERM);
  masked.proc_masks = {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/scsi", "/proc/sys"};
  masked.apparmor_restrict = 1; // got as far as proc: the restriction did not stop it
  rows.push_back({"Docker's masked /proc", masked, userns_cause::proc_masked,
                  "(/proc/acpi, /proc/kcore, /proc/keys, /proc/timer_list, … (6 in all))",
                  "--security-opt systempaths=unconfined"});
  auto ro = failed(userns_step::mount_proc, EPERM);
  ro.proc_read_only = true;
  rows.push_back({"a read-only /proc: mounting proc", ro, userns_cause::proc_read_only, "/proc is mounted read-only",
                  "mount /proc read-write"});
  auto ro_map = failed(userns_step::setgroups, EROFS);
  ro_map.proc_read_only = true;
  rows.push_back({"a read-only /proc: the id maps", ro_map, userns_cause::proc_read_only,
                  "the new namespace's id maps cannot be written", "mount /proc read-write"});
  auto nested = failed(userns_step::nested_user, EPERM);
  nested.seccomp_mode = 2;
  rows.push_back({"a seccomp filter allowing clone but not unshare (--disable-userns)", nested, userns_cause::seccomp,
                  "unshare(CLONE_NEWUSER) inside it (bwrap --disable-userns) failed with EPERM",
                  "--security-opt seccomp="});
  auto nested_limit = failed(userns_step::nested_user, ENOSPC);
  nested_limit.max_user_namespaces = 1;
  rows.push_back({"room for one user namespace, the sandbox needs two", nested_limit,
                  userns_cause::sysctl_max_user_namespaces, "a sandbox needs two",
                  "sysctl -w user.max_user_namespaces="});
  auto pivot = failed(userns_step::pivot_root, EPERM);
  pivot.seccomp_mode = 2;
  rows.push_back({"Docker's profile with CAP_SYS_ADMIN: pivot_root is still denied", pivot, userns_cause::seccomp,
                  "pivot_root onto a new tmpfs failed with EPERM inside the new user namespace, which holds every "
                  "capability there",
                  "pivot_root"});
  rows.push_back({"sethostname denied, no seccomp filter", failed(userns_step::set_hostname, EPERM),
                  userns_cause::no_permission, "sethostname failed with EPERM inside", "audit log"});
  rows.push_back({"the nested namespace's limit cannot be written", failed(userns_step::limit_userns, EACCES),
                  userns_cause::no_permission, "writing 1 to the new namespace's /proc/sys/user/max_user_namespaces",
                  "audit log"});
  rows.push_back({"no user namespaces in the kernel", failed(userns_step::clone_user, EINVAL),
                  userns_cause::unsupported_kernel, "this kernel has no user namespaces", "CONFIG_USER_NS=y"});
  rows.push_back({"EPERM and nothing explains it (a chroot, SELinux)", failed(userns_step::clone_user, EPERM),
                  userns_cause::no_permission, "with no sysctl, seccomp filter or AppArmor setting", "chroot"});
  rows.push_back({"setgroups denied, nothing explains it", failed(userns_step::setgroups, EPERM),
                  userns_cause::no_permission, "writing /proc/self/setgroups failed with EPERM inside", "audit log"});
  rows.push_back({"mounting proc denied, /proc fully visible and writable", failed(userns_step::mount_proc, EPERM),
                  userns_cause::no_permission, "mounting proc failed with EPERM inside", "audit log"});
  rows.push_back({"the root launcher could not become nobody", failed(userns_step::drop_root, EPERM),
                  userns_cause::no_permission, "setresuid(65534) before the trial failed with EPERM", "audit log"});
  return rows;
}
} // namespace

TEST_CASE("L1: each user-namespace block names its cause, what was seen and the fix", "[L1][B2]") {
  for (const auto& row : cause_rows()) {
    INFO(row.what);
    auto d = diagnose_userns(row.facts);
    CHECK(to_string(d.cause) == to_string(row.cause));
    CHECK_THAT(d.found, Catch::Contains(row.found));
    CHECK_THAT(d.fix, Catch::Contains(row.fix));
    CHECK_THAT(describe(d), Catch::StartsWith("bwrap cannot create its user namespace (cause: " +
                                              std::string(to_string(row.cause)) + "): "));
  }
}

TEST_CASE("L1: one changed fact changes the cause (the evidence decides, not the step alone)", "[L1][B2]") {
  // The same EPERM from clone(CLONE_NEWUSER) is three different problems.
  auto f = failed(userns_step::clone_user, EPERM);
  CHECK(diagnose_userns(f).cause == userns_cause::no_permission);
  f.seccomp_mode = 2;
  CHECK(diagnose_userns(f).cause == userns_cause::seccomp);
  f.unprivileged_userns_clone = 0;
  CHECK(diagnose_userns(f).cause == userns_cause::sysctl_unprivileged_userns_clone);
  // ENOSYS is a missing kernel feature, unless a seccomp filter answers it.
  auto n = failed(userns_step::clone_user, ENOSYS);
  CHECK(diagnose_userns(n).cause == userns_cause::unsupported_kernel);
  n.seccomp_mode = 2;
  CHECK(diagnose_userns(n).cause == userns_cause::seccomp);
  // A failed uid_map is AppArmor only where its restriction is on.
  auto m = failed(userns_step::uid_map, EACCES);
  m.apparmor_label = "unconfined";
  CHECK(diagnose_userns(m).cause == userns_cause::no_permission);
  m.apparmor_restrict = 0;
  CHECK(diagnose_userns(m).cause == userns_cause::no_permission);
  m.apparmor_restrict = 1;
  CHECK(diagnose_userns(m).cause == userns_cause::apparmor);
  // A profile's label (one in unconfined mode too) is a profile: its EACCES is AppArmor's.
  m.apparmor_restrict = 0;
  m.apparmor_label = "bwrap (unconfined)";
  CHECK(diagnose_userns(m).cause == userns_cause::apparmor);
  // Masks decide over a read-only /proc; neither: no explanation.
  auto p = failed(userns_step::mount_proc, EPERM);
  p.proc_read_only = true;
  CHECK(diagnose_userns(p).cause == userns_cause::proc_read_only);
  p.proc_masks = {"/proc/kcore"};
  CHECK(diagnose_userns(p).cause == userns_cause::proc_masked);
  p.proc_masks.clear();
  p.proc_read_only = false;
  CHECK(diagnose_userns(p).cause == userns_cause::no_permission);
  // A seccomp filter alone is no block: the trial passed.
  auto ok = failed(userns_step::none, 0);
  ok.seccomp_mode = 2;
  ok.apparmor_restrict = 1;
  CHECK(diagnose_userns(ok).cause == userns_cause::none);
  CHECK(diagnose_userns(userns_facts{}).cause == userns_cause::unknown);
}

TEST_CASE("L1: every cause has its own fix", "[L1][B2]") {
  std::map<std::string, std::string> fix_of;
  for (const auto& row : cause_rows()) {
    auto d = diagnose_userns(row.facts);
    auto [it, fresh] = fix_of.emplace(std::string(to_string(d.cause)), d.fix);
    if (!fresh) continue;
    for (const auto& [cause, fix] : fix_of)
      if (cause != it->first) {
        INFO(it->first << " vs " << cause);
        CHECK(fix != it->second);
      }
  }
  CHECK(fix_of.size() == 8); // every cause but none and unknown
}

TEST_CASE("L1: the /proc masks come from mountinfo, binfmt_misc is not one", "[L1][B2]") {
  const std::string mountinfo =
      "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
      "23 22 0:22 / /proc/sys/fs/binfmt_misc rw,relatime shared:13 - autofs systemd-1 rw\n"
      "24 22 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw\n"
      "25 22 0:30 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
      "26 22 0:21 /sys /proc/sys ro,relatime - proc proc rw\n"
      "27 1 0:31 / /home/a\\040b rw - ext4 /dev/sda1 rw\n"
      "28 1 0:32 / /proc\\040x rw - tmpfs tmpfs rw\n"
      "29 22 0:33 / /proc/odd\\040name rw - tmpfs tmpfs rw";
  CHECK(proc_masks_of_mountinfo(mountinfo) ==
        std::vector<std::string>{"/proc/kcore", "/proc/acpi", "/proc/sys", "/proc/odd name"});
  CHECK(proc_masks_of_mountinfo("").empty());
  CHECK(proc_masks_of_mountinfo("22 1 0:21 / /proc rw - proc proc rw\n").empty());
}

TEST_CASE("B2, B4: a blocked user namespace is not available, and the B4 line names cause and fix", "[B2][B4][L1]") {
  auto f = linux_facts(true, false);
  f.userns = failed(userns_step::clone_user, EPERM);
  f.userns.seccomp_mode = 2;
  f.unshare_error = "bwrap: No permissions to create new namespace";
  auto r = probe_native(f);
  CHECK_FALSE(r.available);
  CHECK(r.userns == userns_cause::seccomp);
  CHECK_FALSE(r.fail_closed);
  CHECK(r.hint == describe(diagnose_userns(f.userns)) + " [bwrap said: bwrap: No permissions to create new namespace]");
  auto line = startup_line(sandbox_switch::on, r);
  CHECK_THAT(line, Catch::StartsWith("no OS-native agent sandbox on this host (bwrap cannot create its user namespace "
                                     "(cause: seccomp): clone(CLONE_NEWUSER) failed with EPERM"));
  CHECK_THAT(line, Catch::Contains("; fix: allow namespace creation in the seccomp profile"));
  // The trial passed but bwrap still failed: bwrap's own words, no guessed cause.
  f.userns = failed(userns_step::none, 0);
  r = probe_native(f);
  CHECK(r.userns == userns_cause::none);
  CHECK(r.hint == "bwrap cannot create namespaces on this host: bwrap: No permissions to create new namespace");
  // A missing bwrap is an install hint, whatever the trial says.
  auto g = linux_facts(false, false);
  g.userns = failed(userns_step::clone_user, ENOSPC);
  CHECK(probe_native(g).hint == "apt-get install bubblewrap");
  CHECK(probe_native(g).userns == userns_cause::none);
}

TEST_CASE("B5, B6: a probe that fails closed refuses the default instead of running on the host", "[B5][B6][L1]") {
  auto f = linux_facts(true, false);
  f.userns = failed(userns_step::clone_user, ENOSPC);
  f.userns.max_user_namespaces = 0;
  auto server = probe_native(f); // a server: B5 steps down to none
  auto s = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, server, {});
  REQUIRE(s);
  CHECK(s->chosen == backend::none);

  f.fail_closed_when_blocked = true; // ccsb-run
  auto run = probe_native(f);
  CHECK(run.fail_closed);
  auto d = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, run, {});
  REQUIRE_FALSE(d);
  CHECK(d.err().code == errc::backend_unavailable);
  CHECK_THAT(d.err().message, Catch::StartsWith("the native sandbox cannot start on this host (bwrap cannot create its "
                                                "user namespace (cause: sysctl-max-user-namespaces)"));
  CHECK_THAT(d.err().message, Catch::Contains("sysctl -w user.max_user_namespaces="));
  CHECK_THAT(d.err().message,
             Catch::EndsWith("the run does not start (ask for backend none to run on the host without a sandbox)"));
  auto n = select_backend(run_context::dispatch, backend::native, sandbox_switch::on, run, {});
  REQUIRE_FALSE(n);
  CHECK_THAT(n.err().message, Catch::Contains("(cause: sysctl-max-user-namespaces)"));
  // The explicit opt-outs still run on the host, and a terminal's default is none (T1).
  auto none = select_backend(run_context::dispatch, backend::none, sandbox_switch::on, run, {});
  REQUIRE(none);
  CHECK(none->chosen == backend::none);
  auto off = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::off, run, {});
  REQUIRE(off);
  CHECK(off->chosen == backend::none);
  auto term = select_backend(run_context::terminal, std::nullopt, sandbox_switch::on, run, {});
  REQUIRE(term);
  CHECK(term->chosen == backend::none);
  // fail_closed is about a blocked namespace only: a missing bwrap steps down as before (B5).
  auto g = linux_facts(false, false);
  g.fail_closed_when_blocked = true;
  auto missing = probe_native(g);
  CHECK_FALSE(missing.fail_closed);
  auto m = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, missing, {});
  REQUIRE(m);
  CHECK(m->chosen == backend::none);
}
