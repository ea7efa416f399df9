// ccsb/microvm.hpp — the microvm backend's decisions (X4, B2, B4, B6;
// docs/microvm.md), pure functions of injected facts:
//
//   * probe(): whether a microVM can be had here and with which accelerator.
//     KVM when /dev/kvm is usable; TCG (QEMU's emulated CPU: a real kernel
//     boundary, 6-8x slower for CPU-bound work) only on the caller's explicit
//     opt-in, CCSB_MICROVM_ACCEL=tcg, ccsb-run --microvm-accel tcg or ccsbd
//     launch's "microvmAccel":"tcg" (probe_facts::opt_in says which). The
//     guest image must be present and of the format this program speaks.
//   * plan_shares(): what of the host the guest sees. The host's system tree
//     (/usr, /etc and the top-level links into /usr) read-only, plus the
//     spec's binds. 9p exports whole directories (no path inside a share can
//     be hidden from a guest kernel), so a bind that holds a P4 secret (a
//     bind of HOME holds ~/.ssh) or a system secret is refused, never shared.
//   * qemu_argv(): QEMU's command line, with nothing of the host but the
//     kernel, the initramfs and the shares; no NIC (-nodefaults, no -netdev).
//   * vm_cgroup_name() / stale_vm_cgroup_owner(): QEMU's cgroup is named
//     after its launcher, so a SIGKILLed launcher's can be told and swept.
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/protocol/guest.hpp"
#include "ccsb/protocol/guest_egress.hpp"
#include "ccsb/protocol/init_args.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/result.hpp"
#include "ccsb/spec.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::microvm {

// The guest image's manifest format (scripts/build-guest.sh `format=`).
inline constexpr int kImageFormat = 1;
inline constexpr std::string_view kTcgNote = "microvm (tcg: emulated CPU)";
inline constexpr std::string_view kKvmNote = "microvm (kvm)";

enum class accel { kvm, tcg };

struct probe_facts {
  std::string qemu_path;                    // empty: qemu-system-x86_64 is not on PATH
  bool kvm_usable{false};                   // /dev/kvm opens read-write
  std::string kvm_problem;                  // why not ("/dev/kvm: No such file or directory")
  std::string guest_dir;                    // where the image was looked for
  std::string image_problem;                // empty: vmlinux, initramfs and a manifest of kImageFormat
  std::string image_kernel;                 // the manifest's kernel version
  std::optional<std::string> accel_request; // the flag's value, else CCSB_MICROVM_ACCEL's (nullopt: neither)
  std::string accel_source;                 // "--microvm-accel", "CCSB_MICROVM_ACCEL" (ccsbd: "microvmAccel")
  std::string opt_in{"CCSB_MICROVM_ACCEL=tcg or --microvm-accel tcg"}; // how the caller's user opts into TCG
};

struct probe_answer {
  microvm_probe vm;          // what select_backend reads (B6)
  accel chosen{accel::kvm};  // meaningful when vm.available
  std::string kernel;        // the guest's kernel version
};

// An accelerator value that is neither kvm nor tcg is an error (a typo must
// not turn into "no microvm").
inline result<probe_answer> probe(const probe_facts& f) {
  probe_answer a;
  if (f.accel_request && *f.accel_request != "kvm" && *f.accel_request != "tcg")
    return make_error(errc::invalid_argument, f.accel_source,
                      "expected kvm or tcg, got \"" + *f.accel_request + "\"");
  if (f.qemu_path.empty()) {
    a.vm = {false, "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"};
    return a;
  }
  if (!f.image_problem.empty()) {
    a.vm = {false, "no usable guest image: " + f.image_problem +
                       " (build it: scripts/build-guest.sh AGENT INIT DIR, or cmake --build BUILD --target "
                       "ccsb-guest-image; CCSB_GUEST_DIR or --guest-dir names another)"};
    return a;
  }
  a.kernel = f.image_kernel;
  const bool want_tcg = f.accel_request && *f.accel_request == "tcg";
  if (f.kvm_usable && !want_tcg) {
    a.vm = {true, std::string(kKvmNote)};
    a.chosen = accel::kvm;
    return a;
  }
  if (want_tcg) {
    a.vm = {true, std::string(kTcgNote)};
    a.chosen = accel::tcg;
    return a;
  }
  std::string why = f.kvm_problem.empty() ? std::string("/dev/kvm is not usable") : f.kvm_problem;
  if (f.accel_request && *f.accel_request == "kvm")
    a.vm = {false, "KVM was asked for (" + f.accel_source + "=kvm) but " + why};
  else
    a.vm = {false, "no KVM here (" + why +
                       "); QEMU's emulated CPU (TCG) is used only on explicit opt-in: " + f.opt_in};
  return a;
}

// B4: the one start-up line of a microvm session.
inline std::string startup_line(const probe_answer& a) {
  return "agent sandbox ON (" + a.vm.note + " — guest kernel " + a.kernel +
         ", a kernel boundary: the command never runs on the host kernel)";
}

// --- shares ------------------------------------------------------------------

struct share_spec {
  std::string tag;
  std::string host_path;
  std::string guest_path;
  bool writable{false};
  friend bool operator==(const share_spec&, const share_spec&) = default;
};

// A top-level entry of the host's system tree (/usr, /etc, /bin, /lib64, ...).
struct system_entry {
  std::string path;
  enum class kind { absent, directory, symlink } what{kind::absent};
  std::string link_target; // for a symlink: readlink's text
};

// The entries looked at, in order; a directory is shared read-only, a
// symlink recreated as it is (merged /usr: /bin -> usr/bin).
inline constexpr std::string_view kSystemTree[] = {"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// The guest's own file systems: kernel ones no bind may be at or below;
// tmpfs ones a bind may be below (the agent mounts the shares on top), not at
// or above.
inline constexpr std::string_view kGuestKernelFs[] = {"/proc", "/dev", "/sys"};
inline constexpr std::string_view kGuestTmpfs[] = {"/tmp", "/run", "/root"};

struct share_plan {
  std::vector<share_spec> shares;
  std::vector<protocol::guest::link> links;
  friend bool operator==(const share_plan&, const share_plan&) = default;
};

namespace detail {
inline bool within(std::string_view p, std::string_view dir) {
  if (dir == "/") return true;
  return p == dir || (p.size() > dir.size() && p.substr(0, dir.size()) == dir && p[dir.size()] == '/');
}
} // namespace detail

// `resolve`: realpath of a host path (nullopt: it does not resolve). A bind
// is judged by its spelling and by what it resolves to: QEMU follows the
// links of an export's path.
inline result<share_plan> plan_shares(const std::vector<bind_mount>& binds, const std::vector<system_entry>& system,
                                      const std::string& home,
                                      const std::function<std::optional<std::string>(const std::string&)>& resolve) {
  share_plan plan;
  int n = 0;
  auto tag = [&n] { return "s" + std::to_string(n++); };
  for (const auto& e : system) {
    if (e.what == system_entry::kind::directory) plan.shares.push_back({tag(), e.path, e.path, false});
    else if (e.what == system_entry::kind::symlink && !e.link_target.empty())
      plan.links.push_back({e.path, e.link_target});
  }
  std::vector<std::pair<std::string, std::string>> secrets; // path, why
  for (const auto& d : kReadDenyPaths)
    if (!home.empty() && home != "/") secrets.emplace_back(ccsb::detail::expand_home(d.path, home), std::string(d.why));
  for (const auto& d : kSystemReadDenyPaths) secrets.emplace_back(std::string(d.path), std::string(d.why));
  for (std::size_t i = 0; i < binds.size(); ++i) {
    const auto& b = binds[i];
    const std::string field = "bindMounts[" + std::to_string(i) + "]";
    if (!protocol::guest::detail::guest_path_ok(b.guest_path) || b.guest_path == "/")
      return make_error(errc::invalid_argument, field + ".guestPath",
                        "\"" + b.guest_path + "\" is not an absolute, normal path below /");
    for (auto r : kGuestKernelFs)
      if (within(b.guest_path, r) || within(r, b.guest_path))
        return make_error(errc::unenforceable, field + ".guestPath",
                          "\"" + b.guest_path + "\" overlaps the guest's own " + std::string(r) +
                              "; the microvm backend cannot share it there");
    for (auto r : kGuestTmpfs)
      if (within(r, b.guest_path))
        return make_error(errc::unenforceable, field + ".guestPath",
                          "\"" + b.guest_path + "\" overlaps the guest's own " + std::string(r) +
                              "; the microvm backend cannot share it there");
    for (const auto& e : system)
      if (e.what != system_entry::kind::absent &&
          (within(b.guest_path, e.path) || within(e.path, b.guest_path)))
        return make_error(errc::unenforceable, field + ".guestPath",
                          "\"" + b.guest_path + "\" overlaps the system tree's " + e.path +
                              ", which the guest gets read-only from the host");
    auto real = resolve(b.host_path);
    if (!real)
      return make_error(errc::invalid_argument, field + ".hostPath", "\"" + b.host_path + "\" does not exist");
    for (const auto& spelled : {b.host_path, *real})
      for (const auto& [secret, why] : secrets)
        if (within(secret, spelled) || within(spelled, secret))
          return make_error(errc::unenforceable, field + ".hostPath",
                            "\"" + b.host_path + "\" holds " + secret + " (" + why +
                                "): the microvm backend shares whole directories over 9p and cannot hide a path "
                                "inside one, so it never shares a secret (P4); bind a directory that holds none");
    plan.shares.push_back({tag(), *real, b.guest_path, !b.read_only});
  }
  return plan;
}

// P5 inside the guest: the write-denied paths of the compiled policy that lie
// in a writable share, as guest paths. The agent makes each read-only in the
// guest before any command runs; the command is an unprivileged guest user
// and cannot undo it (only a guest-kernel exploit can, and then it reaches
// the shares, which the host's P5 does not cover: docs/microvm.md).
inline std::vector<std::string> protected_guest_paths(const share_plan& plan, const std::vector<path_rule>& write_deny) {
  std::vector<std::string> out;
  for (const auto& r : write_deny)
    for (const auto& s : plan.shares) {
      if (!s.writable || !within(r.path, s.host_path)) continue;
      std::string g = s.guest_path + r.path.substr(s.host_path.size());
      if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
    }
  return out;
}

// --- QEMU's cgroup -----------------------------------------------------------

// QEMU's cgroup is named after its launcher: vm-PID-N (the launcher's pid,
// its Nth VM). A launcher that was SIGKILLed ran no teardown: its VM died
// with it (PR_SET_PDEATHSIG) but the directories stay, so the next microvm
// launch in the same parent removes every vm-PID-N whose PID is no live
// process (stale_vm_cgroup_owner names the PID to check).
inline std::string vm_cgroup_name(long launcher_pid, int serial) {
  return "vm-" + std::to_string(launcher_pid) + "-" + std::to_string(serial);
}

// The launcher's pid of a cgroup directory named vm-PID-N; nullopt for any
// other name (only the directories this backend makes are ever swept).
inline std::optional<long> stale_vm_cgroup_owner(std::string_view name) {
  if (!name.starts_with("vm-")) return std::nullopt;
  name.remove_prefix(3);
  const auto dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 9 || dash + 1 == name.size() || name.size() - dash - 1 > 9)
    return std::nullopt;
  long pid = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (i == dash) continue;
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    if (i < dash) pid = pid * 10 + (name[i] - '0');
  }
  if (pid <= 0) return std::nullopt;
  return pid;
}

// The guest's ccsb-init options (X1, P7, X2): the native backend's broker
// rules and Landlock ruleset of the compiled policy (broker_rules_for,
// landlock_rules_for: the same functions, not a copy), with every host path
// that lies in a share moved to where the guest sees it. Write-denied paths
// in writable shares are the broker's absent_denied entries (what exists is
// also a read-only bind, protected_guest_paths; what does not cannot be
// created). The guest's HOME is its own tmpfs, /root: writable. The guest
// has lo only, so Landlock's TCP rules and the broker's host-network rules
// stay off.
inline protocol::init_args guest_supervisor_args(const share_plan& plan, const policy& pol) {
  auto to_guest = [&](const std::string& host) {
    for (const auto& s : plan.shares)
      if (within(host, s.host_path)) return s.guest_path + host.substr(s.host_path.size() == 1 ? 0 : s.host_path.size());
    return host;
  };
  protocol::init_args a;
  a.exec_channel = protocol::guest::kSupervisorChannelFd;
  broker::rule_set rules = ccsb::detail::broker_rules_for(pol);
  // T2's host-network rules guard the host's own services; the guest's
  // loopback is its own and holds only the egress relay's listeners (the
  // terminal profile's open network is egressd, with its address checks).
  rules.host_net = false;
  rules.dns.clear();
  for (auto& r : rules.roots) r = to_guest(r);
  for (auto& l : rules.linked) l.admin = to_guest(l.admin);
  for (const auto& d : pol.write_deny) {
    if (is_glob(d.path)) continue;
    for (const auto& s : plan.shares)
      if (s.writable && within(d.path, s.host_path)) {
        const std::string g = to_guest(d.path);
        if (!broker::covers_absent(rules, g)) rules.absent_denied.push_back(g);
      }
  }
  a.broker = std::move(rules);
  confine::landlock_rules ll = confine::landlock_rules_for(pol, false);
  ll.read_write.emplace_back("/root");
  for (auto* v : {&ll.read_exec, &ll.read_write}) {
    for (auto& x : *v) x = to_guest(x);
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  a.landlock = std::move(ll);
  return a;
}

// --- QEMU --------------------------------------------------------------------

struct vm_config {
  std::string qemu;
  accel a{accel::kvm};
  std::string kernel;  // the PVH vmlinux
  std::string initrd;  // initramfs.cpio.gz
  long tsc_khz{0};     // the host's TSC frequency (0: unknown)
  int memory_mb{512};
  int control_fd{-1};  // QEMU's end of the control socketpair (virtio-serial port ccsb.ctl)
  int console_fd{-1};  // QEMU's end of the serial console socketpair
  int egress_fd{-1};   // QEMU's end of the egress port (ccsb.egress); -1: no egress, no port
  std::vector<share_spec> shares;
};

// QEMU's option syntax doubles a comma inside a value.
inline std::string qemu_value(std::string_view s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

inline std::vector<std::string> qemu_argv(const vm_config& c) {
  std::vector<std::string> a{c.qemu, "-M", "microvm"};
  if (c.a == accel::kvm) {
    a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  } else {
    a.insert(a.end(), {"-accel", "tcg,thread=multi", "-cpu", "max"});
  }
  a.insert(a.end(), {"-smp", "1", "-m", std::to_string(c.memory_mb) + "M", "-nodefaults", "-no-user-config",
                     "-nographic", "-no-reboot", "-global", "virtio-mmio.force-legacy=false",
                     // QEMU's own seccomp filter: no exec of helpers, no setuid,
                     // no obsolete calls, no resource control.
                     "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
                     "-kernel", c.kernel, "-initrd", c.initrd});
  // Without tsc_early_khz about 60% of microvm boots under TCG hang at TSC
  // calibration (issue 31's measurement).
  std::string cmdline = "console=ttyS0 panic=-1 quiet";
  if (c.tsc_khz > 0) cmdline += " tsc_early_khz=" + std::to_string(c.tsc_khz);
  if (c.egress_fd >= 0) cmdline += " ccsb.egress=1"; // the agent starts its egress relay
  a.insert(a.end(), {"-append", cmdline});
  a.insert(a.end(), {"-chardev", "socket,id=con,fd=" + std::to_string(c.console_fd), "-serial", "chardev:con"});
  a.insert(a.end(), {"-device", "virtio-serial-device", "-chardev", "socket,id=ctl,fd=" + std::to_string(c.control_fd),
                     "-device", "virtserialport,chardev=ctl,name=" + std::string(protocol::guest::kControlPort)});
  if (c.egress_fd >= 0)
    a.insert(a.end(), {"-chardev", "socket,id=egress,fd=" + std::to_string(c.egress_fd), "-device",
                       "virtserialport,chardev=egress,name=" + std::string(protocol::guest_egress::kEgressPort)});
  for (const auto& s : c.shares) {
    a.insert(a.end(), {"-fsdev", "local,id=" + s.tag + ",path=" + qemu_value(s.host_path) +
                                     ",security_model=none" + (s.writable ? "" : ",readonly=on"),
                       "-device", "virtio-9p-device,fsdev=" + s.tag + ",mount_tag=" + s.tag});
  }
  return a;
}

// The guest environment of a command: a fixed base (the guest's HOME is an
// empty tmpfs), TERM and LANG from the launcher, then the caller's additions.
inline env_list guest_environment(const std::map<std::string, std::string>& host, const env_list& additions) {
  std::map<std::string, std::string> env{{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                                         {"HOME", "/root"},
                                         {"USER", "root"},
                                         {"LOGNAME", "root"},
                                         {"SHELL", "/bin/sh"}};
  for (const char* k : {"TERM", "LANG", "LC_ALL", "TZ"})
    if (auto it = host.find(k); it != host.end()) env[k] = it->second;
  for (const auto& v : additions) env[v.name] = v.value;
  env_list out;
  for (auto& [k, v] : env) out.push_back({k, std::move(v)});
  return out;
}

} // namespace ccsb::microvm
