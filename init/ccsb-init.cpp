// ccsb-init — the first program of ours inside the bubblewrap sandbox (L3),
// the session's supervisor and exec server (S7).
//
//   ccsb-init OPTIONS | --options-fd FD    (ccsb/protocol/init_args.hpp: the
//                                          options, their writer and parser)
//   ccsb-init --ssh-proxy IPv4:PORT HOST PORT      (ssh's ProxyCommand, proxy/ssh_proxy.hpp)
//
// A checklist (nsjail's containProc habit); each step says what failed, with
// errno, and the run stops there (init-failed on the exec channel, exit 125):
//   1. parse the options strictly (protocol/init_args.hpp; no shell: argv,
//      or NUL-separated options from --options-fd FD, where the launcher
//      puts them: the Landlock ruleset names host paths);
//   2. proxied sessions: create the proxy listeners (127.0.0.1:3128 HTTP,
//      :1080 SOCKS5) in the sandbox's network namespace and send them to the
//      session's egressd over the proxy channel, which egressd then accepts
//      on directly: one relay hop, no bridge process (proxy/listeners.hpp,
//      ccsb/protocol/proxy_channel.hpp). egressd answers once it serves
//      them; that answer is awaited after step 4 (egressd takes them while
//      Landlock is set up), and the channel is closed before any command runs;
//   3. mark every descriptor above stderr close-on-exec (close_range, then
//      /proc/self/fd), so no command inherits one by accident;
//   4. with --landlock (X2): apply the policy's Landlock ruleset to this
//      process (confine/apply_landlock.hpp), so every command, and the broker that
//      acts for it, run in one Landlock domain; report what applied
//      ("landlock" message; a kernel without Landlock says so and the session
//      goes on);
//   5. serve exec requests (exec/server.hpp): report `ready`, start each
//      command the launcher asks for (with creation rules, any --broker-*
//      option, under the X1 broker; with a terminal when asked, T4), report
//      its outcome, until the launcher closes the channel.
// Every message on the exec channel is a ccsb/protocol/supervisor.hpp
// message.
//
// PID 1: ccsb-init is the init of the sandbox's PID namespace (bwrap
// --as-pid-1, render/bwrap/render.hpp). The kernel delivers it no signal from
// inside the namespace that it has no handler for (it installs none), so a
// command can neither stop nor kill it; orphans are reparented to it and
// reaped with the commands (exec/server.cpp); when it exits, the kernel
// kills everything left in the namespace.
#include "ccsb/broker/decide.hpp"
#include "ccsb/broker/net_decide.hpp"
#include "ccsb/confine/landlock.hpp"
#include "confine/apply_landlock.hpp"
#include "ccsb/protocol/init_args.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "ccsb/sys/fd.hpp"
#include "io.hpp"
#include "proxy/listeners.hpp"
#include "exec/server.hpp"
#include "proxy/ssh_proxy.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// egressd is started while bwrap builds the sandbox and answers in well
// under a millisecond once it runs; this bound only turns a wedged egressd
// into a clear failure.
constexpr std::chrono::milliseconds kChannelWait{10000};

[[noreturn]] void fail(int channel, const std::string& what, int code = 125) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  if (channel >= 0) (void)ccsb::init::send_to_launcher(channel, ccsb::protocol::encode(ccsb::protocol::init_failed{what}));
  std::_Exit(code);
}

using ccsb::init::errno_text;

// The options of `--options-fd FD`: the descriptor's contents (a memfd the
// launcher wrote, bounded), split at their NULs (ccsb/protocol/init_args.hpp).
ccsb::result<std::vector<std::string>> read_options_fd(int fd) {
  std::string blob;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ccsb::make_error(ccsb::errc::io_error, "--options-fd", errno_text("read (--options-fd " + std::to_string(fd) + ")"));
    if (n == 0) break;
    blob.append(buf, static_cast<std::size_t>(n));
    if (blob.size() > ccsb::protocol::kMaxInitOptionBytes)
      return ccsb::make_error(ccsb::errc::invalid_argument, "--options-fd",
                              "more than " + std::to_string(ccsb::protocol::kMaxInitOptionBytes) + " bytes");
  }
  close(fd);
  return ccsb::protocol::split_options_blob(blob);
}

// argv -> the typed options: inline, or from the --options-fd descriptor.
ccsb::result<ccsb::protocol::init_args> parse_command_line(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto fd = ccsb::protocol::options_fd_of(args);
  if (!fd) return std::move(fd).err();
  if (*fd) {
    auto read = read_options_fd(**fd);
    if (!read) return std::move(read).err();
    args = std::move(*read);
  }
  return ccsb::protocol::parse_init_args(args);
}

// The first 64 KiB of a file ("" when it cannot be read).
std::string read_small_file(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while (out.size() < (64U << 10) && (n = read(fd, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--ssh-proxy") == 0) {
    if (argc != 5) {
      std::fprintf(stderr, "usage: ccsb-init --ssh-proxy IPv4:PORT HOST PORT\n");
      return 2;
    }
    return ccsb::init::run_ssh_proxy(argv[2], argv[3], argv[4]);
  }
  // 1. parse
  auto parsed = parse_command_line(argc, argv);
  if (!parsed) fail(-1, parsed.err().what(), 125);
  ccsb::protocol::init_args& o = *parsed;
  const int channel = o.exec_channel;
  if (fcntl(channel, F_SETFD, FD_CLOEXEC) != 0)
    fail(channel, errno_text("fcntl(exec channel " + std::to_string(channel) + ", F_SETFD, FD_CLOEXEC)"));

  // 2. proxy listeners, sent to egressd (its answer is awaited after step 4)
  if (o.proxy_channel) {
    if (fcntl(*o.proxy_channel, F_SETFD, FD_CLOEXEC) != 0) fail(channel, errno_text("fcntl(proxy channel, F_SETFD, FD_CLOEXEC)"));
    if (auto why = ccsb::init::send_listeners(o.listeners, *o.proxy_channel); !why.empty()) fail(channel, why);
  }

  // 3. descriptors
  if (!ccsb::sys::mark_cloexec_from(3)) fail(channel, errno_text("close_range(3, ~0, CLOSE_RANGE_CLOEXEC) and /proc/self/fd"));

  // 4. Landlock
  if (o.landlock) {
    auto applied = ccsb::init::apply_landlock(*o.landlock);
    if (!applied) fail(channel, applied.err().what());
    if (!ccsb::init::send_to_launcher(channel, ccsb::protocol::encode(ccsb::protocol::landlock_applied{*applied})))
      std::_Exit(125);
  }

  // 2b. egressd has the listeners (or the run stops here)
  if (o.proxy_channel)
    if (auto why = ccsb::init::await_listeners_taken(*o.proxy_channel, kChannelWait); !why.empty()) fail(channel, why);

  // 5. serve (T2: with the host's network, the broker lets DNS reach the
  // nameservers of this sandbox's /etc/resolv.conf, the host's file bound
  // read-only, read here before any command runs)
  ccsb::init::server_options so;
  so.channel = channel;
  so.broker = o.broker.has_value();
  so.rules = o.broker ? std::move(*o.broker) : ccsb::broker::rule_set::none();
  if (so.rules.host_net) so.rules.dns = ccsb::broker::parse_resolv_conf(read_small_file("/etc/resolv.conf"));
  ccsb::init::serve(std::move(so));
}
