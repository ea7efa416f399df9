// L1 L7 (issue 27): a root launcher's session uid and its idmapped binds,
// against the real kernel (ccsb/launch/linux/session_uid.hpp). The launcher
// is root here and the clone hands a tree's owner's files to the session, so
// what it clones is checked as it is opened.
#include "ccsb/launch/linux/session_uid.hpp"
#include "ccsb_test/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

using namespace ccsb;
using namespace ccsb::launch;

namespace {

struct temp_dir {
  ccsb_test::temp_dir tmp{"ccsb-suid"};
  std::string path = tmp.path();
};

} // namespace

TEST_CASE("L1 L7: leases are distinct while held, in the documented range, and come back when let go", "[L1][L7]") {
  REQUIRE(::geteuid() == 0); // CI runs as root; leases are a root launcher's
  auto a = lease_session_uid();
  auto b = lease_session_uid();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->uid != b->uid);
  for (uid_t u : {a->uid, b->uid}) {
    CHECK(u >= 2046820352u);
    CHECK(u <= 2046820352u + 65535u);
  }
  struct stat st{};
  REQUIRE(::stat("/run/ccsb-uids", &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 077) == 0);
}

TEST_CASE("L1 L7: a range handed out in /etc/subuid is never used, a malformed line counts as handed out",
          "[L1][L7]") {
  // The /etc/subuid parsing step itself: lease_session_uid reads the host's real files.
  CHECK_FALSE(launch::detail::subid_overlaps("root:100000:65536\nu:165536:65536\n", 2046820352, 65536));
  CHECK(launch::detail::subid_overlaps("c:2046800000:100000\n", 2046820352, 65536));
  CHECK(launch::detail::subid_overlaps("c:2046885887:1\n", 2046820352, 65536));
  CHECK_FALSE(launch::detail::subid_overlaps("c:2046885888:10\n# c:0:4294967295\n", 2046820352, 65536));
  CHECK(launch::detail::subid_overlaps("garbage\n", 2046820352, 65536));
  CHECK(launch::detail::subid_overlaps("u:12x:5\n", 2046820352, 65536));
}

TEST_CASE("L1 L7: an idmapped clone shows the owner's files as the session's and creates files the owner's",
          "[L1][L7]") {
  REQUIRE(::geteuid() == 0);
  temp_dir d;
  const std::string tree = d.path + "/tree";
  REQUIRE(::mkdir(tree.c_str(), 0755) == 0);
  REQUIRE(::chown(tree.c_str(), 1234, 1234) == 0);
  auto lease = lease_session_uid();
  REQUIRE(lease);
  session_uid_plan plan;
  plan.binds = {{tree, "", false, 1234, 1234}};
  const uid_t s = lease->uid;
  plan.lease = std::move(*lease);
  auto trees = make_idmapped_trees(plan);
  REQUIRE(trees);
  REQUIRE(trees->size() == 1);
  struct stat st{};
  REQUIRE(::fstat((*trees)[0].get(), &st) == 0);
  CHECK(st.st_uid == s); // seen through the clone: the session's
  CHECK(st.st_gid == s);
}

TEST_CASE("L1 L7: a bind path with a symlink on the way, or whose owner changed, is never cloned", "[L1][L7]") {
  REQUIRE(::geteuid() == 0);
  temp_dir d;
  // A directory another session could have swapped for a link to a tree of
  // root's: the clone would hand root's files to this session, writable.
  const std::string secret = d.path + "/roots";
  REQUIRE(::mkdir(secret.c_str(), 0700) == 0);
  const std::string link = d.path + "/wt";
  REQUIRE(::symlink(secret.c_str(), link.c_str()) == 0);
  REQUIRE(::mkdir((secret + "/sub").c_str(), 0755) == 0);
  auto lease = lease_session_uid();
  REQUIRE(lease);
  session_uid_plan plan;
  plan.lease = std::move(*lease);
  for (const std::string& p : {link, link + "/sub"}) {
    INFO(p);
    plan.binds = {{p, "", false, 0, 0}};
    plan.userns.clear();
    auto t = make_idmapped_trees(plan);
    REQUIRE_FALSE(t);
    CHECK(t.err().what().find("no symlink on the way") != std::string::npos);
  }
  plan.binds = {{secret, "", false, 4321, 4321}}; // planned for another owner
  auto t = make_idmapped_trees(plan);
  REQUIRE_FALSE(t);
  CHECK(t.err().what().find("owner changed") != std::string::npos);
  // Planning skips a link outright.
  policy pol;
  pol.mounts.push_back(mount_rule{});
  pol.mounts.back().host_path = link;
  pol.mounts.back().guest_path = link;
  pol.mounts.back().writable = true;
  CHECK(binds_to_idmap(pol, plan.lease.uid).empty());
}

TEST_CASE("L1 L7: ids that /etc/passwd or /etc/group name in the range are found, other fields and lines are not",
          "[L1][L7]") {
  const std::string text = "root:x:0:0:root:/root:/bin/bash\n"
                           "ldapish:x:2046820400:100::/home/l:/bin/sh\n"
                           "grp:x:2046885887:\n"
                           "late:x:2046885888:2046820352::/:/bin/sh\n" // the gid field is not the id
                           "broken:x:20468203xx:1\n"
                           "short\n";
  CHECK(account_ids_in(text, 2046820352, 65536) == std::vector<std::uint32_t>{2046820400u, 2046885887u});
}
