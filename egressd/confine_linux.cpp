// egressd/confine_linux.cpp — egressd's confinement on Linux (X3): privileges,
// Landlock and the seccomp allowlist. What each layer does and why:
// confine.hpp; the allowed system calls: seccomp_allowlist.hpp; what both
// platforms share (the target user, the report, --test-attack): confine.cpp.
// Built only on Linux (egressd/CMakeLists.txt); macOS: confine_macos.cpp.
#include "confine.hpp"

#include "seccomp_allowlist.hpp"

#include <seccomp.h>

#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace egressd {

namespace {

using ccsb::errc;
using ccsb::make_error;

// ---------------------------------------------------------------------------
// Privileges.

ccsb::result<void> single_threaded() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) {
      long n = std::strtol(line.c_str() + 8, nullptr, 10);
      if (n == 1) return ccsb::ok();
      // Landlock and the uid switch apply to the calling thread only.
      return make_error(errc::io_error, "confine",
                        "egressd has " + std::to_string(n) + " threads; confinement needs exactly one");
    }
  return make_error(errc::io_error, "confine", "cannot read Threads: from /proc/self/status");
}

struct cap_sets {
  __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3]{};
};

ccsb::result<cap_sets> capget_self() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  cap_sets s;
  if (::syscall(SYS_capget, &h, s.d) != 0) return sys_error("confine.capabilities", "capget");
  return s;
}

ccsb::result<void> drop_privileges(const options& o, confine_report& r) {
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0)
    return sys_error("confine.user", "getresuid");
  const bool root = ru == 0 || eu == 0 || su == 0;
  auto target = target_user(o, root, eu, eg);
  if (!target) return std::move(target).err();
  if (*target) {
    const uid_t uid = (*target)->first;
    const gid_t gid = (*target)->second;
    // The kernel clears the parent-death signal when the uid changes; the
    // launcher relies on it (egressd must die with its session).
    int pdeath = 0;
    if (::prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0) != 0) return sys_error("confine.user", "PR_GET_PDEATHSIG");
    const pid_t parent = ::getppid();
    auto unmapped = [](int e) {
      return e == EINVAL ? std::string(" (the id is not mapped in this user namespace: give --user)") : std::string();
    };
    if (::setgroups(0, nullptr) != 0) return sys_error("confine.user", "setgroups(0)");
    if (::setresgid(gid, gid, gid) != 0) {
      int e = errno;
      return sys_error("confine.user", "setresgid(" + std::to_string(gid) + ")" + unmapped(e), e);
    }
    // The bounding set, while CAP_SETPCAP is still ours: nothing egressd
    // might exec (it cannot: Landlock and seccomp) could regain a capability.
    for (unsigned long cap = 0;; ++cap) {
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
      if (errno == EINVAL) break; // past the last capability this kernel knows
      return sys_error("confine.capabilities", "PR_CAPBSET_DROP " + std::to_string(cap));
    }
    if (::setresuid(uid, uid, uid) != 0) {
      int e = errno;
      return sys_error("confine.user", "setresuid(" + std::to_string(uid) + ")" + unmapped(e), e);
    }
    if (pdeath != 0) {
      if (::prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0) != 0) return sys_error("confine.user", "PR_SET_PDEATHSIG");
      if (::getppid() != parent)
        return make_error(errc::io_error, "confine.user", "the process that started egressd exited during start-up");
    }
    r.switched_user = true;
  }
  // Not dumpable (the kernel does this on the uid switch when
  // fs.suid_dumpable is 0; done here whatever the sysctl and whoever started
  // egressd): a process of the same uid — a sandboxed command may run as the
  // same unprivileged user — can neither ptrace egressd nor read its /proc
  // entries, and no core file holds session traffic.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return sys_error("confine.user", "PR_SET_DUMPABLE 0");
  // Whoever started it: no ambient, effective, permitted or inheritable
  // capability is left.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return sys_error("confine.capabilities", "PR_CAP_AMBIENT_CLEAR_ALL");
  {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    cap_sets none;
    if (::syscall(SYS_capset, &h, none.d) != 0) return sys_error("confine.capabilities", "capset(none)");
  }
  // Check what the kernel says, not what was asked for.
  auto caps = capget_self();
  if (!caps) return std::move(caps).err();
  for (const auto& d : caps->d)
    if (d.effective || d.permitted || d.inheritable)
      return make_error(errc::io_error, "confine.capabilities", "capabilities remain after capset(none)");
  if (r.switched_user) {
    if (::getresuid(&ru, &eu, &su) != 0 || ru == 0 || eu == 0 || su == 0 || ::getresgid(&rg, &eg, &sg) != 0 ||
        rg == 0 || eg == 0 || sg == 0)
      return make_error(errc::io_error, "confine.user", "still uid or gid 0 after the switch");
    if (::setuid(0) == 0)
      return make_error(errc::io_error, "confine.user", "setuid(0) succeeded after the switch: privileges not dropped");
  }
  r.capabilities_dropped = true;
  return ccsb::ok();
}

// ---------------------------------------------------------------------------
// Landlock (raw system calls; Debian 12's headers describe ABI 2 and the
// later values are fixed by the kernel's UAPI, include/uapi/linux/landlock.h).

constexpr std::uint64_t kFsAbi1 = (1ULL << 13) - 1; // EXECUTE .. MAKE_SYM
constexpr std::uint64_t kFsRefer = 1ULL << 13, kFsTruncate = 1ULL << 14, kFsIoctlDev = 1ULL << 15;
constexpr std::uint64_t kNetBindTcp = 1ULL << 0;
constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0, kScopeSignal = 1ULL << 1;
constexpr unsigned kCreateRulesetVersion = 1U << 0;

struct ruleset_attr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_restrict_self 446
#endif

ccsb::result<void> apply_landlock(confine_report& r) {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  if (abi < 0) {
    if (errno == ENOSYS) {
      r.landlock = "unavailable: the kernel has no Landlock";
      return ccsb::ok();
    }
    if (errno == EOPNOTSUPP) {
      r.landlock = "unavailable: Landlock is disabled at boot";
      return ccsb::ok();
    }
    return sys_error("confine.landlock", "landlock_create_ruleset(version)");
  }
  // Every file-system right of this ABI handled, none granted: no rule.
  ruleset_attr attr{kFsAbi1, 0, 0};
  if (abi >= 2) attr.handled_access_fs |= kFsRefer;
  if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
  if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
  if (abi >= 4) attr.handled_access_net = kNetBindTcp; // connect not handled: allowed
  if (abi >= 6) attr.scoped = kScopeAbstractUnix | kScopeSignal;
  const std::size_t size =
      abi >= 6 ? sizeof attr : abi >= 4 ? offsetof(ruleset_attr, scoped) : sizeof attr.handled_access_fs;
  int fd = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (fd < 0) return sys_error("confine.landlock", "landlock_create_ruleset");
  long rc = ::syscall(SYS_landlock_restrict_self, fd, 0);
  int e = errno;
  ::close(fd);
  if (rc != 0) return sys_error("confine.landlock", "landlock_restrict_self", e);
  r.landlock_abi = static_cast<int>(abi);
  r.landlock = "applied";
  r.landlock_tcp_bind = abi >= 4;
  r.landlock_scoped = abi >= 6;
  return ccsb::ok();
}

// ---------------------------------------------------------------------------
// seccomp: SECCOMP_RET_TRAP for everything not in the table; the SIGSYS
// handler turns the call into -EPERM and logs each system call number once.

constexpr int kSysSeccomp = 1; // si_code of a seccomp trap (asm-generic/siginfo.h SYS_SECCOMP)
constexpr int kNames = 512;              // past every native number in use (x86_64, arm64: < 470)
const char* volatile g_names[kNames];    // filled by load_syscall_names() after `ready`
volatile sig_atomic_t g_logged[kNames];  // SIGSYS is blocked while the handler runs
volatile sig_atomic_t g_logged_other = 0; // foreign ABI or a number past the table
std::uint32_t g_native_arch = 0;

void put(char*& p, char* end, const char* s) {
  while (*s && p < end) *p++ = *s++;
}
void put_number(char*& p, char* end, unsigned long v, int base = 10) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % static_cast<unsigned>(base)];
    v /= static_cast<unsigned>(base);
  } while (v && n < 24);
  while (n > 0 && p < end) *p++ = digits[--n];
}

// Async-signal-safe: only write(2), which the filter allows.
void on_sigsys(int, siginfo_t* si, void* context) {
  if (si->si_code != kSysSeccomp) return; // a SIGSYS someone sent: nothing to answer
  const int saved = errno;
  auto* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
  uc->uc_mcontext.regs[0] = static_cast<unsigned long long>(-EPERM);
#endif
  const int nr = si->si_syscall;
  const bool native = si->si_arch == g_native_arch && nr >= 0 && nr < kNames;
  volatile sig_atomic_t& logged = native ? g_logged[nr] : g_logged_other;
  if (!logged) {
    logged = 1;
    char line[256];
    char* p = line;
    char* end = line + sizeof line - 1;
    put(p, end, "egressd: seccomp: denied system call ");
    const char* name = native ? g_names[nr] : nullptr;
    if (name) {
      put(p, end, name);
      put(p, end, " (");
      put_number(p, end, static_cast<unsigned long>(nr));
      put(p, end, ")");
    } else if (native) {
      put_number(p, end, static_cast<unsigned long>(nr));
    } else {
      put_number(p, end, static_cast<unsigned long>(static_cast<unsigned>(nr)));
      put(p, end, " of architecture 0x");
      put_number(p, end, si->si_arch, 16);
    }
    put(p, end, native ? ": failed with EPERM; later calls of it are not logged\n"
                       : ": failed with EPERM; later such calls are not logged\n");
    ssize_t w = ::write(2, line, static_cast<std::size_t>(p - line));
    (void)w;
  }
  errno = saved;
}

ccsb::result<void> apply_seccomp(confine_report& r) {
#if !defined(__x86_64__) && !defined(__aarch64__)
  r.seccomp = "unavailable: no SIGSYS return-value support for this architecture in egressd";
  return ccsb::ok();
#else
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
    r.seccomp = "unavailable: the kernel has no seccomp";
    return ccsb::ok();
  }
  g_native_arch = seccomp_arch_native();

  struct sigaction sa{};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  if (::sigaction(SIGSYS, &sa, nullptr) != 0) return sys_error("confine.seccomp", "sigaction(SIGSYS)");
  // A trap while SIGSYS is blocked would kill: it never is.
  sigset_t sys;
  sigemptyset(&sys);
  sigaddset(&sys, SIGSYS);
  if (::sigprocmask(SIG_UNBLOCK, &sys, nullptr) != 0) return sys_error("confine.seccomp", "sigprocmask");

  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (!ctx) return make_error(errc::io_error, "confine.seccomp", "seccomp_init failed");
  struct releaser {
    scmp_filter_ctx c;
    ~releaser() { seccomp_release(c); }
  } guard{ctx};
  auto lib_error = [](const std::string& what, int rc) { return sys_error("confine.seccomp", what, -rc); };
  // A foreign ABI (i386 int 0x80, x32 numbers) traps too: EPERM, logged.
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_TRAP); rc != 0)
    return lib_error("SCMP_FLTATR_ACT_BADARCH", rc);
  // A binary tree: every relay splice runs the filter. Optional (older
  // libseccomp builds a linear list, which is only slower).
  (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  const std::uint64_t self = static_cast<std::uint64_t>(::getpid());
  std::size_t count = 0;
  for (const auto& e : seccomp_table::allowed()) {
    const std::string name(e.name);
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR || nr < 0) { // unknown, or not a real call on this architecture
      if (!e.required) continue;
      return make_error(errc::io_error, "confine.seccomp." + name, "no such system call on this architecture");
    }
    int rc = 0;
    using seccomp_table::match;
    switch (e.how) {
    case match::any: rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0); break;
    case match::one_of32:
      for (std::size_t i = 0; i < e.count && rc == 0; ++i)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(e.arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, e.values[i]));
      break;
    case match::bits_clear:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(e.arg, SCMP_CMP_MASKED_EQ, e.values[0], 0));
      break;
    case match::bits_set:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(e.arg, SCMP_CMP_MASKED_EQ, e.values[0], e.values[0]));
      break;
    case match::self_pid:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(e.arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, self));
      break;
    }
    if (rc != 0) return sys_error("confine.seccomp." + name, "seccomp_rule_add", -rc);
    ++count;
  }
  if (int rc = seccomp_load(ctx); rc != 0) return lib_error("seccomp_load", rc);
  r.seccomp = "allowlist";
  r.seccomp_syscalls = count;
  return ccsb::ok();
#endif
}

void load_syscall_names() {
  // libseccomp's number -> name lookup is a linear scan per number; this is
  // user-space work only (strdup), done after `ready` to keep start-up short.
  for (int nr = 0; nr < kNames; ++nr)
    if (!g_names[nr]) g_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
}

} // namespace

ccsb::result<confine_report> confine(const options& o) {
  confine_report r;
  r.requested = o.confine_layers;
  r.how = o.confine_how;
  r.landlock = (o.confine_layers & kConfineLandlock) ? "" : "off";
  r.seccomp = (o.confine_layers & kConfineSeccomp) ? "" : "off";
  if (o.confine_layers != 0) {
    if (auto t = single_threaded(); !t) return std::move(t).err();
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return sys_error("confine", "PR_SET_NO_NEW_PRIVS");
    r.no_new_privs = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    if (!r.no_new_privs) return make_error(errc::io_error, "confine", "PR_SET_NO_NEW_PRIVS did not stick");
    if (o.confine_layers & kConfinePrivileges)
      if (auto p = drop_privileges(o, r); !p) return std::move(p).err();
  }
  // Before seccomp: neither call is on its allowlist.
  r.uid = static_cast<std::uint32_t>(::geteuid());
  r.gid = static_cast<std::uint32_t>(::getegid());
  if (o.confine_layers & kConfineLandlock)
    if (auto l = apply_landlock(r); !l) return std::move(l).err();
  if (o.confine_layers & kConfineSeccomp)
    if (auto s = apply_seccomp(r); !s) return std::move(s).err();
  if (r.seccomp == "allowlist") r.after_ready = load_syscall_names;
  return r;
}

} // namespace egressd
