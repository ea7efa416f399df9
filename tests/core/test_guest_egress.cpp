// ccsb/protocol/guest_egress.hpp: the microVM's egress port (N1-N8, X4), its
// frames and the rules both ends keep (ids, stream limit, credit). Both ends
// use these functions, so what one writes the other must parse, and a frame
// that breaks a rule must be an error, never applied.
#include "ccsb/egress.hpp"
#include "ccsb/microvm.hpp"
#include "ccsb/protocol/egressd_args.hpp"
#include "ccsb/protocol/guest_egress.hpp"
#include "ccsb/protocol/proxy_channel.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

using namespace ccsb::protocol;
using namespace ccsb::protocol::guest_egress;
namespace ge = ccsb::protocol::guest_egress;

namespace {

std::vector<frame> read_all(sender from, const std::string& bytes, std::string* error = nullptr) {
  frame_reader r(from);
  r.feed(bytes);
  std::vector<frame> out;
  for (;;) {
    auto f = r.next();
    if (!f) {
      if (error) *error = f.err().message;
      return out;
    }
    if (!*f) return out;
    out.push_back(**f);
  }
}

std::string raw(std::uint8_t type, std::uint32_t id, std::uint32_t len, std::string payload = {}) {
  std::string s = header(static_cast<frame_type>(type), id, len);
  return s + payload;
}

} // namespace

TEST_CASE("X4 N1: guest egress frames round-trip, whole and byte by byte", "[X4][N1]") {
  const std::vector<frame> frames{ge::open{1, proxy_role::http}, ge::open{2, proxy_role::socks},
                                  ge::data{1, std::string("GET / HTTP/1.1\r\n\0\xff", 18)},
                                  ge::data{2, std::string(kMaxData, 'x')}, ge::eof{1}, ge::credit{2, kWindow}, ge::credit{1, 1},
                                  ge::close{2}};
  std::string bytes;
  for (const auto& f : frames) bytes += encode(f);
  CHECK(read_all(sender::guest, bytes) == frames);
  frame_reader r(sender::guest);
  std::vector<frame> got;
  for (char c : bytes) {
    r.feed(std::string_view(&c, 1));
    for (;;) {
      auto f = r.next();
      REQUIRE(f);
      if (!*f) break;
      got.push_back(**f);
    }
  }
  CHECK(got == frames);
  // Read straight into the reader.
  frame_reader w(sender::guest);
  char* at = w.write_area(bytes.size() + 100);
  std::memcpy(at, bytes.data(), bytes.size());
  w.commit(bytes.size());
  std::vector<frame> direct;
  while (auto f = w.next()) {
    REQUIRE(f);
    if (!*f) break;
    direct.push_back(**f);
  }
  CHECK(direct == frames);
}

TEST_CASE("X4 N1: the frame reader refuses malformed frames and stays failed", "[X4][N1]") {
  struct bad_case {
    const char* what;
    sender from;
    std::string bytes;
    const char* reason;
  };
  const std::vector<bad_case> cases{
      {"unknown type", sender::guest, raw(9, 1, 0), "unknown frame type"},
      {"type 0", sender::guest, raw(0, 1, 0), "unknown frame type"},
      {"stream id 0", sender::guest, raw(2, 0, 1, "x"), "stream id 0"},
      {"an open from the host", sender::host, raw(1, 1, 1, "\x01"), "open from the host"},
      {"an open with an unknown role", sender::guest, raw(1, 1, 1, "\x03"), "unknown role"},
      {"an open with two payload bytes", sender::guest, raw(1, 1, 2, "\x01\x01"), "open: payload"},
      {"empty data", sender::guest, raw(2, 1, 0), "data: payload"},
      {"a huge frame (header only)", sender::guest, raw(2, 1, 0xffffffffu), "data: payload"},
      {"data one past the limit (header only)", sender::guest, raw(2, 1, kMaxData + 1), "data: payload"},
      {"eof with a payload", sender::host, raw(3, 1, 1, "x"), "eof/close"},
      {"credit of 0", sender::host, raw(5, 1, 4, std::string(4, '\0')), "credit of 0"},
      {"credit past the window", sender::host, raw(5, 1, 4, "\xff\xff\xff\xff"), "credit of"},
      {"credit of 3 bytes", sender::host, raw(5, 1, 3, "abc"), "credit: payload"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    frame_reader r(c.from);
    r.feed(c.bytes);
    auto f = r.next();
    REQUIRE_FALSE(f);
    CHECK_THAT(f.err().message, Catch::Contains(c.reason));
    CHECK(r.failed());
    CHECK(r.buffered() == 0); // nothing of a refused frame is held
    r.feed(encode(ge::eof{1}));
    CHECK_FALSE(r.next()); // a byte stream is not resynchronised
  }
}

TEST_CASE("X4 N1: the host's table refuses unknown streams, id reuse, too many streams, data past the window",
          "[X4][N1]") {
  SECTION("streams are numbered 1, 2, 3 and never reused") {
    mux_table t(sender::host);
    REQUIRE(t.receive(ge::open{1, proxy_role::http}));
    CHECK_FALSE(t.receive(ge::open{1, proxy_role::http})); // reuse
    CHECK_FALSE(t.receive(ge::open{3, proxy_role::http})); // a gap
    REQUIRE(t.receive(ge::open{2, proxy_role::socks}));
    CHECK(t.size() == 2);
  }
  SECTION("a stream never opened is an error, one that is gone is stale") {
    mux_table t(sender::host);
    REQUIRE(t.receive(ge::open{1, proxy_role::http}));
    auto unknown = t.receive(ge::data{2, "x"});
    REQUIRE_FALSE(unknown);
    CHECK_THAT(unknown.err().message, Catch::Contains("never opened"));
    t.sent_close(1);
    CHECK(t.size() == 0);
    auto stale = t.receive(ge::data{1, "late"});
    REQUIRE(stale);
    CHECK(*stale == mux_table::verdict::stale);
  }
  SECTION("at most kMaxStreams streams") {
    mux_table t(sender::host);
    for (stream_id i = 1; i <= kMaxStreams; ++i) REQUIRE(t.receive(ge::open{i, proxy_role::http}));
    auto more = t.receive(ge::open{static_cast<stream_id>(kMaxStreams + 1), proxy_role::http});
    REQUIRE_FALSE(more);
    CHECK_THAT(more.err().message, Catch::Contains("more than"));
    t.sent_close(5); // a slot freed by the host's close: the next one fits
    CHECK(t.receive(ge::open{static_cast<stream_id>(kMaxStreams + 1), proxy_role::http}));
  }
  SECTION("the window: kWindow bytes, then credit") {
    mux_table t(sender::host);
    REQUIRE(t.receive(ge::open{1, proxy_role::http}));
    for (std::uint32_t sent = 0; sent < kWindow; sent += kMaxData) REQUIRE(t.receive(ge::data{1, std::string(kMaxData, 'a')}));
    auto over = t.receive(ge::data{1, "x"});
    REQUIRE_FALSE(over);
    CHECK_THAT(over.err().message, Catch::Contains("past a window"));
  }
  SECTION("consumed bytes are credited back, never past the window") {
    mux_table t(sender::host);
    REQUIRE(t.receive(ge::open{1, proxy_role::http}));
    REQUIRE(t.receive(ge::data{1, std::string(1000, 'a')}));
    CHECK(t.consumed(1, 400, 600) == 0);    // small, and more is still held: later
    CHECK(t.consumed(1, 600, 0) == 1000);   // all written: credited
    CHECK(t.find(1)->recv_left == kWindow); // the full window again
    for (std::uint32_t sent = 0; sent < kWindow; sent += kMaxData) REQUIRE(t.receive(ge::data{1, std::string(kMaxData, 'a')}));
    CHECK(t.consumed(1, kCreditStep, kWindow - kCreditStep) == kCreditStep); // a step's worth, even while holding
  }
  SECTION("data after eof, a second eof, and credit past the window are errors") {
    mux_table t(sender::host);
    REQUIRE(t.receive(ge::open{1, proxy_role::http}));
    REQUIRE(t.receive(ge::eof{1}));
    CHECK_FALSE(t.receive(ge::data{1, "x"}));
    mux_table u(sender::host);
    REQUIRE(u.receive(ge::open{1, proxy_role::http}));
    REQUIRE(u.receive(ge::eof{1}));
    CHECK_FALSE(u.receive(ge::eof{1}));
    mux_table v(sender::host);
    REQUIRE(v.receive(ge::open{1, proxy_role::http}));
    CHECK_FALSE(v.receive(ge::credit{1, 1})); // nothing was sent: the window is full
    v.sent_data(1, 100);
    CHECK(v.receive(ge::credit{1, 100}));
    CHECK(v.find(1)->send_credit == kWindow);
  }
}

TEST_CASE("X4 N1: the guest's table opens at most kMaxStreams and frees a slot only on the host's close",
          "[X4][N1]") {
  mux_table g(sender::guest);
  for (stream_id i = 1; i <= kMaxStreams; ++i) {
    auto id = g.open_local(proxy_role::socks);
    REQUIRE(id);
    CHECK(*id == i);
  }
  CHECK_FALSE(g.open_local(proxy_role::http));
  g.sent_close(3); // the guest's abort: the slot stays held
  CHECK(g.size() == kMaxStreams);
  CHECK(g.find(3)->close_sent);
  REQUIRE(g.receive(ge::close{3})); // the host's close frees it
  CHECK(g.size() == kMaxStreams - 1);
  auto next = g.open_local(proxy_role::http);
  REQUIRE(next);
  CHECK(*next == kMaxStreams + 1);
  CHECK_FALSE(g.receive(ge::data{static_cast<stream_id>(kMaxStreams + 2), "x"})); // never opened
  mux_table h(sender::host);
  CHECK_FALSE(h.open_local(proxy_role::http)); // only the guest opens
}

TEST_CASE("X4 N1: the proxy channel's connection message round-trips and is strict", "[X4][N1][L3]") {
  CHECK(write_message(connection_message{proxy_role::socks}) == "connection socks");
  CHECK(is_connection_message("connection http"));
  CHECK_FALSE(is_connection_message("listeners http"));
  auto c = parse_connection("connection http", 1);
  REQUIRE(c);
  CHECK(c->role == proxy_role::http);
  CHECK_FALSE(parse_connection("connection http", 0));
  CHECK_FALSE(parse_connection("connection http", 2));
  CHECK_FALSE(parse_connection("connection ftp", 1));
  CHECK_FALSE(parse_connection("connection http socks", 1));
  CHECK_FALSE(parse_connection("connection  http", 1));
  CHECK_FALSE(parse_connection("connection http\n", 1));
}

TEST_CASE("X4 T2 N5: an open egress policy allows every host but the deny list's, and only when the network is on",
          "[X4][T2][N5]") {
  ccsb::egress_rules rules;
  rules.open = true;
  auto p = ccsb::egress_policy::compile(rules);
  REQUIRE(p);
  CHECK(p->decide("never-listed.example").allowed);
  CHECK(p->decide("10.1.2.3").allowed); // names only: egressd's address checks judge addresses
  auto meta = p->decide("169.254.169.254");
  CHECK_FALSE(meta.allowed);
  CHECK(meta.step == ccsb::decision_step::deny_list);
  rules.network_enabled = false;
  auto off = ccsb::egress_policy::compile(rules);
  REQUIRE(off);
  CHECK_FALSE(off->decide("never-listed.example").allowed);
  ccsb::egress_rules closed;
  auto c = ccsb::egress_policy::compile(closed);
  REQUIRE(c);
  CHECK_FALSE(c->decide("never-listed.example").allowed);
  // egressd's flag for it round-trips.
  ccsb::protocol::egressd_args a;
  a.open_network = true;
  auto argv = ccsb::protocol::to_argv(a);
  CHECK(std::find(argv.begin(), argv.end(), "--open-network") != argv.end());
  auto back = ccsb::protocol::parse_egressd_args(argv);
  REQUIRE(back);
  CHECK(back->open_network);
}

TEST_CASE("X4 N1: QEMU gets the egress port, and the guest the flag to serve it, only with an egress descriptor",
          "[X4][N1]") {
  ccsb::microvm::vm_config c;
  c.qemu = "/usr/bin/qemu-system-x86_64";
  c.kernel = "/g/vmlinux";
  c.initrd = "/g/initramfs.cpio.gz";
  c.control_fd = 3;
  c.console_fd = 4;
  auto joined = [](const std::vector<std::string>& a) {
    std::string s;
    for (const auto& x : a) s += x + "\n";
    return s;
  };
  const std::string without = joined(ccsb::microvm::qemu_argv(c));
  CHECK(without.find("ccsb.egress") == std::string::npos);
  CHECK(without.find("-netdev") == std::string::npos);
  c.egress_fd = 5;
  const std::string with = joined(ccsb::microvm::qemu_argv(c));
  CHECK_THAT(with, Catch::Contains("socket,id=egress,fd=5\n"));
  CHECK_THAT(with, Catch::Contains("virtserialport,chardev=egress,name=ccsb.egress\n"));
  CHECK_THAT(with, Catch::Contains(" ccsb.egress=1"));
  CHECK(with.find("-netdev") == std::string::npos); // still no NIC
  CHECK(with.find("-nic") == std::string::npos);
}
