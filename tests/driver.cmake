# The driver's own pieces: progress lines, the end-of-run summary, the command line,
# provenance, the hang guard, the sweeps' out-of-memory points, the environment check, the
# files written beside the output and --estimate-from's phases; the whole program is covered by
# tests/e2e.cmake.
ringbench_add_doctest(TARGET test_driver SOURCES driver/test_progress.cpp driver/test_cli.cpp
                      driver/test_watchdog.cpp driver/test_oom_point.cpp driver/test_side_files.cpp
                      driver/test_run_summary.cpp driver/test_estimate_phases.cpp LIBS rb_app)
target_include_directories(test_driver PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/config)
ringbench_add_test(NAME driver RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_driver>)
# Each sweep's key table against docs/sweeps/<type>.md (keys and defaults), and its defaults
# against its own constraints.
ringbench_add_doctest(TARGET test_sweep_docs SOURCES driver/test_sweep_docs.cpp LIBS rb_app)
ringbench_add_test(NAME sweep_docs RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_sweep_docs>)
# The hang guard's heartbeat across simulated nodes (4 ranks, 2 a node, block and cyclic): one
# writer per node into the shared file, a stopped writer replaced, a stopped rank named.
ringbench_add_doctest(TARGET test_heartbeat_nodes SOURCES driver/test_heartbeat_nodes.cpp LIBS rb_app)
ringbench_add_test(NAME driver_heartbeat_nodes RANKS 4 LABELS mpi
                   COMMAND $<TARGET_FILE:test_heartbeat_nodes>)
# A driver check script on the real ringbench, 2 ranks: one CTest entry NAME_CHECK per check.
function(driver_script_checks name script timeout)
  foreach(check IN LISTS ARGN)
    ringbench_add_script_test(NAME ${name}_${check} SCRIPT driver/${script} ARGS ${check} SOURCE
                              TIMEOUT ${timeout} LABELS mpi e2e RANKS 2 OVERSUBSCRIBE)
  endforeach()
endfunction()
if(RINGBENCH_PYTHON)
  # The hang guard (run.point_timeout_s: a number, auto (the default) or off; --timeout) with
  # the test-only hang hook: exit code 124, the message, and the sweeps finished before the
  # hang kept in the file.
  driver_script_checks(driver_hang_guard hang_guard.py 300 point run no_hang auto off)
  # How a run holds and ends its output (#31): OUTPUT.lock refuses a second run on it while the
  # first lives (a killed run blocks nothing); a slow point past run.point_timeout_s ends the
  # run with the guard's code, never 'complete'; SIGTERM to the ranks or to mpirun during a point
  # that never ends ends the run with 143 (after the signal's grace) and its end state in
  # OUTPUT.end; output directories 0755 under umask 000, none
  # left by a refused run. The file read back with h5dump.
  driver_script_checks(driver_output output_faults.py 600 lock slow_point sigterm_ranks sigterm_mpirun dirs)
  # A signal (SIGTERM from outside, or the test-only signal hook at a known point) stops a sweep
  # between two points: the file keeps the points it finished (status 'interrupted', points of
  # points_planned), every rank exits 143, rb-analysis report and compare say it was cut short;
  # a point that never ends loses its sweep's points after the grace, never writing half rows;
  # a contention sweep stops between its points too (feeders and idle ranks agree as well).
  driver_script_checks(driver_interrupted interrupted_sweep.py 300 hook_k_points sigterm_ranks
                       first_point last_point hung_point contention_concurrent contention_alone
                       force_keeps_old)
endif()
