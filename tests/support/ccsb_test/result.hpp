// ccsb_test/result.hpp — the value of a ccsb::result a test expects to
// succeed; a failure ends the test with the error's own text.
#pragma once

#include "ccsb/result.hpp"

#include <catch2/catch.hpp>

#include <utility>

namespace ccsb_test {

template <class T> T require_ok(ccsb::result<T> r) {
  if (!r) FAIL(r.err().what());
  return std::move(*r);
}

} // namespace ccsb_test
