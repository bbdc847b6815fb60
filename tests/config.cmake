# Config module: YAML schema, typed accessors, the malformed-config table and key tables
# (config/key_spec.hpp: defaults per backend, dtype aliases, --help's text).
ringbench_add_doctest(TARGET test_config SOURCES config/test_config.cpp config/test_key_spec.cpp
                      LIBS rb_config)
# mpi.h for MPI_MAX_INFO_KEY / MPI_MAX_INFO_VAL, the limits of run.mpiio_hints (no MPI call).
target_include_directories(test_config SYSTEM PRIVATE
                           $<TARGET_PROPERTY:MPI::MPI_C,INTERFACE_INCLUDE_DIRECTORIES>)
ringbench_add_test(NAME config RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_config>)
# Tuned kernel policy read-back (issue #13): sha256, the policy file reader and its errors, the
# lookup rule, applicability, and `kernel_policy:` in a config.
ringbench_add_doctest(TARGET test_policy_file SOURCES config/test_policy_file.cpp LIBS rb_config)
# The shipped policies in inputs/ are read by one test case.
target_compile_definitions(test_policy_file PRIVATE RINGBENCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
ringbench_add_test(NAME policy_file RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_policy_file>)
