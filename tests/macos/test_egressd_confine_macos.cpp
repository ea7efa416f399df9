// egressd's macOS confinement (X3, N9; egressd/confine_macos.cpp, why it is
// the privileges layer only: egressd/confine.hpp), compiled and run on Linux
// with every macOS choice made (CCSB_LAUNCH_SIMULATE_MACOS) together with
// the shared egressd/confine.cpp. Each confine() runs in a forked child (it
// may switch that process to nobody). What this proves: the macOS choice
// reports Landlock and seccomp as unavailable on every start (the ready
// event and the degraded stderr line), applies the POSIX user switch when
// root, and refuses an impossible --user. What it does not: that a Mac
// accepts these calls the same way (they are POSIX; only a Mac runs them).
#include "confine.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct outcome {
  bool ok{false};
  std::string error_field, error;
  std::string landlock, seccomp, degraded, layers;
  bool switched{false}, no_new_privs{true}, after_ready{true}, back_to_root{true};
  unsigned long uid{0}, gid{0};
};

// confine(o) in a child; its report comes back one field a line.
outcome confine_in_child(const egressd::options& o) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(p[0]);
    std::ostringstream out;
    auto r = egressd::confine(o);
    if (!r) {
      out << "0\n" << r.err().field << "\n" << r.err().message << "\n";
    } else {
      out << "1\n\n\n" << r->landlock << "\n" << r->seccomp << "\n" << r->degraded_line() << "\n"
          << r->reported().layers << "\n" << r->switched_user << "\n" << r->no_new_privs << "\n"
          << (r->after_ready != nullptr) << "\n" << (::setuid(0) == 0 && ::geteuid() == 0) << "\n" << r->uid << "\n"
          << r->gid << "\n";
    }
    const std::string s = out.str();
    (void)!::write(p[1], s.data(), s.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  std::istringstream in(text);
  std::vector<std::string> f;
  for (std::string line; std::getline(in, line);) f.push_back(line);
  REQUIRE(f.size() >= 3);
  outcome c;
  c.ok = f[0] == "1";
  c.error_field = f[1];
  c.error = f[2];
  if (c.ok) {
    REQUIRE(f.size() == 13);
    c.landlock = f[3];
    c.seccomp = f[4];
    c.degraded = f[5];
    c.layers = f[6];
    c.switched = f[7] == "1";
    c.no_new_privs = f[8] == "1";
    c.after_ready = f[9] == "1";
    c.back_to_root = f[10] == "1";
    c.uid = std::stoul(f[11]);
    c.gid = std::stoul(f[12]);
  }
  return c;
}

} // namespace

TEST_CASE("X3: egressd's macOS confinement says on every start that Landlock and seccomp are unavailable",
          "[X3][N9][B2]") {
  egressd::options o; // the default: every layer asked for
  auto c = confine_in_child(o);
  INFO(c.error);
  REQUIRE(c.ok);
  CHECK(c.layers == "privileges,landlock,seccomp");
  CHECK(c.landlock == "unavailable: macOS has no Landlock");
  CHECK(c.seccomp == "unavailable: macOS has no seccomp");
  CHECK(c.degraded.find("Landlock unavailable: macOS has no Landlock: the file system stays open") != std::string::npos);
  CHECK(c.degraded.find("seccomp unavailable: macOS has no seccomp: all system calls stay open") != std::string::npos);
  CHECK_FALSE(c.no_new_privs); // no such thing on macOS: not claimed
  CHECK_FALSE(c.after_ready);  // no seccomp names to load
  if (::geteuid() == 0) {
    // The privileges layer: a root egressd becomes nobody, for good.
    CHECK(c.switched);
    CHECK(c.uid != 0);
    CHECK(c.gid != 0);
    CHECK_FALSE(c.back_to_root);
  } else {
    CHECK_FALSE(c.switched);
    CHECK(c.uid == ::geteuid());
  }
}

TEST_CASE("X3: egressd's macOS confinement switches a root egressd to --user and refuses an impossible --user",
          "[X3][N9][B2]") {
  egressd::options o;
  o.user_set = true;
  o.user_uid = 12345;
  o.user_gid = 12346;
  auto c = confine_in_child(o);
  if (::geteuid() == 0) {
    INFO(c.error);
    REQUIRE(c.ok);
    CHECK(c.switched);
    CHECK(c.uid == 12345);
    CHECK(c.gid == 12346);
    CHECK_FALSE(c.back_to_root);
  } else {
    REQUIRE_FALSE(c.ok);
    CHECK(c.error_field == "--user");
    CHECK(c.error.find("cannot switch to 12345:12346") != std::string::npos);
  }
}

TEST_CASE("X3: egressd's macOS confinement with --no-confine changes nothing and says it is off", "[X3][B2]") {
  egressd::options o;
  o.confine_layers = 0;
  o.confine_how = "--no-confine";
  auto c = confine_in_child(o);
  REQUIRE(c.ok);
  CHECK(c.landlock == "off");
  CHECK(c.seccomp == "off");
  CHECK_FALSE(c.switched);
  CHECK(c.uid == ::geteuid());
  CHECK(c.degraded.find("confinement off (--no-confine") != std::string::npos);
}
