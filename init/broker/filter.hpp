// init/broker/filter.hpp — the notification filter of the X1 broker.
//
//   build_filter()          -> result<std::vector<sock_filter>>  once, in the supervisor: the program
//                              compiled in at build time (CCSB_PRECOMPILED_BPF, init/bpfgen.cpp), else
//   build_filter_libseccomp()  built now with libseccomp (bpfgen runs this one)
//   install_filter(prog)    -> result<int>  the listener; called in the command's process, before exec
//
// The filter (default allow, native ABI only; foreign ABIs fail with EPERM)
// sends to the broker every call that can create, write, rename or remove a
// name, and every bind/connect (the address family sits behind a pointer
// seccomp cannot read):
//   open (arg1) / openat (arg2) with O_CREAT, O_WRONLY, O_RDWR or O_TRUNC
//   (O_TMPFILE includes O_WRONLY/O_RDWR); creat; mknod(at); mkdir(at);
//   link(at); symlink(at); rename, renameat, renameat2; truncate;
//   unlink(at); rmdir; bind; connect; sendto with a destination address
//   (arg 4 not NULL); sendmsg; sendmmsg (the broker sends the first message
//   only, notify_loop.hpp); umask (observed only, answered CONTINUE: the
//   broker's per-thread umask cache, notify_loop.hpp);
//   access changes, decided on the object like a write: chmod, fchmod,
//   fchmodat, fchmodat2, chown, lchown, fchown, fchownat, setxattr,
//   lsetxattr, fsetxattr, removexattr, lremovexattr, fremovexattr (ACLs are
//   system.posix_acl_* attributes);
//   prlimit64 with a pid (arg 0 not 0) AND a new limit (arg 2 not NULL): the
//   command may change its own limits and its fellow commands', never a
//   supervisor's (ccsb/broker/object_decide.hpp decide_prlimit; the broker
//   answers CONTINUE or EPERM). setrlimit and prlimit64(0, ...) act on the
//   caller only and are not sent.
// Denied outright, for the command only:
//   openat2 -> ENOSYS (its flags sit in a struct; callers fall back to openat);
//   setxattrat, removexattrat -> ENOSYS (likewise; callers fall back to
//     setxattr and removexattr);
//   seccomp(SECCOMP_SET_MODE_FILTER) with SECCOMP_FILTER_FLAG_NEW_LISTENER
//     -> EPERM (a nested listener; the kernel refuses a second one in the
//     same chain with EBUSY too);
//   ptrace(PTRACE_ATTACH / PTRACE_SEIZE) and process_vm_writev -> EPERM:
//     processes outside this filter (ccsb-init, the sandbox's PID 1) must
//     not be steered into creating names for the command. Tracing its own
//     children (PTRACE_TRACEME: gdb ./prog, strace CMD) keeps working.
// Reads (open/openat without those flags) never reach the broker.
//
// Loaded with SECCOMP_FILTER_FLAG_NEW_LISTENER | WAIT_KILLABLE_RECV: once the
// broker has received a notification, a non-fatal signal no longer
// interrupts the call, so a call the broker has already performed (an
// O_CREAT|O_EXCL) is never restarted into a spurious EEXIST.
#pragma once

#include "ccsb/result.hpp"

#include <linux/filter.h>

#include <vector>

namespace ccsb::init {

ccsb::result<std::vector<sock_filter>> build_filter();
ccsb::result<std::vector<sock_filter>> build_filter_libseccomp();
// In the process that will exec the command (no_new_privs is set by bwrap).
ccsb::result<int> install_filter(const std::vector<sock_filter>& prog);

} // namespace ccsb::init
