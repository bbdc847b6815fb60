# Metrics: the parallel HDF5 writer, at 1 to 4 ranks (collective paths differ with one rank),
# including a read-back with h5py (tests/metrics/check_h5py.py, skipped without h5py).
ringbench_add_doctest(TARGET test_metrics SOURCES metrics/test_h5.cpp metrics/test_text_table.cpp
                      LIBS rb_metrics)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME metrics_np${n} RANKS ${n} LABELS unit TIMEOUT 120
                     COMMAND $<TARGET_FILE:test_metrics>)
endforeach()
# On the real ringbench, 2 ranks (issue #17 item 7): metrics_same_output_file: every rank must
# see the one output file, rank 1 under a private tmpfs over the output directory (a node-local
# /tmp elsewhere) is refused by name before any sweep (77 where it cannot unshare and mount);
# metrics_output_hints: run.mpiio_hints and run.alignment_bytes reach the file
# (/run/mpiio_hints, aligned datasets).
if(RINGBENCH_PYTHON)
  foreach(check same_output_file output_hints)
    add_test(NAME metrics_${check}
             COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/metrics/${check}.py
                     --ringbench $<TARGET_FILE:ringbench> --mpiexec ${MPIEXEC_EXECUTABLE}
                     --workdir ${RINGBENCH_TEST_OUTPUT}/metrics_${check})
    set_tests_properties(metrics_${check} PROPERTIES TIMEOUT 300 LABELS "mpi;e2e"
      SKIP_RETURN_CODE 77 PROCESSORS 2
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  endforeach()
endif()
