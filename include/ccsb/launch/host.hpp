// ccsb/launch/host.hpp — gather the host facts the pure core decides from
// (launcher only; does I/O). Platform-neutral POSIX: the macOS build takes
// its host facts from here too. Each function answers one question, once:
//   detect_platform()        B2: linux / wsl2 / macos / other
//   which(name, PATH)        a tool on PATH (absolute path or nullopt)
//   gather_host_facts()      policy.hpp host_facts: home, realpath (a
//                            path_resolver: one per launch), lstat, `.git`
//                            file resolution, environment
//   host_bwrap_facts(...)    render/bwrap/render.hpp bwrap_facts: lstat, readlink
//   self_dir()               the directory of the running executable
//                            (platform.hpp executable_path)
// The B2 probe is per platform (platform.hpp): on Linux
// ccsb/launch/linux/host_probe.hpp (tools, the user-namespace trial, Landlock,
// can bwrap unshare), on macOS macos/seatbelt_driver.hpp seatbelt_probe_facts.
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/sys/platform.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
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

// realpath(3) for absolute paths, remembering every lookup of a name in an
// already resolved directory: one readlink per distinct (directory, name)
// instead of one per component of every path. compile() resolves each P4/P5
// name, and each of their ancestors when a name is missing, so most lookups
// repeat (1,742 readlink per launch with realpath, issue 9). The same answers
// as realpath: every component resolved, ".." taken after the symlinks
// before it, a missing component, a non-directory on the way or an
// unsearchable directory is nullopt, more than 40 symlinks is nullopt
// (ELOOP), and a relative path goes to realpath itself.
// A resolver remembers what it saw, so it answers for one moment of the
// host: one per launch (gather_host_facts makes a new one each call; ccsbd
// gathers per launch).
class path_resolver {
public:
  std::optional<std::string> operator()(const std::string& p) {
    if (p.empty() || p.front() != '/') return real_path(p);
    if (auto hit = answers_.find(p); hit != answers_.end()) return hit->second;
    return answers_.emplace(p, walk(p)).first->second;
  }

private:
  std::optional<std::string> walk(const std::string& p) {
    std::vector<std::string> todo; // the components still to walk, last first
    push_components(todo, p);
    std::string cur;              // resolved so far, "" for "/"
    entry* last = nullptr;        // cur's entry while nothing showed it is a directory
    int links = 0;
    while (!todo.empty()) {
      std::string c = std::move(todo.back());
      todo.pop_back();
      if (c == "." || c == "..") {
        // As realpath: what comes before "." or ".." must be a directory.
        if (last && !is_dir(cur, *last)) return std::nullopt;
        last = nullptr;
        if (c == "..") cur.erase(cur.empty() ? 0 : cur.rfind('/'));
        continue;
      }
      const std::string cand = cur + "/" + c;
      auto it = seen_.find(cand);
      if (it == seen_.end()) it = seen_.emplace(cand, look(cand)).first;
      entry& e = it->second;
      if (e.kind == entry::missing) return std::nullopt;
      if (last) last->dir = true; // a name was found in it
      if (e.kind == entry::plain) {
        cur = cand;
        last = &e;
        continue;
      }
      if (++links > 40 || e.target.empty()) return std::nullopt; // ELOOP, ENOENT
      push_components(todo, e.target);
      if (e.target.front() == '/') cur.clear();
      last = nullptr; // cur is the link's directory
    }
    if (cur.size() >= PATH_MAX) return std::nullopt; // ENAMETOOLONG
    return cur.empty() ? std::string("/") : cur;
  }

  struct entry {
    enum kind_t { missing, plain, link } kind;
    std::string target;      // a link's text
    std::optional<bool> dir; // a plain entry: known to be a directory (or not)
  };
  // A trailing slash asks for a directory, like a trailing "/.".
  static void push_components(std::vector<std::string>& todo, const std::string& p) {
    std::vector<std::string> parts;
    std::size_t i = 0;
    while (i < p.size()) {
      while (i < p.size() && p[i] == '/') ++i;
      std::size_t j = p.find('/', i);
      if (j == std::string::npos) j = p.size();
      if (j > i) parts.emplace_back(p, i, j - i);
      i = j;
    }
    if (!parts.empty() && p.back() == '/') parts.emplace_back(".");
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  }
  // readlink answers all three: the text (a link), EINVAL (it exists and is
  // no link), anything else (ENOENT, ENOTDIR, EACCES, ELOOP...): it does not
  // resolve.
  static entry look(const std::string& p) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
    if (n >= 0 && static_cast<std::size_t>(n) < sizeof buf)
      return {entry::link, std::string(buf, static_cast<std::size_t>(n)), std::nullopt};
    if (n < 0 && errno == EINVAL) return {entry::plain, {}, std::nullopt};
    return {entry::missing, {}, std::nullopt};
  }
  static bool is_dir(const std::string& p, entry& e) {
    if (!e.dir) {
      struct stat st{};
      e.dir = ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    return *e.dir;
  }
  std::unordered_map<std::string, entry> seen_; // node-based: `last` stays valid across inserts
  std::unordered_map<std::string, std::optional<std::string>> answers_; // whole paths asked before
};

// A fresh resolver for one launch, as host_facts::resolve takes it.
inline std::function<std::optional<std::string>(const std::string&)> launch_resolver() {
  return [r = std::make_shared<path_resolver>()](const std::string& p) { return (*r)(p); };
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
  std::string gd = real_path(g).value_or(ccsb::lexical_normal(g));
  out.push_back(gd);
  std::string common = trim(read_text(gd + "/commondir", 4096));
  if (!common.empty()) {
    if (common.front() != '/') common = gd + "/" + common;
    out.push_back(real_path(common).value_or(ccsb::lexical_normal(common)));
  }
  return out;
}

// The names in a directory (host_facts::list_dir); empty when it cannot be
// read as one.
inline std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

// host_facts::git_head: the HEAD of a linked worktree's admin dir, a
// regular file (a symlink or anything else: nullopt, no ref moves).
inline std::optional<std::string> git_head_of(const std::string& admin) {
  struct stat st{};
  if (::lstat((admin + "/HEAD").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return read_text(admin + "/HEAD", 4096);
}

inline host_facts gather_host_facts() {
  host_facts h;
  h.env = current_environment();
  h.home = home_directory(h.env);
  h.resolve = launch_resolver();
  h.kind = lstat_kind;
  h.gitdirs = git_dirs_of;
  h.git_head = git_head_of;
  h.list_dir = list_directory;
  return h;
}

inline std::string self_dir() {
  auto exe = sys::this_platform::executable_path();
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
