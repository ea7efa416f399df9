// test_spec_profile.cpp — issue 26 tests (being written).
#include "escape_support.hpp"
