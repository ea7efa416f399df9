// ccsb/sys/seccomp.hpp — the L6 baseline seccomp filter: built with
// libseccomp from the pure table (ccsb/confine/seccomp_table.hpp) and
// exported as a classic BPF program into a sealed memfd, the form `bwrap
// --seccomp FD` reads (the launcher, and ccsb-bpfgen at build time; needs
// libseccomp: link `-lseccomp`).
//
//   baseline_seccomp_program(skipped) -> result<std::vector<sock_filter>>   built now, with libseccomp
//   seccomp_program_memfd(program)    -> result<unique_fd>                 the sealed memfd
//   baseline_seccomp_memfd(skipped)   -> result<unique_fd>                 what the launcher uses
//
// baseline_seccomp_memfd() takes the program compiled into this binary at
// build time where the build made one (CCSB_PRECOMPILED_BPF: init/bpfgen.cpp
// runs baseline_seccomp_program() while building and writes
// <ccsb/precompiled_bpf.hpp>; the same libseccomp, linked statically, the
// same table), else it builds it now. Building it took about 1 ms of every
// launch (issue 9); the test "L6 X1: the precompiled programs are the ones
// libseccomp builds at run time" holds the two to the same bytes.
//
// Each table entry becomes one or more libseccomp rules on the native
// architecture with SCMP_ACT_ERRNO(entry.err):
//   always     one rule, no argument comparison;
//   any_bit    one rule per bit of the mask: (arg & bit) == bit;
//   equals32   one rule: (arg & 0xffffffff) == value;
//   outside32  one rule per block of confine::complement_blocks(allowed):
//              (arg & block mask) == block value, the upper half ignored.
// The bad-architecture action is SCMP_ACT_ERRNO(kForeignAbiErrno), so a call
// through a foreign ABI fails instead of killing the caller (libseccomp's
// default) or running unfiltered. The syscall dispatch is a binary tree
// (SCMP_FLTATR_CTL_OPTIMIZE 2) where libseccomp offers it: every system call
// of every sandboxed program runs the filter.
//
// Fail closed: a required entry whose name libseccomp cannot map to a number
// on the native architecture, a rule libseccomp refuses, a program longer than
// the kernel takes (BPF_MAXINSNS) or a failed export is a typed error whose
// field names the syscall ("seccomp.keyctl"), and the session does not start.
// Optional entries (required == false) the architecture lacks are skipped and
// reported through `skipped`.
#pragma once

#include "ccsb/confine/seccomp_table.hpp"
#include "ccsb/sys/fd.hpp"
#include "ccsb/result.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#if CCSB_PRECOMPILED_BPF
#include <ccsb/precompiled_bpf.hpp>
#endif

namespace ccsb::sys {

// The table spells these out (it is pure); they must be this system's.
static_assert(confine::abi::kCloneNewNs == CLONE_NEWNS && confine::abi::kCloneNewCgroup == CLONE_NEWCGROUP &&
              confine::abi::kCloneNewUts == CLONE_NEWUTS && confine::abi::kCloneNewIpc == CLONE_NEWIPC &&
              confine::abi::kCloneNewUser == CLONE_NEWUSER && confine::abi::kCloneNewPid == CLONE_NEWPID &&
              confine::abi::kCloneNewNet == CLONE_NEWNET && confine::abi::kCloneFiles == CLONE_FILES);
static_assert(confine::abi::kTiocsti == TIOCSTI && confine::abi::kTioclinux == TIOCLINUX,
              "this architecture numbers the terminal ioctls differently: the L6 table needs its values");
static_assert(confine::abi::kAfVsock == AF_VSOCK);
static_assert(confine::abi::kPerLinux == PER_LINUX && confine::abi::kPerLinux32 == PER_LINUX32 &&
              confine::abi::kUname26 == UNAME26 && confine::abi::kAddrNoRandomize == ADDR_NO_RANDOMIZE &&
              confine::abi::kMmapPageZero == MMAP_PAGE_ZERO && confine::abi::kReadImpliesExec == READ_IMPLIES_EXEC);

namespace detail {

class seccomp_ctx {
public:
  explicit seccomp_ctx(scmp_filter_ctx c) : c_(c) {}
  seccomp_ctx(const seccomp_ctx&) = delete;
  seccomp_ctx& operator=(const seccomp_ctx&) = delete;
  ~seccomp_ctx() {
    if (c_) ::seccomp_release(c_);
  }
  scmp_filter_ctx get() const noexcept { return c_; }

private:
  scmp_filter_ctx c_;
};

} // namespace detail

// The libseccomp version this program runs with, for messages and generated files.
inline std::string libseccomp_version() {
  const scmp_version* v = ::seccomp_version();
  if (!v) return "libseccomp";
  return "libseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->micro);
}

namespace detail {

// The argument a table entry looks at, on this architecture: where the kernel
// has CONFIG_CLONE_BACKWARDS2 (s390, cris) clone takes the stack first and the
// flags second.
inline unsigned native_arg(const confine::seccomp_entry& e) {
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
  if (e.name == "clone") return 1;
#endif
  return e.arg;
}

} // namespace detail

// The L6 filter as a BPF program, built now with libseccomp. `skipped`
// (optional) receives the optional entries the native architecture lacks.
inline result<std::vector<sock_filter>> baseline_seccomp_program(std::vector<std::string>* skipped = nullptr) {
  using namespace confine;
  detail::seccomp_ctx ctx(::seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx.get()) return make_error(errc::unenforceable, "seccomp", libseccomp_version() + ": seccomp_init failed");
  if (int rc = ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(kForeignAbiErrno)); rc < 0)
    return make_error(errc::unenforceable, "seccomp",
                      "cannot make foreign system call ABIs fail with an errno (SCMP_FLTATR_ACT_BADARCH): " +
                          std::string(std::strerror(-rc)));
  // A binary tree instead of a linear scan of the syscall numbers; an older
  // libseccomp without it builds the same rules, only slower to evaluate.
  (void)::seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);

  for (const auto& e : kSeccompTable) {
    const std::string name(e.name);
    const std::string field = "seccomp." + name;
    // __NR_SCMP_ERROR for a name libseccomp does not know, a negative pseudo
    // number for a call that exists elsewhere but not on this architecture.
    const int nr = ::seccomp_syscall_resolve_name(name.c_str());
    if (nr < 0) {
      if (e.required)
        return make_error(errc::unenforceable, field,
                          libseccomp_version() +
                              " has no number for this system call on the native architecture; refusing to run "
                              "without its L6 rule (" + std::string(e.why) + ")");
      if (skipped) skipped->push_back(name);
      continue;
    }
    const unsigned arg = detail::native_arg(e);
    auto add = [&](unsigned count, const scmp_arg_cmp* cmp) -> result<void> {
      int rc = ::seccomp_rule_add_exact_array(ctx.get(), SCMP_ACT_ERRNO(static_cast<std::uint32_t>(e.err)), nr, count, cmp);
      if (rc < 0)
        return make_error(errc::unenforceable, field, "seccomp_rule_add: " + std::string(std::strerror(-rc)));
      return ok();
    };
    auto masked = [&](std::uint64_t mask, std::uint64_t value) {
      scmp_arg_cmp c{arg, SCMP_CMP_MASKED_EQ, mask, value};
      return add(1, &c);
    };
    switch (e.match) {
    case arg_match::always:
      if (auto r = add(0, nullptr); !r) return std::move(r).err();
      break;
    case arg_match::any_bit:
      for (unsigned b = 0; b < 64; ++b) {
        const std::uint64_t bit = std::uint64_t{1} << b;
        if (!(e.value & bit)) continue;
        if (auto r = masked(bit, bit); !r) return std::move(r).err();
      }
      break;
    case arg_match::equals32:
      if (auto r = masked(0xffffffffu, e.value); !r) return std::move(r).err();
      break;
    case arg_match::outside32:
      for (const auto& [mask, value] : complement_blocks(e.allowed))
        if (auto r = masked(mask, value); !r) return std::move(r).err();
      break;
    }
  }

  unique_fd fd(::memfd_create("ccsb-seccomp-export", MFD_CLOEXEC));
  if (!fd) return sys_error("memfd_create(ccsb-seccomp-export)");
  if (int rc = ::seccomp_export_bpf(ctx.get(), fd.get()); rc < 0)
    return make_error(errc::unenforceable, "seccomp", "seccomp_export_bpf: " + std::string(std::strerror(-rc)));
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return sys_error("fstat (seccomp export)");
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0 || size % sizeof(sock_filter) != 0 || size / sizeof(sock_filter) > BPF_MAXINSNS)
    return make_error(errc::unenforceable, "seccomp",
                      "the exported program has " + std::to_string(size) + " bytes; the kernel takes 1 to " +
                          std::to_string(BPF_MAXINSNS) + " instructions of " + std::to_string(sizeof(sock_filter)));
  std::vector<sock_filter> prog(size / sizeof(sock_filter));
  if (::pread(fd.get(), prog.data(), size, 0) != static_cast<ssize_t>(size)) return sys_error("pread (seccomp export)");
  return prog;
}

// A BPF program in a sealed memfd at offset 0, ready to be placed at
// kSeccompFd for `bwrap --seccomp`.
inline result<unique_fd> seccomp_program_memfd(std::span<const sock_filter> prog) {
  if (prog.empty() || prog.size() > BPF_MAXINSNS)
    return make_error(errc::unenforceable, "seccomp",
                      "the program has " + std::to_string(prog.size()) + " instructions; the kernel takes 1 to " +
                          std::to_string(BPF_MAXINSNS));
  unique_fd fd(::memfd_create("ccsb-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return sys_error("memfd_create(ccsb-seccomp)");
  if (!write_all(fd.get(), std::string_view(reinterpret_cast<const char*>(prog.data()), prog.size_bytes())))
    return sys_error("write (seccomp memfd)");
  // Nobody changes the program between here and bwrap reading it.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return sys_error("fcntl(F_ADD_SEALS) (seccomp memfd)");
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return sys_error("lseek (seccomp memfd)");
  return fd;
}

// The L6 filter in a sealed memfd: the build's program where there is one,
// else built now. `skipped` (optional) receives the optional entries the
// native architecture lacks.
inline result<unique_fd> baseline_seccomp_memfd(std::vector<std::string>* skipped = nullptr) {
#if CCSB_PRECOMPILED_BPF
  if (skipped)
    for (std::string_view n : precompiled::kBaselineSkipped) skipped->emplace_back(n);
  return seccomp_program_memfd(precompiled::kBaseline);
#else
  auto prog = baseline_seccomp_program(skipped);
  if (!prog) return std::move(prog).err();
  return seccomp_program_memfd(*prog);
#endif
}

} // namespace ccsb::sys
