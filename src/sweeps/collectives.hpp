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

const std::vector<cfg::KeySpec>& collectives_keys();
std::unique_ptr<Sweep> parse_collectives(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
