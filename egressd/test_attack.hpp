// egressd/test_attack.hpp — what a compromised egressd would try after
// `ready`, for the X3 tests only (tests/egressd/test_confine.cpp). Built into
// egressd-attack (egressd/CMakeLists.txt: the same sources with
// CCSB_EGRESSD_TEST_ATTACKS), never into the egressd that ships, which has no
// such option at all.
//
//   take_test_attacks(args)  removes every "--test-attack KIND=ARG" (or
//                            "--test-attack=KIND=ARG") from args, validated:
//                            open=PATH, exec=PATH (absolute) or
//                            bind=ADDR:PORT (TCP); a bad one is a typed
//                            error naming --test-attack
//   run_test_attack(a)       the attempt, as the testAttack event
//                            (ccsb/protocol/egressd_events.hpp); an exec
//                            that succeeds does not return
#pragma once

#include "ccsb/protocol/egressd_events.hpp"
#include "ccsb/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace egressd {

struct test_attack {
  enum class kind : std::uint8_t { open, exec, bind } what{kind::open};
  std::string arg; // a path (open, exec) or ADDR:PORT (bind)
};

ccsb::result<std::vector<test_attack>> take_test_attacks(std::vector<std::string>& args);

ccsb::protocol::egressd_events::test_attack run_test_attack(const test_attack& a);

} // namespace egressd
