// ccsb/protocol/init_args.hpp: ccsb-init's command line. The launcher writes
// it with to_argv / to_options_blob and ccsb-init parses it with
// parse_init_args, so what one writes the other must parse back to the same
// value, and every malformed command line is a typed error naming the option.
#include "ccsb/protocol/init_args.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ccsb;
using namespace ccsb::protocol;

namespace {

init_args full_args() {
  init_args a;
  a.exec_channel = 3;
  a.proxy_channel = 7;
  a.listeners = {{proxy_role::http, {127, 0, 0, 1}, 3128}, {proxy_role::socks, {127, 0, 0, 1}, 1080}};
  broker::rule_set b;
  b.roots = {"/work/tree", "/home/u/.cache"};
  b.names = {"*.pem", ".env"};
  b.create_allow = {"/work/tree/fixtures/*.pem"};
  b.absent_denied = {"/work/tree/.envrc"};
  b.git = true;
  b.unix_connect = false;
  b.host_net = true;
  b.linked = {{.admin = "/repo/.git/worktrees/topic", .branch = "refs/heads/topic"}};
  a.broker = b;
  confine::landlock_rules l;
  l.read_exec = {"/usr", "/etc", "/path with\ttab and\nnewline"};
  l.read_write = {"/work/tree", "/tmp"};
  l.proc_like = {"/proc"};
  l.restrict_tcp = true;
  l.connect_ports = {3128, 1080};
  a.landlock = l;
  return a;
}

std::vector<std::string> with(std::vector<std::string> base, std::vector<std::string> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The error for `args`, which must be refused.
error refusal(const std::vector<std::string>& args) {
  auto r = parse_init_args(args);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  return r.err();
}

const std::vector<std::string> kMinimal{"--exec-channel", "3"};

} // namespace

TEST_CASE("L3 X1 X2: ccsb-init's command line round-trips through its writer and parser", "[L3][X1][X2][S7]") {
  const init_args a = full_args();
  auto back = parse_init_args(to_argv(a));
  REQUIRE(back);
  CHECK(*back == a);
  // The options descriptor carries the same options, NUL-terminated.
  auto blob = to_options_blob(a);
  REQUIRE(blob);
  auto split = split_options_blob(*blob);
  REQUIRE(split);
  CHECK(*split == to_argv(a));
  auto again = parse_init_args(*split);
  REQUIRE(again);
  CHECK(*again == a);
  // The smallest: the exec channel alone (no proxy, no broker, no Landlock).
  auto minimal = parse_init_args(kMinimal);
  REQUIRE(minimal);
  CHECK(minimal->exec_channel == 3);
  CHECK_FALSE(minimal->proxy_channel);
  CHECK_FALSE(minimal->broker);
  CHECK_FALSE(minimal->landlock);
  CHECK(to_argv(*minimal) == kMinimal);
  // --options-fd alone names the descriptor; inline options name none.
  auto fd = options_fd_of({"--options-fd", "64"});
  REQUIRE(fd);
  CHECK(*fd == std::optional<int>(64));
  auto inline_fd = options_fd_of(kMinimal);
  REQUIRE(inline_fd);
  CHECK_FALSE(*inline_fd);
}

TEST_CASE("L3 X1 X2: ccsb-init refuses an unknown, duplicate, incomplete or malformed option, naming it",
          "[L3][X1][X2][S7]") {
  CHECK(refusal(with(kMinimal, {"--frobnicate", "1"})).field == "--frobnicate");
  CHECK(refusal(with(kMinimal, {"stray", "1"})).field == "stray");
  CHECK(refusal(with(kMinimal, {"--", "/bin/sh"})).field == "--");
  CHECK(refusal(with(kMinimal, {"--exec-channel"})).field == "--exec-channel"); // no value
  CHECK(refusal(with(kMinimal, {"--exec-channel", "4"})).field == "--exec-channel"); // twice
  CHECK(refusal(with(kMinimal, {"--broker-git", "on", "--broker-unix", "on", "--broker-git", "off"})).field ==
        "--broker-git");
  CHECK(refusal(with(kMinimal, {"--landlock", "on", "--landlock", "on"})).field == "--landlock");
  CHECK(refusal({"--proxy-channel", "7"}).field == "--exec-channel"); // required
  for (const char* bad : {"", "-1", "03", "x", "65536", "999999", "3 "})
    CHECK(refusal({"--exec-channel", bad}).field == "--exec-channel");
  // The proxy: channel and listeners go together; listeners on loopback only.
  CHECK(refusal(with(kMinimal, {"--proxy-channel", "7"})).field == "--proxy-listen"); // the missing one
  CHECK(refusal(with(kMinimal, {"--proxy-listen", "http=127.0.0.1:3128"})).field == "--proxy-channel");
  for (const char* bad : {"http", "ftp=127.0.0.1:21", "http=10.0.0.1:3128", "http=127.0.0.1", "http=127.0.0.1:0",
                          "http=127.0.0.1:65536", "http=127.0.0.256:1", "http=127.0.0:1", "http=127.0.0.1.1:1",
                          "http=127.0.0.01:1", "http=:1"})
    CHECK(refusal(with(kMinimal, {"--proxy-channel", "7", "--proxy-listen", bad})).field == "--proxy-listen");
  // Broker and Landlock values go through their own strict parsers.
  CHECK(refusal(with(kMinimal, {"--broker-git", "on", "--broker-unix", "on", "--broker-root", "rel"})).field ==
        "--broker-root");
  CHECK(refusal(with(kMinimal, {"--broker-git", "maybe", "--broker-unix", "on"})).field == "--broker-git");
  CHECK(refusal(with(kMinimal, {"--landlock", "on", "--landlock-rx", "usr"})).field == "--landlock-rx");
  CHECK(refusal(with(kMinimal, {"--landlock", "on", "--landlock-tcp", "restrict", "--landlock-connect", "0"})).field ==
        "--landlock-connect");
  // A group's lists without its switch.
  CHECK(refusal(with(kMinimal, {"--landlock-rx", "/usr"})).field == "--landlock");
  CHECK(refusal(with(kMinimal, {"--landlock", "on", "--landlock-connect", "3128"})).field == "--landlock-connect");
  CHECK(refusal(with(kMinimal, {"--broker-root", "/w", "--broker-git", "on"})).field == "--broker-unix");
  CHECK(refusal(with(kMinimal, {"--broker-root", "/w"})).field == "--broker-git");
  // --options-fd goes alone.
  CHECK(refusal(with(kMinimal, {"--options-fd", "64"})).field == "--options-fd");
  auto fd = options_fd_of({"--options-fd", "x"});
  REQUIRE_FALSE(fd);
  CHECK(fd.err().field == "--options-fd");
}

TEST_CASE("L1 S7: ccsb-init's options descriptor is refused when a NUL is missing, inside one, or it is too long",
          "[L1][S7]") {
  auto unterminated = split_options_blob(std::string("--exec-channel\0" "3", 16));
  REQUIRE_FALSE(unterminated);
  CHECK(unterminated.err().field == "--options-fd");
  auto huge = split_options_blob(std::string(kMaxInitOptionBytes + 1, 'a'));
  REQUIRE_FALSE(huge);
  CHECK(huge.err().field == "--options-fd");
  init_args a = full_args();
  a.broker->absent_denied.push_back(std::string("/w\0--broker-deny", 16));
  auto blob = to_options_blob(a);
  REQUIRE_FALSE(blob);
  CHECK(blob.err().field == "--broker-deny");
}
