# Hostile inputs and faults (issue #18) on the real ringbench, host path, 2 ranks: config files
# that are bombs, FIFOs or devices; --output through links, onto the config, too long; two runs
# racing for one --output (10 races); a full disk (a tmpfs mounted by the test: skipped with 77
# where it cannot mount); host out-of-memory points under prlimit --as and sizes beyond the
# node's memory refused at validation; a rank stopped with SIGSTOP named by the hang guard (on
# one node, and on two simulated nodes of one rank: stopped_nodes, read through the shared file).
# Round two (issue #31): a self-referencing alias, an MPI-IO hint too long for MPI_Info, a list
# past HDF5's 64 KiB attribute (config_limits); --json, heartbeat and --force against planted
# links, FIFOs, sockets and devices (side_files); bad RINGBENCH_* / KOKKOS_* variables
# (environment); stdout closed by its reader, `| head -1` (closed_stdout); a collective whose own
# buffers fit but MPI's working memory does not (oom_mpi); a killed --force run's partial file
# removed by the next run on that output (partial_leftover). Round two, more: a UTF-16 config,
# a NUL in a comment, a 100,000-character key and sweep name (config_limits); --json onto a
# full disk warns once (diskfull); a rank stopped before the first point is caught (stopped_setup).
if(RINGBENCH_PYTHON)
  foreach(check config output race diskfull oom oom_mpi oom_validation stopped stopped_nodes stopped_setup config_limits
                side_files environment closed_stdout partial_leftover)
    ringbench_add_script_test(NAME hostile_${check} SCRIPT hostile/hostile_checks.py ARGS ${check} SOURCE
                              TIMEOUT 600 LABELS mpi e2e RANKS 2 OVERSUBSCRIBE)
  endforeach()
endif()
