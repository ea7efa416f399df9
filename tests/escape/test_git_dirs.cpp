// test_git_dirs.cpp — issue 26 tests (being written).
#include "escape_support.hpp"
