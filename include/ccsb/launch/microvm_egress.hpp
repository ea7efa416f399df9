// ccsb/launch/microvm_egress.hpp — egress of a microvm session (N1-N8, X4;
// docs/microvm.md "Egress"): the host end of the guest's egress port
// (launcher only; does I/O; Linux-only).
//
// The guest has no NIC. Its relay (guest/egress_relay.cpp) listens on the
// guest's 127.0.0.1:3128 (HTTP, CONNECT) and 127.0.0.1:1080 (SOCKS5) and
// multiplexes each accepted connection over a second virtio-serial port,
// ccsb.egress (ccsb/protocol/guest_egress.hpp), whose host end is a
// socketpair QEMU inherits. This file is the other end:
//
//   * the session's egressd, spawned exactly as the native backend spawns it
//     (launch/egressd.hpp: its own confinement, the policy's allowlist and
//     network switch, the session's --egress-opt, the session's cgroup, a
//     leased uid of its own for a root launcher), its violations reported
//     as the session's violation events;
//   * for each stream the guest opens, a socketpair: one end goes to egressd
//     over its proxy channel ("connection ROLE", protocol/proxy_channel.hpp)
//     and egressd serves it as an accepted client; the relay pumps bytes
//     between the port and the other end. The launcher never connects
//     anywhere itself: every connection leaves the host through egressd's
//     decision.
//
// The guest is the sandbox side, so the port's bytes are hostile: a frame the
// strict reader refuses, or one that breaks the protocol's rules (a stream
// never opened, more than kMaxStreams, data past the credit, after eof),
// ends the egress channel: every stream closes, the port is closed, the
// reason is logged and the guest has no network from then on (fail closed).
// Memory stays bounded: per stream at most kWindow bytes wait for egressd;
// what waits for the port is capped (kOutHigh: past it the relay reads
// neither egressd's sockets nor the port until the guest takes it).
#pragma once

#include "ccsb/launch/egressd.hpp"
#include "ccsb/launch/limits.hpp"
#include "ccsb/launch/linux/session_uid.hpp"
#include "ccsb/launch/reactor.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/protocol/guest_egress.hpp"
#include "ccsb/protocol/proxy_channel.hpp"
#include "ccsb/resource_limits.hpp"
#include "ccsb/session_settings.hpp"
#include "ccsb/sys/seqpacket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ccsb::launch {

// The guest's proxy addresses, as the native sandbox has them.
inline constexpr std::string_view kGuestProxyHttp = "127.0.0.1:3128";
inline constexpr std::string_view kGuestProxySocks = "127.0.0.1:1080";

// The proxy variables of a command in the guest: the native backend's list
// (environment.hpp proxy_environment) but GIT_SSH_COMMAND, whose ProxyCommand
// is ccsb-init's, which the guest does not have.
inline env_list guest_proxy_environment() {
  env_list out;
  for (auto& v : proxy_environment(kGuestProxyHttp, kGuestProxySocks, "false"))
    if (v.name != "GIT_SSH_COMMAND") out.push_back(std::move(v));
  return out;
}

struct microvm_egress_options {
  std::string egressd_path;
  network_rule network;   // allowlist and networkEnabled (N4, N6)
  egress_settings egress; // --egress-opt
  std::uint64_t memory_bytes{0}; // the session's --memory (egressd's tunnel limit)
};

struct microvm_egress_hooks {
  std::function<void(sandbox_violation)> violation;
  std::function<void(const std::string&, picojson::value)> detail;
  std::function<void(const std::string&)> log;
};

class microvm_egress {
public:
  // What may wait for the port before the relay stops reading.
  static constexpr std::size_t kOutHigh = std::size_t{1} << 20;

  explicit microvm_egress(microvm_egress_options o) : o_(std::move(o)) {}
  ~microvm_egress() { stop(); }
  microvm_egress(const microvm_egress&) = delete;
  microvm_egress& operator=(const microvm_egress&) = delete;

  // The port's socketpair: QEMU's end is returned (it inherits it), the
  // relay keeps the other.
  result<unique_fd> open_port() {
    int p[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) return sys_error("socketpair (egress port)");
    port_ = unique_fd(p[0]);
    ::fcntl(port_.get(), F_SETFL, ::fcntl(port_.get(), F_GETFL) | O_NONBLOCK);
    return unique_fd(p[1]);
  }

  // egressd (in `limits`' cgroup), then the port and egressd's events are
  // watched on `r`.
  result<void> start(reactor& r, const session_limits& limits, microvm_egress_hooks hooks) {
    r_ = &r;
    hooks_ = std::move(hooks);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return sys_error("socketpair (proxy channel)");
    channel_ = unique_fd(pair[0]);
    unique_fd egressd_end(pair[1]);
    ::fcntl(channel_.get(), F_SETFL, ::fcntl(channel_.get(), F_GETFL) | O_NONBLOCK);
    egressd_options eo;
    eo.path = o_.egressd_path;
    eo.channel = egressd_end.get();
    eo.network = o_.network;
    eo.egress = o_.egress;
    // N9: a root launcher gives egressd a uid of its own (not QEMU's, not
    // another session's egressd's).
    if (::geteuid() == 0) {
      if (auto lease = lease_session_uid()) egressd_uid_ = std::move(*lease);
      else log("egressd runs as nobody, the uid every such session's egressd shares: " + lease.err().what());
    }
    if (egressd_uid_) {
      eo.user = egressd_uid_->uid;
      detail("egressdUid", picojson::value(static_cast<std::int64_t>(egressd_uid_->uid)));
    }
    eo.max_tunnels = egressd_max_tunnels(o_.memory_bytes);
    eo.cgroup_procs = limits.procs_fds();
    eo.cgroup_tasks = limits.tasks_fds();
    if (limits.uses_rlimits()) eo.rlimits = {{RLIMIT_DATA, static_cast<rlim_t>(o_.memory_bytes)}};
    auto e = spawn_egressd(eo);
    if (!e) return std::move(e).err();
    egressd_ = std::move(*e);
    detail("egressdPid", picojson::value(static_cast<std::int64_t>(egressd_->pid)));
    detail("httpProxy", picojson::value(std::string(kGuestProxyHttp)));
    detail("socksProxy", picojson::value(std::string(kGuestProxySocks)));
    ::fcntl(egressd_->events.get(), F_SETFL, O_NONBLOCK);
    events_tok_ = r_->watch(egressd_->events.get(), [this](short) { on_egressd_lines(); });
    egressd_pidfd_ = unique_fd(pidfd_open(egressd_->pid));
    if (!egressd_pidfd_) return sys_error("pidfd_open (egressd)");
    pid_tok_ = r_->watch(egressd_pidfd_.get(), [this](short) { on_egressd_exit(); });
    reply_tok_ = r_->watch(channel_.get(), [this](short ev) { on_reply(ev); });
    update_port();
    return ok();
  }

  // Every stream closed, egressd stopped (SIGTERM, at most 2 s for its last
  // violation lines, then SIGKILL).
  void stop() {
    end_channel({});
    for (auto* t : {&events_tok_, &pid_tok_, &reply_tok_}) unwatch(*t);
    if (egressd_ && egressd_->pid > 0) {
      const pid_t pid = egressd_->pid;
      ::kill(-pid, SIGTERM);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
      bool exited = false;
      for (;;) {
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == pid) {
          exited = true;
          break;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p[2] = {{egressd_pidfd_ ? egressd_pidfd_.get() : -1, POLLIN, 0},
                       {egressd_->events ? egressd_->events.get() : -1, POLLIN, 0}};
        if (::poll(p, 2, egressd_pidfd_ ? static_cast<int>(left.count()) : 1) > 0 && p[1].revents) read_lines();
      }
      if (!exited) {
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      egressd_->pid = -1;
    }
    if (egressd_) read_lines();
    egressd_.reset();
    egressd_pidfd_.reset();
    channel_.reset();
    egressd_uid_.reset();
  }

  // Why the channel ended ("" while it serves).
  const std::string& ended() const { return ended_; }

private:
  struct stream {
    unique_fd sock;
    std::string to_sock; // from the guest, for egressd: at most kWindow
    reactor::token tok{0};
    short events{0};
    bool shut{false}; // shutdown(SHUT_WR) done
  };
  void log(const std::string& s) {
    if (hooks_.log) hooks_.log(s);
  }
  void detail(const std::string& k, picojson::value v) {
    if (hooks_.detail) hooks_.detail(k, std::move(v));
  }
  void unwatch(reactor::token& t) {
    if (t && r_) r_->unwatch(t);
    t = 0;
  }

  // --- the port -------------------------------------------------------------

  void send_frame(const protocol::guest_egress::frame& f) { out_ += protocol::guest_egress::encode(f); }

  void update_port() {
    if (!port_ || !r_) return;
    short ev = 0;
    if (out_.size() - out_pos_ < 2 * kOutHigh) ev |= POLLIN;
    if (out_pos_ < out_.size()) ev |= POLLOUT;
    if (!port_tok_) port_tok_ = r_->watch(port_.get(), [this](short e) { on_port(e); }, ev);
    else r_->set_events(port_tok_, ev);
  }

  void on_port(short ev) {
    if (ev & POLLOUT) flush_port();
    if (!port_) return;
    if (ev & POLLIN) {
      char buf[65536];
      ssize_t n = ::read(port_.get(), buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
      if (n <= 0) return end_channel("the egress port closed");
      reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      for (;;) {
        auto f = reader_.next();
        if (!f) return end_channel("bad frame from the guest: " + f.err().message);
        if (!*f) break;
        handle(**f);
        if (!port_) return;
      }
      flush_port();
    } else if (ev & (POLLHUP | POLLERR)) {
      return end_channel("the egress port closed");
    }
    update_all();
  }

  void flush_port() {
    while (port_ && out_pos_ < out_.size()) {
      ssize_t w = ::write(port_.get(), out_.data() + out_pos_, out_.size() - out_pos_);
      if (w > 0) {
        out_pos_ += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      return end_channel("the egress port closed");
    }
    if (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
    } else if (out_pos_ > kOutHigh) {
      out_.erase(0, out_pos_);
      out_pos_ = 0;
    }
    update_port();
  }

  void handle(const protocol::guest_egress::frame& f) {
    namespace ge = protocol::guest_egress;
    auto v = table_.receive(f);
    if (!v) return end_channel("the guest broke the egress protocol: " + v.err().message);
    if (*v == ge::mux_table::verdict::stale) return;
    const ge::stream_id id = ge::id_of(f);
    if (const auto* o = std::get_if<ge::open>(&f)) return open_stream(id, o->role);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    if (const auto* d = std::get_if<ge::data>(&f)) {
      it->second.to_sock += d->bytes;
      return flush_sock(id);
    }
    if (std::holds_alternative<ge::eof>(f)) return flush_sock(id);
    if (std::holds_alternative<ge::close>(f)) {
      // The guest aborted: the table forgot it; the guest frees its slot
      // when the host's close arrives.
      drop(id);
      send_frame(ge::close{id});
      return;
    }
    update(id); // credit: it may read again
  }

  // --- the streams ----------------------------------------------------------

  void open_stream(protocol::guest_egress::stream_id id, protocol::proxy_role role) {
    int sp[2];
    std::string why;
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
      why = std::string("socketpair: ") + std::strerror(errno);
    } else {
      unique_fd mine(sp[0]), theirs(sp[1]);
      if (!channel_ || !sys::send_datagram(channel_.get(), protocol::write_message(protocol::connection_message{role}),
                                           {theirs.get()})) {
        why = std::string("handing it to egressd: ") + (channel_ ? std::strerror(errno) : "egressd is gone");
      } else {
        ::fcntl(mine.get(), F_SETFL, ::fcntl(mine.get(), F_GETFL) | O_NONBLOCK);
        streams_[id].sock = std::move(mine);
        update(id);
        return;
      }
    }
    log("egress: stream " + std::to_string(id) + " refused: " + why);
    table_.sent_close(id);
    send_frame(protocol::guest_egress::close{id});
  }

  void drop(protocol::guest_egress::stream_id id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    unwatch(it->second.tok);
    streams_.erase(it);
  }

  void abort(protocol::guest_egress::stream_id id) {
    table_.sent_close(id);
    drop(id);
    send_frame(protocol::guest_egress::close{id});
  }

  // Both directions ended and everything written: the stream is over.
  void finish_if_done(protocol::guest_egress::stream_id id) {
    const auto* t = table_.find(id);
    auto it = streams_.find(id);
    if (!t || it == streams_.end()) return;
    if (t->eof_in && t->eof_out && it->second.to_sock.empty()) abort(id);
  }

  void flush_sock(protocol::guest_egress::stream_id id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    auto& s = it->second;
    std::size_t wrote = 0;
    while (!s.to_sock.empty()) {
      ssize_t w = ::send(s.sock.get(), s.to_sock.data() + wrote, s.to_sock.size() - wrote, MSG_NOSIGNAL);
      if (w > 0) {
        wrote += static_cast<std::size_t>(w);
        if (wrote == s.to_sock.size()) break;
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      return abort(id); // egressd closed the connection
    }
    s.to_sock.erase(0, wrote);
    if (wrote) {
      if (auto c = table_.consumed(id, static_cast<std::uint32_t>(wrote), s.to_sock.size()))
        send_frame(protocol::guest_egress::credit{id, c});
    }
    const auto* t = table_.find(id);
    if (t && t->eof_in && s.to_sock.empty() && !s.shut) {
      ::shutdown(s.sock.get(), SHUT_WR);
      s.shut = true;
    }
    finish_if_done(id);
    update(id);
  }

  void on_sock(protocol::guest_egress::stream_id id, short ev) {
    if (ev & POLLOUT) flush_sock(id);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    const auto* t = table_.find(id);
    if (!t) return;
    if ((ev & (POLLIN | POLLHUP | POLLERR)) && !t->eof_out && t->send_credit > 0 && below_high()) {
      const std::size_t want = std::min<std::size_t>(t->send_credit, protocol::guest_egress::kMaxData);
      char buf[protocol::guest_egress::kMaxData];
      ssize_t n = ::recv(it->second.sock.get(), buf, want, 0);
      if (n > 0) {
        out_ += protocol::guest_egress::header(protocol::guest_egress::frame_type::data, id,
                                                static_cast<std::uint32_t>(n));
        out_.append(buf, static_cast<std::size_t>(n));
        table_.sent_data(id, static_cast<std::uint32_t>(n));
      } else if (n == 0) {
        send_frame(protocol::guest_egress::eof{id});
        table_.sent_eof(id);
        finish_if_done(id);
      } else if (errno != EINTR && errno != EAGAIN) {
        abort(id);
      }
    }
    update(id);
    flush_port();
  }

  bool below_high() const { return out_.size() - out_pos_ < kOutHigh; }

  // A stream's watch: readable while it has credit and the port's queue is
  // short, writable while bytes wait for egressd; none otherwise (a watch
  // with no events would still wake on a hang-up, again and again).
  void update(protocol::guest_egress::stream_id id) {
    auto it = streams_.find(id);
    const auto* t = table_.find(id);
    if (it == streams_.end() || !t) return;
    auto& s = it->second;
    short ev = 0;
    if (!t->eof_out && t->send_credit > 0 && below_high()) ev |= POLLIN;
    if (!s.to_sock.empty()) ev |= POLLOUT;
    if (ev == s.events && (s.tok || !ev)) return;
    s.events = ev;
    if (!ev) return unwatch(s.tok);
    if (s.tok) r_->set_events(s.tok, ev);
    else s.tok = r_->watch(s.sock.get(), [this, id](short e) { on_sock(id, e); }, ev);
  }

  void update_all() {
    std::vector<protocol::guest_egress::stream_id> ids;
    for (const auto& [id, s] : streams_) ids.push_back(id);
    for (auto id : ids) update(id);
  }

  // Fail closed: every stream and the port are closed, the guest's proxy
  // connections end, and nothing more is read from it.
  void end_channel(const std::string& why) {
    if (!why.empty() && ended_.empty()) {
      ended_ = why;
      log("egress: " + why + "; the guest has no network from now on");
      detail("egressEnded", picojson::value(why));
    }
    for (auto& [id, s] : streams_) unwatch(s.tok);
    streams_.clear();
    unwatch(port_tok_);
    port_.reset();
  }

  // --- egressd --------------------------------------------------------------

  void on_reply(short ev) {
    for (;;) {
      char buf[protocol::kMaxChannelMessage + 1];
      ssize_t n = ::recv(channel_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || (ev & (POLLHUP | POLLERR))) unwatch(reply_tok_);
        return;
      }
      auto m = protocol::parse_reply(std::string_view(buf, static_cast<std::size_t>(n)));
      if (m && std::holds_alternative<protocol::refused_message>(*m))
        log("egress: egressd refused a connection: " + std::get<protocol::refused_message>(*m).reason);
    }
  }

  void read_lines() {
    if (!egressd_ || !egressd_->events) return;
    bool more = egressd_->lines.read_from(egressd_->events.get());
    while (egressd_) {
      auto line = egressd_->lines.next();
      if (!line) break;
      auto parsed = parse_egressd_line(*line);
      if (!parsed) continue;
      if (parsed->event == "ready") {
        egressd_->ready = true;
        if (auto c = parsed->fields.find("confinement"); c != parsed->fields.end() && c->second.is<picojson::object>())
          detail("egressdConfinement", c->second);
      }
      if (parsed->violation && hooks_.violation) hooks_.violation(*parsed->violation);
    }
    if (egressd_ && !more) {
      unwatch(events_tok_);
      egressd_->events.reset();
    }
  }

  void on_egressd_lines() { read_lines(); }

  void on_egressd_exit() {
    int st = 0;
    if (!egressd_ || egressd_->pid <= 0 || ::waitpid(egressd_->pid, &st, WNOHANG) != egressd_->pid) return;
    egressd_->pid = -1;
    unwatch(pid_tok_);
    read_lines();
    std::string why = "egressd exited (exit code " + std::to_string(exit_code_of(st)) + ")";
    if (auto outcome = egressd_ && egressd_->exec.exec_status ? exec_outcome(egressd_->exec) : std::nullopt;
        outcome && !*outcome)
      why = "egressd: " + outcome->err().what();
    channel_.reset();
    unwatch(reply_tok_);
    end_channel(why);
  }

  microvm_egress_options o_;
  microvm_egress_hooks hooks_;
  reactor* r_{nullptr};
  unique_fd port_, channel_, egressd_pidfd_;
  std::optional<egressd_process> egressd_;
  std::optional<session_uid> egressd_uid_;
  reactor::token port_tok_{0}, events_tok_{0}, pid_tok_{0}, reply_tok_{0};
  protocol::guest_egress::frame_reader reader_{protocol::guest_egress::sender::guest};
  protocol::guest_egress::mux_table table_{protocol::guest_egress::sender::host};
  std::map<protocol::guest_egress::stream_id, stream> streams_;
  std::string out_;
  std::size_t out_pos_{0};
  std::string ended_;
};

} // namespace ccsb::launch
