// S3 handle, S4 lifecycle.
#include "ccsb/spec_json.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

using ccsb::errc;
using ccsb::sandbox_handle;
using S = ccsb::sandbox_state;

namespace {

// The S4 table, written out independently of is_legal_transition.
const std::set<std::pair<S, S>> kLegal{
    {S::created, S::warm},       {S::created, S::error},     {S::created, S::destroyed},
    {S::warm, S::active},        {S::active, S::warm},       {S::warm, S::suspended},
    {S::suspended, S::warm},     {S::warm, S::destroyed},    {S::active, S::destroyed},
    {S::suspended, S::destroyed}, {S::error, S::destroyed},  {S::active, S::error},
    {S::warm, S::error},
};

ccsb::error boom() { return ccsb::make_error(errc::io_error, "bwrap", "cannot unshare"); }

// A handle brought to `s` through legal moves only.
sandbox_handle handle_in(S s) {
  sandbox_handle h("sess-1", ccsb::backend::native);
  auto step = [&](S to) {
    auto r = to == S::error ? h.fail(boom()) : h.transition(to);
    REQUIRE(r);
  };
  switch (s) {
  case S::created: break;
  case S::warm: step(S::warm); break;
  case S::active: step(S::warm); step(S::active); break;
  case S::suspended: step(S::warm); step(S::suspended); break;
  case S::destroyed: step(S::destroyed); break;
  case S::error: step(S::error); break;
  }
  REQUIRE(h.state() == s);
  return h;
}

ccsb::result<void> move_to(sandbox_handle& h, S to) {
  return to == S::error ? h.fail(boom()) : h.transition(to);
}

} // namespace

TEST_CASE("S3: a new handle is created, carries sessionId and backend, no error, empty details", "[S3]") {
  sandbox_handle h("room-1", ccsb::backend::microvm);
  CHECK(h.session_id() == "room-1");
  CHECK(h.backend() == ccsb::backend::microvm);
  CHECK(h.state() == S::created);
  CHECK_FALSE(h.error().has_value());
  CHECK(h.details().empty());
  CHECK(h.valid());
}

TEST_CASE("S3: error is set exactly when state is error", "[S3]") {
  sandbox_handle h("s", ccsb::backend::native);
  REQUIRE(h.transition(S::warm));
  CHECK_FALSE(h.error());
  REQUIRE(h.fail(boom()));
  CHECK(h.state() == S::error);
  REQUIRE(h.error());
  CHECK(*h.error() == boom());
  REQUIRE(h.destroy());
  CHECK(h.state() == S::destroyed);
  CHECK_FALSE(h.error()); // leaving error clears it
}

TEST_CASE("S3: handle JSON has exactly sessionId, backend, state, error, details and round-trips", "[S3]") {
  sandbox_handle h("room \xe2\x9c\x93", ccsb::backend::native);
  REQUIRE(h.set_detail("workdir", picojson::value("/work/wt")));
  REQUIRE(h.set_detail("pid", picojson::value(std::int64_t{4242})));
  REQUIRE(h.set_detail("big", picojson::value(std::int64_t{(std::int64_t{1} << 60) + 1})));
  picojson::object ports;
  ports["http"] = picojson::value(std::int64_t{31001});
  ports["socks"] = picojson::value(std::int64_t{31002});
  REQUIRE(h.set_detail("proxyPorts", picojson::value(ports)));
  REQUIRE(h.set_detail("profilePath", picojson::value()));
  REQUIRE(h.transition(S::warm));

  const picojson::value v = ccsb::to_json(h);
  std::set<std::string> keys;
  for (const auto& [k, _] : v.get<picojson::object>()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"sessionId", "backend", "state", "error", "details"});
  CHECK(v.get("backend").get<std::string>() == "native");
  CHECK(v.get("state").get<std::string>() == "warm");
  CHECK(v.get("error").is<picojson::null>());

  const std::string text = ccsb::to_json_string(h);
  CHECK(text.find('\n') == std::string::npos);
  CHECK(text.find("1152921504606846977") != std::string::npos); // int64 kept exactly
  auto back = ccsb::parse_handle(text);
  REQUIRE(back);
  CHECK(*back == h);
  CHECK(ccsb::to_json_string(*back) == text);

  // A handle in the error state carries the error object.
  REQUIRE(h.fail(boom()));
  const picojson::value ev = ccsb::to_json(h);
  CHECK(ev.get("error").get("code").get<std::string>() == "io_error");
  CHECK(ev.get("error").get("field").get<std::string>() == "bwrap");
  CHECK(ev.get("error").get("message").get<std::string>() == "cannot unshare");
  auto eback = ccsb::parse_handle(ccsb::to_json_string(h));
  REQUIRE(eback);
  CHECK(*eback == h);
  CHECK(eback->error() == std::optional<ccsb::error>(boom()));
}

TEST_CASE("S3: details compare int64 values exactly", "[S3]") {
  sandbox_handle a("s", ccsb::backend::none), b("s", ccsb::backend::none);
  REQUIRE(a.set_detail("n", picojson::value(std::int64_t{(std::int64_t{1} << 60)})));
  REQUIRE(b.set_detail("n", picojson::value(std::int64_t{(std::int64_t{1} << 60) + 1})));
  CHECK_FALSE(a == b); // equal as doubles, different as integers
  REQUIRE(b.set_detail("n", picojson::value(std::int64_t{(std::int64_t{1} << 60)})));
  CHECK(a == b);
}

TEST_CASE("S3: reading a handle enforces the error invariant and B1 backend names", "[S3]") {
  struct row {
    const char* text;
    errc code;
    const char* field;
  };
  const std::vector<row> bad{
      {R"({"backend":"native","state":"warm"})", errc::missing_field, "sessionId"},
      {R"({"sessionId":"s","backend":"native"})", errc::missing_field, "state"},
      {R"({"sessionId":"s","state":"hot"})", errc::invalid_argument, "state"},
      {R"({"sessionId":"s","state":"error"})", errc::missing_field, "error"},
      {R"({"sessionId":"s","state":"error","error":null})", errc::missing_field, "error"},
      {R"({"sessionId":"s","state":"warm","error":{"code":"io_error","message":"x"}})", errc::invalid_argument, "error"},
      {R"({"sessionId":"s","state":"error","error":{"code":"nope","message":"x"}})", errc::invalid_argument, "error.code"},
      {R"({"sessionId":"s","state":"error","error":{"code":"io_error"}})", errc::missing_field, "error.message"},
      {R"({"sessionId":"s","state":"error","error":"boom"})", errc::wrong_type, "error"},
      {R"({"sessionId":"s","state":"warm","backend":5})", errc::wrong_type, "backend"},
      {R"({"sessionId":"s","state":"warm","details":[]})", errc::wrong_type, "details"},
      {R"([])", errc::wrong_type, "$"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.text);
    auto h = ccsb::parse_handle(r.text);
    REQUIRE_FALSE(h);
    CHECK(h.err().code == r.code);
    CHECK(h.err().field == r.field);
  }
  const std::vector<std::pair<const char*, ccsb::backend>> names{
      {R"({"sessionId":"s","state":"warm","backend":"docker"})", ccsb::backend::native},
      {R"({"sessionId":"s","state":"warm","backend":"Native"})", ccsb::backend::none},
      {R"({"sessionId":"s","state":"warm","backend":null})", ccsb::backend::none},
      {R"({"sessionId":"s","state":"warm"})", ccsb::backend::none},
      {R"({"sessionId":"s","state":"warm","backend":"microvm"})", ccsb::backend::microvm},
  };
  for (const auto& [text, want] : names) {
    CAPTURE(text);
    auto h = ccsb::parse_handle(text);
    REQUIRE(h);
    CHECK(h->backend() == want);
  }
}

TEST_CASE("S4: is_legal_transition is exactly the documented 6x6 table", "[S4]") {
  for (S from : ccsb::kAllStates)
    for (S to : ccsb::kAllStates) {
      CAPTURE(ccsb::to_string(from), ccsb::to_string(to));
      CHECK(ccsb::is_legal_transition(from, to) == (kLegal.count({from, to}) == 1));
    }
}

TEST_CASE("S4: every from/to pair on a live handle is accepted or rejected per the table", "[S4]") {
  int accepted = 0, rejected = 0;
  for (S from : ccsb::kAllStates)
    for (S to : ccsb::kAllStates) {
      CAPTURE(ccsb::to_string(from), ccsb::to_string(to));
      sandbox_handle h = handle_in(from);
      const auto before_error = h.error();
      auto r = move_to(h, to);
      if (from == S::destroyed) {
        REQUIRE_FALSE(r);
        CHECK(r.err().code == errc::handle_destroyed);
        CHECK(h.state() == S::destroyed);
        ++rejected;
      } else if (kLegal.count({from, to})) {
        CHECK(r);
        CHECK(h.state() == to);
        CHECK(h.error().has_value() == (to == S::error));
        ++accepted;
      } else {
        REQUIRE_FALSE(r);
        CHECK(r.err().code == errc::illegal_transition);
        const std::string arrow = std::string(ccsb::to_string(from)) + " -> " + std::string(ccsb::to_string(to));
        CHECK(r.err().message.find(arrow) != std::string::npos);
        CHECK(h.state() == from);            // unchanged
        CHECK(h.error() == before_error);    // unchanged
        ++rejected;
      }
    }
  CHECK(accepted == 13);
  CHECK(rejected == 23);
}

TEST_CASE("S4: every operation after destroyed fails with handle_destroyed", "[S4]") {
  for (S via : {S::created, S::warm, S::active, S::suspended, S::error}) {
    CAPTURE(ccsb::to_string(via));
    sandbox_handle h = handle_in(via);
    REQUIRE(h.set_detail("pid", picojson::value(std::int64_t{7})));
    REQUIRE(h.destroy());
    CHECK_FALSE(h.valid());
    for (S to : ccsb::kAllStates) {
      auto r = move_to(h, to);
      REQUIRE_FALSE(r);
      CHECK(r.err().code == errc::handle_destroyed);
      CHECK(r.err().message.find("sess-1") != std::string::npos);
    }
    auto d = h.destroy();
    REQUIRE_FALSE(d);
    CHECK(d.err().code == errc::handle_destroyed);
    auto s = h.set_detail("pid", picojson::value(std::int64_t{8}));
    REQUIRE_FALSE(s);
    CHECK(s.err().code == errc::handle_destroyed);
    auto e = h.erase_detail("pid");
    REQUIRE_FALSE(e);
    CHECK(e.err().code == errc::handle_destroyed);
    CHECK(h.details().at("pid").get<std::int64_t>() == 7); // nothing changed
    CHECK(h.state() == S::destroyed);
  }
}

TEST_CASE("S4: the error state is entered only through fail(), which records why", "[S4]") {
  sandbox_handle h("s", ccsb::backend::native);
  auto r = h.transition(S::error);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(h.state() == S::created);
  REQUIRE(h.fail(boom()));
  CHECK(h.error() == std::optional<ccsb::error>(boom()));
  auto again = h.fail(boom());
  REQUIRE_FALSE(again);
  CHECK(again.err().code == errc::illegal_transition);
  CHECK(again.err().message.find("error -> error") != std::string::npos);
}

TEST_CASE("S4: suspended cannot fail, and restore rejects an inconsistent handle", "[S4]") {
  sandbox_handle h = handle_in(S::suspended);
  auto f = h.fail(boom());
  REQUIRE_FALSE(f);
  CHECK(f.err().code == errc::illegal_transition);
  CHECK(f.err().message.find("suspended -> error") != std::string::npos);
  CHECK_FALSE(h.error());

  auto bad = sandbox_handle::restore("s", ccsb::backend::native, S::warm, boom(), {});
  REQUIRE_FALSE(bad);
  CHECK(bad.err().field == "error");
  auto good = sandbox_handle::restore("s", ccsb::backend::native, S::error, boom(), {});
  REQUIRE(good);
  CHECK(good->state() == S::error);
}

TEST_CASE("S4: state names parse and print", "[S4]") {
  for (S s : ccsb::kAllStates) {
    auto p = ccsb::parse_state(ccsb::to_string(s));
    REQUIRE(p);
    CHECK(*p == s);
  }
  CHECK(ccsb::to_string(S::suspended) == "suspended");
  auto bad = ccsb::parse_state("Warm");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::invalid_argument);
}
