// The table of sweep types: one row per sweep, like nccl-tests' per-benchmark tables.
#include <vector>

#include "sweeps/sweep.hpp"
#include "sweeps/host_pingpong.hpp"

namespace rb {

const std::vector<SweepKind>& sweep_kinds() {
  static const std::vector<SweepKind> kinds = {
      {"host_pingpong", parse_host_pingpong,
       "MPI latency and bandwidth between ring neighbours (host buffers)"},
      // ring_attention: added by the ring attention sweep
      // collectives, p2p_matrix, compute, memory: added by the profiling sweeps
  };
  return kinds;
}

}  // namespace rb
