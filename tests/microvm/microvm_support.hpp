// Helpers of the microvm tests (X4; docs/microvm.md): run the real ccsb-run
// with --backend microvm under TCG in a sandbox_fixture, and look at the
// host's processes and cgroups. Shared by every tests/microvm/ file.
#pragma once

#include "../escape/escape_support.hpp"

#include <sys/utsname.h>

namespace microvm_test {

using namespace escape;

inline std::vector<std::string> as_nobody() {
  return {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
}

inline std::string guest_dir() { return bin_path("guest"); }

// The guest image's kernel version, from its manifest.
inline std::string image_kernel() {
  std::istringstream in(read_file(guest_dir() + "/manifest"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("kernel=", 0) == 0) return line.substr(7);
  return {};
}

inline std::string host_kernel() {
  utsname u{};
  ::uname(&u);
  return u.release;
}

// Every live process whose command line mentions `needle` (QEMU's names the
// fixture's paths in its -fsdev options).
inline std::vector<std::string> processes_naming(const std::string& needle) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string cmd = read_file(std::string("/proc/") + e->d_name + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos && cmd.find("qemu") != std::string::npos)
      out.push_back(std::string(e->d_name) + ": " + cmd.substr(0, 200));
  }
  ::closedir(d);
  return out;
}

// The cgroup of process `pid`: in the v2 hierarchy (controller ""), else in
// the v1 hierarchy of `controller`.
inline bool cgroup_v2() { return file_exists("/sys/fs/cgroup/cgroup.controllers"); }
inline std::string cgroup_of(const std::string& pid, const std::string& controller) {
  std::istringstream in(read_file("/proc/" + pid + "/cgroup"));
  std::string line;
  const std::string key = cgroup_v2() ? "0::" : ":" + controller + ":";
  while (std::getline(in, line)) {
    auto c = line.find(key);
    if (c != std::string::npos && (cgroup_v2() ? c == 0 : true)) return line.substr(c + key.size());
  }
  return {};
}

struct vm_run {
  bool unprivileged{false};
  std::vector<std::string> extra;
  std::vector<std::string> env_extra;
  int stdin_fd{-1}; // the command's stdin (else /dev/null)
};

inline proc_result run_vm(const sandbox_fixture& fx, const std::string& body, const vm_run& v = {}) {
  REQUIRE(::access(ccsb_run_path().c_str(), X_OK) == 0);
  INFO("guest image: " << guest_dir());
  REQUIRE(::access((guest_dir() + "/manifest").c_str(), R_OK) == 0);
  spawn_options o;
  if (v.unprivileged) o.argv = as_nobody();
  o.argv.insert(o.argv.end(), {ccsb_run_path(), "--backend", "microvm", "--microvm-accel", "tcg", "--events", fx.events});
  o.argv.insert(o.argv.end(), v.extra.begin(), v.extra.end());
  o.argv.insert(o.argv.end(), {"--", "/bin/bash", "-c", sandbox_fixture::wrap("echo \"@@kernel=$(uname -r)\"\n" + body)});
  o.env = fx.env();
  o.env.insert(o.env.end(), v.env_extra.begin(), v.env_extra.end());
  o.cwd = fx.work;
  if (v.stdin_fd >= 0) o.leak_fds.push_back({v.stdin_fd, 0});
  o.timeout_seconds = 240;
  return run(o);
}

} // namespace microvm_test
