# The launch scripts' generated configs (launch/knobs.sh): every preset fits every allocation of
# 1-2,048 nodes x 1-8 GPUs and its scaling series with distinct points (sequence lengths a ring
# of each count can split, none listed twice),
# checked by arithmetic and, where ringbench has the login-node dry-run, by ringbench itself.
add_test(NAME launch_presets
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launch/presets_check.sh ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:ringbench>)
set_tests_properties(launch_presets PROPERTIES TIMEOUT 300 LABELS "unit"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# launch/perf_node.sh (the GPU node's measurement plan) with a stand-in mpirun: its configs for
# 1-8 GPUs are valid plans, every step leaves a summary line, a hung step ends at its limit.
add_test(NAME launch_perf_node
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launch/perf_node_check.sh ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:ringbench>)
set_tests_properties(launch_perf_node PROPERTIES TIMEOUT 300 LABELS "unit"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# launch/overlap_targets.py (issue #26's targets) on synthetic ring_overlap files and torch_cp.py
# JSON: each target's pass and fail, the slowest-rank reductions, exit 2 for other files.
if(RINGBENCH_PYTHON)
  add_test(NAME launch_overlap_targets
           COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/launch
                   -p "test_overlap_targets.py" -v)
  set_tests_properties(launch_overlap_targets PROPERTIES TIMEOUT 60 LABELS "unit" SKIP_RETURN_CODE 77)
endif()
# launch/torch_cp.py's torch-free parts (FLOP count, verdicts, launcher environment, CLI, table,
# JSON); the script imports torch only where it runs on a GPU node.
if(RINGBENCH_PYTHON)
  add_test(NAME launch_torch_cp
           COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/launch
                   -p "test_torch_cp.py" -v)
  set_tests_properties(launch_torch_cp PROPERTIES TIMEOUT 60 LABELS "unit")
endif()
# Every slurm/*.sbatch has the benchmark-grade directives (--exclusive, --cpus-per-task,
# --signal=B:USR1 with a trap writing verdict 6, the RB_ENV_SCRIPT hook first, RB_SCRATCH), and
# slurm/job_lib.sh's helpers behave (results folder, verdict file, a trap during a long step).
if(RINGBENCH_PYTHON)
  add_test(NAME launch_slurm_jobs
           COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/launch
                   -p "test_slurm_jobs.py" -v)
  set_tests_properties(launch_slurm_jobs PROPERTIES TIMEOUT 60 LABELS "unit")
endif()
# The Spack recipe (launch/spack/.../ringbench/package.py) under a stand-in for Spack's package
# API: its dependencies, and its CMake options for several specs checked against CMakeLists.txt;
# then the project configures (no build) with the host and, where /usr/local/cuda has nvcc and
# NCCL, the CUDA options.
if(RINGBENCH_PYTHON)
  add_test(NAME launch_spack_package
           COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/launch
                   -p "test_spack_package.py" -v)
  set_tests_properties(launch_spack_package PROPERTIES TIMEOUT 300 LABELS "unit")
endif()
