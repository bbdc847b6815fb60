#pragma once
// Kokkos kernels of the profiling sweeps, written against the default execution and memory
// space (Serial/OpenMP on the host, CUDA in a CUDA Kokkos build): a STREAM triad for memory
// bandwidth and a GEMM-like kernel so the host path has a compute figure. Kokkos must be
// initialised. Each returns per-iteration seconds (each kernel fenced and timed on its own).
#include <cstddef>
#include <vector>

namespace rb::prof::host {

struct TriadResult {
  std::vector<double> seconds;          // per timed iteration
  std::size_t bytes_per_iteration = 0;  // 3 arrays x n x 8 B (STREAM's count: 2 reads, 1 write)
  std::size_t wrong = 0;                // elements of a[] not equal to b + s*c afterwards
};
// a[i] = b[i] + s * c[i] over `n` doubles per array, in host memory (DefaultHostExecutionSpace).
TriadResult triad(std::size_t n, int warmup, int iterations);

struct GemmResult {
  std::vector<double> seconds;  // per timed iteration
  double flops = 0;             // 2 n^3 per call
  double max_abs_error = 0;     // against the closed form of the inputs' product
};
// C = A * B, n x n, in float (fp64 = false) or double.
GemmResult gemm(int n, bool fp64, int warmup, int iterations);

}  // namespace rb::prof::host
