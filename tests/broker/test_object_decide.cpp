// X1 (issue 26 items 4, 5): the decisions on an object the broker holds,
// without a kernel (ccsb/broker/object_decide.hpp).
#include <catch2/catch.hpp>

#include "ccsb/broker/object_decide.hpp"
#include "ccsb/protocol/supervisor.hpp"

using namespace ccsb::broker;

namespace {
rule_set dispatch_rules() { return {{"/w"}, {".env", "*.key"}, {"/w/.bashrc"}, true, true, false, {}}; }
attr_change mode_change(bool dir, mode_t from, mode_t to) { return {attr_kind::mode, dir, from, to}; }
} // namespace

TEST_CASE("X1: access changes of write-denied objects and .git entries are denied like writes", "[X1][P5][P7]") {
  auto r = dispatch_rules();
  for (const char* p : {"/w/.git", "/w/sub/.git", "/w/sub/.git/hooks", "/w/sub/.git/hooks/pre-commit", "/w/.git/config",
                        "/w/.env", "/w/a/deploy.key", "/w/.bashrc"}) {
    for (attr_kind k : {attr_kind::mode, attr_kind::owner, attr_kind::xattr, attr_kind::acl_set}) {
      INFO(p << " kind " << static_cast<int>(k));
      auto v = decide_attr(r, p, {k, false, 0644, 0600});
      CHECK_FALSE(v.allowed);
      CHECK(v.action == "file-write*");
      CHECK(v.target == p);
    }
  }
  for (const char* p : {"/w/a.txt", "/w/.git/objects", "/w/.git/index", "/tmp/x.key.txt", "/w"})
    CHECK(decide_attr(r, p, mode_change(false, 0644, 0777)).allowed);
}

TEST_CASE("X1: below a root, a directory is not made writable for every account nor given an ACL", "[X1]") {
  auto r = dispatch_rules();
  CHECK_FALSE(decide_attr(r, "/w/d", mode_change(true, 0755, 0777)).allowed);
  CHECK_FALSE(decide_attr(r, "/w", mode_change(true, 0755, 0757)).allowed);
  CHECK(decide_attr(r, "/w/d", mode_change(true, 0755, 01777)).allowed); // sticky: others cannot replace entries
  CHECK(decide_attr(r, "/w/d", mode_change(true, 0777, 0777)).allowed);  // already so
  CHECK(decide_attr(r, "/w/d", mode_change(true, 0755, 0775)).allowed);  // the group: not every account
  CHECK(decide_attr(r, "/w/f", mode_change(false, 0644, 0666)).allowed);  // a file: nothing to plant in it
  CHECK(decide_attr(r, "/tmp/d", mode_change(true, 0755, 0777)).allowed); // outside every root
  CHECK_FALSE(decide_attr(r, "/w/d", {attr_kind::acl_set, true, 0755, 0}).allowed);
  CHECK(decide_attr(r, "/w/d", {attr_kind::xattr, true, 0755, 0}).allowed);
  CHECK(decide_attr(r, "/w/f", {attr_kind::acl_set, false, 0644, 0}).allowed);
  CHECK(is_acl_name("system.posix_acl_access"));
  CHECK(is_acl_name("system.posix_acl_default"));
  CHECK_FALSE(is_acl_name("user.posix_acl_access"));
}

TEST_CASE("X1: prlimit of the caller and of processes under the filter is allowed, of a supervisor refused", "[X1][L1]") {
  prlimit_facts f;
  f.target = 1;
  f.target_filters = 2;
  f.supervisor_filters = 2;
  auto v = decide_prlimit(f);
  CHECK_FALSE(v.allowed);
  CHECK(v.action == "process-limit");
  CHECK(v.target == "pid:1");
  f.target_filters = 3;
  CHECK(decide_prlimit(f).allowed);
  f.target_filters = -1;
  CHECK_FALSE(decide_prlimit(f).allowed);
  f.target_is_caller = true;
  CHECK(decide_prlimit(f).allowed);
  f = {};
  f.target = 7;
  f.same_pid_namespace = false;
  f.target_filters = 5;
  f.supervisor_filters = 1;
  CHECK_FALSE(decide_prlimit(f).allowed);
  f.target = 0;
  CHECK(decide_prlimit(f).allowed);
}

TEST_CASE("X1: the supervisor protocol carries a process-limit violation", "[X1]") {
  using namespace ccsb::protocol;
  auto line = encode(violation{3, "process-limit", "pid:1", "X1: a process limit of another process"});
  auto m = decode_supervisor(line);
  REQUIRE(m);
  CHECK(std::get<violation>(*m) == violation{3, "process-limit", "pid:1", "X1: a process limit of another process"});
}

TEST_CASE("X1 L8: a file never gains a set-user-ID or set-group-ID bit, a directory may, bits it had may stay",
          "[X1][L8]") {
  auto r = dispatch_rules();
  for (mode_t m : {mode_t{04755}, mode_t{02755}, mode_t{06755}, mode_t{04000}}) {
    INFO(std::oct << m);
    auto v = decide_setid("/w/a", false, 0100644, m);
    CHECK_FALSE(v.allowed);
    CHECK(v.action == "file-write*");
    CHECK(v.target == "/w/a");
    CHECK_FALSE(decide_attr(r, "/w/a.txt", mode_change(false, 0100644, m)).allowed);
    CHECK_FALSE(decide_attr(r, "/tmp/x", mode_change(false, 0100644, m)).allowed); // outside every root too
    CHECK_FALSE(decide_setid("/w/new", false, 0, m).allowed);                      // a creation's mode
    CHECK(decide_setid("/w/d", true, 040755, m).allowed);
  }
  CHECK(decide_setid("/w/a", false, 0104755, 04700).allowed); // already set: kept, not gained
  CHECK_FALSE(decide_setid("/w/a", false, 0104755, 06755).allowed);
  CHECK(decide_setid("/w/a", false, 0100644, 01755).allowed); // the sticky bit is not a set-id bit
  CHECK(decide_attr(r, "/w/a.txt", mode_change(false, 0100644, 0755)).allowed);
}
