#pragma once
// The `memory` sweep: per rank, the host memory bandwidth (a STREAM triad in Kokkos, so NUMA
// placement shows up rank by rank) and, on the cuda backend, device copy bandwidth (HBM) and
// host<->device copies from pinned and pageable memory. All ranks measure at the same time.
// docs/sweeps/memory.md describes the keys and datasets.
#include <cstdint>
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

std::unique_ptr<Sweep> parse_memory(const SweepSpec& spec, const ParseContext& ctx);

// Validation on a real node (the driver calls it for every sweep; others are ignored): refuses,
// at `bytes` in `node`, a memory sweep whose host arrays on the node's `ranks_on_node` ranks
// exceed its physical memory `node_memory` (0: unknown, nothing checked).
void check_memory_fits(const Sweep& sweep, const cfg::Node& node, int ranks_on_node,
                       std::uint64_t node_memory);

}  // namespace rb
