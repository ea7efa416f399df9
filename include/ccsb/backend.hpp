// ccsb/backend.hpp — host probe and backend selection (B1-B8, T1, T3).
//
// Pure functions of injected host facts: the launcher (or a server) gathers
// the facts once at start-up (platform, which tools are on PATH, whether bwrap
// can create namespaces, whether a microVM runtime answers) and everything
// below is decided from them, so every row of the B2 table is unit-tested on
// any host.
#pragma once

#include "ccsb/backend_name.hpp"
#include "ccsb/result.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

// `linux_`: "linux" is a predefined macro in GNU C++ modes.
enum class platform { macos, linux_, wsl2, windows, other };

constexpr std::string_view to_string(platform p) noexcept {
  switch (p) {
  case platform::macos: return "macos";
  case platform::linux_: return "linux";
  case platform::wsl2: return "wsl2";
  case platform::windows: return "windows";
  case platform::other: return "other";
  }
  return "other";
}

// Facts the probe needs. `tools_on_path` answers for "bwrap" and
// "sandbox-exec" (the proxies need no helper tool: B2, L3); `can_unshare` says whether bwrap could really create its
// namespaces (a bwrap that exists but cannot unshare is not available).
struct probe_facts {
  ccsb::platform platform{platform::other};
  bool has_bwrap{false};
  bool has_sandbox_exec{false};
  bool can_unshare{false};
  std::string unshare_error; // what bwrap printed when it could not unshare
  int landlock_abi{0};       // X2: the kernel's Landlock ABI (0: none)
};

struct probe_result {
  bool available{false};
  bool requires_install{false};
  std::string note; // what the backend is (shown when ON)
  std::string hint; // why not / what to do (shown when not available)
  std::vector<std::string> missing; // Debian package names
  // X2: the Landlock ABI the native backend's second layer will use (0:
  // none; the sandbox then runs without it and says so). Defence in depth:
  // it never decides availability.
  int landlock_abi{0};
  friend bool operator==(const probe_result&, const probe_result&) = default;
};

// B2 / B7: the native probe.
inline probe_result probe_native(const probe_facts& f) {
  probe_result r;
  switch (f.platform) {
  case platform::macos:
    if (!f.has_sandbox_exec) {
      r.hint = "/usr/bin/sandbox-exec is missing; Seatbelt cannot be used";
      return r;
    }
    r.available = true;
    r.note = "sandbox-exec (Seatbelt) — namespace isolation, no kernel boundary";
    return r;
  case platform::linux_:
  case platform::wsl2: {
    if (!f.has_bwrap) r.missing.emplace_back("bubblewrap");
    if (!r.missing.empty()) {
      r.requires_install = true;
      r.hint = "apt-get install";
      for (const auto& m : r.missing) r.hint += " " + m;
      return r;
    }
    if (!f.can_unshare) {
      r.hint = "bwrap cannot create namespaces on this host (unprivileged user namespaces disabled?)";
      if (!f.unshare_error.empty()) r.hint += ": " + f.unshare_error;
      return r;
    }
    r.available = true;
    r.note = "bubblewrap — namespace isolation, no kernel boundary";
    r.landlock_abi = f.landlock_abi;
    return r;
  }
  case platform::windows:
  case platform::other:
    r.hint = "Native sandbox is not offered on this platform";
    return r;
  }
  return r;
}

// B6: an explicit backend request from a user (ccsb-run --backend). Unlike
// from_name (which reads a stored badge and never fails), a request that is
// not one of the three names is an error.
inline result<backend> parse_backend_request(std::string_view v, std::string_view field = "--backend") {
  if (v == "native") return backend::native;
  if (v == "none") return backend::none;
  if (v == "microvm") return backend::microvm;
  return make_error(errc::invalid_argument, std::string(field),
                    "expected native, none or microvm, got \"" + std::string(v) + "\"");
}

// B3: --sandbox / CC_SERVER_SANDBOX.
enum class sandbox_switch { on, off };

inline result<sandbox_switch> parse_sandbox_switch(std::string_view v, std::string_view field = "--sandbox") {
  std::string lower;
  for (char c : v) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  if (lower == "on") return sandbox_switch::on;
  if (lower == "off") return sandbox_switch::off;
  return make_error(errc::invalid_argument, std::string(field),
                    "expected \"on\" or \"off\", got \"" + std::string(v) + "\"");
}

// B4: exactly one start-up line.
inline std::string startup_line(sandbox_switch sw, const probe_result& native) {
  if (sw == sandbox_switch::off) return "agent sandbox DISABLED by --sandbox off";
  if (native.available) return "agent sandbox ON (" + native.note + ")";
  return "no OS-native agent sandbox on this host (" + native.hint + ")";
}

// The microVM runtime probe (X4). No runtime ships with ccsb yet, so callers
// pass {false, "..."} unless they have one.
struct microvm_probe {
  bool available{false};
  std::string note;
};

// Who asks for a backend: agent dispatch (B5) or a server-hosted terminal
// (T1: defaults to none, native only on explicit request).
enum class run_context { dispatch, terminal };

struct backend_selection {
  backend chosen{backend::none};      // the badge: what the session really gets (B6)
  std::vector<std::string> log;       // lines to log (step-downs, reasons)
  friend bool operator==(const backend_selection&, const backend_selection&) = default;
};

// B5, B6, B8, T1, T3. `requested` is an explicit request (absent = default);
// `prefer_microvm` marks a context whose unspecified default is microvm.
inline result<backend_selection> select_backend(run_context ctx, std::optional<backend> requested,
                                                sandbox_switch sw, const probe_result& native,
                                                const microvm_probe& vm, bool prefer_microvm = false) {
  backend_selection s;
  if (requested) {
    switch (*requested) {
    case backend::none:
      s.chosen = backend::none;
      return s;
    case backend::microvm:
      if (!vm.available)
        return make_error(errc::backend_unavailable, "backend",
                          "microvm was requested but no microVM runtime is available" +
                              (vm.note.empty() ? std::string() : " (" + vm.note + ")") +
                              "; the run does not start (microvm is never replaced silently)");
      s.chosen = backend::microvm;
      return s;
    case backend::native:
      if (sw == sandbox_switch::off)
        return make_error(errc::backend_unavailable, "backend",
                          "native was requested but the sandbox is disabled by --sandbox off");
      if (!native.available)
        return make_error(errc::backend_unavailable, "backend",
                          "native was requested but this host cannot provide it (" + native.hint + ")");
      s.chosen = backend::native;
      return s;
    }
  }
  // Unspecified: the context's default.
  if (sw == sandbox_switch::off) {
    s.chosen = backend::none;
    return s;
  }
  if (prefer_microvm) {
    if (vm.available) {
      s.chosen = backend::microvm;
      return s;
    }
    s.log.push_back("microvm runtime unavailable" + (vm.note.empty() ? std::string() : " (" + vm.note + ")") +
                    "; default steps down to " + std::string(native.available ? "native" : "none"));
  }
  if (ctx == run_context::terminal && !prefer_microvm) {
    s.chosen = backend::none; // T1
    return s;
  }
  s.chosen = native.available ? backend::native : backend::none;
  return s;
}

} // namespace ccsb
