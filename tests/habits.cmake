# Habits (issue #29 item 5): checks of how the code is written, not what it does.
# header_alone: each kernels/*.hpp compiles by itself with only kernels/ on the include path.
add_test(NAME header_alone
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/habits/header_alone.sh ${CMAKE_CXX_COMPILER}
                 ${PROJECT_SOURCE_DIR} ${RINGBENCH_TEST_OUTPUT}/header_alone)
set_tests_properties(header_alone PROPERTIES TIMEOUT 300 LABELS "unit")
