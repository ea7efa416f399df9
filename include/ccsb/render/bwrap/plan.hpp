// ccsb/render/bwrap/plan.hpp — the bwrap plan as a typed value, and the one
// function that turns it into bwrap's options. Pure: no I/O.
//
// render_bwrap (render/bwrap/render.hpp) decides; this file only says what was
// decided and how bwrap spells it. Everything downstream reads the typed
// plan, never its argv: the launcher (launch/bwrap_driver.hpp) creates and
// holds `host_prep` on the host, opens `data_files`, feeds `environment`
// and the options; `--print-profile` and the golden tests print
// bwrap_options(plan). bubblewrap itself works the same way (its argv
// becomes a list of typed setup operations that are executed in order).
//
//   bwrap_options(plan)        -> every bwrap option, before "--"
//   init_argv(plan)            -> ccsb-init and its options
//   bwrap_argv(plan, bwrap)    -> a complete argv, options inline (printing)
//   bwrap_spawn_argv(...)      -> the argv the launcher runs (no policy in it)
//   spawn_args_blob(plan) / init_options_blob(plan) -> what it is fed
#pragma once

#include "ccsb/broker/decide.hpp"
#include "ccsb/confine/landlock.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/protocol/init_args.hpp"
#include "ccsb/render/bwrap/layout.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

// One mount-namespace operation, in the order bwrap performs it.
enum class op_kind {
  ro_bind,     // --ro-bind SRC DEST: the system tree, /etc entries, a read-only mount, ccsb's own files
  bind,        // --bind SRC DEST: a writable mount
  pin,         // --bind P P: a directory between a writable mount and a denied path (cannot be renamed)
  create_pin,  // --bind P P: a missing parent of a placeholder, created on the host first (host_prep)
  write_deny,  // --ro-bind P P: a write-denied path inside a writable mount
  mask,        // --ro-bind MASK P: a read-denied path, covered by an empty mode-0000 entry
  placeholder, // --ro-bind EMPTY P: a denied name that does not exist, occupied
  tmpfs,       // [--perms M] [--size N] --tmpfs P
  file,        // --perms M --file FD P: a copy of a file the launcher opened at FD
  symlink,     // --symlink TARGET P
  remount_ro,  // --remount-ro P
  proc,        // --proc P
  dev,         // --dev P
};

// What the launcher creates on the host when a mount point is missing.
enum class entry_shape {
  none,          // nothing: bwrap reports the missing source itself
  dir,           // an empty directory
  file,          // an empty file
  git_commondir, // a file holding kGitCommondirPlaceholder (render/bwrap/render.hpp)
};

struct setup_op {
  op_kind kind{op_kind::ro_bind};
  std::string dest{};
  std::string source{}; // binds: the host path; symlink: its target
  int fd{-1};           // file
  std::string perms{};  // file, tmpfs; empty: bwrap's default
  std::uint64_t size{0}; // tmpfs; 0: bwrap's default
  entry_shape shape{entry_shape::none}; // mask, placeholder: what occupies a missing dest on the host
  friend bool operator==(const setup_op&, const setup_op&) = default;
};

inline bool is_bind(op_kind k) {
  switch (k) {
  case op_kind::ro_bind:
  case op_kind::bind:
  case op_kind::pin:
  case op_kind::create_pin:
  case op_kind::write_deny:
  case op_kind::mask:
  case op_kind::placeholder: return true;
  default: return false;
  }
}

// What the launcher does on the host before bwrap mounts anything
// (launch/placeholders.hpp): bwrap cannot create a bind source, and a name
// is only kept from being created, renamed or removed while something
// occupies it and a lock holds it.
struct host_prep_op {
  enum class action {
    make_dir, // a missing parent of a placeholder: created (parents first), or held if it is a directory by now
    occupy,   // a mount point inside a writable mount: held when it exists, else created as `shape`
  };
  action what{action::occupy};
  std::string path{};
  entry_shape shape{entry_shape::none};
  friend bool operator==(const host_prep_op&, const host_prep_op&) = default;
};

// The ids the sandbox sees itself as (--uid/--gid), when not its host ids.
struct bwrap_ids {
  std::uint32_t uid, gid;
  friend bool operator==(const bwrap_ids&, const bwrap_ids&) = default;
};

// Namespaces and process attributes (render/bwrap/render.hpp, layout step 1).
struct process_setup {
  std::optional<bwrap_ids> ids;
  bool unshare_net{false}; // L3: proxied and offline sessions get a namespace with only loopback
};

// ccsb-init's options: the exec channel always; the proxy listeners (L3)
// for a proxied session; the X1 broker's rule set; the X2 Landlock ruleset.
struct init_setup {
  bool proxy_listeners{false};
  broker::rule_set broker;
  confine::landlock_rules landlock;
};

struct bwrap_plan {
  process_setup process;
  std::vector<setup_op> ops;             // in order: parents before children
  std::string chdir;                     // --chdir
  init_setup init;
  env_list environment;                  // the command's complete environment (E1 + N2)
  std::vector<host_prep_op> host_prep;      // in order: make_dir entries parents first, then occupy
  std::vector<std::string> data_files;   // host files the launcher opens read-only at kFirstDataFd + i (--file)
  std::vector<std::string> placeholders; // the topmost created host path of each placeholder
  std::string git_excludes;              // gitignore lines naming the placeholders, per writable root (launcher
                                         // writes them to <run_dir>/kGitExcludesName)
  std::vector<std::string> notes;        // decisions worth a log line
};

// The one spelling of a plan for bwrap: namespaces, then the ops in order,
// then --chdir.
inline std::vector<std::string> bwrap_options(const bwrap_plan& plan) {
  std::vector<std::string> o{"--new-session", "--die-with-parent", "--unshare-user", "--disable-userns"};
  if (plan.process.ids)
    o.insert(o.end(), {"--uid", std::to_string(plan.process.ids->uid), "--gid", std::to_string(plan.process.ids->gid)});
  o.insert(o.end(), {"--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"});
  if (plan.process.unshare_net) o.emplace_back("--unshare-net");
  o.insert(o.end(), {"--hostname", "ccsb", "--cap-drop", "ALL", "--seccomp", std::to_string(kSeccompFd)});
  for (const auto& op : plan.ops) {
    switch (op.kind) {
    case op_kind::bind:
    case op_kind::pin:
    case op_kind::create_pin: o.insert(o.end(), {"--bind", op.source, op.dest}); break;
    case op_kind::ro_bind:
    case op_kind::write_deny:
    case op_kind::mask:
    case op_kind::placeholder: o.insert(o.end(), {"--ro-bind", op.source, op.dest}); break;
    case op_kind::tmpfs:
      if (!op.perms.empty()) o.insert(o.end(), {"--perms", op.perms});
      if (op.size) o.insert(o.end(), {"--size", std::to_string(op.size)});
      o.insert(o.end(), {"--tmpfs", op.dest});
      break;
    case op_kind::file: o.insert(o.end(), {"--perms", op.perms, "--file", std::to_string(op.fd), op.dest}); break;
    case op_kind::symlink: o.insert(o.end(), {"--symlink", op.source, op.dest}); break;
    case op_kind::remount_ro: o.insert(o.end(), {"--remount-ro", op.dest}); break;
    case op_kind::proc: o.insert(o.end(), {"--proc", op.dest}); break;
    case op_kind::dev: o.insert(o.end(), {"--dev", op.dest}); break;
    }
  }
  o.insert(o.end(), {"--chdir", plan.chdir});
  return o;
}

// ccsb-init's options for a plan (ccsb/protocol/init_args.hpp): the exec
// server (S7; commands come over the exec channel, none is on its command
// line), the proxy listeners (L3), the X1 broker's rules, the X2 Landlock
// ruleset.
inline protocol::init_args init_args_of(const bwrap_plan& plan) {
  protocol::init_args a;
  a.exec_channel = kExecChannelFd;
  if (plan.init.proxy_listeners) {
    a.proxy_channel = kProxyChannelFd;
    a.listeners = {{protocol::proxy_role::http, {127, 0, 0, 1}, kProxyHttpPort},
                   {protocol::proxy_role::socks, {127, 0, 0, 1}, kProxySocksPort}};
  }
  a.broker = plan.init.broker;
  a.landlock = plan.init.landlock;
  return a;
}

// ccsb-init and its options.
inline std::vector<std::string> init_argv(const bwrap_plan& plan) {
  std::vector<std::string> a{std::string(kGuestInit)};
  for (auto& x : protocol::to_argv(init_args_of(plan))) a.push_back(std::move(x));
  return a;
}

// A complete argv for execve with every option inline (--print-profile);
// with `args_fd`, bwrap reads its options from that descriptor instead
// (filled with the NUL-separated bwrap_options).
inline std::vector<std::string> bwrap_argv(const bwrap_plan& plan, const std::string& bwrap,
                                           std::optional<int> args_fd = std::nullopt) {
  std::vector<std::string> argv{bwrap};
  if (args_fd) {
    argv.push_back("--args");
    argv.push_back(std::to_string(*args_fd));
  } else {
    auto o = bwrap_options(plan);
    argv.insert(argv.end(), o.begin(), o.end());
  }
  argv.push_back("--");
  auto init = init_argv(plan);
  argv.insert(argv.end(), init.begin(), init.end());
  return argv;
}

// The argv the launcher runs (render/bwrap/render.hpp "Spawned first, fed later"):
// nothing of the policy, so bwrap can start before the policy is rendered.
inline std::vector<std::string> bwrap_spawn_argv(const std::string& bwrap, int args_fd, int options_fd) {
  return {bwrap, "--args", std::to_string(args_fd), "--", std::string(kGuestInit), "--options-fd",
          std::to_string(options_fd)};
}

namespace detail {
// Appends `a` and a NUL; NUL separates the strings, so a NUL inside one
// would split it into options of its own (a value turned into `--bind / /`):
// refused, naming it.
inline result<void> put_nul_separated(std::string& out, std::string_view a, std::string_view what) {
  if (a.find('\0') != std::string_view::npos)
    return make_error(errc::invalid_argument, std::string(what), "contains a NUL byte");
  out += a;
  out += '\0';
  return ok();
}
} // namespace detail

// What bwrap reads from its --args descriptor: the command's environment
// (replacing bwrap's own, which the launcher leaves empty), then the options.
inline result<std::string> spawn_args_blob(const bwrap_plan& plan) {
  std::string out;
  if (auto r = detail::put_nul_separated(out, "--clearenv", "--clearenv"); !r) return std::move(r).err();
  for (const auto& v : plan.environment) {
    if (auto r = detail::put_nul_separated(out, "--setenv", "--setenv"); !r) return std::move(r).err();
    if (auto r = detail::put_nul_separated(out, v.name, "environment"); !r) return std::move(r).err();
    if (auto r = detail::put_nul_separated(out, v.value, "environment." + v.name); !r) return std::move(r).err();
  }
  for (const auto& o : bwrap_options(plan))
    if (auto r = detail::put_nul_separated(out, o, "bwrap option"); !r) return std::move(r).err();
  return out;
}

// ccsb-init's options for its --options-fd memfd, NUL-separated; a NUL
// inside one is refused, naming it.
inline result<std::string> init_options_blob(const bwrap_plan& plan) { return protocol::to_options_blob(init_args_of(plan)); }

} // namespace ccsb
