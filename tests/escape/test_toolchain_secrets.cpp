// P4 E4 (issue 26 item 8): the global configuration files inside toolchain
// homes (npm's etc/npmrc of every nvm/Volta/asdf Node, pip.conf of every
// pyenv/asdf Python and pipx environment, gemrc of every rbenv/asdf Ruby,
// SDKMAN!'s Maven settings and Gradle properties) are read-denied like
// ~/.npmrc, whether the home is visible because its bin directory is on
// PATH (E4 binds the whole home read-only) or because HOME is bound: each
// planted token must stay unprinted from inside.
#include "escape_support.hpp"

using namespace escape;

namespace {

struct planted {
  std::string rel;   // below HOME
  std::string token; // what must not be read
};

std::vector<planted> plant(const sandbox_fixture& fx) {
  const std::vector<std::string> rels{
      ".nvm/versions/node/v20.11.0/etc/npmrc",        ".volta/tools/image/node/20.11.0/etc/npmrc",
      ".asdf/installs/nodejs/20.11.0/etc/npmrc",      ".pyenv/versions/3.12.1/pip.conf",
      ".asdf/installs/python/3.12.1/pip.conf",        ".local/share/pipx/venvs/black/pip.conf",
      ".rbenv/versions/3.3.0/etc/gemrc",              ".asdf/installs/ruby/3.3.0/etc/gemrc",
      ".sdkman/candidates/maven/3.9.6/conf/settings.xml", ".sdkman/candidates/gradle/8.5/gradle.properties",
      ".pip/pip.conf",                                ".config/pnpm/rc",
      ".bunfig.toml",                                 ".local/share/gem/credentials"};
  std::vector<planted> out;
  for (const auto& rel : rels) {
    const std::string path = fx.home + "/" + rel;
    make_dirs(path.substr(0, path.rfind('/')));
    planted p{rel, "CCSB-TOOLCHAIN-TOKEN-" + random_token()};
    write_file(path, "//registry.example/:_authToken=" + p.token + "\n");
    out.push_back(p);
  }
  // Programs of the homes, on PATH: what makes E4 bind each home read-only.
  for (const char* bin : {".nvm/versions/node/v20.11.0/bin", ".pyenv/bin", ".rbenv/bin", ".sdkman/candidates/maven/3.9.6/bin",
                          ".volta/bin", ".asdf/bin", ".local/bin"}) {
    make_dirs(fx.home + "/" + bin);
    write_file(fx.home + "/" + bin + "/tool-here", "#!/bin/sh\necho tool\n", 0755);
  }
  return out;
}

std::string cat_each(const sandbox_fixture& fx, const std::vector<planted>& ps) {
  std::string body;
  for (std::size_t i = 0; i < ps.size(); ++i)
    body += "cat '" + fx.home + "/" + ps[i].rel + "' 2>/dev/null | sed 's/^/@@read" + std::to_string(i) + "=/'\n";
  body += "cat '" + fx.home + "/.nvm/versions/node/v20.11.0/bin/tool-here' >/dev/null && echo @@visible=1\n";
  return body;
}

} // namespace

TEST_CASE("P4 E4: registry tokens in the global configs inside toolchain homes are unreadable", "[P4][E4][escape]") {
  for (launcher who : kLaunchers) {
    for (const bool home_bound : {false, true}) {
      DYNAMIC_SECTION(name_of(who) << (home_bound ? ", HOME bound read-only" : ", homes on PATH")) {
        sandbox_fixture fx;
        auto ps = plant(fx);
        std::vector<std::string> args{"--bind", fx.work};
        if (home_bound) args.insert(args.end(), {"--bind", fx.home + ":ro"});
        auto o = launch_options(fx, who, "dispatch", fx.events, args, cat_each(fx, ps));
        std::string path = "PATH=";
        for (const char* bin : {".nvm/versions/node/v20.11.0/bin", ".pyenv/bin", ".rbenv/bin",
                                ".sdkman/candidates/maven/3.9.6/bin", ".volta/bin", ".asdf/bin", ".local/bin"})
          path += fx.home + "/" + bin + ":";
        path += "/usr/local/bin:/usr/bin:/bin";
        for (auto& e : o.env)
          if (e.rfind("PATH=", 0) == 0) e = path;
        auto r = run(o);
        ESCAPE_REQUIRE_RAN(r);
        INFO(r.describe());
        CHECK(r.get("visible") == "1"); // the home is there; only its secrets are not
        for (std::size_t i = 0; i < ps.size(); ++i) {
          INFO(ps[i].rel);
          CHECK(r.get("read" + std::to_string(i)) == "<missing>");
          CHECK(r.out.find(ps[i].token) == std::string::npos);
        }
      }
    }
  }
}
