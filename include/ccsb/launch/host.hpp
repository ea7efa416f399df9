// ccsb/launch/host.hpp — gather the host facts the pure core decides from
// (launcher only; does I/O). Each function answers one question, once:
//   detect_platform()        B2: linux / wsl2 / macos / other
//   which(name, PATH)        a tool on PATH (absolute path or nullopt)
//   gather_probe_facts(u)    B2: tools present, the user-namespace trial
//                            (L1, ccsb/launch/userns_probe.hpp: what blocks
//                            the namespaces, for the cause and its fix), and
//                            can bwrap really unshare? u = unshare_check::run
//                            (a server, once at start-up) always asks bwrap
//                            itself (bwrap_can_unshare, as nobody when
//                            root); unshare_check::skip (ccsb-run) asks bwrap
//                            only when the trial failed (bwrap may have an
//                            AppArmor profile the launcher lacks) and fails
//                            closed: a blocked host refuses the run (exit
//                            125, the cause and its fix), it never steps
//                            down to the host; skip also takes a success
//                            of the trial remembered under the same key
//                            (userns_probe.hpp run_userns_trial_cached).
//   gather_host_facts()      policy.hpp host_facts: home, realpath, lstat,
//                            `.git` file resolution, environment
//   host_bwrap_facts(...)    render_bwrap.hpp bwrap_facts: lstat, readlink
//   self_dir()               the directory of the running executable
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/userns_probe.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render_bwrap.hpp"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace ccsb::launch {

inline std::string read_text(const std::string& path, std::size_t max = 64 * 1024) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::string out(max, '\0');
  f.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<std::size_t>(f.gcount()));
  return out;
}

inline platform detect_platform() {
  utsname u{};
  if (::uname(&u) != 0) return platform::other;
  std::string sys = u.sysname;
  if (sys == "Darwin") return platform::macos;
  if (sys != "Linux") return platform::other;
  std::string rel = u.release;
  for (auto& c : rel) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (rel.find("microsoft") != std::string::npos || rel.find("wsl") != std::string::npos) return platform::wsl2;
  return platform::linux_;
}

inline std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

inline std::optional<std::string> which(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  std::stringstream ss(path_var);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty() || dir.front() != '/') continue; // never the current directory
    std::string cand = dir + "/" + name;
    struct stat st{};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return std::nullopt;
}

inline std::string path_variable() {
  const char* p = std::getenv("PATH");
  return p ? p : "/usr/local/bin:/usr/bin:/bin";
}

inline std::optional<std::string> real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

// Runs `bwrap --unshare-all --disable-userns --hostname ccsb --ro-bind / /
// --proc /proc true` once, as the sandbox would run (a new proc, further user
// namespaces disabled, its hostname; as nobody when the launcher is root:
// L1); captures its stderr.
inline std::pair<bool, std::string> bwrap_can_unshare(const std::string& bwrap) {
  auto err = make_pipe();
  if (!err) return {false, err.err().message};
  unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  spawn_options o;
  o.path = bwrap;
  o.argv = {bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--hostname",
            "ccsb", "--ro-bind", "/", "/", "--proc", "/proc", "true"};
  o.cwd = "/";
  if (::geteuid() == 0) o.run_as = spawn_options::credentials{65534, 65534};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.fds = {{0, null.get()}, {1, null.get()}, {2, err->write.get()}};
  auto pid = spawn(o);
  if (!pid) return {false, pid.err().message};
  err->write.reset();
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err->read.get(), buf, sizeof buf)) > 0 && text.size() < 4096)
    text.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  while (::waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, text};
}

enum class unshare_check { run, skip };

inline probe_facts gather_probe_facts(unshare_check check = unshare_check::run) {
  probe_facts f;
  f.platform = detect_platform();
  std::string path = path_variable();
  auto bwrap = which("bwrap", path);
  f.has_bwrap = bwrap.has_value();
  f.has_sandbox_exec = ::access("/usr/bin/sandbox-exec", X_OK) == 0;
  if (f.platform == platform::linux_ || f.platform == platform::wsl2) {
    // X2: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION).
    long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U);
    f.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
  }
  if (bwrap && (f.platform == platform::linux_ || f.platform == platform::wsl2)) {
    // ccsb-run (skip) launches once per probe: a success of the trial is
    // remembered in the run-dir base (userns_probe.hpp run_userns_trial_cached).
    std::optional<std::string> base;
    if (check == unshare_check::skip)
      if (auto b = run_dir_base()) base = *b;
    f.userns = base ? run_userns_trial_cached(*base + "/" + kUsernsTrialFile) : run_userns_trial();
    if (check == unshare_check::skip) {
      f.fail_closed_when_blocked = true;
      if (f.userns.tried && f.userns.failed_at == userns_step::none) {
        f.can_unshare = true; // the real run still has the last word (exit 125)
        return f;
      }
    }
    auto [okay, text] = bwrap_can_unshare(*bwrap);
    f.can_unshare = okay;
    f.unshare_error = text;
  }
  return f;
}

// $HOME when it is absolute; else this uid's entry in /etc/passwd (read
// directly, not through NSS: ccsb-run is linked statically, and a static
// binary's getpwuid would dlopen the NSS modules of whatever glibc the host
// has); else "/".
inline std::string home_directory(const std::map<std::string, std::string>& env) {
  auto it = env.find("HOME");
  if (it != env.end() && !it->second.empty() && it->second.front() == '/') return it->second;
  std::istringstream pw(read_text("/etc/passwd", 4 * 1024 * 1024));
  const std::string uid = std::to_string(::getuid());
  std::string line;
  while (std::getline(pw, line)) {
    // name:password:uid:gid:gecos:home:shell
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string field;
    while (std::getline(ls, field, ':')) f.push_back(field);
    if (f.size() >= 6 && f[2] == uid && !f[5].empty() && f[5].front() == '/') return f[5];
  }
  return "/";
}

inline path_kind lstat_kind(const std::string& p) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) return path_kind::missing;
  if (S_ISLNK(st.st_mode)) return path_kind::symlink;
  if (S_ISDIR(st.st_mode)) return path_kind::dir;
  if (S_ISREG(st.st_mode)) return path_kind::file;
  return path_kind::other;
}

inline std::optional<std::string> read_link(const std::string& p) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// A `.git` file: "gitdir: PATH" (relative to the file's directory), and that
// directory's "commondir" (relative to the gitdir). Absolute, resolved.
inline std::vector<std::string> git_dirs_of(const std::string& dotgit_file) {
  std::vector<std::string> out;
  auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  };
  std::string text = trim(read_text(dotgit_file, 4096));
  if (text.rfind("gitdir:", 0) != 0) return out;
  std::string g = text.substr(7);
  while (!g.empty() && g.front() == ' ') g.erase(0, 1);
  if (g.empty()) return out;
  std::string base = dotgit_file.substr(0, dotgit_file.rfind('/'));
  if (g.front() != '/') g = base + "/" + g;
  std::string gd = real_path(g).value_or(ccsb::detail::lexical_normal(g));
  out.push_back(gd);
  std::string common = trim(read_text(gd + "/commondir", 4096));
  if (!common.empty()) {
    if (common.front() != '/') common = gd + "/" + common;
    out.push_back(real_path(common).value_or(ccsb::detail::lexical_normal(common)));
  }
  return out;
}

inline host_facts gather_host_facts() {
  host_facts h;
  h.env = current_environment();
  h.home = home_directory(h.env);
  h.resolve = [](const std::string& p) { return real_path(p); };
  h.kind = lstat_kind;
  h.gitdirs = git_dirs_of;
  return h;
}

inline std::string self_dir() {
  auto exe = read_link("/proc/self/exe");
  if (!exe) return {};
  return exe->substr(0, exe->rfind('/'));
}

inline bwrap_facts host_bwrap_facts() {
  bwrap_facts f;
  f.kind = lstat_kind;
  f.readlink = read_link;
  return f;
}

} // namespace ccsb::launch
