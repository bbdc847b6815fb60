#include "host/host_kernels.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include <Kokkos_Core.hpp>

#include "dtype.hpp"
#include "host_device.hpp"
#include "mask.hpp"

namespace rb::attn::host {
namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

void check_head_dim(int d, const char* where) {
  if (d < 1 || d > kMaxHeadDim)
    throw std::invalid_argument(std::string(where) + ": head_dim " + std::to_string(d) +
                                " outside the host kernels' range 1.." +
                                std::to_string(kMaxHeadDim));
}

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

// Eight independent partial sums: without -ffast-math the compiler may not reorder a single
// running sum, and eight lanes let it use SIMD for the bulk of the head dimension.
template <class T>
KOKKOS_INLINE_FUNCTION float dot_row(const float* q, const void* k, std::int64_t base, int d) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int c = 0;
  for (; c + 8 <= d; c += 8)
    for (int j = 0; j < 8; ++j) lane[j] += q[c + j] * T::ld(k, base + c + j);
  float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
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

template <class F>
void dispatch(DType t, F&& f) {
  with_dtype<F32Tag, F16Tag, BF16Tag>(t, f);
}

}  // namespace

void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  Kokkos::parallel_for(
      "rb::attn::host::init_forward", Policy(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        lse[r] = neg_inf;
        for (int c = 0; c < head_dim; ++c) out[r * head_dim + c] = 0.0f;
      });
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
        const float w_old = KE::exp(old - merged);       // 0 when old == -inf
        const float w_new = KE::exp(m - merged);         // = exp(block_lse - merged) / l
        float* o = blk.out + qrow * d;
        for (int c = 0; c < d; ++c) o[c] = o[c] * w_old + acc[c] * w_new;
        blk.lse[qrow] = merged;
      });
}

}  // namespace

void forward(const ForwardBlock& b) {
  check_head_dim(b.dims.head_dim, "host forward");
  if (static_cast<std::int64_t>(b.dims.batch) * b.dims.heads * b.q.count == 0 || b.kv.count == 0) return;
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
  if (static_cast<std::int64_t>(b.dims.batch) * b.dims.heads == 0 || b.q.count == 0 || b.kv.count == 0) return;
  dispatch(b.dtype, [&](auto tag) { backward_impl<decltype(tag)>(b); });
}

void accumulate(float* dst, const float* src, std::int64_t count) {
  Kokkos::parallel_for(
      "rb::attn::host::accumulate", Policy(0, count),
      KOKKOS_LAMBDA(std::int64_t i) { dst[i] += src[i]; });
}

}  // namespace rb::attn::host
