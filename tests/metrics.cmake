# Metrics: the parallel HDF5 writer, at 1 to 4 ranks (collective paths differ with one rank),
# including a read-back with h5py (tests/metrics/check_h5py.py, skipped without h5py).
ringbench_add_doctest(TARGET test_metrics SOURCES metrics/test_h5.cpp metrics/test_text_table.cpp
                      LIBS rb_metrics)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME metrics_np${n} RANKS ${n} LABELS unit TIMEOUT 120
                     COMMAND $<TARGET_FILE:test_metrics>)
endforeach()
