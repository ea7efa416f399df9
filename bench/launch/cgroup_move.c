/* bench/launch/cgroup_move.c — what it costs a freshly forked child to join
 * a cgroup v1 hierarchy, the two ways (limits.hpp, spawn_options):
 *   procs  its pid written into cgroup.procs (the kernel takes
 *          cgroup_threadgroup_rwsem for writing: an RCU grace period)
 *   tasks  "0" written into tasks by its only thread (the kernel's
 *          single-thread move: no threadgroup lock)
 * Root only (it makes and removes a child cgroup of its own cgroup in the v1
 * memory hierarchy). The rounds are spaced, so each move starts with the
 * rwsem idle, as a launch on a quiet host does.
 *   cgroup_move N  -> "procs p50_us p99_us", "tasks p50_us p99_us", "ratio X"
 * (the clock and the report line are bench/broker/latency.h's)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../broker/latency.h"

/* The memory hierarchy's mount point plus this process's path in it. */
static int own_memory_cgroup(char* out, size_t size) {
  char line[4096], mnt[2048] = "";
  FILE* f = fopen("/proc/self/mountinfo", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    char root[1024], point[1024], post[2048];
    const char* dash = strstr(line, " - ");
    if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2 || strcmp(root, "/") != 0) continue;
    if (sscanf(dash + 3, "cgroup %*s %2047s", post) == 1 && strstr(post, "memory")) {
      snprintf(mnt, sizeof mnt, "%s", point);
      break;
    }
  }
  fclose(f);
  if (!*mnt) return -1;
  f = fopen("/proc/self/cgroup", "r");
  if (!f) return -1;
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    char* a = strchr(line, ':');
    char* b = a ? strchr(a + 1, ':') : NULL;
    if (!b || strncmp(a + 1, "memory:", 7) != 0) continue;
    b[strcspn(b, "\n")] = 0;
    snprintf(out, size, "%s%s", mnt, strcmp(b + 1, "/") == 0 ? "" : b + 1);
    found = 0;
    break;
  }
  fclose(f);
  return found;
}

/* One child joins through `file`, by pid or by "0"; returns the write's ms. */
static double one_move(const char* file, int by_self) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  int p[2];
  if (fd < 0 || pipe(p) != 0) {
    perror(file);
    exit(1);
  }
  pid_t pid = fork();
  if (pid == 0) {
    char text[32];
    int n = by_self ? snprintf(text, sizeof text, "0") : snprintf(text, sizeof text, "%d", (int)getpid());
    double t0 = now_us();
    double ms = write(fd, text, (size_t)n) == n ? (now_us() - t0) / 1e3 : -1;
    (void)!write(p[1], &ms, sizeof ms);
    _exit(0);
  }
  double ms = -1;
  close(p[1]);
  (void)!read(p[0], &ms, sizeof ms);
  close(p[0]);
  close(fd);
  waitpid(pid, NULL, 0);
  if (ms < 0) {
    fprintf(stderr, "cgroup_move: the write into %s failed\n", file);
    exit(1);
  }
  return ms;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  if (n < 1) n = 1;
  char own[2048], dir[2300], file[2400];
  if (own_memory_cgroup(own, sizeof own) != 0) {
    fprintf(stderr, "cgroup_move: no cgroup v1 memory hierarchy here (this measures the v1 path)\n");
    return 1;
  }
  snprintf(dir, sizeof dir, "%s/ccsb-cgroup-move-%d", own, (int)getpid());
  if (mkdir(dir, 0755) != 0) {
    perror(dir);
    return 1;
  }
  double* procs = calloc((size_t)n, sizeof *procs);
  double* tasks = calloc((size_t)n, sizeof *tasks);
  for (int i = 0; i < n; ++i) {
    snprintf(file, sizeof file, "%s/cgroup.procs", dir);
    procs[i] = one_move(file, 0);
    usleep(200000); /* past the rwsem's grace-period window: the next move starts idle */
    snprintf(file, sizeof file, "%s/tasks", dir);
    tasks[i] = one_move(file, 1);
    usleep(200000);
  }
  for (int i = 0; i < n; ++i) procs[i] *= 1e3, tasks[i] *= 1e3; /* latency.h reports microseconds */
  report("procs", procs, n);
  report("tasks", tasks, n);
  printf("ratio %.1f\n", procs[n / 2] / (tasks[n / 2] > 0 ? tasks[n / 2] : 1e-6));
  rmdir(dir);
  return 0;
}
