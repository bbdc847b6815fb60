#pragma once
// Error checks for the CUDA kernel library: the one CUDA error-check family of the program,
// allocation failures included (check_allocation)
// (src/runtime/cuda_check.hpp builds on it). Self-contained (no MPI, no src/runtime) so the
// kernels and their benchmark build with plain nvcc on a GPU machine; the message names the
// call, the file and line, and the library's error string. throw_kernel_error is public for
// layers that check other libraries the same way.
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "backend.hpp"  // attn::OutOfMemory

namespace rb::attn::gpu {

[[noreturn]] inline void throw_kernel_error(const char* lib, const char* call, const char* file,
                                            int line, const std::string& detail) {
  throw std::runtime_error(std::string(lib) + " call failed: " + call + " at " + file + ":" +
                           std::to_string(line) + ": " + detail);
}

// "major.minor.patch" of a CUDA library through its GetProperty call (`ok(part, &value)` says
// whether the call succeeded); "unknown" when one fails. Needs no GPU.
template <class GetProperty>
std::string library_version_text(GetProperty ok) {
  int v[3] = {0, 0, 0};
  const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i)
    if (!ok(parts[i], &v[i])) return "unknown";
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "unknown cuBLAS status";
  }
}

// The result `err` of a cudaMalloc (`device`) or cudaMallocHost of `bytes`: running out is
// attn::OutOfMemory (what was asked; for the device, what it had free), with the error cleared
// so no later check reports it, because the caller records an `oom` point and goes on; any
// other error is thrown as every CUDA error. `where` names the allocation in the message.
inline void check_allocation(cudaError_t err, std::size_t bytes, const std::string& where,
                             const char* call, bool device = true) {
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free_bytes = 0, total = 0;
    if (!device || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = 0;
    throw OutOfMemory(bytes, free_bytes, where);
  }
  if (err != cudaSuccess)
    throw_kernel_error("CUDA", call, __FILE__, __LINE__, cudaGetErrorString(err));
}

}  // namespace rb::attn::gpu

#define RBK_CUDA_CHECK(call)                                                 \
  do {                                                                       \
    cudaError_t rbk_err_ = (call);                                           \
    if (rbk_err_ != cudaSuccess)                                             \
      ::rb::attn::gpu::throw_kernel_error("CUDA", #call, __FILE__, __LINE__, \
                                          cudaGetErrorString(rbk_err_));     \
  } while (0)

#define RBK_CUBLAS_CHECK(call)                                                           \
  do {                                                                                   \
    cublasStatus_t rbk_st_ = (call);                                                     \
    if (rbk_st_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::rb::attn::gpu::throw_kernel_error("cuBLAS", #call, __FILE__, __LINE__,           \
                                          ::rb::attn::gpu::cublas_status_name(rbk_st_)); \
  } while (0)

// Kernel launches return nothing: check the launch error right after each one.
#define RBK_LAUNCH_CHECK() RBK_CUDA_CHECK(cudaGetLastError())
