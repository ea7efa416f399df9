// ccsb/launch/helpers.hpp — the programs a launch runs on the host side
// (bwrap, ccsb-init, egressd) are ones no session could have written (L8;
// launcher only, does I/O).
//
// A session that can write a helper, or a directory on its way, replaces it
// for the next launch (issue 27: a terminal session rewrote
// ~/opt/ccsb/bin/egressd and the next launch ran the wrapper). So every place
// that accepts a helper path checks it here first (request_builder.hpp for
// ccsb-run and ccsbd, session.hpp for the bwrap driver of any caller):
//
//  check_helper(what, path)     the program as the run-dir base is checked
//      (run_dir.hpp): the file and every directory above it up to "/", in
//      its literal spelling and resolved, belongs to root or this euid; the
//      file is a regular file writable by neither group nor others; no
//      directory on the way is writable by group or others unless it is
//      sticky (/tmp: others can add names there, but not replace one of
//      ours); a symlink on the way belongs to root or this euid. Not looked
//      at: ACLs and capabilities of the owner's other processes.
//  check_helpers_outside(pol, helpers)   no writable mount of the policy is
//      a helper, its directory or any directory above it, compared by
//      identity (device and inode, literal and resolved spelling), so
//      another spelling of the same directory is caught too. Like the
//      daemon's socket directory (S8), helpers must lie outside every
//      writable bind: install them elsewhere (not under HOME for the
//      terminal profile).
//
// A refusal is errc::unenforceable with the helper's name as the field and a
// message naming the path and the reason (ccsb-run: exit 125).
//
//  helper_candidates(name, self_dir, compiled_dir)   where a launcher looks
//      for a helper when neither its flag nor its environment variable names
//      one (request_builder.hpp helper_path), in this order, the first
//      executable file winning:
//        1. SELF/NAME: next to the running program (a build tree; a bundle
//           shipped in one directory);
//        2. SELF/../libexec/ccsb/NAME: an installed package (ccsb-run and
//           ccsbd in PREFIX/bin, the helpers in PREFIX/libexec/ccsb, which
//           is where `cmake --install` puts them), wherever PREFIX was
//           moved;
//        3. CCSB_HELPER_DIR/NAME: the directory compiled into a program
//           built against ccsb (the find_package config sets
//           PREFIX/libexec/ccsb of the package found; add_subdirectory the
//           build's helper directory): a launcher of one's own finds the
//           helpers of the ccsb it was built with.
//      Whatever is chosen passes check_helpers before any launch.
#pragma once

#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/result.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ccsb::launch {

struct helper_program {
  std::string what; // "bwrap", "ccsb-init", "egressd": the error's field
  std::string path;
};

namespace helpers_detail {

// "/", "/a", "/a/b", ... up to `abs` (lexically normal, absolute).
inline std::vector<std::string> prefixes(const std::string& abs) {
  std::vector<std::string> out{"/"};
  for (std::size_t i = 1; i <= abs.size(); ++i)
    if (i == abs.size() || abs[i] == '/') {
      std::string p = abs.substr(0, i);
      if (p != "/" && p != out.back()) out.push_back(std::move(p));
    }
  return out;
}

inline std::string absolute(const std::string& p) {
  if (!p.empty() && p.front() == '/') return ccsb::lexical_normal(p);
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return ccsb::lexical_normal("/" + p);
  return ccsb::lexical_normal(std::string(cwd) + "/" + p);
}

inline std::optional<std::string> resolved(const std::string& p) {
  char* r = ::realpath(p.c_str(), nullptr);
  if (!r) return std::nullopt;
  std::string out(r);
  std::free(r);
  return out;
}

inline std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Why the chain of `abs` (the program last) is one a session could have
// changed; empty: it is not.
inline std::string chain_problem(const std::string& abs) {
  const uid_t me = ::geteuid();
  const auto chain = prefixes(abs);
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const std::string& p = chain[i];
    const bool last = i + 1 == chain.size();
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0) return p + ": " + std::strerror(errno);
    if (st.st_uid != 0 && st.st_uid != me)
      return p + " belongs to uid " + std::to_string(st.st_uid) + " (only root or uid " + std::to_string(me) +
             ", the launcher, may own it)";
    if (S_ISLNK(st.st_mode)) continue; // its owner is checked; what it leads to is checked resolved
    if (last) {
      if (!S_ISREG(st.st_mode)) return p + " is not a regular file";
      if (st.st_mode & 022) return p + " is writable by " + ((st.st_mode & 002) ? "others" : "its group") +
                                   " (mode " + mode_text(st.st_mode) + ")";
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return p + " is not a directory";
    if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
      return "the directory " + p + " is writable by " + ((st.st_mode & 002) ? "others" : "its group") + " (mode " +
             mode_text(st.st_mode) + ")";
  }
  return {};
}

struct node_id {
  dev_t dev;
  ino_t ino;
  bool operator==(const node_id&) const = default;
};

inline std::optional<node_id> id_of(const std::string& p) {
  struct stat st{};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return node_id{st.st_dev, st.st_ino};
}

} // namespace helpers_detail

// See the header comment.
inline result<void> check_helper(const std::string& what, const std::string& path) {
  using namespace helpers_detail;
  if (path.empty()) return make_error(errc::io_error, what, what + ": no path given");
  const std::string abs = absolute(path);
  auto refuse = [&](const std::string& why) {
    return make_error(errc::unenforceable, what,
                      "refusing " + what + " at " + abs + ": " + why +
                          "; a session could have replaced it for this launch (L8). Install it where only root or "
                          "the launching user can write: owned by one of them, no group or other write on it or on "
                          "any directory above it");
  };
  if (auto why = chain_problem(abs); !why.empty()) return refuse(why);
  auto real = resolved(abs);
  if (!real) return make_error(errc::io_error, what, what + " at " + abs + " cannot be resolved: " + std::strerror(errno));
  if (*real != abs)
    if (auto why = chain_problem(*real); !why.empty()) return refuse(why + " (resolved)");
  return ok();
}

// See the header comment.
inline result<void> check_helpers_outside(const policy& pol, const std::vector<helper_program>& helpers) {
  using namespace helpers_detail;
  for (const auto& h : helpers) {
    const std::string abs = absolute(h.path);
    std::vector<std::pair<node_id, std::string>> chain; // the program and every directory above it
    auto add_chain = [&](const std::string& p) {
      for (const auto& a : prefixes(p))
        if (auto id = id_of(a)) chain.emplace_back(*id, a);
    };
    add_chain(abs);
    if (auto real = resolved(abs); real && *real != abs) add_chain(*real);
    for (const auto& m : pol.mounts) {
      if (!m.writable) continue;
      auto id = id_of(m.host_path);
      if (!id) continue;
      for (const auto& [cid, at] : chain)
        if (cid == *id)
          return make_error(errc::unenforceable, "bindMounts",
                            "the writable bind \"" + m.host_path + "\" contains " + h.what + " (" + abs +
                                (at == abs ? "" : ", through " + at) +
                                "): the session could replace it for the next launch (L8). Install " + h.what +
                                " outside every writable bind, or bind a narrower directory");
    }
  }
  return ok();
}

// Both checks for the helpers of one launch, the policy's binds last.
inline result<void> check_helpers(const policy& pol, const std::vector<helper_program>& helpers) {
  for (const auto& h : helpers)
    if (auto r = check_helper(h.what, h.path); !r) return r;
  return check_helpers_outside(pol, helpers);
}

// The compiled-in helper directory of a program built against ccsb (empty:
// none); see helper_candidates.
#ifdef CCSB_HELPER_DIR
inline constexpr const char* kCompiledHelperDir = CCSB_HELPER_DIR;
#else
inline constexpr const char* kCompiledHelperDir = "";
#endif

inline std::vector<std::string> helper_candidates(const std::string& name, const std::string& self_dir,
                                                  const std::string& compiled_dir = kCompiledHelperDir) {
  std::vector<std::string> out;
  if (!self_dir.empty()) {
    out.push_back(self_dir + "/" + name);
    out.push_back(ccsb::lexical_normal(self_dir + "/../libexec/ccsb/" + name));
  }
  if (!compiled_dir.empty()) out.push_back(compiled_dir + "/" + name);
  return out;
}

// The first candidate that is an executable file; else the first candidate
// (the launch then fails naming it: "ccsb-init not found at ...").
inline std::string find_helper(const std::string& name, const std::string& self_dir,
                               const std::string& compiled_dir = kCompiledHelperDir) {
  const auto c = helper_candidates(name, self_dir, compiled_dir);
  for (const auto& p : c) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) return p;
  }
  return c.empty() ? name : c.front();
}

} // namespace ccsb::launch
