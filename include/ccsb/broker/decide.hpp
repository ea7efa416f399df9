// ccsb/broker/decide.hpp — the creation-rule decision of the X1 broker
// (P5, P7, L3, X1). Pure: no I/O, no kernel. The broker in ccsb-init
// (init/broker/notify_loop.cpp) resolves the name a system call would really
// create or change (from the caller's cwd or dirfd, following a dangling
// final symlink the way the kernel does) and asks this header:
//
//   decide(rules, op, absolute_final_path) -> verdict {allow | deny(action, reason)}
//   decide_unix_connect(path, created_by_session) -> verdict
//
// so unit tests and a libFuzzer target (fuzz/fuzz_broker_decide.cpp) exercise
// every rule without a kernel.
//
// Rules, applied only to names at or below a writable root (rules.roots;
// anything else, e.g. the private /tmp, is left to the mounts):
//  * P7 name globs (rules.names: `.env`, `*.key`, `*.pem`): the final
//    component of the name matches -> denied, at any depth. Creating one is
//    `file-write-create`; writing, truncating, renaming, linking or removing
//    an existing one is `file-write*`. Reading is never brokered. Except
//    where a createAllow glob of the session matches the whole name
//    (rules.create_allow, create_allow.hpp); the rules below still apply
//    there, and a directory is not moved out of an exception
//    (decide_move_out).
//  * Tool configurations (P5, always): each name of kRootWriteDenyPaths and
//    kNestedWriteDenyPaths (paths.hpp: `.npmrc`, `.cargo/config.toml`,
//    `.vscode`, ...), at any depth, and anything below one; a rename, link
//    or symlink onto a directory of a longer one (`.cargo`) is
//    decide_over_absent's.
//  * Git directories by content (rules.git, decide_git_dir): see "Git
//    directories by content" below; it needs facts the broker establishes.
//  * Git (rules.git): in EVERY directory named `.git` below a root (the
//    root's own, nested repositories, submodules), the names git reads
//    without being asked: `hooks` (and everything below it), `config`,
//    `config.worktree`, `commondir`; the same in each linked worktree's
//    administrative directory `.git/worktrees/NAME/` plus its `gitdir`, and
//    in each submodule git directory below `.git/modules/` (a module name
//    may have several components, so any of those names below `modules/`,
//    outside `refs/`, `logs/` and `objects/`, is denied). A root that is
//    itself a `.git` directory counts as one.
//  * `.git` itself (rules.git): no entry named `.git` below a root may be
//    created (file, directory, symlink, socket, by rename or link), written,
//    replaced or removed. A `.git` FILE (`gitdir: ../evil`) redirects the
//    host's git to a directory of the command's choosing, and a new `.git`
//    DIRECTORY is a nested repository whose config the host's `git status`
//    reads (core.fsmonitor runs a program). Consequence, on purpose: `git
//    init`, `git clone` and `git worktree add` inside a writable root fail
//    with EACCES (and a violation) in the dispatch profile; clone into /tmp
//    (outside every root) or check out with `--git-dir`/`--work-tree`.
//    Nor is `worktrees` or a new `worktrees/NAME` created in a git
//    directory below a root (see "`git worktree add` inside a writable
//    root"). Everything else in an existing `.git` (objects, refs, index,
//    logs, info/, packed-refs, *.lock files) stays writable, so commit,
//    checkout, fetch, rebase and merge work.
//  * Linked worktrees of a protected checkout (rules.linked): in their
//    common git directory only the names decide_linked allows (see "Linked
//    worktrees of a protected checkout"), and the original's working files
//    are denied.
//  * Absent write-denied names (rules.absent_denied; P2, P5): the names the
//    policy write-denies inside a writable root that did not exist when the
//    session started (`.bashrc`, `.vscode`, `.cargo/config.toml`, a missing
//    protected checkout). Nothing may be created, written, replaced or
//    removed at such a name D or anywhere below it, whatever the roots say;
//    and a rename, link or symlink onto a STRICT ANCESTOR of D is denied
//    (decide_over_absent: it would bring in a ready-made subtree holding D,
//    or redirect D through a symlink), while a plain mkdir of an ancestor
//    stays allowed (what is then created inside it is brokered again). Every
//    strict ancestor counts: those at or above D's writable root are mount
//    points or lie outside every writable bind, where the kernel refuses
//    the rename anyway (EBUSY, EXDEV, EROFS), so only the errno differs
//    there. The renderer lists these instead of occupying each name with a
//    placeholder mount (render/bwrap/render.hpp), and leaves out a name the git
//    rules already hold (covers_absent).
//  * Unix sockets (L3): a pathname connect is allowed only to a socket the
//    session itself created (the broker records each AF_UNIX bind it
//    performs); anything else is `network-outbound`, target `unix:PATH`.
//
// Paths are absolute and lexically normal (the broker builds them from a
// descriptor's kernel path); anything else is denied (fail closed).
#pragma once

#include "ccsb/create_allow.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/result.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb::broker {

// What the call does to the final name.
enum class op {
  create,       // a new name: O_CREAT, mkdir, mknod, symlink, link/rename target, bind
  write,        // an existing name opened for writing, truncated
  replace,      // rename/link target that may already exist (exchange, overwrite)
  remove,       // unlink, rmdir, rename source
};

constexpr std::string_view to_string(op o) noexcept {
  switch (o) {
  case op::create: return "create";
  case op::write: return "write";
  case op::replace: return "replace";
  case op::remove: return "remove";
  }
  return "create";
}

// S6 actions of a denial.
inline constexpr std::string_view kActionCreate = "file-write-create";
inline constexpr std::string_view kActionWrite = "file-write*";
inline constexpr std::string_view kActionConnect = "network-outbound";

struct verdict {
  bool allowed{true};
  std::string action; // S6 action when denied
  std::string target; // S6 target when denied (the full path, or unix:PATH)
  std::string reason; // which rule, for logs and tests
  int errno_value{0};  // the errno the call gets when denied; 0: the broker's default for the call
  static verdict allow() { return {}; }
  static verdict deny(std::string_view action, std::string target, std::string reason, int errno_value = 0) {
    return {false, std::string(action), std::move(target), std::move(reason), errno_value};
  }
  explicit operator bool() const noexcept { return allowed; }
};

// A linked worktree whose common git directory lies outside every writable
// bind (in a protected checkout, or not bound at all): see "Linked worktrees
// of a protected checkout" below. The common directory is a root of the rule
// set too, and every name in it is decided by decide_linked first.
struct linked_worktree {
  std::string admin;  // the worktree's administrative directory, COMMON/worktrees/NAME
  std::string branch; // the ref checked out at launch ("refs/heads/B"); empty: a detached HEAD
  std::string common() const { return admin.substr(0, admin.rfind('/', admin.rfind('/') - 1)); }
  std::string name() const { return admin.substr(admin.rfind('/') + 1); }
  // The original checkout's working tree: COMMON's parent when COMMON is a
  // `.git`; empty for a bare repository.
  std::string original() const {
    const std::string c = common();
    if (c.size() < 6 || c.substr(c.size() - 5) != "/.git") return {};
    return c.size() == 5 ? std::string("/") : c.substr(0, c.size() - 5);
  }
  friend bool operator==(const linked_worktree&, const linked_worktree&) = default;
};

// The rule set of one session, built by the renderer from the policy and
// handed to ccsb-init as arguments (to_args / parse_args).
struct rule_set {
  std::vector<std::string> roots; // writable roots, absolute, lexically normal
  std::vector<std::string> names; // P7 name globs ("*" and "?" only)
  // Write-denied names absent at launch (see header), absolute, lexically normal.
  std::vector<std::string> absent_denied;
  bool git{true};                 // the git rules above
  bool unix_connect{true};        // L3: pathname connects only to the session's own sockets
  // T2: the network is the host's (the terminal profile): IP and abstract
  // Unix destinations are decided by ccsb/broker/net_decide.hpp.
  bool host_net{false};
  // With host_net: the nameservers of the sandbox's /etc/resolv.conf (IPv6
  // form, IPv4 mapped), reachable on port 53. ccsb-init reads the file
  // itself; never an argument.
  std::vector<std::array<unsigned char, 16>> dns;
  // Linked worktrees of protected checkouts (their common dirs are roots).
  std::vector<linked_worktree> linked{};
  // P7 exceptions (createAllow): absolute globs of
  // create_allow.hpp, ccsb-init's --broker-allow-create.
  std::vector<std::string> create_allow{};
  // Nothing on: what ccsb-init starts from before its --broker-* options.
  static rule_set none() {
    rule_set r;
    r.git = false;
    r.unix_connect = false;
    return r;
  }
  friend bool operator==(const rule_set&, const rule_set&) = default;
};

// The names git reads in a git directory without being asked (see header).
inline constexpr std::string_view kGitDirNames[] = {"hooks", "config", "config.worktree", "commondir"};
// Data directories of a git directory: nothing below them is configuration.
inline constexpr std::string_view kGitDataDirs[] = {"refs", "logs", "objects"};
// The entry git requires in every git directory (setup.c, is_git_directory:
// HEAD, then objects/ and refs/ in the common directory): a directory
// without one is never a repository, whatever else it holds.
inline constexpr std::string_view kGitHead = "HEAD";

namespace detail {

// The two wildcards a name glob may hold, `*` (any run of characters: a
// name has no '/') and `?` (one character): create_allow.hpp's matcher.
constexpr bool glob_match(std::string_view g, std::string_view s) noexcept {
  return create_allow::detail::name_match(g, s);
}

constexpr bool in_list(std::string_view s, std::span<const std::string_view> l) noexcept {
  for (auto x : l)
    if (x == s) return true;
  return false;
}

using ccsb::is_normal_absolute;

} // namespace detail

// The components of an absolute path ("/" has none).
inline std::vector<std::string_view> path_components(std::string_view p) {
  std::vector<std::string_view> out;
  std::size_t i = 1;
  while (i < p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

namespace detail {

// `tail` lies inside a git directory: is it something git reads on its own?
inline bool git_dir_sensitive(std::span<const std::string_view> tail, bool admin_dir = false) {
  if (tail.empty()) return false;
  if (in_list(tail[0], kGitDirNames)) return true;
  if (admin_dir && tail[0] == "gitdir") return true;
  if (tail[0] == "worktrees" && tail.size() >= 3) return git_dir_sensitive(tail.subspan(2), true);
  if (tail[0] == "modules") {
    for (std::size_t j = 1; j < tail.size(); ++j) {
      if (in_list(tail[j], kGitDataDirs)) return false;
      if (in_list(tail[j], kGitDirNames)) return true;
    }
  }
  return false;
}

// The tool configurations denied at any depth (paths.hpp), "./" dropped.
inline std::vector<std::vector<std::string_view>> tool_configs() {
  std::vector<std::vector<std::string_view>> out;
  auto add = [&](std::string_view p) {
    if (p.substr(0, 2) == "./") p.remove_prefix(2);
    std::vector<std::string_view> c;
    for (std::size_t i = 0; i <= p.size();) {
      std::size_t j = std::min(p.find('/', i), p.size());
      c.push_back(p.substr(i, j - i));
      i = j + 1;
    }
    out.push_back(std::move(c));
  };
  for (const auto& e : kRootWriteDenyPaths) add(e.path);
  for (const auto& e : kNestedWriteDenyPaths) add(e.path);
  return out;
}

// Some tool configuration is `rel` (components below a root) or lies above
// it (`.vscode/tasks.json`); `text` gets its spelling. A file entry counts
// as a directory too: nothing may take its name in any form.
inline bool tool_config_at(std::span<const std::string_view> rel, std::string& text) {
  static const auto configs = tool_configs();
  for (const auto& e : configs)
    for (std::size_t j = 0; j + e.size() <= rel.size(); ++j)
      if (std::equal(e.begin(), e.end(), rel.begin() + static_cast<std::ptrdiff_t>(j))) {
        text.clear();
        for (auto c : e) text += (text.empty() ? "" : "/") + std::string(c);
        return true;
      }
  return false;
}

// `rel` names a strict ancestor of a tool configuration (`.cargo` of
// `.cargo/config.toml`): what is placed there may hold the configuration.
inline bool tool_config_ancestor(std::span<const std::string_view> rel, std::string& text) {
  static const auto configs = tool_configs();
  for (const auto& e : configs)
    for (std::size_t m = 1; m < e.size() && m <= rel.size(); ++m)
      if (std::equal(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(m),
                     rel.end() - static_cast<std::ptrdiff_t>(m))) {
        text.clear();
        for (auto c : e) text += (text.empty() ? "" : "/") + std::string(c);
        return true;
      }
  return false;
}

} // namespace detail

// The deepest writable root `path` lies in, or nullptr.
inline const std::string* root_of(const rule_set& rules, std::string_view path) {
  const std::string* best = nullptr;
  for (const auto& r : rules.roots)
    if (within(path, r) && (!best || r.size() > best->size())) best = &r;
  return best;
}

// ---- Linked worktrees of a protected checkout ----
//
// A writable bind that is a linked worktree (`.git` is a file naming
// COMMON/worktrees/NAME) whose common directory lies outside every writable
// bind gets COMMON as a writable root of its own (policy.hpp, "Linked
// worktrees"), and there only these names may change; everything else in
// COMMON is denied, whatever the generic rules would allow:
//  * worktrees/NAME/... — the worktree's own administrative directory
//    (index, HEAD, logs/, ORIG_HEAD, FETCH_HEAD, MERGE_*, rebase and
//    sequencer state), except what git reads as configuration or as a
//    redirect (hooks, config, config.worktree, commondir, gitdir: the
//    generic git rules below deny those in every worktrees/NAME);
//  * objects/XX (a fan-out directory: created only) and objects/XX/NAME:
//    a loose object name (38 hex digits) is never written, replaced or
//    removed, so an existing object stays what it is, and a new one is
//    named only by the broker when a file is linked or renamed there: it
//    links a copy of its own whose content it checked against the name
//    (linked_object_id, git_object.hpp; a SHA-256 name is denied, the
//    broker hashes SHA-1 only); git's temporary `tmp_obj_*` files there may be created, written
//    (a link source counts as one) and removed, never be a rename or link
//    target, so no existing object's inode ever gets a second, writable
//    name. Nothing else below objects/ (pack/, info/ with its alternates and
//    commit-graph, quarantine dirs): gc, repack and pushes into this
//    repository fail;
//  * the ref checked out at launch (`branch`) and `refs/stash` (git stash;
//    shared with the original by git's design), each with its `.lock` and
//    its reflog under logs/ (and that one's `.lock`): any change; their
//    missing parent directories: created only.
// A symlink or a moved directory anywhere in COMMON stays denied by the
// generic rules (decide_into_git, decide_git_dir: COMMON holds HEAD).

namespace detail {

constexpr bool is_hex(std::string_view s) noexcept {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

} // namespace detail

// A branch ref git could have checked out: "refs/heads/" and a name that
// git check-ref-format accepts (no empty, "."-led or ".lock" component, no
// "..", "@{", control characters, space or any of ~^:?*[\).
inline bool is_branch_ref(std::string_view r) {
  constexpr std::string_view prefix = "refs/heads/";
  if (r.size() <= prefix.size() || r.substr(0, prefix.size()) != prefix) return false;
  if (r.find("..") != std::string_view::npos || r.find("@{") != std::string_view::npos) return false;
  for (char c : r)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || std::string_view(" ~^:?*[\\").find(c) != std::string_view::npos)
      return false;
  std::size_t i = 0;
  while (i <= r.size()) {
    std::size_t j = std::min(r.find('/', i), r.size());
    std::string_view c = r.substr(i, j - i);
    if (c.empty() || c.front() == '.' || (c.size() >= 5 && c.substr(c.size() - 5) == ".lock")) return false;
    i = j + 1;
  }
  return r.back() != '.';
}

namespace detail {

// `rel` (below COMMON) against one ref the session may move: 2 when it is
// the ref, its lock, its reflog or the reflog's lock; 1 when it is a strict
// ancestor directory of one of those below COMMON; 0 otherwise.
inline int linked_ref_match(std::span<const std::string_view> rel, std::string_view ref) {
  std::vector<std::string_view> r;
  for (std::size_t i = 0; i <= ref.size();) {
    std::size_t j = std::min(ref.find('/', i), ref.size());
    r.push_back(ref.substr(i, j - i));
    i = j + 1;
  }
  int best = 0;
  for (std::size_t off : {std::size_t{0}, std::size_t{1}}) { // refs/..., logs/refs/...
    if (off == 1 && (rel.empty() || rel[0] != "logs")) continue;
    auto t = rel.subspan(off);
    if (off == 1 && t.empty()) { best = std::max(best, 1); continue; }
    const std::size_t n = std::min(t.size(), r.size());
    if (!std::equal(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n == r.size() ? n - 1 : n), r.begin())) continue;
    if (t.size() < r.size()) { best = std::max(best, 1); continue; }
    if (t.size() == r.size() && (t.back() == r.back() || t.back() == std::string(r.back()) + ".lock")) best = 2;
  }
  return best;
}

inline verdict decide_linked(const linked_worktree& g, op o, std::span<const std::string_view> rel,
                             std::string_view path) {
  const std::string_view action = o == op::create ? kActionCreate : kActionWrite;
  auto deny = [&](std::string_view why) {
    return verdict::deny(action, std::string(path),
                         "X1: in the common git directory of linked worktree " + g.admin + ": " + std::string(why));
  };
  const std::string name = g.name();
  if (rel.size() >= 3 && rel[0] == "worktrees" && rel[1] == name) return verdict::allow();
  if (rel[0] == "objects") {
    if (rel.size() == 2 && rel[1].size() == 2 && is_hex(rel[1]))
      return o == op::create ? verdict::allow() : deny("an object fan-out directory is only created");
    if (rel.size() == 3 && rel[1].size() == 2 && is_hex(rel[1])) {
      if ((rel[2].size() == 38 || rel[2].size() == 62) && is_hex(rel[2]))
        return deny(o == op::create ? "an object is named only by the broker, to a checked copy of a temporary "
                                      "object linked or renamed there (SHA-1 repositories)"
                                    : "an existing object is never written, replaced or removed");
      if (rel[2].substr(0, 8) == "tmp_obj_")
        return o == op::replace ? deny("a temporary object is never a rename or link target") : verdict::allow();
    }
    return deny("only new loose objects are written below objects/ (no pack, info, alternates or quarantine)");
  }
  int m = 0;
  if (!g.branch.empty()) m = linked_ref_match(rel, g.branch);
  m = std::max(m, linked_ref_match(rel, "refs/stash"));
  if (m == 2) return verdict::allow();
  if (m == 1) return o == op::create ? verdict::allow() : deny("a parent directory of a ref is only created");
  return deny(g.branch.empty() ? "only the worktree's own admin dir and new objects (its HEAD was detached at launch)"
                               : "only " + g.branch + ", refs/stash, their reflogs, the worktree's own admin dir and "
                                 "new objects");
}

} // namespace detail

// ---- `git worktree add` inside a writable root ----
//
// It fails: the new worktree's `.git` file is a `.git` entry below a root
// (see the header). Nothing of it is left behind, because it is stopped
// before git writes anything: git first creates the new branch (a child
// `git branch NAME START`, whose lock `refs/heads/NAME.lock` the broker
// denies when the caller's parent is a `git worktree add`,
// is_git_worktree_add), then `.git/worktrees/` and `.git/worktrees/NAME/`
// (never created below a root: new_worktree_admin), and only then the
// worktree and its `.git` file. The parent's argv is the process's own
// description, so a process can only make the broker deny more with it.
inline constexpr std::string_view kWorktreeAddReason =
    "X1: git worktree add inside a writable root fails (its .git file is never created), before git writes anything";

// argv of a `git worktree add` (git's global options before the command
// may be anything).
inline bool is_git_worktree_add(std::span<const std::string> argv) {
  if (argv.empty()) return false;
  const std::string& a0 = argv[0];
  if (a0 != "git" && (a0.size() < 4 || a0.substr(a0.size() - 4) != "/git")) return false;
  for (std::size_t i = 1; i + 1 < argv.size(); ++i)
    if (argv[i] == "worktree" && argv[i + 1] == "add") return true;
  return false;
}

// A branch's lock in a git directory below a root that is not a linked
// worktree's common dir (decide_linked holds those): `.git/refs/heads/*.lock`
// at any depth, or `refs/heads/*.lock` of a root that is a `.git`.
inline bool is_branch_lock(const rule_set& rules, std::string_view path) {
  if (!rules.git || !detail::is_normal_absolute(path)) return false;
  const std::string* root = root_of(rules, path);
  if (!root) return false;
  for (const auto& g : rules.linked)
    if (g.common() == *root) return false;
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  if (rel.size() < 3 || rel.back().size() <= 5 || rel.back().substr(rel.back().size() - 5) != ".lock") return false;
  const bool root_is_git = root->size() >= 5 && root->substr(root->size() - 5) == "/.git";
  std::size_t at = root_is_git ? 0 : rel.size();
  for (std::size_t i = 0; i + 1 < rel.size(); ++i)
    if (rel[i] == ".git") at = i + 1;
  return at + 2 < rel.size() && rel[at] == "refs" && rel[at + 1] == "heads";
}

namespace detail {

// `tail` (below a git directory) is `worktrees` or `worktrees/NAME` itself:
// where git worktree add registers a new worktree.
inline bool new_worktree_admin(std::span<const std::string_view> tail) {
  return !tail.empty() && tail.size() <= 2 && tail[0] == "worktrees";
}

} // namespace detail

// The object id a name in a linked common dir stands for: COMMON/objects/XX/
// and 38 hex digits (a SHA-1 repository) give XX and those digits; anything
// else gives "". The broker names such an object itself, after checking a
// copy of what is linked or renamed there (git_object.hpp).
inline std::string linked_object_id(const rule_set& rules, std::string_view path) {
  if (!detail::is_normal_absolute(path)) return {};
  const std::string* root = root_of(rules, path);
  if (!root) return {};
  if (std::none_of(rules.linked.begin(), rules.linked.end(), [&](const linked_worktree& g) { return g.common() == *root; }))
    return {};
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  if (rel.size() != 3 || rel[0] != "objects" || rel[1].size() != 2 || !detail::is_hex(rel[1]) || rel[2].size() != 38 ||
      !detail::is_hex(rel[2]))
    return {};
  return std::string(rel[1]) + std::string(rel[2]);
}

namespace detail {

// decide(), with or without the tool-configuration rule (covers_absent asks
// about the git rules only).
inline verdict decide_with(const rule_set& rules, op o, std::string_view path, bool tool_configs) {
  const std::string_view action = o == op::create ? kActionCreate : kActionWrite;
  if (!detail::is_normal_absolute(path))
    return verdict::deny(action, std::string(path), "not an absolute normal path (fail closed)");
  for (const auto& d : rules.absent_denied)
    if (within(path, d))
      return verdict::deny(action, std::string(path), "P5: at or below " + d + ", write-denied and absent at launch");
  const std::string* root = root_of(rules, path);
  // The original checkout of a linked worktree (`.git`'s parent): its
  // working files stay P2's, denied and reported wherever it is visible,
  // except inside a writable root nested in it (the common dir, a worktree).
  for (const auto& g : rules.linked) {
    const std::string top = g.original();
    if (!top.empty() && within(path, top) && !(root && *root != top && within(*root, top)))
      return verdict::deny(action, std::string(path), "P2: in " + top + ", the original checkout of linked worktree " +
                                                          g.admin);
  }
  if (!root) return verdict::allow();
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  if (rel.empty()) {
    // The root itself: never created or removed through the broker.
    if (o == op::write) return verdict::allow();
    return verdict::deny(action, std::string(path), "a writable root itself");
  }
  // A common dir shared by several bound worktrees: what one may change is allowed.
  std::optional<verdict> linked;
  for (const auto& g : rules.linked)
    if (g.common() == *root && (!linked || !*linked)) linked = detail::decide_linked(g, o, rel, path);
  if (linked && !*linked) return *linked;
  const std::string_view last = rel.back();
  for (const auto& g : rules.names)
    if (detail::glob_match(g, last) && !create_allow::allowed(rules.create_allow, path))
      return verdict::deny(action, std::string(path), "P7: name matches " + g);
  if (std::string config; tool_configs && detail::tool_config_at(rel, config))
    return verdict::deny(action, std::string(path), "P5: " + config + " is a tool configuration, denied at any depth");
  if (rules.git) {
    // A root that is a git directory: its own names count as inside `.git`.
    std::string_view root_base = std::string_view(*root).substr(root->rfind('/') + 1);
    if (root_base == ".git" && detail::git_dir_sensitive(rel))
      return verdict::deny(action, std::string(path), "P5: git path of the git directory root");
    if (root_base == ".git" && o == op::create && detail::new_worktree_admin(rel))
      return verdict::deny(action, std::string(path), std::string(kWorktreeAddReason));
    for (std::size_t i = 0; i < rel.size(); ++i) {
      if (rel[i] != ".git") continue;
      if (i + 1 == rel.size())
        return verdict::deny(action, std::string(path),
                             "X1: a .git entry below a writable root is never created, replaced or removed");
      if (detail::git_dir_sensitive(std::span<const std::string_view>(rel).subspan(i + 1)))
        return verdict::deny(action, std::string(path), "P5: git path in a .git directory");
      if (o == op::create && detail::new_worktree_admin(std::span<const std::string_view>(rel).subspan(i + 1)))
        return verdict::deny(action, std::string(path), std::string(kWorktreeAddReason));
    }
  }
  return verdict::allow();
}
} // namespace detail

inline verdict decide(const rule_set& rules, op o, std::string_view path) {
  return detail::decide_with(rules, o, path, true);
}

// A directory moved into, or a symlink created in, a git directory below a
// root: either would plant a whole subtree (a submodule's `config`, a
// `modules/NAME` pointing elsewhere) that decide() cannot see name by name.
inline verdict decide_into_git(const rule_set& rules, std::string_view path) {
  if (!rules.git) return verdict::allow();
  if (!detail::is_normal_absolute(path))
    return verdict::deny(kActionCreate, std::string(path), "not an absolute normal path (fail closed)");
  const std::string* root = root_of(rules, path);
  if (!root) return verdict::allow();
  std::string_view root_base = std::string_view(*root).substr(root->rfind('/') + 1);
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  bool inside = root_base == ".git" && !rel.empty();
  for (std::size_t i = 0; i + 1 < rel.size(); ++i) inside = inside || rel[i] == ".git";
  if (inside)
    return verdict::deny(kActionCreate, std::string(path),
                         "X1: a directory moved into, or a symlink created in, a .git directory");
  return verdict::allow();
}

// A rename moves the directory `from` to `to`: denied when names below
// `from` that a createAllow exception covers would land outside it
// (create_allow::moves_out).
inline verdict decide_move_out(const rule_set& rules, std::string_view from, std::string_view to) {
  if (rules.create_allow.empty() || rules.names.empty()) return verdict::allow();
  if (!create_allow::moves_out(rules.create_allow, from, to)) return verdict::allow();
  return verdict::deny(kActionCreate, std::string(to),
                       "P7: a directory moved out of a createAllow exception (" + std::string(from) +
                           ") would bring the .env/*.key/*.pem names it may hold with it");
}

// A rename, link or symlink that puts something at `path` (`o`: create, or
// replace when a name is there): denied when `path` is a strict ancestor of
// an absent write-denied name (see header).
inline verdict decide_over_absent(const rule_set& rules, op o, std::string_view path) {
  const std::string_view action = o == op::create ? kActionCreate : kActionWrite;
  if (!detail::is_normal_absolute(path))
    return verdict::deny(action, std::string(path), "not an absolute normal path (fail closed)");
  for (const auto& d : rules.absent_denied)
    if (d != path && within(d, path))
      return verdict::deny(action, std::string(path),
                           "P5: a rename, link or symlink onto an ancestor of " + d +
                               ", write-denied and absent at launch");
  if (const std::string* root = root_of(rules, path)) {
    auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
    if (std::string config; detail::tool_config_ancestor(rel, config))
      return verdict::deny(action, std::string(path),
                           "P5: a rename, link or symlink onto a directory of " + config + " (it may hold one)");
  }
  return verdict::allow();
}

// ---- Git directories by content ----
//
// Git accepts any directory holding HEAD, objects/ and refs/ as a
// repository (bare, or one whose config names a core.worktree), whatever
// its name; the `.git` rules above go by name only. Two facts the broker
// establishes on its own descriptors (init/broker) extend them to every
// git directory:
//  * no entry named HEAD is created below a root, except where git writes
//    one in an existing repository (`.git/HEAD`, and below `.git`'s
//    worktrees/, modules/, refs/ and logs/), and there not beside a name
//    git reads on its own; so no new git directory comes into being,
//    whatever the order of its parts, and none gains a config next to a
//    new HEAD;
//  * in every directory that holds HEAD (a bare repository or fixture repo
//    present at launch, a `.git` by another name), the names git reads on
//    its own are denied exactly as in `.git` (git_dir_sensitive), and
//    nothing is moved or symlinked into it (as decide_into_git);
//  * a directory holding HEAD is never moved (it would bring a repository
//    where the host's git discovers it).
// The same HEAD is what git's `commondir` and gitfile redirections lead to:
// the directory they name must pass is_git_directory itself.

struct git_facts {
  // Those of git_probes(...) that hold an entry named HEAD.
  std::vector<std::string> head_dirs;
  // The directory of the name holds hooks, config, config.worktree or commondir.
  bool beside_git_names{false};
  // A rename moves a directory holding HEAD to the name.
  bool moves_head_dir{false};
};

namespace detail {

inline std::string_view root_base(const std::string& root) {
  return std::string_view(root).substr(root.rfind('/') + 1);
}

// `rel` (below a root) is a HEAD git itself writes in an existing repository.
inline bool head_in_git_dir(std::span<const std::string_view> rel, bool root_is_git) {
  std::ptrdiff_t at = root_is_git ? -1 : -2;
  for (std::size_t i = 0; i + 1 < rel.size(); ++i)
    if (rel[i] == ".git") at = static_cast<std::ptrdiff_t>(i);
  if (at == -2) return false;
  auto tail = rel.subspan(static_cast<std::size_t>(at + 1));
  if (tail.size() == 1) return true;
  return tail[0] == "worktrees" || tail[0] == "modules" || tail[0] == "refs" || tail[0] == "logs";
}

} // namespace detail

// The directories whose HEAD the decision about `path` depends on (each
// strictly above `path`, at or below its root): those below which `path`
// is a name git reads on its own; with `subtree` (a directory or symlink
// placed at `path`) every one. Empty without the git rules, outside every
// root, or for a path decide() refuses anyway.
inline std::vector<std::string> git_probes(const rule_set& rules, std::string_view path, bool subtree) {
  std::vector<std::string> out;
  if (!rules.git || !detail::is_normal_absolute(path)) return out;
  const std::string* root = root_of(rules, path);
  if (!root) return out;
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  for (std::size_t i = 0; i < rel.size(); ++i) {
    // The ancestor holding rel[i..]: the root itself for i == 0.
    if (!subtree && !detail::git_dir_sensitive(std::span<const std::string_view>(rel).subspan(i))) continue;
    std::string a = *root == "/" ? std::string() : *root;
    for (std::size_t k = 0; k < i; ++k) a += "/" + std::string(rel[k]);
    out.push_back(a.empty() ? "/" : a);
  }
  return out;
}

// The git-directory rules (see above) for `o` on `path`, given the facts;
// `subtree`: a directory or symlink is placed at `path`.
inline verdict decide_git_dir(const rule_set& rules, op o, std::string_view path, const git_facts& f, bool subtree) {
  const std::string_view action = o == op::create ? kActionCreate : kActionWrite;
  if (!rules.git) return verdict::allow();
  if (!detail::is_normal_absolute(path))
    return verdict::deny(action, std::string(path), "not an absolute normal path (fail closed)");
  const std::string* root = root_of(rules, path);
  if (!root) return verdict::allow();
  auto rel = path_components(path.substr(*root == "/" ? 0 : root->size()));
  if (rel.empty()) return verdict::allow();
  if (f.moves_head_dir)
    return verdict::deny(action, std::string(path), "X1: a directory holding HEAD (a git directory) is never moved");
  if (rel.back() == kGitHead && o == op::create) {
    if (!detail::head_in_git_dir(rel, detail::root_base(*root) == ".git"))
      return verdict::deny(action, std::string(path),
                           "X1: a HEAD outside a .git directory would make a new git directory");
    if (f.beside_git_names)
      return verdict::deny(action, std::string(path), "X1: a new HEAD beside a git config would make a git directory");
  }
  for (const auto& a : f.head_dirs) {
    if (!detail::is_normal_absolute(a) || !within(path, a) || a == path) continue;
    const auto tail = path_components(path.substr(a == "/" ? 0 : a.size()));
    if (detail::git_dir_sensitive(tail))
      return verdict::deny(action, std::string(path), "P5: git path in " + a + " (a git directory: it holds HEAD)");
    if (subtree)
      return verdict::deny(action, std::string(path),
                           "X1: a directory moved into, or a symlink created in, " + a +
                               " (a git directory: it holds HEAD)");
  }
  return verdict::allow();
}

// The git rules already hold the absent name `d` (its renderer need not list
// it): decide() denies `d` itself, hence everything below it stays absent,
// and every strict ancestor of `d` strictly below its root is denied too (a
// `.git` entry), so nothing can be renamed, linked or symlinked over them.
// True for the git paths of a root's own `.git`; false for paths deeper in
// a git directory (`.git/worktrees/NAME/gitdir`), which stay listed.
inline bool covers_absent(const rule_set& rules, std::string_view d) {
  rule_set named = rules;
  named.absent_denied.clear();
  if (detail::decide_with(named, op::create, d, false)) return false;
  const std::string* root = root_of(named, d);
  if (!root) return false;
  for (std::string_view a = d.substr(0, d.rfind('/')); a.size() > root->size(); a = a.substr(0, a.rfind('/')))
    if (detail::decide_with(named, op::replace, a, false)) return false;
  return true;
}

// ---- Calls that fail on their own ----
//
// A call the kernel would refuse whatever the policy (rmdir of a non-empty
// directory, a remove or rename of a missing name) is answered with the
// kernel's errno and reported as no violation: git's clean-up rmdir of a
// parent directory (`.git` included) is no attack. Only facts the broker
// established on its own descriptors count, and nothing is performed, so
// nothing is learnt that a directory listing would not show.

// What the broker saw of one name.
struct name_facts {
  bool exists{false};
  bool is_dir{false};
  bool empty_dir{false}; // a directory holding nothing but . and ..
};

// unlink (`removedir`: rmdir) of a name: the errno the kernel answers on
// its own, or 0 when the call would go ahead.
constexpr int remove_fails(bool removedir, const name_facts& n) noexcept {
  if (!n.exists) return ENOENT;
  if (removedir && !n.is_dir) return ENOTDIR;
  if (!removedir && n.is_dir) return EISDIR;
  if (removedir && !n.empty_dir) return ENOTEMPTY;
  return 0;
}

// renameat2 of `from` onto `to` with `exchange` or `noreplace`: as above.
constexpr int rename_fails(const name_facts& from, const name_facts& to, bool exchange, bool noreplace) noexcept {
  if (!from.exists) return ENOENT;
  if (exchange) return to.exists ? 0 : ENOENT;
  if (!to.exists) return 0;
  if (noreplace) return EEXIST;
  if (from.is_dir && !to.is_dir) return ENOTDIR;
  if (!from.is_dir && to.is_dir) return EISDIR;
  if (from.is_dir && !to.empty_dir) return ENOTEMPTY;
  return 0;
}

// L3: a pathname AF_UNIX connect. `created_by_session`: the broker bound a
// socket at this path (same inode) for the session.
inline verdict decide_unix_connect(const rule_set& rules, std::string_view path, bool created_by_session) {
  if (!rules.unix_connect || created_by_session) return verdict::allow();
  return verdict::deny(kActionConnect, "unix:" + std::string(path),
                       "L3: a Unix socket the session did not create");
}

// ccsb-init's arguments for a rule set: `--broker-root PATH`...,
// `--broker-name GLOB`..., `--broker-allow-create GLOB`...,
// `--broker-deny PATH`..., `--broker-git on|off`, `--broker-unix on|off`,
// `--broker-net host` when the network is the host's (private is the
// default and not written), and `--broker-linked REF:ADMIN`... .
inline std::vector<std::string> to_args(const rule_set& r) {
  std::vector<std::string> a;
  for (const auto& x : r.roots) a.insert(a.end(), {"--broker-root", x});
  for (const auto& x : r.names) a.insert(a.end(), {"--broker-name", x});
  for (const auto& x : r.create_allow) a.insert(a.end(), {"--broker-allow-create", x});
  for (const auto& x : r.absent_denied) a.insert(a.end(), {"--broker-deny", x});
  a.insert(a.end(), {"--broker-git", r.git ? "on" : "off", "--broker-unix", r.unix_connect ? "on" : "off"});
  if (r.host_net) a.insert(a.end(), {"--broker-net", "host"});
  for (const auto& l : r.linked) a.insert(a.end(), {"--broker-linked", l.branch + ":" + l.admin});
  return a;
}

// One option of to_args (name + value) into `r`; strict: a root or an
// absent denied name must be absolute and normal (a denied name never "/"),
// a name glob non-empty without '/', on|off exactly.
inline result<void> parse_arg(rule_set& r, std::string_view name, std::string_view value) {
  if (name == "--broker-root" || name == "--broker-deny") {
    const bool deny = name == "--broker-deny";
    if (!detail::is_normal_absolute(value) || (deny && value == "/"))
      return make_error(errc::invalid_argument, std::string(name), "not an absolute normal path: \"" + std::string(value) + "\"");
    (deny ? r.absent_denied : r.roots).emplace_back(value);
    return ok();
  }
  if (name == "--broker-name") {
    if (value.empty() || value.find('/') != std::string_view::npos || value.find('\0') != std::string_view::npos)
      return make_error(errc::invalid_argument, "--broker-name", "a name glob without '/': \"" + std::string(value) + "\"");
    r.names.emplace_back(value);
    return ok();
  }
  if (name == "--broker-allow-create") {
    if (value.empty() || value.front() != '/' || !create_allow::shape(value))
      return make_error(errc::invalid_argument, "--broker-allow-create",
                        "an absolute createAllow glob: \"" + std::string(value) + "\"");
    r.create_allow.emplace_back(value);
    return ok();
  }
  if (name == "--broker-git" || name == "--broker-unix") {
    if (value != "on" && value != "off")
      return make_error(errc::invalid_argument, std::string(name), "expected on or off, got \"" + std::string(value) + "\"");
    (name == "--broker-git" ? r.git : r.unix_connect) = value == "on";
    return ok();
  }
  if (name == "--broker-net") {
    if (value != "host" && value != "private")
      return make_error(errc::invalid_argument, "--broker-net", "expected host or private, got \"" + std::string(value) + "\"");
    r.host_net = value == "host";
    return ok();
  }
  if (name == "--broker-linked") {
    // REF:ADMIN (a ref holds no ':'); ADMIN is COMMON/worktrees/NAME.
    const std::size_t colon = value.find(':');
    linked_worktree l;
    if (colon != std::string_view::npos) {
      l.branch = std::string(value.substr(0, colon));
      l.admin = std::string(value.substr(colon + 1));
    }
    const std::size_t s1 = l.admin.rfind('/');
    const std::size_t s2 = s1 == std::string::npos || s1 == 0 ? std::string::npos : l.admin.rfind('/', s1 - 1);
    if (colon == std::string_view::npos || (!l.branch.empty() && !is_branch_ref(l.branch)) ||
        !detail::is_normal_absolute(l.admin) || s2 == std::string::npos || s2 == 0 ||
        l.admin.substr(s2 + 1, s1 - s2 - 1) != "worktrees")
      return make_error(errc::invalid_argument, "--broker-linked",
                        "expected [refs/heads/BRANCH]:COMMON/worktrees/NAME, got \"" + std::string(value) + "\"");
    r.linked.push_back(std::move(l));
    return ok();
  }
  return make_error(errc::invalid_argument, std::string(name), "not a broker option");
}

inline bool is_broker_option(std::string_view name) {
  return name == "--broker-root" || name == "--broker-name" || name == "--broker-allow-create" ||
         name == "--broker-deny" || name == "--broker-git" || name == "--broker-unix" || name == "--broker-net" ||
         name == "--broker-linked";
}

} // namespace ccsb::broker
