// ccsb/protocol/guest.hpp — the messages between the launcher and the guest
// agent inside a microVM (X4, docs/microvm.md), both directions. One typed
// header for both ends: encode() on one side, decode_*() on the other. Pure:
// no I/O.
//
// Transport: a virtio-serial port (named ccsb.ctl) whose host end is one end
// of a socketpair QEMU inherits; a byte stream, so each message is a frame:
// its length as 4 bytes big-endian, then that many bytes (1..kMaxFrame).
// frame_reader cuts a stream into frames and refuses a frame that is empty
// or too long (the stream cannot be resynchronised after that: the session
// ends). Inside a frame, fields are separated by one TAB and escaped as in
// supervisor.hpp (`\t` `\n` `\\`, `\xHH` for other control bytes), so
// nothing the command chooses (an argument, a path, its output) can forge a
// field or a frame.
//
// Agent -> launcher (agent_message):
//   hello<TAB>VERSION<TAB>KERNEL        the agent runs; VERSION is kGuestProtocol,
//                                       KERNEL the guest's uname -r
//   ready                               the shares are mounted: exec requests are served
//   setup-failed<TAB>REASON             a share could not be mounted (the VM powers off)
//   started<TAB>ID<TAB>PID              exec ID runs as guest PID
//   exec-failed<TAB>ID<TAB>CODE<TAB>REASON   126 (not executable), 127 (not found), 125
//   output<TAB>ID<TAB>1|2<TAB>BYTES     what exec ID wrote to stdout (1) or stderr (2)
//   exited<TAB>ID<TAB>exit|signal<TAB>N exec ID ended; sent after all its output
//   violation<TAB>ID<TAB>ACTION<TAB>TARGET<TAB>REASON
//                                       the guest's supervisor (ccsb-init) denied a call
//                                       of exec ID (X1, P7), as supervisor.hpp's
//   landlock<TAB>SUMMARY                what of the Landlock layer applied in the guest
//                                       ("abi N: ..." or "unavailable: REASON")
//   stdin-ack<TAB>ID                    one stdin chunk of exec ID is written to its
//                                       stdin or terminal (the host sends at most
//                                       kStdinWindow unacknowledged chunks)
//
// Launcher -> agent (host_message):
//   share<TAB>TAG<TAB>GUEST-PATH<TAB>ro|rw   mount the 9p export TAG at GUEST-PATH
//   link<TAB>GUEST-PATH<TAB>TARGET            a symlink in the guest's root (/bin -> usr/bin)
//   protect<TAB>GUEST-PATH                    P5: made read-only inside the guest (a read-only
//                                             bind of itself) before any command runs
//   user<TAB>UID<TAB>GID                      the unprivileged guest identity commands run as
//                                             (never 0)
//   supervise<TAB>OPTION<TAB>VALUE...         the options of the guest's ccsb-init (init_args.hpp,
//                                             without the channels: the agent adds its exec
//                                             channel; no proxy options): the X1 broker's and
//                                             the Landlock layer's rules; once, before start
//   start                                     the set-up is complete: mount, start ccsb-init,
//                                             then `ready`
//   exec<TAB>ID<TAB>WORKDIR<TAB>TERMINAL<TAB>ARGC<TAB>ARG...<TAB>ENVC<TAB>NAME=VALUE...
//                                             start a command; TERMINAL is "-" (pipes) or
//                                             ROWS:COLS (a pseudo-terminal in the guest); ENV is
//                                             its complete environment
//   stdin<TAB>ID<TAB>BYTES                    input for exec ID (its stdin or its terminal)
//   stdin-eof<TAB>ID                          no more input: its stdin pipe is closed (a
//                                             terminal stays open)
//   resize<TAB>ID<TAB>ROWS:COLS               exec ID's terminal has a new size
//   kill<TAB>ID<TAB>SIGNAL                    signal exec ID's process group
//   poweroff                                  end every command and power the VM off
//
// The parsers are strict: an unknown kind, a missing or extra field, an
// empty field where one is not allowed, a bad escape, a number out of range,
// a relative guest path or one with `..` is an error naming what was wrong.
#pragma once

#include "ccsb/paths.hpp"
#include "ccsb/protocol/init_args.hpp"
#include "ccsb/protocol/supervisor.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ccsb::protocol::guest {

inline constexpr std::uint32_t kGuestProtocol = 3;
inline constexpr std::size_t kMaxFrame = 256 * 1024;
inline constexpr std::size_t kMaxOutputChunk = 32 * 1024; // raw bytes per output message
inline constexpr std::size_t kStdinWindow = 4; // unacknowledged stdin chunks per exec
inline constexpr std::string_view kControlPort = "ccsb.ctl";
// The agent's descriptor of the supervisor's exec channel in ccsb-init.
inline constexpr int kSupervisorChannelFd = 3;

// --- agent -> launcher ---
struct hello {
  std::uint32_t version{0};
  std::string kernel;
  friend bool operator==(const hello&, const hello&) = default;
};
struct ready {
  friend bool operator==(const ready&, const ready&) = default;
};
struct setup_failed {
  std::string reason;
  friend bool operator==(const setup_failed&, const setup_failed&) = default;
};
struct started {
  exec_id id{0};
  std::int64_t pid{0};
  friend bool operator==(const started&, const started&) = default;
};
struct exec_failed {
  exec_id id{0};
  int code{0};
  std::string reason;
  friend bool operator==(const exec_failed&, const exec_failed&) = default;
};
struct output {
  exec_id id{0};
  int stream{1};
  std::string bytes;
  friend bool operator==(const output&, const output&) = default;
};
struct exited {
  exec_id id{0};
  bool signalled{false};
  int value{0};
  friend bool operator==(const exited&, const exited&) = default;
};
using guest_violation = protocol::violation;
using guest_landlock = protocol::landlock_applied;
struct stdin_ack {
  exec_id id{0};
  friend bool operator==(const stdin_ack&, const stdin_ack&) = default;
};
using agent_message = std::variant<hello, ready, setup_failed, started, exec_failed, output, exited, guest_violation,
                                   guest_landlock, stdin_ack>;

// --- launcher -> agent ---
struct share {
  std::string tag;
  std::string guest_path;
  bool writable{false};
  friend bool operator==(const share&, const share&) = default;
};
struct link {
  std::string guest_path;
  std::string target;
  friend bool operator==(const link&, const link&) = default;
};
struct protect {
  std::string guest_path;
  friend bool operator==(const protect&, const protect&) = default;
};
struct user {
  std::uint32_t uid{0};
  std::uint32_t gid{0};
  friend bool operator==(const user&, const user&) = default;
};
struct start {
  friend bool operator==(const start&, const start&) = default;
};
// ccsb-init's options in the guest; args.exec_channel is kSupervisorChannelFd.
struct supervise {
  protocol::init_args args;
  friend bool operator==(const supervise&, const supervise&) = default;
};
struct exec {
  exec_id id{0};
  std::string workdir;
  std::optional<terminal_size> terminal;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  friend bool operator==(const exec&, const exec&) = default;
};
struct kill {
  exec_id id{0};
  int signal{0};
  friend bool operator==(const kill&, const kill&) = default;
};
struct poweroff {
  friend bool operator==(const poweroff&, const poweroff&) = default;
};
struct input {
  exec_id id{0};
  std::string bytes;
  friend bool operator==(const input&, const input&) = default;
};
struct input_eof {
  exec_id id{0};
  friend bool operator==(const input_eof&, const input_eof&) = default;
};
struct resize {
  exec_id id{0};
  terminal_size size;
  friend bool operator==(const resize&, const resize&) = default;
};
using host_message =
    std::variant<share, link, protect, user, supervise, start, exec, input, input_eof, resize, kill, poweroff>;

namespace detail {
using protocol::detail::overload;

inline error bad(std::string what) { return error(errc::invalid_argument, "guest", std::move(what)); }

inline std::string frame(const std::string& payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out;
  out.reserve(payload.size() + 4);
  out += static_cast<char>((n >> 24) & 0xff);
  out += static_cast<char>((n >> 16) & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  out += static_cast<char>(n & 0xff);
  out += payload;
  return out;
}

// Absolute and normal (paths.hpp, the broker's check).
inline bool guest_path_ok(std::string_view p) { return is_normal_absolute(p); }

inline bool tag_ok(std::string_view t) {
  if (t.empty() || t.size() > 31) return false; // virtio-9p's mount_tag limit
  for (char c : t)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  return true;
}

// Unescaped fields; `allow_empty[i]` says whether field i may be empty.
inline result<std::vector<std::string>> fields_of(std::string_view m) {
  std::vector<std::string> out;
  for (auto f : protocol::detail::split_tabs(m)) {
    auto u = protocol::unescape(f);
    if (!u) return bad(std::string(u.err().message));
    out.push_back(std::move(*u));
  }
  return out;
}

inline result<exec_id> id_of(const std::string& s) {
  auto v = protocol::detail::number(s, 1, kMaxExecId, "id");
  if (!v) return bad(std::string(v.err().message));
  return *v;
}

inline std::string size_text(const terminal_size& t) {
  return std::to_string(t.rows) + ":" + std::to_string(t.cols);
}

// ccsb-init's options as `supervise` carries them: init_args.hpp's writer
// without the exec channel.
inline std::vector<std::string> supervise_options(const protocol::init_args& a) {
  auto o = protocol::to_argv(a);
  o.erase(o.begin(), o.begin() + 2);
  return o;
}

// The options back, through ccsb-init's own strict parser; the proxy's are
// refused (the guest has no egressd), the exec channel is the agent's.
inline result<protocol::init_args> parse_supervise(const std::vector<std::string>& f) {
  std::vector<std::string> args{"--exec-channel", std::to_string(kSupervisorChannelFd)};
  args.insert(args.end(), f.begin() + 1, f.end());
  for (std::size_t i = 2; i < args.size(); i += 2)
    if (args[i] == "--exec-channel" || args[i] == "--options-fd" || args[i].rfind("--proxy-", 0) == 0)
      return bad("supervise: " + args[i].substr(0, 32) + " is the agent's or not for the guest");
  auto a = protocol::parse_init_args(args);
  if (!a) return bad("supervise: " + a.err().what());
  return std::move(*a);
}

inline result<void> need(const std::vector<std::string>& f, std::size_t n) {
  if (f.size() != n)
    return bad(f[0] + ": expected " + std::to_string(n - 1) + " fields, got " + std::to_string(f.size() - 1));
  return ok();
}

// `exec` (decode_host), its fields unescaped.
inline result<host_message> decode_exec(const std::vector<std::string>& f) {
  if (f.size() < 7) return bad("exec: too few fields");
  exec e;
  auto id = id_of(f[1]);
  if (!id) return std::move(id).err();
  e.id = *id;
  if (!guest_path_ok(f[2])) return bad("exec: workdir must be absolute and normal");
  e.workdir = f[2];
  if (f[3] != "-") {
    auto t = protocol::detail::parse_terminal(f[3]);
    if (!t) return bad(std::string(t.err().message));
    e.terminal = *t;
  }
  auto argc = protocol::detail::number(f[4], 1, kMaxArgs, "argc");
  if (!argc) return bad(std::string(argc.err().message));
  std::size_t i = 5;
  if (f.size() < i + *argc + 1) return bad("exec: fewer arguments than argc");
  for (std::size_t a = 0; a < *argc; ++a) e.argv.push_back(f[i++]);
  if (e.argv[0].empty()) return bad("exec: empty program");
  if (f[i] == "0") {
    ++i;
  } else {
    auto envc = protocol::detail::number(f[i++], 1, kMaxEnv, "envc");
    if (!envc) return bad(std::string(envc.err().message));
    if (f.size() != i + *envc) return bad("exec: environment count does not match");
    for (std::size_t v = 0; v < *envc; ++v) {
      if (!protocol::detail::env_name_ok(f[i])) return bad("exec: bad environment entry");
      e.env.push_back(f[i++]);
    }
  }
  if (i != f.size()) return bad("exec: extra fields");
  return host_message(std::move(e));
}

} // namespace detail

inline std::string encode(const agent_message& m) {
  using protocol::escape;
  std::string p = std::visit(
      detail::overload{
          [](const hello& h) { return "hello\t" + std::to_string(h.version) + "\t" + escape(h.kernel); },
          [](const ready&) { return std::string("ready"); },
          [](const setup_failed& s) { return "setup-failed\t" + escape(s.reason); },
          [](const started& s) { return "started\t" + std::to_string(s.id) + "\t" + std::to_string(s.pid); },
          [](const exec_failed& e) {
            return "exec-failed\t" + std::to_string(e.id) + "\t" + std::to_string(e.code) + "\t" + escape(e.reason);
          },
          [](const output& o) {
            return "output\t" + std::to_string(o.id) + "\t" + std::to_string(o.stream) + "\t" + escape(o.bytes);
          },
          [](const exited& e) {
            return "exited\t" + std::to_string(e.id) + (e.signalled ? "\tsignal\t" : "\texit\t") +
                   std::to_string(e.value);
          },
          [](const guest_violation& v) { return protocol::encode(protocol::supervisor_message(v)); },
          [](const guest_landlock& l) { return protocol::encode(protocol::supervisor_message(l)); },
          [](const stdin_ack& a) { return "stdin-ack\t" + std::to_string(a.id); },
      },
      m);
  return detail::frame(p);
}

inline std::string encode(const host_message& m) {
  using protocol::escape;
  std::string p = std::visit(
      detail::overload{
          [](const share& s) {
            return "share\t" + escape(s.tag) + "\t" + escape(s.guest_path) + (s.writable ? "\trw" : "\tro");
          },
          [](const link& l) { return "link\t" + escape(l.guest_path) + "\t" + escape(l.target); },
          [](const protect& p) { return "protect\t" + escape(p.guest_path); },
          [](const user& u) { return "user\t" + std::to_string(u.uid) + "\t" + std::to_string(u.gid); },
          [](const supervise& v) {
            std::string s = "supervise";
            for (const auto& a : detail::supervise_options(v.args)) s += "\t" + escape(a);
            return s;
          },
          [](const start&) { return std::string("start"); },
          [](const exec& e) {
            std::string s = "exec\t" + std::to_string(e.id) + "\t" + escape(e.workdir) + "\t" +
                            (e.terminal ? detail::size_text(*e.terminal) : std::string("-")) + "\t" +
                            std::to_string(e.argv.size());
            for (const auto& a : e.argv) s += "\t" + escape(a);
            s += "\t" + std::to_string(e.env.size());
            for (const auto& v : e.env) s += "\t" + escape(v);
            return s;
          },
          [](const input& i) { return "stdin\t" + std::to_string(i.id) + "\t" + escape(i.bytes); },
          [](const input_eof& i) { return "stdin-eof\t" + std::to_string(i.id); },
          [](const resize& r) { return "resize\t" + std::to_string(r.id) + "\t" + detail::size_text(r.size); },
          [](const kill& k) { return "kill\t" + std::to_string(k.id) + "\t" + std::to_string(k.signal); },
          [](const poweroff&) { return std::string("poweroff"); },
      },
      m);
  return detail::frame(p);
}

// One frame's payload (the 4 length bytes already removed).
inline result<agent_message> decode_agent(std::string_view m) {
  auto fr = detail::fields_of(m);
  if (!fr) return std::move(fr).err();
  auto& f = *fr;
  const std::string& k = f[0];
  if (k == "hello") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto v = protocol::detail::number(f[1], 1, 1u << 20, "version");
    if (!v) return detail::bad(std::string(v.err().message));
    if (f[2].empty()) return detail::bad("hello: empty kernel");
    return agent_message(hello{static_cast<std::uint32_t>(*v), f[2]});
  }
  if (k == "ready") {
    if (auto n = detail::need(f, 1); !n) return std::move(n).err();
    return agent_message(ready{});
  }
  if (k == "setup-failed") {
    if (auto n = detail::need(f, 2); !n) return std::move(n).err();
    if (f[1].empty()) return detail::bad("setup-failed: empty reason");
    return agent_message(setup_failed{f[1]});
  }
  if (k == "started") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    auto pid = protocol::detail::number(f[2], 1, (1u << 22), "pid");
    if (!pid) return detail::bad(std::string(pid.err().message));
    return agent_message(started{*id, static_cast<std::int64_t>(*pid)});
  }
  if (k == "exec-failed") {
    if (auto n = detail::need(f, 4); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    if (f[2] != "125" && f[2] != "126" && f[2] != "127") return detail::bad("exec-failed: code must be 125, 126 or 127");
    if (f[3].empty()) return detail::bad("exec-failed: empty reason");
    return agent_message(exec_failed{*id, std::stoi(f[2]), f[3]});
  }
  if (k == "output") {
    if (auto n = detail::need(f, 4); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    if (f[2] != "1" && f[2] != "2") return detail::bad("output: stream must be 1 or 2");
    if (f[3].empty() || f[3].size() > kMaxOutputChunk) return detail::bad("output: empty or oversized chunk");
    return agent_message(output{*id, f[2][0] - '0', f[3]});
  }
  if (k == "exited") {
    if (auto n = detail::need(f, 4); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    bool sig = f[2] == "signal";
    if (!sig && f[2] != "exit") return detail::bad("exited: expected exit or signal");
    auto v = protocol::detail::number(f[3], sig ? 1 : 0, sig ? 64 : 255, "status");
    if (!v) return detail::bad(std::string(v.err().message));
    return agent_message(exited{*id, sig, static_cast<int>(*v)});
  }
  if (k == "violation" || k == "landlock") {
    auto v = protocol::decode_supervisor(m);
    if (!v) return detail::bad(std::string(v.err().message));
    if (auto* x = std::get_if<protocol::violation>(&*v)) return agent_message(*x);
    return agent_message(std::get<protocol::landlock_applied>(*v));
  }
  if (k == "stdin-ack") {
    if (auto n = detail::need(f, 2); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    return agent_message(stdin_ack{*id});
  }
  return detail::bad("unknown agent message \"" + k.substr(0, 32) + "\"");
}

inline result<host_message> decode_host(std::string_view m) {
  auto fr = detail::fields_of(m);
  if (!fr) return std::move(fr).err();
  auto& f = *fr;
  const std::string& k = f[0];
  if (k == "share") {
    if (auto n = detail::need(f, 4); !n) return std::move(n).err();
    if (!detail::tag_ok(f[1])) return detail::bad("share: bad tag");
    if (!detail::guest_path_ok(f[2]) || f[2] == "/") return detail::bad("share: guest path must be absolute and normal");
    if (f[3] != "ro" && f[3] != "rw") return detail::bad("share: expected ro or rw");
    return host_message(share{f[1], f[2], f[3] == "rw"});
  }
  if (k == "link") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    if (!detail::guest_path_ok(f[1]) || f[1] == "/") return detail::bad("link: guest path must be absolute and normal");
    if (f[2].empty()) return detail::bad("link: empty target");
    return host_message(link{f[1], f[2]});
  }
  if (k == "protect") {
    if (auto n = detail::need(f, 2); !n) return std::move(n).err();
    if (!detail::guest_path_ok(f[1]) || f[1] == "/") return detail::bad("protect: guest path must be absolute and normal");
    return host_message(protect{f[1]});
  }
  if (k == "user") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto u = protocol::detail::number(f[1], 1, 0xfffffffeu, "uid");
    if (!u) return detail::bad(std::string(u.err().message));
    auto g = protocol::detail::number(f[2], 1, 0xfffffffeu, "gid");
    if (!g) return detail::bad(std::string(g.err().message));
    return host_message(user{static_cast<std::uint32_t>(*u), static_cast<std::uint32_t>(*g)});
  }
  if (k == "start") {
    if (auto n = detail::need(f, 1); !n) return std::move(n).err();
    return host_message(start{});
  }
  if (k == "supervise") {
    auto a = detail::parse_supervise(f);
    if (!a) return std::move(a).err();
    return host_message(supervise{std::move(*a)});
  }
  if (k == "stdin") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    if (f[2].empty() || f[2].size() > kMaxOutputChunk) return detail::bad("stdin: empty or oversized chunk");
    return host_message(input{*id, f[2]});
  }
  if (k == "stdin-eof") {
    if (auto n = detail::need(f, 2); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    return host_message(input_eof{*id});
  }
  if (k == "resize") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    auto t = protocol::detail::parse_terminal(f[2]);
    if (!t) return detail::bad(std::string(t.err().message));
    return host_message(resize{*id, *t});
  }
  if (k == "poweroff") {
    if (auto n = detail::need(f, 1); !n) return std::move(n).err();
    return host_message(poweroff{});
  }
  if (k == "kill") {
    if (auto n = detail::need(f, 3); !n) return std::move(n).err();
    auto id = detail::id_of(f[1]);
    if (!id) return std::move(id).err();
    auto s = protocol::detail::number(f[2], 1, 64, "signal");
    if (!s) return detail::bad(std::string(s.err().message));
    return host_message(kill{*id, static_cast<int>(*s)});
  }
  if (k == "exec") return detail::decode_exec(f);
  return detail::bad("unknown host message \"" + k.substr(0, 32) + "\"");
}

// Cuts a byte stream into frame payloads. After an error it stays failed.
class frame_reader {
public:
  void feed(std::string_view bytes) { buf_.append(bytes); }
  // The next complete payload, nothing while one is incomplete, or an error
  // (an empty or oversized frame).
  result<std::optional<std::string>> next() {
    if (failed_) return detail::bad("the stream failed earlier");
    if (buf_.size() - pos_ < 4) return std::optional<std::string>();
    auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(buf_[pos_ + i])); };
    const std::uint32_t n = (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
    if (n == 0 || n > kMaxFrame) {
      failed_ = true;
      return detail::bad("frame length " + std::to_string(n) + " out of range");
    }
    if (buf_.size() - pos_ - 4 < n) return std::optional<std::string>();
    std::string p = buf_.substr(pos_ + 4, n);
    pos_ += 4 + n;
    if (pos_ > 64 * 1024) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return std::optional<std::string>(std::move(p));
  }

private:
  std::string buf_;
  std::size_t pos_{0};
  bool failed_{false};
};

} // namespace ccsb::protocol::guest
