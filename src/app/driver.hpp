#pragma once
// The common driver: config validation (before any collective work), binding, the output
// file, and running each sweep in order. SPMD: every rank calls run_ringbench.
#include "app/cli.hpp"

namespace rb {

// Returns the process exit code (the same on every rank): 0 complete, 1 failed run or
// invalid config. Needs MPI and Kokkos initialised; usage errors (2) never get here.
int run_ringbench(const CommandLine& cli, int mpi_thread_level);

}  // namespace rb
