// ccsb/environment.hpp — child environment rules (E1-E3, N2).
//
// E3 sanitisation removes, on every backend including `none`:
//  1. injection vectors: variables that make a program load or run code it
//     was not asked to (the dynamic loader, shell start-up, interpreter
//     options, git's program hooks, pagers and askpass helpers);
//  2. credentials: any variable whose name contains one of the credential
//     words below, or starts with a cloud/forge/LLM credential prefix;
//  3. proxy variables: the policy sets its own (N2).
// Names are compared case-insensitively for rules 2 and 3. The rule is a
// deny rule applied after the E1 pass list, so it also protects the `none`
// backend, where the whole host environment would otherwise pass.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace ccsb {

struct env_var {
  std::string name;
  std::string value;
  friend bool operator==(const env_var&, const env_var&) = default;
  friend auto operator<=>(const env_var&, const env_var&) = default;
};
using env_list = std::vector<env_var>;

struct env_rule {
  std::string_view pattern; // exact name, "PREFIX*" or "*WORD*"
  std::string_view why;
};

inline constexpr env_rule kInjectionVariables[] = {
    {"LD_*", "dynamic loader: preload/library path injection"},
    {"DYLD_*", "macOS dynamic loader injection"},
    {"BASH_ENV", "file sourced by every non-interactive bash"},
    {"ENV", "file sourced by sh/ksh at start-up"},
    {"BASH_FUNC_*", "exported bash functions (shellshock-style injection)"},
    {"PROMPT_COMMAND", "command bash runs before each prompt"},
    {"PS4", "expanded (and command-substituted) by bash -x"},
    {"SHELLOPTS", "shell options inherited by child shells"},
    {"BASHOPTS", "shell options inherited by child shells"},
    {"IFS", "word splitting of every script"},
    {"CDPATH", "changes where scripts' cd lands"},
    {"GLOBIGNORE", "changes globbing of every script"},
    {"ZDOTDIR", "where zsh reads its start-up files"},
    {"PYTHONSTARTUP", "file run by interactive python"},
    {"PYTHONPATH", "modules imported before the program's own"},
    {"PYTHONHOME", "replaces the Python standard library"},
    {"PYTHONINSPECT", "drops python into interactive mode"},
    {"PERL5OPT", "options (-M modules) for every perl"},
    {"PERL5LIB", "modules loaded before the program's own"},
    {"PERLLIB", "modules loaded before the program's own"},
    {"RUBYOPT", "options (-r libraries) for every ruby"},
    {"RUBYLIB", "libraries loaded before the program's own"},
    {"NODE_OPTIONS", "--require/--import for every node"},
    {"NODE_PATH", "modules resolved before the program's own"},
    {"JAVA_TOOL_OPTIONS", "-javaagent for every JVM"},
    {"_JAVA_OPTIONS", "options for every JVM"},
    {"JDK_JAVA_OPTIONS", "options for every java launcher"},
    {"GIT_*", "git: config injection, ssh/askpass programs, exec path, alternate dirs"},
    {"SSH_ASKPASS", "program run to ask for passwords"},
    {"SUDO_ASKPASS", "program run to ask for passwords"},
    {"SSH_AUTH_SOCK", "access to the user's SSH agent (its keys)"},
    {"GPG_AGENT_INFO", "access to the user's GnuPG agent"},
    {"LESSOPEN", "input preprocessor run by less"},
    {"LESSCLOSE", "post-processor run by less"},
    {"PAGER", "program run by git, man and others"},
    {"MANPAGER", "program run by man"},
    {"EDITOR", "program run by git commit and others"},
    {"VISUAL", "program run by git commit and others"},
    {"BROWSER", "program run to open URLs"},
    {"PERLDB_OPTS", "perl debugger commands"},
};

inline constexpr env_rule kCredentialWords[] = {
    {"*TOKEN*", "tokens"},
    {"*SECRET*", "secrets"},
    {"*PASSWORD*", "passwords"},
    {"*PASSWD*", "passwords"},
    {"*PASSPHRASE*", "passphrases"},
    {"*CREDENTIAL*", "credentials and credential file paths"},
    {"*API_KEY*", "API keys"},
    {"*APIKEY*", "API keys"},
    {"*ACCESS_KEY*", "access keys"},
    {"*PRIVATE_KEY*", "private keys"},
    {"*AUTH*", "auth headers, tokens, helpers"},
    {"*COOKIE*", "session cookies"},
    {"*SESSION_KEY*", "session keys"},
    {"AWS_*", "AWS credentials and profiles"},
    {"AZURE_*", "Azure credentials"},
    {"GOOGLE_*", "Google Cloud credentials"},
    {"CLOUDSDK_*", "Google Cloud SDK auth"},
    {"GH_*", "GitHub CLI tokens"},
    {"GITHUB_*", "GitHub tokens"},
    {"GITLAB_*", "GitLab tokens"},
    {"ANTHROPIC_*", "Anthropic API keys"},
    {"OPENAI_*", "OpenAI API keys"},
    {"HF_*", "Hugging Face tokens"},
    {"VAULT_*", "Vault tokens and addresses"},
    {"KUBECONFIG", "Kubernetes credentials file"},
    {"DOCKER_CONFIG", "container registry credentials directory"},
    {"NETRC", "curl/git password file"},
};

inline constexpr env_rule kProxyVariables[] = {
    {"HTTP_PROXY", "set by the policy (N2)"},   {"HTTPS_PROXY", "set by the policy (N2)"},
    {"ALL_PROXY", "set by the policy (N2)"},    {"NO_PROXY", "set by the policy (N2)"},
    {"FTP_PROXY", "set by the policy (N2)"},    {"SOCKS_PROXY", "set by the policy (N2)"},
    {"npm_config_proxy", "set by the policy (N2)"}, {"npm_config_https_proxy", "set by the policy (N2)"},
};

namespace detail {

inline std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

// "X*" prefix, "*X*" contains, otherwise exact; `name` already upper-case.
inline bool env_pattern_matches(std::string_view pattern, std::string_view name) {
  std::string pat = upper(pattern);
  std::string_view p = pat;
  if (p.size() >= 2 && p.front() == '*' && p.back() == '*')
    return name.find(p.substr(1, p.size() - 2)) != std::string_view::npos;
  if (!p.empty() && p.back() == '*') return name.substr(0, p.size() - 1) == p.substr(0, p.size() - 1);
  return name == p;
}

} // namespace detail

struct removed_var {
  std::string name;
  std::string why;
  friend bool operator==(const removed_var&, const removed_var&) = default;
};

struct sanitized_env {
  env_list kept;
  std::vector<removed_var> removed;
};

// E3. Also drops names that are empty or contain '=' (they cannot be passed
// faithfully through execve).
inline sanitized_env sanitize_environment(const env_list& in) {
  sanitized_env out;
  for (const auto& v : in) {
    if (v.name.empty() || v.name.find('=') != std::string::npos) {
      out.removed.push_back({v.name, "malformed variable name"});
      continue;
    }
    std::string up = detail::upper(v.name);
    const env_rule* hit = nullptr;
    for (const auto& r : kInjectionVariables)
      if (detail::env_pattern_matches(r.pattern, up)) { hit = &r; break; }
    if (!hit)
      for (const auto& r : kCredentialWords)
        if (detail::env_pattern_matches(r.pattern, up)) { hit = &r; break; }
    if (!hit)
      for (const auto& r : kProxyVariables)
        if (detail::env_pattern_matches(r.pattern, up)) { hit = &r; break; }
    if (hit)
      out.removed.push_back({v.name, std::string(hit->why)});
    else
      out.kept.push_back(v);
  }
  return out;
}

// N2 / E2: the proxy variables for a sandboxed process. `http` and `socks`
// are host:port of the proxies as seen from inside the sandbox.
// Which runtimes honour which variable (see README, "Proxy variables"):
//   HTTP_PROXY/HTTPS_PROXY (+ lowercase): curl, wget, git, pip, cargo, go,
//   gem, bundler, apt; ALL_PROXY (+ lowercase): curl via SOCKS;
//   NO_PROXY (+ lowercase): loopback only, so local test servers stay local;
//   npm_config_proxy/npm_config_https_proxy: npm; JAVA_TOOL_OPTIONS is not
//   used (it is an injection vector); GIT_SSH_COMMAND: git over SSH through
//   the SOCKS proxy via ssh's ProxyCommand with socat. Debian 12's socat
//   (1.7.4) speaks SOCKS4a, not SOCKS5, to a SOCKS server, so egressd's SOCKS
//   listener also accepts SOCKS4a with exactly the same checks; the host name
//   is sent to the proxy unresolved.
inline env_list proxy_environment(std::string_view http, std::string_view socks) {
  std::string h = "http://" + std::string(http);
  std::string s = "socks5h://" + std::string(socks);
  std::string no_proxy = "localhost,127.0.0.1,::1";
  std::string_view socks_host = socks.substr(0, socks.rfind(':'));
  std::string_view socks_port = socks.substr(socks.rfind(':') + 1);
  std::string git_ssh = "ssh -o ProxyCommand='socat - SOCKS4A:" + std::string(socks_host) +
                        ":%h:%p,socksport=" + std::string(socks_port) + "'";
  return {
      {"HTTP_PROXY", h},         {"HTTPS_PROXY", h},           {"http_proxy", h},
      {"https_proxy", h},        {"ALL_PROXY", s},             {"all_proxy", s},
      {"NO_PROXY", no_proxy},    {"no_proxy", no_proxy},       {"npm_config_proxy", h},
      {"npm_config_https_proxy", h}, {"GIT_SSH_COMMAND", git_ssh},
  };
}

} // namespace ccsb
