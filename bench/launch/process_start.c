/* process_start: what one process start costs on this machine, apart from
 * anything ccsb does (issue 9). A launch of `ccsb-run -- true` starts five
 * programs (ccsb-run, bwrap, egressd, ccsb-init, true), a bare
 * `bwrap ... true` two; on a virtual machine each start can cost far more
 * than on bare metal, and that cost is a floor no launcher change removes.
 *
 *   process_start [--runs N]
 *
 * prints, each from this run (medians):
 *   1. one `cpuid` instruction (leaf 4), in this process: a virtual machine
 *      traps it to its hypervisor, and glibc's start-up (its cache and CPU
 *      feature detection) executes about a hundred of them in every process;
 *   2. spawn + wait of an empty static glibc program against the same
 *      program without libc (its own _start, exit at once): the difference
 *      is what libc's start-up costs every process here;
 *   3. the delay from fork() to the child's first instruction, and whether
 *      the child started on its parent's CPU (a scheduler that keeps a new
 *      child where its parent runs serialises them).
 * The two helper programs are this binary's own siblings, built with it
 * (process_start_libc, process_start_raw). Not run by ctest. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Spawn `path` and wait for it, `n` times; the median in microseconds. */
static double spawn_median(const char* path, int n) {
  double* t = calloc((size_t)n, sizeof *t);
  if (!t) exit(2);
  for (int i = 0; i < n; ++i) {
    char* argv[] = {(char*)path, NULL};
    double t0 = now_us();
    pid_t pid;
    int rc = posix_spawn(&pid, path, NULL, NULL, argv, environ);
    if (rc != 0) {
      fprintf(stderr, "process_start: posix_spawn %s: %s\n", path, strerror(rc));
      exit(2);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    t[i] = now_us() - t0;
  }
  double m = median(t, n);
  free(t);
  return m;
}

int main(int argc, char** argv) {
  int runs = 200;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: process_start [--runs N]\n");
      return 2;
    }
  }
  if (runs < 3) runs = 3;

  /* 1. cpuid */
  double* c = calloc((size_t)runs, sizeof *c);
  if (!c) return 2;
  for (int i = 0; i < runs; ++i) {
    unsigned a, b, cc, d;
    double t0 = now_us();
    for (int k = 0; k < 20; ++k) __cpuid_count(4, (unsigned)(k % 4), a, b, cc, d);
    c[i] = (now_us() - t0) / 20;
    (void)a, (void)b, (void)cc, (void)d;
  }
  printf("cpuid (leaf 4):                       %8.2f us per instruction\n", median(c, runs));
  free(c);

  /* 2. libc's start-up */
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = '\0';
  char* slash = strrchr(self, '/');
  if (!slash) return 2;
  char libc_prog[PATH_MAX], raw_prog[PATH_MAX];
  snprintf(libc_prog, sizeof libc_prog, "%.*s/process_start_libc", (int)(slash - self), self);
  snprintf(raw_prog, sizeof raw_prog, "%.*s/process_start_raw", (int)(slash - self), self);
  (void)spawn_median(raw_prog, 5); /* warm-up */
  (void)spawn_median(libc_prog, 5);
  double raw = spawn_median(raw_prog, runs), libc = spawn_median(libc_prog, runs);
  printf("spawn + wait, static, no libc:        %8.1f us\n", raw);
  printf("spawn + wait, static, empty glibc main:%7.1f us   libc's start-up: %.1f us per process\n", libc,
         libc - raw);

  /* 3. fork to the child's first instruction */
  double* f = calloc((size_t)runs, sizeof *f);
  if (!f) return 2;
  int same = 0;
  for (int i = 0; i < runs; ++i) {
    int p[2];
    if (pipe(p) != 0) return 2;
    int parent_cpu = sched_getcpu();
    double t0 = now_us();
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      double first = now_us() - t0;
      int cpu = sched_getcpu();
      (void)!write(p[1], &first, sizeof first);
      (void)!write(p[1], &cpu, sizeof cpu);
      _exit(0);
    }
    double first = 0;
    int cpu = -1;
    if (read(p[0], &first, sizeof first) != (ssize_t)sizeof first || read(p[0], &cpu, sizeof cpu) != (ssize_t)sizeof cpu)
      return 2;
    close(p[0]);
    close(p[1]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    f[i] = first;
    if (cpu == parent_cpu) ++same;
  }
  printf("fork to the child's first instruction: %7.1f us   child on its parent's CPU: %d of %d\n", median(f, runs),
         same, runs);
  free(f);
  return 0;
}
