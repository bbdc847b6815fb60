# launch_presets: the launch scripts' generated configs (launch/knobs.sh): every preset fits every
# allocation of 1-2,048 nodes x 1-8 GPUs and its scaling series with distinct points (sequence
# lengths a ring of each count can split, none listed twice), checked by arithmetic and, where
# ringbench has the login-node dry-run, by ringbench itself.
# launch_perf_node: launch/perf_node.sh (the GPU node's measurement plan) with a stand-in mpirun:
# its configs for 1-8 GPUs are valid plans, every step leaves a summary line, a hung step ends at
# its limit.
foreach(check presets perf_node)
  add_test(NAME launch_${check}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launch/${check}_check.sh ${PROJECT_SOURCE_DIR}
                   $<TARGET_FILE:ringbench>)
  set_tests_properties(launch_${check} PROPERTIES TIMEOUT 300 LABELS "unit"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()
# Python unit tests, launch_<name> runs tests/launch/test_<name>.py:
# overlap_targets: launch/overlap_targets.py (issue #26's targets) on synthetic ring_overlap files
#   and torch_cp.py JSON: each target's pass and fail, the slowest-rank reductions, exit 2 for
#   other files (77 without h5py).
# torch_cp: launch/torch_cp.py's torch-free parts (FLOP count, verdicts, launcher environment, CLI,
#   table, JSON); the script imports torch only where it runs on a GPU node.
# slurm_jobs: every slurm/*.sbatch has the benchmark-grade directives (--exclusive,
#   --cpus-per-task, --signal=B:USR1 with a trap writing verdict 6, the RB_ENV_SCRIPT hook first,
#   RB_SCRATCH), and slurm/job_lib.sh's helpers behave (results folder, verdict file, a trap during
#   a long step).
# spack_package: the Spack recipe (launch/spack/.../ringbench/package.py) under a stand-in for
#   Spack's package API: its dependencies, and its CMake options for several specs checked against
#   CMakeLists.txt; then the project configures (no build) with the host and, where
#   /usr/local/cuda has nvcc and NCCL, the CUDA options.
if(RINGBENCH_PYTHON)
  foreach(entry IN ITEMS "overlap_targets;60" "torch_cp;60" "slurm_jobs;60" "spack_package;300")
    list(GET entry 0 name)
    list(GET entry 1 timeout)
    add_test(NAME launch_${name}
             COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/launch
                     -p "test_${name}.py" -v)
    set_tests_properties(launch_${name} PROPERTIES TIMEOUT ${timeout} LABELS "unit")
  endforeach()
  set_tests_properties(launch_overlap_targets PROPERTIES SKIP_RETURN_CODE 77)
  # estimate_error: launch/estimate_error.py (issue #30: the dry-run's estimate against measured
  #   sweep times) on synthetic files, re-planned by this ringbench: the error, --only, the
  #   --max-error verdict and --min-seconds, the per-phase readers, exit 2 for an unfinished run.
  #   A real re-run's phases: e2e_estimate_phases_* (tests/e2e.cmake).
  add_test(NAME launch_estimate_error
           COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/launch/test_estimate_error.py -v)
  set_tests_properties(launch_estimate_error PROPERTIES TIMEOUT 120 LABELS "unit" SKIP_RETURN_CODE 77
    ENVIRONMENT "RINGBENCH_BIN=$<TARGET_FILE:ringbench>")
endif()
