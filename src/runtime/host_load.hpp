#pragma once
// How much of its nodes' CPU the run did not have to itself: the CPU time other processes
// (and the hypervisor's steal) took while the run ran. Host-path timings from a run that
// shared its node are not comparable night to night; compare reads this to say so and to
// judge with the shared-machine noise (docs/analysis.md#run-to-run-noise).
#include <mpi.h>

namespace rb {

struct CpuUsage {
  double node_busy_s = 0, node_total_s = 0;  // every CPU of the node, /proc/stat
  double own_s = 0;                          // this process: user + system, every thread
  bool readable = false;
};

CpuUsage cpu_usage_now();

// Largest over the nodes of (node busy - the run's ranks' own CPU time) / node total between
// `start` and now, in [0, 1]; NaN where /proc/stat is unreadable. Collective over `world`.
double foreign_cpu_fraction(const CpuUsage& start, MPI_Comm world);

}  // namespace rb
