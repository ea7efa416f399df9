/* outer_env.c — test-only: run a program inside the wall a container or a
 * hardened host puts around it (L1, issue 11), so the tests can assert what
 * ccsb-run's probe says about each one. Needs root (it builds the wall).
 *
 *   outer_env MODE [--as-nobody] [--without CALL] -- PROGRAM [ARG...]
 *
 * MODE:
 *   userns          a new user namespace owned by root mapping every id onto
 *                   itself (the control for userns-max0)
 *   userns-max0     the same, with user.max_user_namespaces = 0 inside it
 *                   (the sysctl is per user namespace; its owner may set it)
 *   seccomp-docker  the denials of Docker's default seccomp profile that a
 *                   sandbox launcher meets (kDockerDenied: unshare, setns,
 *                   mount, pivot_root, ... EPERM; clone with any CLONE_NEW*
 *                   flag EPERM; clone3 ENOSYS, so callers fall back to clone)
 *   seccomp-docker-ccsb  the same with docs/containers.md's additions
 *                   to the profile allowed (kRecipeAllows)
 *   seccomp-newuser only clone/unshare with CLONE_NEWUSER EPERM, clone3 ENOSYS
 *   seccomp-none    a filter that allows everything (the control: Seccomp: 2
 *                   alone must not be read as a block)
 *   mountns         a private mount namespace (the control for the /proc modes)
 *   proc-masked     a private mount namespace with Docker's masks on /proc:
 *                   /dev/null over its masked files (/proc/kcore, /proc/keys,
 *                   /proc/timer_list, ...), a tmpfs over its masked
 *                   directories, /proc/sys bound read-only
 *   proc-ro         a private mount namespace with /proc read-only
 * --without CALL takes one call out of seccomp-docker-ccsb's additions.
 * --as-nobody drops to uid/gid 65534 with no groups before PROGRAM runs
 * (after the wall is built, before a seccomp filter is installed).
 * Exit status: PROGRAM's; 120 when the wall cannot be built (with a reason). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char* what) {
  fprintf(stderr, "outer_env: %s: %s\n", what, strerror(errno));
  exit(120);
}

static void write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) die(path);
  ssize_t n = write(fd, text, strlen(text));
  if (n != (ssize_t)strlen(text)) die(path);
  close(fd);
}

/* The child unshares its user namespace; the parent (root outside) maps every
 * id onto itself, which only a writer in the parent namespace may do. */
static void enter_userns(int max0) {
  int go[2], ready[2];
  if (pipe(go) != 0 || pipe(ready) != 0) die("pipe");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid > 0) {
    close(ready[1]);
    close(go[0]);
    char c;
    if (read(ready[0], &c, 1) != 1) exit(120);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    write_file(path, "0 0 4294967295\n");
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    write_file(path, "0 0 4294967295\n");
    if (write(go[1], "g", 1) != 1) die("write");
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
      if (errno != EINTR) die("waitpid");
    exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  close(ready[0]);
  close(go[1]);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (unshare(CLONE_NEWUSER) != 0) die("unshare(CLONE_NEWUSER)");
  if (write(ready[1], "r", 1) != 1) die("write");
  char c;
  if (read(go[0], &c, 1) != 1) exit(120);
  close(ready[1]);
  close(go[0]);
  if (max0) write_file("/proc/sys/user/max_user_namespaces", "0\n");
}

static void enter_mountns(int mask, int ro) {
  if (unshare(CLONE_NEWNS) != 0) die("unshare(CLONE_NEWNS)");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("mount / private");
  if (mask) {
    /* Docker's masked paths that exist on this kernel (files get /dev/null,
     * directories an empty read-only tmpfs), and its read-only /proc/sys. */
    static const char* masked[] = {"/proc/asound",     "/proc/acpi",        "/proc/kcore",   "/proc/keys",
                                   "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                                   "/proc/sched_debug", "/proc/scsi"};
    int n = 0;
    for (size_t k = 0; k < sizeof masked / sizeof masked[0]; ++k) {
      struct stat st;
      if (lstat(masked[k], &st) != 0) continue;
      if (S_ISDIR(st.st_mode) ? mount("tmpfs", masked[k], "tmpfs", MS_RDONLY, NULL) != 0
                              : mount("/dev/null", masked[k], NULL, MS_BIND, NULL) != 0)
        die(masked[k]);
      ++n;
    }
    if (n == 0) {
      errno = ENOENT;
      die("none of Docker's masked /proc paths exists");
    }
    if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) != 0) die("bind /proc/sys");
    if (mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) die("remount /proc/sys ro");
  }
  if (ro && mount(NULL, "/proc", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) die("remount /proc ro");
}

/* The calls Docker's default seccomp profile (moby's profiles/seccomp/default.json)
 * refuses with EPERM to a container without CAP_SYS_ADMIN and CAP_SYS_PTRACE
 * that a sandbox launcher can reach: its CAP_SYS_ADMIN-only group, its
 * CAP_SYS_PTRACE-only group, and pivot_root and the keyring calls, which it
 * never allows. clone is allowed only without CLONE_NEW* flags; clone3 is
 * ENOSYS. */
static const char* const kDockerDenied[] = {
    "bpf",      "fanotify_init", "fsconfig",     "fsmount",   "fsopen",          "fspick",       "lookup_dcookie",
    "mount",    "mount_setattr", "move_mount",   "open_tree", "perf_event_open", "quotactl",     "quotactl_fd",
    "setdomainname", "sethostname", "setns",     "syslog",    "umount2",         "unshare",      "pivot_root",
    "kcmp",     "pidfd_getfd",   "process_madvise", "keyctl", "add_key",         "request_key"};

/* What docs/containers.md adds to Docker's default profile for ccsb. */
static const char* const kRecipeAllows[] = {"clone", "unshare", "mount", "umount2", "pivot_root", "sethostname",
                                            "pidfd_getfd"};

/* --without NAME: the recipe less one call (each must be needed). */
static const char* recipe_without = "";

static int allowed_by_recipe(const char* name) {
  if (strcmp(name, recipe_without) == 0) return 0;
  for (size_t k = 0; k < sizeof kRecipeAllows / sizeof kRecipeAllows[0]; ++k)
    if (strcmp(kRecipeAllows[k], name) == 0) return 1;
  return 0;
}

static void install_filter(const char* mode) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) die("seccomp_init");
  int rc = 0;
  int docker = strcmp(mode, "seccomp-docker") == 0, recipe = strcmp(mode, "seccomp-docker-ccsb") == 0;
  if (docker || recipe) {
    for (size_t k = 0; k < sizeof kDockerDenied / sizeof kDockerDenied[0]; ++k) {
      int nr = seccomp_syscall_resolve_name(kDockerDenied[k]);
      if (nr < 0 || (recipe && allowed_by_recipe(kDockerDenied[k]))) continue;
      rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    /* Docker allows clone only when (flags & CLONE_NEW*) == 0: one rule per flag. */
    static const unsigned long flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                          CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};
    int deny_ns_clone = docker || !allowed_by_recipe("clone");
    for (size_t k = 0; deny_ns_clone && k < sizeof flags / sizeof flags[0]; ++k)
      rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, flags[k], flags[k]));
  } else if (strcmp(mode, "seccomp-newuser") == 0) {
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  }
  if (strcmp(mode, "seccomp-none") != 0) rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0) {
    errno = -rc;
    die("seccomp_rule_add");
  }
  if ((rc = seccomp_load(ctx)) != 0) {
    errno = -rc;
    die("seccomp_load");
  }
  seccomp_release(ctx);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: outer_env MODE [--as-nobody] [--without CALL] -- PROGRAM [ARG...]\n");
    return 120;
  }
  const char* mode = argv[1];
  int i = 2, nobody = 0;
  if (strcmp(argv[i], "--as-nobody") == 0) nobody = 1, ++i;
  if (i + 1 < argc && strcmp(argv[i], "--without") == 0) recipe_without = argv[i + 1], i += 2;
  if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) {
    fprintf(stderr, "outer_env: expected -- PROGRAM\n");
    return 120;
  }
  char** prog = argv + i + 1;
  int seccomp = strncmp(mode, "seccomp-", 8) == 0;
  if (strcmp(mode, "userns") == 0) enter_userns(0);
  else if (strcmp(mode, "userns-max0") == 0) enter_userns(1);
  else if (strcmp(mode, "mountns") == 0) enter_mountns(0, 0);
  else if (strcmp(mode, "proc-masked") == 0) enter_mountns(1, 0);
  else if (strcmp(mode, "proc-ro") == 0) enter_mountns(0, 1);
  else if (!seccomp || (strcmp(mode, "seccomp-docker") != 0 && strcmp(mode, "seccomp-docker-ccsb") != 0 &&
                        strcmp(mode, "seccomp-newuser") != 0 && strcmp(mode, "seccomp-none") != 0)) {
    fprintf(stderr, "outer_env: unknown mode %s\n", mode);
    return 120;
  }
  if (nobody && (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0))
    die("drop to 65534");
  if (seccomp) install_filter(mode);
  execv(prog[0], prog);
  die(prog[0]);
  return 120;
}
