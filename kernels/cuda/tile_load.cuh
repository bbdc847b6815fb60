#pragma once
// Global -> shared tile loads of the flash kernels: ROWS rows of a row view (common.cuh) into
// a swizzled [ROWS][HD] tile with cp.async, zero-filling rows past the view's end.
#include "common.cuh"
#include "mma.cuh"

namespace rb::attn::gpu {

// Each thread copies the same 16-byte chunk column of every (THREADS / chunks)-th row, so its
// swizzle phase (row & 7) is fixed and every copy after the first is one pointer increment:
// the loop is unrolled at compile time instead of re-deriving row, chunk, view row and swizzle
// per copy (that arithmetic, ~35 instructions per 16-byte copy, was a third of the forward
// kernel's instructions per key tile). N tensors with the same view (K and V, Q and dO) share
// the offsets.
template <typename T, int HD, int THREADS, int ROWS, int N>
__device__ __forceinline__ void load_rows(T* const (&smem)[N], const T* const (&base)[N],
                                          const RowView& v, std::int64_t j0) {
  constexpr int kChunks = HD / 8;
  static_assert(THREADS % kChunks == 0, "a pass covers whole rows");
  constexpr int kRowsPerPass = THREADS / kChunks;
  static_assert(kRowsPerPass % 8 == 0 && ROWS % kRowsPerPass == 0,
                "each thread keeps one swizzle phase and the passes cover the tile exactly");
  // The opaque thread index keeps the compiler from hoisting these per-thread offsets out of
  // the caller's key loop, where they would hold registers through the whole tile compute.
  int tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  const int c = tid % kChunks, r0 = tid / kChunks;
  const std::int64_t left = v.count - j0 - r0;  // view rows this thread's column may still read
  std::int64_t off = v.row(j0 + r0) * HD + c * 8;
  const std::int64_t inc = std::int64_t(kRowsPerPass) * v.step * HD;
  const int dst = mma::swz<HD>(r0, c);
#pragma unroll
  for (int i = 0; i < ROWS / kRowsPerPass; ++i) {
    const bool valid = i * kRowsPerPass < left;
#pragma unroll
    for (int n = 0; n < N; ++n)
      mma::cp_async16(smem[n] + dst + i * kRowsPerPass * HD, valid ? base[n] + off : base[n],
                      valid);
    off += inc;
  }
}

// One tensor's rows.
template <typename T, int HD, int THREADS, int ROWS>
__device__ __forceinline__ void load_rows(T* smem, const T* base, const RowView& v,
                                          std::int64_t j0) {
  load_rows<T, HD, THREADS, ROWS, 1>({smem}, {base}, v, j0);
}

}  // namespace rb::attn::gpu
