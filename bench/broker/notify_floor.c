/* bench/broker/notify_floor.c — the floor of the X1 broker's mechanism on
 * this machine: what a seccomp user notification costs before the broker
 * does any work of its own. Run on the host (it installs its own filter with
 * a listener, which the dispatch profile forbids); bench/broker/run.sh prints
 * it beside the broker's own per-call latency.
 *   notify_floor DIR N  -> three lines "MODE p50_us p99_us" for N openat(O_CREAT):
 *     none      no filter
 *     continue  every O_CREAT open notified; the supervisor answers
 *               SECCOMP_USER_NOTIF_FLAG_CONTINUE (the round trip alone)
 *     addfd     the supervisor reads the name (process_vm_readv), opens it
 *               itself in a directory it already holds and injects the
 *               descriptor (SECCOMP_ADDFD_FLAG_SEND): a broker that checks
 *               nothing and resolves nothing
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "latency.h"

enum mode { NONE, CONTINUE, ADDFD };

static int send_fd(int sock, int fd) {
  char c = 0, cb[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&c, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof fd);
  return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock) {
  char c, cb[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&c, 1};
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb};
  if (recvmsg(sock, &m, 0) != 1) return -1;
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  if (!h || h->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(h), sizeof fd);
  return fd;
}

/* The measured process: N creations in DIR, p50/p99 printed. */
static int creator(enum mode mode, const char *dir, int n, int sock) {
  int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return 1;
  if (mode != NONE) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 1;
    int l = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (l < 0 || send_fd(sock, l) != 0) {
      perror("seccomp listener");
      return 1;
    }
    close(l);
  }
  double *v = calloc((size_t)n, sizeof *v);
  char name[64];
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "floor-%d-%d", (int)mode, i);
    double t0 = now_us();
    int fd = openat(d, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    v[i] = now_us() - t0;
    if (fd < 0) {
      perror("openat");
      return 1;
    }
    close(fd);
  }
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "floor-%d-%d", (int)mode, i);
    unlinkat(d, name, 0);
  }
  static const char *names[] = {"none", "continue", "addfd"};
  report(names[mode], v, n);
  return 0;
}

static void supervise(enum mode mode, const char *dir, int listener) {
  int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  char name[64];
  for (;;) {
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) return; /* the creator exited */
    if (mode == CONTINUE) {
      struct seccomp_notif_resp resp = {.id = req.id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
      ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
      continue;
    }
    struct iovec lo = {name, 64}, re = {(void *)(uintptr_t)req.data.args[1], 64};
    if (process_vm_readv((pid_t)req.pid, &lo, 1, &re, 1, 0) < 0) return;
    name[63] = '\0';
    int fd = openat(d, name, (int)req.data.args[2] | O_CLOEXEC, (mode_t)req.data.args[3]);
    struct seccomp_notif_addfd add = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (unsigned)fd,
                                      .newfd_flags = O_CLOEXEC};
    if (fd < 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
      struct seccomp_notif_resp resp = {.id = req.id, .error = fd < 0 ? -1 : 0};
      ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    if (fd >= 0) close(fd);
  }
}

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[2]) <= 0) {
    fprintf(stderr, "usage: notify_floor DIR N\n");
    return 2;
  }
  const int n = atoi(argv[2]);
  for (enum mode mode = NONE; mode <= ADDFD; ++mode) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(creator(mode, argv[1], n, sp[1]));
    close(sp[1]);
    if (mode != NONE) {
      int l = recv_fd(sp[0]);
      if (l < 0) return 1;
      supervise(mode, argv[1], l);
      close(l);
    }
    close(sp[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  }
  return 0;
}
