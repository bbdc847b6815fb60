# End-to-end: the real program on real configs, the file read back with h5py.
# The scripts launch mpirun themselves (ringbench_add_script_test, not ringbench_add_test).
if(RINGBENCH_PYTHON)
  foreach(check small_np1 small_np2 small_np4 bad_configs dry_run force interrupted help
                simulated_layout)
    ringbench_add_script_test(NAME e2e_${check} SCRIPT e2e/e2e_checks.py ARGS ${check} SOURCE
                              TIMEOUT 600 LABELS e2e)
  endforeach()
endif()
# Tuned kernel policy read-back (issue #13) on 2 ranks: an unknown path in the policy, a cuda
# policy on the host (warning; strict: refused), and a host policy that applies (each block
# where the policy's lookup rule says, counted as the policy's, and named in paths_ran and on
# screen) and one that splits a point's branches over two paths ("kokkos 4 / materialized 2").
if(RINGBENCH_PYTHON)
  # scheme: auto and its CP policy: tune-cp's round trip, a hand-written policy, another machine.
  foreach(check measured written other)
    ringbench_add_script_test(NAME e2e_cp_policy_${check} SCRIPT e2e/cp_policy_readback.py ARGS ${check} SOURCE
                              TIMEOUT 300 LABELS mpi e2e RANKS 2 OVERSUBSCRIBE
                              ENVIRONMENT PYTHONPATH=${PROJECT_SOURCE_DIR}/analysis)
  endforeach()
  foreach(check unknown_path other_machine strict applies mixed)
    ringbench_add_script_test(NAME e2e_policy_${check} SCRIPT e2e/policy_readback.py ARGS ${check}
                              TIMEOUT 300 LABELS mpi e2e RANKS 2 OVERSUBSCRIBE)
  endforeach()
endif()
# What the terminal shows (issue #16): the results tables equal the file's numbers, --quiet,
# --json read back against the file; the login-node dry-run (no mpirun) and its estimate;
# (#32 item 6) narrow: stdout within 100 columns, progress on stderr, the summary names the file;
# json_stdout: --json - puts the JSON alone on stdout and creates no file named '-'.
if(RINGBENCH_PYTHON)
  foreach(check tables narrow json_stdout quiet json dry_run_64x8 bad_world_size estimate_from
                json_on_timeout)
    ringbench_add_script_test(NAME e2e_screen_${check} SCRIPT e2e/screen_checks.py ARGS ${check} SOURCE
                              TIMEOUT 600 OVERSUBSCRIBE)
  endforeach()
  set_tests_properties(e2e_screen_tables e2e_screen_narrow e2e_screen_json_stdout e2e_screen_quiet
                       e2e_screen_json e2e_screen_estimate_from e2e_screen_json_on_timeout PROPERTIES
                       LABELS "mpi;e2e" PROCESSORS 2)
  set_tests_properties(e2e_screen_dry_run_64x8 e2e_screen_bad_world_size PROPERTIES LABELS "unit;e2e")
endif()
# Issue #30 item 3: each ring point's phases (wall_s, phase_*_s) in the file, summing to
# its wall time; --estimate-from splitting a sweep by them; a re-run estimated from the first run.
if(RINGBENCH_PYTHON)
  foreach(check columns rerun)
    ringbench_add_script_test(NAME e2e_estimate_phases_${check} SCRIPT e2e/estimate_phases.py
                              ARGS ${check} SOURCE TIMEOUT 600 LABELS mpi e2e RANKS 2 OVERSUBSCRIBE)
  endforeach()
endif()
