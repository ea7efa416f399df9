// egressd/confine.hpp — egressd confines itself (X3, N9). The layers are
// per platform, chosen by the build (egressd/CMakeLists.txt): Linux
// confine_linux.cpp, macOS confine_macos.cpp; what both share: confine.cpp.
//
// run_server() calls confine() once its listeners, the c-ares channel
// (which has read /etc/resolv.conf), the proxy channel, the signal handlers
// and the events output are set up, and before it writes `ready`. From then
// on egressd needs no file, no privilege and only the system calls of its
// event loop, c-ares, the splice relay and its logging. Three layers, each
// of which stops an attack on its own (tests/egressd/test_confine.cpp):
//
//   privileges  PR_SET_NO_NEW_PRIVS; started as root, egressd switches to
//               --user UID[:GID] or to `nobody` (supplementary groups
//               cleared, the capability bounding set emptied first); every
//               capability set is then emptied (capset) and the ambient set
//               cleared, whoever started it; switching back to root is
//               checked to fail. The parent-death signal the launcher set
//               (the kernel clears it when the uid changes) is set again.
//               egressd is made non-dumpable (no ptrace or /proc access by
//               another process of its uid, no core file).
//   landlock    a ruleset that handles every file-system right of the ABI
//               and grants none (no file can be opened, created, removed,
//               executed), TCP bind handled and not granted (ABI 4; connect
//               stays allowed: egressd dials upstreams), abstract Unix
//               sockets and signals scoped (ABI 6).
//   seccomp     an allowlist (seccomp_allowlist.hpp). Anything else traps
//               (SECCOMP_RET_TRAP): a SIGSYS handler makes the call return
//               -EPERM and writes one stderr line per system call number,
//               the first time only. No call is ever a kill.
//
// NO_NEW_PRIVS is set whenever any layer is on. A layer the kernel lacks
// (no Landlock, Landlock disabled at boot, no seccomp filter mode) is
// skipped and reported (ready event, one stderr line); any other failure is
// an error and egressd does not start. `--confine LAYERS` chooses layers
// (tests prove each alone), `--no-confine` none (debugging; both are named
// on stderr and in the ready event).
#pragma once

#include "config.hpp"

#include "ccsb/protocol/egressd_events.hpp"
#include "ccsb/result.hpp"

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace egressd {

struct confine_report {
  unsigned requested{0};       // layer bits asked for (config.hpp kConfine*)
  std::string how;             // "default", "--no-confine", "--confine privileges,seccomp"
  bool no_new_privs{false};
  std::uint32_t uid{0}, gid{0};  // after confinement
  bool switched_user{false};     // was root, now uid/gid
  bool capabilities_dropped{false}; // effective, permitted, inheritable, ambient all empty
  int landlock_abi{0};           // the ABI applied; 0: not applied
  std::string landlock;          // "applied", "off", "unavailable: ..."
  bool landlock_tcp_bind{false}; // TCP bind denied (ABI >= 4)
  bool landlock_scoped{false};   // abstract Unix sockets and signals scoped (ABI >= 6)
  std::string seccomp;           // "allowlist", "off", "unavailable: ..."
  std::size_t seccomp_syscalls{0};
  // Work the confinement leaves for the event loop right after `ready`, or
  // nullptr: on Linux with the seccomp allowlist, loading the names the
  // SIGSYS handler logs denied calls by (until then it logs numbers; pure
  // user-space work, allowed by the filter). run_server() posts it.
  void (*after_ready)(){nullptr};

  // True when Landlock or seccomp closes the file system (egressd then
  // leaves its Unix socket files for the next start to replace).
  bool filesystem_closed() const { return landlock_abi > 0 || seccomp == "allowlist"; }
  // The ready event's "confinement" (ccsb/protocol/egressd_events.hpp).
  ccsb::protocol::egressd_events::confinement reported() const;
  // One stderr line when something asked for or expected is not in place
  // (a layer off or unavailable); empty when all three layers are on.
  std::string degraded_line() const;
};

ccsb::result<confine_report> confine(const options& opts);

// Shared by confine_linux.cpp and confine_macos.cpp (confine.cpp).
ccsb::error sys_error(const std::string& field, const std::string& what, int err = errno);

// The ids a root egressd switches to: --user, else `nobody` (never uid or
// gid 0). Not root: nullopt, or an error when --user names other ids than
// the effective ones (egressd cannot switch).
ccsb::result<std::optional<std::pair<uid_t, gid_t>>> target_user(const options& o, bool root, uid_t eu, gid_t eg);

} // namespace egressd
