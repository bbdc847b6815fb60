// Buffers, streams, event timing, collective data fill/check kernels and copy bandwidth
// for the profiling sweeps.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "check.hpp"
#include "cuda/profiling/profiling_cuda.hpp"

namespace rb::prof::cuda {
namespace {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    int dev = -1;
    cudaGetDevice(&dev);
    throw std::runtime_error(std::string("CUDA call ") + call + " failed on device " +
                             std::to_string(dev) + ": " + cudaGetErrorString(e));
  }
}
#define PROF_CUDA(call) check((call), #call)

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

__global__ void fill_kernel(void* dev, std::size_t count, DType t, int rank) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(dev, i, t, input_value(rank, i));
}

__global__ void check_kernel(const void* dev, std::size_t count, DType t, Expectation e,
                             unsigned long long* wrong) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    if (!matches(t, load(dev, i, t), expected_value(e, i), e.nranks)) ++local;
  if (local) atomicAdd(wrong, local);
}

int grid_for(std::size_t count) {
  const std::size_t blocks = (count + 255) / 256;
  return static_cast<int>(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

}  // namespace

// Memory that cannot be had is an out-of-memory point of the sweep (sweeps/oom_point.hpp), not a
// failed run: attn::OutOfMemory with what was asked and what the device had free.
DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) attn::gpu::check_allocation(cudaMalloc(&p_, bytes), bytes, "cudaMalloc", "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Stream::Stream() {
  cudaStream_t s;
  PROF_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  s_ = s;
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(as_stream(s_));
}
void Stream::synchronize() const {
  PROF_CUDA(cudaStreamSynchronize(as_stream(s_)));
}

EventTimeline::EventTimeline(std::size_t count, void* stream)
    : events_(count, nullptr), stream_(stream) {
  for (auto& e : events_) {
    cudaEvent_t ev;
    PROF_CUDA(cudaEventCreate(&ev));
    e = ev;
  }
}
EventTimeline::~EventTimeline() {
  for (void* e : events_)
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}
void EventTimeline::mark(std::size_t i) {
  PROF_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(events_.at(i)), as_stream(stream_)));
}
double EventTimeline::seconds(std::size_t from, std::size_t to) const {
  float ms = 0;
  PROF_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(events_.at(to))));
  PROF_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_.at(from)),
                                 static_cast<cudaEvent_t>(events_.at(to))));
  return static_cast<double>(ms) * 1e-3;
}

void fill_input(void* dev, std::size_t count, DType t, int rank, void* stream) {
  if (!count) return;
  fill_kernel<<<grid_for(count), 256, 0, as_stream(stream)>>>(dev, count, t, rank);
  PROF_CUDA(cudaGetLastError());
}

void fill_zero(void* dev, std::size_t bytes, void* stream) {
  if (bytes) PROF_CUDA(cudaMemsetAsync(dev, 0, bytes, as_stream(stream)));
}

std::size_t count_mismatches(const void* dev, std::size_t count, DType t, const Expectation& e,
                             void* stream) {
  if (!count) return 0;
  DeviceBuffer counter(sizeof(unsigned long long));
  PROF_CUDA(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), as_stream(stream)));
  check_kernel<<<grid_for(count), 256, 0, as_stream(stream)>>>(
      dev, count, t, e, static_cast<unsigned long long*>(counter.get()));
  PROF_CUDA(cudaGetLastError());
  unsigned long long wrong = 0;
  PROF_CUDA(cudaMemcpyAsync(&wrong, counter.get(), sizeof wrong, cudaMemcpyDeviceToHost,
                            as_stream(stream)));
  PROF_CUDA(cudaStreamSynchronize(as_stream(stream)));
  return static_cast<std::size_t>(wrong);
}

namespace {
// Pinned host memory (cudaMallocHost), freed on destruction.
struct PinnedHost {
  void* p = nullptr;
  explicit PinnedHost(std::size_t bytes) {
    attn::gpu::check_allocation(cudaMallocHost(&p, bytes), bytes, "cudaMallocHost",
                                "cudaMallocHost", false);
  }
  ~PinnedHost() {
    if (p) cudaFreeHost(p);
  }
};
// Pageable host memory, touched so first-touch page faults are not part of the copies.
struct PageableHost {
  void* p = nullptr;
  explicit PageableHost(std::size_t bytes) {
    p = std::malloc(bytes);
    if (!p)
      throw std::runtime_error("malloc of " + std::to_string(bytes) +
                               " bytes for a pageable copy failed");
    std::memset(p, 1, bytes);
  }
  ~PageableHost() { std::free(p); }
};
}  // namespace

std::vector<double> copy_seconds(const std::string& kind, std::size_t bytes, int warmup,
                                 int iterations, void* stream) {
  DeviceBuffer a(bytes);
  DeviceBuffer b;
  std::unique_ptr<PinnedHost> pinned;
  std::unique_ptr<PageableHost> pageable;
  void* dst = nullptr;
  const void* src = nullptr;
  cudaMemcpyKind dir = cudaMemcpyDeviceToDevice;
  if (kind == "d2d") {
    b = DeviceBuffer(bytes);
    PROF_CUDA(cudaMemsetAsync(b.get(), 1, bytes, as_stream(stream)));
    dst = a.get();
    src = b.get();
  } else {
    void* host = nullptr;
    if (kind == "h2d_pinned" || kind == "d2h_pinned") {
      pinned = std::make_unique<PinnedHost>(bytes);
      std::memset(pinned->p, 1, bytes);
      host = pinned->p;
    } else if (kind == "h2d_pageable" || kind == "d2h_pageable") {
      pageable = std::make_unique<PageableHost>(bytes);
      host = pageable->p;
    } else {
      throw std::invalid_argument("copy_seconds: unknown copy kind '" + kind + "'");
    }
    const bool h2d = kind.rfind("h2d", 0) == 0;
    dir = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    dst = h2d ? a.get() : host;
    src = h2d ? static_cast<const void*>(host) : a.get();
  }
  for (int i = 0; i < warmup; ++i)
    PROF_CUDA(cudaMemcpyAsync(dst, src, bytes, dir, as_stream(stream)));
  PROF_CUDA(cudaStreamSynchronize(as_stream(stream)));
  std::vector<double> out;
  if (pageable) {
    // Pageable copies are staged by the host inside the call, partly before anything reaches
    // the stream, so events would miss part of it: host clock around copy + sync instead.
    for (int i = 0; i < iterations; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      PROF_CUDA(cudaMemcpyAsync(dst, src, bytes, dir, as_stream(stream)));
      PROF_CUDA(cudaStreamSynchronize(as_stream(stream)));
      out.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return out;
  }
  EventTimeline tl(static_cast<std::size_t>(iterations) + 1, stream);
  tl.mark(0);
  for (int i = 0; i < iterations; ++i) {
    PROF_CUDA(cudaMemcpyAsync(dst, src, bytes, dir, as_stream(stream)));
    tl.mark(static_cast<std::size_t>(i) + 1);
  }
  PROF_CUDA(cudaStreamSynchronize(as_stream(stream)));
  for (int i = 0; i < iterations; ++i)
    out.push_back(tl.seconds(static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
  return out;
}

}  // namespace rb::prof::cuda
