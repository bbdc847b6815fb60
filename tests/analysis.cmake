# Analysis (analysis/): unit tests of the Python package on small synthetic files, and
# end-to-end checks of report, compare, the launch scripts and the Slurm job on files the
# real ringbench writes on the host path. Plain CTest entries: the scripts run mpiexec
# themselves.
if(RINGBENCH_PYTHON)
  # Two unit entries that together run every tests/analysis/test_*.py: the kernel tuning ones
  # (test_tun*.py: tuning.py, `rb-analysis tune`, `compare-tuning`) and the rest.
  foreach(unit IN ITEMS "analysis_unit;test_[!t]*.py" "analysis_tune_unit;test_t*.py")
    list(GET unit 0 name)
    list(GET unit 1 pattern)
    add_test(NAME ${name}
             COMMAND ${RINGBENCH_PYTHON} -m unittest discover -s ${CMAKE_CURRENT_SOURCE_DIR}/analysis
                     -p "${pattern}" -v)
    set_tests_properties(${name} PROPERTIES TIMEOUT 600 LABELS "analysis;unit"
      SKIP_RETURN_CODE 77 ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/analysis;MPLBACKEND=Agg")
  endforeach()
  # pip install into a fresh venv (docs/analysis.md), then the installed rb-analysis.
  add_test(NAME analysis_install
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/analysis/install_check.sh ${RINGBENCH_PYTHON}
                   ${PROJECT_SOURCE_DIR} ${RINGBENCH_TEST_OUTPUT}/analysis_install)
  set_tests_properties(analysis_install PROPERTIES TIMEOUT 300 LABELS "analysis;unit"
    SKIP_RETURN_CODE 77)
  foreach(check report compare errors launch readme contention schemes)
    ringbench_add_script_test(NAME analysis_${check} SCRIPT analysis/e2e_analysis.py ARGS ${check} SOURCE
                              TIMEOUT 600 LABELS analysis e2e RANKS 2 OVERSUBSCRIBE
                              ENVIRONMENT RINGBENCH_PYTHON=${RINGBENCH_PYTHON})
  endforeach()
  # Dimension scales (#32 item 9): a real 2-rank run's every key and metric has its axes named
  # (rank, point, iteration, step, ...) and, with python3-xarray and python3-h5netcdf, xarray
  # opens each sweep group without phony_dims (docs/hdf5-schema.md's snippet runs).
  add_test(NAME analysis_h5_dims
           COMMAND ${RINGBENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/analysis/h5_dims_e2e.py -v)
  set_tests_properties(analysis_h5_dims PROPERTIES TIMEOUT 300 LABELS "analysis;e2e"
    SKIP_RETURN_CODE 77 PROCESSORS 2
    ENVIRONMENT "RINGBENCH_BIN=$<TARGET_FILE:ringbench>;RINGBENCH_MPIEXEC=${MPIEXEC_EXECUTABLE};RINGBENCH_WORKDIR=${RINGBENCH_TEST_OUTPUT}/analysis_h5_dims")
  # Kernel-path tuning on the real ringbench's host path (2 ranks). analysis_tune:
  # inputs/tuning_host.yaml then rb-analysis tune: the policy covers every shape and block-rows
  # point of the file. analysis_tune_roundtrip: the policy read back by a ring run with
  # kernel_policy: each block ran where the policy says (and, with the built-in path made to
  # fail tuning parity, somewhere else than without it).
  # analysis_compare_runs: two real runs of one host job compare with no regression under
  # compare's defaults (issue #15: CI's timing noise); the ring x 1.2 is one, x 1.03 is not.
  foreach(entry IN ITEMS "tune;tune_e2e.py" "tune_roundtrip;tuning_roundtrip.py"
                         "compare_runs;compare_runs_e2e.py")
    list(GET entry 0 name)
    list(GET entry 1 script)
    ringbench_add_script_test(NAME analysis_${name} SCRIPT analysis/${script} SOURCE
                              TIMEOUT 300 LABELS analysis e2e RANKS 2 OVERSUBSCRIBE
                              ENVIRONMENT RINGBENCH_PYTHON=${RINGBENCH_PYTHON})
  endforeach()
  # A single-node Slurm cluster on this machine (slurm-wlm + munge, installed when missing),
  # running batch jobs. Skipped (77) only where Slurm cannot be installed. analysis_slurm:
  # slurm/ring_scaling.sbatch and slurm/nightly.sbatch; analysis_slurm_tune: slurm/tune.sbatch
  # on the host tuning grid (policy, report, every exit code).
  foreach(entry IN ITEMS "analysis_slurm;scaling" "analysis_slurm_tune;tune")
    list(GET entry 0 name)
    list(GET entry 1 jobs)
    add_test(NAME ${name}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/analysis/slurm_local_test.sh
                     $<TARGET_FILE:ringbench> ${PROJECT_SOURCE_DIR} ${RINGBENCH_TEST_OUTPUT}/${name} ${jobs})
    set_tests_properties(${name} PROPERTIES TIMEOUT 900 LABELS "analysis;slurm"
      SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
      ENVIRONMENT "RINGBENCH_PYTHON=${RINGBENCH_PYTHON}")
  endforeach()
  # report --html and trend pages in headless Chromium (browser_check.py): no console error,
  # exception or network request, every plotly figure drawn, screenshots in the workdir. Only
  # label "browser" (ctest -L browser): it installs Debian's chromium (as root) where missing,
  # and skips (77) where it cannot.
  ringbench_add_script_test(NAME analysis_browser SCRIPT analysis/browser_check.py SOURCE
                            TIMEOUT 900 LABELS browser RANKS 2 OVERSUBSCRIBE)
endif()
