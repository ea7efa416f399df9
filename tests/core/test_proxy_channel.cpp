// ccsb/protocol/proxy_channel.hpp: the messages between ccsb-init and
// egressd on the proxy channel (L3, B2). Both ends use these functions, so
// what one writes the other must parse, and nothing else.
#include "ccsb/protocol/proxy_channel.hpp"

#include <catch2/catch.hpp>

using namespace ccsb::protocol;

TEST_CASE("L3: proxy channel messages round-trip", "[L3][B2]") {
  listeners_message m{{proxy_role::http, proxy_role::socks}};
  CHECK(write_message(m) == "listeners http socks");
  auto back = parse_listeners(write_message(m), 2);
  REQUIRE(back);
  CHECK(*back == m);
  CHECK(write_message(channel_reply{accepting_message{}}) == "accepting");
  auto a = parse_reply("accepting");
  REQUIRE(a);
  CHECK(std::holds_alternative<accepting_message>(*a));
  auto r = parse_reply(write_message(channel_reply{refused_message{"a socket is not listening"}}));
  REQUIRE(r);
  CHECK(std::get<refused_message>(*r).reason == "a socket is not listening");
}

TEST_CASE("L3: any refusal text is written so that it parses (control bytes, length, empty)", "[L3][B2]") {
  for (std::string reason : {std::string("line\nbreak\tand\x7f"), std::string(1000, 'x'), std::string(),
                             std::string("\xff\xfe non-ASCII"), std::string("two  spaces")}) {
    INFO(reason);
    auto r = parse_reply(write_message(channel_reply{refused_message{reason}}));
    REQUIRE(r);
    const auto& got = std::get<refused_message>(*r).reason;
    CHECK(got.size() <= kMaxReason);
    CHECK_FALSE(got.empty());
  }
}

TEST_CASE("L3: the proxy channel parsers refuse everything else", "[L3][B2]") {
  struct row {
    std::string text;
    std::size_t fds;
  };
  for (const auto& r : std::vector<row>{{"", 0},
                                        {"listeners", 0},
                                        {"listeners http", 0},
                                        {"listeners http", 2},
                                        {"listeners http socks", 1},
                                        {"listeners ftp", 1},
                                        {"listeners HTTP", 1},
                                        {"listeners  http", 1},
                                        {"listeners http ", 1},
                                        {" listeners http", 1},
                                        {"listeners http\n", 1},
                                        {std::string("listeners http\0", 15), 1},
                                        {"listener http", 1},
                                        {"listeners http http http http http http http http http", 9},
                                        {"listeners " + std::string(600, 'h'), 1}}) {
    INFO(r.text << " / " << r.fds);
    CHECK_FALSE(parse_listeners(r.text, r.fds));
  }
  for (const std::string& bad : std::vector<std::string>{"", "accepting ", "Accepting", "refused", "refused ", "refused a\nb",
                                "refused " + std::string(kMaxReason + 1, 'x'), "ok", "accepting\n"}) {
    INFO(bad);
    CHECK_FALSE(parse_reply(bad));
  }
}
