// Fused flash-attention backward for one block pair on tensor cores (FlashAttention-2
// scheme): a CTA owns 16*WARPS keys of one head and keeps their dK, dV in fp32 registers;
// it streams 64-row Q / dO tiles (with their lse and delta) through double-buffered shared
// memory and per tile computes, with mma.sync m16n8k16:
//   S^T = K Q^T, P^T = exp(scale*S^T - lse)         (recomputed, masked)
//   dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T (dP^T - delta)
//   dK += dS^T Q  (registers),  dQ += scale * dS K  (dS^T staged in shared memory, fp32
//   atomics into the dq accumulator: other CTAs add to the same query rows).
// Masking, block skipping and the dilated row views are those of the forward.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "flash_params.cuh"
#include "mma.cuh"
#include "tile_load.cuh"

namespace rb::attn::gpu {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

template <typename T, int HD, int WARPS>
struct BwdTraits {
  static constexpr int kBc = 16 * WARPS;  // keys per CTA
  static constexpr int kBr = 64;          // query rows per tile
  static constexpr int kThreads = 32 * WARPS;
  static constexpr std::size_t kSmem = std::size_t(2 * kBc + 4 * kBr) * HD * sizeof(T) +
                                       std::size_t(kBc) * kBr * sizeof(T) +
                                       std::size_t(4 * kBr) * sizeof(float);
};

__device__ __forceinline__ void atomic_add2(float* dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

// DIL as in flash_fwd.cu: exact attention compiles the dilated views and segment tests out.
template <typename T, int HD, int WARPS, bool DIL>
__global__ void __launch_bounds__(32 * WARPS) flash_bwd_kernel(const FlashParams p) {
  using Tr = BwdTraits<T, HD, WARPS>;
  using Op = mma::MmaOp<T>;
  constexpr int kBc = Tr::kBc, kBr = Tr::kBr;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + kBc * HD;
  T* sQ = sV + kBc * HD;                                  // [2][kBr][HD]
  T* sdO = sQ + 2 * kBr * HD;                             // [2][kBr][HD]
  T* sdS = sdO + 2 * kBr * HD;                            // [kBc][kBr], dS^T
  float* sL = reinterpret_cast<float*>(sdS + kBc * kBr);  // [2][kBr], lse * log2(e)
  float* sD = sL + 2 * kBr;                               // [2][kBr], delta

  const int bh = blockIdx.y;
  const int head = bh % p.heads;
  const DevPattern pat = DIL ? p.pat : DevPattern{p.pat.causal, 0, 1};
  const RowView qv = DIL ? make_view(p.qs, p.pat, head)
                         : RowView{p.qs.row0, 1, p.qs.count, p.qs.first, p.qs.stride};
  const RowView kv = DIL ? make_view(p.kvs, p.pat, head)
                         : RowView{p.kvs.row0, 1, p.kvs.count, p.kvs.first, p.kvs.stride};
  const std::int64_t k0 = std::int64_t(blockIdx.x) * kBc;
  if (k0 >= kv.count || qv.count <= 0) return;
  const std::int64_t k1 = std::min<std::int64_t>(k0 + kBc, kv.count);
  const bool k_partial = k1 - k0 < kBc;

  const std::int64_t q_base = std::int64_t(bh) * p.q_rows;
  const T* Qg = static_cast<const T*>(p.q) + q_base * HD;
  const T* dOg = static_cast<const T*>(p.dout) + q_base * HD;
  const T* Kg = static_cast<const T*>(p.k) + std::int64_t(bh) * p.kv_rows * HD;
  const T* Vg = static_cast<const T*>(p.v) + std::int64_t(bh) * p.kv_rows * HD;
  const int n_tiles = int((qv.count + kBr - 1) / kBr);

  auto kind = [&](int t) {
    const std::int64_t a = std::int64_t(t) * kBr;
    const std::int64_t b = std::min<std::int64_t>(a + kBr, qv.count);
    return tile_kind(pat, qv, kv, a, b, k0, k1, k_partial || (b - a < kBr));
  };
  auto next_active = [&](int t) {
    while (t < n_tiles && kind(t) == 0) ++t;
    return t;
  };
  // A query tile's Q and dO rows go to shared memory by cp.async; its lse and delta (one row
  // per thread of the first kBr) are read into registers when the tile is prefetched and
  // stored to shared memory a whole tile of compute later (store_ld), so the global-load
  // latency is not waited for right after the loop's barrier.
  static_assert(Tr::kThreads >= kBr, "one thread per query row of a tile for lse and delta");
  float pre_l = 0.f, pre_d = 0.f;
  bool pre_valid = false;
  auto load_q_tile = [&](int t, int buf) {
    const std::int64_t a = std::int64_t(t) * kBr;
    load_rows<T, HD, Tr::kThreads, kBr, 2>({sQ + buf * kBr * HD, sdO + buf * kBr * HD}, {Qg, dOg},
                                           qv, a);
    const std::int64_t j = a + threadIdx.x;
    pre_valid = threadIdx.x < kBr && j < qv.count;
    if (pre_valid) {
      const std::int64_t r = q_base + qv.row(j);
      pre_l = p.lse_in[r];
      pre_d = p.delta[r];
    }
  };
  auto store_ld = [&](int buf) {
    if (threadIdx.x < kBr) {
      // rows past the span and rows nothing attends to (lse -inf): P = 0
      const bool none = !pre_valid || pre_l == -INFINITY;
      sL[buf * kBr + threadIdx.x] = none ? INFINITY : pre_l * kLog2e;
      sD[buf * kBr + threadIdx.x] = pre_valid ? pre_d : 0.f;
    }
  };

  int t = next_active(0);
  if (t >= n_tiles) return;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;

  load_rows<T, HD, Tr::kThreads, kBc, 2>({sK, sV}, {Kg, Vg}, kv, k0);
  load_q_tile(t, 0);
  store_ld(0);
  mma::cp_async_commit();

  float dk[HD / 8][4], dv[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  const float sl2 = p.scale * kLog2e;
  const std::int64_t kj[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const std::int64_t kpos[2] = {kv.pos(kj[0]), kv.pos(kj[1])};
  // ldmatrix byte addresses: per-thread offsets into the swizzled tiles (mma::swz_bytes).
  // a_off: A operand rows of this warp's keys (K, V); b_off: B operand rows (Q, dO);
  // t_off: transposed B operand (dO, Q, K); ds_off: the transposed dS^T tile.
  const std::uint32_t sKa = mma::smem_addr(sK), sVa = mma::smem_addr(sV),
                      sdSa = mma::smem_addr(sdS);
  const std::uint32_t a_off = mma::swz_bytes<HD>(warp * 16 + (lane & 15), lane >> 4);
  const std::uint32_t b_off = mma::swz_bytes<HD>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const std::uint32_t t_off = mma::swz_bytes<HD>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  const std::uint32_t ds_off =
      mma::swz_bytes<kBr>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  constexpr std::uint32_t kRows16 = 16 * HD * sizeof(T);  // bytes of 16 rows of an HD tile
  // dq rows start on 16-byte boundaries when the buffer does (rows are HD floats).
  [[maybe_unused]] const bool dq_vec4 = (reinterpret_cast<std::uintptr_t>(p.dq) & 15u) == 0;
  // dS^T stores: this thread's (row, chunk 0 | 1) byte offsets in the [kBc][kBr] tile.
  char* const sdS_b = reinterpret_cast<char*>(sdS);
  const std::uint32_t st_off[2] = {mma::swz_bytes<kBr>(warp * 16 + g, 0) + 4 * tq,
                                   mma::swz_bytes<kBr>(warp * 16 + g, 1) + 4 * tq};

  int buf = 0;
  while (t < n_tiles) {
    const int tn = next_active(t + 1);
    // This barrier makes tile t visible and, every warp being done with tile t-1 (its dQ reads
    // of sdS included), frees that Q/dO/lse/delta buffer for the prefetch issued after it.
    mma::cp_async_wait<0>();
    __syncthreads();
    if (tn < n_tiles) load_q_tile(tn, buf ^ 1);
    mma::cp_async_commit();
    const std::uint32_t q_a = mma::smem_addr(sQ + buf * kBr * HD);
    const std::uint32_t do_a = mma::smem_addr(sdO + buf * kBr * HD);
    const float* l_s = sL + buf * kBr;
    const float* d_s = sD + buf * kBr;
    const std::int64_t qa = std::int64_t(t) * kBr;

    // Per-element mask of a partial tile as bits, worked out before the score accumulators
    // are live (the 64-bit position arithmetic would otherwise spill dK/dV registers).
    const bool masked = kind(t) == 1;
    std::uint32_t allowed = 0u;
    if (masked) {
#pragma unroll
      for (int nt = 0; nt < kBr / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t qi = qa + nt * 8 + 2 * tq + (e & 1);
          const int h = e >> 1;
          const bool ok =
              qi < qv.count && kj[h] < kv.count && view_allows(pat, qv.pos(qi), kpos[h]);
          allowed |= std::uint32_t(ok) << (nt * 4 + e);
        }
    }

    // S^T = K Q^T (rows: this warp's 16 keys, columns: the tile's query rows)
    float s[kBr / 8][4];
#pragma unroll
    for (int i = 0; i < kBr / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      std::uint32_t a[4];
      mma::ldmatrix_x4(a, sKa + mma::kstep(a_off, kk));
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        std::uint32_t b[4];
        mma::ldmatrix_x4(b, q_a + mma::kstep(b_off, kk) + np * kRows16);
        Op::run(s[2 * np], a, b[0], b[1]);
        Op::run(s[2 * np + 1], a, b[2], b[3]);
      }
    }
    // P^T
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = nt * 8 + 2 * tq + (e & 1);
        float pv = mma::fast_exp2(s[nt][e] * sl2 - l_s[c]);
        if (masked && !((allowed >> (nt * 4 + e)) & 1u)) pv = 0.f;
        s[nt][e] = pv;
      }
      // dV += P^T dO
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      std::uint32_t a[4];
      mma::c_to_a<T>(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, do_a + kk * kRows16 + mma::kstep(t_off, dp));
        Op::run(dv[2 * dp], a, b[0], b[1]);
        Op::run(dv[2 * dp + 1], a, b[2], b[3]);
      }
    }
    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) in place of P^T; in two halves of the
    // tile's query columns so only half of dP^T is ever live (register pressure).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      constexpr int kHalfNt = kBr / 16;  // n8 tiles per half
      float dpt[kHalfNt][4];
#pragma unroll
      for (int i = 0; i < kHalfNt; ++i) dpt[i][0] = dpt[i][1] = dpt[i][2] = dpt[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        std::uint32_t a[4];
        mma::ldmatrix_x4(a, sVa + mma::kstep(a_off, kk));
#pragma unroll
        for (int np = 0; np < kHalfNt / 2; ++np) {
          std::uint32_t b[4];
          mma::ldmatrix_x4(b, do_a + mma::kstep(b_off, kk) + (half * kHalfNt / 2 + np) * kRows16);
          Op::run(dpt[2 * np], a, b[0], b[1]);
          Op::run(dpt[2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int i = 0; i < kHalfNt; ++i) {
        const int nt = half * kHalfNt + i;
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= dpt[i][e] - d_s[nt * 8 + 2 * tq + (e & 1)];
      }
    }
    // dK += dS^T Q ; stage dS^T (16-bit) for dQ
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      std::uint32_t a[4];
      mma::c_to_a<T>(a, s[2 * kk], s[2 * kk + 1]);
      constexpr int kRows8 = 8 * kBr * sizeof(T);
      *reinterpret_cast<std::uint32_t*>(sdS_b + mma::kstep(st_off[0], kk)) = a[0];
      *reinterpret_cast<std::uint32_t*>(sdS_b + mma::kstep(st_off[0], kk) + kRows8) = a[1];
      *reinterpret_cast<std::uint32_t*>(sdS_b + mma::kstep(st_off[1], kk)) = a[2];
      *reinterpret_cast<std::uint32_t*>(sdS_b + mma::kstep(st_off[1], kk) + kRows8) = a[3];
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, q_a + kk * kRows16 + mma::kstep(t_off, dp));
        Op::run(dk[2 * dp], a, b[0], b[1]);
        Op::run(dk[2 * dp + 1], a, b[2], b[3]);
      }
    }
    if (tn < n_tiles) store_ld(buf ^ 1);  // read in the next iteration, after its barrier
    __syncthreads();
    // dQ[tile rows] += scale * dS K, in units of (16 query rows) x (64 head-dim columns).
    constexpr int kRowGroups = kBr / 16, kColGroups = HD / 64;
    for (int u = warp; u < kRowGroups * kColGroups; u += WARPS) {
      const int rg = u % kRowGroups, cg = u / kRowGroups;
      float acc[8][4];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        std::uint32_t a[4];
        mma::ldmatrix_x4_trans(a, sdSa + kk * (16 * kBr * sizeof(T)) + mma::kstep(ds_off, rg));
#pragma unroll
        for (int dp = 0; dp < 4; ++dp) {
          std::uint32_t b[4];
          mma::ldmatrix_x4_trans(b, sKa + kk * kRows16 + mma::kstep(t_off, cg * 4 + dp));
          Op::run(acc[2 * dp], a, b[0], b[1]);
          Op::run(acc[2 * dp + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t qi = qa + rg * 16 + g + 8 * h;
        const bool row_ok = qi < qv.count;
        float* dst = p.dq + (q_base + qv.row(row_ok ? qi : 0)) * HD + cg * 64 + 2 * tq;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (dq_vec4) {
          // 16-byte reductions, half as many atomics as float2 ones (the dQ atomics are this
          // kernel's largest global traffic): lanes tq and tq^1 swap halves so that the even
          // lane holds four consecutive columns of n-tile 2m and the odd lane of n-tile 2m+1.
          // The shuffles run on every lane; only the atomics depend on the row.
          const bool odd = tq & 1;
#pragma unroll
          for (int m = 0; m < 4; ++m) {
            const float* e = acc[2 * m] + 2 * h;      // n-tile 2m, this row
            const float* o = acc[2 * m + 1] + 2 * h;  // n-tile 2m+1
            const float rx = __shfl_xor_sync(0xffffffffu, odd ? e[0] : o[0], 1);
            const float ry = __shfl_xor_sync(0xffffffffu, odd ? e[1] : o[1], 1);
            const float ox = p.scale * (odd ? o[0] : e[0]), oy = p.scale * (odd ? o[1] : e[1]);
            const float4 v = odd ? make_float4(p.scale * rx, p.scale * ry, ox, oy)
                                 : make_float4(ox, oy, p.scale * rx, p.scale * ry);
            if (row_ok)
              atomicAdd(reinterpret_cast<float4*>(dst + (odd ? (2 * m + 1) * 8 - 2 : 2 * m * 8)),
                        v);
          }
          continue;
        }
#endif
        if (!row_ok) continue;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
          atomic_add2(dst + nt * 8, p.scale * acc[nt][2 * h], p.scale * acc[nt][2 * h + 1]);
      }
    }
    t = tn;
    buf ^= 1;
  }

  // This CTA alone owns its key rows in this launch: plain read-modify-write.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (kj[h] >= kv.count) continue;
    const std::int64_t r = std::int64_t(bh) * p.kv_rows + kv.row(kj[h]);
    float* dkr = p.dk + r * HD;
    float* dvr = p.dv + r * HD;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt) {
      float2* a = reinterpret_cast<float2*>(dkr + dt * 8 + 2 * tq);
      float2* b = reinterpret_cast<float2*>(dvr + dt * 8 + 2 * tq);
      float2 x = *a, y = *b;
      x.x += p.scale * dk[dt][2 * h];
      x.y += p.scale * dk[dt][2 * h + 1];
      y.x += dv[dt][2 * h];
      y.y += dv[dt][2 * h + 1];
      *a = x;
      *b = y;
    }
  }
}

template <typename T, int HD, int WARPS, bool DIL>
void launch_bwd_as(const BackwardBlock& b, cudaStream_t stream) {
  using Tr = BwdTraits<T, HD, WARPS>;
  static bool configured = false;
  if (!configured) {
    RBK_CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_kernel<T, HD, WARPS, DIL>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(Tr::kSmem)));
    configured = true;
  }
  const FlashParams p = make_params(b);
  const dim3 grid(unsigned((b.kv.count + Tr::kBc - 1) / Tr::kBc),
                  unsigned(b.dims.batch * b.dims.heads));
  flash_bwd_kernel<T, HD, WARPS, DIL><<<grid, Tr::kThreads, Tr::kSmem, stream>>>(p);
  RBK_LAUNCH_CHECK();
}

template <typename T, int HD, int WARPS>
void launch_bwd(const BackwardBlock& b, cudaStream_t stream) {
  if (b.pattern.segment > 0)
    launch_bwd_as<T, HD, WARPS, true>(b, stream);
  else
    launch_bwd_as<T, HD, WARPS, false>(b, stream);
}

}  // namespace

void flash_backward(const BackwardBlock& b, cudaStream_t stream, FlashTile tile) {
  if (b.q.count <= 0 || b.kv.count <= 0) return;
  if (!flash_tensor_core_supported(b.dtype, b.dims.head_dim)) {
    simple_backward(b, stream);
    return;
  }
  if (b.dtype == DType::BF16) {
    // Default at head dim 128: 8 warps / 128 keys per CTA (half the dQ atomics of the
    // bwd-4w-k64 variant; measured faster on H200).
    if (b.dims.head_dim == 128 && tile.bwd == FlashTile::Bwd::W4K64)
      launch_bwd<__nv_bfloat16, 128, 4>(b, stream);
    else if (b.dims.head_dim == 128)
      launch_bwd<__nv_bfloat16, 128, 8>(b, stream);
    else
      launch_bwd<__nv_bfloat16, 64, 4>(b, stream);
  } else {
    if (b.dims.head_dim == 128)
      launch_bwd<__half, 128, 8>(b, stream);
    else
      launch_bwd<__half, 64, 4>(b, stream);
  }
}

}  // namespace rb::attn::gpu
