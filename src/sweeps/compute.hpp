#pragma once
// The `compute` sweep: per rank, GEMM throughput through cuBLASLt (bfloat16, float16, tf32,
// float32, float64) over square sizes and the ring attention block kernel's rate on the cuda
// backend; on the host backend a Kokkos GEMM-like kernel (float32, float64) over the same
// kind of size list. All ranks measure at the same time. docs/sweeps/compute.md.
#include <cstdint>
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

std::unique_ptr<Sweep> parse_compute(const SweepSpec& spec, const ParseContext& ctx);

// Validation on a real node (the driver calls it for every sweep; others are ignored): refuses,
// at `sizes` in `node`, a host-path compute sweep whose largest GEMM (3 n x n matrices) on the
// node's `ranks_on_node` ranks exceeds its physical memory `node_memory` (0: unknown).
void check_compute_fits(const Sweep& sweep, const cfg::Node& node, int ranks_on_node,
                        std::uint64_t node_memory);

}  // namespace rb
