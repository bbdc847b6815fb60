#pragma once
// The `collectives` sweep: NCCL collectives on GPU buffers (backend cuda) or MPI collectives
// on host buffers (backend host), over message sizes, dtypes, in-place and out-of-place, in
// concurrent rank groups, timed like nccl-tests; plus the alpha-beta cost model fitted to
// the results. The operations are the rows of src/profiling/collective_table.cpp; the
// transports are the engines of src/profiling/engine.hpp. docs/sweeps/collectives.md
// describes the keys and the datasets.
#include <cstdint>
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

std::unique_ptr<Sweep> parse_collectives(const SweepSpec& spec, const ParseContext& ctx);

// Validation on a real node (the driver calls it for every sweep; others are ignored): refuses,
// at `max_bytes` in `node`, a host-path collectives sweep whose send and receive buffers on the
// node's `ranks_on_node` ranks exceed its physical memory `node_memory` (0: unknown).
void check_collectives_fits(const Sweep& sweep, const cfg::Node& node, int ranks_on_node,
                            std::uint64_t node_memory);

}  // namespace rb
