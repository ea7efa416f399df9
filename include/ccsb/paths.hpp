// ccsb/paths.hpp — the curated path sets of §3 and lexical path helpers.
//
// P4 read-deny (secrets), P5 mandatory write-deny, M5 dangerous binaries,
// P7 required write-deny globs, the binds P8 refuses. Each entry says why it
// is there, and each P4/P5 entry what it is by nature (path_shape: the
// placeholder that occupies it when it is missing). Entries starting with
// "~/" are relative to the home directory of the host facts; entries
// starting with "./" are relative to every writable root; kShellStartupPaths
// apply to both; the git lists are relative to a git directory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

struct listed_path {
  std::string_view path;
  std::string_view why;
};

// What a denied name is by nature. It decides the placeholder that occupies
// the name when it does not exist at launch (render/bwrap/render.hpp, "Denied paths
// that do not exist"): an empty directory, an empty file, or, for git's
// `commondir`, a file naming the git directory itself (".": git reads an
// empty or unreadable commondir as a fatal error, "." is what git does
// without one).
enum class path_shape : unsigned char { file, dir, git_commondir };

constexpr std::string_view to_string(path_shape s) noexcept {
  switch (s) {
  case path_shape::file: return "file";
  case path_shape::dir: return "dir";
  case path_shape::git_commondir: return "git_commondir";
  }
  return "file";
}

// An entry of a P4/P5 set: where, what it is by nature, why it is denied.
struct denied_path {
  std::string_view path;
  path_shape shape;
  std::string_view why;
};

// P4: credential stores. A sandboxed command can read neither these files
// nor anything below these directories, and one that does not exist at
// launch cannot be created (a new ~/.ssh/config or ~/.aws/config runs
// commands on the host as surely as a stolen key leaks).
inline constexpr denied_path kReadDenyPaths[] = {
    {"~/.ssh", path_shape::dir, "SSH private keys, agent config and known hosts (config can run ProxyCommand)"},
    {"~/.aws", path_shape::dir, "AWS access keys and SSO tokens (config can run credential_process)"},
    {"~/.gnupg", path_shape::dir, "GnuPG private keys (gpg-agent.conf names programs)"},
    {"~/.config/gh", path_shape::dir, "GitHub CLI OAuth tokens (config aliases can run shell commands)"},
    {"~/Library/Keychains", path_shape::dir, "macOS keychains"},
    {"~/.netrc", path_shape::file, "plain-text passwords for curl, git, ftp"},
    {"~/.git-credentials", path_shape::file, "git credential-store passwords and tokens"},
    {"~/.config/git/credentials", path_shape::file, "git credential-store (XDG location)"},
    {"~/.docker/config.json", path_shape::file, "container registry auth tokens (credsStore names a program)"},
    {"~/.kube", path_shape::dir, "Kubernetes cluster credentials (exec plugins run commands)"},
    {"~/.config/gcloud", path_shape::dir, "Google Cloud credentials and tokens"},
    {"~/.azure", path_shape::dir, "Azure CLI tokens"},
    {"~/.npmrc", path_shape::file, "JavaScript registry auth tokens (and script-shell, node-options)"},
    {"~/.yarnrc.yml", path_shape::file, "JavaScript registry auth tokens (Yarn; yarnPath runs a file)"},
    {"~/.pypirc", path_shape::file, "Python package upload credentials"},
    {"~/.config/pip", path_shape::dir, "pip index credentials"},
    {"~/.cargo/credentials.toml", path_shape::file, "Rust crate registry tokens"},
    {"~/.cargo/credentials", path_shape::file, "Rust crate registry tokens (legacy name)"},
    {"~/.gem/credentials", path_shape::file, "RubyGems API key"},
    {"~/.local/share/gem/credentials", path_shape::file, "RubyGems API key (XDG location)"},
    {"~/.pip/pip.conf", path_shape::file, "pip index credentials (legacy location)"},
    {"~/.config/pnpm/rc", path_shape::file, "pnpm's global config (registry auth tokens)"},
    {"~/.bunfig.toml", path_shape::file, "Bun's global config (registry tokens)"},
    {"~/.m2/settings.xml", path_shape::file, "Maven repository passwords"},
    {"~/.gradle/gradle.properties", path_shape::file, "Gradle repository credentials"},
    {"~/.nuget/NuGet/NuGet.Config", path_shape::file, ".NET package source credentials"},
    {"~/.terraform.d/credentials.tfrc.json", path_shape::file, "Terraform Cloud tokens"},
    {"~/.config/hub", path_shape::file, "hub CLI GitHub token"},
    {"~/.config/glab-cli", path_shape::dir, "GitLab CLI tokens"},
    {"~/.config/containers/auth.json", path_shape::file, "Podman/Buildah registry auth tokens"},
    {"~/.vault-token", path_shape::file, "HashiCorp Vault token"},
    {"~/.password-store", path_shape::dir, "pass(1) password store"},
    {"~/.pgpass", path_shape::file, "PostgreSQL passwords"},
    {"~/.my.cnf", path_shape::file, "MySQL client passwords"},
    {"~/.s3cfg", path_shape::file, "s3cmd access keys"},
    {"~/.boto", path_shape::file, "gsutil/boto cloud credentials"},
    {"~/.config/rclone", path_shape::dir, "rclone remotes with their credentials"},
    {"~/.oci", path_shape::dir, "Oracle Cloud API signing keys"},
    {"~/.config/doctl", path_shape::dir, "DigitalOcean API token"},
    {"~/.local/share/keyrings", path_shape::dir, "GNOME keyring"},
    {"~/.mozilla", path_shape::dir, "browser profile: cookies and saved passwords"},
    {"~/.config/google-chrome", path_shape::dir, "browser profile: cookies and saved passwords"},
    {"~/.config/chromium", path_shape::dir, "browser profile: cookies and saved passwords"},
    {"~/Library/Application Support/Google/Chrome", path_shape::dir, "browser profile (macOS)"},
    {"~/Library/Cookies", path_shape::dir, "macOS cookies"},
    {"~/.claude/.credentials.json", path_shape::file, "Claude Code OAuth credentials"},
};

// P4 core: the subset the terminal profile denies (T2).
inline constexpr denied_path kTerminalReadDenyPaths[] = {
    {"~/.ssh", path_shape::dir, "SSH private keys (config can run ProxyCommand)"},
    {"~/.aws", path_shape::dir, "AWS access keys (config can run credential_process)"},
    {"~/.gnupg", path_shape::dir, "GnuPG private keys"},
    {"~/.config/gh", path_shape::dir, "GitHub CLI tokens"},
    {"~/Library/Keychains", path_shape::dir, "macOS keychains"},
};

// P4, host secrets outside HOME: masked wherever a bind mount makes them
// visible (a read-only bind of /etc, /etc/ssh, ...), in every profile. A
// writable bind of these trees is refused (kNeverWritableTrees), so they
// never need a placeholder.
inline constexpr denied_path kSystemReadDenyPaths[] = {
    {"/etc/shadow", path_shape::file, "password hashes"},
    {"/etc/shadow-", path_shape::file, "password hashes (backup)"},
    {"/etc/gshadow", path_shape::file, "group password hashes"},
    {"/etc/gshadow-", path_shape::file, "group password hashes (backup)"},
    {"/etc/security/opasswd", path_shape::file, "old password hashes (pam_pwhistory)"},
    {"/etc/sudoers", path_shape::file, "who may become root, and how"},
    {"/etc/sudoers.d", path_shape::dir, "who may become root, and how"},
    {"/etc/ssh/ssh_host_rsa_key", path_shape::file, "SSH host private key (impersonates the host)"},
    {"/etc/ssh/ssh_host_ecdsa_key", path_shape::file, "SSH host private key (impersonates the host)"},
    {"/etc/ssh/ssh_host_ed25519_key", path_shape::file, "SSH host private key (impersonates the host)"},
    {"/etc/ssh/ssh_host_dsa_key", path_shape::file, "SSH host private key (impersonates the host)"},
    {"/etc/ssl/private", path_shape::dir, "TLS private keys"},
    {"/etc/krb5.keytab", path_shape::file, "Kerberos host keys"},
    {"/etc/NetworkManager/system-connections", path_shape::dir, "Wi-Fi and VPN passwords"},
    {"/etc/wireguard", path_shape::dir, "WireGuard private keys"},
    {"/etc/ipsec.secrets", path_shape::file, "IPsec pre-shared keys"},
};

// P5: never writable, even inside a writable root, existing or not.
//
// Shell start-up and logout files of bash, zsh and POSIX sh, and what bash
// itself loads from HOME (bash-completion's file, readline's key bindings),
// relative to HOME and to every writable root: a write here runs code in the user's
// next shell, and a root may be the HOME of the next shell (`HOME=$PWD
// bash -l`, a dotfiles checkout, a bind of a parent of HOME). Other shells'
// files are denied in HOME (kHomeWriteDenyPaths); in a workspace root they
// would only add placeholders for shells that never read them there.
inline constexpr denied_path kShellStartupPaths[] = {
    {".bashrc", path_shape::file, "bash start-up file"},
    {".bash_profile", path_shape::file, "bash login start-up file"},
    {".bash_login", path_shape::file, "bash login start-up file"},
    {".bash_logout", path_shape::file, "bash logout file"},
    {".bash_aliases", path_shape::file, "bash aliases (sourced by Debian's .bashrc)"},
    {".profile", path_shape::file, "POSIX login start-up file"},
    {".zshrc", path_shape::file, "zsh start-up file"},
    {".zshenv", path_shape::file, "zsh start-up file (every zsh)"},
    {".zprofile", path_shape::file, "zsh login start-up file"},
    {".zlogin", path_shape::file, "zsh login start-up file"},
    {".zlogout", path_shape::file, "zsh logout file"},
    {".bash_completion", path_shape::file, "sourced by bash-completion, which Debian's .bashrc loads"},
    {".inputrc", path_shape::file, "readline key bindings of every bash (a binding can run a command)"},
};

// Files other programs execute or load from a writable HOME.
inline constexpr denied_path kHomeWriteDenyPaths[] = {
    // Other shells' start-up and logout files.
    {"~/.kshrc", path_shape::file, "ksh start-up file"},
    {"~/.mkshrc", path_shape::file, "mksh start-up file"},
    {"~/.cshrc", path_shape::file, "csh start-up file"},
    {"~/.tcshrc", path_shape::file, "tcsh start-up file"},
    {"~/.login", path_shape::file, "csh login start-up file"},
    {"~/.logout", path_shape::file, "csh logout file"},
    {"~/.xonshrc", path_shape::file, "xonsh start-up file"},
    {"~/.zshrc.zwc", path_shape::file, "compiled .zshrc: zsh runs it instead when it is newer"},
    {"~/.zshenv.zwc", path_shape::file, "compiled .zshenv: zsh runs it instead when it is newer"},
    {"~/.zprofile.zwc", path_shape::file, "compiled .zprofile: zsh runs it instead when it is newer"},
    {"~/.zlogin.zwc", path_shape::file, "compiled .zlogin: zsh runs it instead when it is newer"},
    {"~/.zlogout.zwc", path_shape::file, "compiled .zlogout: zsh runs it instead when it is newer"},
    {"~/.zcompdump", path_shape::file, "zsh compinit's dump, sourced by every interactive zsh that runs compinit"},
    {"~/.oh-my-zsh", path_shape::dir, "oh-my-zsh: plugins and themes sourced by .zshrc"},
    {"~/.local/share/bash-completion", path_shape::dir,
     "bash-completion's user completions, sourced when a command is completed"},
    {"~/.local/share/fish/generated_completions", path_shape::dir, "fish completions, sourced when a command is completed"},
    {"~/.config/fish", path_shape::dir, "fish start-up files and functions"},
    {"~/.config/nushell", path_shape::dir, "nushell start-up files"},
    {"~/.config/xonsh", path_shape::dir, "xonsh start-up files"},
    {"~/.config/elvish", path_shape::dir, "elvish start-up files"},
    {"~/.elvish", path_shape::dir, "elvish start-up files (old location)"},
    {"~/.config/powershell", path_shape::dir, "PowerShell profiles"},
    // Session start-up outside the shell.
    {"~/.pam_environment", path_shape::file, "environment of every login (LD_PRELOAD)"},
    {"~/.config/environment.d", path_shape::dir, "environment of the systemd user session"},
    {"~/.xprofile", path_shape::file, "X session start-up script"},
    {"~/.xsession", path_shape::file, "X session start-up script"},
    {"~/.xsessionrc", path_shape::file, "X session start-up script (Debian)"},
    {"~/.xinitrc", path_shape::file, "startx start-up script"},
    {"~/.config/autostart", path_shape::dir, "desktop autostart entries run at login"},
    {"~/.config/systemd", path_shape::dir, "systemd user units, timers and user.conf environment"},
    {"~/.local/share/systemd", path_shape::dir, "systemd user units (XDG data location)"},
    // Directories on PATH: a file here shadows a host command.
    {"~/.local/bin", path_shape::dir, "on PATH: a planted file shadows a host command"},
    {"~/bin", path_shape::dir, "on PATH (Debian's .profile): a planted file shadows a host command"},
    {"~/.cargo/bin", path_shape::dir, "on PATH for Rust users: a planted file shadows a host command"},
    {"~/go/bin", path_shape::dir, "on PATH for Go users: a planted file shadows a host command"},
    // Python: the user site is ~/.local/lib/pythonX.Y/site-packages for
    // every X.Y; a .pth or usercustomize.py there runs in every python. The
    // whole ~/.local/lib is denied so no version is missed (`pip install
    // --user` fails inside; use a virtualenv in the worktree).
    {"~/.local/lib", path_shape::dir, "Python user site of every version (.pth files, usercustomize run at start)"},
    {"~/.ipython", path_shape::dir, "IPython profile start-up scripts"},
    {"~/.jupyter", path_shape::dir, "Jupyter configuration (Python code)"},
    // Git: configuration keys that run programs (core.hooksPath,
    // core.sshCommand, core.fsmonitor, alias.*, credential helpers).
    {"~/.gitconfig", path_shape::file, "git config keys that run programs"},
    {"~/.config/git", path_shape::dir, "git config keys that run programs (XDG)"},
    {"~/.hgrc", path_shape::file, "Mercurial hooks and extensions"},
    // Editors and terminal tools that run their start-up files.
    {"~/.vimrc", path_shape::file, "vim start-up file"},
    {"~/.gvimrc", path_shape::file, "gvim start-up file"},
    {"~/.exrc", path_shape::file, "vi/ex start-up file"},
    {"~/.vim", path_shape::dir, "vim plugins and start-up files"},
    {"~/.config/nvim", path_shape::dir, "Neovim start-up files"},
    {"~/.local/share/nvim", path_shape::dir, "Neovim packages (loaded at start)"},
    {"~/.emacs", path_shape::file, "Emacs start-up file"},
    {"~/.emacs.el", path_shape::file, "Emacs start-up file"},
    {"~/.emacs.d", path_shape::dir, "Emacs start-up files and packages"},
    {"~/.config/emacs", path_shape::dir, "Emacs start-up files (XDG)"},
    {"~/.nanorc", path_shape::file, "nano start-up file"},
    {"~/.config/nano", path_shape::dir, "nano start-up file (XDG)"},
    {"~/.tmux.conf", path_shape::file, "tmux configuration (run-shell)"},
    {"~/.config/tmux", path_shape::dir, "tmux configuration (XDG)"},
    {"~/.screenrc", path_shape::file, "screen configuration (exec)"},
    {"~/.gdbinit", path_shape::file, "gdb start-up commands (shell)"},
    {"~/.config/gdb", path_shape::dir, "gdb start-up commands (XDG)"},
    {"~/.lldbinit", path_shape::file, "lldb start-up commands"},
    {"~/.irbrc", path_shape::file, "irb start-up file (Ruby code)"},
    {"~/.pryrc", path_shape::file, "pry start-up file (Ruby code)"},
    {"~/.Rprofile", path_shape::file, "R start-up file"},
    {"~/.config/direnv", path_shape::dir, "direnv start-up file (direnvrc)"},
    {"~/.local/share/direnv", path_shape::dir, "direnv's allow list: an entry approves a planted .envrc"},
    {"~/.cargo/config.toml", path_shape::file, "cargo config (build.rustc-wrapper, target runners run programs)"},
    {"~/.cargo/config", path_shape::file, "cargo config (legacy name)"},
    {"~/.docker/cli-plugins", path_shape::dir, "docker CLI plugins run as docker subcommands"},
    // IDEs and coding agents: settings, tasks, extensions and MCP servers run programs.
    {"~/.config/Code", path_shape::dir, "VS Code user settings and tasks"},
    {"~/.vscode", path_shape::dir, "VS Code extensions"},
    {"~/.vscode-server", path_shape::dir, "VS Code remote server and its extensions"},
    {"~/.config/Cursor", path_shape::dir, "Cursor user settings"},
    {"~/.cursor", path_shape::dir, "Cursor extensions and MCP servers"},
    {"~/.config/zed", path_shape::dir, "Zed settings and tasks"},
    {"~/.claude", path_shape::dir, "Claude configuration (hooks, settings, commands)"},
    {"~/.claude.json", path_shape::file, "Claude configuration (MCP servers)"},
    {"~/.codex", path_shape::dir, "Codex configuration (MCP servers, commands)"},
    {"~/.gemini", path_shape::dir, "Gemini CLI settings (MCP servers)"},
};

// Per writable root: tool configurations that run commands when the user
// works in the root on the host. Project code (Makefile, package.json
// scripts, build files) stays writable on purpose: it is what the agent is
// there to change, and the user reviews it before running it.
inline constexpr denied_path kRootWriteDenyPaths[] = {
    {"./.gitconfig", path_shape::file,
     "git config keys that run programs (read as ~/.gitconfig when this root is HOME, or by include.path)"},
    {"./.gitmodules", path_shape::file, "submodule URLs and paths git clones and checks out"},
    {"./.husky", path_shape::dir, "husky's hooks directory (core.hooksPath): git runs its scripts"},
    {"./.pre-commit-config.yaml", path_shape::file, "pre-commit: the installed git hook runs the commands it lists"},
    {"./lefthook.yml", path_shape::file, "lefthook: the installed git hook runs the commands it lists"},
    {"./.lefthook.yml", path_shape::file, "lefthook: the installed git hook runs the commands it lists"},
    {"./.vscode", path_shape::dir, "VS Code workspace settings and tasks run programs"},
    {"./.idea", path_shape::dir, "JetBrains run configurations and external tools"},
    {"./.zed", path_shape::dir, "Zed project settings and tasks"},
    {"./.devcontainer", path_shape::dir, "dev container config (initializeCommand runs on the host)"},
    {"./.devcontainer.json", path_shape::file, "dev container config (initializeCommand runs on the host)"},
    {"./.mcp.json", path_shape::file, "MCP servers a coding agent starts (commands)"},
    {"./.claude", path_shape::dir, "Claude project configuration (hooks, commands)"},
    {"./.codex", path_shape::dir, "Codex project configuration (MCP servers, commands)"},
    {"./.cursor", path_shape::dir, "Cursor project rules and MCP servers"},
    {"./.gemini", path_shape::dir, "Gemini CLI project settings (MCP servers)"},
    {"./.ripgreprc", path_shape::file, "ripgrep config (--pre runs a program on every file)"},
    {"./.npmrc", path_shape::file, "npm project config (script-shell, node-options, git run programs)"},
    {"./.yarnrc.yml", path_shape::file, "Yarn project config (yarnPath runs the file it names)"},
    {"./.yarnrc", path_shape::file, "Yarn 1 project config (yarn-path runs the file it names)"},
    {"./.cargo/config.toml", path_shape::file, "cargo project config (rustc-wrapper, target runners run programs)"},
    {"./.cargo/config", path_shape::file, "cargo project config (legacy name)"},
};

// Tool configurations read from every directory, not only a root's top
// (cargo reads `.cargo/config.toml` in each ancestor of its working
// directory, npm and yarn theirs in the package directory, VS Code and the
// coding agents theirs in whatever folder they are opened in, Mercurial and
// jj in every repository): the X1 broker denies each name of
// kRootWriteDenyPaths and of this list at ANY depth of a writable root
// (created, written, replaced, linked, removed; a rename, link or symlink
// onto a directory of a longer one such as `.cargo` too). These are
// enforced by the broker only, at the root as well.
inline constexpr denied_path kNestedWriteDenyPaths[] = {
    {".hg/hgrc", path_shape::file, "Mercurial repository config: [hooks] run programs on the user's next hg command"},
    {".jj/repo/config.toml", path_shape::file, "jj repository config (ui.pager, fix.tools, aliases run programs)"},
    {".mise.toml", path_shape::file, "mise config of every ancestor directory ([env] _.source, hooks run programs)"},
    {"mise.toml", path_shape::file, "mise config of every ancestor directory ([env] _.source, hooks run programs)"},
    {".mise.local.toml", path_shape::file, "mise config (local variant)"},
    {"mise.local.toml", path_shape::file, "mise config (local variant)"},
    {".mise", path_shape::dir, "mise config directory (config.toml, conf.d/*.toml)"},
    {"mise/config.toml", path_shape::file, "mise config (directory form)"},
    {".config/mise.toml", path_shape::file, "mise config (directory form)"},
    {".config/mise", path_shape::dir, "mise config directory (config.toml, conf.d/*.toml)"},
};

// Per git directory (the repository's own `.git`, and the git directory a
// `.git` file names). git reads these without being asked.
inline constexpr denied_path kGitDirWriteDenyPaths[] = {
    {"commondir", path_shape::git_commondir,
     "redirects git's config, hooks, objects and refs to another directory"},
    {"config.worktree", path_shape::file,
     "per-worktree git config (read with extensions.worktreeConfig, set by git sparse-checkout)"},
};
// Per common git directory (`.git` of a plain repository; what `commondir`
// names for a linked worktree).
inline constexpr denied_path kGitCommonDirWriteDenyPaths[] = {
    {"hooks", path_shape::dir, "git hooks run on the user's next git command"},
    {"config", path_shape::file, "git config keys that run programs"},
};
// The administrative directory of a linked worktree (the gitdir its `.git`
// file names), besides the two above.
inline constexpr denied_path kGitWorktreeAdminWriteDenyPaths[] = {
    {"gitdir", path_shape::file, "names the worktree's .git file (git worktree prune and repair act on it)"},
};
// Decided to stay writable in a git directory: info/ (exclude, attributes:
// a filter or diff driver runs only when config defines it, and config is
// denied; sparse-checkout patterns), objects/info/alternates (extra object
// stores: git reads objects from them, never programs), rebase-merge/ and
// sequencer/ (an `exec` line runs only when the user continues the rebase),
// index, refs and objects (git needs them). Left to X1 (they need a
// directory listing or a creation rule, not a fixed name): worktrees/<name>/
// of OTHER linked worktrees (their commondir and config.worktree matter to
// those worktrees; no new entry is created in worktrees/ itself, so git
// worktree add inside a root fails before it writes anything),
// modules/<name>/ and any repository nested below a root.

// E4: toolchain homes. A directory on the caller's PATH that lies inside
// one of these makes the whole home visible read-only, and `also` beside
// it (policy.hpp, "Toolchains on PATH"): the programs on PATH there are
// shims or proxies that run what the home holds. Read-denied files inside
// (~/.cargo/credentials.toml) stay masked; write-denied ones
// (~/.cargo/bin, ~/.cargo/config.toml) are read-only with the rest.
struct toolchain_home {
  std::string_view path;
  std::string_view also; // another home the programs need, or empty
  std::string_view why;
};
inline constexpr toolchain_home kToolchainHomes[] = {
    {"~/.cargo", "~/.rustup", "Rust: cargo's home; the rustup proxies in ~/.cargo/bin run the toolchains in ~/.rustup"},
    {"~/.rustup", "", "Rust: the toolchains rustup installed"},
    {"~/.pyenv", "", "pyenv: its shims run the Python versions below ~/.pyenv/versions"},
    {"~/.nvm", "", "nvm: the Node versions below ~/.nvm/versions"},
    {"~/.rbenv", "", "rbenv: its shims run the Ruby versions below ~/.rbenv/versions"},
    {"~/.asdf", "", "asdf: its shims run the tools below ~/.asdf/installs"},
    {"~/.volta", "", "Volta: its shims run the tools below ~/.volta/tools"},
    {"~/.sdkman", "", "SDKMAN!: the JDKs and build tools below ~/.sdkman/candidates"},
    {"~/.deno", "", "Deno"},
    {"~/.bun", "", "Bun"},
    {"~/go", "", "Go: the commands in ~/go/bin and the module cache they were built from"},
    {"~/.local/bin", "~/.local/share/pipx", "~/.local/bin: pipx links its commands into its virtual environments"},
};

// P4 inside toolchain homes (E4). A toolchain home holds, per installed
// version, the global configuration files of its package managers, and they
// carry registry tokens and index passwords as surely as ~/.npmrc does. They
// are read-denied wherever the home becomes visible (a toolchain on PATH, a
// bind of HOME). A `*` is one directory name (the version), expanded at
// launch from what is on the host (host_facts::list_dir): a version
// installed while a session runs is not masked in that session.
// Left readable on purpose: ~/.cargo/config.toml (cargo's settings, needed
// for source replacement and build flags; `cargo login` writes its token to
// credentials.toml, which kReadDenyPaths masks).
inline constexpr denied_path kToolchainReadDenyPaths[] = {
    {"~/.nvm/versions/node/*/etc/npmrc", path_shape::file, "npm's global config of an nvm Node (registry auth tokens)"},
    {"~/.volta/tools/image/node/*/etc/npmrc", path_shape::file,
     "npm's global config of a Volta Node (registry auth tokens)"},
    {"~/.asdf/installs/nodejs/*/etc/npmrc", path_shape::file,
     "npm's global config of an asdf Node (registry auth tokens)"},
    {"~/.pyenv/versions/*/pip.conf", path_shape::file, "pip's config of a pyenv Python (index passwords)"},
    {"~/.asdf/installs/python/*/pip.conf", path_shape::file, "pip's config of an asdf Python (index passwords)"},
    {"~/.local/share/pipx/venvs/*/pip.conf", path_shape::file, "pip's config of a pipx environment (index passwords)"},
    {"~/.rbenv/versions/*/etc/gemrc", path_shape::file,
     "RubyGems' system config of an rbenv Ruby (sources with credentials)"},
    {"~/.asdf/installs/ruby/*/etc/gemrc", path_shape::file,
     "RubyGems' system config of an asdf Ruby (sources with credentials)"},
    {"~/.sdkman/candidates/maven/*/conf/settings.xml", path_shape::file,
     "Maven's global settings of an SDKMAN! Maven (server passwords)"},
    {"~/.sdkman/candidates/gradle/*/gradle.properties", path_shape::file,
     "an SDKMAN! Gradle installation's properties (repository credentials)"},
};

// P7: required write-deny name globs, at any depth of a writable root.
inline constexpr listed_path kRequiredWriteDenyGlobs[] = {
    {".env", "environment files hold credentials"},
    {"*.key", "private keys"},
    {"*.pem", "certificates and private keys"},
};

// M5: binaries a sandboxed command may never execute (Seatbelt renders these
// as process-exec denials; they elevate privileges or reach credentials).
inline constexpr listed_path kDangerousBinaries[] = {
    {"/usr/bin/sudo", "privilege elevation"},
    {"/bin/su", "privilege elevation"},
    {"/usr/bin/su", "privilege elevation"},
    {"/usr/bin/doas", "privilege elevation"},
    {"/usr/bin/pkexec", "privilege elevation"},
    {"/usr/bin/login", "new login session"},
    {"/usr/bin/security", "macOS keychain access"},
    {"/usr/bin/osascript", "macOS automation of other applications"},
    {"/usr/sbin/sysadminctl", "macOS account administration"},
    {"/usr/bin/dscl", "macOS directory services (accounts)"},
};

// Bind mounts the policy refuses (P8), decided on the resolved spelling of
// every bind mount, runner state dir and terminal root.
//
// "/" is never bound at all: it would hide the sandbox's own /proc, /dev,
// /tmp and minimal /etc behind the host's, and a writable one is the whole
// host. Nor is anything at or below these trees, in any mode:
inline constexpr listed_path kNeverBoundTrees[] = {
    {"/proc", "the host's processes and kernel settings (the sandbox has its own /proc)"},
    {"/sys", "kernel, device and cgroup settings"},
    {"/dev", "host devices: kmsg, kvm, loop and disk devices (the sandbox has its own /dev)"},
};
// Never writable, at or below (read-only is fine: the sandbox sees these
// read-only anyway; kSystemReadDenyPaths masks the secrets in /etc):
inline constexpr listed_path kNeverWritableTrees[] = {
    {"/usr", "host programs and libraries"},
    {"/etc", "host configuration: accounts, sudoers, services, cron"},
    {"/bin", "host programs"},
    {"/sbin", "host programs"},
    {"/lib", "host libraries and kernel modules"},
    {"/lib32", "host libraries"},
    {"/lib64", "host libraries and the dynamic loader"},
    {"/libx32", "host libraries"},
    {"/boot", "kernel, initramfs and boot loader"},
    {"/var/spool", "cron and at jobs, mail"},
    {"/var/lib/dpkg", "package database and maintainer scripts"},
};
// Never writable as a whole; a directory below them may be a workspace
// (/var/lib/ci/ws, /home/u, /tmp/job):
inline constexpr listed_path kNeverWritableItself[] = {
    {"/var", "service state, logs, caches of the whole host"},
    {"/home", "every user's HOME"},
    {"/opt", "third-party programs"},
    {"/srv", "data the host serves"},
    {"/run", "host services' sockets, pid files and runtime state"},
    {"/tmp", "shared by every user and service"},
    {"/var/tmp", "shared by every user and service"},
    {"/mnt", "mounted file systems"},
    {"/media", "mounted removable media"},
};

// Absolute and lexically normal: no empty, "." or ".." component, no
// trailing slash (but "/"), no NUL byte. The one check of the broker's
// paths (broker/decide.hpp) and of the guest protocol's (protocol/guest.hpp).
constexpr bool is_normal_absolute(std::string_view p) noexcept {
  if (p.empty() || p.front() != '/') return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  std::size_t i = 1;
  while (i <= p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    if (c.empty() || c == "." || c == "..") return false;
    for (char ch : c)
      if (ch == '\0') return false;
    i = j + 1;
  }
  return true;
}

// Lexically normalised absolute path: collapses "//", removes "." and
// resolves ".." without touching the file system; no trailing slash (except
// "/"). Returns an empty string for a relative path.
inline std::string lexical_normal(std::string_view p) {
  if (p.empty() || p.front() != '/') return {};
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == '/') ++i;
    std::size_t j = i;
    while (j < p.size() && p[j] != '/') ++j;
    std::string_view part = p.substr(i, j - i);
    if (part.empty() || part == ".") {
    } else if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else {
      parts.push_back(part);
    }
    i = j;
  }
  std::string out;
  for (auto part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

// True when `p` is `root` or lies below it (both lexically normal).
constexpr bool within(std::string_view p, std::string_view root) noexcept {
  if (root == "/") return true;
  if (p.size() < root.size() || p.substr(0, root.size()) != root) return false;
  return p.size() == root.size() || p[root.size()] == '/';
}

// True when `p` holds a glob wildcard (* or ?).
constexpr bool is_glob(std::string_view p) noexcept { return p.find_first_of("*?") != std::string_view::npos; }


// The parent of an absolute path ("/" for "/" and for a top-level name).
inline std::string parent_of(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return p.substr(0, slash);
}

// Ancestors of an absolute path, nearest first, "/" included.
inline std::vector<std::string> ancestors_of(const std::string& p) {
  std::vector<std::string> out;
  for (std::string a = p; a != "/";) {
    auto slash = a.rfind('/');
    if (slash == std::string::npos) break;
    a = slash == 0 ? std::string("/") : a.substr(0, slash);
    out.push_back(a);
  }
  return out;
}

// The bubblewrap renderer (render/bwrap/) spells `within` as detail::within.
} // namespace ccsb
