#pragma once
// CUDA block-attention kernels behind the rb::attn block problem (attention.hpp).
// Plain C++ / CUDA runtime API only (no MPI, no ring interfaces) so the kernels, their
// benchmark and a standalone test build with plain nvcc on a GPU machine.
//
// Every function enqueues work on `stream` and never synchronises the host.
// Paths:
//   flash  - fused forward/backward on tensor cores (mma.sync m16n8k16, bf16/fp16, head dims
//            64 and 128); other dtypes / head dims go to a fused CUDA-core path ("simple").
//   naive  - cuBLAS GEMMs with a materialised fp32 score block, a mask+softmax kernel and a
//            fused log-sum-exp merge; the reference for parity and the tuning baseline.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "attention.hpp"
#include "backend.hpp"
#include "flash_tile.hpp"

namespace rb::attn::gpu {

// out = 0, lse = -inf for `rows` rows of width head_dim.
void init_forward(float* out, float* lse, std::int64_t rows, int head_dim, cudaStream_t stream);
// delta[r] = sum_d dout[r,d] * out[r,d].
void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                      int head_dim, DType dtype, cudaStream_t stream);

// dst[i] += src[i] for `count` fp32 values (the ring backward's partial dK/dV sums).
void accumulate(float* dst, const float* src, std::size_t count, cudaStream_t stream);
// backend.hpp's copy_head_chunks (the Ulysses all-to-all's packing, one launch per tensor).
void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks,
                      cudaStream_t stream);
// dst = src converted to `dtype` (count values; fp32 is a copy).
void convert_from_float(void* dst, const float* src, std::size_t count, DType dtype,
                        cudaStream_t stream);

// True when the tensor-core flash kernels handle this dtype and head dim at full speed (the
// flash row's full-speed range in kernels/kernel_paths.cpp).
bool flash_tensor_core_supported(DType dtype, int head_dim);

// A tile shape of the flash kernels (flash_tile.hpp): one of the flash row's tile variants
// (kernel_paths.cpp names them, gives each its shape and says which blocks each applies to;
// other blocks run the default shape).
using attn::FlashTile;

// Fused kernels; they take the tensor-core path when supported, the CUDA-core one otherwise.
// Head dims up to 256 are supported.
void flash_forward(const ForwardBlock& block, cudaStream_t stream, FlashTile tile = {});
void flash_backward(const BackwardBlock& block, cudaStream_t stream, FlashTile tile = {});
// The fused CUDA-core path alone (any dtype, head dim <= 256).
void simple_forward(const ForwardBlock& block, cudaStream_t stream);
void simple_backward(const BackwardBlock& block, cudaStream_t stream);
constexpr int kMaxHeadDim = 256;

// cuBLAS path. Holds a cuBLAS handle bound to `stream` and a scratch workspace (score block,
// probabilities, block output) obtained through `alloc`, grown on demand and capped at
// `workspace_budget` bytes: larger blocks are processed in chunks of query rows, so memory
// stays bounded by the budget, not by the block's rows squared.
class NaiveAttention {
 public:
  using Alloc = std::function<void*(std::size_t)>;
  using Free = std::function<void(void*)>;
  NaiveAttention(cudaStream_t stream, Alloc alloc, Free release,
                 std::size_t workspace_budget = std::size_t(512) << 20);
  ~NaiveAttention();
  NaiveAttention(const NaiveAttention&) = delete;
  NaiveAttention& operator=(const NaiveAttention&) = delete;

  void forward(const ForwardBlock& block);
  void backward(const BackwardBlock& block);
  std::size_t workspace_bytes() const { return ws_bytes_; }
  void release_workspace();

 private:
  void* workspace(std::size_t bytes);
  cudaStream_t stream_;
  Alloc alloc_;
  Free free_;
  std::size_t budget_;
  void* handle_ = nullptr;  // cublasHandle_t
  void* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
};

}  // namespace rb::attn::gpu
