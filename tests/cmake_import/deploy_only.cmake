# ctest driver: a build with the tests off defines no test or -macsim
# program, and ccsb-deploy is the deployment (ccsb-run, ccsbd, ccsb-init,
# egressd). Configures only (nothing is compiled).
#   -DSRC=<ccsb source> -DWORK=<scratch>
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SRC}" -B "${WORK}" -G "Unix Makefiles" -DCCSB_TESTS=OFF -DCCSB_BENCH=OFF
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configure with CCSB_TESTS=OFF failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}" --target help
                RESULT_VARIABLE rc OUTPUT_VARIABLE targets)
if(rc)
  message(FATAL_ERROR "cmake --build --target help failed: ${rc}")
endif()
string(REGEX MATCHALL "[^\n ]*(macsim|_tests|catch_main|fuzz_[a-z_]*|header_check)[^\n ]*" unwanted "${targets}")
if(unwanted)
  message(FATAL_ERROR "CCSB_TESTS=OFF still defines: ${unwanted}")
endif()
foreach(t ccsb-deploy ccsb-run ccsbd ccsb-init egressd)
  if(NOT targets MATCHES "\\.\\.\\. ${t}\n")
    message(FATAL_ERROR "CCSB_TESTS=OFF: no target ${t}")
  endif()
endforeach()
# ccsb-deploy depends on exactly the four programs: the generated build
# system lists a target's direct dependencies (Unix Makefiles, forced above).
file(STRINGS "${WORK}/CMakeFiles/Makefile2" deps REGEX "^CMakeFiles/ccsb-deploy.dir/all: ")
list(TRANSFORM deps REPLACE "^CMakeFiles/ccsb-deploy.dir/all: .*/CMakeFiles/([^/]+)\\.dir/all$" "\\1")
list(SORT deps)
if(NOT deps STREQUAL "ccsb-init;ccsb-run;ccsbd;egressd")
  message(FATAL_ERROR "ccsb-deploy depends on \"${deps}\", not on ccsb-run, ccsbd, ccsb-init and egressd alone")
endif()
