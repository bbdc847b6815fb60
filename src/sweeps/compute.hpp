#pragma once
// The `compute` sweep: per rank, GEMM throughput through cuBLASLt (bfloat16, float16, tf32,
// float32, float64) over square sizes and the ring attention block kernel's rate on the cuda
// backend; on the host backend a Kokkos GEMM-like kernel (float32, float64) over the same
// kind of size list. All ranks measure at the same time. docs/sweeps/compute.md.
#include <cstdint>
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& compute_keys();
std::unique_ptr<Sweep> parse_compute(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
