#include "host/host_kernels.hpp"

#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include <Kokkos_Core.hpp>

#include "head_chunks.hpp"
#include "host/kernel_common.hpp"

namespace rb::attn::host {

void check_head_dim(int d, const char* where) {
  if (d < 1 || d > kMaxHeadDim)
    throw std::invalid_argument(std::string(where) + ": head_dim " + std::to_string(d) +
                                " outside the host kernels' range 1.." +
                                std::to_string(kMaxHeadDim));
}

std::size_t available_host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::size_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  Kokkos::parallel_for(
      "rb::attn::host::init_forward", Policy(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        lse[r] = neg_inf;
        for (int c = 0; c < head_dim; ++c) out[r * head_dim + c] = 0.0f;
      });
}

void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks) {
  Kokkos::parallel_for(
      "rb::attn::host::copy_head_chunks", Policy(0, head_chunk_rows(c)),
      KOKKOS_LAMBDA(std::int64_t g) { copy_head_row(c, t, g, to_chunks, 0, 1); });
}

namespace {

// One thread per query row (by_query) or key row of the block, over batch x heads; f(w) where
// the row meets any row of the other side (w.others) under the block's pattern.
template <class Block, class F>
void each_row(const char* label, const Block& blk, bool by_query, F f) {
  const Span& own = by_query ? blk.q : blk.kv;
  const Span& other = by_query ? blk.kv : blk.q;
  const std::int64_t own_rows = by_query ? blk.dims.q_rows : blk.dims.kv_rows;
  const int heads = blk.dims.heads;
  const Pattern pattern = blk.pattern;
  Kokkos::parallel_for(
      label, Policy(0, static_cast<std::int64_t>(blk.dims.batch) * heads * own.count),
      KOKKOS_LAMBDA(std::int64_t idx) {
        const RowWork w = row_work(idx, own, own_rows, other, pattern, heads, by_query);
        if (w.others.count() != 0) f(w);
      });
}

template <class T>
void forward_impl(const ForwardBlock& blk) {
  each_row(
      "rb::attn::host::forward", blk, true, KOKKOS_LAMBDA(const RowWork& w) {
        namespace KE = Kokkos::Experimental;
        const int d = blk.dims.head_dim;
        const IndexRange& keys = w.others;
        const std::int64_t bh = w.bh, qrow = w.row;
        float q[kMaxHeadDim], acc[kMaxHeadDim];
        load_row<T>(q, blk.q_data, qrow, d, blk.scale);
        for (int c = 0; c < d; ++c) acc[c] = 0.0f;
        float m = -KE::infinity<float>::value, l = 0.0f;
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) {
          const std::int64_t krow = bh * blk.dims.kv_rows + blk.kv.row0 + j;
          const float s = dot_row<T>(q, blk.k_data, krow * d, d);
          if (s > m) {
            const float corr = KE::exp(m - s);
            l *= corr;
            for (int c = 0; c < d; ++c) acc[c] *= corr;
            m = s;
          }
          const float p = KE::exp(s - m);
          l += p;
          for (int c = 0; c < d; ++c) acc[c] += p * T::ld(blk.v_data, krow * d + c);
        }
        merge_block(blk.out, blk.lse, qrow, d, acc, m, l);
      });
}

}  // namespace

void forward(const ForwardBlock& b) {
  check_head_dim(b.dims.head_dim, "host forward");
  if (static_cast<std::int64_t>(b.dims.batch) * b.dims.heads * b.q.count == 0 || b.kv.count == 0)
    return;
  dispatch(b.dtype, [&](auto tag) { forward_impl<decltype(tag)>(b); });
}

void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                      int head_dim, DType dtype) {
  Kokkos::parallel_for(
      "rb::attn::host::backward_prepare", Policy(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        float s = 0.0f;
        for (int c = 0; c < head_dim; ++c)
          s += load_as_float(dout, dtype, r * head_dim + c) * out[r * head_dim + c];
        delta[r] = s;
      });
}

namespace {

template <class T>
void backward_impl(const BackwardBlock& blk) {
  // dQ: one thread per query row.
  each_row(
      "rb::attn::host::backward_dq", blk, true, KOKKOS_LAMBDA(const RowWork& w) {
        const int d = blk.dims.head_dim;
        const IndexRange& keys = w.others;
        float q[kMaxHeadDim], g[kMaxHeadDim], dq[kMaxHeadDim];
        load_row<T>(q, blk.q_data, w.row, d, blk.scale);
        load_row<T>(g, blk.dout, w.row, d);
        for (int c = 0; c < d; ++c) dq[c] = 0.0f;
        const float lse = blk.lse[w.row], delta = blk.delta[w.row];
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) {
          const std::int64_t krow = w.bh * blk.dims.kv_rows + blk.kv.row0 + j;
          const PairGrad pg =
              pair_grad<T>(q, g, blk.k_data, blk.v_data, krow, d, lse, delta, blk.scale);
          for (int c = 0; c < d; ++c) dq[c] += pg.ds * T::ld(blk.k_data, krow * d + c);
        }
        add_row(blk.dq + w.row * d, dq, d);
      });

  // dK, dV: one thread per key row, walking the queries that attend to it.
  each_row(
      "rb::attn::host::backward_dkv", blk, false, KOKKOS_LAMBDA(const RowWork& w) {
        const int d = blk.dims.head_dim;
        const IndexRange& queries = w.others;
        float k[kMaxHeadDim], v[kMaxHeadDim], dk[kMaxHeadDim], dv[kMaxHeadDim];
        load_row<T>(k, blk.k_data, w.row, d, blk.scale);
        load_row<T>(v, blk.v_data, w.row, d);
        for (int c = 0; c < d; ++c) dk[c] = dv[c] = 0.0f;
        for (std::int64_t i = queries.begin; i < queries.end; i += queries.step) {
          const std::int64_t qrow = w.bh * blk.dims.q_rows + blk.q.row0 + i;
          add_query<T>(blk, qrow, d,
                       pair_grad<T>(k, v, blk.q_data, blk.dout, qrow, d, blk.lse[qrow],
                                    blk.delta[qrow], blk.scale),
                       dk, dv);
        }
        add_row(blk.dk + w.row * d, dk, d);
        add_row(blk.dv + w.row * d, dv, d);
      });
}

}  // namespace

void backward(const BackwardBlock& b) {
  check_head_dim(b.dims.head_dim, "host backward");
  if (static_cast<std::int64_t>(b.dims.batch) * b.dims.heads == 0 || b.q.count == 0 ||
      b.kv.count == 0)
    return;
  dispatch(b.dtype, [&](auto tag) { backward_impl<decltype(tag)>(b); });
}

void accumulate(float* dst, const float* src, std::int64_t count) {
  Kokkos::parallel_for(
      "rb::attn::host::accumulate", Policy(0, count),
      KOKKOS_LAMBDA(std::int64_t i) { dst[i] += src[i]; });
}

}  // namespace rb::attn::host
