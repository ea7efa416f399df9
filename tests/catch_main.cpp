// Catch2 main for every ccsb test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
