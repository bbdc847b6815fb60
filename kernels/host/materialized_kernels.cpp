#include "host/materialized_kernels.hpp"

#include <algorithm>

#include "host/host_kernels.hpp"
#include "host/kernel_common.hpp"

namespace rb::attn::host {
namespace {

std::int64_t flat_q_rows(const Dims& dims, const Span& q) {
  return static_cast<std::int64_t>(dims.batch) * dims.heads * q.count;
}

std::size_t tile_floats(const Dims& dims, const Span& q, const Span& kv) {
  if (q.count == 0 || kv.count == 0) return 0;
  return static_cast<std::size_t>(std::min(kTileRows, flat_q_rows(dims, q)) * kv.count);
}

KOKKOS_INLINE_FUNCTION bool in_range(const IndexRange& r, std::int64_t j) {
  return j >= r.begin && j < r.end && (j - r.begin) % r.step == 0;
}

// The work of flattened query row r of a block (its head, row and partner key range).
template <class Block>
KOKKOS_INLINE_FUNCTION RowWork work_of(const Block& blk, std::int64_t r) {
  return row_work(r, blk.q, blk.dims.q_rows, blk.kv, blk.pattern, blk.dims.heads, true);
}

// Loads the scaled query row into q; returns the buffer row of key j of the same (batch, head).
template <class T, class Block>
KOKKOS_INLINE_FUNCTION std::int64_t load_query(const Block& blk, const RowWork& w, std::int64_t j,
                                               float* q) {
  load_row<T>(q, blk.q_data, w.row, blk.dims.head_dim, blk.scale);
  return w.bh * blk.dims.kv_rows + blk.kv.row0 + j;
}

// Runs attended(e, w, krow, q) for every element e = (query row r0 + e / kv, key e % kv) whose
// pair the pattern keeps (q: the scaled query row, krow: the key's buffer row), masked(e) else.
template <class T, class Block, class Attended, class Masked>
void for_each_pair(const char* label, const Block& blk, std::int64_t r0, std::int64_t r1,
                   Attended attended, Masked masked) {
  const std::int64_t kvc = blk.kv.count;
  Kokkos::parallel_for(
      label, Policy(0, (r1 - r0) * kvc), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t j = e % kvc;
        const RowWork w = work_of(blk, r0 + e / kvc);
        if (!in_range(w.others, j)) {
          masked(e);
          return;
        }
        float q[kMaxHeadDim];
        const std::int64_t krow = load_query<T>(blk, w, j, q);
        attended(e, w, krow, q);
      });
}

// Scores of the flattened query rows [r0, r1) against every key row: S[t][j], -inf where
// the pattern masks the pair (or the key is off the row's partner range).
template <class T>
void scores(const ForwardBlock& blk, std::int64_t r0, std::int64_t r1, float* S) {
  const int d = blk.dims.head_dim;
  for_each_pair<T>(
      "rb::attn::host::materialized_scores", blk, r0, r1,
      [=](std::int64_t e, const RowWork&, std::int64_t krow, const float* q) {
        S[e] = dot_row<T>(q, blk.k_data, krow * d, d);
      },
      [=](std::int64_t e) { S[e] = -Kokkos::Experimental::infinity<float>::value; });
}

// Softmax of each score row, P V, and the log-sum-exp merge into out/lse (as host_kernels).
template <class T>
void softmax_pv(const ForwardBlock& blk, std::int64_t r0, std::int64_t r1, const float* S) {
  const std::int64_t kvc = blk.kv.count;
  Kokkos::parallel_for(
      "rb::attn::host::materialized_softmax_pv", Policy(0, r1 - r0), KOKKOS_LAMBDA(std::int64_t t) {
        namespace KE = Kokkos::Experimental;
        const int d = blk.dims.head_dim;
        const RowWork w = work_of(blk, r0 + t);
        const IndexRange& keys = w.others;
        if (keys.count() == 0) return;
        const float* s = S + t * kvc;
        float m = -KE::infinity<float>::value;
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) m = s[j] > m ? s[j] : m;
        float acc[kMaxHeadDim];
        for (int c = 0; c < d; ++c) acc[c] = 0.0f;
        float l = 0.0f;
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) {
          const std::int64_t krow = w.bh * blk.dims.kv_rows + blk.kv.row0 + j;
          const float p = KE::exp(s[j] - m);
          l += p;
          for (int c = 0; c < d; ++c) acc[c] += p * T::ld(blk.v_data, krow * d + c);
        }
        merge_block(blk.out, blk.lse, w.row, d, acc, m, l);
      });
}

// P and dS = P (dP - delta) scale of the query rows [r0, r1) against every key row; 0 where
// masked, so the dK/dV pass may read whole columns.
template <class T>
void probabilities(const BackwardBlock& blk, std::int64_t r0, std::int64_t r1, float* P,
                   float* dS) {
  const int d = blk.dims.head_dim;
  for_each_pair<T>(
      "rb::attn::host::materialized_probabilities", blk, r0, r1,
      [=](std::int64_t e, const RowWork& w, std::int64_t krow, const float* q) {
        float g[kMaxHeadDim];
        load_row<T>(g, blk.dout, w.row, d);
        const PairGrad pg = pair_grad<T>(q, g, blk.k_data, blk.v_data, krow, d, blk.lse[w.row],
                                         blk.delta[w.row], blk.scale);
        P[e] = pg.p;
        dS[e] = pg.ds;
      },
      [=](std::int64_t e) {
        P[e] = 0.0f;
        dS[e] = 0.0f;
      });
}

template <class T>
void grad_q(const BackwardBlock& blk, std::int64_t r0, std::int64_t r1, const float* dS) {
  const std::int64_t kvc = blk.kv.count;
  Kokkos::parallel_for(
      "rb::attn::host::materialized_dq", Policy(0, r1 - r0), KOKKOS_LAMBDA(std::int64_t t) {
        const int d = blk.dims.head_dim;
        const RowWork w = work_of(blk, r0 + t);
        const IndexRange& keys = w.others;
        if (keys.count() == 0) return;
        float dq[kMaxHeadDim];
        for (int c = 0; c < d; ++c) dq[c] = 0.0f;
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) {
          const std::int64_t krow = w.bh * blk.dims.kv_rows + blk.kv.row0 + j;
          const float ds = dS[t * kvc + j];
          for (int c = 0; c < d; ++c) dq[c] += ds * T::ld(blk.k_data, krow * d + c);
        }
        add_row(blk.dq + w.row * d, dq, d);
      });
}

// dK, dV of every key row of the (batch, head)s the tile touches, from the tile's query rows
// that the mask pairs with it. One thread per key row: no atomics; tiles run one after another.
template <class T>
void grad_kv(const BackwardBlock& blk, std::int64_t r0, std::int64_t r1, const float* P,
             const float* dS) {
  const std::int64_t kvc = blk.kv.count, qc = blk.q.count;
  const std::int64_t bh0 = r0 / qc, bh1 = (r1 - 1) / qc + 1;
  Kokkos::parallel_for(
      "rb::attn::host::materialized_dkv", Policy(0, (bh1 - bh0) * kvc),
      KOKKOS_LAMBDA(std::int64_t e) {
        const int d = blk.dims.head_dim;
        const RowWork w = row_work(bh0 * kvc + e, blk.kv, blk.dims.kv_rows, blk.q, blk.pattern,
                                   blk.dims.heads, false);
        const IndexRange& queries = w.others;
        const std::int64_t j = e % kvc;
        // The tile's rows of this (batch, head), as indices into the q span.
        const std::int64_t lo = r0 > w.bh * qc ? r0 - w.bh * qc : 0;
        const std::int64_t hi = r1 < (w.bh + 1) * qc ? r1 - w.bh * qc : qc;
        if (queries.count() == 0 || lo >= hi) return;
        std::int64_t i = queries.begin;
        if (i < lo) i += (lo - i + queries.step - 1) / queries.step * queries.step;
        const std::int64_t end = queries.end < hi ? queries.end : hi;
        if (i >= end) return;
        float dk[kMaxHeadDim], dv[kMaxHeadDim];
        for (int c = 0; c < d; ++c) dk[c] = dv[c] = 0.0f;
        for (; i < end; i += queries.step) {
          const std::int64_t t = w.bh * qc + i - r0;
          const std::int64_t qrow = w.bh * blk.dims.q_rows + blk.q.row0 + i;
          add_query<T>(blk, qrow, d, {P[t * kvc + j], dS[t * kvc + j]}, dk, dv);
        }
        add_row(blk.dk + w.row * d, dk, d);
        add_row(blk.dv + w.row * d, dv, d);
      });
}

}  // namespace

std::size_t materialized_forward_scratch(const ForwardBlock& b) {
  return tile_floats(b.dims, b.q, b.kv);
}

std::size_t materialized_backward_scratch(const BackwardBlock& b) {
  return 2 * tile_floats(b.dims, b.q, b.kv);
}

void materialized_forward(const ForwardBlock& b, float* scratch) {
  check_head_dim(b.dims.head_dim, "host materialized forward");
  const std::int64_t rows = flat_q_rows(b.dims, b.q);
  if (rows == 0 || b.kv.count == 0) return;
  dispatch(b.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
      const std::int64_t r1 = std::min(rows, r0 + kTileRows);
      scores<T>(b, r0, r1, scratch);
      softmax_pv<T>(b, r0, r1, scratch);
    }
  });
}

void materialized_backward(const BackwardBlock& b, float* scratch) {
  check_head_dim(b.dims.head_dim, "host materialized backward");
  const std::int64_t rows = flat_q_rows(b.dims, b.q);
  if (rows == 0 || b.kv.count == 0) return;
  float* P = scratch;
  float* dS = scratch + tile_floats(b.dims, b.q, b.kv);
  dispatch(b.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
      const std::int64_t r1 = std::min(rows, r0 + kTileRows);
      probabilities<T>(b, r0, r1, P, dS);
      grad_q<T>(b, r0, r1, dS);
      grad_kv<T>(b, r0, r1, P, dS);
    }
  });
}

}  // namespace rb::attn::host
