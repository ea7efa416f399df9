/* floor_init — floor_launch's supervisor (floor_launch.c): the sandbox's
 * PID 1, a static program like ccsb-init, that forks and execs its
 * arguments and exits with the command's status. */
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    execv(argv[1], argv + 1);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) != pid) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
