// Catch2 main shared by every test binary; the TEST_CASEs, each tagged with
// its requirement id ([B1] … [T3]), live in the area directories.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
