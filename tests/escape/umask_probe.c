/* umask_probe.c — X1: does a brokered creation get the mode the kernel
 * would have given it? The broker creates files itself with the caller's
 * umask, which it caches per thread (init/broker/notify_loop.hpp, "Caller
 * facts"); this probe changes the umask in the ways a cache could miss and
 * prints the mode of what it then creates, one "@@NAME=MODE" line each (octal,
 * permission bits only):
 *
 *   seq      one thread: umask 027 -> a file, a directory, a FIFO, a Unix
 *            socket; umask 0 -> a file asked for with 0666
 *   threads  a second thread creates while the main thread changes the umask
 *   fork     a child changes its own umask (the parent's must not change)
 *   clonefs  a child sharing the parent's fs_struct (clone(CLONE_FS), no
 *            CLONE_THREAD) changes the umask of both, then stays alive and
 *            makes no further call; later it is gone
 *   many     300 live threads (more than the broker's table of 256 callers)
 *            each create a file, the main thread changes the umask, each
 *            creates another: the count of each mode is printed
 *
 * Run in DIR (an empty directory). The test runs it on the host and in the
 * sandbox and requires the same output.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *name) {
  struct stat st;
  if (lstat(name, &st) != 0) {
    printf("@@%s=missing\n", name);
  } else {
    printf("@@%s=%03o\n", name, (unsigned)(st.st_mode & 07777));
  }
  fflush(stdout);
}

static void make(const char *name, mode_t mode) {
  int fd = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, mode);
  if (fd >= 0) close(fd);
  show(name);
}

/* The second thread creates the file whose name main() hands it, then
 * answers; main() changes the umask between hand-offs. */
static int to_thread[2], from_thread[2];

static void *creator(void *arg) {
  (void)arg;
  char name[32];
  for (;;) {
    ssize_t n = read(to_thread[0], name, sizeof name);
    if (n <= 0 || name[0] == '\0') return NULL; /* stop */
    make(name, 0666);
    (void)!write(from_thread[1], "k", 1);
  }
}

static void ask(const char *name) {
  char k, buf[32] = {0};
  strncpy(buf, name, sizeof buf - 1);
  (void)!write(to_thread[1], buf, sizeof buf);
  (void)!read(from_thread[0], &k, 1);
}

#define MANY 300
static pthread_barrier_t many_barrier;

static void *many_thread(void *arg) {
  long i = (long)arg;
  char name[32];
  snprintf(name, sizeof name, "many_a%ld", i);
  int fd = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
  if (fd >= 0) close(fd);
  pthread_barrier_wait(&many_barrier); /* all created, all alive */
  pthread_barrier_wait(&many_barrier); /* main changed the umask */
  snprintf(name, sizeof name, "many_b%ld", i);
  fd = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
  if (fd >= 0) close(fd);
  return NULL;
}

static void count_modes(const char *prefix) {
  int n644 = 0, n600 = 0, other = 0;
  for (int i = 0; i < MANY; ++i) {
    char name[32];
    struct stat st;
    snprintf(name, sizeof name, "%s%d", prefix, i);
    if (lstat(name, &st) != 0) ++other;
    else if ((st.st_mode & 0777) == 0644) ++n644;
    else if ((st.st_mode & 0777) == 0600) ++n600;
    else ++other;
  }
  printf("@@%s_644=%d\n@@%s_600=%d\n@@%s_other=%d\n", prefix, n644, prefix, n600, prefix, other);
  fflush(stdout);
}

static int clonefs_child(void *arg) {
  int *fds = arg;
  umask(077);
  (void)!write(fds[1], "k", 1);
  pause();
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || chdir(argv[2]) != 0) {
    fprintf(stderr, "usage: umask_probe seq|threads|fork|clonefs|many DIR\n");
    return 2;
  }
  const char *what = argv[1];
  umask(022);
  if (strcmp(what, "seq") == 0) {
    umask(027);
    make("seq_file", 0666);
    mkdir("seq_dir", 0777);
    show("seq_dir");
    mkfifo("seq_fifo", 0666);
    show("seq_fifo");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "seq_sock");
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0) show("seq_sock");
    umask(0);
    make("seq_open", 0666);
  } else if (strcmp(what, "threads") == 0) {
    pthread_t t;
    if (pipe(to_thread) || pipe(from_thread) || pthread_create(&t, NULL, creator, NULL)) return 1;
    make("main_before", 0666); /* 644; main's own umask() is settled */
    ask("thr_before");     /* 644: the thread's umask is now cached */
    umask(077);
    ask("thr_after");      /* 600: the main thread's umask() reached it */
    ask("thr_again");      /* 600 */
    make("main_after", 0666); /* 600 */
    ask("thr_settled");    /* 600 */
    umask(002);
    ask("thr_back");       /* 664 */
    (void)!write(to_thread[1], "", 1); /* stop (no answer) */
    pthread_join(t, NULL);
  } else if (strcmp(what, "fork") == 0) {
    make("parent_before", 0666); /* 644 */
    pid_t c = fork();
    if (c == 0) {
      umask(077);
      make("child_after", 0666); /* 600 */
      _exit(0);
    }
    waitpid(c, NULL, 0);
    make("parent_after", 0666); /* 644: the child's umask is its own */
  } else if (strcmp(what, "clonefs") == 0) {
    make("shared_before", 0666); /* 644 */
    int fds[2];
    if (pipe(fds)) return 1;
    static char stack[1 << 16];
    pid_t c = clone(clonefs_child, stack + sizeof stack, CLONE_FS | SIGCHLD, fds);
    if (c < 0) return 1;
    char k;
    (void)!read(fds[0], &k, 1);
    make("shared_child_alive", 0666); /* 600: one fs_struct, one umask */
    make("shared_again", 0666);       /* 600 */
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    make("shared_child_gone", 0666);  /* 600 */
    make("shared_last", 0666);        /* 600 */
  } else if (strcmp(what, "many") == 0) {
    pthread_t t[MANY];
    pthread_barrier_init(&many_barrier, NULL, MANY + 1);
    for (long i = 0; i < MANY; ++i)
      if (pthread_create(&t[i], NULL, many_thread, (void *)i)) return 1;
    pthread_barrier_wait(&many_barrier);
    umask(077);
    make("many_main", 0666); /* 600; main's umask() settled */
    pthread_barrier_wait(&many_barrier);
    for (int i = 0; i < MANY; ++i) pthread_join(t[i], NULL);
    count_modes("many_a"); /* 300 x 644 */
    count_modes("many_b"); /* 300 x 600 */
  } else {
    return 2;
  }
  return 0;
}
