# Metrics: the parallel HDF5 writer, at 1 to 4 ranks (collective paths differ with one rank),
# including a read-back with h5py (tests/metrics/check_h5py.py, skipped without h5py).
ringbench_add_doctest(TARGET test_metrics SOURCES metrics/test_h5.cpp metrics/test_text_table.cpp
                      metrics/test_table_rows.cpp
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
    ringbench_add_script_test(NAME metrics_${check} SCRIPT metrics/${check}.py
                              TIMEOUT 300 LABELS mpi e2e RANKS 2 OVERSUBSCRIBE)
  endforeach()
endif()
# Storage proportional to work (issue #30 item 1): real 8- and 16-rank runs on simulated nodes
# of 4, whose dataset bytes per rank and point hardly grow, whose dry-run estimate is the file's
# size, and whose sampled tables rb-analysis reads; and inputs/large.yaml's planned output at
# 1,024 and 16,384 ranks within its targets (100 MiB, 2 GiB).
if(RINGBENCH_PYTHON)
  ringbench_add_script_test(NAME metrics_storage_growth SCRIPT metrics/storage_checks.py ARGS growth
                            SOURCE TIMEOUT 900 LABELS mpi e2e RANKS 16 OVERSUBSCRIBE)
  ringbench_add_script_test(NAME metrics_storage_targets SCRIPT metrics/storage_checks.py ARGS targets
                            SOURCE TIMEOUT 300 LABELS unit e2e)
endif()
