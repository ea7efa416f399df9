/* floor_launch — the structural floor of `ccsb-run -- true` (issue 9).
 *
 *   floor_launch SUPERVISOR COMMAND [ARG...]
 *
 * What any launcher of ccsb's process shape pays before it does any of
 * ccsb's work: itself (a static program like ccsb-run), one fork, bwrap with
 * the namespaces and the mounts of ccsb's dispatch plan (render/bwrap/render.hpp:
 * /usr and its symlinks, one bind at /etc as the /etc view is, proc with
 * /proc/sys read-only, dev, a private /tmp, the workdir, the supervisor),
 * run as the workdir's owner when started as root (L1), and a static
 * supervisor (floor_init.c) as the sandbox's PID 1 that forks and execs the
 * command and reports its status. Nothing else: no policy compilation, run
 * dir, cgroups, /etc view, seccomp, Landlock, egressd, listeners or
 * exec-channel protocol. launch_bench runs it as the "floor" case, so
 * srt / floor is the best srt / ccsb-run ratio this shape allows on the
 * machine, and ccsb-run - floor is what ccsb's own work costs.
 * Linux only; not run by ctest. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor_launch SUPERVISOR COMMAND [ARG...]\n");
    return 2;
  }
  char* work = getcwd(NULL, 0);
  struct stat st;
  if (!work || stat(work, &st) != 0) {
    perror("floor_launch: the current directory");
    return 1;
  }
  enum { kFixed = 64 };
  char** a = calloc((size_t)argc + kFixed, sizeof *a);
  if (!a) return 1;
  int n = 0;
  const char* fixed[] = {"bwrap", "--new-session", "--die-with-parent", "--unshare-user", "--disable-userns",
                         "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                         "--unshare-net", "--hostname", "ccsb", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
                         "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib",
                         "/lib", "--symlink", "usr/lib32", "/lib32", "--symlink", "usr/lib64", "/lib64", "--ro-bind",
                         "/etc", "/etc", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev",
                         "--tmpfs", "/tmp"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; ++i) a[n++] = (char*)fixed[i];
  a[n++] = "--bind";
  a[n++] = work;
  a[n++] = work;
  a[n++] = "--ro-bind";
  a[n++] = argv[1];
  a[n++] = "/run/ccsb/floor-init";
  a[n++] = "--chdir";
  a[n++] = work;
  a[n++] = "--";
  a[n++] = "/run/ccsb/floor-init";
  for (int i = 2; i < argc; ++i) a[n++] = argv[i];
  a[n] = NULL;

  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    if (getuid() == 0 && st.st_uid != 0) { /* L1: never host root inside */
      if (setgroups(0, NULL) != 0 || setresgid(st.st_gid, st.st_gid, st.st_gid) != 0 ||
          setresuid(st.st_uid, st.st_uid, st.st_uid) != 0)
        _exit(126);
    }
    prctl(PR_SET_PDEATHSIG, 9);
    execv("/usr/bin/bwrap", a);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
