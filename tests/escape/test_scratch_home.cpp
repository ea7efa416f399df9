// E5 (issue 28 item 3): every native session has a private writable scratch
// HOME on a tmpfs of the /tmp cap, gone with the session, holding the host
// user's git identity (user.name, user.email) and nothing else of the host's
// HOME or git configuration (render/bwrap/render.hpp "Scratch HOME"). Without it,
// `git commit` fails with "Author identity unknown" and npm with EACCES.
#include "escape_support.hpp"

using namespace escape;

namespace {

const std::string kHostName = "Host Person";
const std::string kHostEmail = "host.person@example.com";

// The host user's git configuration: the identity plus what must not arrive.
void host_gitconfig(const sandbox_fixture& fx) {
  write_file(fx.home + "/.gitconfig", "[user]\n\tname = " + kHostName + "\n\temail = " + kHostEmail +
                                          "\n[alias]\n\tco = checkout\n[credential]\n\thelper = store\n"
                                          "[core]\n\tsshCommand = /bin/false\n");
}

} // namespace

TEST_CASE("E5: in the dispatch profile HOME is a private writable scratch dir where git commit works with only the "
          "host's git identity and npm writes its cache",
          "[E5][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      host_gitconfig(fx);
      const std::string before = read_file(fx.home + "/.gitconfig");
      const std::string body =
          "echo @@home=$HOME\n"
          "test -d \"$HOME\" && test -w \"$HOME\" && echo @@writable=1\n"
          "mkdir -p ~/.cache/x && echo scratch > ~/.cache/x/f && echo @@cache=$(cat ~/.cache/x/f)\n"
          "test -e ~/.ssh/id_rsa || echo @@nossh=1\n"
          "test -e ~/.aws/credentials || echo @@noaws=1\n"
          "echo @@cfg=$(git config --global --list | tr '\\n' '|')\n"
          "cd '" + fx.work + "' && echo hello > hello.txt && git add hello.txt && git commit -q -m first && "
          "echo @@author=\"$(git log -1 --format='%an <%ae>')\"\n"
          "c=$(npm config get cache 2>/dev/null); echo @@npmcache=$c\n"
          "mkdir -p \"$c/_cacache\" && echo @@npmwrite=1\n";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.work}, body));
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("home") == fx.home); // HOME keeps its path: tools and toolchain binds find it
      CHECK(r.get("writable") == "1");
      CHECK(r.get("cache") == "scratch");
      CHECK(r.get("nossh") == "1"); // nothing of the host's HOME is in the scratch
      CHECK(r.get("noaws") == "1");
      CHECK(r.get("cfg") == "user.name=" + kHostName + "|user.email=" + kHostEmail + "|");
      CHECK(r.get("author") == kHostName + " <" + kHostEmail + ">");
      CHECK(r.get("npmcache") == fx.home + "/.npm");
      CHECK(r.get("npmwrite") == "1");
      CHECK(r.err.find("git identity: user.name and user.email copied into " + fx.home + "/.gitconfig") !=
            std::string::npos);
      // Nothing written to the scratch HOME reaches the host.
      CHECK_FALSE(file_exists(fx.home + "/.cache"));
      CHECK_FALSE(file_exists(fx.home + "/.npm"));
      CHECK(read_file(fx.home + "/.gitconfig") == before);
      // The commit is in the worktree, by the host identity.
      auto log = run_host({"/usr/bin/git", "-c", "safe.directory=*", "-C", fx.work, "log", "-1", "--format=%an <%ae>"});
      CHECK(log.out == kHostName + " <" + kHostEmail + ">\n");
    }
  }
}

TEST_CASE("E5 L7: the scratch HOME is capped by the /tmp cap and gone with the session", "[E5][L7][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string body =
          "head -c 1048576 /dev/zero > ~/small 2>/dev/null; echo @@small=$?\n"
          "head -c 8388608 /dev/zero > ~/big 2>/dev/null; echo @@big=$?\n"
          "echo @@fs=$(stat -f -c %T \"$HOME\")\n"
          "echo @@bytes=$(( $(stat -f -c '%b*%S' \"$HOME\") ))\n";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.work, "--tmp-size", "4M"}, body));
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("small") == "0");
      CHECK(failed(r.get("big"))); // ENOSPC: more than the cap
      CHECK(r.get("fs") == "tmpfs");
      CHECK(r.get("bytes") == std::to_string(4 << 20));
      CHECK_FALSE(file_exists(fx.home + "/small"));
      CHECK_FALSE(file_exists(fx.home + "/big"));
      // A second session starts with an empty scratch HOME.
      auto r2 = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.work},
                                   "test -e ~/small || echo @@fresh=1\n"));
      ESCAPE_REQUIRE_RAN(r2);
      INFO(r2.describe());
      CHECK(r2.get("fresh") == "1");
    }
  }
}

TEST_CASE("E5 P4: with HOME bound read-only its secrets stay masked and the scratch HOME is elsewhere, with the "
          "git identity",
          "[E5][P4][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      host_gitconfig(fx);
      const std::string body =
          "echo @@home=$HOME\n"
          "touch ~/x && echo @@touch=1\n"
          "cat '" + fx.home + "/.ssh/id_rsa' 2>/dev/null | sed 's/^/@@ssh=/'\n"
          "cat '" + fx.home + "/.aws/credentials' 2>/dev/null | sed 's/^/@@aws=/'\n"
          "touch '" + fx.home + "/planted' 2>/dev/null || echo @@rohome=1\n"
          "echo @@name=$(git config --global --get user.name)\n"
          "git config --global --get alias.co || echo @@noalias=1\n"
          "git config --global --get credential.helper || echo @@nohelper=1\n";
      auto r = run(launch_options(fx, who, "dispatch", fx.events, {"--bind", fx.work, "--bind", fx.home + ":ro"}, body));
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("home") == "/run/ccsb/home");
      CHECK(r.get("touch") == "1");
      CHECK(r.get("ssh") == "<missing>");
      CHECK(r.get("aws") == "<missing>");
      CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
      CHECK(r.out.find(fx.aws_marker) == std::string::npos);
      CHECK(r.get("rohome") == "1");
      CHECK(r.get("name") == kHostName);
      CHECK(r.get("noalias") == "1");
      CHECK(r.get("nohelper") == "1");
      CHECK_FALSE(file_exists(fx.home + "/planted"));
      CHECK_FALSE(file_exists(fx.home + "/x"));
    }
  }
}

TEST_CASE("E5: a host git identity with a control character is not carried, and the start-up log says so",
          "[E5][escape]") {
  sandbox_fixture fx;
  // git's own quoting lets a value hold a newline; it must not become a new section inside.
  write_file(fx.home + "/.gitconfig",
             "[user]\n\tname = \"Evil\\n[core]\\n\\tsshCommand = touch /tmp/pwned\"\n\temail = " + kHostEmail + "\n");
  auto r = run(launch_options(fx, launcher::root, "dispatch", fx.events, {"--bind", fx.work},
                              "echo @@cfg=$(git config --global --list | tr '\\n' '|')\n"));
  ESCAPE_REQUIRE_RAN(r);
  INFO(r.describe());
  CHECK(r.get("cfg") == "user.email=" + kHostEmail + "|");
  CHECK(r.err.find("user.name holds a control character and is not carried") != std::string::npos);
}
