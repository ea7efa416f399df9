// Escape tests, seccomp side (L6): the baseline filter is on in every native
// sandbox, each table entry fails with exactly its errno, foreign syscall ABIs
// fail, the same calls behave differently on the host (so these tests fail
// without the filter), and ordinary programs still work under it — for a root
// launcher and for an unprivileged one.
//
// The probe (try_syscall.c, a static helper binary next to ccsb-run) prints
// "NAME ERRNO ARG0 ARG1" per call; what each line should show comes from the
// table itself (confine::seccomp_verdict), so a table entry without a probe
// call, or a probe call the filter answers differently from the table, fails.
#include "escape_support.hpp"

#include "broker/filter.hpp"
#include "ccsb/confine/seccomp_table.hpp"
#include "ccsb/sys/seccomp.hpp"

#include <linux/filter.h>

#include <array>
#include <cinttypes>
#include <cstring>
#include <span>

using namespace escape;
namespace confine = ccsb::confine;

namespace {

struct probe_line {
  std::string name;
  int err = -1;
  std::uint64_t a0 = 0, a1 = 0;
};

std::vector<probe_line> parse_probe(const std::string& out) {
  std::vector<probe_line> v;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    std::istringstream ls(line);
    probe_line p;
    std::string err, a0, a1, extra;
    if (!(ls >> p.name >> err >> a0 >> a1) || (ls >> extra)) continue;
    char* end = nullptr;
    long e = std::strtol(err.c_str(), &end, 10);
    if (*end != '\0') continue;
    p.err = static_cast<int>(e);
    p.a0 = std::strtoull(a0.c_str(), nullptr, 0);
    p.a1 = std::strtoull(a1.c_str(), nullptr, 0);
    v.push_back(p);
  }
  return v;
}

// The probe's child died of a signal at the i386 entry: this machine cannot
// make a 32-bit system call at all (the entry faults before any filter runs).
bool abi_unusable(const probe_line& p) { return p.name == "i386:getpid-unusable"; }

// What the table says the sandbox answers: an errno, or 0 (let through). A
// 32-bit entry that faults is not the table's to answer: inside it must fault
// exactly as on the host (the reference), and a host whose entry works makes
// the names differ, which fails.
int expected_errno(const probe_line& p) {
  if (abi_unusable(p)) return 0;
  if (p.name.rfind("x32:", 0) == 0 || p.name.rfind("i386:", 0) == 0) return confine::kForeignAbiErrno;
  if (p.name == "thread") return 0;
  const std::array<std::uint64_t, 6> args{p.a0, p.a1, 0, 0, 0, 0};
  return confine::seccomp_verdict(p.name, args);
}

std::string describe(const probe_line& p) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "(%#" PRIx64 ", %#" PRIx64 ")", p.a0, p.a1);
  return p.name + buf;
}

std::string errno_name(int e) { return std::to_string(e) + " (" + (e ? std::strerror(e) : "success") + ")"; }

std::vector<std::string> skipped_entries() {
  std::vector<std::string> skipped;
  auto fd = ccsb::sys::baseline_seccomp_memfd(&skipped);
  REQUIRE(fd);
  return skipped;
}

// Every line the table denies shows exactly the entry's errno; every line it
// lets through shows what `reference` (the same probe on the host) shows, when
// given; every table entry the architecture has is exercised by some line.
void check_probe_against_table(const std::vector<probe_line>& inside, const std::vector<probe_line>* reference) {
  REQUIRE(!inside.empty());
  if (reference) REQUIRE(inside.size() == reference->size());
  for (std::size_t i = 0; i < inside.size(); ++i) {
    const auto& p = inside[i];
    const int want = expected_errno(p);
    INFO("sandbox: " << describe(p) << " -> " << errno_name(p.err));
    if (abi_unusable(p))
      WARN("the i386 entry faults on this machine (signal " << p.err
                                                           << "), so the 32-bit ABI cannot be used inside either"
                                                           << (reference ? "; the host's probe must fault the same way"
                                                                         : ""));
    if (want != 0) {
      INFO("the table expects " << errno_name(want));
      CHECK(p.err == want);
    } else if (reference) {
      const auto& h = (*reference)[i];
      INFO("on the host: " << describe(h) << " -> " << errno_name(h.err));
      REQUIRE(h.name == p.name);
      INFO("allowed by the table; on the host " << errno_name(h.err));
      CHECK(p.err == h.err);
    }
  }
  const auto skipped = skipped_entries();
  for (const auto& e : confine::kSeccompTable) {
    if (std::find(skipped.begin(), skipped.end(), std::string(e.name)) != skipped.end()) continue;
    bool exercised = false;
    for (const auto& p : inside) {
      const std::array<std::uint64_t, 6> args{p.a0, p.a1, 0, 0, 0, 0};
      if (p.name == e.name && confine::entry_denies(e, args)) exercised = true;
    }
    INFO("table entry " << e.name << " (" << e.why << ")");
    CHECK(exercised);
  }
  bool foreign = false;
  for (const auto& p : inside)
    if (p.name.find(':') != std::string::npos) foreign = true;
#if defined(__x86_64__)
  CHECK(foreign); // the x32 and i386 paths were tried
#else
  (void)foreign;
#endif
}

std::string sysctl(const std::string& name) {
  std::string v = read_file("/proc/sys/" + name);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

// Where the host kernel can itself refuse a probe call with the errno the
// filter would give, so the difference cannot be shown there. Each holds only
// under its condition; on a root CI host with the stock Debian settings none
// applies and every denied call differs.
std::string host_may_agree(const probe_line& h, int want) {
  if (h.err != want) return {};
  const bool root = ::geteuid() == 0;
  if (want == EPERM && !root) return "the host refuses this call to a non-root user by its own capability check";
  if (want == ENOSYS) return "the host kernel has no such call";
  if ((h.name == "kexec_load" || h.name == "kexec_file_load") && sysctl("kernel/kexec_load_disabled") == "1")
    return "kernel.kexec_load_disabled=1 on the host";
  if ((h.name == "init_module" || h.name == "finit_module" || h.name == "delete_module") &&
      sysctl("kernel/modules_disabled") == "1")
    return "kernel.modules_disabled=1 on the host";
  return {};
}

const char* kSeccompStatus = "sed -n 's/^Seccomp:[[:space:]]*/@@seccomp=/p' /proc/self/status";

} // namespace

TEST_CASE("L6: every table entry has a reason, a known errno and an argument the probe reports", "[L6]") {
  for (const auto& e : confine::kSeccompTable) {
    INFO(e.name);
    CHECK(!e.why.empty());
    CHECK((e.err == EPERM || e.err == ENOSYS || e.err == EAFNOSUPPORT));
    CHECK(e.arg < 2); // the probe prints ARG0 and ARG1
    if (e.match == confine::arg_match::outside32) CHECK(!e.allowed.empty());
    if (e.match == confine::arg_match::any_bit) CHECK(e.value != 0);
    // Two entries of one syscall never both deny a call with different errnos:
    // only disjoint equals32 values may share a name.
    for (const auto& o : confine::kSeccompTable) {
      if (&o == &e || o.name != e.name) continue;
      CHECK(e.match == confine::arg_match::equals32);
      CHECK(o.match == confine::arg_match::equals32);
      CHECK((o.arg == e.arg && o.value != e.value));
    }
  }
  for (const auto& n : confine::kSeccompNotDenied) CHECK(!n.why.empty());
  CHECK(!confine::kWhyForeignAbi.empty());
}

TEST_CASE("L6: the personality blocks cover exactly the values outside the allowed set", "[L6]") {
  const auto blocks = confine::complement_blocks(confine::kAllowedPersonalities);
  std::uint64_t covered = 0;
  for (const auto& [mask, value] : blocks) {
    CHECK((value & ~mask) == 0);
    covered += std::uint64_t{1} << (32 - __builtin_popcount(mask));
    for (std::uint32_t a : confine::kAllowedPersonalities) CHECK((a & mask) != value);
  }
  // Prefix blocks are disjoint when they differ on their common mask bits.
  for (std::size_t i = 0; i < blocks.size(); ++i)
    for (std::size_t j = i + 1; j < blocks.size(); ++j) {
      const std::uint32_t common = blocks[i].first & blocks[j].first;
      CHECK((blocks[i].second & common) != (blocks[j].second & common));
    }
  CHECK(covered == (std::uint64_t{1} << 32) - std::size(confine::kAllowedPersonalities));
  // The verdict reads the kernel's 32 bits: the upper half changes nothing.
  const std::array<std::uint64_t, 6> rie{confine::abi::kReadImpliesExec | (std::uint64_t{1} << 32), 0, 0, 0, 0, 0};
  CHECK(confine::seccomp_verdict("personality", rie) == EPERM);
  const std::array<std::uint64_t, 6> query{confine::abi::kPersonalityQuery, 0, 0, 0, 0, 0};
  CHECK(confine::seccomp_verdict("personality", query) == 0);
}

TEST_CASE("L6: the filter builds from the whole table into a sealed memfd the kernel accepts", "[L6]") {
  std::vector<std::string> skipped;
  auto fd = ccsb::sys::baseline_seccomp_memfd(&skipped);
  if (!fd) FAIL(fd.err().what());
  struct stat st {};
  REQUIRE(::fstat(fd->get(), &st) == 0);
  CHECK(st.st_size > 0);
  CHECK(st.st_size % static_cast<off_t>(sizeof(sock_filter)) == 0);
  CHECK(st.st_size / static_cast<off_t>(sizeof(sock_filter)) <= BPF_MAXINSNS);
  const int seals = ::fcntl(fd->get(), F_GET_SEALS);
  CHECK((seals & F_SEAL_WRITE) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK(::lseek(fd->get(), 0, SEEK_CUR) == 0);
  CHECK(::write(fd->get(), "x", 1) < 0); // sealed
  for (const auto& name : skipped) {
    INFO("skipped " << name);
    bool optional = false;
    for (const auto& e : confine::kSeccompTable)
      if (e.name == name && !e.required) optional = true;
    CHECK(optional);
  }
}

// The launch path loads programs built while building (init/bpfgen.cpp,
// CCSB_PRECOMPILED_BPF) instead of building them per launch (issue 9). They
// must be exactly what libseccomp builds from today's table and today's
// broker rules: a table edit that the build did not regenerate, or a
// generator that wrote something else, fails here.
TEST_CASE("L6 X1: the precompiled programs are the ones libseccomp builds at run time", "[L6][X1]") {
#if !CCSB_PRECOMPILED_BPF
  FAIL("this build has no precompiled seccomp programs (CCSB_PRECOMPILED_BPF): ccsb-run builds the L6 filter per launch");
#else
  auto same = [](const std::vector<sock_filter>& a, std::span<const sock_filter> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size_bytes()) == 0;
  };
  std::vector<std::string> skipped_now;
  auto baseline = ccsb::sys::baseline_seccomp_program(&skipped_now);
  if (!baseline) FAIL(baseline.err().what());
  CHECK(same(*baseline, ccsb::precompiled::kBaseline));
  std::vector<std::string> skipped_built(ccsb::precompiled::kBaselineSkipped.begin(),
                                         ccsb::precompiled::kBaselineSkipped.end());
  CHECK(skipped_now == skipped_built);
  auto broker_now = ccsb::init::build_filter_libseccomp();
  if (!broker_now) FAIL(broker_now.err().what());
  CHECK(same(*broker_now, ccsb::precompiled::kBroker));
  auto broker_loaded = ccsb::init::build_filter();
  REQUIRE(broker_loaded);
  CHECK(same(*broker_loaded, ccsb::precompiled::kBroker));
  // And the memfd bwrap reads holds the precompiled baseline, byte for byte.
  auto fd = ccsb::sys::baseline_seccomp_memfd();
  REQUIRE(fd);
  std::vector<sock_filter> in_memfd(std::size(ccsb::precompiled::kBaseline) + 1);
  const ssize_t n = ::pread(fd->get(), in_memfd.data(), in_memfd.size() * sizeof(sock_filter), 0);
  REQUIRE(n == static_cast<ssize_t>(sizeof ccsb::precompiled::kBaseline));
  in_memfd.resize(std::size(ccsb::precompiled::kBaseline));
  CHECK(same(in_memfd, ccsb::precompiled::kBaseline));
#endif
}

TEST_CASE("L6: every denied syscall fails inside with the table's errno and differently on the host", "[L6][escape]") {
  sandbox_fixture fx;
  const std::string probe = bin_path("try_syscall");
  REQUIRE(::access(probe.c_str(), X_OK) == 0);
  const std::string inside_probe = fx.home + "/try_syscall";
  write_file(inside_probe, read_file(probe), 0755);

  auto r = fx.ccsb("\"" + inside_probe + "\"; echo @@probe=$?\n" + kSeccompStatus +
                   "\nsed -n 's/^Seccomp:[[:space:]]*/@@init_seccomp=/p' /proc/1/status");
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("probe") == "0");
  CHECK(r.get("seccomp") == "2");      // SECCOMP_MODE_FILTER
  CHECK(r.get("init_seccomp") == "2"); // the supervisor, PID 1, runs under it too

  auto host = run_host({probe});
  INFO("--- the probe on the host ---\n" << host.out << host.err);
  REQUIRE(host.exit_code == 0);
  const auto in = parse_probe(r.out);
  const auto out = parse_probe(host.out);
  check_probe_against_table(in, &out);

  // Without the filter these calls reach the kernel: on the host each denied
  // call ends some other way (EINVAL, EFAULT, EBADF, ENOSYS, success).
  REQUIRE(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int want = expected_errno(in[i]);
    if (want == 0) continue;
    const auto& h = out[i];
    INFO("host: " << describe(h) << " -> " << errno_name(h.err) << "; the sandbox: " << errno_name(want));
    const std::string why = host_may_agree(h, want);
    if (!why.empty()) {
      WARN(describe(h) << ": the host answers " << errno_name(h.err) << " too: " << why);
      continue;
    }
    CHECK(h.err != want);
  }
}

TEST_CASE("L6: ordinary programs work under the filter, unshare -U fails with EPERM", "[L6][escape]") {
  sandbox_fixture fx;
  const std::string py =
      "import concurrent.futures, subprocess, threading\n"
      "hits = []\n"
      "ts = [threading.Thread(target=hits.append, args=(i,)) for i in range(8)]\n"
      "[t.start() for t in ts]\n"
      "[t.join() for t in ts]\n"
      "with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
      "    squares = sum(ex.map(lambda x: x * x, range(10)))\n"
      "child = subprocess.run(['/bin/echo', 'spawned'], capture_output=True, text=True).stdout.strip()\n"
      "print('@@py=%d %d %s' % (len(hits), squares, child))\n";
  const std::string h = fx.home;
  auto r = fx.ccsb(
      "echo @@bash=$((6 * 7))\n"
      "mkdir -p " + h + "/c/d && printf 'b\\na\\n' > " + h + "/c/d/f && cp " + h + "/c/d/f " + h + "/c/g && "
      "mv " + h + "/c/g " + h + "/c/h && ln -s h " + h + "/c/l && chmod 600 " + h + "/c/h && "
      "sort " + h + "/c/l | tr '\\n' , | sed 's/^/@@sort=/'; echo\n"
      "ls -la / > /dev/null && stat " + h + "/c/h > /dev/null && sha256sum " + h + "/c/h > /dev/null && "
      "du -s " + h + "/c > /dev/null && date > /dev/null && id > /dev/null && nproc > /dev/null && "
      "timeout 5 true && rm -r " + h + "/c; echo @@coreutils=$?\n"
      "/usr/bin/python3 -c \"" + py + "\"; echo @@python=$?\n"
      "git -c safe.directory='*' -C " + fx.work + " status --porcelain > /dev/null; echo @@git=$?\n"
      "tar -C " + h + " -cf /tmp/t.tar .bashrc .gitconfig && mkdir /tmp/x && tar -C /tmp/x -xf /tmp/t.tar && "
      "cmp /tmp/x/.bashrc " + h + "/.bashrc; echo @@tar=$?\n"
      "unshare -U true 2>&1; echo @@unshare=$?\n" + kSeccompStatus);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("bash") == "42");
  CHECK(r.get("sort") == "a,b,");
  CHECK(r.get("coreutils") == "0");
  CHECK(r.get("py") == "8 285 spawned"); // threads and posix_spawn: clone3 falls back to clone
  CHECK(r.get("python") == "0");
  CHECK(r.get("git") == "0");
  CHECK(r.get("tar") == "0");
  CHECK(failed(r.get("unshare")));
  CHECK(r.out.find("Operation not permitted") != std::string::npos);
  CHECK(r.get("seccomp") == "2");
}

TEST_CASE("L6: the filter is on for an unprivileged launcher too", "[L6][escape]") {
  // ccsb-run as uid/gid 65534 (setpriv, util-linux): bwrap then runs in a
  // user namespace. The programs are copied into a directory of their own so
  // the build directory's permissions do not matter.
  REQUIRE(::access("/usr/bin/setpriv", X_OK) == 0);
  const uid_t nobody = 65534;
  ccsb_test::temp_dir base_dir("ccsb-seccomp", "/tmp", 0755);
  const std::string base = base_dir.path();
  const std::string bin = base + "/bin", home = base + "/home", proj = base + "/proj";
  for (const auto& d : {bin, home, proj}) make_dirs(d);
  for (const char* prog : {"ccsb-run", "ccsb-init", "egressd"}) write_file(bin + "/" + prog, read_file(bin_path(prog)), 0755);
  write_file(proj + "/try_syscall", read_file(bin_path("try_syscall")), 0755);
  REQUIRE(::chown(home.c_str(), nobody, nobody) == 0);
  REQUIRE(::chown(proj.c_str(), nobody, nobody) == 0);

  spawn_options o;
  o.argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin + "/ccsb-run",
            "--profile", "spec", "--bind", home + ":ro", "--network", "off", "--", "/bin/sh", "-c",
            sandbox_fixture::wrap(proj + "/try_syscall; echo @@probe=$?; id -u | sed 's/^/@@uid=/'\n" + kSeccompStatus)};
  o.env = {"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "USER=nobody", "LOGNAME=nobody"};
  o.cwd = proj;
  auto r = run(o);
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("probe") == "0");
  CHECK(r.get("uid") == "65534");
  CHECK(r.get("seccomp") == "2");
  check_probe_against_table(parse_probe(r.out), nullptr);
}
