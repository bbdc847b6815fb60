# Writes the version header with the commit the build is made from, "-dirty" when the files the
# program is built from (CMakeLists.txt, cmake/, src/, kernels/) differ from it: run at every build (target rb_git_version), so a binary built from an edited
# tree never claims a clean commit. configure_file rewrites the header only when its text
# changes, so an unchanged tree rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DPROJECT_VERSION=... -P git_version.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE RINGBENCH_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT RINGBENCH_GIT_COMMIT)
  set(RINGBENCH_GIT_COMMIT unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD -- CMakeLists.txt cmake src kernels WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE dirty
                  ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND RINGBENCH_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${SOURCE_DIR}/src/version.hpp.in ${BINARY_DIR}/generated/ringbench/version.hpp @ONLY)
