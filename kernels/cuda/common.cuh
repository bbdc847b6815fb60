#pragma once
// Device helpers shared by the CUDA attention paths: element conversions, the pattern mask
// on global positions, and row views that realise the dilated (LongNet) branch by index
// arithmetic instead of gathered copies.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention.hpp"
#include "host_device.hpp"
#include "row_view.hpp"

namespace rb::attn::gpu {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Blocks for a grid-stride loop over n items: at least one, capped where more blocks only
// add scheduling (the loops stride over the rest).
inline unsigned grid_for(std::int64_t n, int threads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

// Calls f with a value of the storage type of dtype t (float, __half, __nv_bfloat16).
template <typename F>
void with_storage_type(DType t, F&& f) {
  with_dtype<float, __half, __nv_bfloat16>(t, f);
}

// The pattern on the device (attention.hpp's Pattern::allows is host-only).
struct DevPattern {
  bool causal;
  std::int64_t segment;
  std::int64_t rate;
};

inline DevPattern dev_pattern(const Pattern& p) {
  return DevPattern{p.causal, p.segment, p.rate};
}

__host__ __device__ __forceinline__ bool pattern_allows(const DevPattern& p, std::int64_t qp,
                                                        std::int64_t kp, int head) {
  if (p.causal && kp > qp) return false;
  if (p.segment > 0) {
    if (qp / p.segment != kp / p.segment) return false;
    const std::int64_t off = head % p.rate;
    if (floor_mod(qp, p.rate) != off || floor_mod(kp, p.rate) != off) return false;
  }
  return true;
}

// Row views (row_view.hpp) for a device pattern.
__host__ __device__ inline RowView make_view(const Span& s, const DevPattern& p, int head) {
  return make_row_view(s, p.segment, p.rate, head);
}

// Mask inside views: the dilation condition already holds, only causal and segment remain.
__host__ __device__ __forceinline__ bool view_allows(const DevPattern& p, std::int64_t qp,
                                                     std::int64_t kp) {
  if (p.causal && kp > qp) return false;
  if (p.segment > 0 && qp / p.segment != kp / p.segment) return false;
  return true;
}

// Tile classification for block skipping: positions rise with the view index (stride > 0).
// 0 = every pair masked (skip), 1 = some pairs masked (per-element mask), 2 = none masked.
__host__ __device__ __forceinline__ int classify_tile(const DevPattern& p, std::int64_t qmin,
                                                      std::int64_t qmax, std::int64_t kmin,
                                                      std::int64_t kmax) {
  if (p.causal && kmin > qmax) return 0;
  if (p.segment > 0 && (qmax / p.segment < kmin / p.segment || qmin / p.segment > kmax / p.segment))
    return 0;
  const bool causal_full = !p.causal || kmax <= qmin;
  const bool seg_full = p.segment <= 0 || (qmin / p.segment == qmax / p.segment &&
                                           kmin / p.segment == kmax / p.segment &&
                                           qmin / p.segment == kmin / p.segment);
  return (causal_full && seg_full) ? 2 : 1;
}

// log(exp(a) + exp(b)) with -inf handled.
__device__ __forceinline__ float log_add_exp(float a, float b) {
  const float m = fmaxf(a, b);
  if (m == -INFINITY) return -INFINITY;
  return m + log1pf(expf(-fabsf(a - b)));
}

// One warp merges a block's normalised output row `ob` with its log-sum-exp lb (> -inf) into
// the running fp32 row `out` and its running log-sum-exp *lse.
template <typename T>
__device__ __forceinline__ void merge_row(float* out, float* lse, const T* ob, float lb,
                                          int head_dim, int lane) {
  const float lo = *lse;
  const float ln = log_add_exp(lo, lb);
  const float wo = (lo == -INFINITY) ? 0.f : expf(lo - ln);
  const float wb = expf(lb - ln);
  for (int c = lane; c < head_dim; c += 32) out[c] = out[c] * wo + to_float(ob[c]) * wb;
  __syncwarp();  // every lane has read the old lse before lane 0 replaces it
  if (lane == 0) *lse = ln;
}

}  // namespace rb::attn::gpu
