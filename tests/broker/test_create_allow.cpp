// P7 exceptions (createAllow): the glob language, what it covers, and the
// broker's decision with exceptions, without a kernel.
#include <catch2/catch.hpp>

#include "ccsb/broker/decide.hpp"
#include "ccsb/create_allow.hpp"

#include <string>
#include <vector>

using namespace ccsb::broker;
namespace ca = ccsb::create_allow;

namespace {
rule_set rules_with(std::vector<std::string> allow) {
  rule_set r{{"/w", "/home/u"}, {".env", "*.key", "*.pem"}, {}, true, true, false, {}};
  r.create_allow = std::move(allow);
  return r;
}
} // namespace

TEST_CASE("P7: createAllow accepts the globs real installs need", "[P7][createAllow]") {
  for (const char* p : {".venv/**", "node_modules/**", ".env", "config/*.pem", "*/node_modules/**", "pkgs/a?/x.key",
                        "/w/.venv/**", "certs/test.pem"}) {
    INFO(p);
    CHECK(ca::syntax(p));
  }
}

TEST_CASE("P7: createAllow refuses patterns that cover a root, a .git dir, P5 names or another dialect",
          "[P7][createAllow]") {
  struct bad {
    const char* pattern;
    const char* says;
  };
  for (const auto& b : {bad{"**", "no component without a wildcard"}, bad{"*", "no component without a wildcard"},
                        bad{"*/**", "no component without a wildcard"}, bad{"*.pem", "no component without a wildcard"},
                        bad{"?*/*.key", "no component without a wildcard"}, bad{".git/**", ".git"},
                        bad{"a/.git/x.pem", ".git"}, bad{".g*/**", ".git"}, bad{"*git/x.pem", ".git"},
                        bad{"../x.pem", "\"..\""}, bad{"a/../../x.pem", "\"..\""}, bad{"./.env", "\".\""},
                        bad{"a//b.pem", "empty component"}, bad{".venv/", "empty component"}, bad{"", "empty"},
                        bad{"a/**/b.pem", "last component"}, bad{"a**/x", "last component"},
                        bad{".venv/[ab].pem", "not part of this glob language"},
                        bad{"{a,b}/x.pem", "not part of this glob language"},
                        bad{"a\\*.pem", "not part of this glob language"}, bad{".vscode/**", "tool configuration"},
                        bad{".cargo/x.pem", "tool configuration"}, bad{".npmrc", "tool configuration"},
                        bad{"sub/.bashrc", "tool configuration"}, bad{"a\nb", "control character"}}) {
    INFO(b.pattern);
    auto r = ca::syntax(b.pattern);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == ccsb::errc::invalid_pattern);
    CHECK(r.err().message.find(b.says) != std::string::npos);
  }
}

TEST_CASE("P7: a createAllow glob matches whole names, byte for byte, never in a .git", "[P7][createAllow]") {
  CHECK(ca::matches("/w/.venv/**", "/w/.venv/lib/python3/site-packages/certifi/cacert.pem"));
  CHECK(ca::matches("/w/.venv/**", "/w/.venv/x.pem"));
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/.venv"));           // the directory itself is not "below"
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/x.pem"));
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/.venv2/x.pem"));    // a component, not a prefix
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/.VENV/x.pem"));     // case variant
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/.v\xd0\xb5nv/x.pem")); // Cyrillic e lookalike
  CHECK_FALSE(ca::matches("/w/.venv/**", "/w/.venv/sub/.git/x.pem"));
  CHECK_FALSE(ca::matches("/w/*/node_modules/**", "/w/.git/node_modules/x.pem"));
  CHECK(ca::matches("/w/*/node_modules/**", "/w/app/node_modules/p/test.pem"));
  CHECK(ca::matches("/w/.env", "/w/.env"));
  CHECK_FALSE(ca::matches("/w/.env", "/w/sub/.env"));
  CHECK(ca::matches("/w/config/*.pem", "/w/config/a.pem"));
  CHECK_FALSE(ca::matches("/w/config/*.pem", "/w/config/sub/a.pem"));
}

TEST_CASE("P7: with createAllow the broker lets P7 names be created inside the exception only", "[X1][P7][createAllow]") {
  auto r = rules_with({"/w/.venv/**", "/w/.env"});
  for (op o : {op::create, op::write, op::replace, op::remove}) {
    INFO(to_string(o));
    CHECK(decide(r, o, "/w/.venv/lib/certifi/cacert.pem").allowed);
    CHECK(decide(r, o, "/w/.env").allowed);
    CHECK_FALSE(decide(r, o, "/w/x.pem").allowed);       // outside: P7 as before
    CHECK_FALSE(decide(r, o, "/w/sub/.env").allowed);
    CHECK_FALSE(decide(r, o, "/home/u/.venv/x.pem").allowed); // another root
    CHECK_FALSE(decide(r, o, "/w/.VENV/x.pem").allowed);
  }
  // Only P7 is lifted: the tool configurations and git rules hold inside.
  CHECK_FALSE(decide(r, op::create, "/w/.venv/.npmrc").allowed);
  CHECK_FALSE(decide(r, op::create, "/w/.venv/.git").allowed);
  CHECK_FALSE(decide(r, op::create, "/w/.venv/.vscode/x.pem").allowed);
  // Without the exception nothing changed.
  CHECK_FALSE(decide(rules_with({}), op::create, "/w/.venv/lib/certifi/cacert.pem").allowed);
}

TEST_CASE("P7: a directory is not moved out of a createAllow exception", "[X1][P7][createAllow]") {
  auto r = rules_with({"/w/.venv/**", "/w/pkgs/*/node_modules/**"});
  CHECK_FALSE(decide_move_out(r, "/w/.venv/certs", "/w/certs").allowed);   // out of the exception
  CHECK_FALSE(decide_move_out(r, "/w/.venv", "/w/venv").allowed);          // the exception's own directory
  CHECK_FALSE(decide_move_out(r, "/w/pkgs", "/w/p").allowed);              // an ancestor of one
  CHECK_FALSE(decide_move_out(r, "/w/pkgs/a", "/w/b").allowed);            // another depth
  CHECK(decide_move_out(r, "/w/.venv/a", "/w/.venv/b/c").allowed);         // inside stays inside
  CHECK(decide_move_out(r, "/w/pkgs/a", "/w/pkgs/b").allowed);             // the same shape
  CHECK(decide_move_out(r, "/w/src", "/w/lib").allowed);                   // nothing excepted below
  CHECK(decide_move_out(r, "/w/src", "/w/.venv/src").allowed);             // into an exception
  CHECK(decide_move_out(rules_with({}), "/w/.venv/certs", "/w/certs").allowed);
  auto v = decide_move_out(r, "/w/.venv/certs", "/w/certs");
  CHECK(v.action == "file-write-create");
  CHECK(v.target == "/w/certs");
}

TEST_CASE("P7: createAllow travels to ccsb-init as --broker-allow-create, strictly", "[X1][P7][createAllow]") {
  auto r = rules_with({"/w/.venv/**"});
  auto args = to_args(r);
  rule_set back = rule_set::none();
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) REQUIRE(parse_arg(back, args[i], args[i + 1]));
  CHECK(back.create_allow == r.create_allow);
  for (const char* bad : {".venv/**", "/w/../x/**", "/w//a", "/w/.git/**", "/w/[a]"}) {
    INFO(bad);
    rule_set x;
    CHECK_FALSE(parse_arg(x, "--broker-allow-create", bad));
  }
}

TEST_CASE("P7: ccsb-run's hint names the exception that would have allowed a denied creation", "[P7][createAllow]") {
  CHECK(ca::p7_name("/w/.venv/lib/cacert.pem"));
  CHECK(ca::p7_name("/w/.env"));
  CHECK_FALSE(ca::p7_name("/w/.env.example"));
  CHECK(ca::suggestion("/w", "/w/.venv/lib/cacert.pem") == ".venv/**");
  CHECK(ca::suggestion("/w", "/w/.env") == ".env");
  CHECK(ca::suggestion("/", "/x/y.pem") == "x/**");
}
