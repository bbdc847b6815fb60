# `cmake --install` into a temporary prefix, then the installed program and analysis run.
add_test(NAME install_prefix
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR}
                 ${RINGBENCH_TEST_OUTPUT}/install_prefix)
set_tests_properties(install_prefix PROPERTIES TIMEOUT 120 LABELS "unit;install")
