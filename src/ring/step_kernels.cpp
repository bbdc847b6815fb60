#include "ring/step_kernels.hpp"

namespace rb::ring {
namespace {

void fill_shared(const StepKernels& s, attn::BlockInputs& b, const char* kv) {
  b.dims = s.dims;
  b.dtype = s.dtype;
  b.scale = s.scale;
  b.q_data = s.q;
  b.k_data = kv;
  b.v_data = kv + s.kv_shard_bytes;
}

void set_call(attn::BlockInputs& b, const BlockCall& call) {
  b.q = call.q;
  b.kv = call.kv;
  b.pattern = call.pattern;
}

}  // namespace

void StepKernels::forward(const std::vector<BlockCall>& calls, const char* kv, float* out,
                          float* lse) const {
  attn::ForwardBlock fb;
  fill_shared(*this, fb, kv);
  fb.out = out;
  fb.lse = lse;
  for (const BlockCall& call : calls) {
    set_call(fb, call);
    backend.forward(fb);
  }
}

void StepKernels::backward(const std::vector<BlockCall>& calls, const char* kv, const void* dout,
                           const float* lse, const float* delta, float* dq, float* dkdv) const {
  attn::BackwardBlock bb;
  fill_shared(*this, bb, kv);
  bb.dout = dout;
  bb.lse = lse;
  bb.delta = delta;
  bb.dq = dq;
  bb.dk = dkdv;
  bb.dv = dkdv + static_cast<std::size_t>(dims.batch) * dims.heads * dims.kv_rows * dims.head_dim;
  for (const BlockCall& call : calls) {
    set_call(bb, call);
    backend.backward(bb);
  }
}

}  // namespace rb::ring
