#include "broker/filter.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

#if CCSB_PRECOMPILED_BPF
#include <ccsb/precompiled_bpf.hpp>
#endif

namespace ccsb::init {
namespace {

// Calls newer than libseccomp may be; one number on every architecture.
constexpr int kFchmodat2 = 452;
constexpr int kSetxattrat = 463;
constexpr int kRemovexattrat = 466;

struct ctx_guard {
  scmp_filter_ctx c;
  ~ctx_guard() {
    if (c) seccomp_release(c);
  }
};

ccsb::error lib_error(const std::string& what, int rc) {
  return ccsb::make_error(ccsb::errc::unenforceable, "broker.filter", what + ": " + std::strerror(-rc));
}

} // namespace

ccsb::result<std::vector<sock_filter>> build_filter_libseccomp() {
  ctx_guard g{seccomp_init(SCMP_ACT_ALLOW)};
  if (!g.c) return ccsb::make_error(ccsb::errc::unenforceable, "broker.filter", "seccomp_init failed");
  if (int rc = seccomp_attr_set(g.c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)); rc < 0)
    return lib_error("SCMP_FLTATR_ACT_BADARCH", rc);
  auto add = [&](const char* name, uint32_t action, std::vector<scmp_arg_cmp> cmp) -> ccsb::result<void> {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return ccsb::make_error(ccsb::errc::unenforceable, std::string("broker.filter.") + name,
                                                       "libseccomp does not know this call on the native architecture");
    int rc = seccomp_rule_add_array(g.c, action, nr, static_cast<unsigned>(cmp.size()), cmp.empty() ? nullptr : cmp.data());
    if (rc < 0) return lib_error(std::string("seccomp_rule_add ") + name, rc);
    return ccsb::ok();
  };
  const uint32_t notify = SCMP_ACT_NOTIFY;
  for (auto [name, arg] : {std::pair{"open", 1u}, std::pair{"openat", 2u}})
    for (uint64_t bit : {uint64_t(O_CREAT), uint64_t(O_WRONLY), uint64_t(O_RDWR), uint64_t(O_TRUNC)})
      if (auto r = add(name, notify, {SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bit, bit)}); !r) return std::move(r).err();
  for (const char* name : {"creat", "mknod", "mknodat", "mkdir", "mkdirat", "link", "linkat", "symlink", "symlinkat",
                           "rename", "renameat", "renameat2", "truncate", "unlink", "unlinkat", "rmdir", "bind",
                           "connect"})
    if (auto r = add(name, notify, {}); !r) return std::move(r).err();
  // umask: observed only (the broker caches each thread's umask and must
  // forget it before a new one takes effect); answered CONTINUE.
  if (auto r = add("umask", notify, {}); !r) return std::move(r).err();
  // Access changes (chmod, chown, extended attributes, ACLs among them) are
  // decided on the object like a write; fchmodat2 by number, since
  // libseccomp may not know it (it is 452 on every architecture).
  for (const char* name : {"chmod", "fchmod", "fchmodat", "chown", "lchown", "fchown", "fchownat", "setxattr",
                           "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"})
    if (auto r = add(name, notify, {}); !r) return std::move(r).err();
  if (int rc = seccomp_rule_add_array(g.c, notify, kFchmodat2, 0, nullptr); rc < 0)
    return lib_error("seccomp_rule_add fchmodat2", rc);
  // setxattrat/removexattrat (6.13+): their value sits in a struct; callers
  // fall back to the calls above.
  for (int nr : {kSetxattrat, kRemovexattrat})
    if (int rc = seccomp_rule_add_array(g.c, SCMP_ACT_ERRNO(ENOSYS), nr, 0, nullptr); rc < 0)
      return lib_error("seccomp_rule_add " + std::to_string(nr), rc);
  // prlimit64 that sets a limit of another pid (pid 0 is the caller itself;
  // a pure read needs no decision): the broker refuses the supervisor.
  if (auto r = add("prlimit64", notify, {SCMP_CMP64(0, SCMP_CMP_NE, 0), SCMP_CMP64(2, SCMP_CMP_NE, 0)}); !r)
    return std::move(r).err();
  // sendto with a destination (a NULL address is send() on a connected
  // socket); sendmsg always (its destination sits behind a pointer).
  if (auto r = add("sendto", notify, {SCMP_CMP(4, SCMP_CMP_NE, 0)}); !r) return std::move(r).err();
  if (auto r = add("sendmsg", notify, {}); !r) return std::move(r).err();
  if (auto r = add("sendmmsg", notify, {}); !r) return std::move(r).err();
  if (auto r = add("openat2", SCMP_ACT_ERRNO(ENOSYS), {}); !r) return std::move(r).err();
  if (auto r = add("seccomp", SCMP_ACT_ERRNO(EPERM),
                   {SCMP_CMP(0, SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER),
                    SCMP_CMP(1, SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_FILTER_FLAG_NEW_LISTENER)});
      !r)
    return std::move(r).err();
  for (uint64_t req : {uint64_t(PTRACE_ATTACH), uint64_t(PTRACE_SEIZE)})
    if (auto r = add("ptrace", SCMP_ACT_ERRNO(EPERM), {SCMP_CMP32(0, SCMP_CMP_EQ, req)}); !r) return std::move(r).err();
  if (auto r = add("process_vm_writev", SCMP_ACT_ERRNO(EPERM), {}); !r) return std::move(r).err();

  // libseccomp 2.5 exports to a descriptor only; a memfd holds the program.
  int mfd = memfd_create("ccsb-broker-filter", MFD_CLOEXEC);
  if (mfd < 0) return ccsb::make_error(ccsb::errc::io_error, "broker.filter", std::string("memfd_create: ") + std::strerror(errno));
  if (int rc = seccomp_export_bpf(g.c, mfd); rc < 0) {
    close(mfd);
    return lib_error("seccomp_export_bpf", rc);
  }
  off_t size = lseek(mfd, 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) {
    close(mfd);
    return ccsb::make_error(ccsb::errc::unenforceable, "broker.filter", "exported program has a bad size");
  }
  std::vector<sock_filter> prog(static_cast<std::size_t>(size) / sizeof(sock_filter));
  ssize_t n = pread(mfd, prog.data(), static_cast<std::size_t>(size), 0);
  close(mfd);
  if (n != size) return ccsb::make_error(ccsb::errc::io_error, "broker.filter", "short read of the exported program");
  return prog;
}

ccsb::result<std::vector<sock_filter>> build_filter() {
#if CCSB_PRECOMPILED_BPF
  return std::vector<sock_filter>(std::begin(ccsb::precompiled::kBroker), std::end(ccsb::precompiled::kBroker));
#else
  return build_filter_libseccomp();
#endif
}

ccsb::result<int> install_filter(const std::vector<sock_filter>& prog) {
  sock_fprog fp{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
  long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                    SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fp);
  if (fd < 0)
    return ccsb::make_error(ccsb::errc::unenforceable, "broker.filter",
                            std::string("seccomp(SET_MODE_FILTER, NEW_LISTENER|WAIT_KILLABLE_RECV): ") + std::strerror(errno));
  return static_cast<int>(fd);
}

} // namespace ccsb::init
