// S5 / S6 / X1: the supervisor -> launcher lines (ccsb/protocol/supervisor.hpp).
#include <catch2/catch.hpp>

#include "ccsb/protocol/supervisor.hpp"

using namespace ccsb::protocol;

TEST_CASE("S6: every supervisor message round-trips through one line", "[S6][X1]") {
  std::vector<supervisor_message> msgs{proxies_ready{}, command_started{}, init_failed{"poll: x\ty"},
                                       exec_failed{"nope: No such file"},
                                       violation{"file-write-create", "/w/a\nb\\c\x01.pem"},
                                       violation{"network-outbound", "unix:/w/s.sock"},
                                       landlock_applied{"abi 7: file system, signals scoped"},
                                       landlock_applied{"unavailable: the kernel has no Landlock"}};
  for (const auto& m : msgs) {
    std::string line = write_line(m);
    REQUIRE(line.back() == '\n');
    line.pop_back();
    CHECK(line.find('\n') == std::string::npos);
    auto back = parse_line(line);
    REQUIRE(back);
    CHECK(*back == m);
  }
}

TEST_CASE("S6: a path cannot forge a second line or field", "[S6][X1]") {
  std::string line = write_line(violation{"file-write*", "/w/x\nviolation\tfile-write*\t/forged"});
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  CHECK(std::count(line.begin(), line.end(), '\t') == 2);
}

TEST_CASE("S6: the parser is strict", "[S6][X1]") {
  for (const char* bad : {"", "proxies-ready\tx", "violation\tfile-read*\t/x", "violation\tfile-write*",
                          "violation\tfile-write*\t", "violation\tfile-write*\t/a\tb", "init-failed", "hello",
                          "exec-failed\t\\q", "exec-failed\tab\\", "exec-failed\t\\x4", "exec-failed\t\\x41",
                          "exec-failed\ta\x01", "landlock", "landlock\t", "landlock\tmaybe", "landlock\tabi 7\tx"}) {
    INFO(bad);
    CHECK_FALSE(parse_line(bad));
  }
}
