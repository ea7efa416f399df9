// ccsb_test/specs.hpp — the sandbox spec the renderers' golden files start
// from: a git worktree bound writable, an original checkout bound and
// protected, one exec-grant root, in each host's layout.
#pragma once

#include "ccsb/spec.hpp"

#include <string>
#include <vector>

namespace ccsb_test {

struct worktree_layout {
  std::vector<ccsb::bind_mount> binds;
  std::vector<std::string> protected_paths;
  std::vector<std::string> exec_grant_roots;
};

// Linux (tests/linux/golden): the worktree, the original checkout, HOME read-only.
inline const worktree_layout kLinuxWorktree{
    {{"/work/wt", "/work/wt", false}, {"/repos/orig", "/repos/orig", false}, {"/home/u", "/home/u", true}},
    {"/repos/orig"},
    {"/work/wt/bin"}};

// macOS (tests/macos/golden): the worktree and the original checkout under /Users.
inline const worktree_layout kMacWorktree{
    {{"/Users/u/wt", "/Users/u/wt", false}, {"/Users/u/repos/orig", "/Users/u/repos/orig", false}},
    {"/Users/u/repos/orig"},
    {"/Users/u/wt/node_modules/.bin"}};

inline ccsb::sandbox_spec worktree_spec(ccsb::mode m, const worktree_layout& layout) {
  ccsb::sandbox_spec s;
  s.session_id = "s1";
  s.workspace_id = "w1";
  s.bind_mounts = layout.binds;
  s.protected_paths = layout.protected_paths;
  s.exec_grant_roots = layout.exec_grant_roots;
  s.mode = m;
  return s;
}

} // namespace ccsb_test
