// egressd/confine.cpp — what egressd's confinement (X3) is on every platform:
// the user a root egressd switches to, the report (the ready event's
// `confinement`, the degraded line) and --test-attack. The layers
// themselves are per platform, chosen by the build (egressd/CMakeLists.txt):
// confine_linux.cpp (privileges, Landlock, seccomp) and confine_macos.cpp
// (privileges only; why: confine.hpp).
#include "confine.hpp"

#include "ccsb/launch/platform.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace egressd {

namespace detail {

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

} // namespace detail

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

ccsb::protocol::egressd_events::test_attack run_test_attack(const test_attack& a) {
  using ccsb::protocol::egressd_events::attack_kind;
  ccsb::protocol::egressd_events::test_attack out;
  out.target = a.arg;
  int err = 0;
  switch (a.what) {
  case test_attack::kind::open: {
    out.attack = attack_kind::open;
    out.step = "open";
    int fd = ::open(a.arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    else err = errno;
    break;
  }
  case test_attack::kind::exec: {
    out.attack = attack_kind::exec;
    out.step = "execve";
    std::string marker = "egressd-test-attack-exec-succeeded";
    char* argv[] = {const_cast<char*>(a.arg.c_str()), marker.data(), nullptr};
    char* envp[] = {nullptr};
    ::execve(a.arg.c_str(), argv, envp);
    err = errno; // execve returns only when it failed
    break;
  }
  case test_attack::kind::bind: {
    out.attack = attack_kind::bind;
    auto spec = parse_listen(a.arg, "--test-attack", true); // validated by the parser already
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (spec->address.v6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(spec->port);
      std::memcpy(&in6->sin6_addr, spec->address.b.data(), 16);
      len = sizeof *in6;
    } else {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      in->sin_family = AF_INET;
      in->sin_port = htons(spec->port);
      std::memcpy(&in->sin_addr, spec->address.b.data(), 4);
      len = sizeof *in;
    }
    out.step = "socket";
    int fd = ccsb::launch::this_platform::socket_cloexec(ss.ss_family, SOCK_STREAM, false);
    if (fd < 0) {
      err = errno;
      break;
    }
    out.step = "bind";
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) err = errno;
    ::close(fd);
    break;
  }
  }
  out.blocked = err != 0;
  if (err) {
    out.error_number = err;
    out.error = std::strerror(err);
  }
  return out;
}

} // namespace egressd
