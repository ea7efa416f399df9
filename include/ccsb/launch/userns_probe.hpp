// ccsb/launch/userns_probe.hpp — the user-namespace trial (L1, B2, issue 11;
// launcher only; does I/O).
//
// ccsb always creates a user namespace, and unprivileged containers and
// hardened hosts stop that in different places. run_userns_trial() forks a
// child that does what bwrap does, in bwrap's order, and reports the first
// step that failed with its errno:
//   1. a root launcher's child becomes nobody (65534) first: bwrap runs as an
//      unprivileged uid (L1, ccsb/launch/identity.hpp), so the trial must meet
//      the rules an unprivileged process meets;
//   2. clone(CLONE_NEWUSER) (bwrap creates the sandbox's namespaces with
//      clone and only the nested one of step 7 with unshare: a seccomp
//      profile may allow one call and deny the other);
//   3. in it, "deny" to /proc/self/setgroups, then its uid_map and gid_map;
//   4. clone pid 1 of new mount, pid, network, ipc and uts namespaces;
//   5. there, bring up lo (bwrap configures loopback in every new network
//      namespace), make the mounts private and mount a new proc (--proc);
//   6. user.max_user_namespaces = 1 there (--disable-userns), the hostname
//      (--hostname), a tmpfs as the new root with bwrap's pivot_root(".", ".")
//      and umount2 of the old one;
//   7. unshare into a nested user namespace, which can then create none
//      (--disable-userns; L1: no further user namespaces inside).
// userns_host_settings() reads the settings that explain a failure (the
// sysctls, the seccomp mode, the AppArmor label and restriction, how /proc is
// mounted); diagnose_userns() in ccsb/backend.hpp names the cause and its fix.
// The children touch only their own namespaces (the tmpfs and the new proc
// live in the trial's private mount namespace) and exit; the trial costs
// three forks and the namespaces' creation (about 2 ms).
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/broker/kernel_probe.hpp"

#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb::launch {

namespace userns_detail {

inline std::string read_small(const char* path, std::size_t max = 1024 * 1024) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while (out.size() < max && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

inline std::optional<long> read_long(const char* path) {
  std::string t = read_small(path, 64);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str()) return std::nullopt;
  return v;
}

// Only async-signal-safe calls from here to _exit (the launcher may have threads).
inline bool write_once(const char* path, const char* text, std::size_t len) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, text, len);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return n == static_cast<ssize_t>(len);
}

// clone with no new stack (fork semantics), as bwrap's raw_clone: a child
// of a clone() call continues from here. Only raw system calls and the
// wrappers above follow in the child (no glibc fork handlers ran).
inline pid_t raw_clone(unsigned long flags) {
#if defined(__s390__) || defined(__CRIS__)
  return static_cast<pid_t>(::syscall(SYS_clone, nullptr, flags));
#else
  return static_cast<pid_t>(::syscall(SYS_clone, flags, nullptr));
#endif
}

inline void reap(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

[[noreturn]] inline void report(int fd, userns_step step, int err) {
  int msg[2] = {static_cast<int>(step), err};
  ssize_t n = ::write(fd, msg, sizeof msg);
  ::_exit(n == static_cast<ssize_t>(sizeof msg) ? 0 : 1);
}

} // namespace userns_detail

// The settings diagnose_userns() weighs; the trial's outcome is left empty.
inline userns_facts userns_host_settings() {
  using userns_detail::read_long;
  using userns_detail::read_small;
  userns_facts f;
  f.max_user_namespaces = read_long("/proc/sys/user/max_user_namespaces");
  if (auto v = read_long("/proc/sys/kernel/unprivileged_userns_clone"))
    f.unprivileged_userns_clone = static_cast<int>(*v);
  if (auto v = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"))
    f.apparmor_restrict = static_cast<int>(*v);
  f.apparmor_label = read_small("/proc/self/attr/apparmor/current", 4096);
  while (!f.apparmor_label.empty() && (f.apparmor_label.back() == '\n' || f.apparmor_label.back() == '\0'))
    f.apparmor_label.pop_back();
  std::string status = read_small("/proc/self/status");
  if (auto at = status.find("\nSeccomp:"); at != std::string::npos)
    f.seccomp_mode = std::atoi(status.c_str() + at + 9);
  struct statvfs sv{};
  f.proc_read_only = ::statvfs("/proc", &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
  f.proc_masks = proc_masks_of_mountinfo(read_small("/proc/self/mountinfo", 4 * 1024 * 1024));
  return f;
}

namespace userns_detail {

// What the trial's children need, formatted before fork.
struct trial_inputs {
  bool root;
  uid_t uid;
  gid_t gid;
  std::string uid_map, gid_map;
  ifreq lo{};
};

// Steps 5-7, as pid 1 of the new namespaces.
[[noreturn]] inline void trial_init(int out, ifreq lo) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0 || ::ioctl(s, SIOCGIFFLAGS, &lo) != 0) report(out, userns_step::loopback, errno);
  lo.ifr_flags = static_cast<short>(lo.ifr_flags | IFF_UP);
  if (::ioctl(s, SIOCSIFFLAGS, &lo) != 0) report(out, userns_step::loopback, errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) report(out, userns_step::mount_private, errno);
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    report(out, userns_step::mount_proc, errno);
  if (!write_once("/proc/sys/user/max_user_namespaces", "1", 1)) report(out, userns_step::limit_userns, errno);
  if (::sethostname("ccsb", 4) != 0) report(out, userns_step::set_hostname, errno);
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") != 0 || ::chdir("/tmp") != 0 ||
      ::syscall(SYS_pivot_root, ".", ".") != 0)
    report(out, userns_step::pivot_root, errno);
  if (::umount2(".", MNT_DETACH) != 0) report(out, userns_step::umount_old, errno);
  if (::unshare(CLONE_NEWUSER) != 0) report(out, userns_step::nested_user, errno);
  report(out, userns_step::none, 0);
}

// Steps 3-4, in the new user namespace.
[[noreturn]] inline void trial_user(int out, const trial_inputs& in) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!write_once("/proc/self/setgroups", "deny", 4)) report(out, userns_step::setgroups, errno);
  if (!write_once("/proc/self/uid_map", in.uid_map.data(), in.uid_map.size())) report(out, userns_step::uid_map, errno);
  if (!write_once("/proc/self/gid_map", in.gid_map.data(), in.gid_map.size())) report(out, userns_step::gid_map, errno);
  // pid 1 of the new pid namespace, in every other new namespace.
  pid_t init = raw_clone(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD);
  if (init < 0) report(out, userns_step::clone_others, errno);
  if (init == 0) trial_init(out, in.lo);
  reap(init);
  ::_exit(0);
}

// Steps 1-2, in the forked child.
[[noreturn]] inline void trial_child(int out, const trial_inputs& in) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (in.root) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(in.gid, in.gid, in.gid) != 0 ||
        ::setresuid(in.uid, in.uid, in.uid) != 0)
      report(out, userns_step::drop_root, errno);
    // A credential change clears both; /proc/self/*_map must stay the
    // process's own to write.
    ::prctl(PR_SET_DUMPABLE, 1);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  // clone, as bwrap creates the sandbox's namespaces (step 2 above).
  pid_t user = raw_clone(CLONE_NEWUSER | SIGCHLD);
  if (user < 0) report(out, userns_step::clone_user, errno);
  if (user == 0) trial_user(out, in);
  reap(user);
  ::_exit(0);
}

// The child's report (step, errno), read with a deadline; the child is
// killed when none came, and reaped. nullopt: no valid report.
inline std::optional<std::pair<userns_step, int>> read_report(int fd, pid_t pid) {
  int msg[2] = {0, 0};
  std::size_t got = 0;
  pollfd pf{fd, POLLIN, 0};
  while (got < sizeof msg && ::poll(&pf, 1, 5000) > 0) {
    ssize_t n = ::read(fd, reinterpret_cast<char*>(msg) + got, sizeof msg - got);
    if (n > 0) got += static_cast<std::size_t>(n);
    else if (n == 0 || errno != EINTR) break;
  }
  if (got < sizeof msg) ::kill(pid, SIGKILL);
  reap(pid);
  if (got < sizeof msg || msg[0] < static_cast<int>(userns_step::none) ||
      msg[0] > static_cast<int>(userns_step::nested_user))
    return std::nullopt;
  return std::pair{static_cast<userns_step>(msg[0]), msg[1]};
}

} // namespace userns_detail

// The trial, on top of the host settings `f` (userns_host_settings()).
// `tried` stays false when the child could not be started or died without a
// report (the caller then asks bwrap itself).
inline userns_facts run_userns_trial_with(userns_facts f) {
  userns_detail::trial_inputs in;
  in.root = ::geteuid() == 0;
  in.uid = in.root ? 65534 : ::geteuid();
  in.gid = in.root ? 65534 : ::getegid();
  in.uid_map = std::to_string(in.uid) + " " + std::to_string(in.uid) + " 1\n";
  in.gid_map = std::to_string(in.gid) + " " + std::to_string(in.gid) + " 1\n";
  std::strncpy(in.lo.ifr_name, "lo", IFNAMSIZ - 1);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return f;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return f;
  }
  if (pid == 0) {
    ::close(p[0]);
    userns_detail::trial_child(p[1], in);
  }
  ::close(p[1]);
  auto outcome = userns_detail::read_report(p[0], pid);
  ::close(p[0]);
  if (!outcome) return f;
  f.tried = true;
  f.failed_at = outcome->first;
  f.error = outcome->second;
  return f;
}

// The trial, with the host settings.
inline userns_facts run_userns_trial() { return run_userns_trial_with(userns_host_settings()); }

// A remembered success (ccsb-run, once per launch). The trial's outcome
// stays the same from one launch to the next while nothing it depends on
// changes, and it costs ~2 ms (three forks, five new namespaces) of every
// launch. So run_userns_trial_cached() remembers a success, and only a
// success, in a file of the launcher's private run-dir base (run_dir.hpp:
// owned by this uid, writable by nobody else, out of every sandbox's reach),
// under a key of everything the outcome depends on that a launcher can read:
//   the boot id and the kernel (release, version); euid, egid; this
//   process's namespaces (user, mnt, pid, net, uts, ipc, cgroup: device and
//   inode); NoNewPrivs, Seccomp, Seccomp_filters, CapEff, CapPrm and CapBnd
//   (/proc/self/status); and every setting userns_host_settings() reads
//   (the sysctls, the AppArmor label and restriction, /proc read-only and
//   the mounts over it): each wall diagnose_userns() names changes one of
//   them (tests/escape/test_containers.cpp).
// Any difference runs the trial again; a failure is never remembered, so a
// blocked host gets its diagnosis on every launch. While a seccomp filter
// or an AppArmor profile confines the launcher nothing is remembered and
// the trial runs every time: the key cannot see a filter's program or a
// profile's rules (two filters of one count differ in what they deny; the
// container recipe test drops one call at a time). What else the key cannot
// see (a BPF LSM, a reloaded policy) meets bwrap itself, which has the last
// word: the start fails and the run is refused
// (exit 125, fail closed), and the driver forgets the remembered trial
// (forget_userns_trial) so the next launch diagnoses again. The file is
// read only when it is a regular file of this euid that nobody else may
// write; it is replaced by rename, never written in place.
inline constexpr const char* kUsernsTrialFile = "userns-trial";
inline constexpr std::string_view kUsernsTrialMagic = "ccsb userns trial v1: succeeded\n";

inline std::string userns_trial_key(const userns_facts& settings) {
  using userns_detail::read_small;
  std::string key;
  auto field = [&](std::string_view name, const std::string& value) {
    key += name;
    key += ' ';
    key += std::to_string(value.size());
    key += ':';
    key += value;
    key += '\n';
  };
  field("boot", read_small("/proc/sys/kernel/random/boot_id", 256));
  utsname u{};
  if (::uname(&u) == 0) field("kernel", std::string(u.release) + " " + u.version);
  field("ids", std::to_string(::geteuid()) + ":" + std::to_string(::getegid()));
  for (const char* ns : {"user", "mnt", "pid", "net", "uts", "ipc", "cgroup"}) {
    struct stat st{};
    const std::string p = std::string("/proc/self/ns/") + ns;
    field(ns, ::stat(p.c_str(), &st) == 0 ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) : "-");
  }
  const std::string status = read_small("/proc/self/status");
  for (const char* name : {"NoNewPrivs:", "Seccomp:", "Seccomp_filters:", "CapEff:", "CapPrm:", "CapBnd:"}) {
    std::string v = "-";
    if (auto at = status.find(std::string("\n") + name); at != std::string::npos) {
      const auto from = at + 1 + std::strlen(name);
      v = status.substr(from, status.find('\n', from) - from);
    }
    field(name, v);
  }
  auto opt = [](const auto& o) { return o ? std::to_string(*o) : std::string("-"); };
  field("max_user_namespaces", opt(settings.max_user_namespaces));
  field("unprivileged_userns_clone", opt(settings.unprivileged_userns_clone));
  field("apparmor_restrict", opt(settings.apparmor_restrict));
  field("apparmor_label", settings.apparmor_label);
  field("seccomp_mode", std::to_string(settings.seccomp_mode));
  field("proc_read_only", settings.proc_read_only ? "1" : "0");
  std::string masks;
  for (const auto& m : settings.proc_masks) masks += std::to_string(m.size()) + ":" + m + ";";
  field("proc_masks", masks);
  return key;
}

namespace userns_detail {

// Whether `cache` holds exactly `want`: read only when it is a regular file
// of this euid that nobody else may write, and of want's size.
inline bool remembered(const std::string& cache, const std::string& want) {
  int fd = ::open(cache.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 022) == 0 &&
      st.st_size == static_cast<off_t>(want.size())) {
    text.resize(want.size());
    std::size_t got = 0;
    ssize_t n;
    while (got < text.size() && ((n = ::read(fd, text.data() + got, text.size() - got)) > 0 || (n < 0 && errno == EINTR)))
      if (n > 0) got += static_cast<std::size_t>(n);
    text.resize(got);
  }
  ::close(fd);
  return text == want;
}

// `want` into `cache`: a private temporary file, renamed over the old one.
inline void remember(const std::string& cache, const std::string& want) {
  const std::string tmp = cache + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) // a crashed launcher's, with this pid
    fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool good = ::write(fd, want.data(), want.size()) == static_cast<ssize_t>(want.size());
  good = ::close(fd) == 0 && good;
  if (!good || ::rename(tmp.c_str(), cache.c_str()) != 0) ::unlink(tmp.c_str());
}

// Nothing is remembered while a seccomp filter or an AppArmor profile
// confines the launcher (see above).
inline bool may_remember(const userns_facts& settings) {
  return settings.seccomp_mode == 0 && (settings.apparmor_label.empty() || settings.apparmor_label == "unconfined");
}

} // namespace userns_detail

// `cache`: the file in the run-dir base (kUsernsTrialFile).
inline userns_facts run_userns_trial_cached(const std::string& cache) {
  userns_facts settings = userns_host_settings();
  if (!userns_detail::may_remember(settings)) return run_userns_trial_with(std::move(settings));
  const std::string want = std::string(kUsernsTrialMagic) + userns_trial_key(settings);
  if (userns_detail::remembered(cache, want)) {
    settings.tried = true;
    settings.failed_at = userns_step::none;
    settings.error = 0;
    return settings;
  }
  userns_facts f = run_userns_trial_with(settings);
  if (f.tried && f.failed_at == userns_step::none) userns_detail::remember(cache, want);
  else ::unlink(cache.c_str());
  return f;
}

// The X1 broker's kernel probe (ccsb/broker/kernel_probe.hpp: a throw-away
// child, a notification listener taken with pidfd_getfd, a descriptor
// injected with ADDFD_FLAG_SEND; about 0.4 ms of every dispatch launch) is
// remembered the same way, in its own file (kBrokerProbeFile): only a
// success, under the trial's key plus Yama's ptrace_scope (pidfd_getfd is a
// ptrace-mode access check), never while the launcher is confined, and
// forgotten after a start that failed. A remembered success the kernel no
// longer honours fails closed: ccsb-init installs the broker's filter before
// every command, and a command whose filter cannot be installed never runs.
inline constexpr const char* kBrokerProbeFile = "broker-kernel";
inline constexpr std::string_view kBrokerProbeMagic = "ccsb broker kernel probe v1: succeeded\n";

inline broker::kernel_support creation_rules_supported_cached(const std::string& cache) {
  const userns_facts settings = userns_host_settings();
  if (!userns_detail::may_remember(settings)) return broker::creation_rules_supported();
  const std::string want = std::string(kBrokerProbeMagic) + userns_trial_key(settings) + "ptrace_scope " +
                           userns_detail::read_small("/proc/sys/kernel/yama/ptrace_scope", 64);
  if (userns_detail::remembered(cache, want)) return {true, {}};
  broker::kernel_support k = broker::creation_rules_supported();
  if (k.ok) userns_detail::remember(cache, want);
  else ::unlink(cache.c_str());
  return k;
}

// After a start that failed: the next launch runs the trial (or the probe) again.
inline void forget_userns_trial(const std::string& cache) { ::unlink(cache.c_str()); }

} // namespace ccsb::launch
