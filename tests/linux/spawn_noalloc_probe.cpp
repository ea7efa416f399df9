// spawn_noalloc_probe [S7] — launch::spawn's child allocates nothing between fork
// and execve (process.hpp). A launcher embedded in a multithreaded server
// forks while another thread may hold malloc's lock; a child that then
// allocates waits for a lock whose owner does not exist in it, forever.
//
// This program replaces the allocator's entry points (the executable's
// definitions interpose on every library's calls, libstdc++'s operator new
// included): in any process but the one that started, an allocation or a
// release exits 99 on the spot. It then spawns /bin/true with everything
// that makes the child do work (a descriptor map that moves sources,
// environment, its own process group, die-with-parent, a umask) and exits
// with the child's status: 0 when the child reached execve without
// allocating. Exit 2: the spawn itself failed.
#include <ccsb/launch/process.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
pid_t g_owner = 0; // the process allowed to allocate, once set

void check() {
  if (g_owner != 0 && ::getpid() != g_owner) {
    static const char m[] = "spawn_noalloc_probe: the child allocated after fork\n";
    (void)!::write(2, m, sizeof m - 1);
    ::_exit(99);
  }
}
} // namespace

extern "C" {
void* malloc(std::size_t n) {
  check();
  return __libc_malloc(n);
}
void* calloc(std::size_t a, std::size_t b) {
  check();
  return __libc_calloc(a, b);
}
void* realloc(void* p, std::size_t n) {
  check();
  return __libc_realloc(p, n);
}
void free(void* p) {
  if (p) check();
  __libc_free(p);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
  check();
  return __libc_memalign(a, n);
}
void* memalign(std::size_t a, std::size_t n) {
  check();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  check();
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}

int main() {
  namespace launch = ccsb::launch;
  launch::unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return 2;
  launch::spawn_options o;
  o.path = "/bin/true";
  o.argv = {o.path, "--probe"};
  o.env = {{"PATH", "/usr/bin:/bin"}, {"CCSB_PROBE", "1"}};
  o.fds = {{0, null.get()}, {1, null.get()}, {2, null.get()}, {7, null.get()}};
  o.own_process_group = true;
  o.die_with_parent = true;
  o.umask = 077;
  g_owner = ::getpid();
  auto pid = launch::spawn(o);
  if (!pid) {
    g_owner = 0;
    std::fprintf(stderr, "spawn: %s\n", pid.err().what().c_str());
    return 2;
  }
  int st = 0;
  if (::waitpid(*pid, &st, 0) != *pid) return 2;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
