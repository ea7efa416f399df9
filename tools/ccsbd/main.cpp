// ccsbd — the sidecar daemon: ccsb sessions for servers in any language,
// over JSON lines on a Unix socket (S8). The protocol: docs/ccsbd-protocol.md.
//
//   ccsbd --listen unix:PATH [--sandbox on|off] [--fallback refuse|none]
//         [--egressd PATH] [--init PATH] [--no-path-toolchains]
//
// main() reads as a checklist:
//   1. options; B3 (--sandbox, else CC_SERVER_SANDBOX, else on);
//   2. SIGTERM/SIGINT/SIGHUP read through the reactor's self-pipe, its
//      handlers installed before any child exists (none is lost); SIGPIPE
//      ignored;
//   3. B2: the host probe, once (Linux: with the can-bwrap-unshare check: a
//      daemon runs it at start-up, B2; macOS: sandbox-exec, platform.hpp),
//      and the host facts, once;
//   4. B4: exactly one start-up line on stderr;
//   5. the socket (listener.hpp: 0600 from the start, checked after bind, in
//      a directory no other user can write and, on Linux, outside the system
//      tree every sandbox sees);
//   6. serve: one reactor, one thread, every connection and every session
//      (server.hpp); a peer of another uid (SO_PEERCRED) or inside a sandbox
//      (peer_linux.hpp: its namespaces, through a pidfd) is told why and
//      closed;
//   7. SIGTERM (or SIGINT, SIGHUP): every session destroyed, what is pending
//      written out, the socket removed, exit 0.
// Exit 125 when the daemon cannot start, with a one-line reason on stderr.
// A SIGKILLed daemon takes every session with it on Linux: bwrap, egressd
// and QEMU have PR_SET_PDEATHSIG(SIGKILL) and bwrap --die-with-parent (no
// orphans); the QEMU cgroups it leaves are swept when a daemon starts.
// macOS has no such call: there only SIGTERM (destroy) ends the sessions.
#include "listener.hpp"
#include "server.hpp"

#include "ccsb/backend.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/sys/platform.hpp"
#if !CCSB_LAUNCH_MACOS
#include "ccsb/launch/linux/host_probe.hpp" // B2 on Linux (platform.hpp)
#include "ccsb/render/bwrap/render.hpp"            // kSystemTop: what every sandbox sees
#include "peer_linux.hpp"                   // S8: a peer inside a sandbox is refused
#endif
#include "ccsb/launch/reactor.hpp"
#include "ccsb/launch/request_builder.hpp"
#include "ccsb/protocol/daemon.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

namespace {

constexpr int kRefused = 125;

[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr, "ccsbd: %s\n", why.c_str());
  std::exit(kRefused);
}

void usage(std::FILE* to) {
  std::fputs("usage: ccsbd --listen unix:PATH [--sandbox on|off] [--fallback refuse|none] [--egressd PATH]\n"
             "             [--init PATH] [--no-path-toolchains] [--strict]\n"
             "  --listen unix:PATH     the socket to serve on (created 0600; only peers of this uid outside any\n"
             "                         sandbox); its directory must be writable by this uid only and no session\n"
             "                         may bind it, an ancestor of it or anything inside it\n"
             "  --sandbox on|off       B3 (also CC_SERVER_SANDBOX); off: every session runs on the host\n"
             "  --fallback refuse|none B5: without a native sandbox on this host a launch that does not ask for\n"
             "                         backend none is refused (refuse, the default); none runs it on the host\n"
             "  --egressd PATH, --init PATH   the helper programs (else CCSB_EGRESSD, CCSB_INIT; else next to\n"
             "                         ccsbd, then ../libexec/ccsb from its directory)\n"
             "  --no-path-toolchains   E4: do not make the toolchains on PATH inside HOME visible\n"
             "  --strict               S1: refuse every launch whose spec has a key that is no spec field (by\n"
             "                         default it is ignored and named in ready's \"warnings\"; a launch may ask\n"
             "                         for the same with \"strict\":true)\n"
             "The protocol (JSON lines, one request per line): docs/ccsbd-protocol.md\n",
             to);
}

struct options {
  std::string listen;
  std::optional<std::string> sandbox, egressd, init;
  bool path_toolchains{true};
  bool fallback_none{false};
  bool strict{false};
};

options parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) refuse(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--listen") o.listen = value();
    else if (a == "--sandbox") o.sandbox = value();
    else if (a == "--egressd") o.egressd = value();
    else if (a == "--init") o.init = value();
    else if (a == "--no-path-toolchains") o.path_toolchains = false;
    else if (a == "--strict") o.strict = true;
    else if (a == "--fallback") {
      const std::string v = value();
      if (v == "none") o.fallback_none = true;
      else if (v != "refuse") refuse("--fallback: expected refuse or none, got \"" + v + "\"");
    }
    else {
      usage(stderr);
      refuse("unknown option \"" + a + "\"");
    }
  }
  constexpr std::string_view kUnix = "unix:";
  if (o.listen.rfind(kUnix, 0) != 0) {
    usage(stderr);
    refuse(o.listen.empty() ? "--listen unix:PATH is required" : "--listen: expected unix:PATH, got \"" + o.listen + "\"");
  }
  o.listen.erase(0, kUnix.size());
  return o;
}

// A refused peer: one error line (field "peer"), then closed.
void turn_away(int fd, const ccsb::error& why) {
  const std::string line = ccsb::protocol::daemon::error_line({}, why) + "\n";
  (void)::send(fd, line.data(), line.size(), ccsb::sys::this_platform::send_flags() | MSG_DONTWAIT);
}

} // namespace

int main(int argc, char** argv) {
  ccsb::launch::hold_standard_fds();
  options opt = parse_options(argc, argv);
  const char* env_switch = std::getenv("CC_SERVER_SANDBOX");
  auto sw = ccsb::parse_sandbox_switch(opt.sandbox ? *opt.sandbox : env_switch ? env_switch : "on",
                                       opt.sandbox ? "--sandbox" : "CC_SERVER_SANDBOX");
  if (!sw) refuse(sw.err().what());

  ::signal(SIGPIPE, SIG_IGN);
  ccsb::launch::reactor reactor;
  bool stopping = false;
  auto watched = reactor.watch_signals({SIGTERM, SIGINT, SIGHUP}, [&](int sig) {
    std::fprintf(stderr, "ccsbd: %s: destroying every session\n", ::strsignal(sig));
    stopping = true;
  });
  if (!watched) refuse(watched.err().what());
#if CCSB_LAUNCH_MACOS
  // The Seatbelt driver changes no credentials (L1): not as root.
  if (::geteuid() == 0) refuse("the macOS backend does not run sandboxes as root (L1); run ccsbd as the user");
#endif

  ccsbd::server_config cfg;
  cfg.sw = *sw;
#if CCSB_LAUNCH_MACOS
  cfg.native = ccsb::probe_native(ccsb::launch::macos::seatbelt_probe_facts());
#else
  cfg.native = ccsb::probe_native(ccsb::launch::gather_probe_facts(ccsb::launch::unshare_check::run));
#endif
  cfg.startup_line = ccsb::startup_line(*sw, cfg.native);
  std::fprintf(stderr, "%s\n", cfg.startup_line.c_str());
  cfg.facts = ccsb::launch::gather_host_facts();
#if !CCSB_LAUNCH_MACOS
  ccsb::launch::sweep_stale_vm_cgroups(); // X4: QEMU cgroups of a SIGKILLed daemon (or ccsb-run) before it
#endif
  cfg.egressd_path = ccsb::launch::helper_path(opt.egressd, "CCSB_EGRESSD", "egressd");
  cfg.init_path = ccsb::launch::helper_path(opt.init, "CCSB_INIT", "ccsb-init");
  cfg.compile.path_toolchains = opt.path_toolchains;
  cfg.fallback_none = opt.fallback_none;
  cfg.strict = opt.strict;

  auto l = ccsbd::open_listener(opt.listen);
  if (!l) refuse(l.err().what());
  cfg.socket_dir = l->dir;
  cfg.socket_chain = l->dir_chain.ids;
#if !CCSB_LAUNCH_MACOS
  // Every sandbox sees the system tree and /etc (render/bwrap/render.hpp): a socket
  // there is reachable from every session.
  for (std::string_view top : ccsb::kSystemTop) {
    const auto c = ccsbd::chain_of(std::string(top));
    if (c.exists && ccsb::protocol::daemon::bind_exposure(cfg.socket_chain, c.ids, true) != ccsb::protocol::daemon::exposure::none) {
      l->unlink_own();
      refuse("--listen: the socket's directory " + l->dir + " is visible in every sandbox (under " + std::string(top) +
             "); put it where no session can see it (S8)");
    }
  }
  if (const auto etc = ccsbd::chain_of("/etc");
      etc.exists && ccsb::protocol::daemon::bind_exposure(cfg.socket_chain, etc.ids, true) != ccsb::protocol::daemon::exposure::none) {
    l->unlink_own();
    refuse("--listen: the socket's directory " + l->dir + " is visible in every sandbox (under /etc); put it where no "
           "session can see it (S8)");
  }
  auto own_ns = ccsbd::read_own_namespaces();
  if (!own_ns) {
    l->unlink_own();
    refuse(own_ns.err().what());
  }
#endif

  ccsbd::server srv(reactor, std::move(cfg));
  // Accept back-off: out of descriptors (EMFILE, ENFILE), the listener rests
  // 100 ms instead of spinning on a connection it cannot take.
  ccsb::launch::reactor::token accept_token = 0;
  std::function<void(short)> on_accept = [&](short) {
    for (;;) {
      ccsb::launch::unique_fd c(ccsb::sys::this_platform::accept_cloexec_nonblock(l->fd.get()));
      if (!c) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          std::fprintf(stderr, "ccsbd: accept: %s; pausing 100 ms\n", std::strerror(errno));
          reactor.unwatch(accept_token);
          reactor.after(std::chrono::milliseconds(100),
                        [&] { accept_token = reactor.watch(l->fd.get(), on_accept); });
        }
        return;
      }
      const auto peer = ccsbd::peer_uid(c.get());
      if (!peer || *peer != ::geteuid()) {
        std::fprintf(stderr, "ccsbd: refused a peer of uid %ld\n", peer ? static_cast<long>(*peer) : -1L);
        turn_away(c.get(), ccsb::make_error(ccsb::errc::invalid_argument, "peer",
                                            "connections are accepted from uid " + std::to_string(::geteuid()) +
                                                " only; this peer is uid " +
                                                (peer ? std::to_string(*peer) : std::string("unknown")) + " (S8)"));
        continue;
      }
#if !CCSB_LAUNCH_MACOS
      if (auto inside = ccsbd::check_peer_outside_sandbox(c.get(), *own_ns); !inside) {
        std::fprintf(stderr, "ccsbd: refused a peer: %s\n", inside.err().what().c_str());
        turn_away(c.get(), inside.err());
        continue;
      }
#endif
      srv.accept(std::move(c));
    }
  };
  accept_token = reactor.watch(l->fd.get(), on_accept);
  std::fprintf(stderr, "ccsbd: listening on unix:%s (protocol %d)\n", l->path.c_str(),
               ccsb::protocol::daemon::kProtocolVersion);

  while (!stopping) {
    if (auto r = reactor.run_once(); !r) {
      srv.stop();
      l->unlink_own();
      refuse(r.err().what());
    }
  }
  srv.stop();
  l->unlink_own();
  std::fprintf(stderr, "ccsbd: stopped\n");
  return 0;
}
