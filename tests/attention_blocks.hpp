#pragma once
// Attention blocks as the kernel tests hand them to a backend.
#include "attention.hpp"

namespace rbtest {

// The backward block of forward block `f`: its problem (dims, dtype, scale, spans, pattern), its
// inputs and its final log-sum-exp, with the output gradient, delta and the gradients' buffers.
inline rb::attn::BackwardBlock backward_of(const rb::attn::ForwardBlock& f, const void* dout,
                                           const float* delta, float* dq, float* dk, float* dv) {
  return {f.dims,   f.dtype, f.scale, f.q,   f.kv, f.pattern, f.q_data, f.k_data,
          f.v_data, dout,    f.lse,   delta, dq,   dk,        dv};
}

}  // namespace rbtest
