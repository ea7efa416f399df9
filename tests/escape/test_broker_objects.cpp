// test_broker_objects.cpp — X1 issue 26 items 1, 4, 5 (being written).
#include "escape_support.hpp"
