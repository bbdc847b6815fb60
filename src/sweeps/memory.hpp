#pragma once
// The `memory` sweep: per rank, the host memory bandwidth (a STREAM triad in Kokkos, so NUMA
// placement shows up rank by rank) and, on the cuda backend, device copy bandwidth (HBM) and
// host<->device copies from pinned and pageable memory. All ranks measure at the same time.
// docs/sweeps/memory.md describes the keys and datasets.
#include <cstdint>
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& memory_keys();
std::unique_ptr<Sweep> parse_memory(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
