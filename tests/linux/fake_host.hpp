// A deterministic fake host for render_bwrap tests: injected path kinds,
// symlink targets and .git files.
#pragma once

#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/spec.hpp"

#include <map>
#include <string>
#include <vector>

namespace fake {

struct host {
  std::map<std::string, ccsb::path_kind> kinds;
  std::map<std::string, std::string> links;
  std::map<std::string, std::vector<std::string>> gitdirs;

  void dir(const std::string& p) { kinds[p] = ccsb::path_kind::dir; }
  void file(const std::string& p) { kinds[p] = ccsb::path_kind::file; }
  void link(const std::string& p, const std::string& to) {
    kinds[p] = ccsb::path_kind::symlink;
    links[p] = to;
  }

  // Debian merged-usr system tree plus a minimal /etc.
  static host debian() {
    host h;
    h.dir("/usr");
    h.link("/bin", "usr/bin");
    h.link("/sbin", "usr/sbin");
    h.link("/lib", "usr/lib");
    h.link("/lib64", "usr/lib64");
    h.dir("/etc/ssl");
    h.file("/etc/passwd");
    h.file("/etc/group");
    h.file("/etc/ld.so.cache");
    h.file("/etc/resolv.conf");
    return h;
  }

  ccsb::path_kind kind(const std::string& p) const {
    auto it = kinds.find(p);
    return it == kinds.end() ? ccsb::path_kind::missing : it->second;
  }

  // The renderer's facts. The policy's (path kinds and .git files too) are
  // facts_for() in test_render_bwrap.cpp.
  ccsb::bwrap_facts facts() const {
    ccsb::bwrap_facts f;
    f.kind = [this](const std::string& p) { return kind(p); };
    f.readlink = [this](const std::string& p) -> std::optional<std::string> {
      auto it = links.find(p);
      if (it == links.end()) return std::nullopt;
      return it->second;
    };
    f.run_dir = "/run/user/1000/ccsb-s1-abc";
    f.sources_dir = "/run/user/1000/ccsb/mask-sources";
    f.init_path = "/opt/ccsb/bin/ccsb-init";
    // Every native profile runs under the X1 broker; a test of the refusal
    // without it says creation_rules = false itself.
    f.creation_rules = true;
    return f;
  }
};

inline ccsb::host_facts host_facts(const std::string& home = "/home/u") {
  ccsb::host_facts h;
  h.home = home;
  h.resolve = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  h.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", home}, {"LANG", "C.UTF-8"}, {"GITHUB_TOKEN", "ghp_x"},
           {"LAUNCHER_ONLY", "1"}};
  return h;
}

// Joins options one operation per line: "--ro-bind /usr /usr".
inline std::string ops_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (a.rfind("--", 0) == 0 && !out.empty()) out += '\n';
    else if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

} // namespace fake
