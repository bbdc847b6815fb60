#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

#include "attention_cuda.hpp"
#include "check.hpp"
#ifdef RINGBENCH_HAVE_CUDA
#include "ring/factory.hpp"  // declares make_cuda_backend (needs MPI: the full build only)
#endif

namespace rb::attn::gpu {

KernelPath parse_kernel_path(const std::string& name) {
  if (name == "flash") return KernelPath::Flash;
  if (name == "naive") return KernelPath::Naive;
  if (name == "auto") return KernelPath::Auto;
  if (name == "cudnn")
    throw std::runtime_error(
        "CUDA attention kernel 'cudnn' is not implemented in this build (the cuDNN fused "
        "attention path is not written yet); use kernel: flash, naive or auto");
  throw std::invalid_argument("unknown CUDA attention kernel '" + name +
                              "' (expected flash, cudnn, naive or auto)");
}

CudaBackend::CudaBackend(KernelPath path) : path_(path) {
  RBK_CUDA_CHECK(cudaGetDevice(&device_));
  RBK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: errors here are ignored, the process is tearing down.
  if (stream_) cudaStreamSynchronize(stream_);
  naive_.reset();
  for (auto& kv : sizes_) cudaFree(kv.first);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const { return path_ == KernelPath::Naive ? "naive" : "flash"; }

void* CudaBackend::allocate(std::size_t bytes) {
  if (bytes == 0) bytes = 1;  // distinct, releasable pointers for empty buffers
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the error so later calls do not report it
    std::size_t free_b = 0, total_b = 0;
    RBK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    throw ring::OutOfMemory(bytes, free_b,
                            "cudaMalloc on GPU " + std::to_string(device_) + " (" + name() +
                                " backend, " + std::to_string(current_) + " bytes already held)");
  }
  RBK_CUDA_CHECK(err);
  sizes_[p] = bytes;
  current_ += bytes;
  if (current_ > peak_) peak_ = current_;
  return p;
}

void CudaBackend::release(void* p) {
  if (!p) return;
  auto it = sizes_.find(p);
  if (it == sizes_.end())
    throw std::invalid_argument("CudaBackend::release: pointer not allocated by this backend");
  RBK_CUDA_CHECK(cudaFree(p));  // synchronises the device: work still using p has finished
  current_ -= it->second;
  sizes_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // The caller may reuse its host buffer at once (and it may be pinned): wait for the copy.
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(void* p, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
}

void CudaBackend::init_forward(float* out, float* lse, std::int64_t rows, int head_dim) {
  gpu::init_forward(out, lse, rows, head_dim, stream_);
}

NaiveAttention& CudaBackend::naive() {
  if (!naive_)
    naive_ = std::make_unique<NaiveAttention>(
        stream_, [this](std::size_t n) { return allocate(n); }, [this](void* p) { release(p); });
  return *naive_;
}

bool CudaBackend::use_flash(DType dtype, int head_dim) const {
  switch (path_) {
    case KernelPath::Flash: return true;
    case KernelPath::Naive: return false;
    case KernelPath::Auto: return flash_tensor_core_supported(dtype, head_dim);
  }
  return true;
}

void CudaBackend::forward(const ForwardBlock& block) {
  if (use_flash(block.dtype, block.dims.head_dim)) flash_forward(block, stream_);
  else naive().forward(block);
}

void CudaBackend::backward_prepare(const void* dout, const float* out, float* delta,
                                   std::int64_t rows, int head_dim, DType dtype) {
  gpu::backward_prepare(dout, out, delta, rows, head_dim, dtype, stream_);
}

void CudaBackend::backward(const BackwardBlock& block) {
  if (use_flash(block.dtype, block.dims.head_dim)) flash_backward(block, stream_);
  else naive().backward(block);
}

void CudaBackend::accumulate(float* dst, const float* src, std::size_t count) {
  gpu::accumulate(dst, src, count, stream_);
}

int CudaBackend::mark() {
  if (marks_used_ == int(events_.size())) {
    cudaEvent_t e = nullptr;
    RBK_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  RBK_CUDA_CHECK(cudaEventRecord(events_[marks_used_], stream_));
  return marks_used_++;
}

double CudaBackend::seconds_between(int from, int to) {
  if (from < 0 || to < 0 || from >= marks_used_ || to >= marks_used_)
    throw std::out_of_range("CudaBackend::seconds_between: mark id out of range");
  RBK_CUDA_CHECK(cudaEventSynchronize(events_[to]));
  RBK_CUDA_CHECK(cudaEventSynchronize(events_[from]));
  float ms = 0.f;
  RBK_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
  return double(ms) * 1e-3;
}

void CudaBackend::reset_marks() { marks_used_ = 0; }

void CudaBackend::synchronize() { RBK_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace rb::attn::gpu

namespace rb::ring {

std::unique_ptr<AttentionBackend> make_cuda_backend(const std::string& kernel) {
  return std::make_unique<attn::gpu::CudaBackend>(attn::gpu::parse_kernel_path(kernel));
}

}  // namespace rb::ring
