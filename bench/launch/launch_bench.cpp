// launch_bench — what does it cost to start one sandboxed command?
//
// Measures, in one run and side by side, N launches of `true`:
//   (a) bare          /bin/true
//   (b) bwrap         bwrap with ccsb's namespace flags, no proxies
//   (c) ccsb-run      ccsb-run --profile spec -- /bin/true  (launch, one exec, destroy:
//                     egressd, proxy listeners handed over; --profile dispatch adds the X1 broker)
//   (d) srt           sandbox-runtime's CLI (Node), `srt /bin/true`
//   (e) floor         floor_launch: ccsb-run's process shape (a static launcher,
//                     bwrap with the dispatch plan's namespaces and mounts, a static
//                     PID 1 that forks the command) with none of ccsb's work
//                     (floor_launch.c); srt / floor is the best srt / ccsb-run ratio
//                     that shape allows here, ccsb-run - floor what ccsb's work costs
// For each: wall time (mean, median, min, p90) from fork to wait4, and peak
// memory two ways: wait4's ru_maxrss (the largest single process of the
// reaped tree) and a sampled peak of the whole tree's summed RSS (/proc, a
// separate pass so sampling does not disturb the timings). The timed runs
// go round robin over the cases, so a neighbour's load falls on all alike.
//
//   launch_bench [--runs N] [--warmup N] [--ccsb-run PATH] [--srt PATH] [--bwrap PATH]
//                [--ccsb-run-baseline PATH]   (another build, e.g. the previous commit's)
//                [--profile spec|dispatch]    (ccsb-run's profile, spec by default)
//
// Targets (printed with the ratios): issue 9: ccsb-run <= 2x bare bwrap,
// srt / ccsb-run >= 40x; issue 4: ccsb-run - bare <= 20 ms, ccsb-run peak
// memory <= 1/4 of srt's.
// Not run by ctest; bench/launch/run.sh installs srt and runs this.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef CCSB_BIN_DIR
#define CCSB_BIN_DIR "."
#endif

namespace {

struct bench_case {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
};

struct one_run {
  double ms = 0;
  long maxrss_kib = 0;
  int status = 0;
};

struct summary {
  bool ok = false;
  std::string error;
  std::vector<double> ms;
  std::vector<long> maxrss;
  long tree_peak_kib = 0;
  double mean() const { return ms.empty() ? 0 : std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size(); }
  double pct(double p) const {
    if (ms.empty()) return 0;
    auto v = ms;
    std::sort(v.begin(), v.end());
    double idx = p * (v.size() - 1);
    size_t lo = static_cast<size_t>(idx), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
  }
  double median() const { return pct(0.5); }
  long maxrss_median() const {
    if (maxrss.empty()) return 0;
    auto v = maxrss;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

std::string read_all(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

pid_t start(const bench_case& c, int out_fd) {
  std::vector<std::string> a = c.argv, e = c.env;
  std::vector<char*> av, ev;
  for (auto& s : a) av.push_back(s.data());
  av.push_back(nullptr);
  for (auto& s : e) ev.push_back(s.data());
  ev.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(out_fd >= 0 ? out_fd : devnull, 1);
    ::dup2(out_fd >= 0 ? out_fd : devnull, 2);
    if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) ::_exit(126);
    ::execve(av[0], av.data(), ev.data());
    ::_exit(127);
  }
  return pid;
}

one_run timed(const bench_case& c, int out_fd = -1) {
  one_run r;
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = start(c, out_fd);
  rusage ru{};
  ::wait4(pid, &r.status, 0, &ru);
  auto t1 = std::chrono::steady_clock::now();
  r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  r.maxrss_kib = ru.ru_maxrss;
  return r;
}

// Sum of VmRSS over pid and all its descendants, in KiB.
long tree_rss_kib(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, long> rss;
  long page_kib = ::sysconf(_SC_PAGESIZE) / 1024;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    std::string base = std::string("/proc/") + e->d_name;
    std::string stat = read_all(base + "/stat");
    auto rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(stat.substr(rp + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent[pid] = ppid;
    std::istringstream statm(read_all(base + "/statm"));
    long size = 0, resident = 0;
    statm >> size >> resident;
    rss[pid] = resident * page_kib;
  }
  ::closedir(d);
  std::set<pid_t> tree{root};
  bool grew = true;
  while (grew) {
    grew = false;
    for (auto& [p, pp] : parent)
      if (!tree.count(p) && tree.count(pp)) { tree.insert(p); grew = true; }
  }
  long sum = 0;
  for (pid_t p : tree) sum += rss.count(p) ? rss[p] : 0;
  return sum;
}

long sampled_peak(const bench_case& c) {
  pid_t pid = start(c, -1);
  long peak = 0;
  int status = 0;
  for (;;) {
    peak = std::max(peak, tree_rss_kib(pid));
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    ::usleep(500);
  }
  return peak;
}

// The first run of a case (captured, to show why it fails) and its warm-up.
summary check(const bench_case& c, int warmup) {
  summary s;
  // First run captured, to show why a case fails.
  char tmpl[] = "/tmp/launch-bench-out-XXXXXX";
  int fd = ::mkstemp(tmpl);
  one_run first = timed(c, fd);
  ::close(fd);
  std::string out = read_all(tmpl);
  ::unlink(tmpl);
  if (!WIFEXITED(first.status) || WEXITSTATUS(first.status) != 0) {
    std::ostringstream e;
    e << "exit status " << (WIFEXITED(first.status) ? WEXITSTATUS(first.status) : -1) << ": "
      << out.substr(0, 600);
    s.error = e.str();
    return s;
  }
  for (int i = 1; i < warmup; ++i) timed(c);
  s.ok = true;
  return s;
}

// One timed run of a case into its summary; false (with the error) when it failed.
bool sample(const bench_case& c, summary& s) {
  one_run r = timed(c);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    s.ok = false;
    s.error = "a timed run failed (status " + std::to_string(r.status) + ")";
    return false;
  }
  s.ms.push_back(r.ms);
  s.maxrss.push_back(r.maxrss_kib);
  return true;
}

bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

int rm_cb(const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }

}  // namespace

int main(int argc, char** argv) {
  int runs = 30, warmup = 3, mem_runs = 5;
  std::string ccsb_run = std::string(CCSB_BIN_DIR) + "/ccsb-run";
  std::string srt, bwrap = "/usr/bin/bwrap", baseline, profile = "spec";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::cerr << "missing value for " << a << "\n"; std::exit(2); }
      return argv[++i];
    };
    if (a == "--runs") runs = std::stoi(next());
    else if (a == "--warmup") warmup = std::max(1, std::stoi(next()));
    else if (a == "--mem-runs") mem_runs = std::stoi(next());
    else if (a == "--ccsb-run") ccsb_run = next();
    else if (a == "--srt") srt = next();
    else if (a == "--bwrap") bwrap = next();
    else if (a == "--ccsb-run-baseline") baseline = next();
    else if (a == "--profile") profile = next();
    else {
      std::cerr << "usage: launch_bench [--runs N] [--warmup N] [--mem-runs N] [--ccsb-run PATH] [--srt PATH] "
                   "[--bwrap PATH] [--ccsb-run-baseline PATH] [--profile spec|dispatch]\n";
      return 2;
    }
  }

  // A scratch HOME and worktree shared by every case, so the sandboxes bind
  // the same (small) directory.
  char tmpl[] = "/tmp/launch-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) { std::perror("mkdtemp"); return 1; }
  std::string base = tmpl, home = base + "/home", work = base + "/work";
  ::mkdir(home.c_str(), 0755);
  ::mkdir(work.c_str(), 0755);
  // A root launcher runs the sandbox as the workdir's owner, never as host
  // root (L1): hand the scratch tree to nobody, as a server would.
  ::chmod(base.c_str(), 0755);
  if (::geteuid() == 0)
    for (const auto& p : {base, home, work}) (void)::chown(p.c_str(), 65534, 65534);
  std::vector<std::string> env{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C"};

  std::vector<bench_case> cases;
  cases.push_back({"bare true", {"/bin/true"}, env, work});
  // The namespace flags ccsb's bubblewrap backend uses (L1): every namespace
  // unshared, new session, die with parent, a read-only system, private /tmp.
  cases.push_back({"bwrap true",
                   {bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind",
                    work, work, "--unshare-all", "--new-session", "--die-with-parent", "--chdir", work, "/bin/true"},
                   env, work});
  cases.push_back({"ccsb-run true", {ccsb_run, "--profile", profile, "--", "/bin/true"}, env, work});
  // Another build of ccsb-run (e.g. the previous commit's), measured in the
  // same run so a change's cost is a difference, not two runs' noise.
  if (!baseline.empty())
    cases.push_back({"baseline true", {baseline, "--profile", profile, "--", "/bin/true"}, env, work});
  if (!srt.empty()) cases.push_back({"srt true", {srt, "/bin/true"}, env, work});
  const std::string floor_launch = std::string(CCSB_BIN_DIR) + "/floor_launch";
  if (executable(floor_launch))
    cases.push_back({"floor true", {floor_launch, std::string(CCSB_BIN_DIR) + "/floor_init", "/bin/true"}, env, work});

  std::cout << "launch_bench: " << runs << " timed runs per case (after " << warmup << " warm-up), peak tree RSS over "
            << mem_runs << " sampled runs\n";
  std::cout << "  ccsb-run: " << ccsb_run << (executable(ccsb_run) ? "" : "  (NOT FOUND)") << "\n";
  std::cout << "  profile:  " << profile << "\n";
  std::cout << "  srt:      " << (srt.empty() ? std::string("(not given: --srt PATH)") : srt) << "\n\n";

  // Every case is checked and warmed up first; then the timed runs go round
  // robin (one run of each case in turn, each round starting one case later,
  // so no case always follows the same one: srt's exit disturbs whatever
  // runs next), so the load this shared machine sees at any moment falls on
  // every case alike; then the memory samples.
  std::map<std::string, summary> res;
  for (auto& c : cases) {
    if (!executable(c.argv[0])) {
      summary s;
      s.error = "not executable: " + c.argv[0];
      res[c.name] = s;
      continue;
    }
    res[c.name] = check(c, warmup);
  }
  for (int i = 0; i < runs; ++i)
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const auto& c = cases[(k + static_cast<std::size_t>(i)) % cases.size()];
      if (auto& s = res[c.name]; s.ok) (void)sample(c, s);
    }
  for (auto& c : cases)
    if (auto& s = res[c.name]; s.ok)
      for (int i = 0; i < mem_runs; ++i) s.tree_peak_kib = std::max(s.tree_peak_kib, sampled_peak(c));

  std::cout << std::left << std::setw(16) << "case" << std::right << std::setw(10) << "mean ms" << std::setw(11)
            << "median ms" << std::setw(9) << "min ms" << std::setw(9) << "p90 ms" << std::setw(14) << "maxrss KiB"
            << std::setw(16) << "tree RSS KiB" << "\n";
  std::cout << std::string(85, '-') << "\n";
  std::cout << std::fixed << std::setprecision(2);
  for (auto& c : cases) {
    auto& s = res[c.name];
    std::cout << std::left << std::setw(16) << c.name << std::right;
    if (!s.ok) {
      std::cout << "  FAILED: " << s.error << "\n";
      continue;
    }
    std::cout << std::setw(10) << s.mean() << std::setw(11) << s.median() << std::setw(9) << s.pct(0) << std::setw(9)
              << s.pct(0.9) << std::setw(14) << s.maxrss_median() << std::setw(16) << s.tree_peak_kib << "\n";
  }
  std::cout << "\n(maxrss = wait4 ru_maxrss, the largest single process of the reaped tree, median of the runs;\n"
               " tree RSS = peak of the summed RSS of the whole process tree, sampled from /proc)\n\n";

  auto& bare = res["bare true"];
  auto& bw = res["bwrap true"];
  auto& cc = res["ccsb-run true"];
  auto& sr = res["srt true"];
  std::cout << std::setprecision(2);
  if (cc.ok && bare.ok) {
    double d = cc.median() - bare.median();
    std::cout << "ccsb-run - bare true (median):   " << d << " ms   target <= 20 ms   " << (d <= 20 ? "MET" : "MISSED")
              << "\n";
  }
  if (cc.ok && bw.ok) {
    std::cout << "ccsb-run - bwrap true (median):  " << cc.median() - bw.median()
              << " ms   (egressd, ccsb-init, Landlock and policy on top of bwrap)\n";
    double x = cc.median() / bw.median();
    std::cout << "ccsb-run / bwrap true (median):  " << x << "x   target <= 2x (issue 9)   " << (x <= 2 ? "MET" : "MISSED")
              << "\n";
  }
  auto& fl = res["floor true"];
  if (cc.ok && fl.ok)
    std::cout << "ccsb-run - floor (median):       " << cc.median() - fl.median()
              << " ms   (ccsb's own work: policy, run dir, cgroups, /etc view, seccomp, Landlock, egressd, protocol)\n";
  if (fl.ok && bw.ok) std::cout << "floor / bwrap true (median):     " << fl.median() / bw.median() << "x\n";
  if (fl.ok && sr.ok)
    std::cout << "srt / floor (median time):       " << sr.median() / fl.median()
              << "x   (the best srt / ccsb-run that ccsb's process shape allows on this machine)\n";
  auto& bl = res["baseline true"];
  if (cc.ok && bl.ok)
    std::cout << "ccsb-run - baseline (median):    " << cc.median() - bl.median()
              << " ms   (this build against --ccsb-run-baseline, same run)\n";
  if (cc.ok && sr.ok) {
    double x = sr.median() / cc.median();
    std::cout << "srt / ccsb-run (median time):    " << x << "x   target >= 40x (issue 9; issue 4: 20x)   "
              << (x >= 40 ? "MET" : "MISSED") << "\n";
    double m1 = static_cast<double>(cc.maxrss_median()) / static_cast<double>(sr.maxrss_median());
    double m2 = static_cast<double>(cc.tree_peak_kib) / static_cast<double>(sr.tree_peak_kib);
    std::cout << "ccsb-run / srt (maxrss):         " << m1 << "   target <= 0.25   " << (m1 <= 0.25 ? "MET" : "MISSED")
              << "\n";
    std::cout << "ccsb-run / srt (tree RSS):       " << m2 << "   target <= 0.25   " << (m2 <= 0.25 ? "MET" : "MISSED")
              << "\n";
  } else if (!sr.ok && !srt.empty()) {
    std::cout << "srt ratios: n/a (srt failed)\n";
  }

  ::nftw(base.c_str(), rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  bool all_ok = true;
  for (auto& [n, s] : res) all_ok = all_ok && s.ok;
  return all_ok ? 0 : 1;
}
