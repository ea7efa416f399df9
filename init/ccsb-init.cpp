// ccsb-init — the first program of ours inside the bubblewrap sandbox (L3),
// the session's supervisor and exec server (S7).
//
//   ccsb-init --exec-channel FD [--proxy-channel FD --proxy-listen ROLE=IPv4:PORT...]
//             [--landlock on --landlock-rx PATH... --landlock-rw PATH... --landlock-proc PATH...
//              [--landlock-tcp restrict --landlock-connect PORT...]]
//             [--broker-root PATH... --broker-name GLOB... --broker-deny PATH... --broker-git on|off --broker-unix on|off
//              --broker-net host]
//             [--options-fd FD]
//   ccsb-init --ssh-proxy IPv4:PORT HOST PORT      (ssh's ProxyCommand, proxy/ssh_proxy.hpp)
//
// A checklist (nsjail's containProc habit); each step says what failed, with
// errno, and the run stops there (init-failed on the exec channel, exit 125):
//   1. parse the options (no shell: argv, and NUL-separated options from
//      --options-fd FD where the launcher puts those that name host paths);
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
// --as-pid-1, render_bwrap.hpp). The kernel delivers it no signal from
// inside the namespace that it has no handler for (it installs none), so a
// command can neither stop nor kill it; orphans are reparented to it and
// reaped with the commands (exec/server.cpp); when it exits, the kernel
// kills everything left in the namespace.
#include "ccsb/broker/decide.hpp"
#include "ccsb/broker/net_decide.hpp"
#include "ccsb/confine/landlock.hpp"
#include "confine/apply_landlock.hpp"
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

struct options {
  int channel{-1}; // the exec channel
  int proxy_channel{-1};
  std::vector<ccsb::init::proxy_listener> listeners;
  bool broker{false};
  ccsb::broker::rule_set rules = ccsb::broker::rule_set::none();
  bool landlock{false};
  ccsb::confine::landlock_rules landlock_rules;
};

[[noreturn]] void fail(const options& o, const std::string& what, int code = 125) {
  std::fprintf(stderr, "ccsb-init: %s\n", what.c_str());
  if (o.channel >= 0) (void)ccsb::init::send_to_launcher(o.channel, ccsb::protocol::encode(ccsb::protocol::init_failed{what}));
  std::_Exit(code);
}

using ccsb::init::errno_text;

bool parse_fd(const char* v, int& out) {
  char* end = nullptr;
  long fd = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || fd < 0 || fd > 65535) return false;
  out = static_cast<int>(fd);
  return true;
}

// `--options-fd N` anywhere before "--": NUL-separated options read from
// descriptor N (a memfd the launcher wrote) replace it, so options that name
// host paths (the Landlock ruleset) stay out of every argv and out of the
// sandbox's /proc/1/cmdline. Bounded: at most kMaxOptionBytes.
constexpr std::size_t kMaxOptionBytes = 4U << 20;

bool expand_options_fd(std::vector<std::string>& args, std::string& err) {
  for (std::size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] != "--options-fd") continue;
    int fd = -1;
    if (i + 1 >= args.size() || !parse_fd(args[i + 1].c_str(), fd)) {
      err = "--options-fd: not a descriptor number";
      return false;
    }
    std::string blob;
    char buf[65536];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno_text("read (--options-fd " + args[i + 1] + ")");
        return false;
      }
      if (n == 0) break;
      blob.append(buf, static_cast<std::size_t>(n));
      if (blob.size() > kMaxOptionBytes) {
        err = "--options-fd: more than " + std::to_string(kMaxOptionBytes) + " bytes";
        return false;
      }
    }
    close(fd);
    std::vector<std::string> extra;
    std::size_t start = 0;
    while (start < blob.size()) {
      auto nul = blob.find('\0', start);
      if (nul == std::string::npos) {
        err = "--options-fd: the last option does not end with a NUL";
        return false;
      }
      extra.emplace_back(blob, start, nul - start);
      start = nul + 1;
    }
    for (const auto& e : extra)
      if (e == "--" || e == "--options-fd") {
        err = "--options-fd: \"" + e + "\" is not allowed inside";
        return false;
      }
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), extra.begin(), extra.end());
    i = i + extra.size() - 1; // the loop's ++i moves past what was spliced in
  }
  return true;
}

bool parse(const std::vector<std::string>& args, options& o, std::string& err) {
  const std::size_t argc = args.size();
  std::size_t i = 1;
  for (; i < argc; ++i) {
    const std::string& a = args[i];
    auto need = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        err = std::string(name) + " needs a value";
        return nullptr;
      }
      return args[++i].c_str();
    };
    if (a == "--exec-channel") {
      const char* v = need("--exec-channel");
      if (!v) return false;
      if (!parse_fd(v, o.channel)) {
        err = "--exec-channel: not a descriptor number";
        return false;
      }
    } else if (a == "--proxy-channel") {
      const char* v = need("--proxy-channel");
      if (!v) return false;
      if (!parse_fd(v, o.proxy_channel)) {
        err = "--proxy-channel: not a descriptor number";
        return false;
      }
    } else if (a == "--proxy-listen") {
      const char* v = need("--proxy-listen");
      if (!v) return false;
      auto l = ccsb::init::parse_proxy_listen(v);
      if (!l) {
        err = l.err().what();
        return false;
      }
      o.listeners.push_back(*l);
    } else if (ccsb::confine::is_landlock_option(a)) {
      const char* v = need(a.c_str());
      if (!v) return false;
      if (auto r = ccsb::confine::parse_init_arg(o.landlock_rules, a, v); !r) {
        err = r.err().what();
        return false;
      }
      o.landlock = true;
    } else if (ccsb::broker::is_broker_option(a)) {
      const char* v = need(a.c_str());
      if (!v) return false;
      if (auto r = ccsb::broker::parse_arg(o.rules, a, v); !r) {
        err = r.err().what();
        return false;
      }
      o.broker = true;
    } else {
      err = "unknown option \"" + a + "\"";
      return false;
    }
  }
  if (o.channel < 0) {
    err = "--exec-channel is required";
    return false;
  }
  if ((o.proxy_channel >= 0) != !o.listeners.empty()) {
    err = "--proxy-channel and --proxy-listen go together";
    return false;
  }
  return true;
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
  options o;
  std::string err;
  // 1. parse
  std::vector<std::string> args(argv, argv + argc);
  if (!expand_options_fd(args, err) || !parse(args, o, err)) fail(o, err, 125);
  if (fcntl(o.channel, F_SETFD, FD_CLOEXEC) != 0)
    fail(o, errno_text("fcntl(exec channel " + std::to_string(o.channel) + ", F_SETFD, FD_CLOEXEC)"));

  // 2. proxy listeners, sent to egressd (its answer is awaited after step 4)
  if (o.proxy_channel >= 0) {
    if (fcntl(o.proxy_channel, F_SETFD, FD_CLOEXEC) != 0) fail(o, errno_text("fcntl(proxy channel, F_SETFD, FD_CLOEXEC)"));
    if (auto why = ccsb::init::send_listeners(o.listeners, o.proxy_channel); !why.empty()) fail(o, why);
  }

  // 3. descriptors
  if (!ccsb::sys::mark_cloexec_from(3)) fail(o, errno_text("close_range(3, ~0, CLOSE_RANGE_CLOEXEC) and /proc/self/fd"));

  // 4. Landlock
  if (o.landlock) {
    auto applied = ccsb::init::apply_landlock(o.landlock_rules);
    if (!applied) fail(o, applied.err().what());
    if (!ccsb::init::send_to_launcher(o.channel, ccsb::protocol::encode(ccsb::protocol::landlock_applied{*applied})))
      std::_Exit(125);
  }

  // 2b. egressd has the listeners (or the run stops here)
  if (o.proxy_channel >= 0)
    if (auto why = ccsb::init::await_listeners_taken(o.proxy_channel, kChannelWait); !why.empty()) fail(o, why);

  // 5. serve (T2: with the host's network, the broker lets DNS reach the
  // nameservers of this sandbox's /etc/resolv.conf, the host's file bound
  // read-only, read here before any command runs)
  if (o.rules.host_net) o.rules.dns = ccsb::broker::parse_resolv_conf(read_small_file("/etc/resolv.conf"));
  ccsb::init::server_options so;
  so.channel = o.channel;
  so.broker = o.broker;
  so.rules = std::move(o.rules);
  ccsb::init::serve(std::move(so));
}
