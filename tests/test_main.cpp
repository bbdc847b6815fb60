// doctest main for MPI: every rank runs the same test cases (collective tests rely on that),
// the worst result over ranks is every rank's exit code, and ranks other than 0 print
// failures only (doctest's minimal reporter), so a failure on any rank is visible.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "runtime/gpu.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#ifdef RINGBENCH_GPU_TESTS
  int gpus = rb::visible_gpu_count();
  int min_gpus = 0;
  MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_gpus == 0) {
    if (rank == 0)
      std::printf("SKIPPED: no GPU visible (built with CUDA: %s); GPU tests not run\n",
                  rb::built_with_cuda() ? "yes" : "no");
    MPI_Finalize();
    return 77;  // CTest SKIP_RETURN_CODE
  }
#endif
  int result = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    doctest::Context context;
    context.applyCommandLine(argc, argv);
    if (rank != 0) context.setOption("minimal", true);
    result = context.run();
    if (context.shouldExit()) {
      MPI_Finalize();
      return result;
    }
  }
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (result != 0 && rank != 0) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return worst;
}
