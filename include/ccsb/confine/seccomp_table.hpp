// ccsb/confine/seccomp_table.hpp — the baseline seccomp table of every native
// sandbox (L6). Pure: no I/O and no libseccomp, so the table can be read,
// documented and tested on its own; ccsb/sys/seccomp.hpp builds the BPF
// program from it and bubblewrap applies that program (`--seccomp FD`) right
// before it execs ccsb-init, so ccsb-init and the command run under it (and
// bwrap's own PID-1 init, which applies it too).
//
// Shape of the filter:
//   * Default action: allow. This is a deny list of kernel surfaces a command
//     has no business with, on top of the namespaces and the dropped
//     capabilities (L1); most entries are also refused by the kernel for lack
//     of a capability, and the filter keeps them shut if a capability ever
//     slips through and shrinks the kernel code a command can reach at all.
//   * Denied calls fail with an errno, never a kill: EPERM for most; ENOSYS
//     where callers must fall back to an older interface (clone3 -> clone,
//     the new mount API -> mount(2), io_uring -> epoll/threads), which is what
//     a kernel without the interface answers; EAFNOSUPPORT for the one denied
//     socket family, which is what a kernel without that family answers.
//   * Arguments are matched the way the kernel reads them: a flag word the
//     kernel takes as `unsigned long` (clone) is tested bit by bit; an `int`
//     or `unsigned int` argument (ioctl's request, personality, the socket
//     family) is compared on its low 32 bits only, so garbage in the upper
//     half of the register cannot step around a rule.
//   * Foreign syscall ABIs fail (kForeignAbiErrno): only the native
//     architecture is in the filter, and everything else — the i386 ABI
//     through `int 0x80` and the x32 numbers (bit 30 set) on x86_64, AArch32
//     on arm64 — takes the "bad architecture" action, EPERM. A 32-bit program
//     therefore cannot run in the sandbox at all (its first call fails).
//   * Entries with required == false name calls that exist only on some
//     architectures (x86-only calls, the legacy umount); the filter builder
//     skips them where libseccomp has no number for them on the native
//     architecture. A required entry that libseccomp does not know is an
//     error: the run is refused rather than run without that rule.
//
// Deliberately not denied (kSeccompNotDenied lists them with the reason):
// ptrace and its relatives (gdb and strace inside the sandbox are legitimate;
// its PID namespace holds only the session's own processes), the NUMA memory
// policy calls, chroot, and the socket families the network namespace already
// confines.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb::confine {

// Linux ABI values the table matches on, spelled out so the table stays free
// of system headers. ccsb/sys/seccomp.hpp static_asserts each against the
// build machine's <sched.h>, <sys/ioctl.h>, <sys/personality.h> and
// <sys/socket.h>, so an architecture where one differs fails to compile
// instead of filtering the wrong number.
namespace abi {
inline constexpr std::uint64_t kCloneNewNs = 0x00020000;
inline constexpr std::uint64_t kCloneNewCgroup = 0x02000000;
inline constexpr std::uint64_t kCloneNewUts = 0x04000000;
inline constexpr std::uint64_t kCloneNewIpc = 0x08000000;
inline constexpr std::uint64_t kCloneNewUser = 0x10000000;
inline constexpr std::uint64_t kCloneNewPid = 0x20000000;
inline constexpr std::uint64_t kCloneNewNet = 0x40000000;
inline constexpr std::uint32_t kCloneFiles = 0x00000400;
// Every namespace flag clone(2) accepts. CLONE_NEWTIME (0x80) is not one:
// clone(2) reads the low byte as the exit signal, so a time namespace can only
// be asked for through clone3 and unshare, both denied outright.
inline constexpr std::uint64_t kCloneNamespaceFlags =
    kCloneNewNs | kCloneNewCgroup | kCloneNewUts | kCloneNewIpc | kCloneNewUser | kCloneNewPid | kCloneNewNet;
inline constexpr std::uint32_t kTiocsti = 0x5412;
inline constexpr std::uint32_t kTioclinux = 0x541C;
inline constexpr std::uint32_t kAfVsock = 40;
inline constexpr std::uint32_t kPerLinux = 0x0000000;
inline constexpr std::uint32_t kPerLinux32 = 0x0000008;
inline constexpr std::uint32_t kUname26 = 0x0020000;
inline constexpr std::uint32_t kAddrNoRandomize = 0x0040000;
inline constexpr std::uint32_t kMmapPageZero = 0x0100000;
inline constexpr std::uint32_t kReadImpliesExec = 0x0400000;
inline constexpr std::uint32_t kPersonalityQuery = 0xffffffff; // personality(0xffffffff) only reads
} // namespace abi

// Which calls of a syscall an entry denies.
enum class arg_match {
  always,    // every call
  any_bit,   // (args[arg] & value) != 0: one masked rule per bit of value
  equals32,  // (args[arg] & 0xffffffff) == value
  outside32, // (args[arg] & 0xffffffff) is none of `allowed`
};

struct seccomp_entry {
  std::string_view name;  // the syscall, as libseccomp names it
  int err;                // the errno the denied call fails with
  bool required;          // false: skipped where the native architecture has no such call
  arg_match match;        // which calls are denied
  unsigned arg;           // the argument index `match` looks at (0-5)
  std::uint64_t value;    // the bit mask (any_bit) or the value (equals32)
  std::span<const std::uint32_t> allowed; // outside32: the values that pass
  std::string_view why;
};

// personality(2) values that pass (the set Docker's default profile allows):
// the plain Linux domain, PER_LINUX32 (linux32 / setarch i686: uname reports
// i686), UNAME26 (uname reports 2.6.x, for old build scripts), both, and the
// read-only query.
// unshare(2) flags a program may pass: none (a no-op) and CLONE_FILES alone
// (a private copy of its own descriptor table; ccsb-init's exec server
// relies on it, see init/exec/server.cpp clone_sharing_files). Upper bits
// are ignored by the rule and refused by the kernel (EINVAL).
inline constexpr std::uint32_t kAllowedUnshare[] = {0, abi::kCloneFiles};

inline constexpr std::uint32_t kAllowedPersonalities[] = {
    abi::kPerLinux, abi::kPerLinux32, abi::kUname26, abi::kUname26 | abi::kPerLinux32, abi::kPersonalityQuery};

inline constexpr std::string_view kWhyMount =
    "the mount layout is the policy (L1, L2): mounting over a mask, unmounting a read-only re-bind or pivoting "
    "would undo it; bubblewrap has made every mount before the filter applies";
inline constexpr std::string_view kWhyNewMountApi =
    "the new mount API changes the mount layout like mount(2) does; ENOSYS, not EPERM, so libmount and other "
    "callers fall back to mount(2), which then fails with EPERM";
inline constexpr std::string_view kWhyIoUring =
    "io_uring is a second system call interface whose operations (socket, openat, connect, ...) seccomp cannot "
    "see, so it would step around every rule here, and a large source of kernel exploits; ENOSYS is what a kernel "
    "without io_uring answers, and runtimes that use it (libuv, liburing users) fall back to epoll or threads";
inline constexpr std::string_view kWhyModule =
    "loads or unloads code in the host kernel (CAP_SYS_MODULE in the initial namespace only)";
inline constexpr std::string_view kWhyKexec = "replaces the running host kernel (CAP_SYS_BOOT in the initial namespace only)";
inline constexpr std::string_view kWhyKeyring =
    "kernel keyrings are kernel objects looked up by uid (without a user namespace a root launcher's sandbox "
    "reaches the host root's keyrings) and a long line of kernel bugs; nothing a command runs needs them";
inline constexpr std::string_view kWhyClock =
    "the wall clock is not namespaced: setting or steering it changes the host's time (time namespaces only "
    "offset the monotonic and boot clocks)";

// The table. Every entry says why it is there.
inline constexpr seccomp_entry kSeccompTable[] = {
    // Kernel keyrings.
    {"keyctl", EPERM, true, arg_match::always, 0, 0, {}, kWhyKeyring},
    {"add_key", EPERM, true, arg_match::always, 0, 0, {}, kWhyKeyring},
    {"request_key", EPERM, true, arg_match::always, 0, 0, {}, "kernel keyrings; besides, a key request can make the host kernel run /sbin/request-key as an upcall"},
    // Large in-kernel attack surfaces.
    {"bpf", EPERM, true, arg_match::always, 0, 0, {}, "eBPF programs and maps: the verifier is a large attack surface and a frequent privilege escalation; closed even where unprivileged BPF is enabled"},
    {"perf_event_open", EPERM, true, arg_match::always, 0, 0, {}, "perf events expose kernel addresses and have a long CVE history; profile from outside the sandbox"},
    {"userfaultfd", EPERM, true, arg_match::always, 0, 0, {}, "lets a process stall kernel page faults at will, the usual tool for winning kernel race conditions in exploits"},
    {"io_uring_setup", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyIoUring},
    {"io_uring_enter", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyIoUring},
    {"io_uring_register", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyIoUring},
    // Kernel modules and kexec.
    {"init_module", EPERM, true, arg_match::always, 0, 0, {}, kWhyModule},
    {"finit_module", EPERM, true, arg_match::always, 0, 0, {}, kWhyModule},
    {"delete_module", EPERM, true, arg_match::always, 0, 0, {}, kWhyModule},
    {"kexec_load", EPERM, true, arg_match::always, 0, 0, {}, kWhyKexec},
    {"kexec_file_load", EPERM, true, arg_match::always, 0, 0, {}, kWhyKexec},
    // Mounts.
    {"mount", EPERM, true, arg_match::always, 0, 0, {}, kWhyMount},
    {"umount2", EPERM, true, arg_match::always, 0, 0, {}, kWhyMount},
    {"umount", EPERM, false, arg_match::always, 0, 0, {}, "the legacy umount(2), on architectures that still have it (not x86_64 or arm64)"},
    {"pivot_root", EPERM, true, arg_match::always, 0, 0, {}, kWhyMount},
    {"open_tree", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"move_mount", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"fsopen", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"fsconfig", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"fsmount", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"fspick", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    {"mount_setattr", ENOSYS, true, arg_match::always, 0, 0, {}, kWhyNewMountApi},
    // Namespaces.
    {"unshare", EPERM, true, arg_match::outside32, 0, 0, kAllowedUnshare, "new namespaces: a user namespace hands the command a full capability set over new objects and exposes kernel code otherwise reserved to root, a recurring privilege escalation (L1 disables them); of its other flags only CLONE_FILES alone is allowed (a private copy of the caller's own descriptor table, which ccsb-init's exec server needs), the rest un-share state ordinary programs do not ask for"},
    {"setns", EPERM, true, arg_match::always, 0, 0, {}, "joins another namespace through a descriptor; the sandbox's namespaces are the boundary"},
    {"clone", EPERM, true, arg_match::any_bit, 0, abi::kCloneNamespaceFlags, {}, "clone with a CLONE_NEW* flag creates namespaces like unshare does; fork, posix_spawn and threads pass none of these flags"},
    {"clone3", ENOSYS, true, arg_match::always, 0, 0, {}, "its flags sit in a struct behind a pointer that seccomp cannot read, so the clone rule cannot apply; ENOSYS makes glibc (2.34+) and other runtimes fall back to clone(2), which is filtered"},
    // Terminal injection.
    {"ioctl", EPERM, true, arg_match::equals32, 1, abi::kTiocsti, {}, "TIOCSTI pushes bytes into a terminal's input queue, typing commands into the user's shell (CVE-2017-5226); --new-session detaches the sandbox, this also covers a terminal descriptor handed in"},
    {"ioctl", EPERM, true, arg_match::equals32, 1, abi::kTioclinux, {}, "TIOCLINUX selection and paste on a virtual console inject input like TIOCSTI (CVE-2023-28100)"},
    {"vhangup", EPERM, true, arg_match::always, 0, 0, {}, "hangs up the controlling terminal for every process using it"},
    // Execution domain.
    {"personality", EPERM, true, arg_match::outside32, 0, 0, kAllowedPersonalities, "other domains and flags weaken what runs next: READ_IMPLIES_EXEC makes readable memory executable, ADDR_NO_RANDOMIZE turns off ASLR (gdb's disable-randomization then warns and runs with ASLR), MMAP_PAGE_ZERO maps address 0 (a kernel NULL-dereference exploit aid), ADDR_LIMIT_*/ADDR_COMPAT_LAYOUT change the layout"},
    // Host-wide administration.
    {"acct", EPERM, true, arg_match::always, 0, 0, {}, "switches host process accounting on or off"},
    {"swapon", EPERM, true, arg_match::always, 0, 0, {}, "host swap configuration"},
    {"swapoff", EPERM, true, arg_match::always, 0, 0, {}, "host swap configuration"},
    {"reboot", EPERM, true, arg_match::always, 0, 0, {}, "reboots or halts the host (with CAP_SYS_BOOT in a PID namespace's user namespace it kills that namespace's init)"},
    {"settimeofday", EPERM, true, arg_match::always, 0, 0, {}, kWhyClock},
    {"clock_settime", EPERM, true, arg_match::always, 0, 0, {}, kWhyClock},
    {"adjtimex", EPERM, true, arg_match::always, 0, 0, {}, "steers the host clock (NTP discipline); its read-only form (modes 0, ntp_gettime) is denied too: the mode sits in a struct seccomp cannot read, and no tool a command needs reads the kernel's NTP state"},
    {"clock_adjtime", EPERM, true, arg_match::always, 0, 0, {}, "adjtimex for a given clock: the same surface"},
    {"quotactl", EPERM, true, arg_match::always, 0, 0, {}, "host disk quotas: reads other users' usage, changes limits"},
    {"quotactl_fd", EPERM, true, arg_match::always, 0, 0, {}, "quotactl through a descriptor: the same surface"},
    {"syslog", EPERM, true, arg_match::always, 0, 0, {}, "the kernel log (dmesg) shows host activity and kernel addresses, and clearing it hides evidence"},
    {"lookup_dcookie", EPERM, true, arg_match::always, 0, 0, {}, "obsolete oprofile interface that turns a kernel cookie into a path (gone from current kernels, denied where it still exists)"},
    {"nfsservctl", EPERM, true, arg_match::always, 0, 0, {}, "the NFS server control of kernels before 3.1"},
    {"uselib", EPERM, false, arg_match::always, 0, 0, {}, "a.out shared libraries: legacy (absent on arm64, off or gone in current kernels) with a CVE history (CVE-2004-1235)"},
    // File handles.
    {"open_by_handle_at", EPERM, true, arg_match::always, 0, 0, {}, "opens a file by its handle (inode number), skipping the path walk and with it every mount mask: the 'shocker' container escape"},
    {"name_to_handle_at", EPERM, true, arg_match::always, 0, 0, {}, "produces the file handles open_by_handle_at takes, and leaks inode numbers and generations"},
    // Sockets.
    {"socket", EAFNOSUPPORT, true, arg_match::equals32, 0, abi::kAfVsock, {}, "VM sockets are not network-namespaced: under a hypervisor they reach host services (CID 2) around the loopback-only namespace and the proxies (L3)"},
    // x86 legacy.
    {"modify_ldt", EPERM, false, arg_match::always, 0, 0, {}, "custom segments for 16- and 32-bit code (Wine, DOSEMU), nothing a 64-bit command needs, and a historic source of kernel information leaks"},
    {"iopl", EPERM, false, arg_match::always, 0, 0, {}, "raw I/O port access (CAP_SYS_RAWIO in the initial namespace only)"},
    {"ioperm", EPERM, false, arg_match::always, 0, 0, {}, "raw I/O port access (CAP_SYS_RAWIO in the initial namespace only)"},
};

// What a system call of a foreign ABI gets (the filter's bad-architecture
// action): EPERM, never a kill. Distinct from ENOSYS, which a kernel built
// without the ABI answers, so a test can tell the filter caught the call.
inline constexpr int kForeignAbiErrno = EPERM;
inline constexpr std::string_view kWhyForeignAbi =
    "a second system call table (i386 through int 0x80, x32 numbers on x86_64, AArch32 on arm64) is a second "
    "kernel entry path with its own history of bugs, and a filter for one ABI's numbers means nothing for "
    "another's; only the native ABI is filtered, everything else fails";

struct seccomp_not_denied {
  std::string_view name;
  std::string_view why;
};

// Calls a reader might expect in the table, left out on purpose.
inline constexpr seccomp_not_denied kSeccompNotDenied[] = {
    {"ptrace, process_vm_readv, process_vm_writev, kcmp, pidfd_getfd",
     "gdb, strace and lsof inside the sandbox are legitimate; the PID namespace holds only the session's own "
     "processes (bwrap's init among them, which has no capabilities and runs under the same filter), and since "
     "Linux 4.8 a tracer that rewrites a system call is filtered again"},
    {"mbind, set_mempolicy, migrate_pages, move_pages, get_mempolicy",
     "NUMA placement of the caller's own memory (numactl, JVMs, hwloc); Flatpak denies them, Docker gates them on "
     "CAP_SYS_NICE; moving another process's pages needs ptrace-level access to it (see above)"},
    {"chroot", "needs CAP_SYS_CHROOT, which --cap-drop ALL removes, and could only narrow the view of a mount "
               "namespace that already shows nothing else"},
    {"socket families other than AF_VSOCK",
     "the network namespace confines them (L3): inet sockets reach only loopback, netlink and packet sockets see "
     "only the namespace's own interfaces"},
    {"personality(PER_LINUX, PER_LINUX32, UNAME26, query)", "see kAllowedPersonalities"},
};

// The prefix blocks (mask, value) — `(x & mask) == value` — that together
// cover exactly the 32-bit values NOT in `allowed`, disjoint from each other.
// outside32 entries become one masked rule per block (seccomp rules compare an
// argument once, so "none of these values" is spelled as the complement).
inline std::vector<std::pair<std::uint32_t, std::uint32_t>> complement_blocks(std::span<const std::uint32_t> allowed) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  auto cover = [&](auto&& self, std::uint32_t prefix, unsigned len) -> void {
    const std::uint32_t mask = len == 0 ? 0u : ~std::uint32_t{0} << (32 - len);
    bool holds_allowed = false;
    for (std::uint32_t v : allowed)
      if ((v & mask) == prefix) holds_allowed = true;
    if (!holds_allowed) {
      out.emplace_back(mask, prefix);
      return;
    }
    if (len == 32) return; // an allowed value
    self(self, prefix, len + 1);
    self(self, prefix | (std::uint32_t{1} << (31 - len)), len + 1);
  };
  cover(cover, 0, 0);
  return out;
}

// Whether `e` denies a call with these arguments.
constexpr bool entry_denies(const seccomp_entry& e, std::span<const std::uint64_t, 6> args) {
  const std::uint64_t a = args[e.arg];
  switch (e.match) {
  case arg_match::always: return true;
  case arg_match::any_bit: return (a & e.value) != 0;
  case arg_match::equals32: return (a & 0xffffffffu) == e.value;
  case arg_match::outside32:
    for (std::uint32_t v : e.allowed)
      if ((a & 0xffffffffu) == v) return false;
    return true;
  }
  return true;
}

// The table's verdict on one native call: the errno it fails with, or 0 when
// the table lets it through. Reference semantics for tests: the filter is
// built from the same entries.
constexpr int seccomp_verdict(std::string_view name, std::span<const std::uint64_t, 6> args) {
  for (const auto& e : kSeccompTable)
    if (e.name == name && entry_denies(e, args)) return e.err;
  return 0;
}

} // namespace ccsb::confine
