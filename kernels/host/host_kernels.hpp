#pragma once
// Kokkos block attention kernels over the default execution space (Serial / OpenMP / ...).
// Pointers must be accessible from that space (the host backend allocates them there).
#include <cstddef>
#include <cstdint>

#include "attention.hpp"
#include "backend.hpp"

namespace rb::attn::host {

// Per-thread fp32 row buffers are fixed-size arrays; larger head dims are rejected.
constexpr int kMaxHeadDim = 256;

void init_forward(float* out, float* lse, std::int64_t rows, int head_dim);
// Online softmax over the block, merged into out/lse by log-sum-exp. Parallel over
// (batch, head, query row).
void forward(const ForwardBlock& block);
void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                      int head_dim, DType dtype);
// Two passes without atomics: dQ parallel over query rows, dK/dV parallel over key rows.
void backward(const BackwardBlock& block);
void accumulate(float* dst, const float* src, std::int64_t count);
// backend.hpp's copy_head_chunks: parallel over the exchange's rows.
void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks);
// MemAvailable of /proc/meminfo (0 when unknown): the free bytes an OutOfMemory reports.
std::size_t available_host_memory();

}  // namespace rb::attn::host
