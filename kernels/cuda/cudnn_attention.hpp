#pragma once
// The `cudnn` kernel path: cuDNN's fused flash attention (SDPA), built as an operation graph
// through the cuDNN backend API, for one ring block pair at a time.
//
// cuDNN knows two masks (none, top-left causal) and writes a 16-bit block output with its
// softmax statistics; ringbench's blocks carry global positions and merge into fp32 running
// accumulators. So each block is split into library calls (sdpa_split.hpp: a dilated branch
// becomes one strided call group per head offset and segment), every call's (O_b, lse_b) is
// merged by log-sum-exp, and the backward's 16-bit dQ/dK/dV are added to the fp32 gradient
// accumulators. fp32 data, head dims cuDNN does not take, causal spans with unequal
// position strides and dilated shapes a cuDNN release refuses go to the flash kernels;
// fallback_blocks() counts them.
//
// Plain CUDA runtime + cuDNN (no MPI): built only when CMake finds cuDNN
// (RINGBENCH_HAVE_CUDNN).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "attention.hpp"

namespace rb::attn::gpu {

class CudnnAttention {
 public:
  using Alloc = std::function<void*(std::size_t)>;
  using Free = std::function<void(void*)>;
  CudnnAttention(cudaStream_t stream, Alloc alloc, Free release);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // True when cuDNN takes this dtype and head dim (bf16/fp16, head dim a multiple of 8 up
  // to 128): other blocks fall back to the flash kernels.
  static bool supports(DType dtype, int head_dim);

  void forward(const ForwardBlock& block);
  // cuDNN's backward recomputes rowsum(dO * O) itself, so it needs the final output in the
  // data type ([batch][heads][q_rows][head_dim], the layout of `dout`), not `delta`.
  void backward(const BackwardBlock& block, const void* out_data);

  // Blocks handed to the flash kernels because cuDNN could not take them.
  std::int64_t fallback_blocks() const { return fallbacks_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t fallbacks_ = 0;
};

// The cuDNN library loaded at run time, e.g. "9.1.0" (cudnnGetProperty).
std::string cudnn_version_text();

}  // namespace rb::attn::gpu
