// egressd/test_attack.cpp — the X3 tests' attacks (test_attack.hpp); only in
// egressd-attack.
#include "test_attack.hpp"

#include "config.hpp"
#include "ccsb/sys/platform.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace egressd {

namespace {

ccsb::result<test_attack> parse_test_attack(std::string_view v) {
  auto eq = v.find('=');
  test_attack a;
  std::string_view kind = v.substr(0, eq);
  if (kind == "open") a.what = test_attack::kind::open;
  else if (kind == "exec") a.what = test_attack::kind::exec;
  else if (kind == "bind") a.what = test_attack::kind::bind;
  else
    return ccsb::make_error(ccsb::errc::invalid_argument, "--test-attack",
                      "'" + std::string(v) + "': expected open=PATH, exec=PATH or bind=ADDR:PORT");
  if (eq == std::string_view::npos || eq + 1 == v.size())
    return ccsb::make_error(ccsb::errc::invalid_argument, "--test-attack", "'" + std::string(v) + "': missing the value after '='");
  a.arg = v.substr(eq + 1);
  if (a.what == test_attack::kind::bind) {
    auto l = parse_listen(a.arg, "--test-attack", true);
    if (!l) return std::move(l).err();
    if (l->is_unix) return ccsb::make_error(ccsb::errc::invalid_argument, "--test-attack", "bind= takes a TCP ADDR:PORT");
  } else if (a.arg.front() != '/') {
    return ccsb::make_error(ccsb::errc::invalid_argument, "--test-attack", "'" + a.arg + "': expected an absolute path");
  }
  return a;
}

} // namespace

ccsb::result<std::vector<test_attack>> take_test_attacks(std::vector<std::string>& args) {
  std::vector<test_attack> out;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    std::string_view v;
    if (a == "--test-attack") {
      if (i + 1 >= args.size()) return ccsb::make_error(ccsb::errc::invalid_argument, "--test-attack", "needs a value");
      v = args[++i];
    } else if (a.rfind("--test-attack=", 0) == 0) {
      v = a.substr(14);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    auto t = parse_test_attack(v);
    if (!t) return std::move(t).err();
    out.push_back(std::move(*t));
  }
  args = std::move(rest);
  return out;
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
    int fd = ccsb::sys::this_platform::socket_cloexec(ss.ss_family, SOCK_STREAM, false);
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
