#pragma once
// Host-callable CUDA parts of the profiling sweeps (kernels/cuda/profiling/*). Only declared
// when RINGBENCH_HAVE_CUDA; no CUDA headers here: streams are passed as void* (cudaStream_t).
// Errors are std::runtime_error naming the call and the CUDA/cuBLAS error.
#ifdef RINGBENCH_HAVE_CUDA
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cuda/profiling/pattern.hpp"

namespace rb::prof::cuda {

// Device memory (cudaMalloc), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking CUDA stream, destroyed on destruction.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return s_; }
  void synchronize() const;

 private:
  void* s_ = nullptr;
};

// Events recorded on a stream between operations: mark(i) records event i; after
// synchronize(), seconds(i, j) is the device time between them.
class EventTimeline {
 public:
  EventTimeline(std::size_t count, void* stream);
  ~EventTimeline();
  EventTimeline(const EventTimeline&) = delete;
  EventTimeline& operator=(const EventTimeline&) = delete;
  void mark(std::size_t i);
  double seconds(std::size_t from, std::size_t to) const;

 private:
  std::vector<void*> events_;
  void* stream_;
};

// Collective data (pattern.hpp) on the device: input of `rank`, and the number of output
// elements that differ from the expectation. Both run on `stream`; count_mismatches syncs it.
void fill_input(void* dev, std::size_t count, DType t, int rank, void* stream);
void fill_zero(void* dev, std::size_t bytes, void* stream);
std::size_t count_mismatches(const void* dev, std::size_t count, DType t, const Expectation& e,
                             void* stream);

// Matrix multiply C = A * B (M x K times K x N, column-major, all in `type`) through cuBLASLt.
// type: "bfloat16", "float16" (fp32 accumulate), "tf32" (fp32 data, TF32 tensor cores),
// "float32", "float64". Returns per-call seconds for `iterations` calls after `warmup`.
std::vector<double> gemm_seconds(const std::string& type, int m, int n, int k, int warmup,
                                 int iterations, void* stream);

// Copy bandwidth: per-copy seconds of `iterations` copies of `bytes` after `warmup`.
// kind: "d2d" (device to device, HBM), "h2d_pinned", "d2h_pinned", "h2d_pageable",
// "d2h_pageable".
std::vector<double> copy_seconds(const std::string& kind, std::size_t bytes, int warmup,
                                 int iterations, void* stream);

}  // namespace rb::prof::cuda
#endif
