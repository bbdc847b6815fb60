# Habits (issue #29 item 5): checks of how the code is written, not what it does.
# header_alone: each kernels/*.hpp compiles by itself with only kernels/ on the include path.
add_test(NAME header_alone
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/habits/header_alone.sh ${CMAKE_CXX_COMPILER}
                 ${PROJECT_SOURCE_DIR} ${RINGBENCH_TEST_OUTPUT}/header_alone)
set_tests_properties(header_alone PROPERTIES TIMEOUT 300 LABELS "unit")
# clang_format: every tracked C++/CUDA file is as .clang-format writes it (skipped without
# clang-format or outside a git checkout).
add_test(NAME clang_format COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/habits/clang_format.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(clang_format PROPERTIES TIMEOUT 300 LABELS "unit" SKIP_RETURN_CODE 77)
# python_lint: pylint with analysis/pyproject.toml's checks over analysis/, launch/*.py and
# tests/analysis/ (skipped without pylint).
add_test(NAME python_lint
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/habits/python_lint.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(python_lint PROPERTIES TIMEOUT 600 LABELS "unit" SKIP_RETURN_CODE 77)
