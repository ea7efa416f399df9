// Egress of the microvm backend (N1-N8, X4; docs/microvm.md "Egress"): the
// guest has no NIC; its proxy listeners reach the session's egressd only
// through the ccsb.egress port and the host's relay
// (ccsb/launch/microvm_egress.hpp).
//
// The VM case boots one real VM per launcher (root, unprivileged) under TCG
// and, from the guest, reaches an allowed site on the host's loopback through
// the HTTP proxy and through SOCKS5, is refused denied ones with violation
// events in --events, and finds no way out without the proxy (a direct
// connection, DNS). The relay cases need no VM: they play the guest's side
// of the port against the real relay and egressd, as a hostile guest would.
#include "microvm_support.hpp"

#include "ccsb/launch/microvm_egress.hpp"

#include <chrono>

using namespace escape;
using namespace microvm_test;
namespace ge = ccsb::protocol::guest_egress;

namespace {

std::vector<std::string> egress_args(const std::string& allowed, const std::vector<std::string>& resolve) {
  std::vector<std::string> a{"--allow", allowed};
  for (const auto& n : resolve) a.insert(a.end(), {"--egress-opt", "--resolve", "--egress-opt", n + "=127.0.0.1"});
  a.insert(a.end(), {"--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"});
  return a;
}

bool has_violation(const std::string& events, const std::string& target, const std::string& reason = {}) {
  std::istringstream in(events);
  std::string line;
  while (std::getline(in, line))
    if (line.find("\"event\":\"violation\"") != std::string::npos &&
        line.find("\"target\":\"" + target + "\"") != std::string::npos &&
        line.find("\"reason\":\"" + reason) != std::string::npos)
      return true;
  return false;
}

// The guest's side of the port, against the real relay and egressd.
struct relay_harness {
  ccsb::launch::reactor r;
  std::unique_ptr<ccsb::launch::microvm_egress> relay;
  ccsb::launch::session_limits limits;
  ccsb::launch::unique_fd guest; // what QEMU would hold
  std::vector<ccsb::sandbox_violation> violations;
  std::vector<std::string> logs;
  ge::frame_reader from_host{ge::sender::host};
  bool port_closed{false};

  relay_harness(const std::string& allowed, int) {
    ccsb::launch::microvm_egress_options o;
    o.egressd_path = bin_path("egressd");
    REQUIRE(::access(o.egressd_path.c_str(), X_OK) == 0);
    o.network.allow = {allowed};
    o.egress.resolve = {allowed + "=127.0.0.1", "denied.test=127.0.0.1"};
    o.egress.allow_upstream = {"127.0.0.0/8"};
    o.memory_bytes = 512ull << 20;
    relay = std::make_unique<ccsb::launch::microvm_egress>(o);
    auto p = relay->open_port();
    REQUIRE(p);
    guest = std::move(*p);
    ccsb::launch::microvm_egress_hooks h;
    h.violation = [this](ccsb::sandbox_violation v) { violations.push_back(std::move(v)); };
    h.log = [this](const std::string& s) { logs.push_back(s); };
    auto s = relay->start(r, limits, h);
    REQUIRE(s);
  }

  // Queued, written without blocking while the relay runs (a flood larger
  // than the socket buffer must not stall the test's own thread).
  std::string to_relay;
  void send(const std::string& bytes) { to_relay += bytes; }
  void write_some() {
    while (!to_relay.empty() && !port_closed) {
      ssize_t w = ::send(guest.get(), to_relay.data(), to_relay.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w <= 0) return;
      to_relay.erase(0, static_cast<std::size_t>(w));
    }
  }

  // Runs the relay until `done` (a bounded number of rounds: a relay that
  // never gets there fails the test, it does not hang it).
  template <class Pred> bool run_until(Pred done) {
    for (int i = 0; i < 600 && !done(); ++i) {
      write_some();
      REQUIRE(r.run_once(std::chrono::milliseconds(50)));
      pump();
    }
    return done();
  }

  std::map<ge::stream_id, std::string> received;
  std::set<ge::stream_id> eofs, closes;
  std::map<ge::stream_id, std::uint64_t> credits;

  void pump() {
    for (;;) {
      pollfd p{guest.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      char buf[65536];
      ssize_t n = ::read(guest.get(), buf, sizeof buf);
      if (n <= 0) {
        port_closed = true;
        return;
      }
      from_host.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      for (;;) {
        auto f = from_host.next();
        REQUIRE(f);
        if (!*f) break;
        if (auto* d = std::get_if<ge::data>(&**f)) received[d->id] += d->bytes;
        if (auto* e = std::get_if<ge::eof>(&**f)) eofs.insert(e->id);
        if (auto* c = std::get_if<ge::close>(&**f)) closes.insert(c->id);
        if (auto* c = std::get_if<ge::credit>(&**f)) credits[c->id] += c->bytes;
      }
    }
  }
};

std::string get(const std::string& host, int port) {
  return "GET http://" + host + ":" + std::to_string(port) + "/ HTTP/1.1\r\nHost: " + host + ":" +
         std::to_string(port) + "\r\nConnection: close\r\n\r\n";
}

} // namespace

TEST_CASE("X4 N1 N7: the host's egress relay carries a guest stream through egressd, a denial is a violation",
          "[X4][N1][N7][microvm]") {
  const std::string tok = random_token();
  http_upstream up("RELAYED-" + tok);
  relay_harness h("allowed.test", 0);
  h.send(ge::encode(ge::open{1, ccsb::protocol::proxy_role::http}) + ge::encode(ge::data{1, get("allowed.test", up.port)}) +
         ge::encode(ge::eof{1}));
  REQUIRE(h.run_until([&] { return h.closes.count(1) > 0; }));
  INFO("logs: " << h.logs.size());
  CHECK_THAT(h.received[1], Catch::Contains("RELAYED-" + tok));
  CHECK(h.eofs.count(1) == 1);
  CHECK(up.requests == 1);

  h.send(ge::encode(ge::open{2, ccsb::protocol::proxy_role::http}) + ge::encode(ge::data{2, get("denied.test", up.port)}) +
         ge::encode(ge::eof{2}));
  REQUIRE(h.run_until([&] { return h.closes.count(2) > 0 && !h.violations.empty(); }));
  CHECK_THAT(h.received[2], Catch::Contains("403"));
  REQUIRE(h.violations.size() == 1);
  CHECK(h.violations[0].target == "denied.test:" + std::to_string(up.port));
  CHECK(up.requests == 1);
  CHECK(h.relay->ended().empty());

  // The guest aborts a stream: the host closes it and says so.
  h.send(ge::encode(ge::open{3, ccsb::protocol::proxy_role::socks}) + ge::encode(ge::close{3}));
  REQUIRE(h.run_until([&] { return h.closes.count(3) > 0; }));
  // Stale frames (a stream that was open once) are dropped, not errors.
  h.send(ge::encode(ge::data{3, "late"}) + ge::encode(ge::credit{1, 10}));
  h.send(ge::encode(ge::open{4, ccsb::protocol::proxy_role::http}) + ge::encode(ge::data{4, get("allowed.test", up.port)}));
  REQUIRE(h.run_until([&] { return h.received[4].find("RELAYED-" + tok) != std::string::npos; }));
  CHECK(h.relay->ended().empty());
}

TEST_CASE("X4 N1: a hostile guest's frames end the egress channel, fail closed, with the reason logged",
          "[X4][N1][microvm]") {
  auto frame = [](std::uint8_t type, std::uint32_t id, std::uint32_t len, std::string payload = {}) {
    return ge::header(static_cast<ge::frame_type>(type), id, len) + payload;
  };
  const std::string open1 = ge::encode(ge::open{1, ccsb::protocol::proxy_role::http});
  std::string too_many;
  for (ge::stream_id i = 1; i <= ge::kMaxStreams + 1; ++i) too_many += ge::encode(ge::open{i, ccsb::protocol::proxy_role::socks});
  struct hostile {
    const char* what;
    std::string bytes;
    const char* reason;
  };
  const std::vector<hostile> cases{
      {"an unknown frame type", frame(7, 1, 0), "unknown frame type"},
      {"a frame of 4 GiB announced", frame(2, 1, 0xffffffffu), "data: payload"},
      {"data for a stream never opened", open1 + ge::encode(ge::data{9, "x"}), "never opened"},
      {"a reused stream id", open1 + open1, "the next stream is 2"},
      {"more than kMaxStreams streams", too_many, "more than 64 streams"},
      {"data after eof", open1 + ge::encode(ge::eof{1}) + ge::encode(ge::data{1, "x"}), "after its eof"},
      {"credit past the window", open1 + ge::encode(ge::credit{1, 1}), "credit past the window"},
      {"an open claiming a third role", frame(1, 1, 1, "\x07"), "unknown role"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      relay_harness h("allowed.test", 0);
      h.send(c.bytes);
      REQUIRE(h.run_until([&] { return !h.relay->ended().empty() && h.port_closed; }));
      CHECK_THAT(h.relay->ended(), Catch::Contains(c.reason));
      bool logged = false;
      for (const auto& l : h.logs)
        if (l.find(c.reason) != std::string::npos && l.find("no network from now on") != std::string::npos) logged = true;
      CHECK(logged);
    }
  }
}

TEST_CASE("X4 N1: a guest that floods a stream past its credit ends the egress channel, the host's buffers stay bounded",
          "[X4][N1][microvm]") {
  // A tunnel to an upstream that never reads: egressd stops reading, the
  // relay's buffer for the stream fills to the window, and a guest that
  // ignores the credit it was given goes past it.
  tcp_listener sink;
  relay_harness h("allowed.test", 0);
  const std::string target = "allowed.test:" + std::to_string(sink.port);
  h.send(ge::encode(ge::open{1, ccsb::protocol::proxy_role::http}) +
         ge::encode(ge::data{1, "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"}));
  REQUIRE(h.run_until([&] { return h.received[1].find("\r\n\r\n") != std::string::npos; }));
  REQUIRE_THAT(h.received[1], Catch::StartsWith("HTTP/1.1 200"));
  const std::string chunk = ge::encode(ge::data{1, std::string(ge::kMaxData, 'A')});
  std::size_t flooded = 0;
  for (int round = 0; round < 2000 && h.relay->ended().empty(); ++round) {
    while (h.to_relay.size() < (std::size_t{1} << 20)) {
      h.send(chunk);
      flooded += ge::kMaxData;
    }
    h.write_some();
    REQUIRE(h.r.run_once(std::chrono::milliseconds(10)));
    h.pump();
  }
  INFO("flooded " << flooded << " bytes; credited " << h.credits[1]);
  REQUIRE(h.run_until([&] { return !h.relay->ended().empty() && h.port_closed; }));
  CHECK_THAT(h.relay->ended(), Catch::Contains("past a window"));
  // What the relay credited is what it wrote towards egressd: the flood
  // beyond it was never buffered.
  CHECK(h.credits[1] + ge::kWindow < flooded);
}

TEST_CASE("X4 N1-N8: from the guest, allowed sites are reached only through egressd, denied ones are violations, "
          "no direct connection or DNS",
          "[X4][N1][N5][N7][microvm]") {
  for (bool unprivileged : {false, true}) {
    DYNAMIC_SECTION((unprivileged ? "unprivileged launcher" : "root launcher")) {
      sandbox_fixture fx;
      const std::string tok = random_token();
      http_upstream up("ALLOWED-" + tok);
      tcp_listener direct; // must never see a connection
      const std::string port = std::to_string(up.port);
      vm_run v;
      v.unprivileged = unprivileged;
      v.extra = egress_args("allowed.test", {"allowed.test", "denied.test", "denied-socks.test"});
      const std::string curl = "curl -sS -m 60 ";
      auto r = run_vm(
          fx,
          "echo \"@@proxy=$HTTP_PROXY $ALL_PROXY\"\n"
          "echo \"@@http=$(" + curl + "http://allowed.test:" + port + "/)\"\n"
          "echo \"@@socks=$(" + curl + "-x socks5h://127.0.0.1:1080 http://allowed.test:" + port + "/)\"\n"
          "echo \"@@denied=$(" + curl + "-o /dev/null -w '%{http_code}' http://denied.test:" + port + "/)\"\n"
          + curl + "-x socks5h://127.0.0.1:1080 http://denied-socks.test:" + port + "/ >/dev/null 2>&1; echo @@denied_socks=$?\n"
          + curl + "--noproxy '*' -m 10 http://127.0.0.1:" + std::to_string(direct.port) + "/ >/dev/null 2>&1; echo @@direct=$?\n"
          + curl + "--noproxy '*' -m 10 http://192.0.2.1/ >/dev/null 2>&1; echo @@direct_remote=$?\n"
          "getent hosts allowed.test >/dev/null 2>&1; echo @@dns=$?\n"
          "getent hosts localhost.localdomain.invalid >/dev/null 2>&1; echo @@dns_invalid=$?\n"
          "echo \"@@ifaces=$(ls /sys/class/net | tr '\\n' ' ')\"\n"
          // The command against the relay: take its port, kill it.
          "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 3128))' 2>/dev/null; echo @@bind=$?\n"
          "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = ccsb-egress ] && echo @@relay=1 &&"
          " kill -9 ${p#/proc/} 2>/dev/null && echo @@killed=1; done\n"
          "echo \"@@after=$(" + curl + "http://allowed.test:" + port + "/)\"\n",
          v);
      ESCAPE_REQUIRE_RAN(r);
      const std::string events = read_file(fx.events);
      INFO("events:\n" << events);
      CHECK(r.get("kernel") == image_kernel());
      CHECK(r.get("proxy") == "http://127.0.0.1:3128 socks5h://127.0.0.1:1080");
      CHECK(r.get("http") == "ALLOWED-" + tok);
      CHECK(r.get("socks") == "ALLOWED-" + tok);
      CHECK(up.requests == 3);
      CHECK(r.get("denied") == "403");
      CHECK(r.get("denied_socks") != "0");
      CHECK(has_violation(events, "denied.test:" + port));
      CHECK(has_violation(events, "denied-socks.test:" + port));
      CHECK(r.get("direct") != "0");
      CHECK(r.get("direct_remote") != "0");
      CHECK(direct.accepted() == 0);
      CHECK(r.get("dns") != "0");
      CHECK(r.get("ifaces") == "lo ");
      CHECK(r.get("bind") != "0");
      // The command runs in the PID namespace of the guest's ccsb-init: the
      // relay (guest root, outside it) is not even visible, let alone killable.
      CHECK(r.get("relay") == "<missing>");
      CHECK(r.get("killed") == "<missing>");
      CHECK(r.get("after") == "ALLOWED-" + tok);
    }
  }
}

TEST_CASE("X4 T2 N5: in a microVM the terminal profile's open network is egressd with only the deny list and the "
          "address checks",
          "[X4][T2][N5][microvm]") {
  sandbox_fixture fx;
  const std::string tok = random_token();
  http_upstream up("OPEN-" + tok);
  const std::string port = std::to_string(up.port);
  vm_run v;
  // No --allow: a host on no list is reached; 127.0.0.0/8 is let through the
  // address check for the loopback stand-in only, a link-local one is not.
  v.extra = {"--profile", "terminal", "--egress-opt", "--resolve", "--egress-opt", "anyhost.test=127.0.0.1",
             "--egress-opt", "--resolve", "--egress-opt", "linklocal.test=169.254.1.1",
             "--egress-opt", "--allow-upstream", "--egress-opt", "127.0.0.0/8"};
  const std::string curl = "curl -sS -m 60 ";
  auto r = run_vm(fx,
                  "echo \"@@open=$(" + curl + "http://anyhost.test:" + port + "/)\"\n"
                  "echo \"@@metadata=$(" + curl + "-o /dev/null -w '%{http_code}' http://169.254.169.254/latest/)\"\n"
                  "echo \"@@linklocal=$(" + curl + "-o /dev/null -w '%{http_code}' http://linklocal.test:" + port + "/)\"\n"
                  + curl + "--noproxy '*' -m 10 http://127.0.0.1:" + port + "/ >/dev/null 2>&1; echo @@direct=$?\n",
                  v);
  ESCAPE_REQUIRE_RAN(r);
  const std::string events = read_file(fx.events);
  INFO("events:\n" << events);
  CHECK(r.get("open") == "OPEN-" + tok);
  CHECK(up.requests == 1);
  CHECK(r.get("metadata") == "403");
  CHECK(has_violation(events, "169.254.169.254:80", "deny_list"));
  CHECK(r.get("linklocal") == "403");
  CHECK(has_violation(events, "linklocal.test:" + port, "address:"));
  CHECK(r.get("direct") != "0");
}
