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

template <class T>
void forward_impl(const ForwardBlock& blk) {
  const std::int64_t n = static_cast<std::int64_t>(blk.dims.batch) * blk.dims.heads * blk.q.count;
  Kokkos::parallel_for(
      "rb::attn::host::forward", Policy(0, n), KOKKOS_LAMBDA(std::int64_t idx) {
        namespace KE = Kokkos::Experimental;
        const int d = blk.dims.head_dim;
        const RowWork w =
            row_work(idx, blk.q, blk.dims.q_rows, blk.kv, blk.pattern, blk.dims.heads, true);
        const IndexRange& keys = w.others;
        if (keys.count() == 0) return;
        const std::int64_t bh = w.bh, qrow = w.row;
        float q[kMaxHeadDim], acc[kMaxHeadDim];
        for (int c = 0; c < d; ++c) {
          q[c] = T::ld(blk.q_data, qrow * d + c) * blk.scale;
          acc[c] = 0.0f;
        }
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
        const float block_lse = m + KE::log(l);
        const float old = blk.lse[qrow];
        const float hi = old > block_lse ? old : block_lse;
        const float merged = hi + KE::log(KE::exp(old - hi) + KE::exp(block_lse - hi));
        const float w_old = KE::exp(old - merged);  // 0 when old == -inf
        const float w_new = KE::exp(m - merged);    // = exp(block_lse - merged) / l
        float* o = blk.out + qrow * d;
        for (int c = 0; c < d; ++c) o[c] = o[c] * w_old + acc[c] * w_new;
        blk.lse[qrow] = merged;
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
  const std::int64_t bh_count = static_cast<std::int64_t>(blk.dims.batch) * blk.dims.heads;
  const BackwardBlock& b = blk;

  // dQ: one thread per query row.
  Kokkos::parallel_for(
      "rb::attn::host::backward_dq", Policy(0, bh_count * b.q.count),
      KOKKOS_LAMBDA(std::int64_t idx) {
        namespace KE = Kokkos::Experimental;
        const int d = blk.dims.head_dim;
        const RowWork w =
            row_work(idx, blk.q, blk.dims.q_rows, blk.kv, blk.pattern, blk.dims.heads, true);
        const IndexRange& keys = w.others;
        if (keys.count() == 0) return;
        const std::int64_t bh = w.bh, qrow = w.row;
        float q[kMaxHeadDim], g[kMaxHeadDim], dq[kMaxHeadDim];
        for (int c = 0; c < d; ++c) {
          q[c] = T::ld(blk.q_data, qrow * d + c) * blk.scale;
          g[c] = T::ld(blk.dout, qrow * d + c);
          dq[c] = 0.0f;
        }
        const float lse = blk.lse[qrow], delta = blk.delta[qrow];
        for (std::int64_t j = keys.begin; j < keys.end; j += keys.step) {
          const std::int64_t krow = bh * blk.dims.kv_rows + blk.kv.row0 + j;
          const float p = KE::exp(dot_row<T>(q, blk.k_data, krow * d, d) - lse);
          const float dp = dot_row<T>(g, blk.v_data, krow * d, d);
          const float ds = p * (dp - delta) * blk.scale;
          for (int c = 0; c < d; ++c) dq[c] += ds * T::ld(blk.k_data, krow * d + c);
        }
        float* out = blk.dq + qrow * d;
        for (int c = 0; c < d; ++c) out[c] += dq[c];
      });

  // dK, dV: one thread per key row, walking the queries that attend to it.
  Kokkos::parallel_for(
      "rb::attn::host::backward_dkv", Policy(0, bh_count * b.kv.count),
      KOKKOS_LAMBDA(std::int64_t idx) {
        namespace KE = Kokkos::Experimental;
        const int d = blk.dims.head_dim;
        const RowWork w =
            row_work(idx, blk.kv, blk.dims.kv_rows, blk.q, blk.pattern, blk.dims.heads, false);
        const IndexRange& queries = w.others;
        if (queries.count() == 0) return;
        const std::int64_t bh = w.bh, krow = w.row;
        float k[kMaxHeadDim], v[kMaxHeadDim], dk[kMaxHeadDim], dv[kMaxHeadDim];
        for (int c = 0; c < d; ++c) {
          k[c] = T::ld(blk.k_data, krow * d + c) * blk.scale;
          v[c] = T::ld(blk.v_data, krow * d + c);
          dk[c] = 0.0f;
          dv[c] = 0.0f;
        }
        for (std::int64_t i = queries.begin; i < queries.end; i += queries.step) {
          const std::int64_t qrow = bh * blk.dims.q_rows + blk.q.row0 + i;
          const float p = KE::exp(dot_row<T>(k, blk.q_data, qrow * d, d) - blk.lse[qrow]);
          const float dp = dot_row<T>(v, blk.dout, qrow * d, d);
          const float ds = p * (dp - blk.delta[qrow]) * blk.scale;
          for (int c = 0; c < d; ++c) {
            dv[c] += p * T::ld(blk.dout, qrow * d + c);
            dk[c] += ds * T::ld(blk.q_data, qrow * d + c);
          }
        }
        float* dko = blk.dk + krow * d;
        float* dvo = blk.dv + krow * d;
        for (int c = 0; c < d; ++c) {
          dko[c] += dk[c];
          dvo[c] += dv[c];
        }
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
