# Runtime module: binding decisions (XML exports, synthetic and hand-built machines), rank
# layout under MPI (real, and simulated with RINGBENCH_RANKS_PER_NODE / RINGBENCH_PLACEMENT), a real binding
# on this machine, and GPU selection + NCCL (skipped, exit 77, without a GPU).
ringbench_add_doctest(TARGET test_runtime_binding SOURCES runtime/test_binding.cpp LIBS rb_runtime)
ringbench_add_test(NAME runtime_binding RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_runtime_binding>)

ringbench_add_doctest(TARGET test_runtime_apply_binding SOURCES runtime/test_apply_binding.cpp LIBS rb_runtime)
ringbench_add_test(NAME runtime_apply_binding RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_runtime_apply_binding>)

ringbench_add_doctest(TARGET test_runtime_rank_layout SOURCES runtime/test_rank_layout.cpp LIBS rb_runtime)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME runtime_rank_layout_np${n} RANKS ${n} LABELS mpi
                     COMMAND $<TARGET_FILE:test_runtime_rank_layout>)
  ringbench_add_test(NAME runtime_rank_layout_2pernode_np${n} RANKS ${n} LABELS mpi
                     ENVIRONMENT RINGBENCH_RANKS_PER_NODE=2
                     COMMAND $<TARGET_FILE:test_runtime_rank_layout>)
  ringbench_add_test(NAME runtime_rank_layout_2pernode_cyclic_np${n} RANKS ${n} LABELS mpi
                     ENVIRONMENT "RINGBENCH_RANKS_PER_NODE=2;RINGBENCH_PLACEMENT=cyclic"
                     COMMAND $<TARGET_FILE:test_runtime_rank_layout>)
endforeach()

ringbench_add_doctest(TARGET test_runtime_gpu_absent SOURCES runtime/test_gpu_absent.cpp LIBS rb_runtime)
ringbench_add_test(NAME runtime_gpu_absent RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_runtime_gpu_absent>)

# Monitors: sampling thread timing, /proc and /sys series, NVML absent on a machine without the driver.
ringbench_add_doctest(TARGET test_runtime_monitor SOURCES runtime/test_monitor.cpp LIBS rb_runtime)
ringbench_add_test(NAME runtime_monitor RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_runtime_monitor>)

# The NCCL wait with fake CUDA/NCCL calls: async error -> abort once + message, query errors, watch.
ringbench_add_doctest(TARGET test_runtime_nccl_wait SOURCES runtime/test_nccl_wait.cpp LIBS rb_runtime)
ringbench_add_test(NAME runtime_nccl_wait RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_runtime_nccl_wait>)

ringbench_add_doctest(TARGET test_runtime_gpu GPU SOURCES runtime/test_gpu.cpp LIBS rb_runtime)
foreach(n 1 2)
  ringbench_add_test(NAME runtime_gpu_np${n} RANKS ${n} LABELS gpu COMMAND $<TARGET_FILE:test_runtime_gpu>)
endforeach()
