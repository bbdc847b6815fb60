#pragma once
// Pieces the host kernel files share (private to kernels/host): storage-type tags, the
// vectorisable row dot product, and which rows of the other span a launch index meets.
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

void check_head_dim(int d, const char* where);

}  // namespace rb::attn::host
