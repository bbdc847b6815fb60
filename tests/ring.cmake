# Ring attention tests (owner: ring attention): host kernels (1 rank), the ring algorithm
# against the double-precision reference at 1-4 ranks, and the sweep's config parser.
ringbench_add_doctest(TARGET test_ring_kernels SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_ring_kernels.cpp
                      LIBS rb_ring)
ringbench_add_test(NAME ring_kernels RANKS 1 COMMAND $<TARGET_FILE:test_ring_kernels> LABELS ring TIMEOUT 120)
ringbench_add_doctest(TARGET test_ring_mpi SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_ring_mpi.cpp
                      LIBS rb_ring)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME ring_mpi_${n} RANKS ${n} COMMAND $<TARGET_FILE:test_ring_mpi> LABELS ring
                     TIMEOUT 120)
endforeach()
