// B1-B8, T1, T3: host probe and backend selection, every row on any host.
#include "ccsb/backend.hpp"

#include <catch2/catch.hpp>

using namespace ccsb;

namespace {
probe_facts linux_facts(bool bwrap, bool unshare = true) {
  probe_facts f;
  f.platform = platform::linux_;
  f.has_bwrap = bwrap;
  f.can_unshare = unshare;
  return f;
}
probe_result available_native() { return probe_native(linux_facts(true)); }
probe_result unavailable_native() { return probe_native(linux_facts(false)); }
} // namespace

TEST_CASE("B2: macOS offers Seatbelt", "[B2]") {
  probe_facts f;
  f.platform = platform::macos;
  f.has_sandbox_exec = true;
  auto r = probe_native(f);
  CHECK(r.available);
  CHECK_FALSE(r.requires_install);
  CHECK(r.note == "sandbox-exec (Seatbelt) — namespace isolation, no kernel boundary");
}

TEST_CASE("B2: Linux and WSL2 with bwrap offer bubblewrap (no socat: L3)", "[B2][L3]") {
  for (auto p : {platform::linux_, platform::wsl2}) {
    auto f = linux_facts(true);
    f.platform = p;
    auto r = probe_native(f);
    CHECK(r.available);
    CHECK(r.note == "bubblewrap — namespace isolation, no kernel boundary");
    CHECK(r.missing.empty());
  }
}

TEST_CASE("X2: the probe reports the kernel's Landlock ABI, which never decides availability", "[X2][B2]") {
  auto f = linux_facts(true);
  f.landlock_abi = 7;
  auto r = probe_native(f);
  CHECK(r.available);
  CHECK(r.landlock_abi == 7);
  f.landlock_abi = 0;
  CHECK(probe_native(f).available);
  CHECK(probe_native(f).landlock_abi == 0);
}

TEST_CASE("B2: a missing bwrap names exactly the missing package", "[B2]") {
  auto res = probe_native(linux_facts(false));
  CHECK_FALSE(res.available);
  CHECK(res.requires_install);
  CHECK(res.missing == std::vector<std::string>{"bubblewrap"});
  CHECK(res.hint == "apt-get install bubblewrap");
}

TEST_CASE("B2: a bwrap that cannot unshare is not available", "[B2]") {
  auto f = linux_facts(true, false);
  f.unshare_error = "bwrap: No permissions to create new namespace";
  auto r = probe_native(f);
  CHECK_FALSE(r.available);
  CHECK_FALSE(r.requires_install);
  CHECK_THAT(r.hint, Catch::Contains("No permissions to create new namespace"));
}

TEST_CASE("B7: Windows and other platforms have no native sandbox", "[B7][B2]") {
  for (auto p : {platform::windows, platform::other}) {
    probe_facts f;
    f.platform = p;
    f.has_bwrap = f.can_unshare = f.has_sandbox_exec = true; // tools do not matter
    auto r = probe_native(f);
    CHECK_FALSE(r.available);
    CHECK_FALSE(r.requires_install);
    CHECK(r.hint == "Native sandbox is not offered on this platform");
    auto s = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, r, {});
    REQUIRE(s);
    CHECK(s->chosen == backend::none);
  }
}

TEST_CASE("B3: --sandbox accepts on/off in any case and nothing else", "[B3]") {
  CHECK(*parse_sandbox_switch("on") == sandbox_switch::on);
  CHECK(*parse_sandbox_switch("ON") == sandbox_switch::on);
  CHECK(*parse_sandbox_switch("Off") == sandbox_switch::off);
  for (const char* bad : {"", "yes", "true", "1", "o n", "onn"}) {
    auto r = parse_sandbox_switch(bad, "CC_SERVER_SANDBOX");
    REQUIRE_FALSE(r);
    CHECK(r.err().field == "CC_SERVER_SANDBOX");
    CHECK_THAT(r.err().message, Catch::Contains("\"on\" or \"off\""));
  }
}

TEST_CASE("B4: exactly one start-up line per outcome", "[B4]") {
  CHECK(startup_line(sandbox_switch::on, available_native()) ==
        "agent sandbox ON (bubblewrap — namespace isolation, no kernel boundary)");
  CHECK(startup_line(sandbox_switch::on, unavailable_native()) ==
        "no OS-native agent sandbox on this host (apt-get install bubblewrap)");
  CHECK(startup_line(sandbox_switch::off, available_native()) == "agent sandbox DISABLED by --sandbox off");
}

TEST_CASE("B5: dispatch wraps in native only when available and on", "[B5][B8]") {
  struct row { bool avail; sandbox_switch sw; backend expect; };
  const row rows[] = {
      {true, sandbox_switch::on, backend::native},
      {false, sandbox_switch::on, backend::none},
      {true, sandbox_switch::off, backend::none},
      {false, sandbox_switch::off, backend::none},
  };
  for (const auto& r : rows) {
    auto s = select_backend(run_context::dispatch, std::nullopt, r.sw, r.avail ? available_native() : unavailable_native(), {});
    REQUIRE(s);
    CHECK(s->chosen == r.expect);
  }
}

TEST_CASE("B6: explicit microvm without a runtime is a typed error", "[B6]") {
  auto s = select_backend(run_context::dispatch, backend::microvm, sandbox_switch::on, available_native(),
                          {false, "no KVM"});
  REQUIRE_FALSE(s);
  CHECK(s.err().code == errc::backend_unavailable);
  CHECK_THAT(s.err().message, Catch::Contains("no KVM"));
  auto ok = select_backend(run_context::dispatch, backend::microvm, sandbox_switch::on, available_native(), {true, ""});
  REQUIRE(ok);
  CHECK(ok->chosen == backend::microvm);
}

TEST_CASE("B6: only an unspecified default steps down, and says so", "[B6]") {
  auto s = select_backend(run_context::dispatch, std::nullopt, sandbox_switch::on, available_native(),
                          {false, "no KVM"}, /*prefer_microvm=*/true);
  REQUIRE(s);
  CHECK(s->chosen == backend::native);
  REQUIRE(s->log.size() == 1);
  CHECK_THAT(s->log[0], Catch::Contains("steps down to native"));
  // Explicit native never becomes microvm or none silently.
  auto n = select_backend(run_context::dispatch, backend::native, sandbox_switch::on, unavailable_native(), {true, ""});
  REQUIRE_FALSE(n);
  CHECK(n.err().code == errc::backend_unavailable);
  auto off = select_backend(run_context::dispatch, backend::native, sandbox_switch::off, available_native(), {});
  REQUIRE_FALSE(off);
  CHECK_THAT(off.err().message, Catch::Contains("--sandbox off"));
}

TEST_CASE("T1: terminals default to none and get native only on request", "[T1][T3]") {
  auto d = select_backend(run_context::terminal, std::nullopt, sandbox_switch::on, available_native(), {});
  REQUIRE(d);
  CHECK(d->chosen == backend::none);
  auto n = select_backend(run_context::terminal, backend::native, sandbox_switch::on, available_native(), {});
  REQUIRE(n);
  CHECK(n->chosen == backend::native);
  // T3: unsupported wrapping fails instead of showing a native badge.
  auto f = select_backend(run_context::terminal, backend::native, sandbox_switch::on, unavailable_native(), {});
  REQUIRE_FALSE(f);
}

TEST_CASE("B1: an explicit backend request is parsed strictly", "[B1][B6]") {
  CHECK(*parse_backend_request("native") == backend::native);
  CHECK(*parse_backend_request("none") == backend::none);
  CHECK(*parse_backend_request("microvm") == backend::microvm);
  CHECK_FALSE(parse_backend_request("docker"));
  CHECK_FALSE(parse_backend_request("Native"));
  CHECK(from_name(std::string_view("docker")) == backend::native);
}
