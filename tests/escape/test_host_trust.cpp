// L8 escape tests (issue 27, items 8 and 9): what the launcher trusts on the
// host side before a sandbox runs. Another uid squatting the run-dir base of
// an unprivileged launcher does not stop its launches (they use a private
// base of their own), and the helper programs (bwrap, ccsb-init, egressd) are
// refused when a session or another uid could have written them: a helper in
// a directory another uid can write, and a launch whose writable bind holds a
// helper. Real ccsb-run, bwrap and kernel; run as root (setpriv makes the
// other uids). Each failed against the launcher of ff2a9ea.
#include "session_support.hpp"

#include <dirent.h>

#include <filesystem>
#include <functional>

using namespace escape;
namespace L = ccsb::launch;

namespace {

// The unprivileged launcher of the squat test: a uid of its own (not 65534,
// whose /tmp base other tests use at the same time), with no passwd entry.
constexpr uid_t kVictimUid = 47113;
// A uid that is neither root nor a launcher of these tests: owns what a
// hostile local user would have planted.
constexpr uid_t kOtherUid = 47114;

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
      // The mask sources are read-only directories: remove_tree opens them up first.
      ccsb_test::temp_dir::remove_tree(n);
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

// A root-owned 0755 directory under /tmp, removed at the end.
struct host_dir {
  ccsb_test::temp_dir dir;
  std::string path;
  explicit host_dir(const char* name) : dir(name, "/tmp", 0755), path(dir.path()) {}
};

// ccsb-run, ccsb-init and egressd copied into `dir` (mode 0755 each).
void install_helpers(const std::string& dir) {
  make_dirs(dir);
  for (const char* prog : {"ccsb-run", "ccsb-init", "egressd"})
    write_file(dir + "/" + prog, read_file(bin_path(prog)), 0755);
}

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
    CHECK_FALSE(ccsb::within(run_dir, squat));
    CHECK_FALSE(ccsb::within(run_dir, target));
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

TEST_CASE("L8: a helper program a session or another uid could have written is refused, naming it and why",
          "[L8][escape]") {
  REQUIRE(::geteuid() == 0);
  REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);
  sandbox_fixture f;
  host_dir tree("ccsb-escape-helpers");
  const launcher who = GENERATE(launcher::root, launcher::unprivileged);
  INFO(name_of(who));
  const uid_t me = who == launcher::root ? 0 : kSandboxTestUid;

  // egressd from `dir` (given with --egressd), the rest from the build.
  auto launch_with_egressd = [&](const std::string& egressd) {
    auto o = launch_options(f, who, "spec", f.base + "/events.jsonl", {"--egressd", egressd},
                            "echo @@ran-command=1");
    return run(o);
  };
  struct bad_case {
    std::string name;
    std::function<void(const std::string& dir)> spoil; // makes dir/egressd untrustworthy
    std::string reason;                                // what the refusal says
  };
  const std::vector<bad_case> cases{
      {"its directory belongs to another uid",
       [](const std::string& d) { REQUIRE(chown_to(d, kOtherUid) == 0); }, "belongs to uid " + std::to_string(kOtherUid)},
      {"its directory is writable by others",
       [](const std::string& d) { REQUIRE(::chmod(d.c_str(), 0777) == 0); }, "writable by others"},
      {"its directory is writable by its group",
       [](const std::string& d) { REQUIRE(::chmod(d.c_str(), 0775) == 0); }, "writable by its group"},
      {"a directory above it is writable by others",
       [](const std::string& d) { REQUIRE(::chmod(parent_of(d).c_str(), 0777) == 0); }, "writable by others"},
      {"the program itself is writable by others",
       [](const std::string& d) { REQUIRE(::chmod((d + "/egressd").c_str(), 0757) == 0); }, "writable by others"},
      {"the program belongs to another uid",
       [](const std::string& d) { REQUIRE(chown_to(d + "/egressd", kOtherUid) == 0); },
       "belongs to uid " + std::to_string(kOtherUid)},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO(c.name);
    const std::string holder = tree.path + "/case" + std::to_string(i);
    const std::string dir = holder + "/bin";
    make_dirs(dir);
    write_file(dir + "/egressd", read_file(bin_path("egressd")), 0755);
    for (const auto& p : {holder, dir, dir + "/egressd"}) REQUIRE(chown_to(p, me) == 0);
    // As installed (owned by the launcher, nobody else may write): it runs.
    auto good = launch_with_egressd(dir + "/egressd");
    INFO(good.describe());
    CHECK(good.exit_code == 0);
    CHECK(good.get("ran-command") == "1");
    c.spoil(dir);
    auto bad = launch_with_egressd(dir + "/egressd");
    INFO(bad.describe());
    CHECK(bad.exit_code == 125);
    CHECK(bad.get("ran-command") == "<missing>");
    CHECK_THAT(bad.err, Catch::Contains("egressd") && Catch::Contains(dir) && Catch::Contains(c.reason));
  }
  // A sticky world-writable directory above (/tmp's case) is fine: others
  // cannot replace what is ours there.
  REQUIRE(::chmod(tree.path.c_str(), 01777) == 0);
  const std::string ok_dir = tree.path + "/sticky/bin";
  make_dirs(ok_dir);
  write_file(ok_dir + "/egressd", read_file(bin_path("egressd")), 0755);
  for (const auto& p : {parent_of(ok_dir), ok_dir, ok_dir + "/egressd"}) REQUIRE(chown_to(p, me) == 0);
  auto sticky = launch_with_egressd(ok_dir + "/egressd");
  INFO(sticky.describe());
  CHECK(sticky.exit_code == 0);
  CHECK(sticky.get("ran-command") == "1");
}

TEST_CASE("L8: a bwrap found on PATH in a directory another uid can write is never run, and the launch is refused",
          "[L8][escape]") {
  REQUIRE(::geteuid() == 0);
  sandbox_fixture f;
  host_dir tree("ccsb-escape-fake-bwrap");
  const launcher who = GENERATE(launcher::root, launcher::unprivileged);
  INFO(name_of(who));
  const std::string dir = tree.path + "/bin";
  make_dirs(dir);
  const std::string marker = tree.path + "/fake-bwrap-ran";
  // The impostor leaves a mark and runs the real one (so a launcher that
  // trusted it would start a working sandbox).
  write_file(dir + "/bwrap", "#!/bin/sh\ntouch " + marker + "\nexec /usr/bin/bwrap \"$@\"\n", 0755);
  REQUIRE(chown_to(dir, kOtherUid) == 0);
  REQUIRE(chown_to(dir + "/bwrap", kOtherUid) == 0);
  auto o = launch_options(f, who, "spec", f.base + "/events.jsonl", {}, "echo @@ran-command=1");
  for (auto& e : o.env)
    if (e.rfind("PATH=", 0) == 0) e = "PATH=" + dir + ":/usr/local/bin:/usr/bin:/bin";
  auto r = run(o);
  INFO(r.describe());
  CHECK(r.exit_code == 125);
  CHECK(r.get("ran-command") == "<missing>");
  CHECK_FALSE(file_exists(marker));
  CHECK_THAT(r.err, Catch::Contains(dir + "/bwrap") && Catch::Contains("belongs to uid " + std::to_string(kOtherUid)));
}

TEST_CASE("L8: a launch whose writable bind holds a helper program or a directory above it is refused",
          "[L8][escape]") {
  REQUIRE(::geteuid() == 0);
  const launcher who = GENERATE(launcher::root, launcher::unprivileged);
  INFO(name_of(who));
  const uid_t me = who == launcher::root ? 0 : kSandboxTestUid;
  sandbox_fixture f;
  host_dir tree("ccsb-escape-bound-helpers");
  // ~/opt/ccsb/bin as a user installs it: the launcher's own, nobody else
  // may write it; ccsb-run runs from there, its helpers next to it.
  const std::string opt = tree.path + "/opt", bin = opt + "/ccsb/bin";
  install_helpers(bin);
  for (const auto& p : {opt, opt + "/ccsb", bin, bin + "/ccsb-run", bin + "/ccsb-init", bin + "/egressd"})
    REQUIRE(chown_to(p, me) == 0);
  auto launch = [&](const std::vector<std::string>& args) {
    auto o = launch_options(f, who, "spec", f.base + "/events.jsonl", args,
                            "echo @@ran-command=1\n"
                            "echo '#!/bin/sh' > " + bin + "/egressd 2>/dev/null; echo @@rewrote=$?\n");
    auto prefix = launcher_prefix(who);
    o.argv[prefix.size()] = bin + "/ccsb-run"; // its helpers: the ones next to it
    return run(o);
  };
  const std::string egressd_before = read_file(bin + "/egressd");
  // Read-only, the helpers' tree may be bound: the command cannot change them.
  {
    auto r = launch({"--bind", opt + ":ro"});
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(r.get("ran-command") == "1");
    CHECK(failed(r.get("rewrote")));
  }
  for (const std::string& bound : {tree.path, opt, bin}) {
    INFO("--bind " << bound);
    auto r = launch({"--bind", bound});
    INFO(r.describe());
    CHECK(r.exit_code == 125);
    CHECK(r.get("ran-command") == "<missing>");
    CHECK_THAT(r.err, Catch::Contains("writable bind \"" + bound + "\"") && Catch::Contains(bin + "/"));
  }
  CHECK(read_file(bin + "/egressd") == egressd_before);
}

TEST_CASE("L8: the session API refuses a helper another uid could write with a typed error naming it",
          "[L8][S7][escape]") {
  // ccsbd and every other caller of session::start (the library, not only
  // the tools) get the refusal.
  REQUIRE(::geteuid() == 0);
  sandbox_fixture f;
  host_dir tree("ccsb-escape-api-helpers");
  const std::string dir = tree.path + "/bin";
  make_dirs(dir);
  write_file(dir + "/egressd", read_file(bin_path("egressd")), 0755);
  REQUIRE(chown_to(dir, kOtherUid) == 0);
  auto q = native_request(f, ccsb::profile::spec, "api-" + random_token());
  REQUIRE(q.pol.network.kind == ccsb::network_kind::proxied);
  q.egressd_path = dir + "/egressd";
  L::reactor r;
  std::vector<ccsb::sandbox_event> events;
  L::session_callbacks cb;
  cb.event = [&](const ccsb::sandbox_event& e) { events.push_back(e); };
  cb.output = [](L::exec_id, int, std::string_view) {};
  cb.log = [](const std::string&) {};
  auto s = L::session::start(r, q, cb);
  REQUIRE_FALSE(s);
  CHECK(s.err().code == ccsb::errc::unenforceable);
  CHECK(s.err().field == "egressd");
  CHECK_THAT(s.err().what(), Catch::Contains(dir) && Catch::Contains("belongs to uid " + std::to_string(kOtherUid)));
  // A writable bind over the helper's directory, the same way.
  auto q2 = native_request(f, ccsb::profile::spec, "api-" + random_token());
  REQUIRE(chown_to(dir, 0) == 0);
  q2.egressd_path = dir + "/egressd";
  q2.pol.mounts.push_back({tree.path, tree.path, true});
  auto s2 = L::session::start(r, q2, cb);
  REQUIRE_FALSE(s2);
  CHECK(s2.err().code == ccsb::errc::unenforceable);
  CHECK_THAT(s2.err().what(), Catch::Contains("writable bind \"" + tree.path + "\"") && Catch::Contains("egressd"));
}
