// test_supervisor_waits.cpp — issue 26 tests (being written).
#include "escape_support.hpp"
