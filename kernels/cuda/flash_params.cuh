#pragma once
// Kernel parameters of the fused paths, built from the block problem on the host.
#include "common.cuh"

namespace rb::attn::gpu {

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;     // backward
  float* out;           // forward: running output; backward: unused
  float* lse;           // forward: running lse (read/write)
  const float* lse_in;  // backward: final lse
  const float* delta;   // backward
  float* dq;
  float* dk;
  float* dv;
  std::int64_t q_rows, kv_rows;
  int heads;
  float scale;
  Span qs, kvs;
  DevPattern pat;
};

// The fields every block has (attention.hpp's BlockInputs).
inline FlashParams shared_params(const BlockInputs& b) {
  FlashParams p{};
  p.q = b.q_data;
  p.k = b.k_data;
  p.v = b.v_data;
  p.q_rows = b.dims.q_rows;
  p.kv_rows = b.dims.kv_rows;
  p.heads = b.dims.heads;
  p.scale = b.scale;
  p.qs = b.q;
  p.kvs = b.kv;
  p.pat = dev_pattern(b.pattern);
  return p;
}

inline FlashParams make_params(const ForwardBlock& b) {
  FlashParams p = shared_params(b);
  p.out = b.out;
  p.lse = b.lse;
  return p;
}

inline FlashParams make_params(const BackwardBlock& b) {
  FlashParams p = shared_params(b);
  p.dout = b.dout;
  p.lse_in = b.lse;
  p.delta = b.delta;
  p.dq = b.dq;
  p.dk = b.dk;
  p.dv = b.dv;
  return p;
}

// Tile kind of query view rows [q0, q1) against key view rows [k0, k1) (both non-empty),
// 0 skip / 1 per-element mask / 2 no mask; `partial` forces the mask for ragged tiles.
__device__ __forceinline__ int tile_kind(const DevPattern& pat, const RowView& qv,
                                         const RowView& kv, std::int64_t q0, std::int64_t q1,
                                         std::int64_t k0, std::int64_t k1, bool partial) {
  const int c = classify_tile(pat, qv.pos(q0), qv.pos(q1 - 1), kv.pos(k0), kv.pos(k1 - 1));
  return (c == 2 && partial) ? 1 : c;
}

}  // namespace rb::attn::gpu
