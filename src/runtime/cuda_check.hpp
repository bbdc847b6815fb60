#pragma once
// Checks for CUDA runtime, cuBLAS, NCCL and cuDNN calls; the message names the call,
// where it is, the error string, and the MPI rank, and is thrown as std::runtime_error.
#ifdef RINGBENCH_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

namespace rb {
[[noreturn]] void throw_gpu_error(const char* what, const char* call, const char* file, int line,
                                  const char* detail);
}

#define RB_CUDA_CHECK(call)                                                               \
  do {                                                                                   \
    cudaError_t rb_err_ = (call);                                                        \
    if (rb_err_ != cudaSuccess)                                                          \
      ::rb::throw_gpu_error("CUDA", #call, __FILE__, __LINE__, cudaGetErrorString(rb_err_)); \
  } while (0)

#define RB_NCCL_CHECK(call)                                                               \
  do {                                                                                   \
    ncclResult_t rb_res_ = (call);                                                       \
    if (rb_res_ != ncclSuccess)                                                          \
      ::rb::throw_gpu_error("NCCL", #call, __FILE__, __LINE__, ncclGetErrorString(rb_res_)); \
  } while (0)

// Checks the last launch error (kernel launches return nothing).
#define RB_CUDA_CHECK_LAUNCH() RB_CUDA_CHECK(cudaGetLastError())
#endif
