// ccsb/broker/object_decide.hpp — X1 decisions on an object the broker has
// already fetched (pure: no I/O). The broker (init/broker/notify_loop.cpp)
// holds the object as a descriptor of its own and passes what it read back
// from it: its kernel path, whether it is a directory, its modes.
//
//   decide_attr(rules, path, change)        -> verdict   chmod, chown, xattrs
//   decide_setid(target, is_dir, old, new)  -> verdict   set-id bits on files
//   decide_prlimit(facts)                   -> verdict   prlimit64 on another pid
//
// Access changes (issue 26 item 5): chmod/fchmod/fchmodat/fchmodat2,
// chown/lchown/fchown/fchownat and set/remove of an extended attribute
// (ACLs are `system.posix_acl_*` attributes) change who may write an object
// later, so they are decided like a write of the object (decide(), op::write:
// the P7 names, every `.git` entry itself, the git paths in a git directory,
// the absent write-denied names), and below a writable root two more are
// denied because they hand a directory to other local accounts, who could
// then replace a protected entry in it (plant `sub/.git`, swap `.env`):
//  * a mode that makes a directory writable for others (S_IWOTH) without
//    the sticky bit, when it was not already;
//  * an ACL set on a directory (its entries can grant any account write;
//    removing one only takes access away and is allowed).
// Violations are `file-write*` with the object's path.
//
// Limits (issue 26 item 4): the command may set the limits of its own
// process (pid 0, its pid or a thread of it) and of any process under the
// broker's filter (those have more seccomp filters than the supervisor:
// the filter is installed in each command before its exec). Anything else
// is a supervisor (ccsb-init, the sandbox's PID 1 and broker, or a child of
// it before its exec): RLIMIT_CPU would get it SIGKILLed, RLIMIT_NOFILE 0
// stops its poll. Refused with EPERM, violation `process-limit` `pid:N`.
#pragma once

#include "ccsb/broker/decide.hpp"

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>

namespace ccsb::broker {

inline constexpr std::string_view kActionLimit = "process-limit";

enum class attr_kind {
  mode,      // chmod family: new_mode holds the requested mode
  owner,     // chown family
  xattr,     // an extended attribute set or removed (not an ACL set)
  acl_set,   // system.posix_acl_access / system.posix_acl_default set
};

struct attr_change {
  attr_kind kind{attr_kind::mode};
  bool is_dir{false};
  mode_t old_mode{0}; // the object's mode now (st_mode)
  mode_t new_mode{0}; // kind == mode: the mode asked for
};

// An extended attribute name that sets an ACL.
constexpr bool is_acl_name(std::string_view n) noexcept {
  return n == "system.posix_acl_access" || n == "system.posix_acl_default";
}

// Set-id bits (issue 27, L8): no file the command creates or changes gains
// S_ISUID or S_ISGID (a directory may: there they run nothing, S_ISGID only
// picks the group of new entries). On the host such a file runs as its
// owner for whoever starts it, and a root launcher presents root-owned
// binds to the session uid as their owner (idmapped mounts,
// ccsb/launch/linux/session_uid.hpp): a file created there belongs to root
// on disk. Bits the object already had may stay. Refused everywhere (the
// private /tmp too: nothing there needs them); violation `file-write*`.
// decide_attr checks it for the chmod family; the broker for the mode of a
// file it creates (open with O_CREAT or O_TMPFILE, creat, mknod). EPERM, as
// the kernel answers a chmod it does not permit.
inline verdict decide_setid(std::string_view target, bool is_dir, mode_t old_mode, mode_t new_mode) {
  const mode_t added = new_mode & ~old_mode & (S_ISUID | S_ISGID);
  if (added && !is_dir)
    return verdict::deny(kActionWrite, std::string(target),
                         std::string("X1: a set-") + ((added & S_ISUID) ? "user" : "group") +
                             "-ID bit on a file (it would run as the file's owner on the host)",
                         EPERM);
  return verdict::allow();
}

inline verdict decide_attr(const rule_set& rules, std::string_view path, const attr_change& c) {
  if (c.kind == attr_kind::mode)
    if (auto v = decide_setid(path, c.is_dir, c.old_mode, c.new_mode); !v) return v;
  if (auto v = decide(rules, op::write, path); !v) return v;
  if (!root_of(rules, path) || !c.is_dir) return verdict::allow();
  if (c.kind == attr_kind::mode && (c.new_mode & S_IWOTH) && !(c.old_mode & S_IWOTH) && !(c.new_mode & S_ISVTX))
    return verdict::deny(kActionWrite, std::string(path),
                         "X1: a directory below a writable root made writable for every account");
  if (c.kind == attr_kind::acl_set)
    return verdict::deny(kActionWrite, std::string(path), "X1: an ACL set on a directory below a writable root");
  return verdict::allow();
}

struct prlimit_facts {
  pid_t target{0};              // the pid argument, in the caller's pid namespace
  bool same_pid_namespace{true}; // the caller's pid namespace is the supervisor's
  bool target_is_caller{false};  // target is the caller's tgid or one of its threads
  int target_filters{-1};        // Seccomp_filters of the target (-1: unknown)
  int supervisor_filters{-1};    // Seccomp_filters of the supervisor (-1: unknown)
};

inline verdict decide_prlimit(const prlimit_facts& f) {
  if (f.target == 0 || f.target_is_caller) return verdict::allow();
  const std::string target = "pid:" + std::to_string(f.target);
  if (!f.same_pid_namespace)
    return verdict::deny(kActionLimit, target, "X1: prlimit of a pid in another pid namespace (fail closed)");
  if (f.target_filters < 0 || f.supervisor_filters < 0)
    return verdict::deny(kActionLimit, target, "X1: prlimit of a process whose filters cannot be read (fail closed)");
  if (f.target_filters > f.supervisor_filters) return verdict::allow();
  return verdict::deny(kActionLimit, target, "X1: prlimit of a supervisor process");
}

} // namespace ccsb::broker
