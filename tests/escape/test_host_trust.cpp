// L8 escape tests (issue 27): what the launcher trusts on the host side
// before a sandbox runs. Another uid squatting the run-dir base of an
// unprivileged launcher does not stop its launches (they use a private base
// of their own). Real ccsb-run, bwrap and kernel; run as root (setpriv makes
// the other uids). Each failed against the launcher of ff2a9ea.
#include "session_support.hpp"

#include <dirent.h>

#include <filesystem>

using namespace escape;
namespace L = ccsb::launch;

namespace {

// The unprivileged launcher of the squat test: a uid of its own (not 65534,
// whose /tmp base other tests use at the same time), with no passwd entry.
constexpr uid_t kVictimUid = 47113;
std::vector<std::string> as_uid(uid_t uid) {
  return {"/usr/bin/setpriv", "--reuid=" + std::to_string(uid), "--regid=" + std::to_string(uid), "--clear-groups",
          "--"};
}

int chown_to(const std::string& p, uid_t uid) { return ::lchown(p.c_str(), uid, uid); }

// Removes /tmp/ccsb-<uid> and every /tmp/ccsb-<uid>.* (the base, the
// squat, the fallback bases) without following a link.
void remove_bases_of(uid_t uid) {
  const std::string prefix = "ccsb-" + std::to_string(uid);
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/tmp")) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == prefix || n.rfind(prefix + ".", 0) == 0) names.push_back("/tmp/" + n);
    }
    ::closedir(d);
  }
  for (const auto& n : names) {
    struct stat st{};
    if (::lstat(n.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      // The mask sources are read-only directories: open them up first.
      run_host({"/bin/chmod", "-R", "u+rwx", n});
      ::nftw(n.c_str(), rm_cb, 32, FTW_DEPTH | FTW_PHYS);
    } else {
      ::unlink(n.c_str());
    }
  }
}

std::string handle_field(const std::string& handle, const std::string& key) {
  const std::string h = read_file(handle);
  const std::string k = "\"" + key + "\":\"";
  auto at = h.find(k);
  if (at == std::string::npos) return {};
  std::string v = h.substr(at + k.size(), h.find('"', at + k.size()) - at - k.size());
  for (std::size_t i; (i = v.find("\\/")) != std::string::npos;) v.erase(i, 1); // JSON's "\/"
  return v;
}

std::string parent_of(const std::string& p) { return p.substr(0, p.rfind('/')); }

} // namespace

TEST_CASE("L8: another uid squatting /tmp/ccsb-UID (a directory, a symlink) does not stop an unprivileged launch, "
          "whose run dir lies in a private base of its own",
          "[L8][escape]") {
  REQUIRE(::geteuid() == 0); // setpriv makes the launcher and the squatter
  REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);
  const std::string squat = "/tmp/ccsb-" + std::to_string(kVictimUid);
  struct cleanup {
    ~cleanup() { remove_bases_of(kVictimUid); }
  } clean;
  remove_bases_of(kVictimUid);
  sandbox_fixture f;
  // The launcher's own directory: its worktree and its handle.
  const std::string mine = f.base + "/victim";
  make_dirs(mine + "/work");
  REQUIRE(chown_to(mine, kVictimUid) == 0);
  REQUIRE(chown_to(mine + "/work", kVictimUid) == 0);
  // What the symlink squat points at: a directory the launcher owns, so a
  // launcher that followed it would find it "private".
  const std::string target = f.base + "/squat-target";
  make_dirs(target, 0700);
  REQUIRE(chown_to(target, kVictimUid) == 0);

  const std::string kind = GENERATE(std::string("directory"), std::string("symlink"));
  INFO("the squat: " << kind);
  if (kind == "directory") {
    make_dirs(squat, 0755); // root's: another uid than the launcher's
    REQUIRE(::chmod(squat.c_str(), 0755) == 0);
  } else {
    REQUIRE(::symlink(target.c_str(), squat.c_str()) == 0);
  }

  std::string first_base;
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch + 1);
    const std::string handle = mine + "/handle-" + std::to_string(launch) + ".json";
    spawn_options o;
    o.argv = as_uid(kVictimUid);
    for (const auto& a : std::vector<std::string>{ccsb_run_path(), "--profile", "spec", "--handle", handle, "--",
                                                  "/bin/bash", "-c", sandbox_fixture::wrap("echo @@uid=$(id -u)")})
      o.argv.push_back(a);
    o.env = {"HOME=" + mine, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "TERM=dumb"}; // no XDG_RUNTIME_DIR
    o.cwd = mine + "/work";
    auto r = run(o);
    ESCAPE_REQUIRE_RAN(r);
    CHECK(r.get("uid") == std::to_string(kVictimUid));
    const std::string run_dir = handle_field(handle, "runDir");
    REQUIRE_FALSE(run_dir.empty());
    const std::string base = parent_of(run_dir);
    INFO("run dir " << run_dir);
    CHECK(base.rfind(squat + ".", 0) == 0);
    CHECK_FALSE(ccsb::detail::within(run_dir, squat));
    CHECK_FALSE(ccsb::detail::within(run_dir, target));
    struct stat st{};
    REQUIRE(::lstat(base.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK(st.st_uid == kVictimUid);
    CHECK((st.st_mode & 07777) == 0700);
    // The launcher says which base it used, and why.
    CHECK_THAT(r.err, Catch::Contains(base) && Catch::Contains(squat + " is unusable"));
    // Later launches find the same base again (one base per uid: sweeps,
    // placeholders, the /etc views and the mask sources stay shared).
    if (launch == 0) first_base = base;
    else CHECK(base == first_base);
  }
  // Nothing was put into the squatted directory or the symlink's target.
  for (const auto& d : {squat, target}) {
    INFO(d);
    CHECK(std::filesystem::is_empty(d));
  }
}
