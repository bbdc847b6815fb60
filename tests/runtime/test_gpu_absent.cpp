// Without a usable GPU (this machine has none; host-only builds have none by construction),
// the GPU layer reports zero devices instead of throwing, and refuses clearly when asked anyway.
#include <doctest/doctest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "runtime/gpu.hpp"

using namespace rb;

TEST_CASE("no GPU: count is zero and selection fails with a reason") {
  const int count = visible_gpu_count();
  if (count > 0) {
    MESSAGE("a GPU is visible; this test covers the GPU-less path only");
    return;
  }
  CHECK(count == 0);
  CHECK_THROWS_AS(select_gpu(0), std::runtime_error);
  NcclComm empty;
  CHECK(empty.raw() == nullptr);
  if (!built_with_cuda()) {
    CHECK_THROWS_WITH_AS(NcclComm(MPI_COMM_WORLD),
                         doctest::Contains("ringbench was built without CUDA/NCCL"),
                         std::runtime_error);
  }
}
