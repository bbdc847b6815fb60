#include "runtime/host_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/monitor.hpp"
#include "runtime/mpi.hpp"

namespace rb {

CpuUsage cpu_usage_now() {
  CpuUsage u;
  const NodeCpuJiffies node = node_cpu_jiffies();
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  u.readable = node.cpus > 0 && hz > 0;
  if (u.readable) {
    u.node_busy_s = node.busy / hz;
    u.node_total_s = node.total / hz;
  }
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  u.own_s = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
            1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  return u;
}

double foreign_cpu_fraction(const CpuUsage& start, MPI_Comm world) {
  const CpuUsage now = cpu_usage_now();
  // The real node (not a simulated one): every rank on it shares its /proc/stat.
  MPI_Comm node = MPI_COMM_NULL;
  RB_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const double mine = now.own_s - start.own_s;
  double own_on_node = 0;
  RB_MPI_CHECK(MPI_Allreduce(&mine, &own_on_node, 1, MPI_DOUBLE, MPI_SUM, node));
  int node_rank = 0;
  RB_MPI_CHECK(MPI_Comm_rank(node, &node_rank));
  RB_MPI_CHECK(MPI_Comm_free(&node));
  // -1: unreadable (the max keeps any node's value; all unreadable gives NaN).
  double fraction = -1;
  const double total = now.node_total_s - start.node_total_s;
  if (start.readable && now.readable && total > 0 && node_rank == 0)
    fraction = std::clamp((now.node_busy_s - start.node_busy_s - own_on_node) / total, 0.0, 1.0);
  double worst = -1;
  RB_MPI_CHECK(MPI_Allreduce(&fraction, &worst, 1, MPI_DOUBLE, MPI_MAX, world));
  return worst < 0 ? std::numeric_limits<double>::quiet_NaN() : worst;
}

}  // namespace rb
