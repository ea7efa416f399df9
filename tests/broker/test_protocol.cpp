// S5 / S6 / S7 / X1: the exec channel between the launcher and the
// supervisor (ccsb/protocol/supervisor.hpp), both directions.
#include <catch2/catch.hpp>

#include "ccsb/protocol/supervisor.hpp"

#include <algorithm>

using namespace ccsb::protocol;

TEST_CASE("S7: every supervisor message round-trips through one datagram", "[S7][S6][X1]") {
  std::vector<supervisor_message> msgs{supervisor_ready{},
                                       init_failed{"poll: x\ty"},
                                       exec_started{1, 2},
                                       exec_started{kMaxExecId, 4194304},
                                       exec_failed{3, 127, "nope: No such file"},
                                       exec_failed{4, 125, "chdir /w/a\nb: Permission denied"},
                                       exec_exited{5, false, 0},
                                       exec_exited{5, false, 255},
                                       exec_exited{6, true, 9},
                                       violation{7, "file-write-create", "/w/a\nb\\c\x01.pem", "P7: name matches *.pem"},
                                       violation{8, "network-outbound", "unix:/w/s.sock", "L3: a\tsocket\nnot the session's"},
                                       landlock_applied{"abi 7: file system, signals scoped"},
                                       landlock_applied{"unavailable: the kernel has no Landlock"}};
  for (const auto& m : msgs) {
    std::string text = encode(m);
    CHECK(text.find('\n') == std::string::npos);
    auto back = decode_supervisor(text, 0);
    REQUIRE(back);
    CHECK(*back == m);
  }
  // A started message may carry the terminal's master.
  CHECK(decode_supervisor(encode(exec_started{9, 10}), 1));
}

TEST_CASE("S7: every launcher request round-trips, with hostile arguments and environment", "[S7]") {
  exec_request plain{1, "/w", std::nullopt, {"sh", "-c", "echo a\tb\nexec\t2\t/\t-\t1\tx\t0"}, {"A=1", "B=x\ty"}};
  exec_request empty_args{2, "/", std::nullopt, {"printf", "", ""}, {}};
  exec_request term{3, "/w/sub dir", terminal_size{50, 132}, {"bash", "-i"}, {"TERM=xterm-256color"}};
  exec_request bytes{4, "/w/\x01\x7f\\x", std::nullopt, {"\xff\xfe", "\\t"}, {"X=\\n"}};
  for (const auto& r : {plain, empty_args, term, bytes}) {
    launcher_message m = r;
    std::string text = encode(m);
    CHECK(text.find('\n') == std::string::npos);
    auto back = decode_launcher(text, descriptors_of(m));
    REQUIRE(back);
    CHECK(std::get<exec_request>(*back) == r);
  }
  // An argument cannot add a field: the TAB count is the field count.
  std::string text = encode(launcher_message{plain});
  CHECK(std::count(text.begin(), text.end(), '\t') == 4 + 3 + 1 + 2);
  launcher_message k = kill_request{12, 15};
  auto back = decode_launcher(encode(k), 0);
  REQUIRE(back);
  CHECK(std::get<kill_request>(*back) == std::get<kill_request>(k));
}

TEST_CASE("S7: the supervisor-side parser is strict", "[S7][S6][X1]") {
  for (const char* bad :
       {"", "ready\tx", "started", "started\t1", "started\t0\t5", "started\t1\t0", "started\t01\t5", "started\t1\t-5",
        "started\t1\t5\tx", "exec-failed\t1\t128\tx", "exec-failed\t1\t1\tx", "exec-failed\t1\t127", "exec-failed\t1\t127\t",
        "exited\t1\texit", "exited\t1\texit\t256", "exited\t1\tsignal\t0", "exited\t1\tsignal\t65", "exited\t1\tcore\t9",
        "violation\t1\tfile-read*\t/x", "violation\tfile-write*\t/x", "violation\t1\tfile-write*", "violation\t1\tfile-write*\t",
        "violation\t1\tfile-write*\t/a", "violation\t1\tfile-write*\t/a\t", "violation\t1\tfile-write*\t/a\tb\tc",
        "init-failed", "hello", "init-failed\t\\q", "init-failed\tab\\", "init-failed\t\\x4",
        "init-failed\t\\x41", "init-failed\ta\x01", "landlock", "landlock\t", "landlock\tmaybe", "landlock\tabi 7\tx",
        "started\t99999999999999999999\t5"}) {
    INFO(bad);
    CHECK_FALSE(decode_supervisor(bad, 0));
  }
  // Descriptors only with started, at most one.
  CHECK_FALSE(decode_supervisor("ready", 1));
  CHECK_FALSE(decode_supervisor("exited\t1\texit\t0", 1));
  CHECK_FALSE(decode_supervisor("started\t1\t5", 2));
  CHECK_FALSE(decode_supervisor(std::string(kMaxMessage + 1, 'x'), 0));
}

TEST_CASE("S7: the launcher-side parser is strict about fields and descriptors", "[S7]") {
  struct row {
    std::string text;
    std::size_t fds;
    const char* why;
  };
  const std::vector<row> rows{
      {"exec\t1\t/w\t-\t1\ttrue\t0", 0, "descriptors"},
      {"exec\t1\t/w\t-\t1\ttrue\t0", 2, "descriptors"},
      {"exec\t1\t/w\t24:80\t1\ttrue\t0", 3, "descriptors"},
      {"exec\t0\t/w\t-\t1\ttrue\t0", 3, "exec id"},
      {"exec\t1\tw\t-\t1\ttrue\t0", 3, "workdir"},
      {"exec\t1\t\t-\t1\ttrue\t0", 3, "workdir"},
      {"exec\t1\t/w\t0:80\t1\ttrue\t0", 0, "terminal rows"},
      {"exec\t1\t/w\t24x80\t1\ttrue\t0", 0, "terminal"},
      {"exec\t1\t/w\t-\t0\tx\t0", 3, "argc: out of range"},
      {"exec\t1\t/w\t-\t2\ttrue\t0", 3, "fewer arguments than argc"},
      {"exec\t1\t/w\t-\t1\t\t0", 3, "argv[0]"},
      {"exec\t1\t/w\t-\t1\ttrue\t1", 3, "envc entries"},
      {"exec\t1\t/w\t-\t1\ttrue\t1\tNOEQUALS", 3, "NAME=VALUE"},
      {"exec\t1\t/w\t-\t1\ttrue\t1\t=v", 3, "NAME=VALUE"},
      {"exec\t1\t/w\t-\t1\ttrue\t1\t1A=v", 3, "NAME=VALUE"},
      {"exec\t1\t/w\t-\t1\ttrue\t0\textra", 3, "envc entries"},
      {"exec\t1\t/w\t-\t1\ttr\\que\t0", 3, "escape"},
      {"exec\t1\t/w\t-", 3, "number of fields"},
      {"kill\t1", 0, "number of fields"},
      {"kill\t1\t0", 0, "signal"},
      {"kill\t1\t65", 0, "signal"},
      {"kill\t1\t9", 1, "descriptors"},
      {"spawn\t1", 0, "unknown message"},
  };
  for (const auto& r : rows) {
    INFO(r.text << " with " << r.fds << " descriptors");
    auto m = decode_launcher(r.text, r.fds);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.err().what(), Catch::Contains(r.why));
  }
}

TEST_CASE("S7: a refused exec request still names its exec id, so the supervisor can answer it", "[S7]") {
  CHECK(exec_id_of("exec\t7\t/w\t-\t1\ttrue\t0") == std::optional<std::uint64_t>(7));
  CHECK(exec_id_of("exec\t7\tnot a workdir") == std::optional<std::uint64_t>(7));
  CHECK(exec_id_of("exec\t42") == std::optional<std::uint64_t>(42));
  CHECK_FALSE(exec_id_of("exec\t0\t/w"));
  CHECK_FALSE(exec_id_of("exec\tx7\t/w"));
  CHECK_FALSE(exec_id_of("exec"));
  CHECK_FALSE(exec_id_of("kill\t7\t9"));
  CHECK_FALSE(exec_id_of(""));
  CHECK_FALSE(exec_id_of("execx\t7"));
}
