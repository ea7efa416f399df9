/* bench/broker/call_latency.c — per-call latency of the calls the X1 broker
 * answers, run inside a sandbox: bench/broker/run.sh runs it under
 * `--profile spec` (no broker) and the dispatch profile (broker) in one run
 * and prints both with their ratio.
 *   call_latency DIR N     -> "openat_creat p50_us p99_us", "connect_unix p50_us p99_us",
 *                             "openat_read p50_us p99_us" (never brokered)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "latency.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: call_latency DIR N\n");
    return 2;
  }
  int n = atoi(argv[2]);
  if (n <= 0) return 2;
  int dir = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    perror("open DIR");
    return 1;
  }
  double* v = calloc((size_t)n, sizeof *v);
  char name[64];
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "lat-%d.txt", i);
    double t0 = now_us();
    int fd = openat(dir, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    v[i] = now_us() - t0;
    if (fd < 0) {
      perror("openat O_CREAT");
      return 1;
    }
    close(fd);
  }
  report("openat_creat", v, n);
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "lat-%d.txt", i);
    double t0 = now_us();
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    v[i] = now_us() - t0;
    if (fd < 0) return 1;
    close(fd);
  }
  report("openat_read", v, n);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s/lat.sock", argv[1]);
  unlink(a.sun_path);
  int srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (srv < 0 || bind(srv, (struct sockaddr*)&a, sizeof a) != 0 || listen(srv, 4096) != 0) {
    perror("bind");
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    double t0 = now_us();
    int r = connect(c, (struct sockaddr*)&a, sizeof a);
    v[i] = now_us() - t0;
    if (r != 0) {
      perror("connect");
      return 1;
    }
    close(c);
    int s = accept4(srv, NULL, NULL, SOCK_CLOEXEC);
    if (s >= 0) close(s);
  }
  report("connect_unix", v, n);
  return 0;
}
