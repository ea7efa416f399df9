// Escape tests, path policy (issue 7 items 3, 4, 8, 9, 10, 12; P3-P6 P8 L2):
// create a missing secret, plant start-up files and tool configs, reach a
// bind through another spelling, replace a symlinked secret, redirect git
// through commondir/config.worktree, bind the host's system trees. Each
// attack runs against the real ccsb-run + bwrap, with a root launcher and
// with an unprivileged one (uid 65534 through setpriv: bwrap then works
// through a user namespace), and checks the host afterwards.
#include "escape_support.hpp"

#include <sys/stat.h>

using namespace escape;

namespace {

// ccsb-run --profile spec --protect CHECKOUT --events FILE ARGS -- bash -c wrap(BODY),
// in the worktree (bound writable by default), as `who`.
spawn_options ccsb_options(const sandbox_fixture& fx, launcher who, const std::vector<std::string>& args,
                           const std::string& body, const std::string& profile = "spec") {
  std::vector<std::string> all{"--protect", fx.protected_dir};
  all.insert(all.end(), args.begin(), args.end());
  return launch_options(fx, who, profile, fx.events, all, body);
}

proc_result run_ccsb(const sandbox_fixture& fx, launcher who, const std::vector<std::string>& args,
                     const std::string& body, const std::string& profile = "spec") {
  return run(ccsb_options(fx, who, args, body, profile));
}

// A run ccsb refuses: exit 125, the command never ran, the reason names `what`.
#define ESCAPE_REQUIRE_REFUSED(r, what)                             \
  do {                                                              \
    INFO((r).describe());                                           \
    CHECK((r).exit_code == 125);                                    \
    CHECK((r).get("ran") == "<missing>");                           \
    CHECK_THAT((r).err, Catch::Matchers::Contains(what));           \
  } while (0)

proc_result host_git(const sandbox_fixture& fx, std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/git", "-c", "safe.directory=*", "-C", fx.work};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_host(argv);
}

bool is_symlink(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// "( printf 'DATA' > PATH ) 2>&1; echo @@KEY=$?" after `mkdir -p` of its
// directory (a failing mkdir is part of the attack, not an error).
std::string plant(const std::string& key, const std::string& path, const std::string& data = "PWNED\\n") {
  std::string dir = path.substr(0, path.rfind('/'));
  return "mkdir -p " + dir + " 2>/dev/null; ( printf '" + data + "' > " + path + " ) 2>/dev/null; echo @@" + key +
         "=$?\n";
}

} // namespace

// ---------------------------------------------------------------------------
// Item 3 (P4): a read-denied path missing at launch cannot be created.
// ---------------------------------------------------------------------------

TEST_CASE("P4: a missing secret cannot be created in a writable HOME", "[P4][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string h = fx.home;
      run_host_ok({"/bin/rm", "-rf", h + "/.ssh", h + "/.aws"});
      const std::string mark = fx.base + "/PROXYCOMMAND-RAN";
      auto r = run_ccsb(fx, who, {"--bind", h},
                        plant("sshconfig", h + "/.ssh/config", "Host *\\n  ProxyCommand touch " + mark + "\\n") +
                            plant("authkeys", h + "/.ssh/authorized_keys", "ssh-ed25519 AAAA-PWNED\\n") +
                            plant("aws", h + "/.aws/config", "[default]\\ncredential_process = touch " + mark + "\\n") +
                            plant("kube", h + "/.kube/config") + plant("docker", h + "/.docker/config.json", "{}\\n") +
                            plant("gnupg", h + "/.gnupg/gpg-agent.conf") + plant("netrc", h + "/.netrc") +
                            plant("npmrc", h + "/.npmrc") + plant("gh", h + "/.config/gh/config.yml") +
                            "touch " + h + "/home-is-writable; echo @@control=$?");
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0");
      for (const char* k : {"sshconfig", "authkeys", "aws", "kube", "docker", "gnupg", "netrc", "npmrc", "gh"}) {
        INFO(k);
        CHECK(failed(r.get(k)));
      }
      // The host has none of them (the placeholders are gone after teardown).
      for (const char* p : {"/.ssh/config", "/.ssh/authorized_keys", "/.aws/config", "/.kube/config",
                            "/.docker/config.json", "/.gnupg/gpg-agent.conf", "/.netrc", "/.npmrc",
                            "/.config/gh/config.yml"}) {
        INFO(p);
        CHECK_FALSE(file_exists(h + p));
      }
      CHECK_FALSE(file_exists(mark));
    }
  }
}

TEST_CASE("P4: a secret cannot be created or replaced through a rename of its parent", "[P4][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string h = fx.home;
      make_dirs(h + "/.config/gh");
      write_file(h + "/.config/gh/hosts.yml", "github.com:\n  oauth_token: gho_original\n", 0600);
      make_dirs(h + "/.local/share");
      auto r = run_ccsb(fx, who, {"--bind", h},
                        // An existing, masked ~/.config/gh: move its parent away and plant a new one.
                        "mv " + h + "/.config " + h + "/.config.old 2>/dev/null; echo @@mvconfig=$?\n" +
                            plant("gh", h + "/.config/gh/config.yml", "aliases:\\n  co: \"!touch /tmp/x\"\\n") +
                            // A missing ~/.local/share/keyrings below an existing parent.
                            "mv " + h + "/.local " + h + "/.local.old 2>/dev/null; echo @@mvlocal=$?\n" +
                            plant("keyrings", h + "/.local/share/keyrings/login.keyring") +
                            // The masked key's directory itself.
                            "mv " + h + "/.ssh " + h + "/.ssh.old 2>/dev/null; echo @@mvssh=$?\n" +
                            plant("ssh", h + "/.ssh/config"));
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(failed(r.get("mvconfig")));
      CHECK(failed(r.get("gh")));
      CHECK(failed(r.get("mvlocal")));
      CHECK(failed(r.get("keyrings")));
      CHECK(failed(r.get("mvssh")));
      CHECK(failed(r.get("ssh")));
      CHECK(read_file(h + "/.config/gh/hosts.yml") == "github.com:\n  oauth_token: gho_original\n");
      CHECK_FALSE(file_exists(h + "/.config/gh/config.yml"));
      CHECK_FALSE(file_exists(h + "/.config.old"));
      CHECK_FALSE(file_exists(h + "/.local/share/keyrings/login.keyring"));
      CHECK_FALSE(file_exists(h + "/.ssh/config"));
      CHECK(read_file(h + "/.ssh/id_rsa").find(fx.ssh_marker) != std::string::npos);
    }
  }
}

TEST_CASE("T2: the terminal profile: a missing ~/.ssh cannot be created", "[T2][P4][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      run_host_ok({"/bin/rm", "-rf", fx.home + "/.ssh", fx.home + "/.aws"});
      auto r = run_ccsb(fx, who, {}, plant("ssh", fx.home + "/.ssh/config") +
                                         plant("aws", fx.home + "/.aws/config") +
                                         "touch " + fx.home + "/home-is-writable; echo @@control=$?",
                        "terminal");
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0"); // T2: HOME is writable
      CHECK(failed(r.get("ssh")));
      CHECK(failed(r.get("aws")));
      CHECK_FALSE(file_exists(fx.home + "/.ssh/config"));
      CHECK_FALSE(file_exists(fx.home + "/.aws/config"));
    }
  }
}

// ---------------------------------------------------------------------------
// Item 4 (P5): start-up files and tool configs, in a workspace and in HOME.
// ---------------------------------------------------------------------------

TEST_CASE("P5: start-up files and tool configs cannot be planted in a workspace root", "[P5][L2][escape]") {
  const char* names[] = {".bash_profile", ".bash_login", ".zprofile", ".zlogin", ".bash_aliases", ".gitconfig",
                         ".gitmodules", ".vscode/settings.json", ".vscode/tasks.json", ".idea/workspace.xml",
                         ".mcp.json", ".codex/config.toml", ".cursor/mcp.json", ".ripgreprc", ".npmrc",
                         ".pre-commit-config.yaml", ".husky/pre-commit", ".devcontainer/devcontainer.json"};
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      std::string body;
      for (std::size_t i = 0; i < std::size(names); ++i)
        body += plant("f" + std::to_string(i), fx.work + "/" + names[i]);
      body += "( echo ok > " + fx.work + "/src.txt ); echo @@control=$?";
      auto r = run_ccsb(fx, who, {}, body);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0");
      for (std::size_t i = 0; i < std::size(names); ++i) {
        INFO(names[i]);
        CHECK(failed(r.get("f" + std::to_string(i))));
        CHECK_FALSE(file_exists(fx.work + "/" + names[i]));
      }
    }
  }
}

TEST_CASE("P5: a workspace tool config that is a symlink to a decoy refuses the run", "[P5][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      make_dirs(fx.work + "/decoy");
      REQUIRE(::symlink("decoy", (fx.work + "/.codex").c_str()) == 0);
      auto r = run_ccsb(fx, who, {}, plant("codex", fx.work + "/.codex/config.toml"));
      ESCAPE_REQUIRE_REFUSED(r, ".codex");
      CHECK_FALSE(file_exists(fx.work + "/decoy/config.toml"));
      CHECK(is_symlink(fx.work + "/.codex"));
    }
  }
}

TEST_CASE("P5: files other programs run or load cannot be planted in a writable HOME", "[P5][L2][escape]") {
  const char* names[] = {".bash_aliases", ".local/bin/git", ".local/lib/python3.11/site-packages/evil.pth",
                         ".local/lib/python3.13/site-packages/usercustomize.py", ".config/systemd/user/evil.service",
                         ".config/autostart/evil.desktop", ".vimrc", ".vim/plugin/evil.vim", ".config/nvim/init.lua",
                         ".emacs", ".emacs.d/init.el", ".nanorc", "bin/git", ".config/fish/config.fish",
                         ".config/git/config", ".cargo/bin/cargo", ".docker/cli-plugins/docker-x"};
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string h = fx.home;
      make_dirs(h + "/.local/state"); // ~/.local exists, ~/.local/bin does not
      std::string body;
      for (std::size_t i = 0; i < std::size(names); ++i) body += plant("f" + std::to_string(i), h + "/" + names[i]);
      // Through a rename of an existing parent.
      body += "mv " + h + "/.local " + h + "/.local.old 2>/dev/null; echo @@mvlocal=$?\n" +
              plant("renamed", h + "/.local/bin/git");
      body += "( echo PWNED >> " + h + "/.gitconfig ) 2>/dev/null; echo @@gitconfig=$?\n";
      body += "touch " + h + "/home-is-writable; echo @@control=$?";
      auto r = run_ccsb(fx, who, {"--bind", h}, body);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0");
      for (std::size_t i = 0; i < std::size(names); ++i) {
        INFO(names[i]);
        CHECK(failed(r.get("f" + std::to_string(i))));
        CHECK_FALSE(file_exists(h + "/" + names[i]));
      }
      CHECK(failed(r.get("mvlocal")));
      CHECK(failed(r.get("renamed")));
      CHECK(failed(r.get("gitconfig")));
      CHECK(file_exists(h + "/.local/state"));
      CHECK(read_file(h + "/.gitconfig") == fx.gitconfig_text);
    }
  }
}

// ---------------------------------------------------------------------------
// Item 8 (P6, P8): a bind's spelling does not change what it may do.
// ---------------------------------------------------------------------------

TEST_CASE("P6: a bind through a symlink decides like its target: secrets masked, checkout read-only",
          "[P6][P2][P4][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string lnk = fx.base + "/lnk";        // a symlinked parent: lnk -> base
      const std::string homelink = fx.base + "/homelink"; // a symlink to HOME
      REQUIRE(::symlink(fx.base.c_str(), lnk.c_str()) == 0);
      REQUIRE(::symlink(fx.home.c_str(), homelink.c_str()) == 0);
      const std::string read_secrets = "for p in " + lnk + "/home " + homelink + " " + fx.home + "; do\n"
                                       "  cat $p/.ssh/id_rsa 2>/dev/null && echo @@read=0\n"
                                       "  cat $p/.aws/credentials 2>/dev/null && echo @@read=0\n"
                                       "done\n";
      const std::string write_checkout = "for p in " + lnk + "/work " + fx.work + "; do\n"
                                         "  ( echo PWNED > $p/checkouts/main/README ) 2>/dev/null && echo @@write=0\n"
                                         "  ( echo PWNED > $p/.git/hooks/pre-commit ) 2>/dev/null && echo @@hook=0\n"
                                         "done\n";
      const std::string control = "( echo ok > " + fx.work + "/src.txt ); echo @@control=$?";
      // HOME through a symlinked parent; the worktree through a symlinked
      // parent, next to its literal bind; HOME as a symlink.
      for (const auto& args : {std::vector<std::string>{"--bind", lnk + "/home"},
                               std::vector<std::string>{"--bind", lnk + "/work"},
                               std::vector<std::string>{"--bind", homelink}}) {
        INFO("ccsb-run " << args[0] << " " << args[1]);
        auto r = run_ccsb(fx, who, args, read_secrets + write_checkout + control);
        ESCAPE_REQUIRE_RAN(r);
        INFO(r.describe());
        CHECK(r.get("control") == "0");
        CHECK(r.out.find("@@read=0") == std::string::npos);
        CHECK(r.out.find("@@write=0") == std::string::npos);
        CHECK(r.out.find("@@hook=0") == std::string::npos);
        CHECK(r.out.find(fx.ssh_marker) == std::string::npos);
        CHECK(r.out.find(fx.aws_marker) == std::string::npos);
        CHECK(read_file(fx.protected_file) == fx.protected_text);
        CHECK_FALSE(file_exists(fx.work + "/.git/hooks/pre-commit"));
      }
    }
  }
}

TEST_CASE("P8: a read-only bind stays read-only however it is spelled or repeated", "[P8][P1][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string d = fx.work;
      // ccsb-run binds the current directory writable by default; each
      // spelling of it read-only must win.
      for (const std::string& spelling : {d + "/.:ro", d + "//:ro", d + "/./:ro"}) {
        INFO(spelling);
        auto r = run_ccsb(fx, who, {"--bind", spelling},
                          "( echo PWNED > " + d + "/written.txt ) 2>/dev/null; echo @@write=$?");
        ESCAPE_REQUIRE_RAN(r);
        CHECK(failed(r.get("write")));
        CHECK_FALSE(file_exists(d + "/written.txt"));
      }
      // A spec that lists the same path twice: D read-only, D/ writable.
      const std::string spec = fx.base + "/spec.json";
      write_file(spec, "{\"sessionId\":\"twice\",\"workspaceId\":\"w\",\"bindMounts\":[{\"hostPath\":\"" + d +
                           "\",\"readOnly\":true},{\"hostPath\":\"" + d + "/\",\"readOnly\":false}]}\n");
      auto r = run_ccsb(fx, who, {"--spec", spec},
                        "( echo PWNED > " + d + "/written.txt ) 2>/dev/null; echo @@write=$?");
      ESCAPE_REQUIRE_RAN(r);
      CHECK(failed(r.get("write")));
      CHECK_FALSE(file_exists(d + "/written.txt"));
    }
  }
}

TEST_CASE("P8: a bind source that does not resolve refuses the run naming the field", "[P8][S2][escape]") {
  sandbox_fixture fx;
  const std::string dangling = fx.base + "/dangling";
  REQUIRE(::symlink((fx.base + "/nowhere").c_str(), dangling.c_str()) == 0);
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      auto r = run_ccsb(fx, who, {"--bind", fx.base + "/missing", "--bind", dangling}, "true");
      ESCAPE_REQUIRE_REFUSED(r, "bindMounts[1].hostPath");
    }
  }
}

// ---------------------------------------------------------------------------
// Item 9 (P4): a symlinked secret in a writable root.
// ---------------------------------------------------------------------------

TEST_CASE("P4: a symlinked secret in a writable HOME refuses the run and says what to do", "[P4][P6][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string h = fx.home;
      make_dirs(h + "/dotfiles");
      REQUIRE(::rename((h + "/.ssh").c_str(), (h + "/dotfiles/ssh").c_str()) == 0);
      REQUIRE(::symlink("dotfiles/ssh", (h + "/.ssh").c_str()) == 0);
      // The attack: replace the symlink by a directory with a planted config.
      const std::string attack = "rm -f " + h + "/.ssh 2>/dev/null; echo @@rm=$?\n" +
                                 plant("config", h + "/.ssh/config", "Host *\\n  ProxyCommand touch /tmp/x\\n") +
                                 "cat " + h + "/.ssh/id_rsa " + h + "/dotfiles/ssh/id_rsa 2>/dev/null; echo @@read=$?";
      auto r = run_ccsb(fx, who, {"--bind", h}, attack);
      ESCAPE_REQUIRE_REFUSED(r, h + "/.ssh");
      CHECK_THAT(r.err, Catch::Matchers::Contains("read-only"));
      CHECK(is_symlink(h + "/.ssh"));
      CHECK_FALSE(file_exists(h + "/dotfiles/ssh/config"));
      // With HOME read-only the run goes ahead: the symlink cannot be
      // replaced and its target is masked.
      auto ro = run_ccsb(fx, who, {"--bind", h + ":ro"}, attack);
      ESCAPE_REQUIRE_RAN(ro);
      INFO(ro.describe());
      CHECK(failed(ro.get("rm")));
      CHECK(failed(ro.get("config")));
      CHECK(failed(ro.get("read")));
      CHECK(ro.out.find(fx.ssh_marker) == std::string::npos);
      CHECK(is_symlink(h + "/.ssh"));
      CHECK(read_file(h + "/dotfiles/ssh/id_rsa").find(fx.ssh_marker) != std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------
// Item 10 (P5): git's redirecting files in the bind root's repository.
// ---------------------------------------------------------------------------

TEST_CASE("P5: .git/commondir and .git/config.worktree cannot redirect the host's next git command",
          "[P5][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      // worktreeConfig on (what `git sparse-checkout init` sets), no
      // config.worktree yet: git would read one the sandbox creates.
      REQUIRE(host_git(fx, {"config", "core.repositoryFormatVersion", "1"}).exit_code == 0);
      REQUIRE(host_git(fx, {"config", "extensions.worktreeConfig", "true"}).exit_code == 0);
      const std::string cfg_text = read_file(fx.work + "/.git/config");
      const std::string mark = fx.base + "/FSMONITOR-RAN";
      const std::string evil = fx.work + "/evil";
      const std::string fsmon = "[core]\\n\\tfsmonitor = \\\"touch " + mark + "\\\"\\n";
      auto r = run_ccsb(fx, who, {},
                        "mkdir -p " + evil + "/objects " + evil + "/refs/heads; cp " + fx.work + "/.git/HEAD " + evil +
                            "/; printf '" + fsmon + "' > " + evil + "/config\n" +
                            plant("commondir", fx.work + "/.git/commondir", evil + "\\n") +
                            plant("worktree", fx.work + "/.git/config.worktree", fsmon) +
                            "git -C " + fx.work + " status --short >/dev/null 2>&1; echo @@status=$?\n" +
                            "( echo ok > " + fx.work + "/src.txt ); echo @@control=$?");
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0");
      CHECK(failed(r.get("commondir")));
      CHECK(failed(r.get("worktree")));
      CHECK(r.get("status") == "0"); // git works inside with the placeholders
      CHECK_FALSE(file_exists(fx.work + "/.git/commondir"));
      CHECK_FALSE(file_exists(fx.work + "/.git/config.worktree"));
      CHECK(read_file(fx.work + "/.git/config") == cfg_text);
      // The host's next git command runs nothing planted.
      auto st = host_git(fx, {"status", "--short"});
      INFO(st.describe());
      CHECK(st.exit_code == 0);
      CHECK_FALSE(file_exists(mark));
    }
  }
}

TEST_CASE("P5: real git works beside the broker's git rules, inside the sandbox and on the host during the session",
          "[P5][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      const std::string w = fx.work;
      write_file(w + "/a.txt", "a\n");
      REQUIRE(host_git(fx, {"add", "a.txt"}).exit_code == 0);
      REQUIRE(host_git(fx, {"commit", "-qm", "first"}).exit_code == 0);
      const std::string started = w + "/.session-started", go = w + "/.session-go";
      const std::string g = "git -c user.name=s -c user.email=s@example.invalid -C " + w;
      auto o = ccsb_options(
          fx, who, {},
          g + " status --short >/dev/null; echo @@status=$?\n"
              "echo b > " + w + "/b.txt; " + g + " add b.txt && " + g + " commit -qm inside; echo @@commit=$?\n" +
              g + " worktree add -q " + w + "/wt-inside 2>&1; echo @@worktree=$?\n" +
              g + " rev-parse --git-common-dir; echo @@revparse=$?\n"
              "touch " + started + "\n"
              "n=0; while [ ! -e " + go + " ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done; echo @@go=$n");
      child c = spawn(o);
      // Wait for the sandbox to reach its pause (a safety bound, not a timing assertion).
      for (int i = 0; i < 3000 && !file_exists(started); ++i) ::usleep(100000);
      bool paused = file_exists(started);
      // On the host, while the placeholders exist.
      auto st = host_git(fx, {"status", "--short"});
      write_file(w + "/c.txt", "c\n");
      auto add = host_git(fx, {"add", "c.txt"});
      auto commit = host_git(fx, {"-c", "user.name=h", "-c", "user.email=h@example.invalid", "commit", "-qm", "host"});
      auto wt = host_git(fx, {"worktree", "add", "-q", fx.base + "/wt-host"});
      auto sparse = host_git(fx, {"sparse-checkout", "init"});
      write_file(go, "");
      auto r = collect(c);
      REQUIRE(paused);
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("status") == "0");
      CHECK(r.get("commit") == "0");
      // X1: a `git worktree add` inside a writable root writes the new
      // worktree's gitdir and `.git` file, which the broker refuses (README).
      CHECK(failed(r.get("worktree")));
      CHECK(r.get("revparse") == "0");
      for (const auto* h : {&st, &add, &commit, &wt, &sparse}) {
        INFO(h->describe());
        CHECK(h->exit_code == 0);
      }
      // After teardown: the commondir placeholder is gone and git still works.
      CHECK_FALSE(file_exists(w + "/.git/commondir"));
      auto after = host_git(fx, {"log", "--oneline"});
      INFO(after.describe());
      CHECK(after.exit_code == 0);
      CHECK(after.out.find("inside") != std::string::npos);
      CHECK(after.out.find("host") != std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------
// Item 12 (P8): binds of the host's system trees, dangerous state dirs.
// ---------------------------------------------------------------------------

TEST_CASE("P8: binds of /, the system tree and /dev /proc /sys are refused, also through a symlink",
          "[P8][L1][escape]") {
  sandbox_fixture fx;
  const std::string etclink = fx.base + "/etclink";
  REQUIRE(::symlink("/etc", etclink.c_str()) == 0);
  // What a run that got through would leave in the host's /etc (removed
  // again below, so an old ccsb-run that lets it through harms nothing).
  const std::string planted = "/etc/ccsb-escape-" + random_token();
  struct unplant {
    std::string p;
    ~unplant() { ::unlink(p.c_str()); }
  } cleanup{planted};
  struct attempt {
    std::string bind, field;
  };
  // bindMounts[0] is the current directory (ccsb-run's default bind).
  const std::vector<attempt> attempts = {
      {"/", "bindMounts[1].hostPath"},         {"/:ro", "bindMounts[1].hostPath"},
      {"/etc", "bindMounts[1].hostPath"},      {etclink, "bindMounts[1].hostPath"},
      {"/usr/local", "bindMounts[1].hostPath"}, {"/var", "bindMounts[1].hostPath"},
      {"/dev:ro", "bindMounts[1].hostPath"},   {"/dev/shm", "bindMounts[1].hostPath"},
      {"/proc:ro", "bindMounts[1].hostPath"},  {"/sys:ro", "bindMounts[1].hostPath"}};
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      for (const auto& a : attempts) {
        INFO("--bind " << a.bind);
        auto r = run_ccsb(fx, who, {"--bind", a.bind}, "echo PWNED > " + planted + " 2>/dev/null; true");
        ESCAPE_REQUIRE_REFUSED(r, a.field);
      }
    }
  }
  CHECK_FALSE(file_exists(planted));
}

TEST_CASE("P8: a read-only bind of /etc masks the host's password hashes and host keys", "[P8][P4][L2][escape]") {
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      sandbox_fixture fx;
      auto r = run_ccsb(fx, who, {"--bind", "/etc:ro"},
                        "for f in /etc/shadow /etc/gshadow /etc/sudoers; do\n"
                        "  [ -e $f ] || continue\n"
                        "  echo @@$(basename $f)=$(stat -c %s:%a $f)\n"
                        "  head -c 64 $f 2>/dev/null | grep -q . && echo @@readable=$f\n"
                        "done\n"
                        "for f in /etc/ssh/ssh_host_*_key; do [ -e $f ] || continue\n"
                        "  cat $f 2>/dev/null | grep -q PRIVATE && echo @@hostkey=$f\n"
                        "done\n"
                        "cat /etc/passwd >/dev/null 2>&1; echo @@control=$?");
      ESCAPE_REQUIRE_RAN(r);
      INFO(r.describe());
      CHECK(r.get("control") == "0"); // the rest of /etc is there
      CHECK(r.get("readable") == "<missing>");
      CHECK(r.get("hostkey") == "<missing>");
      // The hashes are replaced by the empty mode-0000 mask.
      REQUIRE(file_exists("/etc/shadow"));
      CHECK(r.get("shadow") == "0:0");
      if (file_exists("/etc/gshadow")) CHECK(r.get("gshadow") == "0:0");
    }
  }
}

TEST_CASE("P3: runner state dirs of /, HOME or an ancestor of a P5 path are refused", "[P3][P5][P8][escape]") {
  sandbox_fixture fx;
  make_dirs(fx.home + "/.config");
  make_dirs(fx.home + "/.local");
  const std::string homelink = fx.base + "/homelink";
  REQUIRE(::symlink(fx.home.c_str(), homelink.c_str()) == 0);
  for (launcher who : kLaunchers) {
    DYNAMIC_SECTION(name_of(who)) {
      for (const std::string& dir : {std::string("/"), fx.home, homelink, fx.home + "/.config", fx.home + "/.local",
                                     fx.work, std::string("/dev/shm")}) {
        INFO("--state-dir " << dir);
        auto r = run_ccsb(fx, who, {"--bind", fx.home, "--state-dir", dir},
                          "echo PWNED >> " + fx.home + "/.bashrc 2>/dev/null; true");
        ESCAPE_REQUIRE_REFUSED(r, "runnerStateDirs[0]");
      }
    }
  }
  CHECK(read_file(fx.home + "/.bashrc") == fx.bashrc_text);
}
