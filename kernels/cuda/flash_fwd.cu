// Fused flash-attention forward for one block pair on tensor cores (FlashAttention-2 scheme):
// a CTA of WARPS warps owns 16*MT*WARPS query rows of one head, keeps Q in shared memory or
// its fragments in registers (per tile shape), streams 64-key K/V tiles through
// double-buffered shared memory with cp.async, computes S = Q K^T and O += P V with
// mma.sync m16n8k16 (fp32 accumulators) and an online softmax in the exp2 domain, and
// merges its result into the running fp32 (out, lse) in the epilogue - no separate merge
// kernel.
//
// Masking: tiles wholly outside the pattern are skipped before their loads are issued;
// tiles straddling a causal diagonal or a segment edge get an exact per-element mask on
// global positions. The dilated branch is a row view (common.cuh): the CTA reads every
// step-th row of the span by address arithmetic, no gathered copy exists.
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
constexpr float kLn2 = 0.6931471805599453f;

// Tile shape: WARPS warps, each owning MT m16 tiles (16*MT query rows), BC keys per tile.
// QREG keeps Q's fragments in registers for the whole loop (fewer shared-memory reads, more
// registers); otherwise they are re-read from shared memory per key tile.
template <typename T, int HD, int WARPS, int MT, int BC, bool QREG>
struct FwdTraits {
  static constexpr int kBr = 16 * MT * WARPS;  // query rows per CTA
  static constexpr int kBc = BC;               // keys per tile
  static constexpr int kThreads = 32 * WARPS;
  static constexpr std::size_t kSmem = std::size_t(kBr + 4 * kBc) * HD * sizeof(T);
};

// DIL: the block has a dilated branch (per-head row views, segment masks). Exact attention
// (DIL = false) uses the spans as they are, with the segment test compiled out: fewer live
// 64-bit values in the loop.
template <typename T, int HD, int WARPS, int MT, int BC, bool QREG, bool DIL>
__global__ void __launch_bounds__(32 * WARPS) flash_fwd_kernel(const FlashParams p) {
  using Tr = FwdTraits<T, HD, WARPS, MT, BC, QREG>;
  using Op = mma::MmaOp<T>;
  constexpr int kBr = Tr::kBr, kBc = Tr::kBc;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBr * HD;      // [2][kBc][HD]
  T* sV = sK + 2 * kBc * HD;  // [2][kBc][HD]

  const int bh = blockIdx.y;
  const int head = bh % p.heads;
  const DevPattern pat = DIL ? p.pat : DevPattern{p.pat.causal, 0, 1};
  const RowView qv = DIL ? make_view(p.qs, p.pat, head)
                         : RowView{p.qs.row0, 1, p.qs.count, p.qs.first, p.qs.stride};
  const RowView kv = DIL ? make_view(p.kvs, p.pat, head)
                         : RowView{p.kvs.row0, 1, p.kvs.count, p.kvs.first, p.kvs.stride};
  const std::int64_t q0 = std::int64_t(blockIdx.x) * kBr;
  if (q0 >= qv.count || kv.count <= 0) return;
  const std::int64_t q1 = std::min<std::int64_t>(q0 + kBr, qv.count);
  const bool q_partial = q1 - q0 < kBr;

  const T* Qg = static_cast<const T*>(p.q) + std::int64_t(bh) * p.q_rows * HD;
  const T* Kg = static_cast<const T*>(p.k) + std::int64_t(bh) * p.kv_rows * HD;
  const T* Vg = static_cast<const T*>(p.v) + std::int64_t(bh) * p.kv_rows * HD;
  const int n_tiles = int((kv.count + kBc - 1) / kBc);

  auto kind = [&](int t) {
    const std::int64_t k0 = std::int64_t(t) * kBc;
    const std::int64_t k1 = std::min<std::int64_t>(k0 + kBc, kv.count);
    return tile_kind(pat, qv, kv, q0, q1, k0, k1, q_partial || (k1 - k0 < kBc));
  };
  auto next_active = [&](int t) {
    while (t < n_tiles && kind(t) == 0) ++t;
    return t;
  };

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;

  int t = next_active(0);
  if (t >= n_tiles) return;  // nothing allowed: the running state stays as it is
  load_rows<T, HD, Tr::kThreads, kBr>(sQ, Qg, qv, q0);
  mma::cp_async_commit();
  load_rows<T, HD, Tr::kThreads, kBc, 2>({sK, sV}, {Kg, Vg}, kv, std::int64_t(t) * kBc);
  mma::cp_async_commit();

  mma::cp_async_wait<1>();
  __syncthreads();
  const int wrow = warp * 16 * MT;  // this warp's first query row in the tile
  std::uint32_t qf[QREG ? MT : 1][QREG ? HD / 16 : 1][4];
  if constexpr (QREG) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk)
        mma::ldmatrix_x4(qf[mt][kk],
                         sQ + mma::swz<HD>(wrow + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
  }

  // ldmatrix byte addresses: per-thread offsets into the swizzled tiles (mma::swz_bytes)
  const std::uint32_t sQa = mma::smem_addr(sQ), sKa = mma::smem_addr(sK), sVa = mma::smem_addr(sV);
  const std::uint32_t q_off = mma::swz_bytes<HD>(wrow + (lane & 15), lane >> 4);
  const std::uint32_t k_off = mma::swz_bytes<HD>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const std::uint32_t v_off = mma::swz_bytes<HD>((lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);
  constexpr std::uint32_t kRows16 = 16 * HD * sizeof(T);  // bytes of 16 tile rows

  float o[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  const float sl2 = p.scale * kLog2e;

  int buf = 0;
  while (t < n_tiles) {
    const int tn = next_active(t + 1);
    // One barrier per tile: it makes tile t visible and, since every warp is then done with
    // tile t-1, frees that buffer for the prefetch of the next tile, issued after it.
    mma::cp_async_wait<0>();
    __syncthreads();
    if (tn < n_tiles) {
      load_rows<T, HD, Tr::kThreads, kBc, 2>({sK + (buf ^ 1) * kBc * HD, sV + (buf ^ 1) * kBc * HD},
                                             {Kg, Vg}, kv, std::int64_t(tn) * kBc);
    }
    mma::cp_async_commit();
    const std::uint32_t k_a = sKa + buf * kBc * HD * sizeof(T);
    const std::uint32_t v_a = sVa + buf * kBc * HD * sizeof(T);

    // Per-element mask of a partial tile as bits (one per score this thread holds), worked
    // out before the score accumulators are live so the position arithmetic costs no spills.
    const bool masked = kind(t) == 1;
    std::uint32_t allowed[MT];
    if (masked) {
      const std::int64_t kbase = std::int64_t(t) * kBc;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        allowed[mt] = 0u;
        const std::int64_t qpos0 = qv.pos(q0 + wrow + mt * 16 + g);
        const std::int64_t qpos1 = qv.pos(q0 + wrow + mt * 16 + g + 8);
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const std::int64_t kj = kbase + nt * 8 + 2 * tq + (e & 1);
            const bool ok = kj < kv.count && view_allows(pat, (e >> 1) ? qpos1 : qpos0, kv.pos(kj));
            allowed[mt] |= std::uint32_t(ok) << ((e >> 1) * (kBc / 4) + nt * 2 + (e & 1));
          }
      }
    }

    float s[MT][kBc / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBc / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
    auto load_q = [&](std::uint32_t(&qa)[MT][4], std::uint32_t q_a, int kk) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[mt][e] = qf[mt][kk][e];
        } else {
          mma::ldmatrix_x4(qa[mt], q_a + mma::kstep(q_off, kk) + mt * kRows16);
        }
      }
    };
    auto load_k = [&](std::uint32_t(&b)[4], int kk, int np) {
      mma::ldmatrix_x4(b, k_a + mma::kstep(k_off, kk) + np * kRows16);
    };
    if constexpr (!QREG && !DIL) {
      // Software-pipelined S = Q K^T over the flattened (k-step, key group) loop, fully
      // unrolled, one step of lookahead: the next K fragments (a ring of two) and the next
      // k-step's Q fragments are read from shared memory while the current mma run, so the
      // ldmatrix latency is hidden (+5 % over the rolled loop, docs/gpu-kernels.md);
      // mma::opaque keeps the tile-invariant Q loads inside the key loop. Dilated blocks keep
      // the rolled loop: the row views leave no registers for the lookahead.
      const std::uint32_t q_s = mma::opaque(sQa);
      constexpr int kNp = kBc / 16, kSteps = HD / 16 * kNp;
      std::uint32_t qa[2][MT][4], kb[2][4];
      load_q(qa[0], q_s, 0);
      load_k(kb[0], 0, 0);
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        const int kk = st / kNp, np = st % kNp;
        if (np == 0 && kk + 1 < HD / 16) load_q(qa[(kk + 1) & 1], q_s, kk + 1);
        if (st + 1 < kSteps) load_k(kb[(st + 1) & 1], (st + 1) / kNp, (st + 1) % kNp);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Op::run(s[mt][2 * np], qa[kk & 1][mt], kb[st & 1][0], kb[st & 1][1]);
          Op::run(s[mt][2 * np + 1], qa[kk & 1][mt], kb[st & 1][2], kb[st & 1][3]);
        }
      }
    } else {
      // With Q in shared memory this k-loop stays rolled: unrolled, the compiler hoists every
      // Q fragment load to the top and runs out of registers.
#pragma unroll QREG ? HD / 16 : 1
      for (int kk = 0; kk < HD / 16; ++kk) {
        std::uint32_t qa[MT][4];
        load_q(qa, sQa, kk);
#pragma unroll
        for (int np = 0; np < kBc / 16; ++np) {
          std::uint32_t b[4];
          load_k(b, kk, np);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Op::run(s[mt][2 * np], qa[mt], b[0], b[1]);
            Op::run(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
          }
        }
      }
    }

    if (masked) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (!(allowed[mt] >> ((e >> 1) * (kBc / 4) + nt * 2 + (e & 1)) & 1u))
              s[mt][nt][e] = -INFINITY;
    }

    // Online softmax in the exp2 domain of the scaled scores.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt)
          mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(row_max[mt][h], mx * sl2);
        const float m_use = (m_new == -INFINITY) ? 0.f : m_new;
        const float corr = mma::fast_exp2(row_max[mt][h] - m_use);
        row_max[mt][h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
          s[mt][nt][2 * h] = mma::fast_exp2(s[mt][nt][2 * h] * sl2 - m_use);
          s[mt][nt][2 * h + 1] = mma::fast_exp2(s[mt][nt][2 * h + 1] * sl2 - m_use);
          sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
        }
        row_sum[mt][h] = row_sum[mt][h] * corr + sum;
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt) {
          o[mt][dt][2 * h] *= corr;
          o[mt][dt][2 * h + 1] *= corr;
        }
      }

      // O += P V
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma::c_to_a<T>(a[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, v_a + kk * kRows16 + mma::kstep(v_off, dp));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Op::run(o[mt][2 * dp], a[mt], b[0], b[1]);
          Op::run(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
        }
      }
    }
    t = tn;
    buf ^= 1;
  }

  // Epilogue: fused log-sum-exp merge into the running accumulators.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const std::int64_t qi = q0 + wrow + mt * 16 + g + 8 * h;
      const bool valid = qi < qv.count && l > 0.f;
      const std::int64_t grow = std::int64_t(bh) * p.q_rows + (valid ? qv.row(qi) : 0);
      float ln = 0.f;
      if (valid) {
        const float lb = (row_max[mt][h] + log2f(l)) * kLn2;
        const float lo = p.lse[grow];
        ln = log_add_exp(lo, lb);
        const float wo = (lo == -INFINITY) ? 0.f : __expf(lo - ln);
        const float wb = __expf(lb - ln) / l;
        float* orow = p.out + grow * HD;
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt) {
          float2* dst = reinterpret_cast<float2*>(orow + dt * 8 + 2 * tq);
          float2 old = *dst;
          old.x = old.x * wo + o[mt][dt][2 * h] * wb;
          old.y = old.y * wo + o[mt][dt][2 * h + 1] * wb;
          *dst = old;
        }
      }
      __syncwarp();  // every lane of the quad has read the old lse
      if (valid && tq == 0) p.lse[grow] = ln;
    }
}

template <typename T, int HD, int WARPS, int MT, int BC, bool QREG, bool DIL>
void launch_fwd_as(const ForwardBlock& b, cudaStream_t stream) {
  using Tr = FwdTraits<T, HD, WARPS, MT, BC, QREG>;
  static bool configured = false;  // the attribute is per function; set it once
  if (!configured) {
    RBK_CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<T, HD, WARPS, MT, BC, QREG, DIL>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(Tr::kSmem)));
    configured = true;
  }
  const FlashParams p = make_params(b);
  const dim3 grid(unsigned((b.q.count + Tr::kBr - 1) / Tr::kBr),
                  unsigned(b.dims.batch * b.dims.heads));
  flash_fwd_kernel<T, HD, WARPS, MT, BC, QREG, DIL><<<grid, Tr::kThreads, Tr::kSmem, stream>>>(p);
  RBK_LAUNCH_CHECK();
}

template <typename T, int HD, int WARPS, int MT, int BC, bool QREG>
void launch_fwd(const ForwardBlock& b, cudaStream_t stream) {
  if (b.pattern.segment > 0)
    launch_fwd_as<T, HD, WARPS, MT, BC, QREG, true>(b, stream);
  else
    launch_fwd_as<T, HD, WARPS, MT, BC, QREG, false>(b, stream);
}

}  // namespace

void flash_forward(const ForwardBlock& b, cudaStream_t stream, FlashTile tile) {
  if (b.q.count <= 0 || b.kv.count <= 0) return;
  if (!flash_tensor_core_supported(b.dtype, b.dims.head_dim)) {
    simple_forward(b, stream);
    return;
  }
  // Shapes as warps x m-tiles, keys per tile, Q in registers or shared memory (the flash
  // row's tile variants). Defaults (measured best on H200, docs/gpu-kernels.md): 4 warps x 2
  // m-tiles, 64 keys; Q in shared memory at head dim 128, in registers at 64.
  using F = FlashTile::Fwd;
  if (b.dtype == DType::BF16) {
    if (b.dims.head_dim == 128) {
      switch (tile.fwd) {
        case F::W4M1K64QReg:
          launch_fwd<__nv_bfloat16, 128, 4, 1, 64, true>(b, stream);
          break;
        case F::W4M2K32:
          launch_fwd<__nv_bfloat16, 128, 4, 2, 32, false>(b, stream);
          break;
        case F::W8M1K64QReg:
          launch_fwd<__nv_bfloat16, 128, 8, 1, 64, true>(b, stream);
          break;
        case F::W8M2K32:
          launch_fwd<__nv_bfloat16, 128, 8, 2, 32, false>(b, stream);
          break;
        default:
          launch_fwd<__nv_bfloat16, 128, 4, 2, 64, false>(b, stream);
          break;
      }
    } else if (tile.fwd == F::W4M1K64QReg) {
      launch_fwd<__nv_bfloat16, 64, 4, 1, 64, true>(b, stream);
    } else {
      launch_fwd<__nv_bfloat16, 64, 4, 2, 64, true>(b, stream);
    }
  } else {
    if (b.dims.head_dim == 128)
      launch_fwd<__half, 128, 4, 2, 64, false>(b, stream);
    else
      launch_fwd<__half, 64, 4, 2, 64, true>(b, stream);
  }
}

}  // namespace rb::attn::gpu
