#pragma once
// Checks for CUDA runtime and NCCL calls in src/: the kernels' one error family
// (kernels/cuda/check.hpp, std::runtime_error naming the library, call, file, line and the
// library's error string) under the names src/ has always used. The rank is added where the
// error is reported (the driver prints "rank N: ..."), not here.
#ifdef RINGBENCH_HAVE_CUDA
#include <nccl.h>

#include "cuda/check.hpp"

#define RB_CUDA_CHECK(call) RBK_CUDA_CHECK(call)

namespace rb {
inline void nccl_check(ncclResult_t result, const char* call, const char* file, int line) {
  if (result != ncclSuccess)
    attn::gpu::throw_kernel_error("NCCL", call, file, line, ncclGetErrorString(result));
}
}  // namespace rb

#define RB_NCCL_CHECK(call) ::rb::nccl_check((call), #call, __FILE__, __LINE__)

// Checks the last launch error (kernel launches return nothing).
#define RB_CUDA_CHECK_LAUNCH() RBK_LAUNCH_CHECK()
#endif
