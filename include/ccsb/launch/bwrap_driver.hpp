// ccsb/launch/bwrap_driver.hpp — the native Linux driver: one bubblewrap
// sandbox per session, its supervisor (ccsb-init) serving exec requests over
// the exec channel (launcher only; does I/O).
//
// start() reads as a checklist; each step is checked and a failure stops
// the start with a typed error:
//   1. who the sandbox is on the host (L1): a root launcher runs it as an
//      unprivileged uid (identity.hpp): a host uid of the session's own
//      with its binds idmapped to it (linux/session_uid.hpp), else (asked
//      for a uid, or no idmapped mounts) the chosen one, whose unwritable
//      roots are reported (compile left out the toolchains it cannot
//      reach, host_facts::reach; one it could not foresee is refused);
//   2. the private run dir: mkdtemp 0700 under $XDG_RUNTIME_DIR, else /tmp,
//      flock'ed for the session's life;
//   3. limits (L7): a cgroup (v2, else v1) or rlimits;
//   4. spawn bwrap before the policy is rendered (render/bwrap/render.hpp "Spawned
//      first, fed later"; issue 9): its own process group,
//      PR_SET_PDEATHSIG, the cgroup joined, an empty envp, an argv naming
//      no policy, and every descriptor it needs: the --args stream it
//      blocks on, the L6 seccomp program, ccsb-init copied in when the
//      sandbox uid cannot reach it, the known hosts (E4), the proxy
//      channel's sandbox end, ccsb-init's options memfd and the exec
//      channel at kExecChannelFd. bwrap's stdout and stderr (its own errors
//      and ccsb-init's) go to a pipe that is logged; its last line explains
//      a failed start. It is not waited for: a step of its child that
//      failed, execve included, is read when it exits and is the reason.
//      Until it is fed it runs on the launcher's other CPUs, where there
//      are any (linux/cpu_placement.hpp);
//   5. sweep what SIGKILLed launchers left (stale run dirs and their
//      cgroups, placeholders nobody holds); the base's shared mask sources
//      (run_dir.hpp ensure_mask_sources), checked or made; the broker's
//      kernel probe (cached); the /etc view (etc_view.hpp);
//   6. render the policy for bwrap with the real host facts; hold or create
//      (registered) what the plan mounts over inside writable mounts
//      (placeholders.hpp), re-rendering if another session changed an entry;
//   7. feed bwrap: ccsb-init's options (the X2 Landlock ruleset among them:
//      host paths stay out of every argv) into their memfd, then the
//      command's environment and bwrap's options through --args; a plan
//      that needs other data files than bwrap holds (no /etc view after
//      all) gets a fresh bwrap first; bwrap's CPU set is the launcher's
//      again before it reads a byte;
//   8. for a proxied network, this session's egressd with the proxy
//      channel's other end (ccsb/protocol/proxy_channel.hpp; N1, N6), not
//      waited for either: it starts while bwrap builds the sandbox.
// An exec request may be sent once bwrap is spawned (queues_exec): it waits
// in the exec channel until ccsb-init serves it, so a launch and its first
// command need no round trip in between (issue 9).
// Then, in the reactor: the exec channel's messages (ready -> sink.ready;
// landlock -> details.landlock; started / exec-failed / exited /
// violation), egressd's event lines (ready -> details.egressdConfinement,
// violations), and the pidfds of bwrap and egressd (bwrap gone before
// destroy: the session failed; egressd gone before ready: the start failed;
// later: logged, the sandbox has no network from then on).
//
// destroy(): SIGKILL bwrap's process group (bwrap runs with
// --die-with-parent and the sandbox is a PID namespace, so everything inside
// dies with it) and SIGTERM egressd at once; wait for bwrap; kill and
// remove the cgroups; remove the placeholders this session created; wait for
// egressd (at most 2 s, its last violation lines still reported); remove the
// run dir last.
#pragma once

#include "ccsb/broker/kernel_probe.hpp"
#include "ccsb/launch/driver.hpp"
#include "ccsb/launch/egressd.hpp"
#include "ccsb/launch/etc_view.hpp"
#include "ccsb/launch/git_identity.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/identity.hpp"
#include "ccsb/launch/limits.hpp"
#include "ccsb/launch/linux/cpu_placement.hpp"
#include "ccsb/launch/linux/session_uid.hpp"
#include "ccsb/launch/placeholders.hpp"
#include "ccsb/launch/request.hpp"
#include "ccsb/launch/run_dir.hpp"
#include "ccsb/sys/seccomp.hpp"
#include "ccsb/sys/seqpacket.hpp"
#include "ccsb/launch/userns_probe.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

namespace ccsb::launch {

// ccsb-init's --options-fd descriptor: far above the data descriptors, which
// count up from kFirstDataFd, one per minimal-/etc file.
inline constexpr int kInitOptionsFd = 64;
// bwrap's --args descriptor; and how long a spawned bwrap may take to read
// its options once they are written (it blocks reading them from its start).
inline constexpr int kArgsFd = kInitStatusFd + 1;
inline constexpr std::chrono::milliseconds kArgsTimeout{10000};
static_assert(kFirstDataFd + static_cast<int>(std::size(kSystemEtc)) < kInitOptionsFd);

class bwrap_driver final : public driver {
public:
  // `rq` outlives the driver (the session keeps it).
  explicit bwrap_driver(const session_request& rq) : rq_(rq) {}
  ~bwrap_driver() override { destroy(); }

  // The checklist of the header comment; each step is a function below.
  result<void> start(reactor& r, driver_sink& sink) override {
    r_ = &r;
    sink_ = &sink;
    detail_int("landlockAbi", rq_.landlock_abi);
    spawn_options so;
    if (auto s = take_identity(so); !s) return s;        // 1.
    if (auto s = make_session_run_dir(); !s) return s;   // 2.
    if (auto s = apply_limits(so); !s) return s;         // 3.
    auto facts = session_facts();
    if (!facts) return std::move(facts).err();
    if (auto s = spawn_first(std::move(so), *facts); !s) return s; // 4.
    if (auto s = prepare_shared(*facts); !s) return s;   // 5.
    auto plan = render_and_prepare(*facts);              // 6.
    if (!plan) return std::move(plan).err();
    // 7. feed bwrap its options; from here on it builds the sandbox
    if (auto f = feed_bwrap(*plan); !f) return f;
    // 8. egressd, while bwrap builds the sandbox; ccsb-init waits for it on
    // the proxy channel
    return start_egressd();
  }

  // The exec channel exists from bwrap's spawn on: a request sent before
  // ccsb-init reports ready waits in it, and ccsb-init serves it first.
  bool queues_exec() const override { return static_cast<bool>(channel_) && !destroyed_; }

  result<void> exec(const exec_spec& s) override {
    if (!channel_) return make_error(errc::io_error, "session", "the sandbox's supervisor is gone");
    protocol::exec_request rq{s.id, s.workdir, s.terminal, s.argv, {}};
    for (const auto& v : s.env) rq.env.push_back(v.name + "=" + v.value); // the exec channel's spelling
    protocol::launcher_message m = rq;
    std::string text = protocol::encode(m);
    if (text.size() > protocol::kMaxMessage)
      return make_error(errc::invalid_argument, "argv",
                        "the command and its environment take " + std::to_string(text.size()) +
                            " bytes on the exec channel; at most " + std::to_string(protocol::kMaxMessage));
    std::vector<int> fds;
    if (!s.terminal) fds = {s.stdin_fd, s.stdout_fd, s.stderr_fd};
    return send(std::move(text), fds);
  }

  result<void> signal(exec_id id, int sig) override {
    if (!channel_) return make_error(errc::io_error, "session", "the sandbox's supervisor is gone");
    return send(protocol::encode(protocol::launcher_message{protocol::kill_request{id, sig}}), {});
  }

  result<void> freeze(bool on) override { return limits_.freeze(on); }

  result<void> adopt(int fd) override {
    // The command's stdout/stderr pipes belong to its uid, so reopening them
    // (`> /dev/stdout`, `tee /dev/stderr`) works as on a host shell.
    if (ident_ && ::fchown(fd, host_ident().uid, host_ident().gid) != 0) return sys_error("fchown (output pipe)");
    return ok();
  }

  std::string default_workdir() const override { return rq_.pol.workdir.empty() ? std::string("/") : rq_.pol.workdir; }

  void destroy() override {
    if (destroyed_) return;
    destroyed_ = true;
    for (auto* t : {&channel_tok_, &outbox_tok_, &diag_tok_, &bwrap_tok_, &events_tok_, &egressd_pid_tok_}) unwatch(*t);
    outbox_.clear();
    channel_.reset();
    limits_.thaw_for_teardown(); // a frozen process would not die of the SIGKILL below
    // Both at once: egressd's exit overlaps the sandbox's teardown.
    if (bwrap_pid_ > 0) {
      ::kill(-bwrap_pid_, SIGKILL);
      ::kill(bwrap_pid_, SIGKILL);
    }
    if (egressd_ && egressd_->pid > 0 && !egressd_->stopping) {
      ::kill(-egressd_->pid, SIGTERM);
      egressd_->stopping = true;
    }
    if (bwrap_pid_ > 0) {
      int st = 0;
      while (::waitpid(bwrap_pid_, &st, 0) < 0 && errno == EINTR) {
      }
      bwrap_pid_ = -1;
    }
    limits_.destroy();
    // Names first, then the inodes all at once (run_dir.hpp unlinked_inodes:
    // on ext4 -o discard each freed block is a synchronous discard).
    unlinked_inodes later;
    if (placeholders_) {
      (void)placeholders_->release_and_remove(later);
      placeholders_.reset();
    }
    session_uid_.reset(); // its lease: bwrap and everything of the session is gone
    stop_egressd(); // it was exiting meanwhile
    egressd_uid_.reset(); // its lease, once egressd is gone
    remove_run_dir(run_dir_, later); // last: the sweep of a dead launcher's cgroups goes by its name
    later.keep(std::move(run_lock_)); // the run dir's last reference, its lock with it
    later.release();
  }

private:
  // Step 1 (L1): who the sandbox is on the host; sets how bwrap is spawned.
  result<void> take_identity(spawn_options& so) {
    // 1. identity: today's choice is what the sandbox sees itself as; a
    // root launcher that chose it (not asked for one) runs the session as a
    // host uid of its own with its binds idmapped (linux/session_uid.hpp)
    auto ident = choose_identity(rq_.pol.workdir, rq_.run_as);
    if (!ident) return std::move(ident).err();
    if (*ident) {
      ident_ = **ident;
      if (!rq_.run_as) {
        if (auto c = check_symlinked_binds(rq_.pol); !c) return c;
        if (auto why = take_session_uid(); !why.empty())
          log("no host uid of its own for this session (" + why + "): it runs as host uid " +
              std::to_string(ident_->uid) + ", like every session that falls back");
      }
      const sandbox_identity& host = host_ident();
      so.run_as = spawn_options::credentials{host.uid, host.gid};
      detail_int("sandboxUid", ident_->uid);
      detail_int("sandboxGid", ident_->gid);
      detail_int("hostUid", host.uid);
      if (session_uid_) {
        log("the sandbox runs as host uid " + std::to_string(host.uid) + ", its own (" +
            std::to_string(session_uid_->binds.size()) + " bind(s) idmapped to it), and sees itself as uid " +
            std::to_string(ident_->uid) + " (" + ident_->why + ")");
      } else {
        log("the sandbox runs as host uid " + std::to_string(ident_->uid) + " (" + ident_->why + ")");
        for (const auto& w : unwritable_roots(rq_.pol, *ident_)) log(w);
        if (auto r = check_toolchains_reachable(); !r) return r;
      }
    } else {
      detail_int("sandboxUid", ::geteuid());
      detail_int("sandboxGid", ::getegid());
      detail_int("hostUid", ::geteuid());
    }
    return ok();
  }

  // compile left out the toolchains a shared uid cannot reach when it knew
  // the session would run as one (host_facts::reach); a session that was
  // to have a uid of its own and has not after all is refused rather than
  // handed to bwrap, which would fail on the bind.
  result<void> check_toolchains_reachable() const {
    for (const auto& t : rq_.pol.toolchains)
      if (!reachable_by(t.path, *ident_))
        return make_error(errc::unenforceable, "toolchains",
                          "toolchain " + t.path + " is not reachable by the sandbox's host uid " +
                              std::to_string(ident_->uid) +
                              ", and the session has no host uid of its own to idmap it to (see the log); run "
                              "without toolchains from PATH, or as a uid that reaches it");
    return ok();
  }

  // Step 2: the private run dir, locked for the session's life.
  result<void> make_session_run_dir() {
    auto chosen = choose_run_dir_base(); // L8: a squatted /tmp base falls back to a private one, said here
    if (!chosen) return std::move(chosen).err();
    if (!chosen->note.empty()) log(chosen->note);
    base_ = chosen->path;
    auto resolve = [](const std::string& p) -> std::optional<std::string> {
      std::error_code ec;
      auto c = std::filesystem::canonical(p, ec);
      if (ec) return std::nullopt;
      return c.string();
    };
    if (auto c = check_base_outside(rq_.pol, base_, resolve); !c) return std::move(c).err();
    std::optional<gid_t> shared_gid;
    if (ident_) shared_gid = host_ident().gid;
    auto dir = make_run_dir(rq_.session_id, base_, shared_gid);
    if (!dir) return std::move(dir).err();
    run_dir_ = dir->path;
    run_lock_ = std::move(dir->lock);
    detail_str("runDir", run_dir_);
    if (session_uid_)
      if (auto st = stage_binds(session_uid_->binds, run_dir_); !st) return st;
    return ok();
  }

  // Step 3 (L7): the cgroup or rlimits, joined by bwrap as it is spawned.
  result<void> apply_limits(spawn_options& so) {
    // 3. limits, before anything of the sandbox runs (bwrap joins the cgroup
    // as it is spawned); on cgroup v2 they start the warm-up of bwrap's move
    // (limits.hpp prewarm_cgroup_move)
    auto lim = session_limits::create(std::filesystem::path(run_dir_).filename().string(), rq_.limits);
    if (!lim) return std::move(lim).err(); // a CPU cap no cgroup took: never dropped silently
    limits_ = std::move(*lim);
    detail_str("limits", limits_.mechanism());
    detail_int("memoryBytes", static_cast<std::int64_t>(rq_.limits.memory_bytes));
    detail_int("pidsMax", static_cast<std::int64_t>(rq_.limits.pids));
    detail_int("tmpBytes", static_cast<std::int64_t>(rq_.limits.tmp_bytes));
    detail_str("cpu", limits_.cpu().mechanism);
    if (!limits_.cpu().share_key.empty()) detail_int(limits_.cpu().share_key, static_cast<std::int64_t>(limits_.cpu().share));
    if (!limits_.cpu().max.empty()) detail_str("cpuMax", limits_.cpu().max);
    if (limits_.uses_rlimits() || limits_.cpu().mechanism == "none")
      log("L7 limits: " + limits_.mechanism() + ", cpu: " + limits_.cpu().mechanism +
          (limits_.uses_rlimits() ? " (no cgroup: memory is bounded per process, the process count per host uid "
                                    "across every session of that uid)"
                                  : "") +
          (limits_.cpu().mechanism == "none" ? "; no CPU separation: the session competes for CPU with every "
                                               "other process of the host, other sessions included"
                                             : ""));
    so.cgroup_procs = limits_.procs_fds();
    so.cgroup_tasks = limits_.tasks_fds();
    if (limits_.uses_rlimits())
      so.rlimits = {{RLIMIT_DATA, static_cast<rlim_t>(rq_.limits.memory_bytes)},
                    {RLIMIT_NPROC, static_cast<rlim_t>(rq_.limits.pids)}};
    return ok();
  }

  // The host facts the renderer needs that steps 1-3 decided.
  result<bwrap_facts> session_facts() {
    bwrap_facts facts = host_bwrap_facts();
    facts.run_dir = run_dir_;
    facts.init_path = rq_.init_path;
    if (ident_ && !reachable_by(rq_.init_path, host_ident())) {
      // L1: the sandbox's uid cannot reach ccsb-init where it is installed;
      // bwrap copies it in from a descriptor the launcher opens.
      init_fd_.reset(::open(rq_.init_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
      if (!init_fd_) return sys_error("open " + rq_.init_path);
      facts.init_by_fd = true;
    }
    facts.tmp_size_bytes = rq_.limits.tmp_bytes;
    if (session_uid_) {
      facts.sandbox_ids = bwrap_facts::ids{ident_->uid, ident_->gid};
      for (const auto& b : session_uid_->binds) facts.source_aliases.push_back({b.host_path, b.staged});
    }
    return facts;
  }

  // Step 4: bwrap, spawned before the policy is rendered.
  result<void> spawn_first(spawn_options so, bwrap_facts& facts) {
    // 4. bwrap, waiting for its options (render/bwrap/render.hpp "Spawned first,
    // fed later"): its own start overlaps steps 5-6. Then egressd, not
    // waited for either: it starts while the policy is rendered and bwrap
    // builds the sandbox; ccsb-init waits for it on the proxy channel.
    if (rq_.pol.network.kind == network_kind::proxied) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return sys_error("socketpair (proxy channel)");
      egressd_end_.reset(pair[0]);
      proxy_channel_.reset(pair[1]);
    }
    so_ = std::move(so);
    // E5: the scratch HOME's .gitconfig, written to the run dir now (bwrap
    // holds its data files from its start), copied in by bwrap (--file).
    if (scratch_home(rq_.pol)) {
      facts.identity = rq_.git_identity ? *rq_.git_identity : read_host_git_identity(rq_.pol.home);
      auto gc = gitconfig_for(facts.identity);
      if (!gc.content.empty()) {
        const std::string gp = run_dir_ + "/" + std::string(kGitConfigName);
        unique_fd f(::open(gp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (!f || !write_all(f.get(), gc.content)) return sys_error("write " + gp);
      }
    }
    std::vector<std::string> data_files; // the view's layout: at most the known hosts and the scratch .gitconfig
    if (auto kh = known_hosts_source(rq_.pol, facts.kind)) data_files.push_back(*kh);
    if (auto sh = scratch_home(rq_.pol); sh && !gitconfig_for(facts.identity).content.empty())
      data_files.push_back(run_dir_ + "/" + std::string(kGitConfigName));
    if (auto b = spawn_bwrap(std::move(data_files)); !b) return b;
    return ok();
  }

  // Step 5: the sweeps, the shared mask sources, the broker's kernel probe, the /etc view.
  result<void> prepare_shared(bwrap_facts& facts) {
    // 5. the sweeps (a live run dir, this one included, is locked: never
    // swept), the shared mask sources, the broker's kernel probe, the /etc view
    for (const auto& gone : sweep_stale_run_dirs(base_)) {
      log("removed a stale run dir of a dead launcher: " + gone);
      for (const auto& cg : session_limits::remove_stale(std::filesystem::path(gone).filename().string()))
        log("removed its cgroup: " + cg);
    }
    auto phs = placeholder_set::open(base_);
    if (!phs) return std::move(phs).err();
    placeholders_ = std::move(*phs);
    for (const auto& gone : placeholders_->sweep()) log("removed a placeholder nobody holds any more: " + gone);
    auto sources = ensure_mask_sources(base_);
    if (!sources) return std::move(sources).err();
    sources_dir_ = *sources;
    facts.sources_dir = sources_dir_;
    // X1: creation rules run (instead of the P7 refusal) only where the kernel has the broker's features.
    if (rq_.pol.requires_broker()) facts.creation_rules = creation_rules_supported_cached(base_ + "/" + kBrokerProbeFile).ok;
    // The minimal /etc as one read-only bind of a cached view, held for the
    // session's life (etc_view.hpp; L1, L8); without one, bwrap builds it.
    if (auto view = etc_view_for_session(rq_.pol, facts.kind, base_); view) {
      facts.etc_view = view->path;
      etc_view_ = std::move(view->hold);
      for (const auto& n : view->notes) log(n);
      detail_str("etcView", view->path);
    } else {
      log("the minimal /etc is built by bwrap, not bound from a view: " + view.err().what());
    }
    return ok();
  }

  // Step 6: render with the real host facts and prepare the host as the
  // plan says, re-rendering if another session changed an entry.
  result<bwrap_plan> render_and_prepare(const bwrap_facts& facts) {
    // 6. render, and prepare the host as the plan says
    std::optional<bwrap_plan> rendered;
    for (int attempt = 0; !rendered; ++attempt) {
      auto plan = render_bwrap(rq_.pol, facts);
      if (!plan) return std::move(plan).err();
      if (auto occupied = prepare_host(*plan); occupied) {
        rendered = std::move(*plan);
      } else {
        (void)placeholders_->release_and_remove(); // let go of this attempt, then try again
        if (attempt >= 3) return std::move(occupied).err();
      }
    }
    bwrap_plan& plan = *rendered;
    for (const auto& n : plan.notes) log(n);
    if (!plan.git_excludes.empty()) {
      const std::string ex = run_dir_ + "/" + std::string(kGitExcludesName);
      unique_fd f(::open(ex.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
      if (!f || !write_all(f.get(), plan.git_excludes)) return sys_error("write " + ex);
    }
    detail_str("workdir", rq_.pol.workdir);
    if (!rq_.pol.toolchains.empty()) { // E4: the toolchains from PATH that are visible read-only, and why
      picojson::array tcs;
      for (const auto& t : rq_.pol.toolchains) {
        picojson::object obj;
        obj["path"] = picojson::value(t.path);
        obj["why"] = picojson::value(t.why);
        tcs.emplace_back(std::move(obj));
      }
      sink_->detail("toolchains", picojson::value(std::move(tcs)));
    }
    return plan;
  }

  // A message for ccsb-init. The exec channel is non-blocking and ccsb-init
  // reads nothing before it is ready: a message that finds the socket
  // buffer full (requests queued while the session starts, or large ones)
  // waits in the outbox, its descriptors duplicated, and goes out in order
  // as the channel drains; every later one waits behind it.
  result<void> send(std::string text, const std::vector<int>& fds) {
    if (outbox_.empty()) {
      if (sys::send_datagram(channel_.get(), text, fds)) return ok();
      if (errno != EAGAIN) return sys_error("sendmsg (exec channel)");
    }
    outgoing o{std::move(text), {}};
    for (int fd : fds) {
      o.fds.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
      if (!o.fds.back()) return sys_error("fcntl(F_DUPFD_CLOEXEC) (exec channel)");
    }
    outbox_.push_back(std::move(o));
    if (!outbox_tok_) outbox_tok_ = r_->watch(channel_.get(), [this](short) { flush_outbox(); }, POLLOUT);
    return ok();
  }

  void flush_outbox() {
    while (!outbox_.empty()) {
      std::vector<int> fds;
      for (const auto& f : outbox_.front().fds) fds.push_back(f.get());
      if (!sys::send_datagram(channel_.get(), outbox_.front().text, fds)) {
        if (errno == EAGAIN) return;
        // The supervisor is gone: bwrap's exit ends the session and its execs.
        log("exec channel: " + std::string(std::strerror(errno)) + "; " + std::to_string(outbox_.size()) +
            " message(s) not sent");
        outbox_.clear();
        break;
      }
      outbox_.pop_front();
    }
    unwatch(outbox_tok_);
  }

  // This session's egressd with the proxy channel's other end
  // (ccsb/protocol/proxy_channel.hpp; N1, N6), spawned after bwrap was fed
  // so that its start does not take the CPU bwrap's own start needs; not
  // waited for: ccsb-init waits for it on the proxy channel, and a step of
  // its child that failed, execve included, is read when it exits.
  result<void> start_egressd() {
    if (!egressd_end_) return ok();
    egressd_options eo;
    eo.path = rq_.egressd_path;
    eo.channel = egressd_end_.get();
    eo.network = rq_.pol.network;
    eo.egress = rq_.egress;
    // N9: a session with a uid of its own gives egressd a second one, so
    // that no two sessions' proxies (nor a proxy and its sandbox) share a
    // host uid: none can signal or ptrace another, and per-uid limits are
    // not shared. A lease that fails leaves egressd on its default (nobody),
    // as for a session without a uid of its own; the log says why.
    if (session_uid_ && !egressd_uid_) {
      auto lease = lease_session_uid();
      if (lease) egressd_uid_ = std::move(*lease);
      else log("egressd runs as nobody, the uid every such session's egressd shares: " + lease.err().what());
    }
    if (egressd_uid_) {
      eo.user = egressd_uid_->uid;
      detail_int("egressdUid", egressd_uid_->uid);
    }
    eo.max_tunnels = egressd_max_tunnels(rq_.limits.memory_bytes);
    eo.cgroup_procs = limits_.procs_fds();
    eo.cgroup_tasks = limits_.tasks_fds();
    if (limits_.uses_rlimits()) eo.rlimits = {{RLIMIT_DATA, static_cast<rlim_t>(rq_.limits.memory_bytes)}};
    auto e = spawn_egressd(eo);
    if (!e) return std::move(e).err();
    egressd_end_.reset();
    egressd_ = std::move(*e);
    detail_int("egressdPid", egressd_->pid);
    detail_str("httpProxy", std::string(kProxyHttp));
    detail_str("socksProxy", std::string(kProxySocks));
    ::fcntl(egressd_->events.get(), F_SETFL, O_NONBLOCK);
    events_tok_ = r_->watch(egressd_->events.get(), [this](short) { on_egressd_lines(); });
    egressd_pidfd_.reset(pidfd_open(egressd_->pid));
    if (!egressd_pidfd_) return sys_error("pidfd_open (egressd)");
    egressd_pid_tok_ = r_->watch(egressd_pidfd_.get(), [this](short) { on_egressd_exit(); });
    return ok();
  }

  // bwrap before its options exist (render/bwrap/render.hpp "Spawned first, fed
  // later"): every descriptor it needs is placed now, from the exec channel
  // to `data_files` at kFirstDataFd + i; it blocks reading kArgsFd until
  // feed_bwrap writes the options and closes args_.
  result<void> spawn_bwrap(std::vector<std::string> data_files) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return sys_error("socketpair (exec channel)");
    channel_.reset(pair[0]);
    unique_fd sandbox_end(pair[1]);
    auto diag = make_pipe();
    if (!diag) return std::move(diag).err();
    unique_fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!null) return sys_error("open /dev/null");
    std::vector<fd_map> fds{{0, null.get()}, {1, diag->write.get()}, {2, diag->write.get()},
                            {kExecChannelFd, sandbox_end.get()}};
    // A stream socket, not a pipe: a write to a bwrap that is gone fails
    // with EPIPE instead of raising SIGPIPE in the launcher's host process.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return sys_error("socketpair (bwrap --args)");
    args_.reset(pair[0]);
    unique_fd args_end(pair[1]);
    fds.push_back({kArgsFd, args_end.get()});
    // L6: the baseline seccomp filter, which bwrap applies before it execs
    // ccsb-init; a filter that cannot be built stops the start.
    auto filter = sys::baseline_seccomp_memfd();
    if (!filter) return std::move(filter).err();
    unique_fd seccomp = std::move(*filter);
    fds.push_back({kSeccompFd, seccomp.get()});
    if (init_fd_) fds.push_back({kInitFd, init_fd_.get()});
    if (proxy_channel_) fds.push_back({kProxyChannelFd, proxy_channel_.get()});
    // The files bwrap copies in (--file FD): read-only, not following a
    // symlink the renderer did not see (it bound those instead).
    std::vector<unique_fd> data;
    for (std::size_t i = 0; i < data_files.size(); ++i) {
      unique_fd f(::open(data_files[i].c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
      if (!f) return sys_error("open " + data_files[i]);
      fds.push_back({kFirstDataFd + static_cast<int>(i), f.get()});
      data.push_back(std::move(f));
    }
    spawned_data_files_ = std::move(data_files);
    // ccsb-init's options, written by feed_bwrap (the X2 Landlock ruleset
    // among them names host paths: never an argv, where the sandbox would
    // read it as /proc/1/cmdline, L1).
    options_.reset(::memfd_create("ccsb-init-options", MFD_CLOEXEC));
    if (!options_) return sys_error("memfd_create(ccsb-init-options)");
    fds.push_back({kInitOptionsFd, options_.get()});
    so_.path = rq_.bwrap_path;
    so_.argv = bwrap_spawn_argv(rq_.bwrap_path, kArgsFd, kInitOptionsFd);
    so_.env = {}; // the command's environment comes with the options (--clearenv, --setenv)
    so_.fds = fds;
    // The idmapped binds of a session uid, attached in bwrap's own mount
    // namespace: made again for a second bwrap (a tree attached in one
    // namespace cannot be attached in another).
    so_.attach.clear();
    if (session_uid_) {
      if (trees_.empty()) {
        auto t = make_idmapped_trees(*session_uid_);
        if (!t) return std::move(t).err();
        trees_ = std::move(*t);
      }
      for (std::size_t i = 0; i < trees_.size(); ++i)
        so_.attach.push_back({trees_[i].get(), session_uid_->binds[i].staged});
    }
    auto child = spawn_async(so_);
    trees_.clear();
    so_.attach.clear();
    if (!child) return std::move(child).err();
    bwrap_pid_ = child->pid;
    bwrap_exec_ = std::move(*child);
    placement_ = cpu_placement::place_beside(bwrap_pid_); // its start beside steps 5-6, not after them
    detail_int("pid", bwrap_pid_);
    bwrap_pidfd_.reset(pidfd_open(bwrap_pid_));
    if (!bwrap_pidfd_) return sys_error("pidfd_open (bwrap)");
    diag_ = std::move(diag->read);
    ::fcntl(diag_.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(channel_.get(), F_SETFL, O_NONBLOCK);
    channel_tok_ = r_->watch(channel_.get(), [this](short) { on_channel(); });
    diag_tok_ = r_->watch(diag_.get(), [this](short) { on_diag(); });
    bwrap_tok_ = r_->watch(bwrap_pidfd_.get(), [this](short) { on_bwrap_exit(); });
    return ok();
  }

  // The plan reaches the waiting bwrap: ccsb-init's options into their
  // memfd, then bwrap's own through args_, closed at the end (bwrap parses
  // up to EOF). A plan whose data files are not the ones that bwrap holds
  // (no /etc view after all, or the known hosts changed meanwhile) gets a
  // fresh bwrap that holds them.
  result<void> feed_bwrap(const bwrap_plan& plan) {
    if (plan.data_files != spawned_data_files_) {
      log("bwrap is started again: the plan copies in " + std::to_string(plan.data_files.size()) +
          " file(s), not the " + std::to_string(spawned_data_files_.size()) + " it was started with");
      abandon_bwrap();
      if (auto b = spawn_bwrap(plan.data_files); !b) return b;
    }
    auto options = init_options_blob(plan);
    if (!options) return std::move(options).err();
    auto args = spawn_args_blob(plan);
    if (!args) return std::move(args).err();
    if (!write_all(options_.get(), *options) || ::lseek(options_.get(), 0, SEEK_SET) != 0)
      return sys_error("write (ccsb-init options memfd)");
    // bwrap holds its copies of these; the launcher's are no longer needed.
    options_.reset();
    init_fd_.reset();
    proxy_channel_.reset();
    placement_.restore(); // before bwrap forks anything of the sandbox
    return write_bwrap_args(*args);
  }

  // bwrap reads its options the moment they are written. One that is gone
  // meanwhile is not an error here: its pidfd reports the exit and why
  // (on_bwrap_exit, spawn_async's status). One that reads nothing stops
  // the start after kArgsTimeout. A command never runs on a partial list:
  // commands come only over the exec channel, after this returned.
  result<void> write_bwrap_args(const std::string& blob) {
    const auto deadline = std::chrono::steady_clock::now() + kArgsTimeout;
    std::size_t off = 0;
    while (off < blob.size()) {
      ssize_t n = ::send(args_.get(), blob.data() + off, blob.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) break; // bwrap is gone
      if (n < 0 && errno != EAGAIN) return sys_error("send (bwrap --args)");
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return make_error(errc::io_error, "bwrap",
                          "read " + std::to_string(off) + " of its " + std::to_string(blob.size()) +
                              " option bytes, then nothing for " + std::to_string(kArgsTimeout.count()) + " ms");
      pollfd p[2] = {{args_.get(), POLLOUT, 0}, {bwrap_pidfd_.get(), POLLIN, 0}};
      if (::poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return sys_error("poll (bwrap --args)");
      if (p[1].revents) break; // bwrap is gone
    }
    args_.reset(); // EOF: bwrap parses what it read
    return ok();
  }

  // A bwrap that was never fed: killed and reaped here, with its channels.
  void abandon_bwrap() {
    for (auto* t : {&channel_tok_, &diag_tok_, &bwrap_tok_}) unwatch(*t);
    placement_ = {}; // its pid is reaped below: never a target again
    args_.reset();
    options_.reset();
    channel_.reset();
    diag_.reset();
    diag_buf_.clear();
    last_diag_.clear();
    if (bwrap_pid_ > 0) {
      ::kill(-bwrap_pid_, SIGKILL);
      ::kill(bwrap_pid_, SIGKILL);
      int st = 0;
      while (::waitpid(bwrap_pid_, &st, 0) < 0 && errno == EINTR) {
      }
      bwrap_pid_ = -1;
    }
    bwrap_pidfd_.reset();
    bwrap_exec_ = spawned_child{};
  }

  void on_channel() {
    while (channel_) {
      auto d = sys::recv_datagram(channel_.get(), protocol::kMaxMessage);
      if (d.error == EAGAIN) return;
      if (d.eof || d.error) {
        // The supervisor is gone; bwrap exits with it (its pidfd reports that).
        unwatch(channel_tok_);
        unwatch(outbox_tok_);
        outbox_.clear();
        channel_.reset();
        return;
      }
      std::vector<unique_fd> fds;
      for (int fd : d.fds) fds.emplace_back(fd);
      auto m = d.truncated ? result<protocol::supervisor_message>(make_error(errc::invalid_argument, "supervisor", "truncated message"))
                           : protocol::decode_supervisor(d.text, fds.size());
      if (!m) {
        log("ccsb-init message ignored: " + m.err().what());
        continue;
      }
      std::visit(protocol::detail::overload{
                     [&](const protocol::supervisor_ready&) {
                       ready_ = true;
                       sink_->ready();
                     },
                     [&](const protocol::init_failed& f) { init_failure_ = "init-failed: " + f.reason; },
                     [&](const protocol::landlock_applied& l) {
                       detail_str("landlock", l.summary);
                       log("Landlock: " + l.summary);
                     },
                     [&](const protocol::exec_started& s) {
                       sink_->started(s.id, s.pid, fds.empty() ? unique_fd() : std::move(fds[0]));
                     },
                     [&](const protocol::exec_failed& f) { sink_->exec_failed(f.id, f.code, f.reason); },
                     [&](const protocol::exec_exited& x) {
                       sink_->exited(x.id, x.signaled ? x.value : (x.value << 8));
                     },
                     [&](const protocol::violation& v) {
                       sink_->violation(v.id, sandbox_violation{v.action, v.target, std::nullopt, v.reason});
                     },
                 },
                 *m);
    }
  }

  void on_diag() {
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(diag_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0) {
          unwatch(diag_tok_);
          flush_diag(true);
        }
        return;
      }
      diag_buf_.append(buf, static_cast<std::size_t>(n));
      flush_diag(false);
    }
  }

  // bwrap's and ccsb-init's own messages: logged line by line; the last
  // ones are kept to explain a failed start.
  void flush_diag(bool all) {
    std::size_t nl;
    while ((nl = diag_buf_.find('\n')) != std::string::npos || (all && !diag_buf_.empty())) {
      std::string line = nl == std::string::npos ? std::exchange(diag_buf_, {}) : diag_buf_.substr(0, nl);
      if (nl != std::string::npos) diag_buf_.erase(0, nl + 1);
      if (line.empty()) continue;
      last_diag_ = line;
      log(line);
    }
    if (diag_buf_.size() > 4096) diag_buf_.erase(0, diag_buf_.size() - 4096);
  }

  void on_bwrap_exit() {
    int st = 0;
    if (::waitpid(bwrap_pid_, &st, WNOHANG) != bwrap_pid_) return;
    bwrap_pid_ = -1;
    unwatch(bwrap_tok_);
    on_diag(); // its last words first
    on_channel();
    std::string why = init_failure_;
    if (why.empty())
      why = "bwrap exited with code " + std::to_string(exit_code_of(st)) + (last_diag_.empty() ? "" : ": " + last_diag_);
    if (!egress_failure_.empty()) why = egress_failure_;
    // bwrap never ran (spawn_async's child failed a step, execve included): that first.
    if (auto outcome = bwrap_exec_.exec_status ? exec_outcome(bwrap_exec_) : std::nullopt; outcome && !*outcome)
      why = outcome->err().what();
    // A start that failed may be a host that blocks namespaces now: the next
    // launch runs the user-namespace trial again (userns_probe.hpp).
    if (!ready_ && !base_.empty()) {
      forget_userns_trial(base_ + "/" + kUsernsTrialFile);
      forget_userns_trial(base_ + "/" + kBrokerProbeFile);
    }
    sink_->failed(make_error(errc::io_error, "sandbox", why));
  }

  // A line's sink call may destroy the session, and this driver with it
  // (destroy's stop_egressd resets egressd_): checked after every line.
  void on_egressd_lines() {
    if (!egressd_ || !egressd_->events) return;
    bool more = egressd_->lines.read_from(egressd_->events.get());
    while (egressd_) {
      auto line = egressd_->lines.next();
      if (!line) break;
      handle_egressd_line(*line);
    }
    if (!egressd_) return;
    if (!more) {
      unwatch(events_tok_);
      egressd_->events.reset();
    }
  }

  void handle_egressd_line(const std::string& line) {
    auto parsed = parse_egressd_line(line);
    if (!parsed) return;
    if (parsed->event == "ready") {
      egressd_->ready = true;
      // X3: how egressd confined itself, as its ready line says.
      if (auto c = parsed->fields.find("confinement"); c != parsed->fields.end() && c->second.is<picojson::object>())
        sink_->detail("egressdConfinement", c->second);
    }
    if (parsed->violation) sink_->violation(std::nullopt, *parsed->violation);
  }

  void on_egressd_exit() {
    int st = 0;
    if (!egressd_ || egressd_->pid <= 0 || ::waitpid(egressd_->pid, &st, WNOHANG) != egressd_->pid) return;
    egressd_->pid = -1;
    unwatch(egressd_pid_tok_);
    on_egressd_lines();
    if (!egressd_) return; // a violation's callback destroyed the session
    const std::string code = std::to_string(exit_code_of(st));
    if (!ready_) {
      egress_failure_ = "egressd exited before the command started (exit code " + code + ")";
      if (auto outcome = egressd_->exec.exec_status ? exec_outcome(egressd_->exec) : std::nullopt; outcome && !*outcome)
        egress_failure_ = "egressd: " + outcome->err().what();
      if (bwrap_pid_ > 0) {
        ::kill(-bwrap_pid_, SIGKILL);
        ::kill(bwrap_pid_, SIGKILL);
      }
    } else {
      log("egressd exited unexpectedly (exit code " + code + "); the sandbox has no network from now on");
    }
  }

  // The plan's host_prep, in order (placeholders.hpp): a missing parent of
  // a placeholder is created, or held if it is a directory by now; a mount
  // point inside a writable mount is held when it exists, created as the
  // plan says when it is missing (a mask or placeholder target), else left
  // to bwrap, which reports a missing source itself.
  result<void> prepare_host(const bwrap_plan& plan) {
    for (const auto& p : plan.host_prep) {
      struct stat st {};
      const bool exists = ::lstat(p.path.c_str(), &st) == 0;
      if (exists && p.what == host_prep_op::action::make_dir && !S_ISDIR(st.st_mode))
        return make_error(errc::io_error, p.path, "expected a directory for a write-deny placeholder");
      if (exists) {
        auto h = placeholders_->hold(p.path);
        if (!h) return std::move(h).err();
        continue;
      }
      if (p.shape == entry_shape::none) continue;
      std::string_view content = p.shape == entry_shape::git_commondir ? kGitCommondirPlaceholder : std::string_view{};
      if (auto c = placeholders_->create(p.path, p.shape == entry_shape::dir, content); !c) return std::move(c).err();
    }
    return ok();
  }

  // SIGTERM; egressd exits at once when no tunnel is open (it drains open
  // tunnels up to its --drain-seconds). The wait is a poll on a pidfd and on
  // the events pipe, so it ends the moment egressd exits, and violations it
  // reports while exiting are still reported. Bounded: SIGKILL after 2 s.
  void stop_egressd() {
    if (!egressd_) return;
    if (egressd_->pid > 0) {
      const pid_t pid = egressd_->pid;
      unique_fd pfd(pidfd_open(pid));
      if (!egressd_->stopping) ::kill(-pid, SIGTERM);
      egressd_->stopping = true;
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
        pollfd p[2] = {{pfd.get(), POLLIN, 0}, {egressd_->events ? egressd_->events.get() : -1, POLLIN, 0}};
        if (::poll(p, 2, pfd ? static_cast<int>(left.count()) : 1) > 0 && p[1].revents) drain_egressd_lines();
      }
      if (!exited) {
        ::kill(-pid, SIGKILL);
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
      }
      egressd_->pid = -1;
    }
    drain_egressd_lines(); // what is left in the pipe after the exit
    egressd_.reset();
  }

  void drain_egressd_lines() {
    if (!egressd_ || !egressd_->events) return;
    ::fcntl(egressd_->events.get(), F_SETFL, O_NONBLOCK);
    for (;;) {
      bool more = egressd_->lines.read_from(egressd_->events.get());
      bool any = false;
      while (auto line = egressd_->lines.next()) { // inside destroy(): a destroy from the sink is a no-op
        any = true;
        handle_egressd_line(*line);
      }
      if (!more) {
        egressd_->events.reset();
        return;
      }
      pollfd p{egressd_->events.get(), POLLIN, 0};
      if (!any && ::poll(&p, 1, 0) <= 0) return;
    }
  }

  void unwatch(reactor::token& t) {
    if (r_ && t) r_->unwatch(t);
    t = 0;
  }
  void log(const std::string& s) {
    if (sink_ && sink_->log) sink_->log(s);
  }
  void detail_str(const std::string& k, const std::string& v) { sink_->detail(k, picojson::value(v)); }
  void detail_int(const std::string& k, std::int64_t v) { sink_->detail(k, picojson::value(v)); }

  const session_request& rq_;
  reactor* r_{nullptr};
  driver_sink* sink_{nullptr};
  reactor::token channel_tok_{0}, outbox_tok_{0}, diag_tok_{0}, bwrap_tok_{0}, events_tok_{0}, egressd_pid_tok_{0};
  std::optional<sandbox_identity> ident_;   // what the sandbox sees itself as (and runs as, without a session uid)
  std::optional<session_uid_plan> session_uid_; // a root launcher's: the session's own host uid, its idmapped binds
  std::optional<sandbox_identity> host_;    // the session uid as an identity
  std::vector<unique_fd> trees_;            // detached idmapped trees for the next bwrap spawn

  // The host ids bwrap runs as (only with ident_).
  const sandbox_identity& host_ident() const { return host_ ? *host_ : *ident_; }

  // A session uid of its own (root launcher), with every bind it needs
  // idmapped; empty when it has one, else why not (the session falls back
  // to ident_). The trees are made now, so that a file system without
  // idmapped mounts is found before anything starts.
  std::string take_session_uid() {
    auto lease = lease_session_uid();
    if (!lease) return lease.err().what();
    session_uid_plan plan;
    plan.binds = binds_to_idmap(rq_.pol, lease->uid);
    plan.lease = std::move(*lease);
    auto t = make_idmapped_trees(plan);
    if (!t) return t.err().what();
    trees_ = std::move(*t);
    const uid_t u = plan.lease.uid;
    host_ = sandbox_identity{u, u, "a session uid of its own"};
    session_uid_ = std::move(plan);
    return {};
  }
  std::string base_; // the run-dir base
  std::string run_dir_;
  std::string sources_dir_; // the base's shared mask sources (run_dir.hpp ensure_mask_sources)
  unique_fd run_lock_;
  std::optional<placeholder_set> placeholders_;
  unique_fd etc_view_; // the /etc view's directory, flock(LOCK_SH) while the session lives
  session_limits limits_;
  std::optional<egressd_process> egressd_;
  std::optional<session_uid> egressd_uid_; // a root launcher's session: egressd's own host uid, released after it exited
  unique_fd egressd_pidfd_;
  unique_fd proxy_channel_; // ccsb-init's end of the proxy channel, until bwrap is fed
  unique_fd egressd_end_;   // egressd's end, until egressd is spawned
  unique_fd init_fd_;       // ccsb-init read-only when bwrap copies it in, until bwrap is fed
  unique_fd options_;       // ccsb-init's options memfd, until bwrap is fed
  unique_fd args_;          // bwrap's --args stream, until bwrap is fed
  spawn_options so_;        // how bwrap is spawned (identity, cgroups, rlimits), kept for a second spawn
  std::vector<std::string> spawned_data_files_; // what the spawned bwrap holds at kFirstDataFd + i
  unique_fd channel_;
  struct outgoing {
    std::string text;
    std::vector<unique_fd> fds;
  };
  std::deque<outgoing> outbox_; // messages waiting for room in the exec channel (send)
  unique_fd diag_;
  std::string diag_buf_, last_diag_;
  unique_fd bwrap_pidfd_;
  pid_t bwrap_pid_{-1};
  cpu_placement placement_;
  spawned_child bwrap_exec_; // its exec_status, read when bwrap exits
  std::string init_failure_, egress_failure_;
  bool ready_{false};
  bool destroyed_{false};
};

} // namespace ccsb::launch
