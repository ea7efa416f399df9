// ccsb/launch/linux/host_probe.hpp — the B2 probe of a Linux host (launcher
// only; does I/O; Linux-only: included only where !CCSB_LAUNCH_MACOS,
// ccsb/sys/platform.hpp; a Mac's probe is macos/seatbelt_driver.hpp
// seatbelt_probe_facts).
//   gather_probe_facts(u)    tools present, Landlock's ABI, the user-namespace
//                            trial (L1, ccsb/launch/userns_probe.hpp: what
//                            blocks the namespaces, for the cause and its
//                            fix), and can bwrap really unshare?
//                            u = unshare_check::run (a server, once at
//                            start-up) always asks bwrap itself
//                            (bwrap_can_unshare, as nobody when root);
//                            unshare_check::skip (ccsb-run) asks bwrap only
//                            when the trial failed (bwrap may have an
//                            AppArmor profile the launcher lacks) and fails
//                            closed: a blocked host refuses the run (exit
//                            125, the cause and its fix), it never steps
//                            down to the host; skip also takes a success of
//                            the trial remembered under the same key
//                            (userns_probe.hpp run_userns_trial_cached).
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/launch/helpers.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/process.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/launch/userns_probe.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <utility>

namespace ccsb::launch {

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
    // L8: a bwrap another uid could have written is never run, not even
    // for this probe (helpers.hpp); the launch refuses it by name.
    if (auto c = check_helper("bwrap", *bwrap); !c) {
      f.can_unshare = false;
      f.unshare_error = c.err().what();
      return f;
    }
    auto [okay, text] = bwrap_can_unshare(*bwrap);
    f.can_unshare = okay;
    f.unshare_error = text;
  }
  return f;
}

} // namespace ccsb::launch
