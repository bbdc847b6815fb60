// Accumulator initialisation, the backward's delta = rowsum(dO * O), gradient sums and
// fp32 -> data type conversion.
#include <cmath>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "common.cuh"
#include "head_chunks.hpp"

namespace rb::attn::gpu {
namespace {

__global__ void init_forward_kernel(float* out, float* lse, std::int64_t rows, int head_dim) {
  const std::int64_t n = rows * head_dim;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    out[i] = 0.f;
    if (i < rows) lse[i] = -INFINITY;
  }
}

// One warp per row.
template <typename T>
__global__ void delta_kernel(const T* __restrict__ dout, const float* __restrict__ out,
                             float* __restrict__ delta, std::int64_t rows, int head_dim) {
  const int lane = threadIdx.x & 31;
  const std::int64_t row = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5;
  if (row >= rows) return;
  const T* d = dout + row * head_dim;
  const float* o = out + row * head_dim;
  float acc = 0.f;
  for (int c = lane; c < head_dim; c += 32) acc += to_float(d[c]) * o[c];
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) delta[row] = acc;
}

__global__ void accumulate_kernel(float4* __restrict__ dst, const float4* __restrict__ src,
                                  std::size_t n4, float* __restrict__ dst1,
                                  const float* __restrict__ src1, std::size_t tail) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    float4 a = dst[i];
    const float4 b = src[i];
    a.x += b.x;
    a.y += b.y;
    a.z += b.z;
    a.w += b.w;
    dst[i] = a;
  }
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < tail; i += stride)
    dst1[i] += src1[i];
}

template <typename T>
__global__ void convert_kernel(T* __restrict__ dst, const float* __restrict__ src, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(src[i]);
}

// The general case (LSE's rows of one value, odd widths): one warp per row of the exchange,
// lanes over its elements.
__global__ void head_chunks_kernel(HeadChunks c, HeadTensor t, bool to_chunks, std::int64_t rows) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t g = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5; g < rows;
       g += warps)
    copy_head_row(c, t, g, to_chunks, lane, 32);
}

// 8 elements of T through 16-byte words (one word for 16-bit types, two for fp32).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&f)[8]) {
  constexpr int kWords = int(sizeof(T)) * 8 / 16;
  uint4 w[kWords];
#pragma unroll
  for (int k = 0; k < kWords; ++k) w[k] = reinterpret_cast<const uint4*>(p)[k];
  const T* e = reinterpret_cast<const T*>(w);
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = to_float(e[j]);
}
template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&f)[8]) {
  constexpr int kWords = int(sizeof(T)) * 8 / 16;
  uint4 w[kWords];
  T* e = reinterpret_cast<T*>(w);
#pragma unroll
  for (int j = 0; j < 8; ++j) e[j] = from_float<T>(f[j]);
#pragma unroll
  for (int k = 0; k < kWords; ++k) reinterpret_cast<uint4*>(p)[k] = w[k];
}

// Rows of head_dim elements (a multiple of 8): blockIdx.y is the (member, batch, head) of a
// chunk's slice, so the only per-thread index work is one 32-bit division for (row, vector),
// and every access is 16 bytes (a warp moves whole rows).
template <typename TT, typename WT>
__global__ void head_chunks_vec_kernel(HeadChunks c, HeadTensor t, bool to_chunks) {
  const unsigned V = unsigned(c.width / 8), slice = blockIdx.y;
  const unsigned h = slice % unsigned(c.local_heads), mb = slice / unsigned(c.local_heads);
  const unsigned b = mb % unsigned(c.batch), m = mb / unsigned(c.batch);
  const std::int64_t n = c.shard_rows, bh = std::int64_t(b) * c.local_heads + h;
  WT* chunk =
      reinterpret_cast<WT*>(c.data + std::size_t(m) * c.chunk_bytes + c.offset) + bh * n * c.width;
  const std::int64_t* joint = t.joint_row ? t.joint_row + std::int64_t(m) * n : nullptr;
  const std::int64_t shard_row0 =
      ((std::int64_t(b) * c.members + m) * head_chunk_member_heads(c) + c.head0 + h) * n;
  const unsigned total = unsigned(n) * V;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const unsigned r = i / V, v = i % V;
    const std::int64_t row = joint ? bh * t.joint_rows + joint[r] : shard_row0 + r;
    TT* tensor = reinterpret_cast<TT*>(t.data) + row * c.width + v * 8;
    WT* wire = chunk + std::int64_t(r) * c.width + v * 8;
    float f[8];
    if (to_chunks) {
      load8(tensor, f);
      store8(wire, f);
    } else {
      load8(wire, f);
      store8(tensor, f);
    }
  }
}

// The vector kernel's conditions: whole 16-byte vectors at 16-byte aligned rows, 32-bit
// indices within a slice, the slices within a grid's y.
bool head_chunks_vectorizable(const HeadChunks& c, const HeadTensor& t) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const std::int64_t slices = std::int64_t(c.members) * c.batch * c.local_heads;
  return c.width % 8 == 0 && aligned(c.data + c.offset) && aligned(t.data) &&
         c.chunk_bytes % 16 == 0 && c.shard_rows * (c.width / 8) < (std::int64_t(1) << 31) &&
         slices <= 65535;
}

}  // namespace

void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks,
                      cudaStream_t stream) {
  const std::int64_t rows = head_chunk_rows(c);
  if (rows <= 0) return;
  if (!head_chunks_vectorizable(c, t)) {
    head_chunks_kernel<<<grid_for(rows * 32, 256), 256, 0, stream>>>(c, t, to_chunks, rows);
    RBK_LAUNCH_CHECK();
    return;
  }
  const dim3 grid(grid_for(c.shard_rows * (c.width / 8), 256),
                  unsigned(c.members * c.batch * c.local_heads));
  with_storage_type(t.type, [&](auto tensor_type) {
    with_storage_type(c.wire, [&](auto wire_type) {
      head_chunks_vec_kernel<decltype(tensor_type), decltype(wire_type)>
          <<<grid, 256, 0, stream>>>(c, t, to_chunks);
    });
  });
  RBK_LAUNCH_CHECK();
}

void init_forward(float* out, float* lse, std::int64_t rows, int head_dim, cudaStream_t stream) {
  if (rows <= 0) return;
  init_forward_kernel<<<grid_for(rows * head_dim, 256), 256, 0, stream>>>(out, lse, rows, head_dim);
  RBK_LAUNCH_CHECK();
}

void accumulate(float* dst, const float* src, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  // Vector loads need 16-byte alignment of both pointers; otherwise go scalar.
  const bool aligned =
      (reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % 16 == 0;
  const std::size_t n4 = aligned ? count / 4 : 0;
  const std::size_t done = n4 * 4, tail = count - done;
  const std::int64_t work = std::int64_t(n4 > tail ? n4 : tail);
  accumulate_kernel<<<grid_for(work, 256), 256, 0, stream>>>(reinterpret_cast<float4*>(dst),
                                                             reinterpret_cast<const float4*>(src),
                                                             n4, dst + done, src + done, tail);
  RBK_LAUNCH_CHECK();
}

void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                      int head_dim, DType dtype, cudaStream_t stream) {
  if (rows <= 0) return;
  const int threads = 256;
  const std::int64_t blocks = (rows * 32 + threads - 1) / threads;
  switch (dtype) {
    case DType::F32:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const float*>(dout), out, delta,
                                                   rows, head_dim);
      break;
    case DType::F16:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __half*>(dout), out, delta,
                                                   rows, head_dim);
      break;
    case DType::BF16:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(dout), out,
                                                   delta, rows, head_dim);
      break;
  }
  RBK_LAUNCH_CHECK();
}

void convert_from_float(void* dst, const float* src, std::size_t count, DType dtype,
                        cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = grid_for(std::int64_t(count), 256);
  switch (dtype) {
    case DType::F32:
      RBK_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::F16:
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(dst), src, count);
      break;
    case DType::BF16:
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), src, count);
      break;
  }
  RBK_LAUNCH_CHECK();
}

}  // namespace rb::attn::gpu
