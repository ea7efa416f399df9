#include "confine/apply_landlock.hpp"

#include "io.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

// Debian 12's kernel headers describe ABI 3; the later ABIs' values are
// fixed by the kernel's UAPI (include/uapi/linux/landlock.h).
namespace {

using ccsb::init::errno_text;

constexpr std::uint64_t kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2, kReadDir = 1ULL << 3,
                        kRemoveDir = 1ULL << 4, kRemoveFile = 1ULL << 5, kMakeChar = 1ULL << 6,
                        kMakeDir = 1ULL << 7, kMakeReg = 1ULL << 8, kMakeSock = 1ULL << 9, kMakeFifo = 1ULL << 10,
                        kMakeBlock = 1ULL << 11, kMakeSym = 1ULL << 12, kRefer = 1ULL << 13,
                        kTruncate = 1ULL << 14, kIoctlDev = 1ULL << 15;
constexpr std::uint64_t kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;
constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0, kScopeSignal = 1ULL << 1;
constexpr int kRulePathBeneath = 1, kRuleNetPort = 2;
constexpr unsigned kCreateRulesetVersion = 1U << 0;

struct ruleset_attr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
struct __attribute__((packed)) path_beneath_attr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
struct net_port_attr {
  std::uint64_t allowed_access;
  std::uint64_t port;
};

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

} // namespace

namespace ccsb::init {

result<std::string> apply_landlock(const confine::landlock_rules& rules) {
  // 1. the ABI
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  if (abi < 0) {
    if (errno == ENOSYS) return std::string("unavailable: the kernel has no Landlock");
    if (errno == EOPNOTSUPP) return std::string("unavailable: Landlock is disabled at boot");
    return make_error(errc::io_error, "landlock", errno_text("landlock_create_ruleset(version)"));
  }
  // 2. what is handled
  std::uint64_t fs = kExecute | kWriteFile | kReadFile | kReadDir | kRemoveDir | kRemoveFile | kMakeChar | kMakeDir |
                     kMakeReg | kMakeSock | kMakeFifo | kMakeBlock | kMakeSym;
  if (abi >= 2) fs |= kRefer;
  if (abi >= 3) fs |= kTruncate;
  if (abi >= 5) fs |= kIoctlDev;
  const std::uint64_t file_rights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
  ruleset_attr attr{fs, 0, 0};
  const bool tcp = rules.restrict_tcp && abi >= 4;
  if (tcp) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (abi >= 6) {
    if (rules.scope_abstract_unix) attr.scoped |= kScopeAbstractUnix;
    if (rules.scope_signal) attr.scoped |= kScopeSignal;
  }
  // The attribute size tells the kernel which fields exist (older ABIs take
  // the shorter struct).
  std::size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? offsetof(ruleset_attr, scoped) : sizeof(std::uint64_t);
  fd_guard rs{static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0))};
  if (rs.fd < 0) return make_error(errc::io_error, "landlock", errno_text("landlock_create_ruleset"));

  // 3. the rules
  const std::uint64_t rx = kExecute | kReadFile | kReadDir;
  const std::uint64_t proc = kReadFile | kReadDir | kWriteFile;
  auto add_path = [&](const std::string& p, std::uint64_t rights) -> result<void> {
    fd_guard f{::open(p.c_str(), O_PATH | O_CLOEXEC)};
    if (f.fd < 0) {
      if (errno == ENOENT) return ok(); // not in this sandbox
      return make_error(errc::io_error, "landlock", errno_text("open " + p));
    }
    struct stat st{};
    if (::fstat(f.fd, &st) != 0) return make_error(errc::io_error, "landlock", errno_text("fstat " + p));
    path_beneath_attr pb{(S_ISDIR(st.st_mode) ? rights : rights & file_rights) & fs, f.fd};
    if (pb.allowed_access == 0) return ok();
    if (::syscall(SYS_landlock_add_rule, rs.fd, kRulePathBeneath, &pb, 0) != 0)
      return make_error(errc::io_error, "landlock", errno_text("landlock_add_rule " + p));
    return ok();
  };
  if (rules.list_everywhere)
    if (auto r = add_path("/", kReadDir); !r) return std::move(r).err();
  for (const auto& p : rules.read_exec)
    if (auto r = add_path(p, rx); !r) return std::move(r).err();
  for (const auto& p : rules.read_write)
    if (auto r = add_path(p, fs); !r) return std::move(r).err();
  for (const auto& p : rules.proc_like)
    if (auto r = add_path(p, proc); !r) return std::move(r).err();
  if (tcp)
    for (auto port : rules.connect_ports) {
      net_port_attr np{kNetConnectTcp, port};
      if (::syscall(SYS_landlock_add_rule, rs.fd, kRuleNetPort, &np, 0) != 0)
        return make_error(errc::io_error, "landlock", errno_text("landlock_add_rule (TCP port " + std::to_string(port) + ")"));
    }

  // 4. restrict
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return make_error(errc::io_error, "landlock", errno_text("prctl(PR_SET_NO_NEW_PRIVS)"));
  if (::syscall(SYS_landlock_restrict_self, rs.fd, 0) != 0)
    return make_error(errc::io_error, "landlock", errno_text("landlock_restrict_self"));

  std::string summary = "abi " + std::to_string(abi) + ": file system";
  if (tcp) summary += ", tcp (connect to " + std::to_string(rules.connect_ports.size()) + " proxy ports only, no bind)";
  else if (rules.restrict_tcp) summary += ", tcp not restricted (needs ABI 4)";
  if (attr.scoped & kScopeAbstractUnix) summary += ", abstract unix sockets scoped";
  if (attr.scoped & kScopeSignal) summary += ", signals scoped";
  if (abi < 6 && (rules.scope_abstract_unix || rules.scope_signal)) summary += ", no scoping (needs ABI 6)";
  return summary;
}

} // namespace ccsb::init
