#pragma once
// The "materialized" host kernel path: for a tile of query rows, the scores against every
// key row of the block are written to scratch memory (S = QK^T, masked), then softmax and
// P V (forward) or P and dS, then dQ, dK, dV (backward) read them back. Same math, same mask
// enumeration (mask.hpp) and same accumulators as host_kernels.hpp; it trades the kokkos
// kernel's one-thread-per-row loops for wider parallel passes over a bounded tile.
#include <cstddef>
#include <cstdint>

#include "attention.hpp"

namespace rb::attn::host {

// Query rows (flattened over batch and head) per tile: bounds the scratch to this many
// rows times the block's key rows.
constexpr std::int64_t kTileRows = 64;

// Floats of scratch the calls below need for this block (0 when the block is empty).
std::size_t materialized_forward_scratch(const ForwardBlock& block);
std::size_t materialized_backward_scratch(const BackwardBlock& block);

// `scratch` holds at least the floats above, in the default execution space's memory.
void materialized_forward(const ForwardBlock& block, float* scratch);
void materialized_backward(const BackwardBlock& block, float* scratch);

}  // namespace rb::attn::host
