# Ring attention tests (owner: ring attention): host kernels (1 rank), the ring algorithm
# against the double-precision reference at 1-4 ranks, and the sweep (config parser, output).
# ring_case.hpp takes the path under test from the program's path factories (rb_app).

# ring/test_<name>.cpp run at 1-4 ranks on the host path (<name>_<n>) and, where CUDA is built,
# against the GPU test main at 1, 2 and 4 ranks (<name>_gpu_<n>): exit 77 (skipped) without a
# GPU; with more ranks per node than GPUs they pass without running (NCCL needs one each).
function(ring_add_host_and_gpu_test name labels timeout)
  ringbench_add_doctest(TARGET test_${name} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_${name}.cpp
                        LIBS rb_app)
  foreach(n 1 2 3 4)
    ringbench_add_test(NAME ${name}_${n} RANKS ${n} COMMAND $<TARGET_FILE:test_${name}> LABELS ${labels}
                       TIMEOUT ${timeout})
  endforeach()
  if(RINGBENCH_HAVE_CUDA)
    ringbench_add_doctest(TARGET test_${name}_gpu GPU SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_${name}.cpp
                          LIBS rb_app)
    foreach(n 1 2 4)
      ringbench_add_test(NAME ${name}_gpu_${n} RANKS ${n} COMMAND $<TARGET_FILE:test_${name}_gpu>
                         LABELS gpu TIMEOUT 300)
    endforeach()
  endif()
endfunction()

ringbench_add_doctest(TARGET test_ring_kernels SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_ring_kernels.cpp
                      LIBS rb_app)
ringbench_add_test(NAME ring_kernels RANKS 1 COMMAND $<TARGET_FILE:test_ring_kernels> LABELS ring TIMEOUT 120)
# The ring cases also on the GPU path (CUDA kernels, NCCL transport).
ring_add_host_and_gpu_test(ring_mpi ring 120)
# The sweep's config parser, and the sweep run into a file and read back (1 and 2 ranks).
ringbench_add_doctest(TARGET test_ring_sweep SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_ring_sweep.cpp
                      LIBS rb_app)
ringbench_add_test(NAME ring_sweep_config RANKS 1 COMMAND $<TARGET_FILE:test_ring_sweep> LABELS ring
                   TIMEOUT 60)
ringbench_add_test(NAME ring_sweep_np2 RANKS 2 COMMAND $<TARGET_FILE:test_ring_sweep> LABELS ring
                   TIMEOUT 120)
# The real program on a ring config at 2 and 4 ranks; the file is read back with h5py and the
# dumped tensors re-checked with numpy.
if(RINGBENCH_PYTHON)
  foreach(n 2 4)
    ringbench_add_script_test(NAME ring_e2e_np${n} SCRIPT ring/check_ring_output.py TAIL --ranks ${n}
                              TIMEOUT 300 LABELS ring RANKS ${n})
  endforeach()
  # A failed parity check fails the run and names the point; an out-of-memory point is
  # recorded as oom and the sweep goes on.
  foreach(mode parity_fail oom)
    ringbench_add_script_test(NAME ring_e2e_${mode} SCRIPT ring/check_ring_output.py TAIL --ranks 2 --mode ${mode}
                              TIMEOUT 300 LABELS ring RANKS 2)
  endforeach()
  # Ring placement and communicator reuse at 8 ranks on simulated nodes of 4, block and cyclic:
  # node_aware rings cross nodes the fewest times, rank order under cyclic more (and warns);
  # communicators created once per ring size.
  ringbench_add_script_test(NAME ring_placement_np8 SCRIPT ring/check_ring_placement.py
                            TIMEOUT 600 LABELS ring mpi RANKS 8)
  # The CUDA path's NCCL ring communicators, once per ring size (2 ranks, 2 GPUs; else 77).
  if(RINGBENCH_HAVE_CUDA)
    ringbench_add_script_test(NAME ring_placement_gpu SCRIPT ring/check_ring_placement.py ARGS --gpu
                              TIMEOUT 600 LABELS gpu RANKS 2)
  endif()
endif()
# The kernel_tuning sweep (every host kernel path at ring size 1): parser, and the sweep run
# into a file and read back at 1 and 2 ranks.
ringbench_add_doctest(TARGET test_kernel_tuning SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_kernel_tuning.cpp
                      LIBS rb_app)
foreach(n 1 2)
  ringbench_add_test(NAME kernel_tuning_np${n} RANKS ${n} COMMAND $<TARGET_FILE:test_kernel_tuning>
                     LABELS ring TIMEOUT 120)
endforeach()
# A tuned kernel policy read back by the host backend (auto runs each block where the policy
# says, block_calls() counts it) and the ring_attention sweep's kernel_policy key.
ringbench_add_doctest(TARGET test_kernel_policy_backend
                      SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_kernel_policy_backend.cpp LIBS rb_app)
ringbench_add_test(NAME kernel_policy_backend RANKS 1 COMMAND $<TARGET_FILE:test_kernel_policy_backend>
                   LABELS "ring;unit" TIMEOUT 120)
# Ring membership and order (ring_order: node_aware | rank): node-crossing hops under block
# and cyclic placement (pure functions, one rank).
ringbench_add_doctest(TARGET test_ring_order SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_ring_order.cpp
                      LIBS rb_ring)
ringbench_add_test(NAME ring_order RANKS 1 COMMAND $<TARGET_FILE:test_ring_order> LABELS unit TIMEOUT 60)
# The parity check's references (streamed vs full-sequence, memory, validate.reference modes)
# at 1-4 ranks.
ringbench_add_doctest(TARGET test_parity_reference
                      SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_parity_reference.cpp LIBS rb_app)
foreach(n 1 2 3 4)
  ringbench_add_test(NAME parity_reference_${n} RANKS ${n} COMMAND $<TARGET_FILE:test_parity_reference>
                     LABELS "ring;mpi" TIMEOUT 120)
endforeach()
# The kernel calls of a ring step (block_calls: fully masked pairs skipped, dense ones merged):
# every attending pair visited once, brute force over layouts, ring sizes, branches and heads.
ringbench_add_doctest(TARGET test_block_calls SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_block_calls.cpp
                      LIBS rb_ring)
ringbench_add_test(NAME ring_block_calls RANKS 1 COMMAND $<TARGET_FILE:test_block_calls> LABELS "ring;unit" TIMEOUT 120)
# Which transport moves the ring's K/V: auto's rule, its reasons, and the refusals (issue #26).
ringbench_add_doctest(TARGET test_transport_choice SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_transport_choice.cpp
                      LIBS rb_ring)
ringbench_add_test(NAME ring_transport_choice RANKS 1 COMMAND $<TARGET_FILE:test_transport_choice> LABELS "ring;unit" TIMEOUT 60)
# The all-gather, Ulysses and hybrid schemes against the reference at 1-4 ranks, bytes sent,
# refusals; on the host path (MPI collectives) and the GPU path (NCCL collectives, exit 77
# without a GPU).
ring_add_host_and_gpu_test(cp_schemes "ring;mpi" 300)
# scheme: auto and its tuned CP policy: the file reader, the lookup over tokens per rank, and the
# ring_attention sweep resolving auto (issue #27 item 4).
ringbench_add_doctest(TARGET test_cp_policy SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ring/test_cp_policy.cpp LIBS rb_app)
ringbench_add_test(NAME cp_policy RANKS 1 COMMAND $<TARGET_FILE:test_cp_policy> LABELS "ring;unit" TIMEOUT 120)
