// Fused CUDA-core path for what the tensor-core kernels do not take (fp32 data, head dims
// other than 64/128, up to 256): one warp per row, lanes split the head dim, key (or query)
// tiles staged in shared memory as fp32. Correct first; speed is the tensor-core path's job.
// Same row views, block skipping and per-element masks as the flash kernels, and the same
// fused log-sum-exp merge in the forward's epilogue.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "flash_params.cuh"

namespace rb::attn::gpu {
namespace {

constexpr int kWarps = 8;               // rows per CTA
constexpr int kTile = 16;               // staged rows per tile
constexpr int kPer = kMaxHeadDim / 32;  // head-dim elements per lane

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename T>
__device__ void stage(float* dst, const T* base, const RowView& v, std::int64_t j0, int hd) {
  for (int idx = threadIdx.x; idx < kTile * hd; idx += blockDim.x) {
    const int r = idx / hd, c = idx % hd;
    const std::int64_t j = j0 + r;
    dst[idx] = j < v.count ? to_float(base[v.row(j) * hd + c]) : 0.f;
  }
}

template <typename T>
__device__ void load_row(float (&x)[kPer], const T* row, int hd) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = lane + 32 * i;
    x[i] = c < hd ? to_float(row[c]) : 0.f;
  }
}

__device__ __forceinline__ float dot_row(const float (&x)[kPer], const float* srow, int hd) {
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = lane + 32 * i;
    if (c < hd) acc += x[i] * srow[c];
  }
  return warp_sum(acc);
}

// Tile kind of a CTA's query rows against a staged key tile (or the reverse); ragged tiles
// are cheap here, so the per-element mask always runs.
__device__ int cta_tile_kind(const DevPattern& pat, const RowView& qv, const RowView& kv,
                             std::int64_t q0, std::int64_t q1, std::int64_t k0, std::int64_t k1) {
  return tile_kind(pat, qv, kv, q0, q1, k0, k1, true);
}

// A CTA's query rows against its head's key rows, one warp per query row: what the forward
// and dQ kernels share before their own per-row state.
struct QueryWarp {
  int bh, lane;
  RowView qv, kv;
  std::int64_t q0, q1, qi;
  float* sK;  // staged key tile [kTile][hd]
  float* sV;  // staged value tile [kTile][hd]
  __device__ QueryWarp(const FlashParams& p, int hd, float* sm)
      : bh(blockIdx.y),
        lane(threadIdx.x & 31),
        qv(make_view(p.qs, p.pat, bh % p.heads)),
        kv(make_view(p.kvs, p.pat, bh % p.heads)),
        q0(std::int64_t(blockIdx.x) * kWarps),
        q1(std::min<std::int64_t>(q0 + kWarps, qv.count)),
        qi(q0 + (threadIdx.x >> 5)),
        sK(sm),
        sV(sm + kTile * hd) {}
  __device__ bool idle() const { return q0 >= qv.count || kv.count <= 0; }
  __device__ bool has_row() const { return qi < qv.count; }
  // The warp's global query row (row 0 of the head for a warp past the end: a safe address).
  __device__ std::int64_t global_row(const FlashParams& p) const {
    return std::int64_t(bh) * p.q_rows + (has_row() ? qv.row(qi) : 0);
  }
  __device__ std::int64_t qpos() const { return qv.pos(has_row() ? qi : q0); }
};

// Stages the CTA's unskipped key tiles (K and V rows of head bh) and calls f(r) for each key
// the warp's query may see, r = its row in the staged tile. Every thread of the CTA
// must call this (it synchronises); inactive warps only help staging.
template <typename T, typename F>
__device__ __forceinline__ void for_each_key(const FlashParams& p, const QueryWarp& w, int hd,
                                             bool active, F&& f) {
  const std::int64_t qpos = w.qpos();
  const T* Kg = static_cast<const T*>(p.k) + std::int64_t(w.bh) * p.kv_rows * hd;
  const T* Vg = static_cast<const T*>(p.v) + std::int64_t(w.bh) * p.kv_rows * hd;
  for (std::int64_t k0 = 0; k0 < w.kv.count; k0 += kTile) {
    const std::int64_t k1 = std::min<std::int64_t>(k0 + kTile, w.kv.count);
    // The tile kind is uniform over the CTA, so skipping here keeps the barriers matched.
    if (cta_tile_kind(p.pat, w.qv, w.kv, w.q0, w.q1, k0, k1) == 0) continue;
    __syncthreads();
    stage(w.sK, Kg, w.kv, k0, hd);
    stage(w.sV, Vg, w.kv, k0, hd);
    __syncthreads();
    if (!active) continue;
    for (std::int64_t j = k0; j < k1; ++j) {
      if (!view_allows(p.pat, qpos, w.kv.pos(j))) continue;
      f(int(j - k0));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarps) simple_fwd_kernel(const FlashParams p, int hd) {
  extern __shared__ float sm[];
  const QueryWarp w(p, hd, sm);
  if (w.idle()) return;
  const bool active = w.has_row();
  const std::int64_t grow = w.global_row(p);

  float q[kPer], acc[kPer];
  load_row(q, static_cast<const T*>(p.q) + grow * hd, hd);
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0.f;
  float mx = -INFINITY, l = 0.f;

  for_each_key<T>(p, w, hd, active, [&](int r) {
    const float s = dot_row(q, w.sK + r * hd, hd) * p.scale;
    const float m_new = fmaxf(mx, s);
    const float corr = expf(mx - m_new);  // mx = -inf: 0
    const float pr = expf(s - m_new);
    l = l * corr + pr;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = w.lane + 32 * i;
      if (c < hd) acc[i] = acc[i] * corr + pr * w.sV[r * hd + c];
    }
    mx = m_new;
  });
  if (!active || l <= 0.f) return;
  const float lb = mx + logf(l);
  const float lo = p.lse[grow];
  const float ln = log_add_exp(lo, lb);
  const float wo = (lo == -INFINITY) ? 0.f : expf(lo - ln);
  const float wb = expf(lb - ln) / l;
  float* orow = p.out + grow * hd;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = w.lane + 32 * i;
    if (c < hd) orow[c] = orow[c] * wo + acc[i] * wb;
  }
  __syncwarp();
  if (w.lane == 0) p.lse[grow] = ln;
}

// dK, dV: one warp per key row, query tiles staged.
template <typename T>
__global__ void __launch_bounds__(32 * kWarps) simple_dkdv_kernel(const FlashParams p, int hd) {
  extern __shared__ float sm[];
  float* sQ = sm;
  float* sdO = sm + kTile * hd;
  float* sL = sdO + kTile * hd;
  float* sD = sL + kTile;
  const int bh = blockIdx.y, head = bh % p.heads;
  const RowView qv = make_view(p.qs, p.pat, head), kv = make_view(p.kvs, p.pat, head);
  const std::int64_t k0 = std::int64_t(blockIdx.x) * kWarps;
  if (k0 >= kv.count || qv.count <= 0) return;
  const std::int64_t k1 = std::min<std::int64_t>(k0 + kWarps, kv.count);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t kj = k0 + warp;
  const bool active = kj < kv.count;
  const std::int64_t krow = std::int64_t(bh) * p.kv_rows + (active ? kv.row(kj) : 0);
  const std::int64_t kpos = kv.pos(active ? kj : k0);
  const std::int64_t q_base = std::int64_t(bh) * p.q_rows;
  const T* Qg = static_cast<const T*>(p.q) + q_base * hd;
  const T* dOg = static_cast<const T*>(p.dout) + q_base * hd;

  float k[kPer], v[kPer], dk[kPer], dv[kPer];
  load_row(k, static_cast<const T*>(p.k) + krow * hd, hd);
  load_row(v, static_cast<const T*>(p.v) + krow * hd, hd);
#pragma unroll
  for (int i = 0; i < kPer; ++i) dk[i] = dv[i] = 0.f;

  for (std::int64_t a = 0; a < qv.count; a += kTile) {
    const std::int64_t b = std::min<std::int64_t>(a + kTile, qv.count);
    if (cta_tile_kind(p.pat, qv, kv, a, b, k0, k1) == 0) continue;
    __syncthreads();
    stage(sQ, Qg, qv, a, hd);
    stage(sdO, dOg, qv, a, hd);
    for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
      const std::int64_t j = a + i;
      sL[i] = j < qv.count ? p.lse_in[q_base + qv.row(j)] : -INFINITY;
      sD[i] = j < qv.count ? p.delta[q_base + qv.row(j)] : 0.f;
    }
    __syncthreads();
    if (!active) continue;
    for (std::int64_t j = a; j < b; ++j) {
      const int r = int(j - a);
      if (sL[r] == -INFINITY || !view_allows(p.pat, qv.pos(j), kpos)) continue;
      const float pr = expf(dot_row(k, sQ + r * hd, hd) * p.scale - sL[r]);
      const float dp = dot_row(v, sdO + r * hd, hd);
      const float ds = pr * (dp - sD[r]);
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int c = lane + 32 * i;
        if (c < hd) {
          dv[i] += pr * sdO[r * hd + c];
          dk[i] += ds * sQ[r * hd + c];
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = lane + 32 * i;
    if (c < hd) {
      p.dk[krow * hd + c] += p.scale * dk[i];
      p.dv[krow * hd + c] += dv[i];
    }
  }
}

// dQ: one warp per query row, key tiles staged.
template <typename T>
__global__ void __launch_bounds__(32 * kWarps) simple_dq_kernel(const FlashParams p, int hd) {
  extern __shared__ float sm[];
  const QueryWarp w(p, hd, sm);
  if (w.idle()) return;
  const std::int64_t grow = w.global_row(p);
  const bool active = w.has_row() && p.lse_in[grow] != -INFINITY;
  const float lse = p.lse_in[grow];
  const float delta = p.delta[grow];

  float q[kPer], dO[kPer], dq[kPer];
  load_row(q, static_cast<const T*>(p.q) + grow * hd, hd);
  load_row(dO, static_cast<const T*>(p.dout) + grow * hd, hd);
#pragma unroll
  for (int i = 0; i < kPer; ++i) dq[i] = 0.f;

  for_each_key<T>(p, w, hd, active, [&](int r) {
    const float pr = expf(dot_row(q, w.sK + r * hd, hd) * p.scale - lse);
    const float ds = pr * (dot_row(dO, w.sV + r * hd, hd) - delta);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = w.lane + 32 * i;
      if (c < hd) dq[i] += ds * w.sK[r * hd + c];
    }
  });
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = w.lane + 32 * i;
    if (c < hd) p.dq[grow * hd + c] += p.scale * dq[i];
  }
}

void check_head_dim(int hd) {
  if (hd <= 0 || hd > kMaxHeadDim)
    throw std::invalid_argument("CUDA attention: head_dim " + std::to_string(hd) +
                                " is outside the supported range 1.." +
                                std::to_string(kMaxHeadDim));
}

}  // namespace

void simple_forward(const ForwardBlock& b, cudaStream_t stream) {
  if (b.q.count <= 0 || b.kv.count <= 0) return;
  const int hd = b.dims.head_dim;
  check_head_dim(hd);
  const FlashParams p = make_params(b);
  const dim3 grid(unsigned((b.q.count + kWarps - 1) / kWarps),
                  unsigned(b.dims.batch * b.dims.heads));
  const std::size_t smem = std::size_t(2 * kTile * hd) * sizeof(float);
  with_storage_type(b.dtype, [&](auto tag) {
    using T = decltype(tag);
    simple_fwd_kernel<T><<<grid, 32 * kWarps, smem, stream>>>(p, hd);
  });
  RBK_LAUNCH_CHECK();
}

void simple_backward(const BackwardBlock& b, cudaStream_t stream) {
  if (b.q.count <= 0 || b.kv.count <= 0) return;
  const int hd = b.dims.head_dim;
  check_head_dim(hd);
  const FlashParams p = make_params(b);
  const unsigned bh = unsigned(b.dims.batch * b.dims.heads);
  const std::size_t smem_kv = std::size_t(2 * kTile * hd + 2 * kTile) * sizeof(float);
  with_storage_type(b.dtype, [&](auto tag) {
    using T = decltype(tag);
    simple_dkdv_kernel<T>
        <<<dim3(unsigned((b.kv.count + kWarps - 1) / kWarps), bh), 32 * kWarps, smem_kv, stream>>>(
            p, hd);
    simple_dq_kernel<T>
        <<<dim3(unsigned((b.q.count + kWarps - 1) / kWarps), bh), 32 * kWarps, smem_kv, stream>>>(
            p, hd);
  });
  RBK_LAUNCH_CHECK();
}

}  // namespace rb::attn::gpu
