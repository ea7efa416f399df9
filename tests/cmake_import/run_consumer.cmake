# ctest driver: builds and runs tests/cmake_import/consumer in one mode.
#   -DMODE=find_package|subdirectory -DSRC=<ccsb source> -DBIN=<ccsb build> -DWORK=<scratch>
# The launcher (examples/launcher.cpp) runs as the test's user and, under
# root, once more as uid 65534 (setpriv): each run's command must run, write
# its file and have its server.pem creation denied and reported as a
# violation. Nothing in the environment points at a helper: the launcher
# finds ccsb-init and egressd as built or installed (CCSB_HELPER_DIR).
file(REMOVE_RECURSE "${WORK}")
set(args -DCCSB_MODE=${MODE} -DCCSB_LAUNCHER_SOURCE=${SRC}/examples/launcher.cpp)
if(MODE STREQUAL "find_package")
  execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BIN}" --prefix "${WORK}/prefix"
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "install failed: ${rc}")
  endif()
  list(APPEND args "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
else()
  list(APPEND args "-DCCSB_SOURCE=${SRC}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SRC}/tests/cmake_import/consumer" -B "${WORK}/build" ${args}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configure failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}/build" -j2 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "build failed: ${rc}")
endif()
execute_process(COMMAND "${WORK}/build/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "consumer failed: ${rc} ${out}")
endif()

execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
set(runs self)
if(uid STREQUAL "0")
  list(APPEND runs unprivileged)
endif()
foreach(who IN LISTS runs)
  set(dir "${WORK}/worktree-${who}")
  set(home "${WORK}/home-${who}")
  file(MAKE_DIRECTORY "${dir}" "${home}")
  set(prefix "")
  if(uid STREQUAL "0")
    # A root launcher runs the sandbox as the worktree's owner (L1), never
    # as root; the unprivileged launcher is that owner.
    execute_process(COMMAND chown 65534:65534 "${dir}" "${home}" COMMAND_ERROR_IS_FATAL ANY)
    if(who STREQUAL "unprivileged")
      set(prefix /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups --)
    endif()
  endif()
  execute_process(COMMAND ${prefix} env -u CCSB_INIT -u CCSB_EGRESSD -u XDG_RUNTIME_DIR "HOME=${home}"
                          "${WORK}/build/launcher" "${dir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "launcher (${who}): exit ${rc}\n${out}${err}")
  if(rc)
    message(FATAL_ERROR "the launcher (${MODE}, ${who}) failed: exit ${rc}")
  endif()
  if(NOT out MATCHES "\"event\":\"violation\"[^\n]*server\\.pem" OR NOT out MATCHES "\"event\":\"ready\"")
    message(FATAL_ERROR "the launcher (${MODE}, ${who}) printed no ready or no violation for server.pem")
  endif()
  if(EXISTS "${dir}/server.pem" OR NOT EXISTS "${dir}/notes.txt")
    message(FATAL_ERROR "the launcher (${MODE}, ${who}): server.pem created or notes.txt missing on the host")
  endif()
endforeach()
