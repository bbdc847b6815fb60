#pragma once
// RB_HOST_DEVICE marks the small index and conversion helpers that both the host kernels
// (plain C++ / Kokkos default space) and the CUDA kernels (nvcc) call: one definition, both
// sides, no dependency on Kokkos or CUDA headers.
#if defined(__CUDACC__)
#define RB_HOST_DEVICE __host__ __device__
#else
#define RB_HOST_DEVICE
#endif
