// ccsb/paths.hpp — the curated path sets of §3 and lexical path helpers.
//
// P4 read-deny (secrets), P5 mandatory write-deny, M5 dangerous binaries,
// P7 required write-deny globs. Each entry says why it is there. Entries
// starting with "~/" are relative to the home directory of the host facts;
// entries starting with "./" are relative to every writable root.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

struct listed_path {
  std::string_view path;
  std::string_view why;
};

// P4: credential stores. A sandboxed command can read neither these files
// nor anything below these directories.
inline constexpr listed_path kReadDenyPaths[] = {
    {"~/.ssh", "SSH private keys, agent config and known hosts"},
    {"~/.aws", "AWS access keys and SSO tokens"},
    {"~/.gnupg", "GnuPG private keys"},
    {"~/.config/gh", "GitHub CLI OAuth tokens"},
    {"~/Library/Keychains", "macOS keychains"},
    {"~/.netrc", "plain-text passwords for curl, git, ftp"},
    {"~/.git-credentials", "git credential-store passwords and tokens"},
    {"~/.config/git/credentials", "git credential-store (XDG location)"},
    {"~/.docker/config.json", "container registry auth tokens"},
    {"~/.kube", "Kubernetes cluster credentials"},
    {"~/.config/gcloud", "Google Cloud credentials and tokens"},
    {"~/.azure", "Azure CLI tokens"},
    {"~/.npmrc", "JavaScript registry auth tokens"},
    {"~/.yarnrc.yml", "JavaScript registry auth tokens (Yarn)"},
    {"~/.pypirc", "Python package upload credentials"},
    {"~/.config/pip", "pip index credentials"},
    {"~/.cargo/credentials.toml", "Rust crate registry tokens"},
    {"~/.cargo/credentials", "Rust crate registry tokens (legacy name)"},
    {"~/.gem/credentials", "RubyGems API key"},
    {"~/.m2/settings.xml", "Maven repository passwords"},
    {"~/.gradle/gradle.properties", "Gradle repository credentials"},
    {"~/.nuget/NuGet/NuGet.Config", ".NET package source credentials"},
    {"~/.terraform.d/credentials.tfrc.json", "Terraform Cloud tokens"},
    {"~/.config/hub", "hub CLI GitHub token"},
    {"~/.config/glab-cli", "GitLab CLI tokens"},
    {"~/.vault-token", "HashiCorp Vault token"},
    {"~/.password-store", "pass(1) password store"},
    {"~/.local/share/keyrings", "GNOME keyring"},
    {"~/.mozilla", "browser profile: cookies and saved passwords"},
    {"~/.config/google-chrome", "browser profile: cookies and saved passwords"},
    {"~/.config/chromium", "browser profile: cookies and saved passwords"},
    {"~/Library/Application Support/Google/Chrome", "browser profile (macOS)"},
    {"~/Library/Cookies", "macOS cookies"},
    {"~/.claude/.credentials.json", "Claude Code OAuth credentials"},
};

// P4 core: the subset the terminal profile denies (T2).
inline constexpr listed_path kTerminalReadDenyPaths[] = {
    {"~/.ssh", "SSH private keys"},
    {"~/.aws", "AWS access keys"},
    {"~/.gnupg", "GnuPG private keys"},
    {"~/.config/gh", "GitHub CLI tokens"},
    {"~/Library/Keychains", "macOS keychains"},
};

// P5: never writable, even inside a writable root.
inline constexpr listed_path kWriteDenyPaths[] = {
    // Shell start-up files: a write here runs code in the user's next shell.
    {"~/.bashrc", "bash start-up file"},
    {"~/.bash_profile", "bash login start-up file"},
    {"~/.bash_login", "bash login start-up file"},
    {"~/.bash_logout", "bash logout file"},
    {"~/.profile", "POSIX login start-up file"},
    {"~/.zshrc", "zsh start-up file"},
    {"~/.zshenv", "zsh start-up file (every zsh)"},
    {"~/.zprofile", "zsh login start-up file"},
    {"~/.zlogin", "zsh login start-up file"},
    {"~/.zlogout", "zsh logout file"},
    {"~/.config/fish", "fish start-up files"},
    {"~/.inputrc", "readline key bindings (can bind keys to commands)"},
    // Git: configuration keys that run programs (core.hooksPath,
    // core.sshCommand, core.fsmonitor, alias.*) and hooks.
    {"~/.gitconfig", "git config keys that run programs"},
    {"~/.config/git", "git config keys that run programs (XDG)"},
    // Claude configuration: settings, hooks and commands run code.
    {"~/.claude", "Claude configuration (hooks, settings, commands)"},
    {"~/.claude.json", "Claude configuration"},
    // Per writable root.
    {"./.git/hooks", "git hooks run on the user's next git command"},
    {"./.git/config", "git config keys that run programs"},
    {"./.claude", "Claude project configuration (hooks, commands)"},
    {"./.bashrc", "shell start-up file in a writable root"},
    {"./.profile", "shell start-up file in a writable root"},
    {"./.zshrc", "shell start-up file in a writable root"},
    {"./.zshenv", "shell start-up file in a writable root"},
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

namespace detail {

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
inline bool within(std::string_view p, std::string_view root) {
  if (root == "/") return true;
  if (p.size() < root.size() || p.substr(0, root.size()) != root) return false;
  return p.size() == root.size() || p[root.size()] == '/';
}

inline bool is_glob(std::string_view p) { return p.find_first_of("*?") != std::string_view::npos; }

} // namespace detail
} // namespace ccsb
