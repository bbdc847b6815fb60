# Profiling sweeps (collectives, p2p_matrix, compute, memory, cost model).
# Host path at 1-4 ranks, once more with simulated nodes of 2 ranks (block placement, and
# cyclic at 3 and 4 ranks) for the group tests.
# rb_sweeps brings the GPU kernels after itself in a CUDA build (src/sweeps/CMakeLists.txt).
set(RB_PROFILING_TEST_LIBS rb_app)
ringbench_add_doctest(TARGET test_profiling SOURCES profiling/test_profiling.cpp
                      profiling/test_profiling_sweeps.cpp LIBS ${RB_PROFILING_TEST_LIBS})
foreach(n 1 2 3 4)
  ringbench_add_test(NAME profiling_np${n} RANKS ${n} LABELS mpi TIMEOUT 300
                     COMMAND $<TARGET_FILE:test_profiling>)
  ringbench_add_test(NAME profiling_2pernode_np${n} RANKS ${n} LABELS mpi TIMEOUT 300
                     ENVIRONMENT RINGBENCH_RANKS_PER_NODE=2
                     COMMAND $<TARGET_FILE:test_profiling>)
endforeach()
foreach(n 3 4)
  ringbench_add_test(NAME profiling_2pernode_cyclic_np${n} RANKS ${n} LABELS mpi TIMEOUT 300
                     ENVIRONMENT RINGBENCH_RANKS_PER_NODE=2 RINGBENCH_PLACEMENT=cyclic
                     COMMAND $<TARGET_FILE:test_profiling>)
endforeach()
# NCCL / CUDA path (label gpu): exits 77, reported as skipped, without a GPU.
ringbench_add_doctest(TARGET test_profiling_gpu GPU SOURCES profiling/test_profiling_gpu.cpp
                      LIBS ${RB_PROFILING_TEST_LIBS})
foreach(n 1 2 4)
  ringbench_add_test(NAME profiling_gpu_np${n} RANKS ${n} LABELS gpu TIMEOUT 600
                     COMMAND $<TARGET_FILE:test_profiling_gpu>)
endforeach()
# The contention sweep (host path): parser, and 2-rank runs read back (slowdown, bindings per
# phase, restore, monitor series, feeders).
ringbench_add_doctest(TARGET test_contention SOURCES profiling/test_contention.cpp
                      LIBS ${RB_PROFILING_TEST_LIBS})
ringbench_add_test(NAME contention_np2 RANKS 2 LABELS "mpi;unit" TIMEOUT 300
                   COMMAND $<TARGET_FILE:test_contention>)
# The same sweep on the cuda backend with every GPU workload and a feeder rank (label gpu:
# exits 77, skipped, without a GPU; the ranks may share one GPU: the sweep needs no NCCL).
ringbench_add_doctest(TARGET test_contention_gpu GPU SOURCES profiling/test_contention_gpu.cpp
                      LIBS ${RB_PROFILING_TEST_LIBS})
ringbench_add_test(NAME contention_gpu_np2 RANKS 2 LABELS gpu TIMEOUT 600
                   COMMAND $<TARGET_FILE:test_contention_gpu>)
# p2p pair sets and their schedule in rounds of disjoint pairs (pure functions, one rank).
ringbench_add_doctest(TARGET test_pair_schedule SOURCES profiling/test_pair_schedule.cpp LIBS rb_profiling)
ringbench_add_test(NAME pair_schedule RANKS 1 COMMAND $<TARGET_FILE:test_pair_schedule> LABELS unit TIMEOUT 60)
# The p2p_matrix sweep's pairs and rounds on simulated nodes (2 nodes of 1 rank; 2 nodes of 2,
# block and cyclic; 3 ranks on nodes of unequal size): every requested pair measured once, no
# rank in two pairs of a round; and its plan at 1,024 ranks.
ringbench_add_doctest(TARGET test_p2p_schedule SOURCES profiling/test_p2p_schedule.cpp
                      LIBS ${RB_PROFILING_TEST_LIBS})
ringbench_add_test(NAME p2p_schedule_1pernode_np2 RANKS 2 LABELS mpi TIMEOUT 300
                   ENVIRONMENT RINGBENCH_RANKS_PER_NODE=1 COMMAND $<TARGET_FILE:test_p2p_schedule>)
ringbench_add_test(NAME p2p_schedule_2pernode_np3 RANKS 3 LABELS mpi TIMEOUT 300
                   ENVIRONMENT RINGBENCH_RANKS_PER_NODE=2 COMMAND $<TARGET_FILE:test_p2p_schedule>)
foreach(placement block cyclic)
  ringbench_add_test(NAME p2p_schedule_2pernode_${placement}_np4 RANKS 4 LABELS mpi TIMEOUT 300
                     ENVIRONMENT RINGBENCH_RANKS_PER_NODE=2 RINGBENCH_PLACEMENT=${placement}
                     COMMAND $<TARGET_FILE:test_p2p_schedule>)
endforeach()
