# ctest driver: a build with the tests off defines no test or -macsim
# program, and ccsb-deploy is the deployment (ccsb-run, ccsbd, ccsb-init,
# egressd). Configures only (nothing is compiled).
#   -DSRC=<ccsb source> -DWORK=<scratch>
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SRC}" -B "${WORK}" -DCCSB_TESTS=OFF -DCCSB_BENCH=OFF
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
# ccsb-deploy depends on exactly the four programs (the generated build
# system names its dependencies).
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}" --target ccsb-deploy -- -n
                RESULT_VARIABLE rc OUTPUT_VARIABLE plan)
foreach(t ccsb-run ccsbd ccsb-init egressd)
  if(NOT plan MATCHES "${t}")
    message(FATAL_ERROR "ccsb-deploy would not build ${t}")
  endif()
endforeach()
if(plan MATCHES "_tests|macsim|bench")
  message(FATAL_ERROR "ccsb-deploy would build more than the deployment")
endif()
