// P5, L3, X1 (issue 26 item 12): the spec profile is "the spec without the
// P7 globs", nothing less. It runs under the X1 broker like dispatch, so P5
// below the writable roots (nested repositories, `.git` entries, a linked
// worktree's `.git` file) and L3 (host Unix sockets inside a bind) hold
// there too, and only the P7 names (`.env`, `*.key`, `*.pem`) may be
// created. Without the broker every attack below succeeds (a nested
// repository's config is rewritten and the host's next `git status` there
// runs the planted core.fsmonitor).
#include "escape_support.hpp"

using namespace escape;

namespace {

// A git repository at `dir` (created by the host, present at launch).
void host_repo(const std::string& dir) {
  make_dirs(dir);
  run_host_ok({"/usr/bin/git", "init", "-q", dir});
}

} // namespace

TEST_CASE("P5 X1: the spec profile keeps nested git directories, .git entries and .git files below the root "
          "unwritable, and still lets P7 names be created",
          "[P5][X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string sub = fx.work + "/sub", nested = fx.work + "/nested";
      host_repo(sub);
      const std::string sub_config = read_file(sub + "/.git/config");
      make_dirs(nested);
      const std::string gitfile = "gitdir: " + fx.work + "/.git\n";
      write_file(nested + "/.git", gitfile);
      const std::string marker = fx.base + "/fsmonitor-ran";
      const std::string hook = "#!/bin/sh\ntouch " + marker + "\n";
      auto r = run(launch_options(
          fx, who, "spec", fx.events, {"--bind", fx.work},
          "cd \"" + fx.work + "\"\n"
          "printf '[core]\\n\\tfsmonitor = touch " + marker + "\\n' >> sub/.git/config; echo @@config=$?\n"
          "printf '" + hook + "' > sub/.git/hooks/post-checkout; echo @@hook=$?\n"
          "chmod +x sub/.git/hooks/post-checkout 2>/dev/null\n"
          "mkdir -p fresh && git -C fresh init -q 2>/dev/null; echo @@init=$?\n"
          "printf 'gitdir: /tmp/planted\\n' > nested/.git; echo @@gitfile=$?\n"
          "mv nested/.git nested/moved 2>/dev/null; echo @@gitfile_mv=$?\n"
          "echo pem > allowed.pem; echo @@pem=$?\n"
          "echo note > notes.txt; echo @@note=$?\n"));
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(failed(r.get("config")));
      CHECK(failed(r.get("hook")));
      CHECK(failed(r.get("init")));
      CHECK(failed(r.get("gitfile")));
      CHECK(failed(r.get("gitfile_mv")));
      // The spec profile drops the P7 names, nothing else.
      CHECK(r.get("pem") == "0");
      CHECK(r.get("note") == "0");
      CHECK(read_file(fx.work + "/allowed.pem") == "pem\n");

      // On the host: nothing planted, and git there runs nothing.
      CHECK(read_file(sub + "/.git/config") == sub_config);
      CHECK(::access((sub + "/.git/hooks/post-checkout").c_str(), F_OK) != 0);
      CHECK(::access((fx.work + "/fresh/.git").c_str(), F_OK) != 0);
      CHECK(read_file(nested + "/.git") == gitfile);
      run_host({"/usr/bin/git", "-c", "safe.directory=*", "-C", sub, "status", "--short"});
      CHECK(::access(marker.c_str(), F_OK) != 0);
      CHECK(has_violation(fx, "file-write*", sub + "/.git/config"));
      CHECK(has_violation(fx, "file-write-create", fx.work + "/fresh/.git"));
    }
  }
}

TEST_CASE("L3 X1: the spec profile refuses a connect to a host Unix socket inside a bind", "[L3][X1][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string path = fx.work + "/host.sock";
      int listener = host_unix_socket(path, SOCK_STREAM);
      auto r = run(launch_options(fx, who, "spec", fx.events, {"--bind", fx.work},
                                  "python3 - <<'PY'\n"
                                  "import socket\n"
                                  "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                                  "try:\n"
                                  "    s.connect('" + path + "'); print('@@connect=ok')\n"
                                  "except OSError as e:\n"
                                  "    print('@@connect=%d' % e.errno)\n"
                                  "PY\n"));
      const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (accepted >= 0) ::close(accepted);
      ::close(listener);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("connect") != "ok");
      CHECK(r.get("connect") != "<missing>");
      CHECK(accepted < 0); // the host's listener never saw the session
      CHECK(has_violation(fx, "network-outbound", "unix:" + path));
    }
  }
}
