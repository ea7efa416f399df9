// ccsb-run — run any command sandboxed.
//
//   ccsb-run [options] -- COMMAND [ARG...]
//     --spec FILE.json            a SandboxSpec; flags below add to or override it
//     --profile dispatch|terminal|spec
//     --mode chat|review|plan|orchestrate
//     --bind PATH[:ro]            bind mount (hostPath = guestPath); the current
//                                 directory is bound by default (unless the spec
//                                 file brings its own bindMounts)
//     --protect PATH              protectedPaths
//     --allow-create GLOB         createAllow: a P7 exception (create_allow.hpp),
//                                 e.g. '.venv/**'; repeatable; never a default
//     --strict                    S1: refuse a --spec file with a key that is no
//                                 spec field (by default: a warning naming
//                                 spec.KEY, and the closest field)
//     --state-dir PATH            runnerStateDirs
//     --allow PATTERN             egressAllowlist
//     --network on|off            networkEnabled
//     --sandbox on|off            B3 (also CC_SERVER_SANDBOX)
//     --backend native|none|microvm   an explicit request (B6)
//     --microvm-accel kvm|tcg     the microvm backend's accelerator (also
//                                 CCSB_MICROVM_ACCEL): QEMU's emulated CPU
//                                 (tcg) is used only when asked for here
//     --guest-dir DIR             the microvm guest image (also CCSB_GUEST_DIR;
//                                 else SELF/guest, SELF/../libexec/ccsb/guest)
//     --fallback refuse|none      B5: on a host without a native sandbox the
//                                 command is refused (exit 125, naming what is
//                                 missing) unless this is none, --backend none
//                                 or --sandbox off was given
//     --events FILE|-             JSON-line events (S5); with "-" the events go to
//                                 stdout and the command's stdout is carried only
//                                 in `stdout` events (stdout stays parseable)
//     --handle FILE               write the session handle (S3) as JSON when it
//                                 changes state
//     --timeout SECONDS           kill after this long (killed event)
//     --egress-opt OPT            an egressd option of the session: --allow-upstream
//                                 CIDR, --resolve NAME=IP, --dns-server IP:PORT (the
//                                 value in the next --egress-opt, after '=' or a
//                                 space); any other is refused (session_settings.hpp)
//     --env NAME[=VALUE]          pass one more variable to the command (E1);
//                                 E3 sanitisation still applies
//     --print-profile seatbelt|bwrap   print what would run (the SBPL profile for
//                                 sandbox-exec, or the bwrap argv one argument per
//                                 line) and exit 0 without running anything; 125
//                                 with a reason when the policy is refused. Off a
//                                 Mac, seatbelt uses the macOS path facts (/tmp,
//                                 /var, /etc under /private; issue 12)
//     --proxy-ports HTTP,SOCKS    the egressd ports --print-profile seatbelt shows
//                                 (default 3128,1080)
//     --egressd PATH, --init PATH override the helper programs (else CCSB_EGRESSD,
//                                 CCSB_INIT; else next to ccsb-run, then
//                                 ../libexec/ccsb: helpers.hpp helper_candidates)
//     --run-as UID[:GID]          root launcher only: the host uid the sandbox runs
//                                 as (default: a host uid of the session's own with
//                                 idmapped binds, seen inside as the workdir's owner,
//                                 else nobody; L1, L7)
//     --memory SIZE, --pids N, --tmp-size SIZE   L7 limits (SIZE: 123, 64K, 512M, 8G;
//                                 defaults 8G, 4096, 1G)
//     --cpus N                    L7: a hard CPU cap (1.5 = one and a half CPUs'
//                                 time per period, 0.01..1024); default none: every
//                                 session gets an equal share (its own cgroup,
//                                 cpu.weight 100 / cpu.shares 1024). Refused (125)
//                                 where no cgroup can take it
//     --no-path-toolchains        E4: do not make the toolchains on PATH inside HOME
//                                 (~/.cargo/bin, pyenv shims, nvm, ...) visible read-only;
//                                 by default they are, and a start-up line names each
//                                 one added or left out
//     --no-pty                    T4: even when stdin is a terminal, give the command
//                                 no pseudo-terminal (by default it gets one inside
//                                 the sandbox: job control, `tty`, resize, Ctrl-C)
//
// Exit code: the command's own (128+signal when killed); 125 when ccsb refuses
// or fails to start it, with a one-line reason on stderr. The start-up line
// (B4) goes to stderr first; the next line is the badge of what the session
// actually gets (B6), e.g.
//   ccsb-run: session backend: native (profile terminal)
//   ccsb-run: session backend: none — the command runs on the host WITHOUT a sandbox
//
// Decisions:
//  * Backend selection (B5, B6, T1, T3). A person who runs ccsb-run has asked
//    for a sandbox, so ccsb-run selects with run_context::dispatch semantics
//    for EVERY profile, the terminal profile included: the default is what
//    the probe offers (native on a Linux host with bwrap), and
//    `--backend none` (or --sandbox off) is the explicit opt-out. A host
//    without a native sandbox (bwrap missing) does not turn the run into an
//    unsandboxed one by itself (B5 for a tool): exit 125 naming the missing
//    package, unless --fallback none, --backend none or --sandbox off. The T1
//    terminal default (none unless the client asks) stays in select_backend
//    for servers that host terminals; it is not ccsb-run's. Nothing here may
//    claim native while the command runs on the host: the badge line, the
//    handle's `backend` and details.backend all carry the backend the session
//    really runs with.
//  * The probe's user-namespace trial (launch/userns_probe.hpp, about 2 ms)
//    runs at each start; bwrap itself is asked only when the trial fails. A
//    blocked host is refused (exit 125) with the cause and its fix; ccsb-run
//    never steps down to the host. The real bwrap run still has the last word.
//  * bwrap's options always travel through --args FD (a memfd): the sandbox's
//    /proc/1/cmdline shows no policy and no host path.
#include "ccsb/backend.hpp"
#include "ccsb/create_allow.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/sys/platform.hpp"
#if !CCSB_LAUNCH_MACOS
#include "ccsb/launch/microvm_driver.hpp" // X4: the microvm backend (QEMU)
#endif
#include "ccsb/launch/request_builder.hpp"
#include "ccsb/resource_limits.hpp"
#include "ccsb/launch/safe_path.hpp"
#include "ccsb/launch/session.hpp"
#if CCSB_LAUNCH_MACOS
#include "ccsb/launch/macos/seatbelt_driver.hpp" // the native driver (platform.hpp)
#else
#include "ccsb/broker/kernel_probe.hpp"     // X1: --print-profile bwrap asks the kernel
#include "ccsb/launch/linux/host_probe.hpp" // B2 on Linux (platform.hpp)
#endif
#include "ccsb/policy.hpp"
#include "ccsb/render/seatbelt/render.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kRefused = 125;

[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr, "ccsb-run: %s\n", why.c_str());
  std::exit(kRefused);
}

void usage() {
  std::fputs("usage: ccsb-run [--spec FILE] [--profile dispatch|terminal|spec] [--mode MODE] [--bind PATH[:ro]]...\n"
             "                [--protect PATH]... [--state-dir PATH]... [--allow-create GLOB]... [--strict]\n"
             "                [--allow PATTERN]... [--network on|off]\n"
             "                [--sandbox on|off] [--backend native|none|microvm] [--fallback refuse|none]\n"
             "                [--microvm-accel kvm|tcg] [--guest-dir DIR]\n"
             "                [--events FILE|-] [--handle FILE]\n"
             "                [--timeout SECONDS] [--egress-opt OPT]... [--env NAME[=VALUE]]...\n"
             "                [--run-as UID[:GID]] [--memory SIZE] [--pids N] [--tmp-size SIZE] [--cpus N]\n"
             "                [--no-path-toolchains] [--no-pty] -- COMMAND [ARG...]\n",
             stderr);
}

// --help: every option, what it does, and examples (on stdout, exit 0).
void help() {
  std::fputs(
      "ccsb-run runs COMMAND in a sandbox: it cannot read your secrets, cannot write outside\n"
      "the directories you bind, and reaches the network only through a per-session\n"
      "allowlist proxy.\n"
      "\n"
      "usage: ccsb-run [options] -- COMMAND [ARG...]\n"
      "\n"
      "What the sandbox sees\n"
      "  --spec FILE.json          a SandboxSpec; the flags below add to or override it\n"
      "  --profile P               dispatch (default): the spec plus every P4/P5/P7 protection;\n"
      "                            terminal: HOME and the workdir writable, open network (T2);\n"
      "                            spec: the spec plus P4/P5, without the P7 .env/*.key/*.pem rules\n"
      "  --mode M                  chat, review, plan or orchestrate (what the agent may do)\n"
      "  --bind PATH[:ro]          make PATH visible, writable unless :ro (default: the current\n"
      "                            directory, unless the spec brings its own bindMounts)\n"
      "  --protect PATH            keep PATH read-only even inside a writable bind (protectedPaths)\n"
      "  --state-dir PATH          a runner state directory the agent may write (runnerStateDirs)\n"
      "  --allow-create GLOB       let .env, *.key and *.pem names be created below GLOB, relative to\n"
      "                            a writable root: '.venv/**', 'node_modules/**', '.env' (createAllow;\n"
      "                            repeatable; refused for a whole root, a .git dir, tool configs)\n"
      "  --strict                  refuse a --spec file with an unknown key (default: a warning)\n"
      "  --no-path-toolchains      do not make the toolchains on PATH inside HOME visible read-only\n"
      "\n"
      "Network\n"
      "  --allow PATTERN           allow a host: example.com, *.example.com (repeatable)\n"
      "  --network on|off          off: every connection is denied, even to allowed names\n"
      "  --egress-opt OPT          an egressd option of the session: --allow-upstream CIDR, --resolve\n"
      "                            NAME=IP or --dns-server IP:PORT ('--resolve a.test=127.0.0.1' as one\n"
      "                            word, or the value in the next --egress-opt); others are refused\n"
      "\n"
      "The command\n"
      "  --env NAME[=VALUE]        pass one more variable (refused, naming env.NAME, when E3 removes it)\n"
      "  --timeout SECONDS         kill the command after this long (a `killed` event)\n"
      "  --no-pty                  no pseudo-terminal inside even when stdin is a terminal\n"
      "  --quiet                   stderr gets only the start-up line, the backend badge, errors,\n"
      "                            warnings, the P7 exceptions and the summary of denials at exit\n"
      "  --run-as UID[:GID]        root launcher only: the host uid the sandbox runs as\n"
      "                            (default: a host uid of the session's own, seen inside as the\n"
      "                            workdir's owner, else nobody; never 0)\n"
      "  --memory SIZE  --pids N  --tmp-size SIZE\n"
      "                            limits (SIZE: 64K, 512M, 8G; defaults 8G, 4096, 1G)\n"
      "  --cpus N                  a hard CPU cap, e.g. 1.5 (default: none; every session gets an\n"
      "                            equal share of the CPU whatever its process count)\n"
      "\n"
      "Backend and output\n"
      "  --sandbox on|off          off runs the command on the host, unsandboxed (also\n"
      "                            CC_SERVER_SANDBOX)\n"
      "  --backend native|none|microvm   ask for one backend explicitly\n"
      "  --microvm-accel kvm|tcg   microvm: KVM (default, where /dev/kvm is usable) or QEMU's emulated\n"
      "                            CPU, slow and only on this explicit choice (also CCSB_MICROVM_ACCEL)\n"
      "  --guest-dir DIR           microvm: the guest image (also CCSB_GUEST_DIR)\n"
      "  --fallback refuse|none    without a native sandbox on this host: refuse (default, exit 125)\n"
      "                            or run on the host (none)\n"
      "  --events FILE|-           JSON-line events (ready, stdout, stderr, violation, exit...);\n"
      "                            with - they go to stdout\n"
      "  --handle FILE             the session handle as JSON, rewritten on each state change\n"
      "  --print-profile seatbelt|bwrap   print what would run and exit without running it\n"
      "  --proxy-ports HTTP,SOCKS  the ports --print-profile seatbelt shows (default 3128,1080)\n"
      "  --egressd PATH  --init PATH   the helper programs (else CCSB_EGRESSD, CCSB_INIT; else next to\n"
      "                            ccsb-run, then ../libexec/ccsb from its directory)\n"
      "\n"
      "Examples\n"
      "  ccsb-run -- make test\n"
      "      run the tests of the current directory; the network is the baseline allowlist\n"
      "  ccsb-run --allow github.com --allow '*.github.com' -- git fetch\n"
      "      fetch through the proxy; any other host is denied and reported\n"
      "  ccsb-run --bind ~/src/lib:ro --protect ./vendor -- cargo build\n"
      "      read a sibling checkout, keep ./vendor read-only\n"
      "  ccsb-run --allow-create '.venv/**' -- python3 -m venv .venv\n"
      "      a venv ships certifi's cacert.pem: allow *.pem names inside .venv only\n"
      "  ccsb-run --profile terminal -- bash -i\n"
      "      an interactive shell with a real terminal inside\n"
      "  ccsb-run --events - --timeout 60 -- ./agent-step.sh\n"
      "      machine-readable events on stdout, killed after a minute\n"
      "\n"
      "Exit status: the command's own (128+signal when killed); 125 when ccsb refuses or\n"
      "fails to start it, with a one-line reason on stderr.\n"
      "\n"
      "Signals: SIGTERM, SIGINT or SIGHUP stop the command (a `killed` event, reason stop);\n"
      "a second one destroys the sandbox at once, without waiting for the command.\n",
      stdout);
}

struct cli {
  std::optional<std::string> spec_file;
  ccsb::profile prof{ccsb::profile::dispatch};
  std::optional<ccsb::mode> mode;
  std::vector<ccsb::bind_mount> binds;
  std::vector<std::string> protect, state_dirs, allow, egress_opts, env_names, create_allow;
  bool strict{false}; // S1: an unknown key in the --spec file is refused, not only warned about
  std::optional<bool> network;
  std::optional<std::string> sandbox;
  std::optional<ccsb::backend> backend;
  bool fallback_none{false};
  std::optional<std::string> events, handle_file, egressd, init;
  std::optional<std::string> microvm_accel, guest_dir; // X4
  std::optional<double> timeout;
  std::optional<ccsb::run_as_ids> run_as;
  ccsb::resource_limits limits;
  std::optional<std::string> print_profile; // "seatbelt" or "bwrap"
  std::uint16_t http_port{ccsb::kDefaultHttpPort}, socks_port{ccsb::kDefaultSocksPort};
  ccsb::compile_options compile;
  bool pty{true}; // T4: a pseudo-terminal when stdin is a terminal
  bool quiet{false}; // only the B4 line, the B6 badge, errors and the denial summary on stderr
  std::vector<std::string> command;
};

cli parse_cli(int argc, char** argv) {
  cli c;
  int i = 1;
  // The GNU form --name=value is accepted for every option that takes a
  // value, and refused for one that takes none.
  std::optional<std::string> inline_value;
  auto value = [&](const std::string& name) -> std::string {
    if (inline_value) {
      std::string v = std::move(*inline_value);
      inline_value.reset();
      return v;
    }
    if (i + 1 >= argc) refuse(name + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    inline_value.reset();
    if (a.size() > 2 && a.compare(0, 2, "--") == 0)
      if (auto eq = a.find('='); eq != std::string::npos && eq > 2) {
        inline_value = a.substr(eq + 1);
        a.resize(eq);
      }
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      help();
      std::exit(0);
    } else if (a == "--spec") c.spec_file = value(a);
    else if (a == "--profile") {
      auto p = ccsb::parse_profile(value(a));
      if (!p) refuse("--profile: " + p.err().message);
      c.prof = *p;
    } else if (a == "--mode") {
      auto m = ccsb::parse_mode(value(a));
      if (!m) refuse("--mode: " + m.err().message);
      c.mode = *m;
    } else if (a == "--bind") {
      std::string v = value(a);
      bool ro = false;
      if (v.size() > 3 && v.compare(v.size() - 3, 3, ":ro") == 0) {
        ro = true;
        v.resize(v.size() - 3);
      } else if (v.size() > 3 && v.compare(v.size() - 3, 3, ":rw") == 0) {
        v.resize(v.size() - 3);
      }
      if (v.empty() || v.front() != '/') v = std::filesystem::absolute(v).lexically_normal().string();
      if (v.size() > 1 && v.back() == '/') v.pop_back();
      c.binds.push_back({v, v, ro});
    } else if (a == "--protect") c.protect.push_back(value(a));
    else if (a == "--state-dir") c.state_dirs.push_back(value(a));
    else if (a == "--allow-create") c.create_allow.push_back(value(a));
    else if (a == "--strict") c.strict = true;
    else if (a == "--allow") c.allow.push_back(value(a));
    else if (a == "--network") {
      std::string v = value(a);
      if (v == "on") c.network = true;
      else if (v == "off") c.network = false;
      else refuse("--network: expected on or off, got \"" + v + "\"");
    } else if (a == "--sandbox") c.sandbox = value(a);
    else if (a == "--backend") {
      std::string v = value(a);
      if (v == "native") c.backend = ccsb::backend::native;
      else if (v == "none") c.backend = ccsb::backend::none;
      else if (v == "microvm") c.backend = ccsb::backend::microvm;
      else refuse("--backend: expected native, none or microvm, got \"" + v + "\"");
    } else if (a == "--fallback") {
      std::string v = value(a);
      if (v == "none") c.fallback_none = true;
      else if (v != "refuse") refuse("--fallback: expected refuse or none, got \"" + v + "\"");
    } else if (a == "--events") c.events = value(a);
    else if (a == "--handle") c.handle_file = value(a);
    else if (a == "--timeout") {
      std::string v = value(a);
      char* end = nullptr;
      double t = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(t > 0) || t > 1e7) refuse("--timeout: expected a positive number of seconds");
      c.timeout = t;
    } else if (a == "--egress-opt") c.egress_opts.push_back(value(a));
    else if (a == "--env") c.env_names.push_back(value(a));
    else if (a == "--run-as") {
      auto r = ccsb::parse_run_as(a, value(a));
      if (!r) refuse(r.err().what());
      c.run_as = *r;
    } else if (a == "--memory" || a == "--pids" || a == "--tmp-size" || a == "--cpus") {
      // L7: the same check as ccsbd's launch "limits" (session_settings.hpp).
      const char* key = a == "--memory" ? "memory" : a == "--pids" ? "pids" : a == "--tmp-size" ? "tmpSize" : "cpus";
      if (auto l = ccsb::set_limit(c.limits, key, value(a), a); !l) refuse(l.err().what());
    }
    else if (a == "--print-profile") {
      std::string v = value(a);
      if (v != "seatbelt" && v != "bwrap") refuse("--print-profile: expected seatbelt or bwrap, got \"" + v + "\"");
      c.print_profile = v;
    } else if (a == "--proxy-ports") {
      std::string v = value(a);
      auto port = [&](const std::string& t) -> std::uint16_t {
        char* end = nullptr;
        errno = 0;
        unsigned long n = std::strtoul(t.c_str(), &end, 10);
        if (t.empty() || *end != '\0' || errno != 0 || n == 0 || n > 65535 || t.front() == '0')
          refuse("--proxy-ports: expected HTTP,SOCKS (two ports 1-65535), got \"" + v + "\"");
        return static_cast<std::uint16_t>(n);
      };
      auto comma = v.find(',');
      if (comma == std::string::npos) refuse("--proxy-ports: expected HTTP,SOCKS, got \"" + v + "\"");
      c.http_port = port(v.substr(0, comma));
      c.socks_port = port(v.substr(comma + 1));
      if (c.http_port == c.socks_port) refuse("--proxy-ports: the two ports must differ");
    } else if (a == "--egressd") c.egressd = value(a);
    else if (a == "--init") c.init = value(a);
    else if (a == "--microvm-accel") c.microvm_accel = value(a);
    else if (a == "--guest-dir") c.guest_dir = value(a);
    else if (a == "--no-path-toolchains") c.compile.path_toolchains = false;
    else if (a == "--no-pty") c.pty = false;
    else if (a == "--quiet") c.quiet = true;
    else {
      usage();
      refuse("unknown option \"" + a + "\"");
    }
    if (inline_value) refuse(a + " takes no value (got \"" + a + "=" + *inline_value + "\")");
  }
  for (; i < argc; ++i) c.command.emplace_back(argv[i]);
  if (c.command.empty()) {
    usage();
    refuse("no command given after --");
  }
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) refuse("--spec: cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ccsb::sandbox_spec build_spec(const cli& c, const std::string& cwd) {
  ccsb::sandbox_spec s;
  bool spec_has_mounts = false;
  if (c.spec_file) {
    const std::string text = read_file(*c.spec_file);
    auto parsed = ccsb::parse_spec(text);
    if (!parsed) refuse("--spec: " + parsed.err().what());
    // S1 reads past unknown keys (stored specs stay readable); a typo such
    // as protectedPath must not pass unseen: each one is named on stderr,
    // and --strict refuses the spec.
    for (const auto& u : ccsb::unknown_spec_fields(*ccsb::parse_json(text), "spec.")) {
      if (c.strict) refuse("--spec " + *c.spec_file + ": " + ccsb::describe(u) + "; --strict refuses unknown keys");
      std::fprintf(stderr, "ccsb-run: warning: --spec %s: %s\n", c.spec_file->c_str(), ccsb::describe(u).c_str());
    }
    s = *parsed;
    spec_has_mounts = !s.bind_mounts.empty();
  } else {
    s.session_id = "run-" + std::to_string(::getpid());
    s.workspace_id = "ccsb-run";
  }
  if (!spec_has_mounts) {
    bool overridden = false;
    for (const auto& b : c.binds)
      if (b.host_path == cwd) overridden = true;
    if (!overridden) s.bind_mounts.push_back({cwd, cwd, false});
    if (!s.guest_workdir) s.guest_workdir = cwd;
  }
  for (const auto& b : c.binds) s.bind_mounts.push_back(b);
  if (c.mode) s.mode = *c.mode;
  for (const auto& p : c.protect) s.protected_paths.push_back(p);
  for (const auto& p : c.state_dirs) s.runner_state_dirs.push_back(p);
  for (const auto& a : c.allow) s.egress_allowlist.push_back(a);
  for (std::size_t i = 0; i < c.create_allow.size(); ++i) {
    if (auto r = ccsb::create_allow::syntax(c.create_allow[i]); !r)
      refuse("--allow-create " + c.create_allow[i] + ": createAllow[" + std::to_string(s.create_allow.size()) +
             "]: " + r.err().message);
    s.create_allow.push_back(c.create_allow[i]);
  }
  if (c.network) s.network_enabled = *c.network;
  if (auto v = ccsb::validate(s); !v) refuse(v.err().what());
  return s;
}

// --print-profile: compile, render, print; nothing runs (issue 12).
int print_profile(const cli& c, const std::string& cwd) {
  ccsb::sandbox_spec spec = build_spec(c, cwd);
  ccsb::host_facts hf = ccsb::launch::gather_host_facts();
  if (*c.print_profile == "seatbelt") {
#if !defined(__APPLE__)
    // Off a Mac: the macOS path facts, lexically (nothing is looked up).
    hf.resolve = [](const std::string& p) -> std::optional<std::string> { return ccsb::macos_resolve(p); };
#endif
    auto pol = ccsb::compile(spec, c.prof, hf, c.compile);
    if (!pol) refuse(pol.err().what());
    ccsb::seatbelt_facts sf;
    sf.http_port = c.http_port;
    sf.socks_port = c.socks_port;
    sf.session_tag = ccsb::seatbelt_tag(spec.session_id, "print");
    sf.temp_dir = std::string(ccsb::kPrintTempBase) + "/" + sf.session_tag;
    sf.resolve = [&hf](const std::string& p) {
      auto r = hf.resolve(p);
      return r ? *r : p;
    };
    auto prof = ccsb::render_seatbelt(*pol, sf);
    if (!prof) refuse(prof.err().what());
    std::fwrite(prof->text.data(), 1, prof->text.size(), stdout);
    return 0;
  }
  auto pol = ccsb::compile(spec, c.prof, hf, c.compile);
  if (!pol) refuse(pol.err().what());
  ccsb::bwrap_facts bf = ccsb::launch::host_bwrap_facts();
  bf.run_dir = "/run/user/" + std::to_string(::getuid()) + "/ccsb-" + spec.session_id;
  bf.sources_dir = "/run/user/" + std::to_string(::getuid()) + "/ccsb/mask-sources"; // as run_dir.hpp names it
  bf.init_path = ccsb::launch::helper_path(c.init, "CCSB_INIT", "ccsb-init");
#if !CCSB_LAUNCH_MACOS // on a Mac the printed argv assumes no creation-rule broker
  if (pol->requires_broker()) bf.creation_rules = ccsb::broker::creation_rules_supported().ok;
#endif
  auto plan = ccsb::render_bwrap(*pol, bf);
  if (!plan) refuse(plan.err().what());
  for (const auto& a : ccsb::bwrap_argv(*plan, "bwrap")) std::printf("%s\n", a.c_str());
  // S7: the command is not on bwrap's argv; the launcher sends it to
  // ccsb-init over the exec channel once the sandbox is ready.
  std::printf("# then exec over the exec channel, one argument per line:\n");
  for (const auto& a : c.command) std::printf("# %s\n", a.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  ccsb::launch::hold_standard_fds();
  ::signal(SIGPIPE, SIG_IGN);
  cli c = parse_cli(argc, argv);
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  if (ec) refuse("cannot read the current directory: " + ec.message());
  if (c.print_profile) return print_profile(c, cwd);

  // B3
  std::string sw_text = c.sandbox ? *c.sandbox : (std::getenv("CC_SERVER_SANDBOX") ? std::getenv("CC_SERVER_SANDBOX") : "on");
  auto sw = ccsb::parse_sandbox_switch(sw_text, c.sandbox ? "--sandbox" : "CC_SERVER_SANDBOX");
  if (!sw) refuse(sw.err().what());

  // B2: probe once; B4: exactly one start-up line. The facts are the
  // platform's (platform.hpp): Seatbelt on macOS, bubblewrap on Linux.
#if CCSB_LAUNCH_MACOS
  ccsb::probe_result native = ccsb::probe_native(ccsb::launch::macos::seatbelt_probe_facts());
#else
  ccsb::probe_result native =
      ccsb::probe_native(ccsb::launch::gather_probe_facts(ccsb::launch::unshare_check::skip));
#endif
  // X4: the microvm runtime is probed only when asked for (ccsb-run's
  // default is the native sandbox); its B4 line replaces the native one.
  ccsb::microvm_probe vm_probe{false, "not built for this platform"};
  std::optional<ccsb::launch::microvm_inputs> vm;
#if !CCSB_LAUNCH_MACOS
  if (c.backend == ccsb::backend::microvm) {
    auto a = ccsb::launch::probe_microvm(c.microvm_accel, "--microvm-accel", c.guest_dir,
                                         "CCSB_MICROVM_ACCEL=tcg or --microvm-accel tcg");
    if (!a) refuse(a.err().what());
    vm = std::move(*a);
    vm_probe = vm->answer.vm;
  }
  std::string line = vm && vm->answer.vm.available ? ccsb::microvm::startup_line(vm->answer)
                                                   : ccsb::startup_line(*sw, native);
#else
  std::string line = ccsb::startup_line(*sw, native);
#endif
  if (c.prof == ccsb::profile::spec)
    line += " [profile spec: the P7 .env/*.key/*.pem creation denials are off by explicit choice]";
  std::fprintf(stderr, "%s\n", line.c_str());

  // B5 for a tool: no native sandbox here is no reason to run on the host.
  if (!native.available && !native.fail_closed && *sw == ccsb::sandbox_switch::on && !c.backend && !c.fallback_none)
    refuse("no native sandbox on this host (" + native.hint +
           "); the command does not run on the host without an explicit choice: --backend none, --sandbox off or "
           "--fallback none (B5)");
  if (c.fallback_none) native.fail_closed = false; // a blocked host steps down to none too, as asked
  // B5/B6/T3: dispatch semantics for every profile (see "Backend selection").
  auto sel = ccsb::select_backend(ccsb::run_context::dispatch, c.backend, *sw, native, vm_probe);
  if (!sel) refuse(sel.err().what());
  // B6: the badge of what the session actually gets, right after the B4 line.
  if (sel->chosen == ccsb::backend::none)
    std::fprintf(stderr, "ccsb-run: session backend: none — the command runs on the host WITHOUT a sandbox\n");
  else
    std::fprintf(stderr, "ccsb-run: session backend: %s (profile %s)\n", std::string(ccsb::to_string(sel->chosen)).c_str(),
                 std::string(ccsb::to_string(c.prof)).c_str());
  if (!c.quiet)
    for (const auto& l : sel->log) std::fprintf(stderr, "ccsb-run: %s\n", l.c_str());

  ccsb::sandbox_spec spec = build_spec(c, cwd);
  ccsb::host_facts hf = ccsb::launch::gather_host_facts();
  // E1: --env passes one more variable. A name the launcher does not have
  // is refused here; one E3 would remove is refused by the request builder,
  // naming env.NAME exactly as ccsbd's launch "env" (never dropped).
  ccsb::env_list extra;
  for (const auto& n : c.env_names) {
    auto eq = n.find('=');
    if (eq != std::string::npos) extra.push_back({n.substr(0, eq), n.substr(eq + 1)});
    else if (auto it = hf.env.find(n); it != hf.env.end()) extra.push_back({it->first, it->second});
    else refuse("--env " + n + ": env." + n + " is not set in ccsb-run's environment (pass NAME=VALUE)");
  }
  // --egress-opt: the egressd options a session may set, typed as ccsbd's
  // launch "egress" (session_settings.hpp).
  auto egress = ccsb::egress_from_args(c.egress_opts);
  if (!egress) refuse(egress.err().what());
  // The native driver of this platform (platform.hpp): nullptr on Linux
  // (session.hpp's default, bubblewrap), the Seatbelt driver on macOS; the
  // microvm driver the request builder made for a microvm session.
  std::unique_ptr<ccsb::launch::driver> native_driver;
  ccsb::launch::session_request req;
  const ccsb::policy* pol = nullptr;
  std::optional<ccsb::launch::prepared_request> built;
  ccsb::launch::request_inputs in{spec, c.prof, c.compile, std::move(extra), std::move(vm)};
  ccsb::launch::session_request rq;
  rq.chosen = sel->chosen;
  rq.egressd_path = ccsb::launch::helper_path(c.egressd, "CCSB_EGRESSD", "egressd");
  rq.init_path = ccsb::launch::helper_path(c.init, "CCSB_INIT", "ccsb-init");
  rq.egress = std::move(*egress);
  rq.run_as = c.run_as;
  rq.limits = c.limits;
  rq.landlock_abi = native.landlock_abi;
  auto b = ccsb::launch::build_session_request(std::move(in), std::move(rq), hf);
  if (!b) refuse((b.err().field.starts_with("env.") ? "--env: " : "") + b.err().what());
  built = std::move(*b);
  pol = &built->pol;
  // P7 exceptions are a weakening the caller chose: named at start-up even
  // with --quiet.
  if (sel->chosen == ccsb::backend::native && !pol->create_allow.empty()) {
    std::string l = "ccsb-run: createAllow (P7 exceptions: .env, *.key and *.pem may be created below):";
    for (const auto& g : pol->create_allow) l += " " + g;
    std::fprintf(stderr, "%s\n", l.c_str());
  }
  // Start-up details: the toolchains made visible from PATH, or left out, and why (E4).
  if (sel->chosen == ccsb::backend::native && !c.quiet)
    for (const auto& n : pol->notes) std::fprintf(stderr, "ccsb-run: %s\n", n.c_str());
  req = std::move(built->request);
  if (built->backend_driver) native_driver = std::move(built->backend_driver);
#if CCSB_LAUNCH_MACOS
  // The Seatbelt driver changes no credentials (L1): not as root, and
  // refused before any file is opened.
  if (sel->chosen == ccsb::backend::native && ::geteuid() == 0)
    refuse("the macOS backend does not run sandboxes as root (L1); run ccsb-run as the user");
#endif
  // Events and handle outputs (L8, see "--events and --handle files"),
  // opened before the native driver is made (on macOS it makes a run dir: a
  // refusal here leaves nothing behind).
  // Strict (no symlink anywhere on the way) when the file lies, in its
  // literal or its resolved spelling, inside any area the policy makes
  // visible: the compiled mounts are resolved (policy.hpp), the flags are not.
  // Inside a WRITABLE mount the file is refused (issue 27): the command
  // could rename it away and put its own in its place, and whoever reads the
  // path after the run would read the forgery.
  auto mount_holding = [&](const std::string& p, bool writable_only) -> const ccsb::mount_rule* {
    std::string abs = ccsb::lexical_normal(p.front() == '/' ? p : cwd + "/" + p);
    std::vector<std::string> spellings{abs};
    auto slash = abs.rfind('/');
    if (auto parent = hf.resolve(slash == 0 ? std::string("/") : abs.substr(0, slash)))
      spellings.push_back(ccsb::lexical_normal(*parent + "/" + abs.substr(slash + 1)));
    for (const auto& m : pol->mounts)
      if ((m.writable || !writable_only) &&
          std::any_of(spellings.begin(), spellings.end(),
                      [&](const std::string& sp) { return ccsb::within(sp, m.host_path); }))
        return &m;
    return nullptr;
  };
  auto open_out = [&](const std::string& p, const std::string& field) {
    std::string abs = ccsb::lexical_normal(p.front() == '/' ? p : cwd + "/" + p);
    if (sel->chosen == ccsb::backend::native || sel->chosen == ccsb::backend::microvm)
      if (const auto* m = mount_holding(p, true))
        refuse(field + ": \"" + abs + "\" lies inside the writable bind \"" + m->host_path +
               "\"; the sandboxed command could replace it while the session runs (L8). Write it outside every "
               "writable bind");
    auto f = ccsb::launch::open_output_file(abs, field, mount_holding(p, false) != nullptr);
    if (!f) refuse(f.err().what());
    return std::move(*f);
  };
  ccsb::launch::unique_fd events_file, handle_file;
  int events_fd = -1;
  bool events_on_stdout = false;
  if (c.events) {
    if (*c.events == "-") {
      events_fd = 1;
      events_on_stdout = true;
    } else {
      events_file = open_out(*c.events, "--events");
      events_fd = events_file.get();
    }
  }
  if (c.handle_file) handle_file = open_out(*c.handle_file, "--handle");
  // The Seatbelt driver has no pseudo-terminal: commands get pipes.
  namespace platform = ccsb::sys::this_platform;
#if CCSB_LAUNCH_MACOS
  if (sel->chosen == ccsb::backend::native) {
    auto d = ccsb::launch::macos::make_seatbelt_driver(req.pol, req.egressd_path, req.egress);
    if (!d) refuse(d.err().what());
    // L7: a CPU cap is never dropped silently (no cgroup here to take it).
    if (c.limits.cpu_millis) refuse("--cpus: the macOS backend cannot cap CPU (Seatbelt has no cgroups)");
    native_driver = std::move(*d);
    std::fprintf(stderr, "ccsb-run: the macOS backend applies no L7 limits (--memory, --pids, --tmp-size) and no "
                         "CPU separation: Seatbelt has no cgroups\n");
  }
#endif
  const bool pty = c.pty && ::isatty(0) == 1 &&
                   ((sel->chosen == ccsb::backend::native && platform::native == platform::native_driver::bwrap) ||
                    sel->chosen == ccsb::backend::microvm);

  // Every denial is summed up on stderr at exit (issue 28: without --events
  // a denial was never shown), the first few named.
  std::vector<ccsb::sandbox_violation> denials;
  ccsb::launch::session_callbacks cb;
  cb.event = [&](const ccsb::sandbox_event& e) {
    if (e.kind == ccsb::event_kind::violation) denials.push_back(e.violation);
    if (events_fd < 0) return;
    ccsb::launch::write_all(events_fd, ccsb::to_json_line(e) + "\n");
  };
  cb.output = [&](ccsb::launch::exec_id, int stream, std::string_view bytes) {
    if (stream == 1 && events_on_stdout) return;
    ccsb::launch::write_all(stream, bytes);
  };
  cb.log = [&c](const std::string& s) {
    if (!c.quiet) std::fprintf(stderr, "ccsb-run: %s\n", s.c_str());
  };
  if (handle_file) {
    const int hfd = handle_file.get();
    cb.handle = [hfd](const ccsb::sandbox_handle& h) {
      const std::string text = ccsb::to_json_string(h) + "\n";
      std::size_t off = 0;
      while (off < text.size()) {
        ssize_t w = ::pwrite(hfd, text.data() + off, text.size() - off, static_cast<off_t>(off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += static_cast<std::size_t>(w);
      }
      (void)::ftruncate(hfd, static_cast<off_t>(text.size()));
    };
  }

  // S7: one launch, one exec, destroy: the thin client of the session API.
  // Signals arrive through the reactor's self-pipe (reactor.hpp, the same on
  // Linux and macOS; its handlers are installed before any child exists, so
  // none is lost): SIGTERM/SIGINT/SIGHUP stop the command (`killed` "stop"),
  // SIGWINCH resizes its terminal (T4). A second stop signal destroys the
  // session at once (S7): stopping the command goes through the sandbox's
  // supervisor, and one that does not answer (stopped or frozen from the
  // host, or wedged) never reports the exit; the destroy kills bwrap's
  // process group, and the sandbox with it, without asking the supervisor.
  ccsb::launch::reactor reactor;
  std::optional<ccsb::launch::exec_id> running;
  bool stopping = false, stop_pending = false;
  int forced = 0; // the second stop signal, once the session was destroyed for it
  ccsb::launch::session* live = nullptr; // the session, from its start on
  auto watched = reactor.watch_signals({SIGTERM, SIGINT, SIGHUP, SIGWINCH}, [&](int sig) {
    if (sig == SIGWINCH) {
      if (live) live->resize_from(0);
    } else if (!stopping) {
      stopping = true;
      if (live && running) (void)live->kill(*running, "stop");
      else stop_pending = true; // before the command started: stop it as soon as it has
    } else if (!forced && live) {
      forced = sig;
      std::fprintf(stderr, "ccsb-run: %s again: the session is destroyed without waiting for the command\n",
                   sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP");
      live->destroy();
    }
  });
  if (!watched) refuse(watched.err().what());
  // The command goes with the launch where the driver queues it (the native
  // Linux driver: no round trip between `ready` and the exec request);
  // elsewhere the session is brought to warm first.
  auto s = ccsb::launch::session::start(reactor, std::move(req), cb, std::move(native_driver));
  if (!s) refuse(s.err().what());
  live = s->get();
  if (!(*s)->can_exec()) {
    ccsb::launch::session* p = s->get();
    auto up = reactor.run_until([p, &forced] { return p->can_exec() || p->start_error() || forced; });
    if (forced) return 128 + forced; // destroyed before the command started
    if (p->start_error()) refuse(p->start_error()->what());
    if (!up) refuse(up.err().what());
  }
  ccsb::launch::exec_options eo;
  if (c.timeout) eo.timeout = std::chrono::milliseconds(static_cast<long long>(*c.timeout * 1000));
  ccsb::launch::unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (pty) {
    winsize ws{};
    ccsb::protocol::terminal_size size;
    if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) size = {ws.ws_row, ws.ws_col};
    eo.terminal = size;
  } else {
    eo.stdin_fd = ::fcntl(0, F_GETFD) >= 0 ? 0 : null.get();
  }
  auto id = (*s)->exec(c.command, eo);
  if (!id) {
    (*s)->destroy();
    refuse(id.err().what());
  }
  if (pty) (void)(*s)->attach_terminal(*id, 0);
  running = *id;
  if (stop_pending) (void)live->kill(*id, "stop");
  auto ran = reactor.run_until([&] { return (*s)->finished(*id); });
  auto failure = (*s)->start_failure(*id);
  auto code = (*s)->exit_code(*id);
  (*s)->destroy();
  if (!denials.empty()) {
    std::string line = "ccsb-run: " + std::to_string(denials.size()) +
                        (denials.size() == 1 ? " denial" : " denials") + " in this session: ";
    const std::size_t shown = std::min<std::size_t>(denials.size(), 3);
    for (std::size_t i = 0; i < shown; ++i)
      line += (i ? ", " : "") + denials[i].action + " " + denials[i].target;
    if (denials.size() > shown) line += " (+" + std::to_string(denials.size() - shown) + " more; --events lists each)";
    std::fprintf(stderr, "%s\n", line.c_str());
    // P7 creations an install lost (issue 28): say which exception would
    // have let them be created.
    std::size_t p7 = 0;
    std::string first, hint;
    for (const auto& d : denials) {
      if (d.action != "file-write-create" || !ccsb::create_allow::p7_name(d.target)) continue;
      if (p7++) continue;
      first = d.target;
      const ccsb::path_rule* root = nullptr;
      for (const auto& w : pol->write_allow)
        if (ccsb::within(d.target, w.path) && d.target != w.path && (!root || w.path.size() > root->path.size()))
          root = &w;
      if (root) hint = ccsb::create_allow::suggestion(root->path, d.target);
    }
    if (p7)
      std::fprintf(stderr,
                   "ccsb-run: P7 denied creating %zu .env, *.key or *.pem name%s (first: %s): files a tool expected "
                   "may be missing. If the command needs them, run it again with --allow-create '%s' (createAllow)\n",
                   p7, p7 == 1 ? "" : "s", first.c_str(), hint.empty() ? "DIR/**" : hint.c_str());
  }
  if (!ran) refuse(ran.err().what());
  if (auto why = (*s)->start_error()) refuse(why->what()); // the sandbox never came up
  if (failure) {
    // The command did not start: 125 with the reason, as for any start
    // failure (docs/ccsb-run.md: exit status).
    std::fprintf(stderr, "ccsb-run: command: %s\n", failure->second.c_str());
    return 125;
  }
  return code ? *code : 125;
}
