// Golden and property tests of the bubblewrap renderer (L1-L5, P7, N2).
// Golden files: tests/linux/golden/<name>.txt, one bwrap operation per line.
// Regenerate after a deliberate change with CCSB_UPDATE_GOLDEN=1 and review
// the diff like code.
#include "fake_host.hpp"

#include "ccsb/confine/landlock.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb_test/golden.hpp"
#include "ccsb_test/result.hpp"
#include "ccsb_test/specs.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

using namespace ccsb;
using ccsb_test::kLinuxWorktree;
using ccsb_test::require_ok;
using ccsb_test::worktree_spec;

namespace {

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool has_init_file(const bwrap_plan& plan) {
  return std::any_of(plan.ops.begin(), plan.ops.end(),
                     [](const setup_op& op) { return op.kind == op_kind::file && op.fd == kInitFd; });
}

// The directories the launcher creates before bwrap runs (host_prep).
std::vector<std::string> created_dirs(const bwrap_plan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.host_prep)
    if (p.what == host_prep_op::action::make_dir) out.push_back(p.path);
  return out;
}

// realpath over the fake host: every component must exist (a listed path,
// or an ancestor of one), symlinks are followed.
std::optional<std::string> fake_realpath(const fake::host& h, const std::string& p, int depth = 0) {
  if (depth > 16 || p.empty() || p.front() != '/') return std::nullopt;
  auto exists = [&](const std::string& q) {
    if (h.kinds.count(q)) return true;
    auto it = h.kinds.lower_bound(q + "/");
    return it != h.kinds.end() && it->first.rfind(q + "/", 0) == 0;
  };
  std::vector<std::string> parts;
  for (std::size_t i = 1; i <= p.size();) {
    std::size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    if (j > i) parts.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string next = out + "/" + parts[i];
    if (!exists(next)) return std::nullopt;
    auto k = h.kinds.find(next);
    if (k != h.kinds.end() && k->second == path_kind::symlink) {
      std::string t = h.links.at(next);
      if (t.front() != '/') t = out + "/" + t;
      for (std::size_t j = i + 1; j < parts.size(); ++j) t += "/" + parts[j];
      return fake_realpath(h, lexical_normal(t), depth + 1);
    }
    out = next;
  }
  return out.empty() ? "/" : out;
}

// The policy's host facts for a fake host (HOME, environment, realpath,
// path kinds, .git files).
ccsb::host_facts facts_for(const fake::host& h, const std::string& home = "/home/u") {
  auto f = fake::host_facts(home);
  f.resolve = [h](const std::string& p) { return fake_realpath(h, p); };
  f.kind = [h](const std::string& p) { return h.kind(p); };
  f.gitdirs = [h](const std::string& p) {
    auto it = h.gitdirs.find(p);
    return it == h.gitdirs.end() ? std::vector<std::string>{} : it->second;
  };
  return f;
}

fake::host worktree_host() {
  auto h = fake::host::debian();
  h.dir("/home/u");
  h.dir("/home/u/.ssh");
  h.file("/home/u/.ssh/id_rsa");
  h.dir("/home/u/.aws");
  h.file("/home/u/.netrc");
  h.file("/home/u/.bashrc");
  h.dir("/home/u/.claude");
  h.dir("/home/u/.claude/projects");
  h.dir("/work/wt");
  h.dir("/work/wt/.git");
  h.dir("/work/wt/.git/hooks");
  h.file("/work/wt/.git/config");
  h.dir("/repos/orig");
  return h;
}

// bwrap_facts of a host whose kernel lacks the X1 broker's features.
ccsb::bwrap_facts without_broker(const fake::host& h) {
  auto f = h.facts();
  f.creation_rules = false;
  return f;
}

// The values of every `--broker-deny` option of ccsb-init's argv.
std::vector<std::string> broker_denied(const bwrap_plan& plan) {
  std::vector<std::string> out;
  const auto a = init_argv(plan);
  for (std::size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == "--broker-deny") out.push_back(a[i + 1]);
  return out;
}

bool binds_at(const bwrap_plan& plan, const std::string& dest) {
  const auto o = bwrap_options(plan);
  for (std::size_t i = 0; i + 2 < o.size(); ++i)
    if ((o[i] == "--bind" || o[i] == "--ro-bind") && o[i + 2] == dest) return true;
  return false;
}

bwrap_plan render_ok(const sandbox_spec& s, profile p, const fake::host& h) {
  return require_ok(render_bwrap(require_ok(compile(s, p, facts_for(h))), h.facts()));
}

// The invariants every plan keeps, whatever the spec and the host (issue
// 29): one operation per path (a remount aside), parents before children
// (a later mount of an ancestor would hide what was mounted below it),
// nothing below a mask or a placeholder (it would re-expose host content or
// a writable name), every created parent prepared on the host before bwrap
// runs, every missing mask or placeholder target something the launcher can
// create, every copied-in file at its own descriptor.
void check_plan_invariants(const bwrap_plan& plan) {
  std::vector<const setup_op*> mounts;
  for (const auto& op : plan.ops)
    if (op.kind != op_kind::remount_ro) mounts.push_back(&op);
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    INFO("op " << i << " at " << mounts[i]->dest);
    CHECK(mounts[i]->dest.front() == '/');
    for (std::size_t j = i + 1; j < mounts.size(); ++j) {
      CHECK(mounts[i]->dest != mounts[j]->dest);                        // one op per path
      CHECK_FALSE(within(mounts[i]->dest, mounts[j]->dest));    // parents before children
    }
    if (mounts[i]->kind == op_kind::mask || mounts[i]->kind == op_kind::placeholder)
      for (const auto* o : mounts) CHECK_FALSE((o->dest != mounts[i]->dest && within(o->dest, mounts[i]->dest)));
    if (is_bind(mounts[i]->kind)) CHECK_FALSE(mounts[i]->source.empty());
  }
  std::vector<std::string> made;
  for (const auto& p : plan.host_prep)
    if (p.what == host_prep_op::action::make_dir) {
      // parents first: a created directory's parent is not created after it
      CHECK_FALSE(has(made, p.path));
      made.push_back(p.path);
    }
  for (std::size_t i = 0; i < made.size(); ++i)
    for (std::size_t j = i + 1; j < made.size(); ++j) CHECK_FALSE(within(made[i], made[j]));
  for (const auto& op : plan.ops) {
    if (op.kind == op_kind::create_pin) CHECK(has(made, op.dest));
    if (op.kind == op_kind::mask || op.kind == op_kind::placeholder) CHECK(op.shape != entry_shape::none);
    if (op.kind != op_kind::placeholder) continue;
    INFO("placeholder " << op.dest);
    CHECK(std::any_of(plan.host_prep.begin(), plan.host_prep.end(), [&](const host_prep_op& p) {
      return p.what == host_prep_op::action::occupy && p.path == op.dest && p.shape == op.shape;
    }));
  }
  std::vector<int> fds;
  for (const auto& op : plan.ops)
    if (op.kind == op_kind::file) {
      CHECK_FALSE(std::count(fds.begin(), fds.end(), op.fd));
      fds.push_back(op.fd);
      if (op.fd != kInitFd) CHECK(op.fd - kFirstDataFd < static_cast<int>(plan.data_files.size()));
    }
  CHECK(fds.size() == plan.data_files.size() + (has_init_file(plan) ? 1 : 0));
}

std::string plan_text(const bwrap_plan& plan) {
  check_plan_invariants(plan);
  std::string out = fake::ops_text(bwrap_options(plan)) + "\n-- " + fake::ops_text(init_argv(plan)) + "\n";
  for (const auto& v : plan.environment) out += "env " + v.name + "=" + v.value + "\n";
  for (const auto& p : plan.placeholders) out += "placeholder " + p + "\n";
  for (const auto& p : created_dirs(plan)) out += "create-dir " + p + "\n";
  return out;
}

const ccsb_test::golden_dir kGolden{"tests/linux/golden", ".txt"};

} // namespace

TEST_CASE("L1: golden argv for chat mode (profile spec)", "[L1][L2][P1][golden]") {
  kGolden.check("chat", plan_text(render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host())));
}

TEST_CASE("L1: golden argv for review mode (profile spec)", "[L1][L2][P1][golden]") {
  kGolden.check("review", plan_text(render_ok(worktree_spec(mode::review, kLinuxWorktree), profile::spec, worktree_host())));
}

TEST_CASE("L1: golden argv for plan mode (profile spec)", "[L1][L2][P1][golden]") {
  kGolden.check("plan", plan_text(render_ok(worktree_spec(mode::plan, kLinuxWorktree), profile::spec, worktree_host())));
}

TEST_CASE("L1: golden argv for orchestrate mode (profile spec)", "[L1][L2][P1][golden]") {
  kGolden.check("orchestrate", plan_text(render_ok(worktree_spec(mode::orchestrate, kLinuxWorktree), profile::spec, worktree_host())));
}

TEST_CASE("T2: golden argv for the terminal profile", "[T2][L1][golden]") {
  sandbox_spec s = worktree_spec(mode::chat, kLinuxWorktree);
  s.bind_mounts = {{"/work/wt", "/work/wt", false}};
  s.protected_paths.clear();
  auto h = worktree_host();
  auto pol = compile(s, profile::terminal, facts_for(h));
  REQUIRE(pol);
  // T2/T3: without the X1 broker the host's own services would be open.
  auto refused = render_bwrap(*pol, without_broker(h));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unenforceable);
  CHECK_THAT(refused.err().message, Catch::Contains("T2") && Catch::Contains("loopback"));
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE(plan);
  kGolden.check("terminal", plan_text(*plan));
  // Open network: no network namespace, no bridges, no proxy variables;
  // the broker decides the host's network destinations.
  CHECK(!has(bwrap_options(*plan), "--unshare-net"));
  for (const auto& v : plan->environment) CHECK(v.name.find("PROXY") == std::string::npos);
  const auto init = init_argv(*plan);
  auto net = std::find(init.begin(), init.end(), "--broker-net");
  REQUIRE(net != init.end());
  CHECK(*(net + 1) == "host");
}

TEST_CASE("P3: golden argv for a runner state dir inside a write-denied path", "[P3][L2][golden]") {
  auto h = worktree_host();
  sandbox_spec s = worktree_spec(mode::chat, kLinuxWorktree);
  s.bind_mounts = {{"/work/wt", "/work/wt", false}, {"/home/u", "/home/u", false}};
  s.runner_state_dirs = {"/home/u/.claude/projects"};
  auto plan = render_ok(s, profile::spec, h);
  kGolden.check("state_dir", plan_text(plan));
}

TEST_CASE("P5: golden argv for a worktree whose .git is a file", "[P5][L2][golden]") {
  auto h = worktree_host();
  h.kinds.erase("/work/wt/.git/hooks");
  h.kinds.erase("/work/wt/.git/config");
  h.file("/work/wt/.git");
  h.dir("/repos/main");
  h.dir("/repos/main/.git");
  h.dir("/repos/main/.git/hooks");
  h.file("/repos/main/.git/config");
  h.dir("/repos/main/.git/worktrees");
  h.dir("/repos/main/.git/worktrees/wt");
  h.file("/repos/main/.git/worktrees/wt/commondir");
  h.file("/repos/main/.git/worktrees/wt/gitdir");
  h.gitdirs["/work/wt/.git"] = {"/repos/main/.git/worktrees/wt", "/repos/main/.git"};
  sandbox_spec s = worktree_spec(mode::chat, kLinuxWorktree);
  s.bind_mounts.push_back({"/repos/main/.git", "/repos/main/.git", false});
  auto plan = render_ok(s, profile::spec, h);
  kGolden.check("gitfile", plan_text(plan));
}

TEST_CASE("L1: the minimal /etc is a tmpfs of copied files and read-only binds, remounted read-only last", "[L1]") {
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  const auto o = bwrap_options(plan);
  auto at = [&](std::initializer_list<std::string> seq) {
    for (std::size_t i = 0; i + seq.size() <= o.size(); ++i)
      if (std::equal(seq.begin(), seq.end(), o.begin() + static_cast<std::ptrdiff_t>(i))) return static_cast<long>(i);
    return -1L;
  };
  long tmpfs = at({"--tmpfs", "/etc"});
  long remount = at({"--remount-ro", "/etc"});
  REQUIRE(tmpfs >= 0);
  REQUIRE(remount > tmpfs);
  // Regular files are copied from the launcher's descriptors, in order; every
  // one read-only (0444), nothing of /etc is bound writable.
  REQUIRE(plan.data_files == std::vector<std::string>{"/etc/ld.so.cache", "/etc/passwd", "/etc/group"});
  for (std::size_t i = 0; i < plan.data_files.size(); ++i) {
    long f = at({"--perms", "0444", "--file", std::to_string(kFirstDataFd + static_cast<int>(i)), plan.data_files[i]});
    CHECK(f > tmpfs);
    CHECK(f < remount);
  }
  CHECK(at({"--ro-bind", "/etc/ssl", "/etc/ssl"}) > tmpfs);
  CHECK(at({"--ro-bind", "/etc/passwd", "/etc/passwd"}) < 0);
  for (std::size_t i = 0; i + 2 < o.size(); ++i)
    if (o[i] == "--bind") CHECK(o[i + 2].rfind("/etc", 0) != 0);
  // The remount comes after every other option that creates something
  // (only the root's remount, L7, and --chdir follow it).
  CHECK(static_cast<std::size_t>(remount) + 4 == o.size() - 2);
  CHECK(at({"--remount-ro", "/"}) == remount + 2);
  CHECK(o[o.size() - 2] == "--chdir");
  // A policy mount over /etc itself hides the tmpfs: no remount of that mount.
  auto spec = worktree_spec(mode::chat, kLinuxWorktree);
  spec.bind_mounts.push_back({"/etc", "/etc", true});
  auto h = worktree_host();
  h.dir("/etc");
  auto covered = render_ok(spec, profile::spec, h);
  CHECK(fake::ops_text(bwrap_options(covered)).find("--remount-ro /etc") == std::string::npos);
}

TEST_CASE("L7: /tmp and /dev/shm are tmpfs mounts of the /tmp cap, bwrap's /dev and root are remounted read-only",
          "[L7]") {
  for (profile p : {profile::spec, profile::terminal}) {
    INFO(to_string(p));
    auto h = worktree_host();
    auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), p, facts_for(h));
    REQUIRE(pol);
    auto f = h.facts();
    f.tmp_size_bytes = 32ull << 20;
    auto plan = render_bwrap(*pol, f);
    REQUIRE(plan);
    const auto o = bwrap_options(*plan);
    auto at = [&](std::initializer_list<std::string> seq) {
      for (std::size_t i = 0; i + seq.size() <= o.size(); ++i)
        if (std::equal(seq.begin(), seq.end(), o.begin() + static_cast<std::ptrdiff_t>(i))) return static_cast<long>(i);
      return -1L;
    };
    const std::string cap = std::to_string(32ull << 20);
    long dev = at({"--dev", "/dev"});
    long shm = at({"--size", cap, "--tmpfs", "/dev/shm"});
    long dev_ro = at({"--remount-ro", "/dev"});
    long tmp = at({"--size", cap, "--tmpfs", "/tmp"});
    long root_ro = at({"--remount-ro", "/"});
    REQUIRE(dev >= 0);
    CHECK(shm == dev + 2);
    CHECK(dev_ro == shm + 4);
    CHECK(tmp == dev_ro + 2);
    // Every --tmpfs is sized but bwrap's own /etc one, which is remounted
    // read-only; the root's remount is the last option before --chdir.
    for (std::size_t i = 0; i + 1 < o.size(); ++i)
      if (o[i] == "--tmpfs" && o[i + 1] != "/etc") CHECK((i >= 2 && o[i - 2] == "--size" && o[i - 1] == cap));
    if (at({"--tmpfs", "/etc"}) >= 0) CHECK(at({"--remount-ro", "/etc"}) >= 0);
    CHECK(root_ro >= 0);
    CHECK(static_cast<std::size_t>(root_ro) + 2 == o.size() - 2);
    CHECK(o[o.size() - 2] == "--chdir");
    // Nothing is bound or created below /dev after its remount.
    for (std::size_t i = static_cast<std::size_t>(dev_ro) + 2; i < o.size(); ++i)
      CHECK(o[i].rfind("/dev/", 0) != 0);
  }
  // Without a cap (0) both stay bwrap's default, and still no /dev or root is left writable.
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  CHECK(!has(bwrap_options(plan), "--size"));
  CHECK(fake::ops_text(bwrap_options(plan)).find("--tmpfs /dev/shm\n--remount-ro /dev\n--tmpfs /tmp\n") != std::string::npos);
  CHECK(fake::ops_text(bwrap_options(plan)).find("--remount-ro /\n--chdir") != std::string::npos);
}

TEST_CASE("L4: dispatch profile is refused on plain bubblewrap", "[L4][P7]") {
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::dispatch, facts_for(worktree_host()));
  REQUIRE(pol);
  REQUIRE(pol->requires_glob_denials());
  auto plan = render_bwrap(*pol, without_broker(worktree_host()));
  REQUIRE_FALSE(plan);
  CHECK(plan.err().code == errc::unenforceable);
  CHECK_THAT(plan.err().message, Catch::Contains("P7/L4"));
  CHECK_THAT(plan.err().message, Catch::Contains(".env"));
  CHECK_THAT(plan.err().message, Catch::Contains("X1"));
}

TEST_CASE("L4 P5 L3: every native profile but the open-network terminal is refused on plain bubblewrap, in every mode",
          "[L4][P7][P5][L3]") {
  for (profile p : {profile::dispatch, profile::spec})
    for (mode m : kAllModes) {
      auto pol = compile(worktree_spec(m, kLinuxWorktree), p, facts_for(worktree_host()));
      REQUIRE(pol);
      auto plan = render_bwrap(*pol, without_broker(worktree_host()));
      INFO(to_string(p) << " " << to_string(m));
      REQUIRE_FALSE(plan);
      CHECK(plan.err().code == errc::unenforceable);
      // Read-only modes have no writable root, so no glob rule is required;
      // P5 below the roots and L3 still are.
      CHECK_THAT(plan.err().message, Catch::Contains(pol->requires_glob_denials() ? "P7/L4" : "P5/L3"));
    }
}

TEST_CASE("L5: execGrantRoots are ignored on Linux", "[L5]") {
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  for (const auto& o : bwrap_options(plan)) CHECK(o.find("/work/wt/bin") == std::string::npos);
  CHECK(std::find(plan.notes.begin(), plan.notes.end(), "execGrantRoots are ignored on Linux (L5)") != plan.notes.end());
}

TEST_CASE("L3: proxied runs unshare the network and hand their proxy listeners to egressd, with no socket mounted",
          "[L3][N2][B2]") {
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  CHECK(has(bwrap_options(plan), "--unshare-net"));
  std::string text = fake::ops_text(init_argv(plan));
  CHECK_THAT(text, Catch::Contains("--proxy-channel " + std::to_string(kProxyChannelFd)));
  CHECK_THAT(text, Catch::Contains("--proxy-listen http=127.0.0.1:3128"));
  CHECK_THAT(text, Catch::Contains("--proxy-listen socks=127.0.0.1:1080"));
  CHECK_THAT(text, !Catch::Contains("socat"));
  // Nothing of egressd is mounted: no socket directory, no socket file.
  CHECK_THAT(fake::ops_text(bwrap_options(plan)), !Catch::Contains("egress"));
  std::map<std::string, std::string> env;
  for (const auto& v : plan.environment) env[v.name] = v.value;
  CHECK(env["HTTP_PROXY"] == "http://127.0.0.1:3128");
  CHECK(env["https_proxy"] == "http://127.0.0.1:3128");
  CHECK(env["ALL_PROXY"] == "socks5h://127.0.0.1:1080");
  CHECK(env["GIT_SSH_COMMAND"] == "ssh -o ProxyCommand='/run/ccsb/ccsb-init --ssh-proxy 127.0.0.1:1080 %h %p' "
                                 "-o ControlMaster=no -o ControlPath=none");
  // E1: the launcher's own variables do not pass; E3: credentials never.
  CHECK(env.count("LAUNCHER_ONLY") == 0);
  CHECK(env.count("GITHUB_TOKEN") == 0);
  CHECK(env["LANG"] == "C.UTF-8");
}

TEST_CASE("L2: a write-denied symlink inside a writable bind is refused", "[L2][P5]") {
  auto h = worktree_host();
  h.link("/work/wt/.claude", "/work/wt/elsewhere");
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE_FALSE(plan);
  CHECK(plan.err().code == errc::unenforceable);
  CHECK(plan.err().field == "/work/wt/.claude");
}

TEST_CASE("L1: bwrap's options always go through --args FD, never its argv", "[L1]") {
  auto h = worktree_host();
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE(plan);
  auto argv = bwrap_argv(*plan, "/usr/bin/bwrap", 4);
  REQUIRE(argv.size() >= 6);
  CHECK(argv[1] == "--args");
  CHECK(argv[2] == "4");
  CHECK(argv[3] == "--");
  CHECK(argv[4] == std::string(kGuestInit));
  CHECK(argv[5] == "--exec-channel"); // S7: the command comes over the channel, never on this argv
  // No policy path (host paths of binds, masks, the run dir) is among bwrap's
  // own arguments; ccsb-init's (the broker's roots) follow "--" here and come
  // through --options-fd in the launcher (the next test).
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& a = argv[i];
    CHECK(a.find("/work/wt") == std::string::npos);
    CHECK(a.find("/home/u") == std::string::npos);
    CHECK(a.find("/run/user/1000") == std::string::npos);
  }
  auto blob = spawn_args_blob(*plan);
  REQUIRE(blob);
  CHECK(std::count(blob->begin(), blob->end(), '\0') ==
        static_cast<long>(1 + 3 * plan->environment.size() + bwrap_options(*plan).size()));
}

// What the launcher runs and feeds (render/bwrap/render.hpp "Spawned first, fed
// later"): an argv that names nothing of the policy; the environment then
// the options through --args; ccsb-init's options without its path.
TEST_CASE("L1 S7: the spawned bwrap's argv names no policy — the environment and options come through --args", "[L1][S7]") {
  const bwrap_plan plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  CHECK(bwrap_spawn_argv("/usr/bin/bwrap", 4, 64) ==
        std::vector<std::string>{"/usr/bin/bwrap", "--args", "4", "--", std::string(kGuestInit), "--options-fd", "64"});
  REQUIRE_FALSE(plan.environment.empty());
  auto blob = spawn_args_blob(plan);
  REQUIRE(blob);
  std::vector<std::string> parts;
  for (std::size_t at = 0; at < blob->size();) {
    const auto nul = blob->find('\0', at);
    REQUIRE(nul != std::string::npos); // every part ends with a NUL
    parts.emplace_back(*blob, at, nul - at);
    at = nul + 1;
  }
  std::vector<std::string> want{"--clearenv"};
  for (const auto& v : plan.environment) want.insert(want.end(), {"--setenv", v.name, v.value});
  const auto options = bwrap_options(plan);
  want.insert(want.end(), options.begin(), options.end());
  CHECK(parts == want);
  auto init = init_options_blob(plan);
  REQUIRE(init);
  std::string expect;
  const auto init_a = init_argv(plan);
  for (std::size_t i = 1; i < init_a.size(); ++i) expect += init_a[i] + std::string(1, '\0');
  CHECK(*init == expect);
  CHECK(init->find(std::string(kGuestInit)) == std::string::npos);
}

// A NUL inside a variable or an option would split it into options of its
// own on --args: a value "x\0--bind\0/\0/" would bind the host's root
// writable. Refused, naming the variable, whatever the caller of the API
// put into the policy.
TEST_CASE("L1 S7: a NUL inside the environment or an option is refused, not split into bwrap options", "[L1][S7]") {
  const bwrap_plan plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, worktree_host());
  auto with_value = plan;
  with_value.environment.push_back({"INNOCENT", std::string("x\0--bind\0/\0/", 12)});
  auto r = spawn_args_blob(with_value);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().field == "environment.INNOCENT");
  auto with_name = plan;
  with_name.environment.push_back({std::string("A\0--bind", 8), "v"});
  CHECK_FALSE(spawn_args_blob(with_name));
  auto with_option = plan;
  with_option.ops.push_back({.kind = op_kind::ro_bind, .dest = std::string("/x\0/", 4), .source = "/x"});
  CHECK_FALSE(spawn_args_blob(with_option));
  auto with_init = plan;
  with_init.init.broker.absent_denied.push_back(std::string("/w\0--broker-deny", 17));
  CHECK_FALSE(init_options_blob(with_init));
}

// ---------------------------------------------------------------------------
// Properties over generated hosts and specs.
// ---------------------------------------------------------------------------

namespace {

struct effective {
  bool visible{false};
  bool writable{false};
  std::string source; // host path bound there
};

// bwrap semantics: the last operation whose destination is the path or one of
// its ancestors decides what is there.
effective effective_at(const bwrap_plan& plan, const std::string& p) {
  effective e;
  const auto o = bwrap_options(plan);
  for (std::size_t i = 0; i < o.size(); ++i) {
    const std::string& a = o[i];
    std::string dest, source;
    bool writable = false;
    if ((a == "--bind" || a == "--ro-bind") && i + 2 < o.size()) {
      source = o[i + 1];
      dest = o[i + 2];
      writable = a == "--bind";
      i += 2;
    } else if (a == "--tmpfs" && i + 1 < o.size()) {
      dest = o[i + 1];
      source = "tmpfs";
      writable = true;
      i += 1;
    } else {
      continue;
    }
    if (within(p, dest)) {
      e.visible = true;
      e.writable = writable;
      e.source = source;
    }
  }
  return e;
}

const char* kUniverse[] = {
    "/h", "/h/.ssh", "/h/.ssh/id", "/h/.bashrc", "/h/.claude", "/h/.claude/projects", "/h/.claude/projects/x",
    "/h/.config", "/h/.config/gh", "/h/.config/git", "/h/.gitconfig", "/h/.netrc", "/h/src",
    "/w", "/w/a", "/w/a/.git", "/w/a/.git/hooks", "/w/a/.git/config", "/w/a/.claude", "/w/a/.env", "/w/a/sub",
    "/w/a/sub/.git", "/w/a/.bashrc", "/w/b", "/w/b/.git", "/w/b/.git/hooks", "/w/b/.git/config", "/w/b/src",
    "/w/c", "/w/c/.cache", "/w/c/.git"};

fake::host random_host(std::mt19937& rng) {
  auto h = fake::host::debian();
  std::uniform_int_distribution<int> pick(0, 9);
  for (const char* c : kUniverse) {
    std::string p = c;
    std::string parent = parent_of(p);
    if (parent != "/" && h.kinds.count(parent) == 0) continue; // parent missing
    if (parent != "/" && h.kinds[parent] != path_kind::dir) continue;
    int r = pick(rng);
    if (r < 2) continue; // missing
    if (r < 3 && (p.find(".git") != std::string::npos)) h.file(p);
    else if (r < 4 && p.find('.') != std::string::npos && p.rfind('/') < p.find('.')) h.file(p);
    else h.dir(p);
  }
  h.dir("/h");
  h.dir("/w");
  return h;
}

sandbox_spec random_spec(std::mt19937& rng) {
  std::uniform_int_distribution<int> coin(0, 1), die(0, 5);
  sandbox_spec s;
  s.session_id = "p";
  s.workspace_id = "p";
  const char* roots[] = {"/h", "/w", "/w/a", "/w/b", "/w/c", "/h/src"};
  for (const char* r : roots)
    if (die(rng) < 2) s.bind_mounts.push_back({r, r, coin(rng) == 1 && die(rng) < 2});
  if (s.bind_mounts.empty()) s.bind_mounts.push_back({"/w/a", "/w/a", false});
  const char* prot[] = {"/w/b", "/w/c/.git", "/h/src"};
  for (const char* p : prot)
    if (coin(rng)) s.protected_paths.push_back(p);
  const char* states[] = {"/h/.claude/projects/x", "/w/c/.cache"};
  for (const char* p : states)
    if (coin(rng)) s.runner_state_dirs.push_back(p);
  s.mode = kAllModes[static_cast<std::size_t>(die(rng)) % 4];
  return s;
}

} // namespace

namespace {

// What the launcher held and created before the plan was typed: it scanned
// the argv for `--bind`/`--ro-bind` triples inside a writable mount and
// recognised placeholders by their source path. The oracle the typed
// host_prep's occupy entries must equal, entry for entry.
std::vector<host_prep_op> occupy_from_argv(const bwrap_plan& plan, const policy& pol, const mask_sources& src) {
  std::vector<host_prep_op> out;
  const auto o = bwrap_options(plan);
  for (std::size_t i = 0; i + 2 < o.size(); ++i) {
    if (o[i] != "--bind" && o[i] != "--ro-bind") continue;
    const std::string source = o[i + 1], target = o[i + 2];
    i += 2;
    if (!std::any_of(pol.mounts.begin(), pol.mounts.end(),
                     [&](const mount_rule& m) { return m.writable && within(target, m.guest_path); }))
      continue;
    entry_shape shape = entry_shape::none;
    if (source == src.empty_dir || source == src.mask_dir) shape = entry_shape::dir;
    if (source == src.empty_file || source == src.mask_file) shape = entry_shape::file;
    if (source == src.git_commondir) shape = entry_shape::git_commondir;
    out.push_back({host_prep_op::action::occupy, target, shape});
  }
  return out;
}

} // namespace

TEST_CASE("L1 L2: property: every plan keeps its op invariants and host_prep names exactly the bind targets the launcher "
          "must hold or create",
          "[L1][L2][P4][P5][property]") {
  std::mt19937 rng(20261205);
  int rendered = 0;
  for (int iter = 0; iter < 300; ++iter) {
    fake::host h = random_host(rng);
    sandbox_spec s = random_spec(rng);
    const profile prof = std::array{profile::spec, profile::dispatch, profile::terminal}[static_cast<std::size_t>(iter % 3)];
    auto pol = compile(s, prof, facts_for(h, "/h"));
    if (!pol) continue;
    if (!std::all_of(pol->mounts.begin(), pol->mounts.end(), [&](const mount_rule& m) { return h.kinds.count(m.host_path) > 0; }))
      continue;
    auto plan = render_bwrap(*pol, h.facts());
    if (!plan) {
      CHECK(plan.err().code == errc::unenforceable);
      continue;
    }
    ++rendered;
    INFO("iteration " << iter << ", profile " << to_string(prof));
    check_plan_invariants(*plan);
    std::vector<host_prep_op> occupy;
    for (const auto& p : plan->host_prep)
      if (p.what == host_prep_op::action::occupy) occupy.push_back(p);
    CHECK(occupy == occupy_from_argv(*plan, *pol, mask_sources_for(h.facts().sources_dir)));
    // Every make_dir entry comes before the first occupy entry.
    auto first_occupy = std::find_if(plan->host_prep.begin(), plan->host_prep.end(),
                                     [](const host_prep_op& p) { return p.what == host_prep_op::action::occupy; });
    CHECK(std::none_of(first_occupy, plan->host_prep.end(),
                       [](const host_prep_op& p) { return p.what == host_prep_op::action::make_dir; }));
  }
  CHECK(rendered > 50);
}

TEST_CASE("L2: property: no writable bind covers a write-denied, protected or P5 path — read-denied paths are masked",
          "[L2][P2][P5][P3][property]") {
  std::mt19937 rng(20240611);
  int rendered = 0, refused = 0;
  for (int iter = 0; iter < 400; ++iter) {
    fake::host h = random_host(rng);
    sandbox_spec s = random_spec(rng);
    auto hf = facts_for(h, "/h");
    auto pol = compile(s, profile::spec, hf);
    if (!pol) continue;
    // State dirs must exist to be bound.
    bool sources_exist = true;
    for (const auto& m : pol->mounts)
      if (!h.kinds.count(m.host_path)) sources_exist = false;
    if (!sources_exist) continue;
    auto plan = render_bwrap(*pol, h.facts());
    if (!plan) {
      CHECK(plan.err().code == errc::unenforceable);
      ++refused;
      continue;
    }
    ++rendered;
    check_plan_invariants(*plan);
    INFO("iteration " << iter << "\n" << plan_text(*plan));
    auto mask = mask_sources_for(h.facts().sources_dir);
    auto is_mask = [&](const std::string& src) { return src == mask.mask_file || src == mask.mask_dir; };
    auto inside_state_dir = [&](const std::string& p) {
      for (const auto& w : pol->write_allow)
        if (w.why.find("runner state") != std::string::npos && within(p, w.path))
          return true;
      return false;
    };
    // Writable AND the host's object: a path under a tmpfs (E5's scratch
    // HOME) is a fresh object of the session's, not the host's file.
    auto host_writable = [&](const std::string& p) {
      auto e = effective_at(*plan, p);
      return e.writable && e.source != "tmpfs";
    };
    const auto o = bwrap_options(*plan);
    auto is_dest = [&](const std::string& a) {
      for (std::size_t i = 0; i + 2 < o.size(); ++i)
        if ((o[i] == "--bind" || o[i] == "--ro-bind") && o[i + 2] == a)
          return true;
      return false;
    };
    // Read-denied paths that exist are masked (or invisible); missing ones
    // cannot be created: occupied by a mask, read-only, or below a pinned
    // file (P4).
    for (const auto& r : pol->read_deny) {
      auto k = h.facts().kind(r.path);
      if (k == path_kind::symlink) continue;
      INFO("read-deny " << r.path);
      if (k == path_kind::missing) {
        bool covered = std::any_of(pol->mounts.begin(), pol->mounts.end(),
                                   [&](const mount_rule& m) { return within(r.path, m.guest_path); });
        if (!covered) continue; // invisible (the minimal /etc is remounted read-only)
        std::string e = r.path;
        while (e != "/" && !h.kinds.count(e)) e = parent_of(e);
        if (e != r.path && h.kinds.count(e) && h.kinds[e] != path_kind::dir && effective_at(*plan, e).writable) {
          CHECK(is_dest(e));
          continue;
        }
        auto ef = effective_at(*plan, r.path);
        CHECK((!ef.writable || is_mask(ef.source)));
        continue;
      }
      auto e = effective_at(*plan, r.path);
      // A tmpfs there is E5's scratch HOME: the host's file is not in it.
      CHECK((!e.visible || is_mask(e.source) || e.source == "tmpfs"));
      CHECK_FALSE((e.writable && e.source != "tmpfs"));
    }
    // Write-denied paths (P2, P5) and everything below a protected path are
    // never writable, except a runner state dir's own subtree (P3).
    for (const auto& d : pol->write_deny) {
      if (is_glob(d.path) || inside_state_dir(d.path)) continue;
      // Absent at launch: a rule of the broker, not a mount (the X1 tests).
      if (!h.kinds.count(d.path)) continue;
      INFO("write-deny " << d.path);
      std::string e = d.path;
      while (e != "/" && !h.kinds.count(e)) e = parent_of(e);
      if (e != d.path && h.kinds[e] != path_kind::dir && effective_at(*plan, e).writable) {
        // Missing below a file: the file must be pinned so it cannot be
        // replaced by a directory.
        CHECK(is_dest(e));
        continue;
      }
      CHECK_FALSE(host_writable(d.path));
    }
    for (const char* c : kUniverse)
      for (const auto& p : pol->write_deny)
        if (within(c, p.path) && !inside_state_dir(c) && h.kinds.count(c)) {
          INFO("below write-deny " << p.path << ": " << c);
          CHECK_FALSE(host_writable(c));
        }
    // P3: runner state dirs stay writable unless a secret contains them.
    for (const auto& w : pol->write_allow) {
      bool in_secret = false;
      for (const auto& r : pol->read_deny)
        if (within(w.path, r.path) && h.kinds.count(r.path)) in_secret = true;
      if (in_secret) continue;
      INFO("write-allow " << w.path);
      CHECK(effective_at(*plan, w.path).writable);
    }
    // Pins: every directory between a writable bind root and a rendered
    // write-deny bind is a mount point.
    for (const auto& d : pol->write_deny) {
      auto k = h.facts().kind(d.path);
      if (k == path_kind::missing) continue;
      const mount_rule* cover = nullptr;
      for (const auto& m : pol->mounts)
        if (within(d.path, m.guest_path) && (!cover || m.guest_path.size() > cover->guest_path.size()))
          cover = &m;
      if (!cover || !cover->writable || !effective_at(*plan, cover->guest_path).writable) continue;
      for (std::string a = parent_of(d.path); a != cover->guest_path && within(a, cover->guest_path);
           a = parent_of(a)) {
        INFO("pin " << a << " for " << d.path);
        CHECK(is_dest(a));
      }
    }
  }
  CHECK(rendered > 50);
}

// ---------------------------------------------------------------------------
// Issue 7: missing secrets (item 3), symlinked secrets (item 9), git's
// redirecting files (item 10).
// ---------------------------------------------------------------------------

namespace {

bool has_op(const bwrap_plan& plan, std::initializer_list<std::string> seq) {
  const auto o = bwrap_options(plan);
  for (std::size_t i = 0; i + seq.size() <= o.size(); ++i)
    if (std::equal(seq.begin(), seq.end(), o.begin() + static_cast<std::ptrdiff_t>(i))) return true;
  return false;
}

bool has_path_rule(const std::vector<path_rule>& v, const std::string& p) {
  return std::any_of(v.begin(), v.end(), [&](const path_rule& r) { return r.path == p; });
}

sandbox_spec home_spec(bool home_read_only) {
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/work/wt", "/work/wt", false}, {"/home/u", "/home/u", home_read_only}};
  return s;
}

} // namespace

TEST_CASE("P4: a missing read-denied path in a writable bind is occupied by a mode-0000 placeholder of its shape",
          "[P4][L2]") {
  auto h = worktree_host();
  h.kinds.erase("/home/u/.ssh");
  h.kinds.erase("/home/u/.ssh/id_rsa");
  h.kinds.erase("/home/u/.netrc");
  auto plan = render_ok(home_spec(false), profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  // ~/.ssh is a directory by nature, ~/.netrc a file (paths.hpp data).
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/home/u/.ssh"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_file, "/home/u/.netrc"}));
  // A missing parent is created by the launcher and pinned; the topmost
  // created entry is what teardown removes.
  CHECK(has(created_dirs(plan), "/home/u/.docker"));
  CHECK(has_op(plan, {"--bind", "/home/u/.docker", "/home/u/.docker"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_file, "/home/u/.docker/config.json"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/home/u/.kube"}));
  CHECK(has(plan.placeholders, "/home/u/.ssh"));
  CHECK(has(plan.placeholders, "/home/u/.netrc"));
  CHECK(has(plan.placeholders, "/home/u/.docker"));
  CHECK_FALSE(has(plan.placeholders, "/home/u/.docker/config.json"));
  // A secret below an absent write-denied directory keeps its mask: that
  // directory is a rule of the broker, not a mount.
  CHECK(has_op(plan, {"--ro-bind", src.mask_file, "/home/u/.config/git/credentials"}));
  // In a read-only HOME nothing can be created: no placeholder.
  auto ro = render_ok(home_spec(true), profile::spec, h);
  CHECK_FALSE(has_op(ro, {"--ro-bind", src.mask_dir, "/home/u/.ssh"}));
  CHECK_FALSE(has(ro.placeholders, "/home/u/.ssh"));
}

TEST_CASE("P4: the parents of a mask in a writable bind are pinned, so a rename cannot leave it behind",
          "[P4][L2]") {
  auto h = worktree_host();
  h.dir("/home/u/.config");
  h.dir("/home/u/.config/gh");
  h.file("/home/u/.config/gh/hosts.yml");
  auto plan = render_ok(home_spec(false), profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/home/u/.config/gh"}));
  CHECK(has_op(plan, {"--bind", "/home/u/.config", "/home/u/.config"}));
  // Read-only HOME: nothing can be renamed, no pin needed.
  auto ro = render_ok(home_spec(true), profile::spec, h);
  CHECK(has_op(ro, {"--ro-bind", src.mask_dir, "/home/u/.config/gh"}));
  CHECK_FALSE(has_op(ro, {"--bind", "/home/u/.config", "/home/u/.config"}));
}

TEST_CASE("P4: a read-denied symlink in a writable bind refuses the run and says what to do", "[P4][P6][L2]") {
  auto h = worktree_host();
  h.kinds.erase("/home/u/.ssh");
  h.kinds.erase("/home/u/.ssh/id_rsa");
  h.dir("/home/u/dots");
  h.dir("/home/u/dots/ssh");
  h.file("/home/u/dots/ssh/id_rsa");
  h.link("/home/u/.ssh", "dots/ssh");
  auto pol = compile(home_spec(false), profile::spec, facts_for(h));
  REQUIRE(pol);
  CHECK(has_path_rule(pol->read_deny, "/home/u/dots/ssh")); // P6: the target is denied too
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE_FALSE(plan);
  CHECK(plan.err().code == errc::unenforceable);
  CHECK(plan.err().field == "/home/u/.ssh");
  CHECK_THAT(plan.err().message, Catch::Contains("read-only"));
  CHECK_THAT(plan.err().message, Catch::Contains("replace the symlink"));
  // HOME read-only: the symlink cannot be replaced; its target is masked.
  auto ro = render_ok(home_spec(true), profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(ro, {"--ro-bind", src.mask_dir, "/home/u/dots/ssh"}));
  // A symlinked directory on the way to a secret is refused the same way.
  auto h2 = worktree_host();
  h2.dir("/home/u/dots");
  h2.dir("/home/u/dots/config");
  h2.dir("/home/u/dots/config/gh");
  h2.link("/home/u/.config", "dots/config");
  auto pol2 = compile(home_spec(false), profile::spec, facts_for(h2));
  REQUIRE(pol2);
  auto plan2 = render_bwrap(*pol2, h2.facts());
  REQUIRE_FALSE(plan2);
  CHECK(plan2.err().code == errc::unenforceable);
}

TEST_CASE("P5 X1: a missing .git/commondir or config.worktree is the broker's, an existing one is re-bound read-only",
          "[P5][X1][L2]") {
  auto h = worktree_host();
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  for (const char* p : {"/work/wt/.git/commondir", "/work/wt/.git/config.worktree"}) {
    INFO(p);
    CHECK_FALSE(binds_at(plan, p));
    CHECK_FALSE(has(plan.placeholders, p));
  }
  h.file("/work/wt/.git/config.worktree");
  auto plan2 = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  CHECK(has_op(plan2, {"--ro-bind", "/work/wt/.git/config.worktree", "/work/wt/.git/config.worktree"}));
}

TEST_CASE("P5: a worktree's .git file protects its administrative directory's commondir and gitdir", "[P5][L2]") {
  auto h = worktree_host();
  h.kinds.erase("/work/wt/.git/hooks");
  h.kinds.erase("/work/wt/.git/config");
  h.file("/work/wt/.git");
  h.dir("/repos/main");
  h.dir("/repos/main/.git");
  h.dir("/repos/main/.git/hooks");
  h.file("/repos/main/.git/config");
  h.dir("/repos/main/.git/worktrees/wt");
  h.file("/repos/main/.git/worktrees/wt/commondir");
  h.file("/repos/main/.git/worktrees/wt/gitdir");
  h.gitdirs["/work/wt/.git"] = {"/repos/main/.git/worktrees/wt", "/repos/main/.git"};
  sandbox_spec s = worktree_spec(mode::chat, kLinuxWorktree);
  s.bind_mounts.push_back({"/repos/main/.git", "/repos/main/.git", false});
  auto plan = render_ok(s, profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  for (const char* p : {"/repos/main/.git/worktrees/wt/commondir", "/repos/main/.git/worktrees/wt/gitdir",
                        "/repos/main/.git/hooks", "/repos/main/.git/config", "/work/wt/.git"}) {
    INFO(p);
    CHECK(has_op(plan, {"--ro-bind", p, p}));
  }
  // Absent ones are the broker's (its root /repos/main/.git is a git directory).
  for (const char* p : {"/repos/main/.git/commondir", "/repos/main/.git/config.worktree",
                        "/repos/main/.git/worktrees/wt/config.worktree"}) {
    INFO(p);
    CHECK_FALSE(binds_at(plan, p));
  }
  CHECK(has(init_argv(plan), "/repos/main/.git"));
  // The worktrees/ directory itself stays writable (git worktree add).
  CHECK_FALSE(has_op(plan, {"--ro-bind", "/repos/main/.git/worktrees", "/repos/main/.git/worktrees"}));
}

// ---------------------------------------------------------------------------
// Issue 11 (E4, N2, L1): what real toolchains need inside.
// ---------------------------------------------------------------------------

TEST_CASE("L1: the minimal /etc has what the JVM and ssh read, and a secret inside a listed directory is masked",
          "[L1][E4][P4]") {
  auto h = worktree_host();
  h.dir("/etc/java-17-openjdk");
  h.dir("/etc/ssh/ssh_config.d");
  h.file("/etc/ssh/ssh_config");
  h.file("/etc/ssh/ssh_known_hosts");
  h.file("/etc/ssh/ssh_host_ed25519_key");
  h.file("/etc/ssh/sshd_config");
  h.file("/etc/shadow");
  h.file("/etc/sudoers");
  h.dir("/etc/sudoers.d");
  h.dir("/etc/ssl/private");
  h.file("/etc/default/locale");
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(plan, {"--ro-bind", "/etc/java-17-openjdk", "/etc/java-17-openjdk"}));
  CHECK(has_op(plan, {"--ro-bind", "/etc/ssh/ssh_config.d", "/etc/ssh/ssh_config.d"}));
  CHECK(has(plan.data_files, "/etc/ssh/ssh_config"));
  CHECK(has(plan.data_files, "/etc/ssh/ssh_known_hosts"));
  CHECK(has(plan.data_files, "/etc/default/locale"));
  // Secrets: never copied, never bound; /etc/ssl/private masked inside /etc/ssl.
  std::string text = fake::ops_text(bwrap_options(plan));
  for (const char* secret : {"/etc/shadow", "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/sshd_config"}) {
    INFO(secret);
    CHECK_FALSE(has(plan.data_files, secret));
    CHECK_THAT(text, !Catch::Contains(secret));
  }
  CHECK_FALSE(has_op(plan, {"--ro-bind", "/etc/ssh", "/etc/ssh"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/etc/ssl/private"}));
  const auto options = bwrap_options(plan);
  auto ssl = std::find(options.begin(), options.end(), "/etc/ssl");
  auto mask = std::find(options.begin(), options.end(), "/etc/ssl/private");
  CHECK(ssl < mask); // the mask lands on the bind, not under it
}

TEST_CASE("N2: ssh gets a read-only copy of the user's known hosts, ~/.ssh stays masked", "[N2][E4][P4]") {
  auto h = worktree_host();
  h.file("/home/u/.ssh/known_hosts");
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  REQUIRE(has(plan.data_files, "/home/u/.ssh/known_hosts"));
  auto idx = std::find(plan.data_files.begin(), plan.data_files.end(), "/home/u/.ssh/known_hosts") -
             plan.data_files.begin();
  CHECK(has_op(plan, {"--perms", "0444", "--file", std::to_string(kFirstDataFd + static_cast<int>(idx)),
                      std::string(kGuestKnownHosts)}));
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/home/u/.ssh"}));
  CHECK_FALSE(has_op(plan, {"--ro-bind", "/home/u/.ssh/known_hosts", "/home/u/.ssh/known_hosts"}));
  std::map<std::string, std::string> env;
  for (const auto& v : plan.environment) env[v.name] = v.value;
  CHECK(env["GIT_SSH_COMMAND"] == "ssh -o ProxyCommand='/run/ccsb/ccsb-init --ssh-proxy 127.0.0.1:1080 %h %p' "
                                 "-o ControlMaster=no -o ControlPath=none -o UserKnownHostsFile='" +
                                     std::string(kGuestKnownHosts) + "'");
  // No file, no copy and no option; a symlink or anything but a regular file is not copied either.
  for (auto kind : {path_kind::missing, path_kind::symlink, path_kind::dir}) {
    auto h2 = worktree_host();
    if (kind != path_kind::missing) h2.kinds["/home/u/.ssh/known_hosts"] = kind;
    if (kind == path_kind::symlink) h2.links["/home/u/.ssh/known_hosts"] = "/nowhere";
    auto p2 = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h2);
    CHECK_FALSE(has(p2.data_files, "/home/u/.ssh/known_hosts"));
    for (const auto& v : p2.environment)
      if (v.name == "GIT_SSH_COMMAND") CHECK(v.value.find("UserKnownHostsFile") == std::string::npos);
  }
}

TEST_CASE("E3: the JVM options are the policy's alone, whatever the launcher inherited", "[E3][E4][N2]") {
  auto h = worktree_host();
  auto facts = facts_for(h);
  facts.env["JAVA_TOOL_OPTIONS"] = "-javaagent:/tmp/evil.jar";
  facts.env["_JAVA_OPTIONS"] = "-javaagent:/tmp/evil.jar";
  facts.env["NODE_OPTIONS"] = "--require /tmp/evil.js";
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts);
  REQUIRE(pol);
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE(plan);
  int java = 0;
  for (const auto& v : plan->environment) {
    CHECK(v.value.find("evil") == std::string::npos);
    if (v.name == "JAVA_TOOL_OPTIONS") {
      ++java;
      CHECK(v.value == "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 "
                       "-Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=localhost|127.*|[::1]");
    }
    CHECK(v.name != "_JAVA_OPTIONS");
    CHECK(v.name != "NODE_OPTIONS");
  }
  CHECK(java == 1);
}

TEST_CASE("E4: a toolchain home from PATH is a read-only bind, the secrets inside it stay masked", "[E4][P4][L2]") {
  auto h = fake::host::debian();
  h.dir("/work/wt");
  h.dir("/home/u/.cargo");
  h.dir("/home/u/.rustup");
  h.dir("/home/u/.cargo/bin");
  h.file("/home/u/.cargo/bin/cargo");
  h.file("/home/u/.cargo/credentials.toml");
  h.file("/home/u/.cargo/config.toml");
  h.dir("/home/u/.rustup/toolchains");
  auto facts = facts_for(h);
  facts.env["PATH"] = "/home/u/.cargo/bin:/usr/bin:/bin";
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/work/wt", "/work/wt", false}};
  auto pol = compile(s, profile::spec, facts);
  REQUIRE(pol);
  auto plan = render_bwrap(*pol, h.facts());
  if (!plan) FAIL(plan.err().what());
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(*plan, {"--ro-bind", "/home/u/.cargo", "/home/u/.cargo"}));
  CHECK(has_op(*plan, {"--ro-bind", "/home/u/.rustup", "/home/u/.rustup"}));
  CHECK_FALSE(has_op(*plan, {"--bind", "/home/u/.cargo", "/home/u/.cargo"}));
  CHECK(has_op(*plan, {"--ro-bind", src.mask_file, "/home/u/.cargo/credentials.toml"}));
  // Nothing below HOME besides the two homes.
  const auto o = bwrap_options(*plan);
  for (std::size_t i = 0; i + 2 < o.size(); ++i)
    if (o[i + 2].rfind("/home/u", 0) == 0) {
      INFO(o[i + 2]);
      CHECK((within(o[i + 2], "/home/u/.cargo") ||
             within(o[i + 2], "/home/u/.rustup") ||
             (o[i + 2] == "/home/u" && o[i + 1] == "--tmpfs"))); // E5: the scratch HOME
    }
  // PATH inside is the caller's, so the command is found.
  for (const auto& v : plan->environment)
    if (v.name == "PATH") CHECK(v.value == "/home/u/.cargo/bin:/usr/bin:/bin");
}

// ---------------------------------------------------------------------------
// Issue 9 (X1, P5): absent write-denied names are the broker's, not mounts.
// ---------------------------------------------------------------------------

namespace {

// Rendered where the host has the X1 broker's kernel features (fake_host's default).
result<bwrap_plan> render_with_broker(const sandbox_spec& s, profile p, const fake::host& h) {
  auto pol = compile(s, p, facts_for(h));
  REQUIRE(pol);
  return render_bwrap(*pol, h.facts());
}

bwrap_plan render_brokered(const sandbox_spec& s, profile p, const fake::host& h) {
  auto plan = render_with_broker(s, p, h);
  if (!plan) FAIL(plan.err().what());
  return *plan;
}

} // namespace

TEST_CASE("X1: golden argv for the dispatch profile under the broker", "[X1][P5][P7][golden]") {
  kGolden.check("dispatch", plan_text(render_brokered(worktree_spec(mode::chat, kLinuxWorktree), profile::dispatch, worktree_host())));
}

TEST_CASE("X1 P5: under the broker an absent write-denied name is a broker rule with no placeholder or pin or host "
          "file",
          "[X1][P5][L2]") {
  auto h = worktree_host();
  auto plan = render_brokered(worktree_spec(mode::chat, kLinuxWorktree), profile::dispatch, h);
  auto denied = broker_denied(plan);
  for (const char* p : {"/work/wt/.bashrc", "/work/wt/.vscode", "/work/wt/.cargo/config.toml", "/work/wt/.mcp.json",
                        "/work/wt/.gitmodules"}) {
    INFO(p);
    CHECK(has(denied, p));
    CHECK_FALSE(binds_at(plan, p));
  }
  // The git rules already hold the root's own git paths: not listed twice.
  for (const char* p : {"/work/wt/.git/commondir", "/work/wt/.git/config.worktree"}) {
    INFO(p);
    CHECK_FALSE(has(denied, p));
    CHECK_FALSE(binds_at(plan, p));
  }
  // Nothing is created on the host for them, so git sees nothing either.
  CHECK_FALSE(binds_at(plan, "/work/wt/.cargo"));
  for (const auto& p : plan.placeholders) CHECK_FALSE(within(p, "/work/wt"));
  for (const auto& p : created_dirs(plan)) CHECK_FALSE(within(p, "/work/wt"));
  CHECK(plan.git_excludes.empty());
  for (const auto& v : plan.environment) CHECK(v.value != "core.excludesFile");
  // Existing write-denied names keep their read-only re-binds and pins.
  CHECK(has_op(plan, {"--ro-bind", "/work/wt/.git/config", "/work/wt/.git/config"}));
  CHECK(has_op(plan, {"--ro-bind", "/work/wt/.git/hooks", "/work/wt/.git/hooks"}));
  CHECK(has_op(plan, {"--bind", "/work/wt/.git", "/work/wt/.git"}));
  // The spec profile has the same rules but the P7 names.
  auto spec = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  CHECK(broker_denied(spec) == denied);
  CHECK(!has(init_argv(spec), "--broker-name"));
  CHECK(has(init_argv(plan), "--broker-name"));
  CHECK_FALSE(binds_at(spec, "/work/wt/.bashrc"));
}

TEST_CASE("X1 P4 P5: under the broker a missing read-denied name keeps its mask also below an absent denied "
          "directory",
          "[X1][P4][P5][L2]") {
  auto h = worktree_host();
  h.kinds.erase("/home/u/.ssh");
  h.kinds.erase("/home/u/.ssh/id_rsa");
  auto plan = render_brokered(home_spec(false), profile::dispatch, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/home/u/.ssh"}));
  CHECK(has(plan.placeholders, "/home/u/.ssh"));
  // ~/.config/git is write-denied and absent: a rule; the secret below it a mask.
  CHECK(has(broker_denied(plan), "/home/u/.config/git"));
  CHECK_FALSE(has_op(plan, {"--ro-bind", src.empty_dir, "/home/u/.config/git"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_file, "/home/u/.config/git/credentials"}));
  CHECK(has(created_dirs(plan), "/home/u/.config/git"));
}

TEST_CASE("X1 P5: under the broker a symlink on the way to an absent denied name still refuses the run",
          "[X1][P5][L2]") {
  auto h = worktree_host();
  h.dir("/work/wt/elsewhere");
  h.link("/work/wt/.cargo", "elsewhere");
  auto plan = render_with_broker(worktree_spec(mode::chat, kLinuxWorktree), profile::dispatch, h);
  REQUIRE_FALSE(plan);
  CHECK(plan.err().code == errc::unenforceable);
  CHECK(plan.err().field == "/work/wt/.cargo");
}

// ---------------------------------------------------------------------------
// Issue 9 (L1, L8): the minimal /etc from one manifest, built by bwrap or
// bound from the launcher's view in one operation.
// ---------------------------------------------------------------------------

namespace {

constexpr const char* kFakeView = "/run/user/1000/ccsb/etc-views/v-0123456789abcdef/etc";

fake::host etc_host() {
  auto h = worktree_host();
  h.dir("/etc/java-17-openjdk");
  h.dir("/etc/ssh/ssh_config.d");
  h.file("/etc/ssh/ssh_config");
  h.dir("/etc/ssl/private");
  h.link("/etc/localtime", "/usr/share/zoneinfo/Etc/UTC");
  h.file("/etc/shadow");
  h.file("/home/u/.ssh/known_hosts");
  return h;
}

bwrap_plan render_view(const sandbox_spec& s, profile p, const fake::host& h) {
  auto pol = compile(s, p, facts_for(h));
  REQUIRE(pol);
  auto f = h.facts();
  f.etc_view = kFakeView;
  auto plan = render_bwrap(*pol, f);
  if (!plan) FAIL(plan.err().what());
  return *plan;
}

// Every operation whose destination is /etc or below it.
std::vector<std::string> etc_ops(const bwrap_plan& plan) {
  std::vector<std::string> out;
  const auto o = bwrap_options(plan);
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (o[i].rfind("--", 0) != 0) continue;
    std::size_t j = i + 1;
    while (j < o.size() && o[j].rfind("--", 0) != 0) ++j;
    if (j > i + 1 && within(o[j - 1], "/etc")) {
      std::string op;
      for (std::size_t k = i; k < j; ++k) op += (k == i ? "" : " ") + o[k];
      out.push_back(op);
    }
  }
  return out;
}

} // namespace

TEST_CASE("L1: golden argv with the /etc view", "[L1][L8][golden]") {
  kGolden.check("etc_view", plan_text(render_view(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, etc_host())));
}

TEST_CASE("L1 L8: with a view the minimal /etc is one read-only bind and nothing else, the known hosts stay a copy",
          "[L1][L8]") {
  auto h = etc_host();
  auto plan = render_view(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  CHECK(etc_ops(plan) == std::vector<std::string>{"--ro-bind " + std::string(kFakeView) + " /etc"});
  CHECK(fake::ops_text(bwrap_options(plan)).find("--remount-ro /etc") == std::string::npos);
  // No /etc file is a data file; the known hosts are the first one.
  REQUIRE(plan.data_files == std::vector<std::string>{"/home/u/.ssh/known_hosts"});
  CHECK(has_op(plan, {"--perms", "0444", "--file", std::to_string(kFirstDataFd), std::string(kGuestKnownHosts)}));
  // The bind comes where the tmpfs was: after the system tree, before /proc.
  const auto options = bwrap_options(plan);
  auto view = std::find(options.begin(), options.end(), kFakeView);
  auto usr = std::find(options.begin(), options.end(), "/usr");
  auto proc = std::find(options.begin(), options.end(), "--proc");
  CHECK(usr < view);
  CHECK(view < proc);
  // The rest of the argv is the same as without a view.
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  auto without = render_bwrap(*pol, h.facts());
  REQUIRE(without);
  auto rest = [](const bwrap_plan& p) { // without /etc and the data files
    std::vector<std::string> out;
    std::stringstream ss(fake::ops_text(bwrap_options(p)));
    std::string line;
    while (std::getline(ss, line))
      if (line.find(" /etc") == std::string::npos && line.rfind("--perms", 0) != 0 && line.rfind("--file", 0) != 0)
        out.push_back(line);
    return out;
  };
  CHECK(rest(plan) == rest(*without));
  CHECK(init_argv(plan) == init_argv(*without));
  CHECK(plan.environment == without->environment);
}

TEST_CASE("L1: both /etc layouts come from one manifest: every entry, copy and mask of the manifest is in bwrap's",
          "[L1][P4]") {
  auto h = etc_host();
  for (profile p : {profile::spec, profile::terminal}) {
    auto spec = worktree_spec(mode::chat, kLinuxWorktree);
    auto pol = compile(spec, p, facts_for(h));
    REQUIRE(pol);
    const auto f = h.facts();
    const etc_manifest m = minimal_etc(*pol, f.kind);
    CHECK(m.view_blocker.empty());
    auto plan = render_bwrap(*pol, f);
    REQUIRE(plan);
    const auto src = mask_sources_for(f.sources_dir);
    std::vector<std::string> want{"--tmpfs /etc"};
    std::size_t data = 0;
    for (const auto& e : m.entries) {
      if (e.kind == path_kind::file)
        want.push_back("--file " + std::to_string(kFirstDataFd + static_cast<int>(data++)) + " " + e.path);
      else
        want.push_back("--ro-bind " + e.path + " " + e.path);
    }
    for (const auto& mk : m.masks)
      want.push_back("--ro-bind " + (mk.dir ? src.mask_dir : src.mask_file) + " " + mk.path);
    want.push_back("--remount-ro /etc");
    CHECK(etc_ops(*plan) == want);
    // The open network's extras only without the proxies.
    const bool resolv = std::any_of(m.entries.begin(), m.entries.end(),
                                    [](const etc_entry& e) { return e.path == "/etc/resolv.conf"; });
    CHECK(resolv == (p == profile::terminal));
  }
  // The secrets of the host /etc are never entries; /etc/ssl/private is a mask.
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  const etc_manifest m = minimal_etc(*pol, h.facts().kind);
  for (const auto& e : m.entries) CHECK(e.path != "/etc/shadow");
  CHECK(m.masks == std::vector<etc_mask>{{"/etc/ssl/private", true}});
}

TEST_CASE("L1 P4: a secret inside a listed symlink to a directory is masked too", "[L1][P4]") {
  auto h = worktree_host();
  h.kinds.erase("/etc/ssl");
  h.link("/etc/ssl", "/usr/lib/ssl");
  h.dir("/etc/ssl/private"); // what lstat sees through the link
  auto plan = render_ok(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, h);
  const auto src = mask_sources_for(h.facts().sources_dir);
  CHECK(has_op(plan, {"--ro-bind", "/etc/ssl", "/etc/ssl"}));
  CHECK(has_op(plan, {"--ro-bind", src.mask_dir, "/etc/ssl/private"}));
}

TEST_CASE("L1: a policy mount over /etc or inside it keeps bwrap's layout, and the manifest says why", "[L1][L8]") {
  struct c {
    std::string host, guest;
    bool read_only;
    bool covered;
  };
  for (const auto& k : {c{"/etc", "/etc", true, true}, c{"/etc/ssl", "/etc/ssl", true, false},
                        c{"/etc/apt", "/etc/apt", true, false}}) {
    INFO(k.guest);
    auto h = etc_host();
    h.dir("/etc");
    h.dir("/etc/apt");
    auto spec = worktree_spec(mode::chat, kLinuxWorktree);
    spec.bind_mounts.push_back({k.host, k.guest, k.read_only});
    auto pol = compile(spec, profile::spec, facts_for(h));
    if (!pol) FAIL(pol.err().what());
    const etc_manifest m = minimal_etc(*pol, h.facts().kind);
    CHECK(m.covered == k.covered);
    CHECK_THAT(m.view_blocker, Catch::Contains(k.guest));
    auto f = h.facts();
    f.etc_view = kFakeView;
    auto plan = render_bwrap(*pol, f);
    REQUIRE(plan);
    CHECK(!has(bwrap_options(*plan), kFakeView));
    CHECK(has_op(*plan, {"--tmpfs", "/etc"}));
    CHECK(std::any_of(plan->notes.begin(), plan->notes.end(),
                      [](const std::string& n) { return n.rfind("the /etc view is not used: ", 0) == 0; }));
    auto without = render_bwrap(*pol, h.facts());
    REQUIRE(without);
    CHECK(bwrap_options(*plan) == bwrap_options(*without));
  }
  // A view path that is not absolute is refused, naming the field.
  auto h = etc_host();
  auto pol = compile(worktree_spec(mode::chat, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  auto f = h.facts();
  f.etc_view = "etc-views/v-0/etc";
  auto bad = render_bwrap(*pol, f);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().field == "facts.etc_view");
}

TEST_CASE("L1: no listed /etc path lies inside another (the view copies each listed tree once)", "[L1]") {
  std::vector<std::string_view> all;
  for (const auto& e : kSystemEtc) all.push_back(e.path);
  for (const auto& e : kSystemEtcOpenNetwork) all.push_back(e.path);
  for (auto a : all) {
    CHECK(a.rfind("/etc/", 0) == 0);
    for (auto b : all)
      if (a != b) CHECK_FALSE(within(a, b));
  }
}

TEST_CASE("L1: with a session uid, binds inside an idmapped root come from its staged clone and the sandbox keeps its ids",
          "[L1][L7]") {
  auto h = worktree_host();
  auto pol = compile(worktree_spec(mode::orchestrate, kLinuxWorktree), profile::spec, facts_for(h));
  REQUIRE(pol);
  auto plain = render_bwrap(*pol, h.facts());
  REQUIRE(plain);
  auto f = h.facts();
  f.sandbox_ids = bwrap_facts::ids{65534, 65534};
  f.source_aliases = {{"/work/wt", "/run/x/idmap-0"}, {"/home/u", "/run/x/idmap-1"}};
  auto staged = render_bwrap(*pol, f);
  REQUIRE(staged);
  // --uid/--gid right after the user namespace; nothing without the facts.
  const auto o = bwrap_options(*staged);
  const auto plain_o = bwrap_options(*plain);
  auto u = std::find(o.begin(), o.end(), "--unshare-user");
  REQUIRE(u != o.end());
  REQUIRE(std::distance(u, o.end()) > 6);
  CHECK(std::vector<std::string>(u + 2, u + 6) == std::vector<std::string>{"--uid", "65534", "--gid", "65534"});
  CHECK(!has(plain_o, "--uid"));
  // The same operations at the same destinations; only sources inside an
  // aliased root changed, to the same place inside its clone. The longest
  // root wins, a source outside every root (masks, /usr) is untouched.
  REQUIRE(o.size() == plain_o.size() + 4);
  const std::size_t at = static_cast<std::size_t>(
      std::distance(plain_o.begin(), std::find(plain_o.begin(), plain_o.end(), "--unshare-user")) + 2);
  std::size_t wt = 0, home = 0;
  for (std::size_t i = 0; i + 2 < plain_o.size(); ++i) {
    const std::size_t k = i < at ? i : i + 4; // the same operation in the staged plan
    const auto& op = plain_o[i];
    if (op != "--bind" && op != "--ro-bind") continue;
    CHECK(o[k] == op);
    const auto& src = plain_o[i + 1];
    const auto& got = o[k + 1];
    INFO(op << " " << src << " " << plain_o[i + 2]);
    CHECK(o[k + 2] == plain_o[i + 2]);
    if (within(src, "/work/wt")) {
      CHECK(got == "/run/x/idmap-0" + src.substr(8));
      ++wt;
    } else if (within(src, "/home/u")) {
      CHECK(got == "/run/x/idmap-1" + src.substr(7));
      ++home;
    } else {
      CHECK(got == src);
    }
  }
  CHECK(wt >= 1);
  CHECK(home >= 1);
}

// ---- E5: the scratch HOME (render/bwrap/render.hpp "Scratch HOME") ----

namespace {

// The index of `seq` in the options, or -1.
long index_of(const std::vector<std::string>& o, std::initializer_list<std::string> seq) {
  for (std::size_t i = 0; i + seq.size() <= o.size(); ++i)
    if (std::equal(seq.begin(), seq.end(), o.begin() + static_cast<std::ptrdiff_t>(i))) return static_cast<long>(i);
  return -1L;
}

std::string env_of(const bwrap_plan& plan, const std::string& name) {
  for (const auto& v : plan.environment)
    if (v.name == name) return v.value;
  return "<unset>";
}

} // namespace

TEST_CASE("E5: an unbound HOME becomes a capped private tmpfs at its path, under the binds below it, with the git "
          "identity copied in",
          "[E5][L7][golden]") {
  auto h = worktree_host();
  h.dir("/home/u/proj");
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/home/u/proj", "/home/u/proj", false}, {"/work/wt", "/work/wt", false}};
  for (profile p : {profile::dispatch, profile::spec}) {
    INFO(to_string(p));
    auto pol = compile(s, p, facts_for(h));
    REQUIRE(pol);
    REQUIRE(scratch_home(*pol) == std::optional<std::string>("/home/u"));
    auto f = h.facts();
    f.tmp_size_bytes = 32ull << 20;
    f.identity = {"Ada Lovelace", "ada@example.com"};
    auto plan = render_bwrap(*pol, f);
    REQUIRE(plan);
    const auto o = bwrap_options(*plan);
    const std::string cap = std::to_string(32ull << 20);
    long home = index_of(o, {"--perms", "0700", "--size", cap, "--tmpfs", "/home/u"});
    long proj = index_of(o, {"--bind", "/home/u/proj", "/home/u/proj"});
    REQUIRE(home >= 0);
    REQUIRE(proj > home); // the bind below HOME lands on the scratch tmpfs, not under it
    // Nothing of the host's HOME itself is bound: no secret there can show.
    CHECK_FALSE(binds_at(*plan, "/home/u"));
    CHECK_FALSE(binds_at(*plan, "/home/u/.ssh"));
    long gc = index_of(o, {"--perms", "0644", "--file", std::to_string(kFirstDataFd + static_cast<int>(plan->data_files.size()) - 1),
                          "/home/u/.gitconfig"});
    CHECK(gc > proj);
    REQUIRE_FALSE(plan->data_files.empty());
    CHECK(plan->data_files.back() == f.run_dir + "/gitconfig");
    CHECK(env_of(*plan, "HOME") == "/home/u");
    if (p == profile::dispatch) kGolden.check("scratch_home", plan_text(*plan));
    // X2: the scratch HOME is writable under Landlock too.
    auto ll = confine::landlock_rules_for(*pol, false);
    CHECK(std::find(ll.read_write.begin(), ll.read_write.end(), "/home/u") != ll.read_write.end());
  }
  // No identity: no .gitconfig and no data file for it.
  auto pol = compile(s, profile::dispatch, facts_for(h));
  REQUIRE(pol);
  auto plan = render_bwrap(*pol, h.facts());
  REQUIRE(plan);
  CHECK(index_of(bwrap_options(*plan), {"--tmpfs", "/home/u"}) >= 0);
  CHECK(fake::ops_text(bwrap_options(*plan)).find(".gitconfig") == std::string::npos);
  CHECK(std::none_of(plan->data_files.begin(), plan->data_files.end(),
                     [](const std::string& d) { return d.find("gitconfig") != std::string::npos; }));
}

TEST_CASE("E5: a HOME bound read-only keeps its masks, and the scratch HOME moves to /run/ccsb/home with the "
          "toolchain homes named",
          "[E5][E4][P4]") {
  auto h = worktree_host();
  h.dir("/home/u/.cargo");
  h.dir("/home/u/.cargo/bin");
  h.dir("/home/u/.rustup");
  sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = {{"/home/u", "/home/u", true}, {"/work/wt", "/work/wt", false}};
  auto hf = facts_for(h);
  hf.env["PATH"] = "/home/u/.cargo/bin:/usr/bin:/bin";
  auto pol = compile(s, profile::dispatch, hf);
  REQUIRE(pol);
  REQUIRE(scratch_home(*pol) == std::optional<std::string>(kScratchHomeFallback));
  auto f = h.facts();
  f.tmp_size_bytes = 1 << 20;
  f.identity = {"Ada", "ada@example.com"};
  auto plan = render_bwrap(*pol, f);
  REQUIRE(plan);
  const auto o = bwrap_options(*plan);
  CHECK(index_of(o, {"--ro-bind", "/home/u", "/home/u"}) >= 0);
  CHECK(binds_at(*plan, "/home/u/.ssh")); // the mask
  CHECK(index_of(o, {"--perms", "0700", "--size", std::to_string(1 << 20), "--tmpfs", "/run/ccsb/home"}) >= 0);
  CHECK(index_of(o, {"--tmpfs", "/home/u"}) < 0);
  CHECK(fake::ops_text(o).find("/run/ccsb/home/.gitconfig") != std::string::npos);
  CHECK(env_of(*plan, "HOME") == "/run/ccsb/home");
  for (const auto& t : pol->toolchains) {
    if (t.path == "/home/u/.cargo") CHECK(env_of(*plan, "CARGO_HOME") == "/home/u/.cargo");
    if (t.path == "/home/u/.rustup") CHECK(env_of(*plan, "RUSTUP_HOME") == "/home/u/.rustup");
  }
  auto ll = confine::landlock_rules_for(*pol, false);
  CHECK(std::find(ll.read_write.begin(), ll.read_write.end(), "/run/ccsb/home") != ll.read_write.end());
}

TEST_CASE("E5: a writable HOME (terminal profile, a writable bind of HOME) gets no scratch HOME", "[E5][T2]") {
  for (profile p : {profile::spec, profile::terminal}) {
    INFO(to_string(p));
    auto h = worktree_host();
    sandbox_spec s;
    s.session_id = "s1";
    s.workspace_id = "w1";
    s.bind_mounts = {{"/work/wt", "/work/wt", false}};
    if (p == profile::spec) s.bind_mounts.push_back({"/home/u", "/home/u", false}); // the terminal binds HOME itself
    auto pol = compile(s, p, facts_for(h));
    REQUIRE(pol);
    CHECK_FALSE(scratch_home(*pol));
    auto f = h.facts();
    f.identity = {"Ada", "ada@example.com"};
    auto plan = render_bwrap(*pol, f);
    REQUIRE(plan);
    CHECK(index_of(bwrap_options(*plan), {"--tmpfs", "/home/u"}) < 0);
    CHECK(fake::ops_text(bwrap_options(*plan)).find(".gitconfig\n") == std::string::npos);
    CHECK(env_of(*plan, "HOME") == "/home/u");
  }
}

TEST_CASE("E5: the scratch .gitconfig holds user.name and user.email only, quoted, and control characters drop a value "
          "with a note",
          "[E5]") {
  auto g = gitconfig_for({"Ada \"the\" L\\ovelace", "ada@example.com"});
  CHECK(g.content == "[user]\n\tname = \"Ada \\\"the\\\" L\\\\ovelace\"\n\temail = \"ada@example.com\"\n");
  CHECK(g.notes.empty());
  auto bad = gitconfig_for({"Ada\n[core]\n\tsshCommand = evil", "ada@example.com\r"});
  CHECK(bad.content.empty());
  REQUIRE(bad.notes.size() == 2);
  CHECK(bad.notes[0].find("user.name") != std::string::npos);
  CHECK(bad.notes[1].find("user.email") != std::string::npos);
  auto half = gitconfig_for({"Ada\x01", "ada@example.com"});
  CHECK(half.content == "[user]\n\temail = \"ada@example.com\"\n");
  CHECK(gitconfig_for({}).content.empty());
}
