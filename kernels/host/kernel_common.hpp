#pragma once
// Pieces the host kernel files share (private to kernels/host): storage-type tags, the
// vectorisable row dot product, which rows of the other span a launch index meets, and the
// per-row arithmetic both the fused and the materialized kernels do (the log-sum-exp merge,
// the backward's p and ds, the dK/dV sums).
#include <cstdint>
#include <string>

#include <Kokkos_Core.hpp>

#include "attention.hpp"
#include "dtype.hpp"
#include "mask.hpp"

namespace rb::attn::host {

using Exec = Kokkos::DefaultExecutionSpace;
using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

// The storage type is a template parameter so the fp32 inner loops are plain float loads
// the compiler can vectorise (a runtime dtype switch inside them is not hoisted).
struct F32Tag {
  KOKKOS_INLINE_FUNCTION static float ld(const void* p, std::int64_t i) {
    return static_cast<const float*>(p)[i];
  }
};
struct BF16Tag {
  KOKKOS_INLINE_FUNCTION static float ld(const void* p, std::int64_t i) {
    return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
};
struct F16Tag {
  KOKKOS_INLINE_FUNCTION static float ld(const void* p, std::int64_t i) {
    return half_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
};

template <class F>
void dispatch(DType t, F&& f) {
  with_dtype<F32Tag, F16Tag, BF16Tag>(t, f);
}

// Eight independent partial sums: without -ffast-math the compiler may not reorder a single
// running sum, and eight lanes let it use SIMD for the bulk of the head dimension.
template <class T>
KOKKOS_INLINE_FUNCTION float dot_row(const float* q, const void* k, std::int64_t base, int d) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int c = 0;
  for (; c + 8 <= d; c += 8)
    for (int j = 0; j < 8; ++j) lane[j] += q[c + j] * T::ld(k, base + c + j);
  float s =
      ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; c < d; ++c) s += q[c] * T::ld(k, base + c);
  return s;
}

// Thread idx of a launch over (batch * heads) x (rows of `own`): the global row it owns and
// the rows of `other` it meets under the pattern (relative to `other`).
struct RowWork {
  std::int64_t bh;    // flattened (batch, head)
  std::int64_t row;   // global row of the own span
  IndexRange others;  // rows of the other span
};
KOKKOS_INLINE_FUNCTION RowWork row_work(std::int64_t idx, const Span& own, std::int64_t own_rows,
                                        const Span& other, const Pattern& pat, int heads,
                                        bool own_are_queries) {
  const std::int64_t i = idx % own.count;
  const std::int64_t bh = idx / own.count;
  const int head = static_cast<int>(bh % heads);
  return RowWork{bh, bh * own_rows + own.row0 + i,
                 partners(own.position(i), other, pat, head, own_are_queries)};
}

// Row `at` of `data` times `scale`: a row this thread owns, kept in registers.
template <class T>
KOKKOS_INLINE_FUNCTION void load_row(float* x, const void* data, std::int64_t at, int d,
                                     float scale = 1.0f) {
  for (int c = 0; c < d; ++c) x[c] = T::ld(data, at * d + c) * scale;
}

// x += y over a row of d values: a thread's sums into the block's fp32 accumulators.
KOKKOS_INLINE_FUNCTION void add_row(float* x, const float* y, int d) {
  for (int c = 0; c < d; ++c) x[c] += y[c];
}

// A block's softmax of one query row (running max m, sum l, acc = sum of exp(s - m) V rows)
// merged by log-sum-exp into the row's output and LSE, which hold the earlier blocks'.
KOKKOS_INLINE_FUNCTION void merge_block(float* out, float* lse, std::int64_t row, int d,
                                        const float* acc, float m, float l) {
  namespace KE = Kokkos::Experimental;
  const float block_lse = m + KE::log(l);
  const float old = lse[row];
  const float hi = old > block_lse ? old : block_lse;
  const float merged = hi + KE::log(KE::exp(old - hi) + KE::exp(block_lse - hi));
  const float w_old = KE::exp(old - merged);  // 0 when old == -inf
  const float w_new = KE::exp(m - merged);    // = exp(block_lse - merged) / l
  float* o = out + row * d;
  for (int c = 0; c < d; ++c) o[c] = o[c] * w_old + acc[c] * w_new;
  lse[row] = merged;
}

// One (query, key) pair of the backward: the softmax probability p and the score gradient
// ds = p (dP - delta) scale. x, y: one side's rows (Q scaled and dO, or K scaled and V); row
// `at` of xs, ys: the other side's (K and V, or Q and dO).
struct PairGrad {
  float p, ds;
};
template <class T>
KOKKOS_INLINE_FUNCTION PairGrad pair_grad(const float* x, const float* y, const void* xs,
                                          const void* ys, std::int64_t at, int d, float lse,
                                          float delta, float scale) {
  const float p = Kokkos::Experimental::exp(dot_row<T>(x, xs, at * d, d) - lse);
  const float dp = dot_row<T>(y, ys, at * d, d);
  return {p, p * (dp - delta) * scale};
}

// A key row's dK += ds Q and dV += p dO from query row `qrow` of the block.
template <class T>
KOKKOS_INLINE_FUNCTION void add_query(const BackwardBlock& blk, std::int64_t qrow, int d,
                                      PairGrad g, float* dk, float* dv) {
  for (int c = 0; c < d; ++c) {
    dv[c] += g.p * T::ld(blk.dout, qrow * d + c);
    dk[c] += g.ds * T::ld(blk.q_data, qrow * d + c);
  }
}

void check_head_dim(int d, const char* where);

}  // namespace rb::attn::host
