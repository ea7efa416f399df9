// egressd/confine.cpp — what egressd's confinement (X3) is on every platform:
// the user a root egressd switches to and the report (the ready event's
// `confinement`, the degraded line). The layers themselves are per
// platform, chosen by the build (egressd/CMakeLists.txt): confine_linux.cpp
// (privileges, Landlock, seccomp) and confine_macos.cpp (privileges only;
// why: confine.hpp).
#include "confine.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace egressd {

ccsb::error sys_error(const std::string& field, const std::string& what, int err) {
  return ccsb::make_error(ccsb::errc::io_error, field, what + ": " + std::strerror(err));
}

ccsb::result<std::optional<std::pair<uid_t, gid_t>>> target_user(const options& o, bool root, uid_t eu, gid_t eg) {
  using ccsb::errc;
  using ccsb::make_error;
  if (!root) {
    if (o.user_set && (o.user_uid != eu || o.user_gid != eg))
      return make_error(errc::invalid_argument, "--user",
                        "egressd runs as uid " + std::to_string(eu) + " (not root) and cannot switch to " +
                            std::to_string(o.user_uid) + ":" + std::to_string(o.user_gid));
    return std::optional<std::pair<uid_t, gid_t>>();
  }
  if (o.user_set) return std::optional<std::pair<uid_t, gid_t>>(std::pair<uid_t, gid_t>(o.user_uid, o.user_gid));
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  int e = ::getpwnam_r("nobody", &pw, buf.data(), buf.size(), &found);
  if (!found)
    return make_error(errc::io_error, "confine.user",
                      std::string("egressd runs as root and the user database has no 'nobody'") +
                          (e ? std::string(" (") + std::strerror(e) + ")" : std::string()) + ": give --user UID[:GID]");
  if (pw.pw_uid == 0 || pw.pw_gid == 0)
    return make_error(errc::io_error, "confine.user", "'nobody' is uid or gid 0: give --user UID[:GID]");
  return std::optional<std::pair<uid_t, gid_t>>(std::pair<uid_t, gid_t>(pw.pw_uid, pw.pw_gid));
}

namespace {

std::string layer_names(unsigned layers) {
  std::string s;
  auto add = [&](unsigned bit, const char* name) {
    if (!(layers & bit)) return;
    if (!s.empty()) s += ',';
    s += name;
  };
  add(kConfinePrivileges, "privileges");
  add(kConfineLandlock, "landlock");
  add(kConfineSeccomp, "seccomp");
  return s.empty() ? "none" : s;
}

} // namespace

ccsb::protocol::egressd_events::confinement confine_report::reported() const {
  ccsb::protocol::egressd_events::confinement c;
  c.layers = layer_names(requested);
  c.how = how;
  c.no_new_privs = no_new_privs;
  c.uid = uid;
  c.gid = gid;
  c.switched_user = switched_user;
  c.capabilities_dropped = capabilities_dropped;
  c.landlock_abi = landlock_abi;
  c.landlock_status = landlock;
  c.landlock_tcp_bind = landlock_tcp_bind;
  c.landlock_scoped = landlock_scoped;
  c.seccomp = seccomp;
  c.seccomp_syscalls = seccomp_syscalls;
  return c;
}

std::string confine_report::degraded_line() const {
  std::vector<std::string> parts;
  if (requested != kConfineAll) {
    const unsigned off = kConfineAll & ~requested;
    parts.push_back("confinement " + std::string(requested == 0 ? "off" : "layers off: " + layer_names(off)) + " (" +
                    how + "; for debugging only)");
  }
  if (landlock.rfind("unavailable", 0) == 0) parts.push_back("Landlock " + landlock + ": the file system stays open");
  else if (landlock_abi > 0 && !landlock_tcp_bind)
    parts.push_back("Landlock ABI " + std::to_string(landlock_abi) + " cannot restrict TCP bind (needs ABI 4)");
  if (seccomp.rfind("unavailable", 0) == 0) parts.push_back("seccomp " + seccomp + ": all system calls stay open");
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

} // namespace egressd
