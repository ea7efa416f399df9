/* try_syscall.c — the L6 probe: calls every system call the baseline seccomp
 * filter denies, plus a few that it must let through, and prints one line per
 * call:
 *
 *     NAME ERRNO ARG0 ARG1
 *
 * NAME is the system call (or "x32:getpid" / "i386:getpid" for the foreign
 * ABIs on x86_64, "thread" for pthread_create), ERRNO is 0 when the call
 * succeeded, ARG0 and ARG1 are the first two arguments in hex (the only ones
 * the table matches on, so the test can ask the table what it expects).
 *
 * Every call is harmless on the host too, also as root, so the test can run
 * the same probe outside the sandbox and show the results differ: the
 * arguments are ones the kernel rejects before it does anything (flags it does
 * not know, NULL or bad pointers, descriptor -1, a reboot without the magic,
 * a clone that asks for CLONE_THREAD without CLONE_SIGHAND). The exceptions
 * succeed harmlessly and are undone: personality changes are reverted, the
 * fork-like clone's child exits at once, vhangup runs in a child that first
 * left its terminal (setsid), modify_ldt reads zero bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void report(const char *name, long rc, int err, unsigned long a0, unsigned long a1) {
  printf("%s %d %#lx %#lx\n", name, rc < 0 ? err : 0, a0, a1);
  fflush(stdout);
}

/* One call through syscall(2); a descriptor it unexpectedly returns is closed. */
static long call(const char *name, long nr, unsigned long a0, unsigned long a1, unsigned long a2, unsigned long a3,
                 unsigned long a4, int returns_fd) {
  errno = 0;
  long rc = syscall(nr, a0, a1, a2, a3, a4, 0UL);
  int err = errno;
  if (rc >= 0 && returns_fd) close((int)rc);
  report(name, rc, err, a0, a1);
  return rc;
}

static void try_personality(unsigned long persona) {
  errno = 0;
  long rc = syscall(SYS_personality, persona);
  int err = errno;
  if (rc >= 0) syscall(SYS_personality, (unsigned long)PER_LINUX); /* undo a change */
  report("personality", rc, err, persona, 0);
}

/* clone(2) with the raw argument order of x86_64, arm64 and most others:
 * flags, stack, parent_tid, child_tid, tls. A child (only the fork-like
 * control call makes one) exits at once. */
static void try_clone(unsigned long flags) {
  errno = 0;
  long rc = syscall(SYS_clone, flags, 0UL, 0UL, 0UL, 0UL);
  int err = errno;
  if (rc == 0) syscall(SYS_exit_group, 0);
  if (rc > 0) waitpid((pid_t)rc, NULL, 0);
  report("clone", rc, err, flags, 0);
}

static void try_vhangup(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setsid(); /* no controlling terminal left to hang up */
    long rc = syscall(SYS_vhangup);
    _exit(rc < 0 ? (errno & 0xff) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    report("vhangup-probe-failed", -1, errno, 0, 0);
    return;
  }
  int e = WEXITSTATUS(status);
  report("vhangup", e ? -1 : 0, e, 0, 0);
}

static void *thread_main(void *arg) { return arg; }

static void try_thread(void) {
  pthread_t t;
  int e = pthread_create(&t, NULL, thread_main, NULL);
  if (e == 0) pthread_join(t, NULL);
  report("thread", e ? -1 : 0, e, 0, 0);
}

#if defined(__x86_64__)
/* getpid through the x32 numbering (bit 30) and through the i386 ABI.
 *
 * The i386 entry runs in a child: on some kernels and hypervisors the 32-bit
 * entry itself faults (ia32_emulation off, or a virtual machine whose
 * `int $0x80` raises #GP), and the process gets SIGSEGV before any filter
 * sees the call. The child reports the call's result through its exit status
 * (0: success, else the errno); a child killed by a signal is reported as
 * "i386:getpid-unusable SIGNAL", which the test reads as "this machine cannot
 * make the call at all", on the host or inside. */
static void try_foreign_abis(void) {
  long rc;
  __asm__ volatile("syscall" : "=a"(rc) : "a"(0x40000000L | 39L) : "rcx", "r11", "memory");
  report("x32:getpid", rc, (int)-rc, 0, 0);

  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    long r32;
    __asm__ volatile("int $0x80" : "=a"(r32) : "a"(20L) : "r8", "r9", "r10", "r11", "memory");
    _exit(r32 < 0 ? (int)(-r32 & 0xff) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    report("i386-probe-failed", -1, errno, 0, 0);
    return;
  }
  if (WIFSIGNALED(status)) {
    printf("i386:getpid-unusable %d 0 0\n", WTERMSIG(status));
    fflush(stdout);
    return;
  }
  int e = WEXITSTATUS(status);
  report("i386:getpid", e ? -1 : 0, e, 0, 0);
}
#endif

int main(void) {
  const unsigned long all = ~0UL;
  const unsigned long all32 = 0xffffffffUL;

  /* Kernel keyrings: an unknown keyctl operation; NULL key types. */
  call("keyctl", SYS_keyctl, 0x7fffffff, 0, 0, 0, 0, 0);
  call("add_key", SYS_add_key, 0, 0, 0, 0, 0, 0);
  call("request_key", SYS_request_key, 0, 0, 0, 0, 0, 0);
  /* An unknown bpf command; a NULL perf attribute; unknown userfaultfd flags. */
  call("bpf", SYS_bpf, 0x7fffffff, 0, 0, 0, 0, 0);
  call("perf_event_open", SYS_perf_event_open, 0, 0, all32, all32, 0, 1);
  call("userfaultfd", SYS_userfaultfd, 0x40000000, 0, 0, 0, 0, 1);
  /* io_uring: NULL parameters, descriptor -1. */
  call("io_uring_setup", SYS_io_uring_setup, 0, 0, 0, 0, 0, 1);
  call("io_uring_enter", SYS_io_uring_enter, all32, 0, 0, 0, 0, 0);
  call("io_uring_register", SYS_io_uring_register, all32, 0, 0, 0, 0, 0);
  /* Modules: a zero-length image, descriptor -1, a NULL name. */
  call("init_module", SYS_init_module, 0, 0, 0, 0, 0, 0);
  call("finit_module", SYS_finit_module, all32, 0, 0, 0, 0, 0);
  call("delete_module", SYS_delete_module, 0, 0, 0, 0, 0, 0);
  /* kexec: flags the kernel rejects before it looks at anything else. */
  call("kexec_load", SYS_kexec_load, 0, 0, 0, all, 0, 0);
  call("kexec_file_load", SYS_kexec_file_load, all32, all32, 0, 0, all, 0);
  /* Mounts: NULL targets, unknown flags. */
  call("mount", SYS_mount, 0, 0, 0, 0, 0, 0);
  call("umount2", SYS_umount2, 0, all32, 0, 0, 0, 0);
  call("pivot_root", SYS_pivot_root, 0, 0, 0, 0, 0, 0);
  call("open_tree", SYS_open_tree, all32, 0, all32, 0, 0, 1);
  call("move_mount", SYS_move_mount, all32, 0, all32, 0, all32, 0);
  call("fsopen", SYS_fsopen, 0, all32, 0, 0, 0, 1);
  call("fsconfig", SYS_fsconfig, all32, all32, 0, 0, 0, 0);
  call("fsmount", SYS_fsmount, all32, all32, 0, 0, 0, 1);
  call("fspick", SYS_fspick, all32, 0, all32, 0, 0, 1);
  call("mount_setattr", SYS_mount_setattr, all32, 0, all32, 0, 0, 0);
  /* Namespaces: unshare with an invalid bit next to CLONE_NEWUSER; setns on
   * descriptor -1; clone with each namespace flag plus CLONE_THREAD (invalid
   * without CLONE_SIGHAND); clone3 with a NULL struct. */
  call("unshare", SYS_unshare, CLONE_NEWUSER | 0x1, 0, 0, 0, 0, 0);
  call("setns", SYS_setns, all32, 0, 0, 0, 0, 0);
  const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; ++i) try_clone(ns_flags[i] | CLONE_THREAD);
  call("clone3", SYS_clone3, 0, 0, 0, 0, 0, 0);
  /* Terminal injection on descriptor -1; the request once more with garbage
   * in the upper half of the register (the kernel reads an unsigned int). */
  char ch = 'x';
  call("ioctl", SYS_ioctl, all32, TIOCSTI, (unsigned long)&ch, 0, 0, 0);
  call("ioctl", SYS_ioctl, all32, (1UL << 32) | TIOCSTI, (unsigned long)&ch, 0, 0, 0);
  call("ioctl", SYS_ioctl, all32, TIOCLINUX, (unsigned long)&ch, 0, 0, 0);
  try_vhangup();
  /* Execution domains and flags the table refuses. */
  try_personality(READ_IMPLIES_EXEC);
  try_personality(ADDR_NO_RANDOMIZE);
  try_personality(MMAP_PAGE_ZERO);
  try_personality(PER_BSD);
  try_personality((1UL << 32) | READ_IMPLIES_EXEC);
  /* Host administration: bad pointers, unknown commands and clocks. */
  call("acct", SYS_acct, 1, 0, 0, 0, 0, 0);
  call("swapon", SYS_swapon, 0, all32, 0, 0, 0, 0);
  call("swapoff", SYS_swapoff, 0, 0, 0, 0, 0, 0);
  call("reboot", SYS_reboot, 0, 0, 0, 0, 0, 0);
  call("settimeofday", SYS_settimeofday, 1, 0, 0, 0, 0, 0);
  call("clock_settime", SYS_clock_settime, 0x7fffffff, 0, 0, 0, 0, 0);
  call("adjtimex", SYS_adjtimex, 0, 0, 0, 0, 0, 0);
  call("clock_adjtime", SYS_clock_adjtime, 0x7fffffff, 0, 0, 0, 0, 0);
  call("quotactl", SYS_quotactl, 0xff, 0, 0, 0, 0, 0);
  call("quotactl_fd", SYS_quotactl_fd, all32, 0xff, 0, 0, 0, 0);
  call("syslog", SYS_syslog, 0x7fffffff, 0, 0, 0, 0, 0);
  call("lookup_dcookie", SYS_lookup_dcookie, 0, 0, 0, 0, 0, 0);
  call("nfsservctl", SYS_nfsservctl, 0, 0, 0, 0, 0, 0);
#ifdef SYS_uselib
  call("uselib", SYS_uselib, 0, 0, 0, 0, 0, 0);
#endif
  /* File handles: descriptor -1, NULL handle, unknown flags. */
  call("open_by_handle_at", SYS_open_by_handle_at, all32, 0, 0, 0, 0, 1);
  call("name_to_handle_at", SYS_name_to_handle_at, all32, 0, 0, 0, all32, 0);
  /* A VM socket with a type the kernel rejects before it loads anything. */
  call("socket", SYS_socket, AF_VSOCK, 15, 0, 0, 0, 1);
#if defined(__x86_64__) || defined(__i386__)
  /* x86 legacy: read zero bytes of the LDT, an invalid I/O privilege level,
   * an empty port range. */
  call("modify_ldt", SYS_modify_ldt, 0, 0, 0, 0, 0, 0);
  call("iopl", SYS_iopl, 4, 0, 0, 0, 0, 0);
  call("ioperm", SYS_ioperm, 0, 0, 0, 0, 0, 0);
#endif
#if defined(__x86_64__)
  try_foreign_abis();
#endif

  /* Calls the filter must let through (the same result inside and outside). */
  try_clone(SIGCHLD);                       /* fork-like clone */
  try_thread();                             /* glibc: clone3 (ENOSYS inside) then clone */
  try_personality(0xffffffffUL);            /* the query */
  try_personality(PER_LINUX);
  try_personality(PER_LINUX32);
  try_personality(UNAME26 | PER_LINUX32);
  call("ioctl", SYS_ioctl, all32, TCGETS, 0, 0, 0, 0); /* EBADF either way */
  call("socket", SYS_socket, AF_UNIX, SOCK_STREAM, 0, 0, 0, 1);
  return 0;
}
