// ccsb/launch/none_driver.hpp — the `none` backend (B8): no sandbox; each
// exec is the command itself on the host, with the environment the caller
// built (E3-sanitised) plus the exec's additions, no proxies (launcher only;
// does I/O). Ready at once; each command runs in its own process group;
// exits arrive through the reactor's watch_exit (pidfd on Linux). There is
// no freezer: suspend is a typed error.
#pragma once

#include "ccsb/launch/driver.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/session_environment.hpp"

#include <sys/wait.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ccsb::launch {

class none_driver final : public driver {
public:
  // `workdir`: where execs without one run (the spec's guestWorkdir); empty: the launcher's cwd.
  none_driver(env_list env, std::string workdir) : env_(std::move(env)), cwd_(std::move(workdir)) {}
  ~none_driver() override { destroy(); }

  result<void> start(reactor& r, driver_sink& sink) override {
    r_ = &r;
    sink_ = &sink;
    std::error_code ec;
    if (cwd_.empty()) cwd_ = std::filesystem::current_path(ec).string();
    sink_->detail("workdir", picojson::value(cwd_));
    soon([this] { sink_->ready(); });
    return ok();
  }

  result<void> exec(const exec_spec& s) override {
    if (s.terminal) return make_error(errc::unsupported, "pty", "the none backend gives no pseudo-terminal");
    const env_list env = exec_environment(env_, s.env);
    std::string path_var = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& v : env)
      if (v.name == "PATH") path_var = v.value;
    const std::string& prog = s.argv.front();
    std::optional<std::string> found;
    if (prog.find('/') != std::string::npos)
      found = prog.front() == '/' ? prog : (std::filesystem::path(s.workdir) / prog).lexically_normal().string();
    else
      found = which(prog, path_var);
    if (!found) {
      const exec_id id = s.id;
      soon([this, id, prog] { sink_->exec_failed(id, 127, "command not found on PATH: \"" + prog + "\""); });
      return ok();
    }
    spawn_options so;
    so.path = *found;
    so.argv = s.argv;
    so.env = env;
    so.cwd = s.workdir;
    so.fds = {{0, s.stdin_fd}, {1, s.stdout_fd}, {2, s.stderr_fd}};
    auto pid = spawn(so);
    const exec_id id = s.id;
    if (!pid) {
      std::string why = pid.err().what();
      soon([this, id, why] { sink_->exec_failed(id, 126, why); });
      return ok();
    }
    auto w = r_->watch_exit(*pid, [this, id](int st) {
      children_.erase(id);
      sink_->exited(id, st);
    });
    if (!w) {
      ::kill(-*pid, SIGKILL);
      ::waitpid(*pid, nullptr, 0);
      return std::move(w).err();
    }
    const pid_t p = *pid;
    children_.emplace(id, child{*pid, *w});
    soon([this, id, p] { sink_->started(id, p, unique_fd()); });
    return ok();
  }

  result<void> signal(exec_id id, int sig) override {
    auto it = children_.find(id);
    if (it == children_.end()) return ok();
    ::kill(-it->second.pid, sig);
    return ok();
  }

  result<void> freeze(bool) override {
    return make_error(errc::unsupported, "suspend", "the none backend has no freezer (the commands run on the host)");
  }
  result<void> adopt(int) override { return ok(); }
  std::string default_workdir() const override { return cwd_; }

  void destroy() override {
    for (auto t : soon_)
      if (r_) r_->cancel(t); // a report still due must not reach a destroyed (or deleted) session
    soon_.clear();
    for (auto& [id, c] : children_) {
      if (r_) r_->unwatch(c.token);
      ::kill(-c.pid, SIGKILL);
      int st = 0;
      while (::waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
    children_.clear();
  }

private:
  // Reports the sink gets on the reactor's next turn (never from inside the
  // caller's own call), cancelled by destroy().
  void soon(std::function<void()> report) {
    auto self = std::make_shared<reactor::token>(0);
    *self = r_->after(std::chrono::milliseconds(0), [this, self, report = std::move(report)] {
      soon_.erase(*self);
      report(); // last: it may end the session and this driver
    });
    soon_.insert(*self);
  }

  struct child {
    pid_t pid;
    reactor::token token;
  };

  env_list env_;
  std::string cwd_;
  reactor* r_{nullptr};
  driver_sink* sink_{nullptr};
  std::map<exec_id, child> children_;
  std::set<reactor::token> soon_; // soon()'s reports not yet made
};

} // namespace ccsb::launch
