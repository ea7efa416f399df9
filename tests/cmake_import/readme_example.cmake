# ctest driver: the README's embedding example is examples/launcher.cpp, byte
# for byte (the file is what CI compiles and runs, tests/cmake_import).
#   -DSRC=<ccsb source>
# The README holds it between the lines
#   <!-- examples/launcher.cpp: begin -->  and  <!-- examples/launcher.cpp: end -->
# inside a ```cpp fence.
file(READ "${SRC}/README.md" readme)
file(READ "${SRC}/examples/launcher.cpp" example)
set(begin "<!-- examples/launcher.cpp: begin -->\n```cpp\n")
set(end "```\n<!-- examples/launcher.cpp: end -->")
string(FIND "${readme}" "${begin}" b)
string(FIND "${readme}" "${end}" e)
if(b EQUAL -1 OR e EQUAL -1)
  message(FATAL_ERROR "README.md has no examples/launcher.cpp block (the begin and end markers)")
endif()
string(LENGTH "${begin}" bl)
math(EXPR from "${b} + ${bl}")
math(EXPR len "${e} - ${from}")
string(SUBSTRING "${readme}" ${from} ${len} shown)
if(NOT shown STREQUAL example)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/readme_launcher.cpp" "${shown}")
  message(FATAL_ERROR "the README's embedding example differs from examples/launcher.cpp "
                      "(diff ${CMAKE_CURRENT_BINARY_DIR}/readme_launcher.cpp ${SRC}/examples/launcher.cpp)")
endif()
