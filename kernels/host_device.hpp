#pragma once
// RB_HOST_DEVICE marks the small index and conversion helpers that both the host kernels
// (plain C++ / Kokkos default space) and the CUDA kernels (nvcc) call: one definition, both
// sides, no dependency on Kokkos or CUDA headers.
#if defined(__CUDACC__)
#define RB_HOST_DEVICE __host__ __device__
#else
#define RB_HOST_DEVICE
#endif

#include "attention.hpp"

namespace rb::attn {

// Calls f with a value of the type that stands for dtype t on this side (a storage type on
// the device, a load tag on the host): the one place a kernel path turns the runtime dtype
// into a template argument, so no path can forget a dtype.
template <class F32, class F16, class BF16, class F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f(F32{});
      return;
    case DType::F16:
      f(F16{});
      return;
    case DType::BF16:
      f(BF16{});
      return;
  }
}

}  // namespace rb::attn
