// ccsb/backend.hpp — host probe and backend selection (B1-B8, T1, T3), and
// why a host cannot create the sandbox's user namespace (L1, issue 11).
//
// Pure functions of injected host facts: the launcher (or a server) gathers
// the facts once at start-up (platform, which tools are on PATH, whether bwrap
// can create namespaces, what the user-namespace trial saw, whether a microVM
// runtime answers) and everything below is decided from them, so every row of
// the B2 table and every user-namespace cause is unit-tested on any host.
#pragma once

#include "ccsb/backend_name.hpp"
#include "ccsb/result.hpp"

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

// `linux_`: "linux" is a predefined macro in GNU C++ modes.
enum class platform { macos, linux_, wsl2, windows, other };

constexpr std::string_view to_string(platform p) noexcept {
  switch (p) {
  case platform::macos: return "macos";
  case platform::linux_: return "linux";
  case platform::wsl2: return "wsl2";
  case platform::windows: return "windows";
  case platform::other: return "other";
  }
  return "other";
}

// ---------------------------------------------------------------------------
// The user namespace (L1: always a new one). Containers and hardened hosts
// stop it in different places, and each place has a different fix, so the
// launcher runs a trial that does what bwrap does, in bwrap's order, as an
// unprivileged uid (ccsb/launch/userns_probe.hpp), and records the first step
// that failed, its errno and the host settings that explain it.

// The trial's steps, in order.
enum class userns_step {
  none,          // every step worked
  drop_root,     // a root launcher's trial becomes nobody first (bwrap runs unprivileged: L1)
  clone_user,    // clone(CLONE_NEWUSER), as bwrap creates it
  setgroups,     // write "deny" to /proc/self/setgroups
  uid_map,       // write /proc/self/uid_map
  gid_map,       // write /proc/self/gid_map
  clone_others,  // clone(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) inside it
  loopback,      // bring up lo in the new network namespace (bwrap: "loopback: Failed RTM_NEWADDR")
  mount_private, // make the new mount namespace private (bwrap: "Failed to make / slave")
  mount_proc,    // mount a new proc as pid 1 of the new pid namespace (bwrap: "Can't mount proc")
  limit_userns,  // --disable-userns: user.max_user_namespaces = 1 in the new namespace
  set_hostname,  // sethostname in the new uts namespace (bwrap --hostname)
  pivot_root,    // a tmpfs as the new root: mount, pivot_root(".", ".") (bwrap's pivot)
  umount_old,    // umount2 of the old root (bwrap: "unmount old root")
  nested_user,   // --disable-userns: unshare(CLONE_NEWUSER) into a nested one that may create none
};

constexpr std::string_view to_string(userns_step s) noexcept {
  switch (s) {
  case userns_step::none: return "none";
  case userns_step::drop_root: return "setresuid(65534) before the trial";
  case userns_step::clone_user: return "clone(CLONE_NEWUSER)";
  case userns_step::setgroups: return "writing /proc/self/setgroups";
  case userns_step::uid_map: return "writing /proc/self/uid_map";
  case userns_step::gid_map: return "writing /proc/self/gid_map";
  case userns_step::clone_others: return "clone(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS)";
  case userns_step::loopback: return "bringing up lo (SIOCSIFFLAGS)";
  case userns_step::mount_private: return "mount(\"/\", MS_REC|MS_PRIVATE)";
  case userns_step::mount_proc: return "mounting proc";
  case userns_step::limit_userns: return "writing 1 to the new namespace's /proc/sys/user/max_user_namespaces";
  case userns_step::set_hostname: return "sethostname";
  case userns_step::pivot_root: return "pivot_root onto a new tmpfs";
  case userns_step::umount_old: return "umount2 of the old root";
  case userns_step::nested_user: return "unshare(CLONE_NEWUSER) inside it (bwrap --disable-userns)";
  }
  return "none";
}

// What the launcher saw. Host settings that do not exist on this kernel are
// absent (nullopt), never guessed.
struct userns_facts {
  bool tried{false};                         // false: no trial ran (its answer is unknown)
  userns_step failed_at{userns_step::none};  // the first step that failed
  int error{0};                              // its errno
  std::optional<long> max_user_namespaces;   // /proc/sys/user/max_user_namespaces
  std::optional<int> unprivileged_userns_clone; // Debian: /proc/sys/kernel/unprivileged_userns_clone
  std::optional<int> apparmor_restrict;      // /proc/sys/kernel/apparmor_restrict_unprivileged_userns
  std::string apparmor_label;                // /proc/self/attr/apparmor/current ("" without AppArmor)
  int seccomp_mode{0};                       // /proc/self/status "Seccomp:" (2: a filter is installed)
  bool proc_read_only{false};                // /proc itself is mounted read-only
  std::vector<std::string> proc_masks;       // mounts over paths below /proc (proc_masks_of_mountinfo)
  friend bool operator==(const userns_facts&, const userns_facts&) = default;
};

enum class userns_cause {
  none,                             // the trial created everything bwrap needs
  unknown,                          // no trial ran
  unsupported_kernel,               // built without CONFIG_USER_NS
  sysctl_max_user_namespaces,       // user.max_user_namespaces is 0 (or its limit is reached)
  sysctl_unprivileged_userns_clone, // Debian's kernel.unprivileged_userns_clone = 0
  seccomp,                          // a seccomp filter denies creating namespaces
  apparmor,                         // AppArmor's userns restriction or a confining profile
  proc_masked,                      // /proc has paths mounted over it (a container's masked paths)
  proc_read_only,                   // /proc is mounted read-only
  no_permission,                    // refused, and no setting above explains it
};

constexpr std::string_view to_string(userns_cause c) noexcept {
  switch (c) {
  case userns_cause::none: return "none";
  case userns_cause::unknown: return "unknown";
  case userns_cause::unsupported_kernel: return "unsupported-kernel";
  case userns_cause::sysctl_max_user_namespaces: return "sysctl-max-user-namespaces";
  case userns_cause::sysctl_unprivileged_userns_clone: return "sysctl-unprivileged-userns-clone";
  case userns_cause::seccomp: return "seccomp";
  case userns_cause::apparmor: return "apparmor";
  case userns_cause::proc_masked: return "proc-masked";
  case userns_cause::proc_read_only: return "proc-read-only";
  case userns_cause::no_permission: return "no-permission";
  }
  return "unknown";
}

struct userns_diagnosis {
  userns_cause cause{userns_cause::none};
  std::string found; // what the probe saw (the step, its errno, the setting)
  std::string fix;   // what to change, where
  friend bool operator==(const userns_diagnosis&, const userns_diagnosis&) = default;
};

namespace detail {

inline std::string errno_name(int e) {
  switch (e) {
  case EPERM: return "EPERM";
  case EACCES: return "EACCES";
  case ENOSPC: return "ENOSPC";
  case EUSERS: return "EUSERS";
  case EINVAL: return "EINVAL";
  case ENOSYS: return "ENOSYS";
  case ENOMEM: return "ENOMEM";
  case EROFS: return "EROFS";
  case EBUSY: return "EBUSY";
  case ENOENT: return "ENOENT";
  }
  return "errno " + std::to_string(e);
}

// A mountinfo mount point with its octal escapes (\040 for a space) decoded.
inline std::string unescape_mountinfo(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

} // namespace detail

// The mounts over paths below /proc, from /proc/self/mountinfo's text. The
// kernel lets a user namespace mount a new proc only where an existing proc
// mount is fully visible: every mount on top of it must sit on a permanently
// empty directory. /proc/sys/fs/binfmt_misc is one (every host mounts it);
// a container engine's masks (/dev/null over /proc/kcore, read-only binds of
// /proc/sys, tmpfs over /proc/acpi) are not.
inline std::vector<std::string> proc_masks_of_mountinfo(std::string_view mountinfo) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < mountinfo.size()) {
    std::size_t eol = mountinfo.find('\n', pos);
    if (eol == std::string_view::npos) eol = mountinfo.size();
    std::string_view line = mountinfo.substr(pos, eol - pos);
    pos = eol + 1;
    // id parent major:minor root MOUNT-POINT options ...
    std::size_t field = 0, start = 0;
    std::string_view mount_point;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      if (i == line.size() || line[i] == ' ') {
        if (field == 4) mount_point = line.substr(start, i - start);
        ++field;
        start = i + 1;
      }
    }
    std::string mp = detail::unescape_mountinfo(mount_point);
    if (mp.rfind("/proc/", 0) != 0 || mp == "/proc/sys/fs/binfmt_misc") continue;
    out.push_back(mp);
  }
  return out;
}

namespace detail {

inline const std::string kUsernsSeccompFix =
    "allow namespace creation in the seccomp profile of the container (docker/podman run --security-opt "
    "seccomp=PROFILE.json allowing clone with namespace flags, unshare, mount, umount2, pivot_root and "
    "sethostname: docs/containers.md; or "
    "--security-opt seccomp=unconfined)";
inline const std::string kUsernsApparmorFix =
    "let bwrap create user namespaces under AppArmor: a profile for it with the userns rule (Ubuntu 24.04: "
    "/etc/apparmor.d/bwrap containing `abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap "
    "flags=(unconfined) { userns, }`, then `apparmor_parser -r /etc/apparmor.d/bwrap`), or on the host "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; in a container: --security-opt "
    "apparmor=unconfined";
inline const std::string kUsernsProcFix =
    "give the container an unmasked /proc (docker run --security-opt systempaths=unconfined; podman run "
    "--security-opt unmask=ALL; Kubernetes securityContext.procMount: Unmasked)";

// Creating a user namespace hit a limit: the sysctl, or the nesting depth.
inline std::optional<userns_diagnosis> userns_limit_reached(const userns_facts& f, const std::string& at) {
  const bool creates_user = f.failed_at == userns_step::clone_user || f.failed_at == userns_step::nested_user;
  if (!creates_user || (f.error != ENOSPC && f.error != EUSERS)) return std::nullopt;
  std::string why = f.max_user_namespaces && *f.max_user_namespaces == 0
                        ? "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0"
                        : "the user-namespace limit is reached: user.max_user_namespaces (" +
                              (f.max_user_namespaces ? std::to_string(*f.max_user_namespaces)
                                                     : std::string("unreadable")) +
                              " here) of this or an enclosing user namespace, or 32 levels of nesting (a sandbox "
                              "needs two: its own and the nested one of --disable-userns)";
  return userns_diagnosis{userns_cause::sysctl_max_user_namespaces, at + ": " + why,
                          "raise it where it is set — on the host (or in the user namespace that owns this one): "
                          "`sysctl -w user.max_user_namespaces=15000`, kept in /etc/sysctl.d/"};
}

// The user namespace itself could not be created.
inline userns_diagnosis clone_user_refused(const userns_facts& f, const std::string& at, bool confined) {
  if ((f.error == EINVAL || f.error == ENOSYS) && f.seccomp_mode != 2)
    return {userns_cause::unsupported_kernel, at + ": this kernel has no user namespaces",
            "a kernel built with CONFIG_USER_NS=y"};
  if (f.error == EPERM && f.unprivileged_userns_clone && *f.unprivileged_userns_clone == 0)
    return {userns_cause::sysctl_unprivileged_userns_clone,
            at + ": unprivileged user namespaces are disabled: /proc/sys/kernel/unprivileged_userns_clone is 0",
            "on the host: `sysctl -w kernel.unprivileged_userns_clone=1`, kept in /etc/sysctl.d/"};
  if (f.error == EACCES && (confined || (f.apparmor_restrict && *f.apparmor_restrict == 1)))
    return {userns_cause::apparmor,
            at + ": AppArmor denies creating it (profile " +
                (f.apparmor_label.empty() ? std::string("unconfined") : f.apparmor_label) + ")",
            kUsernsApparmorFix};
  if (f.seccomp_mode == 2)
    return {userns_cause::seccomp,
            at + " while the sysctls allow it, and a seccomp filter is installed (Seccomp: 2 in "
                 "/proc/self/status): the filter denies creating namespaces",
            kUsernsSeccompFix};
  return {userns_cause::no_permission,
          at + " with no sysctl, seccomp filter or AppArmor setting that explains it (a chroot, another "
               "security module such as SELinux, or a container runtime's restriction)",
          "run ccsb outside the chroot, or look for the denial in the security module's audit log "
          "(`dmesg`, `ausearch -m avc`); in a container, the seccomp and AppArmor settings of "
          "docs/containers.md"};
}

// A masked or read-only /proc: the trial got as far as mounting proc (or
// writing its id maps), so nothing before it, AppArmor included, stopped it.
inline std::optional<userns_diagnosis> proc_refused(const userns_facts& f, const std::string& at) {
  if (f.failed_at == userns_step::mount_proc && f.error == EPERM) {
    if (!f.proc_masks.empty()) {
      std::string list;
      for (std::size_t i = 0; i < f.proc_masks.size() && i < 4; ++i) list += (i ? ", " : "") + f.proc_masks[i];
      if (f.proc_masks.size() > 4) list += ", … (" + std::to_string(f.proc_masks.size()) + " in all)";
      return userns_diagnosis{userns_cause::proc_masked,
                              at + ": /proc has mounts over paths below it (" + list +
                                  "), and the kernel lets a user namespace mount proc only where /proc is fully "
                                  "visible (bwrap: \"Can't mount proc on /newroot/proc\")",
                              kUsernsProcFix};
    }
    if (f.proc_read_only)
      return userns_diagnosis{userns_cause::proc_read_only,
                              at + ": /proc is mounted read-only, and a user namespace may not mount a writable "
                                   "proc over it (bwrap: \"Can't mount proc on /newroot/proc\")",
                              "mount /proc read-write; " + kUsernsProcFix};
  }
  const bool writes_proc = f.failed_at == userns_step::setgroups || f.failed_at == userns_step::uid_map ||
                           f.failed_at == userns_step::gid_map;
  if (writes_proc && f.error == EROFS && f.proc_read_only)
    return userns_diagnosis{userns_cause::proc_read_only,
                            at + ": /proc is mounted read-only, so the new namespace's id maps cannot be written "
                                 "(bwrap: \"setting up uid map: Read-only file system\")",
                            "mount /proc read-write; " + kUsernsProcFix};
  return std::nullopt;
}

// AppArmor leaves a namespace it restricts without capabilities, or its
// profile denies the step.
inline std::optional<userns_diagnosis> apparmor_after_clone(const userns_facts& f, const std::string& at,
                                                            bool confined) {
  if (f.failed_at == userns_step::drop_root) return std::nullopt;
  if (f.apparmor_restrict && *f.apparmor_restrict == 1 && !confined)
    return userns_diagnosis{userns_cause::apparmor,
                            at + ": AppArmor restricts unprivileged user namespaces "
                                 "(/proc/sys/kernel/apparmor_restrict_unprivileged_userns is 1 and the process is "
                                 "unconfined), so the new namespace has no capabilities",
                            kUsernsApparmorFix};
  if (confined && f.error == EACCES)
    return userns_diagnosis{userns_cause::apparmor, at + ": the AppArmor profile " + f.apparmor_label + " denies it",
                            kUsernsApparmorFix};
  return std::nullopt;
}

// Inside its own user namespace the trial holds every capability: a call
// that still fails with EPERM or ENOSYS under a seccomp filter is the
// filter's (Docker's profile denies mount, pivot_root, sethostname,
// umount2 and unshare without CAP_SYS_ADMIN).
inline userns_diagnosis later_step_refused(const userns_facts& f, const std::string& at) {
  const bool syscall_step = f.failed_at == userns_step::clone_others || f.failed_at == userns_step::loopback ||
                            f.failed_at == userns_step::mount_private || f.failed_at == userns_step::mount_proc ||
                            f.failed_at == userns_step::set_hostname || f.failed_at == userns_step::pivot_root ||
                            f.failed_at == userns_step::umount_old || f.failed_at == userns_step::nested_user;
  if (syscall_step && f.seccomp_mode == 2 && (f.error == EPERM || f.error == ENOSYS))
    return {userns_cause::seccomp,
            at + " inside the new user namespace, which holds every capability there, and a seccomp filter is "
                 "installed (Seccomp: 2 in /proc/self/status): the filter denies it",
            kUsernsSeccompFix};
  return {userns_cause::no_permission,
          at + " inside the new user namespace, with no sysctl, seccomp filter or AppArmor setting that explains it",
          "look for the denial in the security module's audit log (`dmesg`, `ausearch -m avc`); in a container, "
          "the settings of docs/containers.md"};
}

} // namespace detail

// The cause of a failed trial and its fix (L1, issue 11). The order of the
// checks is the order of the evidence's strength: a setting that forbids the
// step outright, then a filter or profile that is installed, then nothing.
inline userns_diagnosis diagnose_userns(const userns_facts& f) {
  if (!f.tried) return {userns_cause::unknown, "no user-namespace trial ran", ""};
  if (f.failed_at == userns_step::none) return {userns_cause::none, "", ""};
  const std::string at = std::string(to_string(f.failed_at)) + " failed with " + detail::errno_name(f.error);
  const bool confined = !f.apparmor_label.empty() && f.apparmor_label.rfind("unconfined", 0) != 0;
  if (auto d = detail::userns_limit_reached(f, at)) return *d;
  if (f.failed_at == userns_step::clone_user) return detail::clone_user_refused(f, at, confined);
  // The namespace exists; a later step failed.
  if (auto d = detail::proc_refused(f, at)) return *d;
  if (auto d = detail::apparmor_after_clone(f, at, confined)) return *d;
  return detail::later_step_refused(f, at);
}

// "bwrap cannot create its user namespace (cause: seccomp): FOUND; fix: FIX" —
// one line,
// shared by the B4 line and every refusal.
inline std::string describe(const userns_diagnosis& d) {
  std::string out = "bwrap cannot create its user namespace (cause: " + std::string(to_string(d.cause)) + ")";
  if (!d.found.empty()) out += ": " + d.found;
  if (!d.fix.empty()) out += "; fix: " + d.fix;
  return out;
}

// Facts the probe needs. `has_bwrap` and `has_sandbox_exec` say whether the
// tools are there (the proxies need no helper tool: B2, L3); `can_unshare`
// says whether bwrap could really create its namespaces (a bwrap that exists
// but cannot unshare is not available), `userns` what the trial saw, for the
// cause and its fix.
struct probe_facts {
  ccsb::platform platform{platform::other};
  bool has_bwrap{false};
  bool has_sandbox_exec{false};
  bool can_unshare{false};
  std::string unshare_error; // what bwrap printed when it could not unshare
  userns_facts userns;       // L1: the user-namespace trial
  // The caller never steps down to `none` on a host whose bwrap cannot
  // create its namespaces: its own bwrap run would fail anyway, and its user
  // asked for a sandbox (ccsb-run). select_backend then refuses the default
  // with the cause and its fix instead of running on the host.
  bool fail_closed_when_blocked{false};
  int landlock_abi{0}; // X2: the kernel's Landlock ABI (0: none)
};

struct probe_result {
  bool available{false};
  bool requires_install{false};
  std::string note; // what the backend is (shown when ON)
  std::string hint; // why not / what to do (shown when not available)
  std::vector<std::string> missing; // Debian package names
  // X2: the Landlock ABI the native backend's second layer will use (0:
  // none; the sandbox then runs without it and says so). Defence in depth:
  // it never decides availability.
  int landlock_abi{0};
  // L1: why bwrap cannot create its user namespace (none when it can, or
  // when the cause is not the namespace: a missing bwrap, another platform).
  userns_cause userns{userns_cause::none};
  bool fail_closed{false}; // probe_facts::fail_closed_when_blocked, for a blocked host
  friend bool operator==(const probe_result&, const probe_result&) = default;
};

// B2 / B7: the native probe.
inline probe_result probe_native(const probe_facts& f) {
  probe_result r;
  switch (f.platform) {
  case platform::macos:
    if (!f.has_sandbox_exec) {
      r.hint = "/usr/bin/sandbox-exec is missing; Seatbelt cannot be used";
      return r;
    }
    r.available = true;
    r.note = "sandbox-exec (Seatbelt) — namespace isolation, no kernel boundary";
    return r;
  case platform::linux_:
  case platform::wsl2: {
    if (!f.has_bwrap) r.missing.emplace_back("bubblewrap");
    if (!r.missing.empty()) {
      r.requires_install = true;
      r.hint = "apt-get install";
      for (const auto& m : r.missing) r.hint += " " + m;
      return r;
    }
    if (!f.can_unshare) {
      r.fail_closed = f.fail_closed_when_blocked;
      auto d = diagnose_userns(f.userns);
      if (d.cause == userns_cause::none || d.cause == userns_cause::unknown) {
        // The trial passed (or none ran) and bwrap still failed: its own words.
        r.hint = "bwrap cannot create namespaces on this host";
        if (!f.unshare_error.empty()) r.hint += ": " + f.unshare_error;
        return r;
      }
      r.userns = d.cause;
      r.hint = describe(d);
      if (!f.unshare_error.empty()) r.hint += " [bwrap said: " + f.unshare_error + "]";
      return r;
    }
    r.available = true;
    r.note = "bubblewrap — namespace isolation, no kernel boundary";
    r.landlock_abi = f.landlock_abi;
    return r;
  }
  case platform::windows:
  case platform::other:
    r.hint = "Native sandbox is not offered on this platform";
    return r;
  }
  return r;
}

// B6: an explicit backend request from a user (ccsb-run --backend). Unlike
// from_name (which reads a stored badge and never fails), a request that is
// not one of the three names is an error.
inline result<backend> parse_backend_request(std::string_view v, std::string_view field = "--backend") {
  if (v == "native") return backend::native;
  if (v == "none") return backend::none;
  if (v == "microvm") return backend::microvm;
  return make_error(errc::invalid_argument, std::string(field),
                    "expected native, none or microvm, got \"" + std::string(v) + "\"");
}

// B3: --sandbox / CC_SERVER_SANDBOX.
enum class sandbox_switch { on, off };

inline result<sandbox_switch> parse_sandbox_switch(std::string_view v, std::string_view field = "--sandbox") {
  std::string lower;
  for (char c : v) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  if (lower == "on") return sandbox_switch::on;
  if (lower == "off") return sandbox_switch::off;
  return make_error(errc::invalid_argument, std::string(field),
                    "expected \"on\" or \"off\", got \"" + std::string(v) + "\"");
}

// B4: exactly one start-up line.
inline std::string startup_line(sandbox_switch sw, const probe_result& native) {
  if (sw == sandbox_switch::off) return "agent sandbox DISABLED by --sandbox off";
  if (native.available) return "agent sandbox ON (" + native.note + ")";
  return "no OS-native agent sandbox on this host (" + native.hint + ")";
}

// The microVM runtime probe (X4). No runtime ships with ccsb yet, so callers
// pass {false, "..."} unless they have one.
struct microvm_probe {
  bool available{false};
  std::string note;
};

// Who asks for a backend: agent dispatch (B5) or a server-hosted terminal
// (T1: defaults to none, native only on explicit request).
enum class run_context { dispatch, terminal };

struct backend_selection {
  backend chosen{backend::none};      // the badge: what the session really gets (B6)
  std::vector<std::string> log;       // lines to log (step-downs, reasons)
  friend bool operator==(const backend_selection&, const backend_selection&) = default;
};

// B5, B6, B8, T1, T3. `requested` is an explicit request (absent = default);
// `prefer_microvm` marks a context whose unspecified default is microvm. A
// probe that fails closed (probe_result::fail_closed: bwrap is there but its
// namespaces are blocked) turns the dispatch default's step-down to `none`
// into a refusal that names the cause and its fix.
inline result<backend_selection> select_backend(run_context ctx, std::optional<backend> requested,
                                                sandbox_switch sw, const probe_result& native,
                                                const microvm_probe& vm, bool prefer_microvm = false) {
  backend_selection s;
  if (requested) {
    switch (*requested) {
    case backend::none:
      s.chosen = backend::none;
      return s;
    case backend::microvm:
      if (!vm.available)
        return make_error(errc::backend_unavailable, "backend",
                          "microvm was requested but no microVM runtime is available" +
                              (vm.note.empty() ? std::string() : " (" + vm.note + ")") +
                              "; the run does not start (microvm is never replaced silently)");
      s.chosen = backend::microvm;
      return s;
    case backend::native:
      if (sw == sandbox_switch::off)
        return make_error(errc::backend_unavailable, "backend",
                          "native was requested but the sandbox is disabled by --sandbox off");
      if (!native.available)
        return make_error(errc::backend_unavailable, "backend",
                          "native was requested but this host cannot provide it (" + native.hint + ")");
      s.chosen = backend::native;
      return s;
    }
  }
  // Unspecified: the context's default.
  if (sw == sandbox_switch::off) {
    s.chosen = backend::none;
    return s;
  }
  if (prefer_microvm) {
    if (vm.available) {
      s.chosen = backend::microvm;
      return s;
    }
    s.log.push_back("microvm runtime unavailable" + (vm.note.empty() ? std::string() : " (" + vm.note + ")") +
                    "; default steps down to " + std::string(native.available ? "native" : "none"));
  }
  if (ctx == run_context::terminal && !prefer_microvm) {
    s.chosen = backend::none; // T1
    return s;
  }
  if (!native.available && native.fail_closed)
    return make_error(errc::backend_unavailable, "backend",
                      "the native sandbox cannot start on this host (" + native.hint +
                          "); the run does not start (ask for backend none to run on the host without a sandbox)");
  s.chosen = native.available ? backend::native : backend::none;
  return s;
}

} // namespace ccsb
