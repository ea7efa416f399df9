// init/confine/apply_landlock.hpp — applies a ccsb/confine/landlock.hpp ruleset to
// the calling process and everything it starts afterwards (X2).
//
//   apply_landlock(rules) -> what applied (a one-line summary) or an error
//
// A checklist; a failing step is an error (ccsb-init then fails the start):
//   1. ask the kernel for its Landlock ABI; none (ENOSYS, EOPNOTSUPP: not
//      built or disabled at boot) is not an error: the summary says
//      "unavailable: REASON" and nothing is applied (defence in depth, not a
//      requirement);
//   2. handle every file-system right the ABI knows (refer from ABI 2,
//      truncate from 3, device ioctls from 5), TCP bind/connect from ABI 4
//      when the rules restrict TCP, and scope abstract Unix sockets and
//      signals from ABI 6;
//   3. one rule per path (opened O_PATH; a path that does not exist in the
//      sandbox is skipped, any other open error fails): directories get the
//      rights of their class, regular and other files only the file rights;
//   4. PR_SET_NO_NEW_PRIVS, then landlock_restrict_self.
#pragma once

#include "ccsb/confine/landlock.hpp"

#include <string>

namespace ccsb::init {

result<std::string> apply_landlock(const confine::landlock_rules& rules);

} // namespace ccsb::init
