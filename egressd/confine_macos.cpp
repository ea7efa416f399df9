// egressd/confine_macos.cpp — egressd's confinement on macOS (X3, N9): the
// privileges layer in its POSIX part; Landlock and seccomp are reported
// unavailable. Why no kernel filter here: confine.hpp. Built instead of
// confine_linux.cpp on macOS (egressd/CMakeLists.txt); on Linux CI it is
// compiled with CCSB_LAUNCH_SIMULATE_MACOS and run by
// tests/macos/test_egressd_confine_macos.cpp (the same POSIX calls exist
// there), so what it decides is tested; that a Mac accepts each call is
// not.
#include "confine.hpp"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace egressd {

namespace {

using ccsb::errc;
using ccsb::make_error;

constexpr const char* kNoLandlock = "unavailable: macOS has no Landlock";
constexpr const char* kNoSeccomp = "unavailable: macOS has no seccomp";

ccsb::result<void> drop_privileges(const options& o, confine_report& r) {
  const uid_t ru = ::getuid(), eu = ::geteuid();
  const gid_t eg = ::getegid();
  auto target = target_user(o, ru == 0 || eu == 0, eu, eg);
  if (!target) return std::move(target).err();
  if (!*target) return ccsb::ok();
  const uid_t uid = (*target)->first;
  const gid_t gid = (*target)->second;
  if (::setgroups(0, nullptr) != 0) return sys_error("confine.user", "setgroups(0)");
  // setgid/setuid as root set the real, effective and saved ids alike.
  if (::setgid(gid) != 0) return sys_error("confine.user", "setgid(" + std::to_string(gid) + ")");
  if (::setuid(uid) != 0) return sys_error("confine.user", "setuid(" + std::to_string(uid) + ")");
  if (::getuid() == 0 || ::geteuid() == 0 || ::getgid() == 0 || ::getegid() == 0)
    return make_error(errc::io_error, "confine.user", "still uid or gid 0 after the switch");
  if (::setuid(0) == 0)
    return make_error(errc::io_error, "confine.user", "setuid(0) succeeded after the switch: privileges not dropped");
  r.switched_user = true;
  return ccsb::ok();
}

} // namespace

ccsb::result<confine_report> confine(const options& o) {
  confine_report r;
  r.requested = o.confine_layers;
  r.how = o.confine_how;
  r.landlock = (o.confine_layers & kConfineLandlock) ? kNoLandlock : "off";
  r.seccomp = (o.confine_layers & kConfineSeccomp) ? kNoSeccomp : "off";
  if (o.confine_layers & kConfinePrivileges)
    if (auto p = drop_privileges(o, r); !p) return std::move(p).err();
  r.uid = static_cast<std::uint32_t>(::geteuid());
  r.gid = static_cast<std::uint32_t>(::getegid());
  return r;
}

} // namespace egressd
