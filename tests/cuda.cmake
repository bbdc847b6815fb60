# GPU tests (owner: cuda). Label gpu; the executables exit 77 (skipped) without a GPU, and
# they compile wherever CUDA does (CI has nvcc and no GPU).
if(RINGBENCH_HAVE_CUDA)
  ringbench_add_doctest(TARGET ringbench_test_cuda_kernels GPU
    SOURCES cuda/test_kernels.cpp LIBS rb_kernels_cuda)
  ringbench_add_test(NAME cuda_kernels RANKS 1 COMMAND $<TARGET_FILE:ringbench_test_cuda_kernels>
    LABELS gpu TIMEOUT 600)

  ringbench_add_doctest(TARGET ringbench_test_cuda_backend GPU
    SOURCES cuda/test_backend.cpp LIBS rb_app)
  ringbench_add_test(NAME cuda_backend RANKS 1 COMMAND $<TARGET_FILE:ringbench_test_cuda_backend>
    LABELS gpu)
  # The NCCL transport over rings of 1 and 2 ranks (one GPU each; skipped with fewer GPUs).
  ringbench_add_doctest(TARGET ringbench_test_cuda_nccl GPU
    SOURCES cuda/test_nccl_transport.cpp LIBS rb_app)
  ringbench_add_test(NAME cuda_nccl_transport_1 RANKS 1 COMMAND $<TARGET_FILE:ringbench_test_cuda_nccl>
    LABELS gpu)
  ringbench_add_test(NAME cuda_nccl_transport_2 RANKS 2 COMMAND $<TARGET_FILE:ringbench_test_cuda_nccl>
    LABELS gpu)
  # The kernel_tuning sweep on a GPU: every built CUDA path timed and parity-checked per shape.
  if(RINGBENCH_PYTHON)
    add_test(NAME cuda_kernel_tuning
             COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/tuning_gpu_check.py
                     --ringbench $<TARGET_FILE:ringbench> --mpiexec ${MPIEXEC_EXECUTABLE}
                     --source ${PROJECT_SOURCE_DIR} --workdir ${RINGBENCH_TEST_OUTPUT}/cuda_kernel_tuning)
    set_tests_properties(cuda_kernel_tuning PROPERTIES TIMEOUT 600 LABELS "gpu;e2e"
      SKIP_RETURN_CODE 77 ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endif()
endif()

# Host-only checks (no GPU): the kernels' index arithmetic (row views, tile classification)
# and the kernel path table with its binding to the CUDA library.
if(RINGBENCH_HAVE_CUDA)
  ringbench_add_doctest(TARGET ringbench_test_cuda_views SOURCES cuda/test_views.cu cuda/test_sdpa_split.cpp cuda/test_kernel_paths.cpp LIBS rb_kernels_cuda)
  ringbench_add_test(NAME cuda_views RANKS 1 COMMAND $<TARGET_FILE:ringbench_test_cuda_views> LABELS cuda)
endif()
