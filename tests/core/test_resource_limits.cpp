// L7: the syntax of the limits a session asks for (ccsb/resource_limits.hpp):
// sizes (--memory, --tmp-size) and CPUs (--cpus), and what a cap becomes in cpu.max.
#include "ccsb/resource_limits.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using namespace ccsb;

TEST_CASE("L7: parse_size reads bytes and K, M, G binary units, and refuses anything else", "[L7]") {
  CHECK(parse_size("123") == 123u);
  CHECK(parse_size("64K") == 64u << 10);
  CHECK(parse_size("512m") == 512u << 20);
  CHECK(parse_size("8G") == 8ull << 30);
  for (const char* bad : {"", "K", "1KB", "1.5G", "-1", " 1", "1T", "99999999999999999999", "17179869184G"}) {
    INFO(bad);
    CHECK_FALSE(parse_size(bad));
  }
}

TEST_CASE("L7: parse_cpus reads a number of CPUs with at most three decimals, 0.01 to 1024, into thousandths",
          "[L7]") {
  CHECK(parse_cpus("1") == 1000u);
  CHECK(parse_cpus("1.5") == 1500u);
  CHECK(parse_cpus("0.5") == 500u);
  CHECK(parse_cpus("0.25") == 250u);
  CHECK(parse_cpus("0.125") == 125u);
  CHECK(parse_cpus("0.01") == kMinCpuMillis);
  CHECK(parse_cpus("1024") == kMaxCpuMillis);
  CHECK(parse_cpus("02.50") == 2500u);
  for (const char* bad : {"", "0", "0.0", "0.009", "0.001", "1024.001", "1025", "99999999999999999999", "-1", "+1",
                          ".5", "1.", "1.2345", "1e3", "1,5", " 1", "1 ", "abc", "1.5x", "inf", "nan", "0x10"}) {
    INFO("\"" << bad << "\"");
    CHECK_FALSE(parse_cpus(bad));
  }
}

TEST_CASE("L7: a malformed CPU count is a typed error naming the flag or field it came from", "[L7]") {
  auto e = parse_cpus_field("--cpus", "1.2345");
  REQUIRE_FALSE(e);
  CHECK(e.err().code == ccsb::errc::invalid_argument);
  CHECK(e.err().field == "--cpus");
  CHECK(e.err().what().rfind("--cpus: expected a number of CPUs", 0) == 0);
  CHECK(e.err().message.find("\"1.2345\"") != std::string::npos);
  auto ok = parse_cpus_field("limits.cpus", "2.5");
  REQUIRE(ok);
  CHECK(*ok == 2500u);
}

TEST_CASE("L7: a CPU cap is a quota per 100 ms period (1.5 -> 150000 100000), none is max, and reads back as given",
          "[L7]") {
  CHECK(cpu_quota_us(1500) == 150000u);
  CHECK(cpu_quota_us(500) == 50000u);
  CHECK(cpu_quota_us(kMinCpuMillis) == 1000u); // the kernel's smallest quota, 1 ms
  CHECK(cpu_max_text(1500) == "150000 100000");
  CHECK(cpu_max_text(0) == "max 100000");
  CHECK(cpus_text(1500) == "1.5");
  CHECK(cpus_text(2000) == "2");
  CHECK(cpus_text(10) == "0.01");
  CHECK(cpus_text(125) == "0.125");
  for (std::uint32_t m : {10u, 125u, 500u, 1500u, 2000u, 1024000u}) CHECK(parse_cpus(cpus_text(m)) == m);
  CHECK(resource_limits{}.cpu_millis == 0u); // default: no cap, the equal share only
  CHECK(kCpuWeight == 100u);
  CHECK(kCpuShares == 1024u);
}
