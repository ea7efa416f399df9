// ccsbd/server.hpp — the daemon's sessions and connections on one reactor
// (S7, S8). One thread: every session is started with session::start (async;
// never the blocking launch()), every descriptor is a reactor source.
//
// Ownership: sessions belong to the server, not to a connection. A session
// has subscribers: the connection that launched it and every connection that
// later sent attach (or exec) for it; its events go to each of them. A
// connection that closes is only unsubscribed: its sessions go on, and a
// reconnecting client finds them with list and re-attaches with attach.
// destroy (by any connection), stop() (SIGTERM) and the daemon's death end
// them: no session outlives the daemon (the drivers' PDEATHSIG and bwrap
// --die-with-parent for a SIGKILL).
//
// Capabilities (S8): a session's id is no capability, any client can list
// it. launch makes a token (kTokenBytes from getentropy) that only `ready`
// carries, to the launching connection; every other request that names the
// session is served only on a connection that launched it or presented its
// token once (any request may carry "token"; a right one is remembered for
// the connection). Anything else is refused with field "token".
//
// A launch is refused (S8) when one of its mounts would show the session the
// daemon's socket: a bind at or above the socket's directory (the session
// sees the socket and, writable, could unlink it or rename a directory on
// its path and serve its own listener there) or inside it. Checked on the
// compiled policy's mounts (the spec's binds, the terminal profile's HOME,
// E4 toolchains, state directories), by identity (listener.hpp chain_of).
//
// B5 for a tool: a launch whose backend fell to none only because this host
// has no native sandbox is refused (backend_unavailable, naming what is
// missing) unless the launch asked for backend none, the daemon runs with
// --sandbox off, or it was started with --fallback none. The terminal
// profile's T1 default (none unless asked) is a choice, not a fallback.
//
// A launch's settings (env, runAs, limits, egress) go through the request
// builder ccsb-run uses (request_builder.hpp): the same checks, by the same
// launch field names. A microvm launch (X4) is probed here, with the
// launch's "microvmAccel", else the daemon's CCSB_MICROVM_ACCEL; the builder
// plans it and makes its driver, as for ccsb-run --backend microvm.
//
// Sessions that ended are remembered by id (remember_gone): a request for
// one is handle_destroyed, for an id never launched unknown_session.
//
// A request is answered on its own connection: launch -> ready (or error,
// after the session's own starting/exit 125 events), exec -> exec (its execId,
// before any event of that exec), stdin/resize/kill/detach -> ok,
// suspend/resume/destroy/handle/attach -> handle, list -> sessions; a refused
// request -> error naming the field. A reply to a line without an id carries
// the line's number (line_, from the connection).
#pragma once

#include "connection.hpp"

#include "ccsb/backend.hpp"
#include "ccsb/sys/platform.hpp"
#include "ccsb/launch/request_builder.hpp"
#include "ccsb/launch/session.hpp"
#if CCSB_LAUNCH_MACOS
#include "ccsb/launch/macos/seatbelt_driver.hpp" // the native driver (platform.hpp)
#endif
#include "ccsb/protocol/daemon.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ccsbd {

namespace D = ccsb::protocol::daemon;
namespace L = ccsb::launch;

struct server_config {
  ccsb::sandbox_switch sw{ccsb::sandbox_switch::on}; // B3
  ccsb::probe_result native;                          // B2: probed once at start-up
  std::string startup_line;                           // B4
  ccsb::host_facts facts;                             // gathered once; a new resolver per launch
  std::string egressd_path;
  std::string init_path;
  ccsb::compile_options compile;
  bool fallback_none{false};                           // B5: --fallback none
  bool strict{false};                                  // S1: --strict, every launch refuses unknown spec keys
  std::string socket_dir;                              // resolved, for messages
  std::vector<D::node_id> socket_chain;                // the socket's directory, then its ancestors
};

class server {
public:
  server(L::reactor& r, server_config c) : r_(r), c_(std::move(c)) {}
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server() { stop(); }

  // A peer of the daemon's uid: greeted, then served.
  void accept(L::unique_fd fd) {
    const std::uint64_t id = ++next_conn_;
    connection::hooks h;
    h.line = [this, id](std::string_view line, std::uint64_t n) {
      line_ = n;
      on_line(id, line);
    };
    h.overflow = [this, id](std::size_t seen, std::uint64_t n) {
      send(id, D::error_line({picojson::value(), "", std::nullopt, std::nullopt, n}, D::line_too_long(seen)));
    };
    h.closed = [this, id](const std::string& why) {
      log("connection " + std::to_string(id) + " closed: " + why);
      r_.after(std::chrono::milliseconds(0), [this, id] { drop_connection(id); });
    };
    auto c = std::make_unique<connection>(r_, id, std::move(fd), std::move(h));
    connection* raw = c.get();
    conns_.emplace(id, std::move(c));
    raw->send(D::hello_line(c_.startup_line, c_.native.available, static_cast<std::int64_t>(::getpid()),
                            static_cast<std::int64_t>(::geteuid())));
  }

  // SIGTERM: every session is destroyed (its execs' exit events still go
  // out), every connection gets what is pending, within a bound.
  void stop() {
    while (!sessions_.empty()) drop_session(sessions_.begin()->first);
    for (auto& [id, c] : conns_) c->drain(std::chrono::milliseconds(500));
    conns_.clear();
  }

private:
  // One session the daemon holds.
  struct hosted {
    std::string id;
    std::uint64_t generation{0};
    std::unique_ptr<L::session> s; // set once session::start returned; only then is it in sessions_
    std::set<std::uint64_t> subscribers;
    std::string token;               // the capability (ready carries it)
    std::set<std::uint64_t> holders; // connections that launched it or presented the token
    picojson::value launch_id; // echoed on ready / the launch's error
    std::uint64_t launch_line{0}; // the launch request's line, on its error
    std::optional<ccsb::sandbox_handle> handle;
    std::optional<ccsb::error> last_error; // what the handle carried in state error
    bool ready{false};
    bool failed{false};
    std::vector<ccsb::unknown_field> warnings; // the spec's unknown keys, on `ready` (S1)
  };

  void log(const std::string& s) const { std::fprintf(stderr, "ccsbd: %s\n", s.c_str()); }

  void send(std::uint64_t conn, const std::string& line) {
    if (auto it = conns_.find(conn); it != conns_.end()) it->second->send(line);
  }
  void broadcast(hosted& h, const std::string& line) {
    const std::set<std::uint64_t> to = h.subscribers; // a send may close a connection
    for (auto c : to) send(c, line);
  }

  void drop_connection(std::uint64_t id) {
    for (auto& [sid, h] : sessions_) {
      h->subscribers.erase(id);
      h->holders.erase(id);
    }
    conns_.erase(id);
  }

  // Destroys the session while it is still reachable (its last exit events
  // go to the subscribers), then forgets it.
  void drop_session(const std::string& sid) {
    auto it = sessions_.find(sid);
    if (it == sessions_.end()) return;
    std::unique_ptr<hosted> h = std::move(it->second);
    h->s->destroy();
    sessions_.erase(sid);
    remember_gone(sid);
  }

  // The ids of sessions that ended, so that a request naming one is told
  // handle_destroyed rather than unknown_session; the oldest are forgotten
  // past kRememberGone (a later request for one of them: unknown_session).
  static constexpr std::size_t kRememberGone = 4096;
  void remember_gone(const std::string& sid) {
    if (!gone_.insert(sid).second) return;
    gone_order_.push_back(sid);
    if (gone_order_.size() > kRememberGone) {
      gone_.erase(gone_order_.front());
      gone_order_.pop_front();
    }
  }
  void drop_later(hosted& h) {
    const std::string sid = h.id;
    const std::uint64_t gen = h.generation;
    r_.after(std::chrono::milliseconds(0), [this, sid, gen] {
      auto it = sessions_.find(sid);
      if (it != sessions_.end() && it->second->generation == gen) drop_session(sid);
    });
  }

  // How a client opts into QEMU's emulated CPU (docs/microvm.md).
  static constexpr const char* kMicrovmOptIn =
      "the launch's \"microvmAccel\":\"tcg\", or CCSB_MICROVM_ACCEL=tcg in ccsbd's environment";

  L::session_callbacks callbacks(hosted* h) {
    L::session_callbacks cb;
    cb.event = [this, h](const ccsb::sandbox_event& e) { on_event(*h, e); };
    cb.handle = [this, h](const ccsb::sandbox_handle& hd) { on_handle(*h, hd); };
    cb.log = [this, h](const std::string& s) { log("session " + h->id + ": " + s); };
    return cb;
  }

  void on_handle(hosted& h, const ccsb::sandbox_handle& hd) {
    h.handle = hd;
    if (hd.state() != ccsb::sandbox_state::error || !hd.error()) return;
    h.last_error = *hd.error();
    // A warm session whose sandbox went away: its subscribers learn it unasked.
    if (h.ready) broadcast(h, D::error_line({picojson::value(), "", h.id, std::nullopt}, *hd.error()));
  }

  void on_event(hosted& h, const ccsb::sandbox_event& e) {
    if (e.kind == ccsb::event_kind::ready) {
      h.ready = true;
      broadcast(h, D::ready_line(h.launch_id, *h.handle, h.token, h.warnings, h.launch_line));
      return;
    }
    broadcast(h, ccsb::to_json_line(e));
    if (e.kind == ccsb::event_kind::exit && !e.exec_id && !h.ready && !h.failed) {
      // exit 125 without execId: the start failed (session.hpp fail_start).
      h.failed = true;
      const ccsb::error why = h.last_error ? *h.last_error
                                           : ccsb::make_error(ccsb::errc::io_error, "session", "the session did not start");
      broadcast(h, D::error_line({h.launch_id, "launch", h.id, std::nullopt, h.launch_line}, why));
      drop_later(h);
    }
  }

  hosted* find(const std::string& sid) {
    auto it = sessions_.find(sid);
    return it == sessions_.end() ? nullptr : it->second.get();
  }

  void on_line(std::uint64_t conn, std::string_view line) {
    D::parsed_request p = D::parse_request(line);
    if (!p.body) return send(conn, D::error_line({p.id, p.op, std::nullopt, std::nullopt, line_}, p.body.err()));
    const picojson::value& id = p.id;
    D::request_body& b = *p.body;
    if (auto* q = std::get_if<D::launch_request>(&b)) return launch(conn, id, std::move(*q));
    if (std::holds_alternative<D::list_request>(b)) return list(conn, id);
    // Every other op names a live session.
    const std::string& sid = *D::session_id_of(b);
    const std::string op(D::op_name(b));
    hosted* h = find(sid);
    if (!h && gone_.count(sid))
      return send(conn, D::error_line({id, op, sid, std::nullopt, line_},
                                      ccsb::make_error(ccsb::errc::handle_destroyed, "sessionId",
                                                       "session " + ccsb::quote(sid) +
                                                           " was destroyed (or failed to start)")));
    if (!h)
      return send(conn, D::error_line({id, op, sid, std::nullopt, line_},
                                      ccsb::make_error(ccsb::errc::unknown_session, "sessionId",
                                                       "no session " + ccsb::quote(sid) + " was launched")));
    if (auto held = holds(conn, *h, *D::token_of(b)); !held)
      return send(conn, D::error_line({id, op, sid, std::nullopt, line_}, held.err()));
    if (auto* q = std::get_if<D::exec_request>(&b)) return exec(conn, id, *h, std::move(*q));
    if (auto* q = std::get_if<D::stdin_request>(&b)) {
      auto w = h->s->write_stdin(q->exec, q->data);
      if (w && q->eof) w = h->s->close_stdin(q->exec);
      return reply(conn, id, op, *h, q->exec, w);
    }
    if (auto* q = std::get_if<D::resize_request>(&b))
      return reply(conn, id, op, *h, q->exec, h->s->resize(q->exec, q->size.rows, q->size.cols));
    if (auto* q = std::get_if<D::kill_request>(&b))
      return reply(conn, id, op, *h, q->exec, h->s->kill(q->exec, "stop", q->signal));
    on_session_op(conn, id, *h, std::get<D::session_op_request>(b).op);
  }

  // The connection holds the session's capability, or presents it now.
  ccsb::result<void> holds(std::uint64_t conn, hosted& h, const std::optional<std::string>& token) {
    if (token) {
      if (!D::token_matches(*token, h.token))
        return ccsb::make_error(ccsb::errc::invalid_argument, "token",
                                "not the token of session " + ccsb::quote(h.id) + " (S8)");
      h.holders.insert(conn);
      return ccsb::ok();
    }
    if (h.holders.count(conn)) return ccsb::ok();
    return ccsb::make_error(ccsb::errc::missing_field, "token",
                            "this connection did not launch session " + ccsb::quote(h.id) +
                                "; present the token its launch returned (S8)");
  }

  // S8: the first mount of the compiled policy that would show the session
  // the daemon's socket, as an error naming the spec field it comes from.
  ccsb::result<void> socket_hidden(const ccsb::policy& pol, const ccsb::sandbox_spec& spec) const {
    for (const auto& m : pol.mounts) {
      const node_chain c = chain_of(m.host_path);
      const D::exposure e = D::bind_exposure(c_.socket_chain, c.ids, c.exists);
      if (e == D::exposure::none) continue;
      // The spec entry the mount comes from; else the profile added it (the
      // terminal profile's HOME, an E4 toolchain).
      std::string field = "profile";
      auto same = [&c](const std::string& p) {
        const node_chain b = chain_of(p);
        return b.exists == c.exists && !b.ids.empty() && b.ids == c.ids;
      };
      for (std::size_t i = 0; i < spec.runner_state_dirs.size(); ++i)
        if (same(spec.runner_state_dirs[i])) field = "spec.runnerStateDirs[" + std::to_string(i) + "]";
      for (std::size_t i = 0; i < spec.bind_mounts.size(); ++i)
        if (same(spec.bind_mounts[i].host_path)) {
          field = "spec.bindMounts[" + std::to_string(i) + "].hostPath";
          break;
        }
      return ccsb::make_error(
          ccsb::errc::invalid_argument, field,
          "the session would see the daemon's socket directory " + c_.socket_dir + ": " +
              (e == D::exposure::below ? "the mount " + m.host_path + " is inside it"
                                       : "the mount " + m.host_path + " is it or contains it") +
              (m.writable ? " (writable: the session could replace the socket)" : "") +
              "; sessions must not reach ccsbd (S8)");
    }
    return ccsb::ok();
  }

  void reply(std::uint64_t conn, const picojson::value& id, const std::string& op, hosted& h, L::exec_id x,
             const ccsb::result<void>& r) {
    if (!r) return send(conn, D::error_line({id, op, h.id, x, line_}, r.err()));
    send(conn, D::ok_line(id, op, h.id, x, line_));
  }

  void launch(std::uint64_t conn, const picojson::value& id, D::launch_request q) {
    const std::string sid = q.spec.session_id;
    auto refuse = [&](ccsb::error e) { send(conn, D::error_line({id, "launch", sid, std::nullopt, line_}, e)); };
    if (c_.strict && !q.unknown.empty()) return refuse(D::strict_refusal(q.unknown.front(), "ccsbd --strict"));
    for (const auto& u : q.unknown) log("session " + sid + ": warning: " + ccsb::describe(u));
    if (find(sid))
      return refuse(ccsb::make_error(ccsb::errc::invalid_argument, "spec.sessionId",
                                     "a session " + ccsb::quote(sid) + " is live; destroy it or choose another id"));
    // B5, B6, T1, T3: a terminal session defaults to none, native only when asked.
    const auto ctx = q.prof == ccsb::profile::terminal ? ccsb::run_context::terminal : ccsb::run_context::dispatch;
    // X4: QEMU and the guest image are probed only for a launch that asks
    // for microvm (no default picks it); TCG only on an explicit opt-in.
    ccsb::microvm_probe vm_probe{false, "this platform has no microvm driver"};
    std::optional<L::microvm_inputs> vm;
#if !CCSB_LAUNCH_MACOS
    if (q.requested == ccsb::backend::microvm) {
      auto v = L::probe_microvm(q.microvm_accel, "microvmAccel", std::nullopt, kMicrovmOptIn);
      if (!v) return refuse(v.err());
      vm_probe = v->answer.vm;
      vm = std::move(*v);
    }
#endif
    auto sel = ccsb::select_backend(ctx, q.requested, c_.sw, c_.native, vm_probe);
    if (!sel) return refuse(sel.err());
    if (sel->chosen == ccsb::backend::none && !q.requested && c_.sw == ccsb::sandbox_switch::on &&
        ctx != ccsb::run_context::terminal && !c_.native.available && !c_.fallback_none)
      return refuse(ccsb::make_error(
          ccsb::errc::backend_unavailable, "backend",
          "no native sandbox on this host (" + c_.native.hint +
              "); ccsbd does not run a session on the host unless the launch asks for \"backend\":\"none\" or the "
              "daemon runs with --sandbox off or --fallback none (B5)"));
    for (const auto& l : sel->log) log("session " + sid + ": " + l);
    L::request_inputs in{std::move(q.spec), q.prof, c_.compile, std::move(q.env), std::move(vm)};
    L::session_request session_rq;
    session_rq.chosen = sel->chosen;
    session_rq.egressd_path = c_.egressd_path;
    session_rq.init_path = c_.init_path;
    session_rq.landlock_abi = c_.native.landlock_abi;
    session_rq.limits = q.limits; // L7 (the launch's "limits"; defaults where absent)
    session_rq.egress = std::move(q.egress);
    session_rq.run_as = q.run_as;
    // A new resolver per launch: one remembers what it looked up (host.hpp path_resolver).
    ccsb::host_facts facts = c_.facts;
    facts.resolve = L::launch_resolver();
    const ccsb::sandbox_spec spec_copy = in.spec;
    auto built = L::build_session_request(std::move(in), std::move(session_rq), facts);
    if (!built) return refuse(in_spec(built.err()));
    if (sel->chosen != ccsb::backend::none)
      if (auto hidden = socket_hidden(built->pol, spec_copy); !hidden) return refuse(hidden.err());
    auto token = new_token();
    if (!token) return refuse(token.err());
    log("session " + sid + ": backend " + std::string(ccsb::to_string(sel->chosen)) + " (profile " +
        std::string(ccsb::to_string(q.prof)) + ")");
    if (sel->chosen == ccsb::backend::native)
      for (const auto& n : built->pol.notes) log("session " + sid + ": " + n);
    // The callbacks hold the hosted record: session::start already emits
    // (starting; exit 125 on a failure it meets at once).
    auto h = std::make_unique<hosted>();
    h->id = sid;
    h->generation = ++next_generation_;
    h->subscribers.insert(conn);
    h->holders.insert(conn);
    h->token = std::move(*token);
    h->launch_id = id;
    h->launch_line = line_;
    h->warnings = q.unknown;
    // The native driver of this platform (platform.hpp): nullptr on Linux
    // (session.hpp's default, bubblewrap), the Seatbelt driver on macOS; the
    // microvm driver the request builder made.
    std::unique_ptr<L::driver> native_driver = std::move(built->backend_driver);
#if CCSB_LAUNCH_MACOS
    if (sel->chosen == ccsb::backend::native) {
      const auto& rq = built->request;
      auto d = L::macos::make_seatbelt_driver(rq.pol, rq.egressd_path, rq.egress);
      if (!d) return refuse(d.err());
      if (rq.limits.cpu_millis) // L7: a CPU cap is never dropped silently
        return refuse(ccsb::make_error(ccsb::errc::unsupported, "limits.cpus",
                                       "the macOS backend cannot cap CPU (Seatbelt has no cgroups)"));
      native_driver = std::move(*d);
    }
#endif
    auto s = L::session::start(r_, std::move(built->request), callbacks(h.get()), std::move(native_driver));
    if (!s) {
      if (!h->failed) refuse(s.err()); // fail_start reported through the events already
      return;
    }
    h->s = std::move(*s);
    sessions_.emplace(sid, std::move(h));
    if (gone_.erase(sid)) std::erase(gone_order_, sid); // the id is live again
  }

  static ccsb::result<std::string> new_token() {
    unsigned char bytes[D::kTokenBytes];
    if (::getentropy(bytes, sizeof bytes) != 0) return L::sys_error("getentropy (a session token)");
    return D::token_text(bytes);
  }

  // The policy compiler names spec fields from the spec's root
  // ("bindMounts[0].hostPath"); on the wire they are inside "spec", as the
  // parser names them.
  static ccsb::error in_spec(ccsb::error e) {
    const std::string_view root = std::string_view(e.field).substr(0, e.field.find_first_of(".["));
    for (auto f : ccsb::kSpecFields)
      if (root == f) return ccsb::nest("spec", std::move(e));
    return e;
  }

  void exec(std::uint64_t conn, const picojson::value& id, hosted& h, D::exec_request q) {
    L::exec_options o;
    o.workdir = q.workdir.value_or("");
    o.env = std::move(q.env);
    if (q.timeout_ms) o.timeout = std::chrono::milliseconds(*q.timeout_ms);
    o.terminal = q.pty;
    auto x = h.s->exec(std::move(q.argv), std::move(o));
    if (!x) return send(conn, D::error_line({id, "exec", h.id, std::nullopt, line_}, x.err()));
    h.subscribers.insert(conn);
    send(conn, D::exec_line(id, h.id, *x, line_));
    if (!q.stdin_data) return;
    auto w = h.s->write_stdin(*x, *q.stdin_data);
    if (w && !q.pty) w = h.s->close_stdin(*x);
    if (!w) send(conn, D::error_line({id, "exec", h.id, *x, line_}, w.err()));
  }

  void on_session_op(std::uint64_t conn, const picojson::value& id, hosted& h, D::session_op op) {
    const std::string name(D::to_string(op));
    ccsb::result<void> r;
    switch (op) {
    case D::session_op::suspend: r = h.s->suspend(); break;
    case D::session_op::resume: r = h.s->resume(); break;
    case D::session_op::attach: h.subscribers.insert(conn); break;
    case D::session_op::detach:
      h.subscribers.erase(conn);
      return send(conn, D::ok_line(id, name, h.id, std::nullopt, line_));
    case D::session_op::handle: break;
    case D::session_op::destroy: {
      h.s->destroy(); // synchronous: the execs' exit events go out first
      const ccsb::sandbox_handle last = h.s->handle();
      const std::string sid = h.id;
      send(conn, D::handle_line(id, name, last, line_));
      drop_session(sid);
      return;
    }
    }
    if (!r) return send(conn, D::error_line({id, name, h.id, std::nullopt, line_}, r.err()));
    send(conn, D::handle_line(id, name, h.s->handle(), line_));
  }

  void list(std::uint64_t conn, const picojson::value& id) {
    std::vector<ccsb::sandbox_handle> all;
    for (const auto& [sid, h] : sessions_) all.push_back(h->s->handle());
    send(conn, D::sessions_line(id, all, line_));
  }

  L::reactor& r_;
  server_config c_;
  std::map<std::uint64_t, std::unique_ptr<connection>> conns_;
  std::map<std::string, std::unique_ptr<hosted>> sessions_;
  std::set<std::string> gone_;          // ended sessions (remember_gone)
  std::deque<std::string> gone_order_;  // the same, oldest first
  std::uint64_t line_{0};               // the number of the request line being served (error replies carry it)
  std::uint64_t next_conn_{0};
  std::uint64_t next_generation_{0};
};

} // namespace ccsbd
