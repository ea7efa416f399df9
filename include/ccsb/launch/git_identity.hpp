// ccsb/launch/git_identity.hpp — E5: the host user's git identity, read by
// the launcher (I/O; the renderer gets it as bwrap_facts::identity).
//
//   read_host_git_identity(home) -> {user.name, user.email}
//
// One `git config --global -z --get-regexp '^user\.(name|email)$'` (one
// fork per launch; the last value of a key wins, as with --get), run with
// HOME set to the host user's home and nothing else of the launcher's environment
// but PATH and XDG_CONFIG_HOME (git's global files are $HOME/.gitconfig and
// $XDG_CONFIG_HOME/git/config). Only these two values are read: nothing else
// of the host's git configuration (aliases, hooks, credential helpers,
// includes' other keys) reaches the session. A host without git, or without
// either value, gives empty strings; a value over 4 KiB is dropped.
#pragma once

#include "ccsb/launch/process.hpp"
#include "ccsb/render/bwrap/render.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ccsb::launch {

namespace git_identity_detail {

inline std::string find_git(const char* path_env) {
  std::string path = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/') {
      std::string cand = dir + "/git";
      if (::access(cand.c_str(), X_OK) == 0) return cand;
    }
    start = end + 1;
  }
  return {};
}

// The output of -z: "KEY\nVALUE\0" per entry (a value may hold any byte
// but NUL, so no line-based split).
inline std::string git_user_entries(const std::string& git, const std::string& home) {
  auto out = make_pipe();
  if (!out) return {};
  unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return {};
  spawn_options so;
  so.path = git;
  so.argv = {"git", "config", "--global", "-z", "--get-regexp", "^user\\.(name|email)$"};
  so.env = {{"HOME", home}, {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"GIT_CONFIG_NOSYSTEM", "1"}};
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/') so.env.push_back({"XDG_CONFIG_HOME", x});
  so.fds = {{0, null.get()}, {1, out->write.get()}, {2, null.get()}};
  so.cwd = "/";
  auto pid = spawn(so);
  out->write.reset();
  if (!pid) return {};
  std::string v;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(out->read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (v.size() < 16384) v.append(buf, static_cast<std::size_t>(n));
  }
  auto status = wait_for(*pid, std::chrono::milliseconds(5000));
  if (!status) {
    ::kill(*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
    return {};
  }
  if (exit_code_of(*status) != 0) return {};
  return v;
}

} // namespace git_identity_detail

inline bwrap_facts::git_identity read_host_git_identity(const std::string& home) {
  bwrap_facts::git_identity id;
  const std::string git = git_identity_detail::find_git(std::getenv("PATH"));
  if (git.empty() || home.empty()) return id;
  const std::string out = git_identity_detail::git_user_entries(git, home);
  std::size_t at = 0;
  while (at < out.size()) {
    auto end = out.find('\0', at);
    if (end == std::string::npos) break; // a truncated last entry is dropped
    std::string_view entry(out.data() + at, end - at);
    at = end + 1;
    auto nl = entry.find('\n');
    if (nl == std::string_view::npos) continue; // a key without a value ("[user] name" alone)
    auto key = entry.substr(0, nl);
    auto value = std::string(entry.substr(nl + 1)); // control characters stay: gitconfig_for refuses them with a note
    if (value.size() > 4096) continue;
    if (key == "user.name") id.name = std::move(value);
    else if (key == "user.email") id.email = std::move(value);
  }
  return id;
}

} // namespace ccsb::launch
