// The table of sweep types: one row per sweep, like nccl-tests' per-benchmark tables.
#include <vector>

#include "app/registry.hpp"
#include "sweeps/host_pingpong.hpp"
#include "sweeps/ring_attention.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/p2p_matrix.hpp"
#include "sweeps/compute.hpp"
#include "sweeps/memory.hpp"
#include "sweeps/kernel_tuning.hpp"
#include "sweeps/contention/contention.hpp"

namespace rb {

const std::vector<SweepKind>& sweep_kinds() {
  static const std::vector<SweepKind> kinds = {
      {"host_pingpong", parse_host_pingpong, host_pingpong_keys,
       "MPI latency and bandwidth between ring neighbours (host buffers)"},
      {"ring_attention", parse_ring_attention, ring_attention_keys,
       "ring attention (exact and dilated) forward/backward over sequence length x ring size, "
       "parity-checked"},
      {"collectives", parse_collectives, collectives_keys,
       "NCCL / MPI collectives over message sizes, nccl-tests timing, alpha-beta cost model"},
      {"p2p_matrix", parse_p2p_matrix, p2p_matrix_keys,
       "latency and bandwidth between every pair of ranks, alone and under concurrent load"},
      {"compute", parse_compute, compute_keys,
       "per-rank GEMM throughput (cuBLASLt, or Kokkos on the host) and attention block rate"},
      {"memory", parse_memory, memory_keys,
       "per-rank host STREAM triad, device copy and host<->device pinned/pageable bandwidth"},
      {"kernel_tuning", parse_kernel_tuning, kernel_tuning_keys,
       "every built kernel path timed forward/backward per block shape (ring size 1), "
       "parity-checked"},
      {"contention", parse_contention, contention_keys,
       "workloads alone, concurrently unbound and bound per policy, with feeder ranks and GPU/node "
       "monitors"},
  };
  return kinds;
}

std::unique_ptr<Sweep> parse_sweep(const SweepSpec& spec, const ParseContext& ctx) {
  std::vector<std::string> types;
  for (const auto& k : sweep_kinds()) {
    if (spec.type == k.type) return k.parse(spec, ctx);
    types.push_back(k.type);
  }
  const std::string hint = cfg::did_you_mean(spec.type, types);
  std::string known;
  for (const auto& t : types) known += (known.empty() ? "" : ", ") + t;
  spec.node.fail("type", "unknown sweep type '" + spec.type + "'" +
                             (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                             " (known: " + known + ")");
}

}  // namespace rb
