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
    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
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

// One warp per row of the exchange, lanes over its elements: rows are contiguous on both sides
// (head_dim elements), so the loads and stores coalesce whatever the row map.
__global__ void head_chunks_kernel(HeadChunks c, HeadTensor t, bool to_chunks, std::int64_t rows) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t g = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5; g < rows; g += warps) {
    const HeadRowPlace at = head_row_place(c, t, g);
    for (std::int64_t i = lane; i < c.width; i += 32)
      if (to_chunks)
        store_from_float(at.chunk, c.wire, i, load_as_float(t.data, t.type, at.tensor_elem + i));
      else
        store_from_float(t.data, t.type, at.tensor_elem + i, load_as_float(at.chunk, c.wire, i));
  }
}

}  // namespace

void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks, cudaStream_t stream) {
  const std::int64_t rows = head_chunk_rows(c);
  if (rows <= 0) return;
  head_chunks_kernel<<<grid_for(rows * 32, 256), 256, 0, stream>>>(c, t, to_chunks, rows);
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
  const bool aligned = (reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % 16 == 0;
  const std::size_t n4 = aligned ? count / 4 : 0;
  const std::size_t done = n4 * 4, tail = count - done;
  const std::int64_t work = std::int64_t(n4 > tail ? n4 : tail);
  accumulate_kernel<<<grid_for(work, 256), 256, 0, stream>>>(
      reinterpret_cast<float4*>(dst), reinterpret_cast<const float4*>(src), n4, dst + done, src + done, tail);
  RBK_LAUNCH_CHECK();
}

void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                      int head_dim, DType dtype, cudaStream_t stream) {
  if (rows <= 0) return;
  const int threads = 256;
  const std::int64_t blocks = (rows * 32 + threads - 1) / threads;
  switch (dtype) {
    case DType::F32:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const float*>(dout), out, delta, rows, head_dim);
      break;
    case DType::F16:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __half*>(dout), out, delta, rows, head_dim);
      break;
    case DType::BF16:
      delta_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(dout), out, delta, rows, head_dim);
      break;
  }
  RBK_LAUNCH_CHECK();
}

void convert_from_float(void* dst, const float* src, std::size_t count, DType dtype, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = grid_for(std::int64_t(count), 256);
  switch (dtype) {
    case DType::F32:
      RBK_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::F16: convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(dst), src, count); break;
    case DType::BF16: convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), src, count); break;
  }
  RBK_LAUNCH_CHECK();
}

}  // namespace rb::attn::gpu
