#pragma once
// Tensor-core building blocks for the flash kernels (sm_80+ instructions, also the fast
// path on sm_90): cp.async 16-byte copies with zero fill, ldmatrix (plain and transposed),
// mma.sync m16n8k16 with fp32 accumulators, and an XOR swizzle of 16-byte chunks so that
// ldmatrix on [rows][64|128] tiles is free of bank conflicts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace rb::attn::gpu::mma {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (rows past the end of a span).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_size));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// The same from a shared-memory byte address (see swz_bytes / kstep below).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T>
struct MmaOp;
template <>
struct MmaOp<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&c)[4], const std::uint32_t (&a)[4],
                                             std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static std::uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
};
template <>
struct MmaOp<__half> {
  __device__ __forceinline__ static void run(float (&c)[4], const std::uint32_t (&a)[4],
                                             std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static std::uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
};

// 2^x on the special-function unit (ex2.approx.ftz: ~2 ulp, 2^-inf = +0), without the
// range fix-ups exp2f() carries; softmax probabilities in [0, 1] need nothing more.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Element offset of (row, 16-byte chunk) in a [rows][COLS] tile of 2-byte elements, chunks
// XOR-swizzled by row so the 8 rows an ldmatrix phase reads hit 8 different bank groups.
template <int COLS>
__host__ __device__ __forceinline__ int swz(int row, int chunk) {
  static_assert(COLS % 64 == 0, "swizzle needs at least 8 chunks per row");
  return row * COLS + ((chunk ^ (row & 7)) << 3);
}

// Byte offset of (row, chunk) in a swizzled [rows][COLS] tile. For a thread's ldmatrix row r
// and first chunk c0 in {0, 1}, the fragment at (r + 16*i, c0 + 2*k) lies at
// kstep(swz_bytes(r, c0), k) + i * 32 * COLS: the row & 7 phase is the same, and the even
// chunk step only flips the bits XOR-ed by the swizzle. Unrolled fragment loops thus cost one
// XOR per k-step and an immediate per row step, where the generic swz() cost ~3 integer
// instructions per ldmatrix.
template <int COLS>
__host__ __device__ __forceinline__ std::uint32_t swz_bytes(int row, int chunk) {
  return std::uint32_t(swz<COLS>(row, chunk)) * 2u;
}
__host__ __device__ __forceinline__ std::uint32_t kstep(std::uint32_t off, int k) {
  return off ^ (std::uint32_t(k) << 5);
}

// The address of a tile the compiler must not treat as loop-invariant: fragments of a tile
// that stays put across the key loop (Q in the forward) would otherwise be hoisted out of it
// and held in registers for the whole loop.
__device__ __forceinline__ std::uint32_t opaque(std::uint32_t addr) {
  asm volatile("" : "+r"(addr));
  return addr;
}

// a[4] from a C fragment pair (the m16n8 accumulators of n-tiles 2k and 2k+1) for the
// next product: the P (or dS) operand in registers, converted to 16-bit.
template <typename T>
__device__ __forceinline__ void c_to_a(std::uint32_t (&a)[4], const float (&c0)[4],
                                       const float (&c1)[4]) {
  a[0] = MmaOp<T>::pack(c0[0], c0[1]);
  a[1] = MmaOp<T>::pack(c0[2], c0[3]);
  a[2] = MmaOp<T>::pack(c1[0], c1[1]);
  a[3] = MmaOp<T>::pack(c1[2], c1[3]);
}

}  // namespace rb::attn::gpu::mma
