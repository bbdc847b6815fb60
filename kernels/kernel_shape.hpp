#pragma once
// What a kernel computes for one block, in the units that decide which path is fastest: the
// rows and keys of each sub-block (the whole block for exact attention; one segment's rows of
// one head offset for a dilated branch), how many (batch, head) sub-blocks one fused-library
// call covers, and how many such calls the block takes. `kernel: auto` decides from this shape,
// not from the (segment, rate) names of the config: LongNet branches with different names but
// the same sub-blocks behave alike (docs/tuning.md).
//
// The call structure is cuDNN's (kernels/cuda/sdpa_split.hpp): exact attention is one call over
// batch x heads; a dilated branch of rate r is one call per head offset (heads h = offset mod r)
// and segment, each over batch x ceil(heads / r) sub-blocks of segment / r rows.
#include <cstdint>

#include "attention.hpp"

namespace rb::attn {

struct KernelShape {
  bool dilated = false;
  std::int64_t sub_rows = 0;        // query rows of one sub-block
  std::int64_t sub_keys = 0;        // key rows of one sub-block
  std::int64_t heads_per_call = 0;  // (batch, head) sub-blocks per call
  std::int64_t calls = 0;           // calls per block

  // Query-key pairs one call scores (the causal mask not subtracted): what a call's fixed
  // cost is spread over.
  double pairs_per_call() const {
    return double(heads_per_call) * double(sub_rows) * double(sub_keys);
  }
};

KernelShape kernel_shape_of(const Dims& dims, const Pattern& pattern);

}  // namespace rb::attn
