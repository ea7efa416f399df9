// ccsb/environment.hpp — child environment rules (E1-E3, N2).
//
// E3 sanitisation runs on every backend including `none`, where the whole
// host environment would otherwise reach the command, after the E1 pass list
// (and on what `--env` adds). It is a deny rule over FAMILIES of variables,
// not a list of names, and it fails closed: a variable that looks like a
// member of a family is removed even when that member would have been
// harmless. A variable is removed when
//
//  1. its name is malformed (empty, or contains '=': execve cannot pass it);
//  2. its name is a proxy variable (kProxyVariables): the policy sets its own
//     (N2);
//  3. its name matches a pattern of kInjectionVariables: it makes a runtime
//     load code, a configuration or a helper program (loader, libc, shells,
//     interpreters, build tools, wrappers, editors/pagers, config and XDG
//     redirects), or gives access to a host service (agents, D-Bus, container
//     engines, terminal multiplexers, the display);
//  4. one of its name TOKENS matches kInjectionTokens (…PATH, …DIRS, LIB…,
//     …HOME, CONF…/…CONFIG, …RC, OPT…, …FLAGS, …ARGS, INIT…, STARTUP, HOOK…,
//     PLUGIN…, MODULE…, PRELOAD, COMMAND, …PAGER, …EDITOR, …SHELL, …SOCK,
//     …SOCKET);
//  5. its name matches a credential family of kCredentialVariables (cloud,
//     forge, LLM, secret-manager and Kerberos prefixes, trust stores),
//     contains a word of kCredentialWords (TOKEN, SECRET, PASS, CREDENTIAL,
//     AUTH, COOKIE, JWT, WEBHOOK, PRIVATE, APIKEY, BEARER) or has a token
//     matching kCredentialTokens (KEY…/…KEY, …PWD, PW, …PSK, …SESSION…,
//     …DSN, CERT…/…CERT, SIG, SIGNATURE…);
//  6. a name token ends in PROXY: proxy settings other than the policy's;
//  7. its VALUE looks like a credential, whatever the name: a URL with user
//     info, a credential-named parameter (URL query, connection string, JSON
//     key), an HTTP Bearer/Basic/token authorisation, a PEM block, a
//     well-known token format (kTokenFormats) or a JSON Web Token;
//  8. it is a prompt variable (kPromptVariables) whose value makes the shell
//     run code at every prompt ($(…), backquotes, ${…}, $[…], also when
//     spelled with bash's \NNN octal escapes). PS4 and PROMPT_COMMAND go
//     whatever their value (rule 3).
//
// Tokens are the maximal runs of letters and digits of the upper-cased name
// ("npm_config_script_shell" -> NPM CONFIG SCRIPT SHELL), so a rule covers
// its word anywhere in the name and a new tool's variable falls into its
// family. Token rules say whether the token must BE the word, start or end
// with it, or contain it ("KEY" starts-or-ends: KEY, KEYS, APIKEY, KEYTAB,
// SSHKEY; not KEYBOARD, see kNotCredentialTokens). Names are compared
// case-insensitively; values case-sensitively except for parameter names and
// authorisation schemes.
//
// Exceptions are exact and documented: kInertVariables are names that rules
// 3-6 would catch but that are known to carry neither a credential nor a
// vector (PATH, HOME, SHELL, PWD, XDG_SESSION_TYPE, …); rules 7 and 8 still
// apply to them. kNotCredentialTokens are ordinary words that contain KEY.
//
// Every removal carries the reason of the first rule that matched
// (sanitized_env::removed); reasons start with their family: "injection:",
// "host access:", "credential:", "credential value:", "proxy:" or
// "malformed". Every table entry carries its reason; the static_asserts
// below reject an entry without one or with a pattern this file cannot
// match.
//
// Known casualties of failing closed (nothing of these families passes,
// harmless members included): PYTHON* (but for two flags), NODE_* (NODE_ENV
// too), PERL*, RUBY*, PIP_*, CARGO_*, CMAKE_*, npm_config_*, GIT_*, DOCKER_*,
// LESS; JAVA_HOME and every other …HOME, GOPATH/MANPATH and every other
// …PATH; TLS trust-store settings (SSL_CERT_FILE, *_CA_BUNDLE: a host that
// needs a private CA gets TLS errors, not a silent downgrade); GITHUB_* CI
// metadata; TOKENIZERS_PARALLELISM (TOKEN); ssh://git@host URLs (user
// info); a prompt using ${…} such as Debian's ${debian_chroot:+…}.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccsb {

struct env_var {
  std::string name;
  std::string value;
  friend bool operator==(const env_var&, const env_var&) = default;
  friend auto operator<=>(const env_var&, const env_var&) = default;
};
using env_list = std::vector<env_var>;

// A name pattern: "NAME" exact, "PREFIX*", "*SUFFIX", "*WORD*" (contains) or
// "PREFIX*SUFFIX".
struct env_rule {
  std::string_view pattern;
  std::string_view why;
};

// How a token rule's word meets one token of the name.
enum class token_match {
  whole,          // the token is the word
  starts,         // the token starts with the word
  ends,           // the token ends with the word
  starts_or_ends, // either
  contains,       // the word is anywhere in the token
};

struct env_token_rule {
  std::string_view word;
  token_match how;
  std::string_view why;
};

// Exact names, and tokens, that the rules would otherwise remove.
struct env_exception {
  std::string_view name;
  std::string_view why;
};

inline constexpr env_exception kInertVariables[] = {
    {"PATH", "the program search path E1 passes; the …PATH token rule is for other search paths"},
    {"HOME", "the home directory E1 passes; the …HOME token rule is for redirected tool homes"},
    {"SHELL", "the user's login shell (E1); shells for scripts use other names (…SHELL rule)"},
    {"PWD", "the working directory the shell maintains, not a password"},
    {"OLDPWD", "the previous working directory, not a password"},
    {"XDG_SESSION_TYPE", "x11/wayland/tty: describes the login session, carries no secret"},
    {"XDG_SESSION_CLASS", "user/greeter: describes the login session, carries no secret"},
    {"XDG_SESSION_DESKTOP", "the desktop's name, carries no secret"},
    {"DESKTOP_SESSION", "the desktop's name, carries no secret"},
    {"PYTHONUNBUFFERED", "a flag: python only tests whether it is set, and loads nothing"},
    {"PYTHONDONTWRITEBYTECODE", "a flag: python only tests whether it is set, and loads nothing"},
};

inline constexpr env_exception kNotCredentialTokens[] = {
    {"KEYBOARD", "keyboard layout and model settings, not keys"},
    {"KEYMAP", "console and editor key maps, not keys"},
};

inline constexpr env_rule kProxyVariables[] = {
    {"HTTP_PROXY", "proxy: set by the policy (N2)"},
    {"HTTPS_PROXY", "proxy: set by the policy (N2)"},
    {"ALL_PROXY", "proxy: set by the policy (N2)"},
    {"NO_PROXY", "proxy: set by the policy (N2)"},
    {"FTP_PROXY", "proxy: set by the policy (N2)"},
    {"SOCKS_PROXY", "proxy: set by the policy (N2)"},
    {"npm_config_proxy", "proxy: set by the policy (N2)"},
    {"npm_config_https_proxy", "proxy: set by the policy (N2)"},
    {"npm_config_noproxy", "proxy: set by the policy (N2)"},
    {"YARN_HTTP_PROXY", "proxy: set by the policy (N2, E4)"},
    {"YARN_HTTPS_PROXY", "proxy: set by the policy (N2, E4)"},
    {"GRPC_PROXY", "proxy: set by the policy (N2, E4)"},
    {"WS_PROXY", "proxy: set by the policy (N2, E4)"},
    {"WSS_PROXY", "proxy: set by the policy (N2, E4)"},
    {"RSYNC_PROXY", "proxy: set by the policy (N2, E4)"},
};

inline constexpr env_rule kInjectionVariables[] = {
    // Dynamic loader and libc.
    {"LD_*", "injection: dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT load code into every program)"},
    {"DYLD_*", "injection: macOS dynamic loader (DYLD_INSERT_LIBRARIES loads code into every program)"},
    {"GCONV_PATH", "injection: glibc loads iconv modules (shared objects) from it"},
    {"GLIBC_TUNABLES", "injection: glibc tunables, parsed by the loader of every program"},
    {"MALLOC_*", "injection: glibc allocator settings (MALLOC_TRACE writes a file; the rest are tunables)"},
    {"LOCPATH", "injection: libc reads it though set-uid programs must not (locale data)"},
    {"NLSPATH", "injection: libc reads it though set-uid programs must not (message catalogues)"},
    {"NIS_PATH", "injection: libc reads it though set-uid programs must not (NIS+ tables)"},
    {"HOSTALIASES", "injection: libc reads it though set-uid programs must not (resolver aliases)"},
    {"LOCALDOMAIN", "injection: libc reads it though set-uid programs must not (resolver search list)"},
    {"RES_OPTIONS", "injection: libc reads it though set-uid programs must not (resolver options)"},
    {"RESOLV_HOST_CONF", "injection: libc reads it though set-uid programs must not (resolver config)"},
    {"GETCONF_DIR", "injection: libc reads it though set-uid programs must not (getconf programs)"},
    {"TZDIR", "injection: libc reads it though set-uid programs must not (zone files)"},
    // Shells.
    {"BASH_ENV", "injection: file sourced by every non-interactive bash"},
    {"ENV", "injection: file sourced by sh/ksh at start-up"},
    {"BASH_FUNC_*", "injection: exported bash functions (shellshock-style injection)"},
    {"PROMPT_COMMAND", "injection: command bash runs before each prompt"},
    {"PS4", "injection: expanded (and command-substituted) by bash -x in every traced script"},
    {"SHELLOPTS", "injection: shell options inherited by child shells"},
    {"BASHOPTS", "injection: shell options inherited by child shells"},
    {"IFS", "injection: word splitting of every script"},
    {"CDPATH", "injection: changes where scripts' cd lands"},
    {"GLOBIGNORE", "injection: changes globbing of every script"},
    {"ZDOTDIR", "injection: where zsh reads its start-up files"},
    {"FPATH", "injection: ksh/zsh autoload functions from it"},
    {"INPUTRC", "injection: readline key bindings and macros (can type commands into a shell)"},
    {"BASH_LOADABLES_PATH", "injection: bash `enable -f` loads builtins (shared objects) from it"},
    {"BASH_XTRACEFD", "injection: redirects bash -x output to another descriptor"},
    // Interpreters and runtimes: every variable of the family configures them.
    {"PYTHON*", "injection: python reads PYTHON* (PYTHONPATH/PYTHONHOME/PYTHONUSERBASE replace modules, "
                "PYTHONSTARTUP runs a file, PYTHONWARNINGS/PYTHONBREAKPOINT import modules)"},
    {"PERL*", "injection: perl reads PERL* (PERL5OPT -M modules, PERL5LIB/PERLLIB, PERL5DB debugger code, "
              "PERLDB_OPTS, PERL_MM_OPT)"},
    {"RUBY*", "injection: ruby reads RUBYOPT (-r libraries), RUBYLIB and RUBYSHELL"},
    {"GEM_*", "injection: rubygems loads gems from GEM_HOME/GEM_PATH"},
    {"BUNDLE_*", "injection: bundler configuration (BUNDLE_GEMFILE runs a Ruby file; host credentials)"},
    {"NODE_*", "injection: node reads NODE_OPTIONS (--require/--import), NODE_PATH, NODE_REPL_EXTERNAL_MODULE"},
    {"NPM_CONFIG_*", "injection: npm takes every npm_config_* as configuration (script-shell, node-options, "
                     "userconfig, _auth)"},
    {"YARN_*", "injection: yarn takes every YARN_* as configuration (yarnPath runs a file; npm auth tokens)"},
    {"PIP_*", "injection: pip takes every PIP_* as an option (PIP_INDEX_URL/PIP_EXTRA_INDEX_URL choose where "
              "packages, whose builds run code, come from; PIP_CONFIG_FILE)"},
    {"UV_*", "injection: uv takes every UV_* as an option (package indexes, Python downloads, config file)"},
    {"COREPACK_*", "injection: corepack downloads and runs package managers as configured here"},
    {"JAVA_TOOL_OPTIONS", "injection: -javaagent for every JVM"},
    {"_JAVA_OPTIONS", "injection: options for every JVM"},
    {"JDK_JAVA_OPTIONS", "injection: options for every java launcher"},
    {"CLASSPATH", "injection: classes loaded before the program's own"},
    {"GRADLE_*", "injection: gradle options and user home (init.d scripts run in every build)"},
    {"MAVEN_*", "injection: maven options (-javaagent, extensions)"},
    {"LUA_*", "injection: lua runs LUA_INIT (code or @file) and loads modules from LUA_PATH/LUA_CPATH"},
    {"PHPRC", "injection: php.ini location (auto_prepend_file runs code)"},
    {"PHP_*", "injection: php configuration (PHP_INI_SCAN_DIR adds ini files)"},
    {"R_PROFILE*", "injection: R runs the profile file at start-up"},
    {"R_ENVIRON*", "injection: R reads the environment file at start-up"},
    {"ERL_*", "injection: Erlang emulator flags (-eval) and code paths"},
    {"DOTNET_*", "injection: .NET host settings (DOTNET_STARTUP_HOOKS, DOTNET_ADDITIONAL_DEPS load assemblies)"},
    {"CORECLR_*", "injection: CoreCLR loads a profiler library"},
    {"COREHOST_*", "injection: .NET host settings and tracing"},
    {"COMPLUS_*", "injection: .NET runtime settings (profilers, JIT)"},
    {"MONO_*", "injection: mono options and assembly paths"},
    {"GHC_ENVIRONMENT", "injection: GHC loads a package environment file"},
    {"GOFLAGS", "injection: flags for every go command (-toolexec runs a program for every tool)"},
    {"GOENV", "injection: go reads its settings from this file"},
    {"GOROOT", "injection: replaces the go toolchain and standard library"},
    {"GOTOOLCHAIN", "injection: go downloads and runs another toolchain"},
    {"GOPROXY", "injection: where go fetches module code from"},
    {"GONOPROXY", "injection: modules go fetches directly, bypassing the module proxy"},
    {"GOPRIVATE", "injection: modules go fetches without checksum verification"},
    {"GONOSUMDB", "injection: modules go fetches without checksum verification"},
    {"GONOSUMCHECK", "injection: turns off go checksum verification"},
    {"GOSUMDB", "injection: the checksum database go trusts (off disables verification)"},
    {"GOINSECURE", "injection: modules go fetches over plain HTTP"},
    {"GOVCS", "injection: version control systems go may run"},
    {"CGO_*", "injection: cgo compiler and linker flags (and their allow lists)"},
    {"RUSTC*", "injection: the rust compiler and its wrappers (RUSTC, RUSTC_WRAPPER)"},
    {"RUSTDOC*", "injection: rustdoc program and flags"},
    {"RUSTFLAGS", "injection: flags for every rustc (-C linker= runs a program)"},
    {"RUSTUP_*", "injection: rustup toolchain selection (a path runs its binaries)"},
    {"CARGO_*", "injection: cargo takes every CARGO_* as configuration (rustc wrappers, target runners, "
                "linkers, registry tokens)"},
    // Build tools.
    {"CC", "injection: the C compiler make and configure run"},
    {"CXX", "injection: the C++ compiler make and configure run"},
    {"CPP", "injection: the C preprocessor make and configure run"},
    {"LD", "injection: the linker make and configure run"},
    {"AR", "injection: the archiver make and configure run"},
    {"AS", "injection: the assembler make and configure run"},
    {"FC", "injection: the Fortran compiler make and configure run"},
    {"MAKEFILES", "injection: makefiles GNU make reads before every makefile"},
    {"MFLAGS", "injection: flags for every make"},
    {"GCC_EXEC_PREFIX", "injection: where gcc finds its subprograms (cc1, as, collect2)"},
    {"CMAKE_*", "injection: cmake toolchain files, compiler launchers and package search paths"},
    {"CCACHE_*", "injection: ccache settings (CCACHE_PREFIX, CCACHE_COMPILER run programs)"},
    {"DISTCC_*", "injection: distcc hosts and commands"},
    {"*WRAPPER", "injection: a wrapper program run around a tool (RUSTC_WRAPPER, CARGO_BUILD_RUSTC_WRAPPER)"},
    {"*LAUNCHER", "injection: a launcher program run around a tool (CMAKE_C_COMPILER_LAUNCHER)"},
    {"*RUNNER", "injection: a runner program for built binaries (CARGO_TARGET_…_RUNNER)"},
    {"TAR_OPTIONS", "injection: options for every tar (--to-command, --checkpoint-action=exec)"},
    // Helper programs run implicitly.
    {"*ASKPASS*", "injection: program run to ask for passwords (SSH_ASKPASS, SUDO_ASKPASS)"},
    {"VISUAL", "injection: program run by git commit and others"},
    {"BROWSER", "injection: program run to open URLs"},
    {"LESS*", "injection: less options and preprocessors (LESSOPEN/LESSCLOSE run programs, LESSKEY)"},
    {"VIM*", "injection: vim start-up commands and runtime scripts (VIMINIT, VIM, VIMRUNTIME)"},
    {"EXINIT", "injection: ex/vi start-up commands"},
    {"*_RSH", "injection: remote shell program run by rsync/cvs"},
    {"RSYNC_CONNECT_PROG", "injection: program rsync runs to connect"},
    {"SVN_SSH", "injection: ssh program run by subversion"},
    {"OPENSSL_*", "injection: OpenSSL configuration, engines and providers (shared objects)"},
    {"TERMINFO*", "injection: terminal descriptions ncurses parses"},
    {"TERMCAP", "injection: terminal descriptions ncurses parses"},
    {"GIT_*", "injection: git: config injection, ssh/askpass programs, exec path, alternate dirs"},
    // XDG redirects: where every XDG program reads its configuration and data.
    {"XDG_RUNTIME_DIR", "host access: locates the user's session sockets (D-Bus, agents, container engines)"},
    {"XDG_*_HOME", "injection: XDG base directory redirect (configuration, data, state, cache)"},
    {"XDG_*_DIRS", "injection: XDG search path redirect (configuration and data directories)"},
    {"XDG_*_DIR", "injection: XDG directory redirect"},
    // Host services.
    {"SSH_AUTH_SOCK", "host access: the user's SSH agent (its keys)"},
    {"GPG_AGENT_INFO", "host access: the user's GnuPG agent"},
    {"DBUS_*", "host access: the user's D-Bus (secret service keyring, systemd --user runs programs)"},
    {"DOCKER_*", "host access: container engine endpoint, contexts, TLS client keys and config (DOCKER_HOST)"},
    {"CONTAINER_HOST", "host access: podman service endpoint"},
    {"CONTAINER_CONNECTION", "host access: podman service connection"},
    {"BUILDKIT_HOST", "host access: buildkit daemon endpoint"},
    {"TMUX*", "host access: the host's tmux server (send-keys types into other panes)"},
    {"STY", "host access: the host's screen session"},
    {"DISPLAY", "host access: the X display (keystrokes into other windows)"},
    {"WAYLAND_DISPLAY", "host access: the Wayland compositor"},
    {"XAUTHORITY", "host access: X authorisation cookies"},
    {"SESSION_MANAGER", "host access: the desktop session manager's socket"},
    {"KITTY_LISTEN_ON", "host access: kitty remote control (runs commands in the host terminal)"},
    {"NVIM*", "host access: a host neovim's server socket and its configuration"},
};

inline constexpr env_token_rule kInjectionTokens[] = {
    {"PATH", token_match::ends, "injection: a search path other than PATH (a runtime loads modules, libraries "
                                "or files from it)"},
    {"DIRS", token_match::ends, "injection: a directory search list (data, configuration or code is loaded from it)"},
    {"LIB", token_match::starts_or_ends, "injection: library directories searched before the program's own"},
    {"LIBS", token_match::ends, "injection: library directories searched before the program's own"},
    {"HOME", token_match::ends, "injection: a redirected home (the tool reads its configuration, plugins and "
                                "credentials there)"},
    {"CONF", token_match::starts_or_ends, "injection: a configuration file or setting the tool loads"},
    {"CONFIG", token_match::ends, "injection: a configuration file or setting the tool loads"},
    {"CNF", token_match::ends, "injection: a configuration file or setting the tool loads (TEXMFCNF)"},
    {"INPUTS", token_match::ends, "injection: a TeX search path (TEXINPUTS, BIBINPUTS: macros are code)"},
    {"RC", token_match::ends, "injection: a run-control file the tool reads at start-up"},
    {"OPT", token_match::starts_or_ends, "injection: options every run of the tool picks up"},
    {"OPTS", token_match::ends, "injection: options every run of the tool picks up"},
    {"FLAGS", token_match::ends, "injection: flags every build or run picks up (-fplugin, -toolexec, -C linker=)"},
    {"ARGS", token_match::ends, "injection: arguments every run of the tool picks up"},
    {"INIT", token_match::starts_or_ends, "injection: start-up code or commands (LUA_INIT, VIMINIT, EXINIT)"},
    {"STARTUP", token_match::starts_or_ends, "injection: code run at start-up"},
    {"HOOK", token_match::starts, "injection: programs or code run on events (hooks)"},
    {"PLUGIN", token_match::starts_or_ends, "injection: plugins the tool loads"},
    {"MODULE", token_match::starts_or_ends, "injection: modules loaded into the program (GTK_MODULES)"},
    {"PRELOAD", token_match::contains, "injection: code preloaded into the program"},
    {"COMMAND", token_match::whole, "injection: a command line the tool runs"},
    {"CMD", token_match::whole, "injection: a command line the tool runs"},
    {"PAGER", token_match::ends, "injection: a program run to page output (PAGER, MANPAGER, GIT_PAGER)"},
    {"EDITOR", token_match::ends, "injection: a program run to edit text (EDITOR, git commit, crontab -e)"},
    {"SHELL", token_match::ends, "injection: a shell programs run scripts with (npm script-shell, CONFIG_SHELL)"},
    {"SOCK", token_match::ends, "host access: a socket of a host service (agents, window managers)"},
    {"SOCKET", token_match::ends, "host access: a socket of a host service (agents, window managers)"},
};

inline constexpr env_rule kCredentialVariables[] = {
    {"AWS_*", "credential: AWS credentials and profiles"},
    {"AZURE_*", "credential: Azure credentials"},
    {"GOOGLE_*", "credential: Google Cloud credentials"},
    {"CLOUDSDK_*", "credential: Google Cloud SDK auth"},
    {"GH_*", "credential: GitHub CLI tokens"},
    {"GITHUB_*", "credential: GitHub tokens"},
    {"GITLAB_*", "credential: GitLab tokens"},
    {"ANTHROPIC_*", "credential: Anthropic API keys"},
    {"OPENAI_*", "credential: OpenAI API keys"},
    {"HF_*", "credential: Hugging Face tokens"},
    {"VAULT_*", "credential: Vault tokens and addresses"},
    {"OP_*", "credential: 1Password CLI sessions and service-account tokens"},
    {"BW_*", "credential: Bitwarden CLI session"},
    {"KRB5*", "credential: Kerberos credential caches (KRB5CCNAME), keytabs and configuration"},
    {"KUBECONFIG", "credential: Kubernetes credentials file"},
    {"NETRC", "credential: curl/git password file"},
    {"*CA_BUNDLE", "credential: a replaced TLS trust store lets a man in the middle read TLS traffic"},
    {"*CAINFO", "credential: a replaced TLS trust store lets a man in the middle read TLS traffic"},
};

inline constexpr env_rule kCredentialWords[] = {
    {"*TOKEN*", "credential: tokens"},
    {"*SECRET*", "credential: secrets"},
    {"*PASS*", "credential: passwords, passphrases, password files"},
    {"*CREDENTIAL*", "credential: credentials and credential file paths"},
    {"*AUTH*", "credential: auth headers, tokens, helpers"},
    {"*COOKIE*", "credential: session cookies"},
    {"*JWT*", "credential: JSON Web Tokens"},
    {"*WEBHOOK*", "credential: webhook URLs (the URL is the secret)"},
    {"*PRIVATE*", "credential: private keys and tokens"},
    {"*APIKEY*", "credential: API keys"},
    {"*BEARER*", "credential: bearer tokens"},
};

inline constexpr env_token_rule kCredentialTokens[] = {
    {"KEY", token_match::starts_or_ends, "credential: keys (API, access, signing and private keys, key files)"},
    {"KEYS", token_match::ends, "credential: keys (API, access, signing and private keys, key files)"},
    {"PWD", token_match::ends, "credential: passwords (MYSQL_PWD)"},
    {"PW", token_match::whole, "credential: passwords"},
    {"PSK", token_match::ends, "credential: pre-shared keys"},
    {"SESSION", token_match::contains, "credential: session tokens and ids (BW_SESSION, OP_SESSION_…)"},
    {"DSN", token_match::ends, "credential: data source names embed credentials (SENTRY_DSN)"},
    {"CERT", token_match::starts_or_ends, "credential: certificates (client certificates come with their keys; a "
                                          "replaced trust store lets a man in the middle read TLS traffic)"},
    {"CERTS", token_match::ends, "credential: certificates (client certificates come with their keys; a "
                                 "replaced trust store lets a man in the middle read TLS traffic)"},
    {"SIG", token_match::whole, "credential: signatures (signed URLs)"},
    {"SIGNATURE", token_match::starts, "credential: signatures (signed URLs)"},
};

inline constexpr env_token_rule kProxyTokens[] = {
    {"PROXY", token_match::ends, "proxy: proxy settings other than the policy's (N2)"},
};

inline constexpr env_rule kPromptVariables[] = {
    {"PS0", "injection: bash prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PS1", "injection: bash prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PS2", "injection: bash prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PS3", "injection: bash prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PROMPT", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PROMPT2", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PROMPT3", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"PROMPT4", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"RPROMPT", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"RPROMPT2", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"RPS1", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"RPS2", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
    {"SPROMPT", "injection: zsh prompt with command substitution, backquotes, ${…} or $[…] (runs code)"},
};

// Characters a token format's body is made of.
enum class token_chars {
  alnum,            // A-Z a-z 0-9
  alnum_underscore, // and _
  base64url,        // and _ -
  upper_digit,      // A-Z 0-9
};

// A well-known credential format: `prefix` (case-sensitive, at the start of
// the value or after a character that is not a letter or digit), then at
// least `min_body` (and at most `max_body`, 0: any) body characters of which
// at least one is a digit (real tokens are random; words are not).
struct token_format {
  std::string_view prefix;
  token_chars body;
  std::size_t min_body;
  std::size_t max_body;
  std::string_view why;
};

inline constexpr token_format kTokenFormats[] = {
    {"ghp_", token_chars::alnum, 30, 0, "credential value: GitHub personal access token (ghp_)"},
    {"gho_", token_chars::alnum, 30, 0, "credential value: GitHub OAuth token (gho_)"},
    {"ghu_", token_chars::alnum, 30, 0, "credential value: GitHub user-to-server token (ghu_)"},
    {"ghs_", token_chars::alnum, 30, 0, "credential value: GitHub server-to-server token (ghs_)"},
    {"ghr_", token_chars::alnum, 30, 0, "credential value: GitHub refresh token (ghr_)"},
    {"github_pat_", token_chars::alnum_underscore, 30, 0,
     "credential value: GitHub fine-grained personal access token (github_pat_)"},
    {"glpat-", token_chars::base64url, 20, 0, "credential value: GitLab personal access token (glpat-)"},
    {"xoxa-", token_chars::base64url, 10, 0, "credential value: Slack token (xoxa-)"},
    {"xoxb-", token_chars::base64url, 10, 0, "credential value: Slack bot token (xoxb-)"},
    {"xoxp-", token_chars::base64url, 10, 0, "credential value: Slack user token (xoxp-)"},
    {"xoxr-", token_chars::base64url, 10, 0, "credential value: Slack refresh token (xoxr-)"},
    {"xoxs-", token_chars::base64url, 10, 0, "credential value: Slack session token (xoxs-)"},
    {"xoxe-", token_chars::base64url, 10, 0, "credential value: Slack token (xoxe-)"},
    {"xapp-", token_chars::base64url, 10, 0, "credential value: Slack app token (xapp-)"},
    {"sk-", token_chars::base64url, 20, 0, "credential value: secret API key (sk-, sk-ant-, sk-proj-)"},
    {"sk_live_", token_chars::alnum, 16, 0, "credential value: Stripe secret key (sk_live_)"},
    {"sk_test_", token_chars::alnum, 16, 0, "credential value: Stripe test secret key (sk_test_)"},
    {"rk_live_", token_chars::alnum, 16, 0, "credential value: Stripe restricted key (rk_live_)"},
    {"rk_test_", token_chars::alnum, 16, 0, "credential value: Stripe restricted test key (rk_test_)"},
    {"whsec_", token_chars::alnum, 16, 0, "credential value: webhook signing secret (whsec_)"},
    {"AKIA", token_chars::upper_digit, 16, 16, "credential value: AWS access key id (AKIA…)"},
    {"ASIA", token_chars::upper_digit, 16, 16, "credential value: AWS temporary access key id (ASIA…)"},
    {"AIza", token_chars::base64url, 35, 35, "credential value: Google API key (AIza…)"},
    {"npm_", token_chars::alnum, 36, 36, "credential value: npm access token (npm_)"},
    {"pypi-", token_chars::base64url, 50, 0, "credential value: PyPI API token (pypi-)"},
    {"hf_", token_chars::alnum, 30, 0, "credential value: Hugging Face token (hf_)"},
};

// The value rules that are not token formats, with their reasons.
inline constexpr std::string_view kWhyUrlUserinfo =
    "credential value: a URL with user info (user:password@, or a token as the user name)";
inline constexpr std::string_view kWhyCredentialParameter =
    "credential value: a credential-named parameter (password=, token=, key=, sig=, \"secret\":) in a URL "
    "query, connection string or JSON";
inline constexpr std::string_view kWhyAuthorization = "credential value: an HTTP Bearer/Basic/token authorisation";
inline constexpr std::string_view kWhyPem = "credential value: a PEM block (private key, certificate, PGP key)";
inline constexpr std::string_view kWhyJwt = "credential value: a JSON Web Token (eyJ….eyJ…)";
inline constexpr std::string_view kWhyMalformed = "malformed variable name (empty or containing '=')";

namespace detail {

constexpr char env_upc(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
constexpr bool env_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
constexpr bool env_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool env_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

inline std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = env_upc(c);
  return out;
}

// `up` is upper case; `word` is compared case-insensitively.
constexpr bool env_eq(std::string_view up, std::string_view word) {
  if (up.size() != word.size()) return false;
  for (std::size_t i = 0; i < up.size(); ++i)
    if (up[i] != env_upc(word[i])) return false;
  return true;
}
constexpr bool env_starts(std::string_view up, std::string_view word) {
  return up.size() >= word.size() && env_eq(up.substr(0, word.size()), word);
}
constexpr bool env_ends(std::string_view up, std::string_view word) {
  return up.size() >= word.size() && env_eq(up.substr(up.size() - word.size()), word);
}
constexpr bool env_contains(std::string_view up, std::string_view word) {
  if (word.size() > up.size()) return false;
  for (std::size_t i = 0; i + word.size() <= up.size(); ++i)
    if (env_eq(up.substr(i, word.size()), word)) return true;
  return false;
}

// A pattern this file can match: no '*' at all, or exactly one (leading,
// trailing or inner), or exactly two (leading and trailing, around a word).
constexpr bool env_pattern_valid(std::string_view p) {
  std::size_t stars = static_cast<std::size_t>(std::count(p.begin(), p.end(), '*'));
  if (p.empty() || p == "*" || p == "**") return false;
  if (stars <= 1) return true;
  return stars == 2 && p.front() == '*' && p.back() == '*' && p.size() > 2;
}

// "X" exact, "X*" prefix, "*X" suffix, "*X*" contains, "X*Y" prefix and
// suffix; `name` already upper-case.
constexpr bool env_pattern_matches(std::string_view pattern, std::string_view name) {
  std::size_t star = pattern.find('*');
  if (star == std::string_view::npos) return env_eq(name, pattern);
  if (pattern.size() >= 2 && pattern.front() == '*' && pattern.back() == '*' && star == 0 &&
      pattern.find('*', 1) == pattern.size() - 1)
    return env_contains(name, pattern.substr(1, pattern.size() - 2));
  if (star == 0) return env_ends(name, pattern.substr(1));
  if (star == pattern.size() - 1) return env_starts(name, pattern.substr(0, star));
  std::string_view pre = pattern.substr(0, star), suf = pattern.substr(star + 1);
  return name.size() >= pre.size() + suf.size() && env_starts(name, pre) && env_ends(name, suf);
}

constexpr bool env_token_matches(const env_token_rule& r, std::string_view token) {
  switch (r.how) {
  case token_match::whole: return env_eq(token, r.word);
  case token_match::starts: return env_starts(token, r.word);
  case token_match::ends: return env_ends(token, r.word);
  case token_match::starts_or_ends: return env_starts(token, r.word) || env_ends(token, r.word);
  case token_match::contains: return env_contains(token, r.word);
  }
  return false;
}

// The maximal runs of letters and digits of `up`.
inline std::vector<std::string_view> env_tokens(std::string_view up) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < up.size()) {
    while (i < up.size() && !env_alnum(up[i])) ++i;
    std::size_t start = i;
    while (i < up.size() && env_alnum(up[i])) ++i;
    if (i > start) out.push_back(up.substr(start, i - start));
  }
  return out;
}

template <std::size_t N> constexpr std::string_view first_pattern(const env_rule (&rules)[N], std::string_view up) {
  for (const auto& r : rules)
    if (env_pattern_matches(r.pattern, up)) return r.why;
  return {};
}

template <std::size_t N>
constexpr std::string_view first_token(const env_token_rule (&rules)[N], const std::vector<std::string_view>& tokens) {
  for (const auto& r : rules)
    for (auto t : tokens) {
      bool word = std::any_of(std::begin(kNotCredentialTokens), std::end(kNotCredentialTokens),
                              [&](const env_exception& e) { return env_eq(t, e.name); });
      if (!word && env_token_matches(r, t)) return r.why;
    }
  return {};
}

// Rules 5's generic part (words and tokens, not the prefix families): used
// for parameter names inside values too.
inline std::string_view credential_name_reason(std::string_view up) {
  if (auto w = first_pattern(kCredentialWords, up); !w.empty()) return w;
  return first_token(kCredentialTokens, env_tokens(up));
}

inline bool is_inert(std::string_view up) {
  return std::any_of(std::begin(kInertVariables), std::end(kInertVariables),
                     [&](const env_exception& e) { return env_eq(up, e.name); });
}

// Rules 2-6.
inline std::string_view name_reason(std::string_view up) {
  if (auto w = first_pattern(kProxyVariables, up); !w.empty()) return w;
  if (is_inert(up)) return {};
  if (auto w = first_pattern(kInjectionVariables, up); !w.empty()) return w;
  auto tokens = env_tokens(up);
  if (auto w = first_token(kInjectionTokens, tokens); !w.empty()) return w;
  if (auto w = first_pattern(kCredentialVariables, up); !w.empty()) return w;
  if (auto w = credential_name_reason(up); !w.empty()) return w;
  return first_token(kProxyTokens, tokens);
}

// scheme://user[:password]@host — the '@' within the authority.
inline bool has_url_userinfo(std::string_view v) {
  for (std::size_t at = v.find("://"); at != std::string_view::npos; at = v.find("://", at + 3)) {
    for (std::size_t i = at + 3; i < v.size(); ++i) {
      char c = v[i];
      if (c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' || env_space(c)) break;
      if (c == '@') return true;
    }
  }
  return false;
}

// name=… pieces (URL queries, connection strings, option lists) and "name":
// JSON keys whose name is credential-like.
inline bool has_credential_parameter(std::string_view v) {
  auto is_sep = [](char c) {
    return env_space(c) || c == '&' || c == ';' || c == '?' || c == ',' || c == '|' || c == '{' || c == '(';
  };
  for (std::size_t i = 0; i < v.size();) {
    while (i < v.size() && is_sep(v[i])) ++i;
    std::size_t start = i;
    while (i < v.size() && !is_sep(v[i])) ++i;
    std::string_view piece = v.substr(start, i - start);
    std::size_t eq = piece.find('=');
    if (eq != std::string_view::npos && eq > 0 &&
        !credential_name_reason(upper(piece.substr(0, eq))).empty())
      return true;
  }
  for (std::size_t q = v.find('"'); q != std::string_view::npos;) {
    std::size_t end = v.find('"', q + 1);
    if (end == std::string_view::npos) break;
    std::size_t k = end + 1;
    while (k < v.size() && env_space(v[k])) ++k;
    if (k < v.size() && v[k] == ':' && end > q + 1 && !credential_name_reason(upper(v.substr(q + 1, end - q - 1))).empty())
      return true;
    q = v.find('"', end + 1);
  }
  return false;
}

constexpr bool env_b64(char c) {
  return env_alnum(c) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_' || c == '.' || c == '~';
}

// "Bearer x…", "Basic x…", "token x…": a scheme word, white space, and at
// least 8 credential characters.
inline bool has_authorization(std::string_view v) {
  std::string up = upper(v);
  for (std::string_view scheme : {std::string_view("BEARER"), std::string_view("BASIC"), std::string_view("TOKEN")}) {
    for (std::size_t at = up.find(scheme); at != std::string::npos; at = up.find(scheme, at + 1)) {
      if (at > 0 && env_alnum(up[at - 1])) continue;
      std::size_t i = at + scheme.size();
      if (i >= up.size() || !env_space(up[i])) continue;
      while (i < up.size() && env_space(up[i])) ++i;
      std::size_t n = 0;
      while (i + n < up.size() && env_b64(up[i + n])) ++n;
      if (n >= 8) return true;
    }
  }
  return false;
}

constexpr bool in_body(token_chars k, char c) {
  switch (k) {
  case token_chars::alnum: return env_alnum(c);
  case token_chars::alnum_underscore: return env_alnum(c) || c == '_';
  case token_chars::base64url: return env_alnum(c) || c == '_' || c == '-';
  case token_chars::upper_digit: return (c >= 'A' && c <= 'Z') || env_digit(c);
  }
  return false;
}

inline std::string_view token_format_reason(std::string_view v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0 && env_alnum(v[i - 1])) continue;
    for (const auto& f : kTokenFormats) {
      if (v.substr(i, f.prefix.size()) != f.prefix) continue;
      std::size_t j = i + f.prefix.size(), n = 0;
      bool digit = false;
      while (j + n < v.size() && in_body(f.body, v[j + n])) digit = digit || env_digit(v[j + n]), ++n;
      if (n >= f.min_body && (f.max_body == 0 || n <= f.max_body) && digit) return f.why;
    }
  }
  return {};
}

// eyJ<base64url>.eyJ<base64url>: a JWT's header and payload (JSON objects).
inline bool has_jwt(std::string_view v) {
  auto run = [&](std::size_t i) {
    std::size_t n = 0;
    while (i + n < v.size() && in_body(token_chars::base64url, v[i + n])) ++n;
    return n;
  };
  for (std::size_t at = v.find("eyJ"); at != std::string_view::npos; at = v.find("eyJ", at + 1)) {
    if (at > 0 && env_alnum(v[at - 1])) continue;
    std::size_t h = run(at);
    if (h < 8 || at + h >= v.size() || v[at + h] != '.') continue;
    std::size_t p = at + h + 1;
    if (v.substr(p, 3) == "eyJ" && run(p) >= 8) return true;
  }
  return false;
}

// Rule 7.
inline std::string_view value_reason(std::string_view v) {
  if (v.find("-----BEGIN") != std::string_view::npos) return kWhyPem;
  if (has_url_userinfo(v)) return kWhyUrlUserinfo;
  if (has_jwt(v)) return kWhyJwt;
  if (auto w = token_format_reason(v); !w.empty()) return w;
  if (has_authorization(v)) return kWhyAuthorization;
  if (has_credential_parameter(v)) return kWhyCredentialParameter;
  return {};
}

// Rule 8: bash decodes \NNN (octal) before it expands a prompt, so "\044("
// is "$(" too.
inline bool prompt_runs_code(std::string_view v) {
  std::string d;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size() && v[i + 1] >= '0' && v[i + 1] <= '7') {
      int n = 0, k = 0;
      while (k < 3 && i + 1 + k < v.size() && v[i + 1 + k] >= '0' && v[i + 1 + k] <= '7') n = n * 8 + (v[i + 1 + k] - '0'), ++k;
      d.push_back(static_cast<char>(n & 0xff));
      i += static_cast<std::size_t>(k);
    } else {
      d.push_back(v[i]);
    }
  }
  return d.find('`') != std::string::npos || d.find("$(") != std::string::npos || d.find("${") != std::string::npos ||
         d.find("$[") != std::string::npos;
}

template <class T, std::size_t N, class F> constexpr bool all_of_table(const T (&t)[N], F f) {
  for (const auto& e : t)
    if (!f(e)) return false;
  return true;
}
constexpr bool rule_ok(const env_rule& r) { return env_pattern_valid(r.pattern) && !r.why.empty(); }
constexpr bool token_rule_ok(const env_token_rule& r) { return !r.word.empty() && !r.why.empty(); }
constexpr bool exception_ok(const env_exception& e) { return !e.name.empty() && !e.why.empty(); }
constexpr bool format_ok(const token_format& f) {
  return !f.prefix.empty() && f.min_body > 0 && (f.max_body == 0 || f.max_body >= f.min_body) && !f.why.empty();
}

} // namespace detail

// Every table entry has a reason and a pattern the matcher understands.
static_assert(detail::all_of_table(kProxyVariables, detail::rule_ok));
static_assert(detail::all_of_table(kInjectionVariables, detail::rule_ok));
static_assert(detail::all_of_table(kCredentialVariables, detail::rule_ok));
static_assert(detail::all_of_table(kCredentialWords, detail::rule_ok));
static_assert(detail::all_of_table(kPromptVariables, detail::rule_ok));
static_assert(detail::all_of_table(kInjectionTokens, detail::token_rule_ok));
static_assert(detail::all_of_table(kCredentialTokens, detail::token_rule_ok));
static_assert(detail::all_of_table(kProxyTokens, detail::token_rule_ok));
static_assert(detail::all_of_table(kInertVariables, detail::exception_ok));
static_assert(detail::all_of_table(kNotCredentialTokens, detail::exception_ok));
static_assert(detail::all_of_table(kTokenFormats, detail::format_ok));

// Why E3 removes the variable `name`=`value`, or empty if it is kept.
inline std::string_view environment_removal_reason(std::string_view name, std::string_view value) {
  if (name.empty() || name.find('=') != std::string_view::npos) return kWhyMalformed;
  std::string up = detail::upper(name);
  if (auto w = detail::name_reason(up); !w.empty()) return w;
  if (auto w = detail::value_reason(value); !w.empty()) return w;
  if (auto w = detail::first_pattern(kPromptVariables, up); !w.empty() && detail::prompt_runs_code(value)) return w;
  return {};
}

struct removed_var {
  std::string name;
  std::string why;
  friend bool operator==(const removed_var&, const removed_var&) = default;
};

struct sanitized_env {
  env_list kept;
  std::vector<removed_var> removed; // every dropped variable with its reason
};

// E3 (see the header comment).
inline sanitized_env sanitize_environment(const env_list& in) {
  sanitized_env out;
  for (const auto& v : in) {
    std::string_view why = environment_removal_reason(v.name, v.value);
    if (why.empty())
      out.kept.push_back(v);
    else
      out.removed.push_back({v.name, std::string(why)});
  }
  return out;
}

// E1: variables passed from the launcher's environment unless policy says
// otherwise. Everything else is dropped; E3 sanitisation runs on top.
inline constexpr std::string_view kPassedEnvironment[] = {
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE",
    "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME", "TZ", "NO_COLOR",
};

// E1: the pass list over the launcher's environment `host`, PATH and HOME
// (`home`) filled in when it has none; E3 on top. compile records it as
// policy::environment; session_environment.hpp builds on it.
inline env_list passed_environment(const std::map<std::string, std::string>& host, const std::string& home) {
  env_list env;
  for (auto name : kPassedEnvironment) {
    auto it = host.find(std::string(name));
    if (it != host.end()) env.push_back({it->first, it->second});
  }
  if (std::none_of(env.begin(), env.end(), [](const env_var& v) { return v.name == "PATH"; }))
    env.push_back({"PATH", "/usr/local/bin:/usr/bin:/bin"});
  if (std::none_of(env.begin(), env.end(), [](const env_var& v) { return v.name == "HOME"; }))
    env.push_back({"HOME", home});
  return sanitize_environment(env).kept;
}

// N2 / E2 / E4: the proxy variables for a sandboxed process. `http` and
// `socks` are host:port of the proxies as seen from inside the sandbox;
// `ssh_proxy_command` is ssh's ProxyCommand (with %h %p) that reaches the
// SOCKS proxy: ccsb-init's own helper on Linux, BSD nc on macOS;
// `ssh_known_hosts` is the known-hosts file ssh reads (the sandbox's
// read-only copy of the user's ~/.ssh/known_hosts, render/bwrap/render.hpp), or
// empty when there is none to give.
//
// Each variable is here because a client reads it (docs/clients.md, "Proxy
// variables", has the table; kProxyEnvironmentClients below is its source):
//   HTTP_PROXY/HTTPS_PROXY (+ lowercase): curl, wget, git, pip, python
//     urllib, cargo, go, gem, bundler, apt, gcloud, gRPC (https_proxy);
//   ALL_PROXY (+ lowercase): curl via SOCKS;
//   NO_PROXY (+ lowercase), npm_config_noproxy: loopback only, so local
//     test servers stay local;
//   FTP_PROXY (+ lowercase): ftp:// URLs of curl, wget and python urllib go
//     to the HTTP proxy, which refuses them (only http and CONNECT are
//     relayed) and reports a violation naming host:21, instead of a direct
//     attempt that fails with a DNS error and leaves no event;
//   npm_config_proxy/npm_config_https_proxy: npm (and Yarn 1, which reads
//     npm's configuration); YARN_HTTP_PROXY/YARN_HTTPS_PROXY: Yarn 2+
//     (httpProxy/httpsProxy; there is no YARN_NO_PROXY: Yarn 2+ rejects
//     unknown YARN_* settings);
//   grpc_proxy: gRPC C core and grpc-js (checked before https_proxy);
//   ws_proxy/wss_proxy: python websockets (15+) for ws:// and wss://;
//   RSYNC_PROXY (host:port, no scheme): rsync's daemon protocol
//     (rsync://, host::module) through the HTTP proxy's CONNECT;
//   JAVA_TOOL_OPTIONS: every JVM (HttpClient, HttpURLConnection, and
//     everything built on them: Gradle, Maven's JDK transport) takes
//     -Dhttp.proxyHost/-Dhttp.proxyPort/-Dhttps.proxyHost/-Dhttps.proxyPort
//     and -Dhttp.nonProxyHosts (loopback). E3 removes any inherited
//     JAVA_TOOL_OPTIONS (an injection vector: -javaagent) before this one
//     is added, so the value is exactly this, never merged;
//   NODE_USE_ENV_PROXY=1: Node 24 and 22.21+ make fetch and http(s) use
//     HTTP(S)_PROXY/NO_PROXY (older Node ignores it; see docs/clients.md
//     for Node 20);
//   GIT_SSH_COMMAND: git over SSH through the SOCKS proxy, with connection
//     sharing off (ControlMaster=no, ControlPath=none: a control socket
//     would let one ssh ride another's tunnel, and ~/.ssh is not there to
//     hold one anyway), and UserKnownHostsFile naming the known hosts.
// Not set, on purpose: BUNDLE_HTTP(S)_PROXY and DOCKER_HTTP(S)_PROXY (no
// client reads them: bundler uses http_proxy, the docker CLI passes
// ~/.docker/config.json proxies to containers), CLOUDSDK_PROXY_* (gcloud
// reads https_proxy; its own proxy settings would make it ignore
// no_proxy), PIP_PROXY (pip reads https_proxy).
struct proxy_variable_client {
  std::string_view name;
  std::string_view clients;
};
inline constexpr proxy_variable_client kProxyEnvironmentClients[] = {
    {"HTTP_PROXY, http_proxy", "curl, wget, git, pip, python urllib, cargo, go, apt, gem, bundler"},
    {"HTTPS_PROXY, https_proxy", "the same clients for https:// (CONNECT); gcloud; gRPC after grpc_proxy"},
    {"ALL_PROXY, all_proxy", "curl (SOCKS5 with remote name resolution)"},
    {"NO_PROXY, no_proxy", "the clients above: loopback is not proxied"},
    {"FTP_PROXY, ftp_proxy", "curl, wget, python urllib: ftp:// is refused by the proxy and reported"},
    {"npm_config_proxy, npm_config_https_proxy, npm_config_noproxy", "npm, Yarn 1"},
    {"YARN_HTTP_PROXY, YARN_HTTPS_PROXY", "Yarn 2+ (httpProxy, httpsProxy)"},
    {"grpc_proxy", "gRPC C core (Python, Ruby, C++, PHP) and grpc-js"},
    {"ws_proxy, wss_proxy", "python websockets 15+"},
    {"RSYNC_PROXY", "rsync daemon protocol (rsync://, host::module)"},
    {"JAVA_TOOL_OPTIONS", "every JVM: HttpClient, HttpURLConnection (http(s).proxyHost/Port, nonProxyHosts)"},
    {"NODE_USE_ENV_PROXY", "Node 24, 22.21+: fetch and http(s) use HTTP(S)_PROXY"},
    {"GIT_SSH_COMMAND", "git over ssh: SOCKS ProxyCommand, no connection sharing, known hosts"},
};

namespace detail {
// "127.0.0.1:3128" -> {"127.0.0.1", "3128"}; the whole text and "" without a ':'.
inline std::pair<std::string, std::string> split_host_port(std::string_view hp) {
  auto colon = hp.rfind(':');
  if (colon == std::string_view::npos) return {std::string(hp), {}};
  std::string host(hp.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, std::string(hp.substr(colon + 1))};
}
} // namespace detail

inline env_list proxy_environment(std::string_view http, std::string_view socks, std::string_view ssh_proxy_command,
                                  std::string_view ssh_known_hosts = {}) {
  std::string h = "http://" + std::string(http);
  std::string s = "socks5h://" + std::string(socks);
  std::string no_proxy = "localhost,127.0.0.1,::1";
  std::string git_ssh = "ssh -o ProxyCommand='" + std::string(ssh_proxy_command) +
                        "' -o ControlMaster=no -o ControlPath=none";
  if (!ssh_known_hosts.empty()) git_ssh += " -o UserKnownHostsFile='" + std::string(ssh_known_hosts) + "'";
  auto [host, port] = detail::split_host_port(http);
  std::string java = "-Dhttp.proxyHost=" + host + " -Dhttp.proxyPort=" + port + " -Dhttps.proxyHost=" + host +
                     " -Dhttps.proxyPort=" + port + " -Dhttp.nonProxyHosts=localhost|127.*|[::1]";
  return {
      {"HTTP_PROXY", h},
      {"HTTPS_PROXY", h},
      {"http_proxy", h},
      {"https_proxy", h},
      {"ALL_PROXY", s},
      {"all_proxy", s},
      {"NO_PROXY", no_proxy},
      {"no_proxy", no_proxy},
      {"FTP_PROXY", h},
      {"ftp_proxy", h},
      {"npm_config_proxy", h},
      {"npm_config_https_proxy", h},
      {"npm_config_noproxy", no_proxy},
      {"YARN_HTTP_PROXY", h},
      {"YARN_HTTPS_PROXY", h},
      {"grpc_proxy", h},
      {"ws_proxy", h},
      {"wss_proxy", h},
      {"RSYNC_PROXY", std::string(http)},
      {"JAVA_TOOL_OPTIONS", java},
      {"NODE_USE_ENV_PROXY", "1"},
      {"GIT_SSH_COMMAND", git_ssh},
  };
}

} // namespace ccsb
