// doctest main for the kernel tests without MPI (plain nvcc build on a GPU machine, see
// launch/bench_kernels.sh); exits 77 (skipped) without a GPU like the MPI GPU test main.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no GPU visible; GPU kernel tests not run\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
