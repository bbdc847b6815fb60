// GPU selection and an NCCL all-reduce over the world; exits 77 (skipped) without a GPU.
#include <doctest/doctest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "runtime/cuda_check.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"

using namespace rb;

TEST_CASE("select_gpu describes the device it made current") {
  REQUIRE(built_with_cuda());
  const int count = visible_gpu_count();
  REQUIRE(count > 0);
  Comm node;
  const RankLayout layout = discover_rank_layout(MPI_COMM_WORLD, &node);
  const GpuInfo g = select_gpu(layout.local_rank);
  CHECK(g.index == layout.local_rank % count);
  CHECK(!g.name.empty());
  CHECK(g.uuid.rfind("GPU-", 0) == 0);
  CHECK(g.uuid.size() == 40);  // GPU- + 8-4-4-4-12 hex digits
  CHECK(g.pci_bus_id.size() == 12);
  CHECK(g.total_memory > (std::size_t{1} << 30));
#ifdef RINGBENCH_HAVE_CUDA
  int current = -1;
  RB_CUDA_CHECK(cudaGetDevice(&current));
  CHECK(current == g.index);
#endif
}

TEST_CASE("NcclComm from MPI: one all-reduce gives the sum of ranks") {
  Comm node;
  const RankLayout layout = discover_rank_layout(MPI_COMM_WORLD, &node);
  select_gpu(layout.local_rank);
  NcclComm comm(MPI_COMM_WORLD);
  CHECK(comm.rank() == layout.rank);
  CHECK(comm.size() == layout.world_size);
  REQUIRE(comm.raw() != nullptr);
  NcclComm moved(std::move(comm));
  CHECK(comm.raw() == nullptr);
  REQUIRE(moved.raw() != nullptr);
#ifdef RINGBENCH_HAVE_CUDA
  const int n = 1024;
  std::vector<float> host(n, static_cast<float>(layout.rank + 1));
  float* dev = nullptr;
  RB_CUDA_CHECK(cudaMalloc(&dev, n * sizeof(float)));
  RB_CUDA_CHECK(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream = nullptr;
  RB_CUDA_CHECK(cudaStreamCreate(&stream));
  RB_NCCL_CHECK(
      ncclAllReduce(dev, dev, n, ncclFloat, ncclSum, static_cast<ncclComm_t>(moved.raw()), stream));
  RB_CUDA_CHECK(cudaStreamSynchronize(stream));
  RB_CUDA_CHECK(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  RB_CUDA_CHECK(cudaStreamDestroy(stream));
  RB_CUDA_CHECK(cudaFree(dev));
  const float want = static_cast<float>(layout.world_size * (layout.world_size + 1) / 2);
  int wrong = 0;
  for (float x : host) wrong += (x != want);
  CHECK(wrong == 0);
  CHECK(host[0] == want);
#endif
}

TEST_CASE("NcclComm::split: rings of the world communicator by color, ordered by key") {
  Comm node;
  const RankLayout layout = discover_rank_layout(MPI_COMM_WORLD, &node);
  select_gpu(layout.local_rank);
  NcclComm world(MPI_COMM_WORLD);
  CHECK(world.creation_seconds() > 0.0);
  // Rings of one rank each (color = rank), then one ring of all in reverse order (key = -rank).
  NcclComm alone = NcclComm::split(world, layout.rank, 0);
  CHECK(alone.size() == 1);
  CHECK(alone.rank() == 0);
  NcclComm reversed = NcclComm::split(world, 0, layout.world_size - 1 - layout.rank);
  CHECK(reversed.size() == layout.world_size);
  CHECK(reversed.rank() == layout.world_size - 1 - layout.rank);
  CHECK(reversed.creation_seconds() >= 0.0);
  // A negative color leaves the rank out.
  NcclComm none = NcclComm::split(world, layout.rank == 0 ? -1 : 1, 0);
  CHECK((none.raw() == nullptr) == (layout.rank == 0));
  if (layout.rank != 0) CHECK(none.size() == layout.world_size - 1);
}

#ifdef RINGBENCH_HAVE_CUDA
// One error family with the kernels (kernels/cuda/check.hpp); the driver adds the rank when
// it reports the error.
TEST_CASE("CUDA and NCCL errors name the library, the call and the place") {
  try {
    RB_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL("no throw");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("CUDA call failed: cudaSetDevice(1 << 20) at ") == 0);
    CHECK(msg.find("test_gpu.cpp:") != std::string::npos);
  }
  try {
    RB_NCCL_CHECK(ncclCommCount(nullptr, nullptr));
    FAIL("no throw");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("NCCL call failed: ncclCommCount(nullptr, nullptr) at ") == 0);
  }
}
#endif
