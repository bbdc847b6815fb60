#pragma once
// Every environment variable ringbench, and the Kokkos it starts, read: checked on every rank at
// start, before Kokkos::initialize, like config values. A bad one (RINGBENCH_RANKS_PER_NODE=abc,
// KOKKOS_NUM_THREADS=abc) used to throw inside a library on every rank: std::terminate and a
// backtrace each, no clear message.
#include <mpi.h>

namespace rb {

// Throws cfg::ConfigError naming the first variable whose value does not have its form (the
// message says which form). Unset variables are fine; names not listed here are not looked at.
void check_environment();

// Collective: true on every rank when every rank's environment passed check_environment();
// otherwise the lowest rank with a bad variable prints its message (rank 0 when all ranks share
// one environment, the usual case) and every rank gets false.
bool environment_ok(MPI_Comm world);

}  // namespace rb
