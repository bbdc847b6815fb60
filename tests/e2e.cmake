# End-to-end: the real program on real configs, the file read back with h5py.
# The script launches mpirun itself (it checks per-rank exit codes and output), so these
# are plain CTest entries rather than ringbench_add_test ones.
if(RINGBENCH_PYTHON)
  foreach(check small_np1 small_np2 small_np4 bad_configs dry_run force interrupted help
                simulated_layout)
    add_test(NAME e2e_${check}
             COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_checks.py ${check}
                     --ringbench $<TARGET_FILE:ringbench> --mpiexec ${MPIEXEC_EXECUTABLE}
                     --source ${PROJECT_SOURCE_DIR} --workdir ${RINGBENCH_TEST_OUTPUT}/e2e_${check})
    set_tests_properties(e2e_${check} PROPERTIES TIMEOUT 600 LABELS e2e SKIP_RETURN_CODE 77
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endforeach()
endif()
