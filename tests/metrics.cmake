# Metrics: the parallel HDF5 writer, at 1 to 4 ranks (collective paths differ with one rank),
# including a read-back with h5py (tests/metrics/check_h5py.py, skipped without h5py).
ringbench_add_doctest(TARGET test_metrics SOURCES metrics/test_h5.cpp metrics/test_text_table.cpp
                      LIBS rb_metrics)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME metrics_np${n} RANKS ${n} LABELS unit TIMEOUT 120
                     COMMAND $<TARGET_FILE:test_metrics>)
endforeach()
# Every rank must see the one output file: rank 1 under a private tmpfs over the output
# directory (a node-local /tmp elsewhere) is refused by name before any sweep (issue #17).
if(RINGBENCH_PYTHON)
  add_test(NAME metrics_same_output_file
           COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/metrics/same_output_file.py
                   --ringbench $<TARGET_FILE:ringbench> --mpiexec ${MPIEXEC_EXECUTABLE}
                   --workdir ${RINGBENCH_TEST_OUTPUT}/metrics_same_output_file)
  set_tests_properties(metrics_same_output_file PROPERTIES TIMEOUT 300 LABELS "mpi;e2e"
    SKIP_RETURN_CODE 77 PROCESSORS 2)
endif()
# run.mpiio_hints and run.alignment_bytes reach the file: /run/mpiio_hints, aligned datasets.
if(RINGBENCH_PYTHON)
  add_test(NAME metrics_output_hints
           COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/metrics/output_hints.py
                   --ringbench $<TARGET_FILE:ringbench> --mpiexec ${MPIEXEC_EXECUTABLE}
                   --workdir ${RINGBENCH_TEST_OUTPUT}/metrics_output_hints)
  set_tests_properties(metrics_output_hints PROPERTIES TIMEOUT 300 LABELS "mpi;e2e"
    SKIP_RETURN_CODE 77 PROCESSORS 2
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
