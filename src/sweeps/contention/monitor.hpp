#pragma once
// The contention sweep's monitors: which rank watches what (a GPU's series on the lowest local
// rank driving it, the node's on local rank 0, every rank its own process), and the
// `monitor/` sub-table of the output ([world, T, ...] arrays, NaN-padded to the longest series).
#include <mpi.h>

#include "metrics/h5.hpp"
#include "runtime/monitor.hpp"
#include "sweeps/sweep.hpp"

namespace rb::contention {

// Collective over ctx.world.
MonitorOptions monitor_options(const RunContext& ctx, double interval_s);

// Collective: writes <sweep>/monitor/. `stop_s`: this rank's Monitor::now() when it stopped.
void write_monitor(h5::Group& sweep, const Monitor& monitor, const MonitorOptions& options,
                   double stop_s, MPI_Comm world);

}  // namespace rb::contention
