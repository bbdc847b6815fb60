// The NCCL RingTransport over MPI_COMM_WORLD: stream ordering (the send buffer is produced
// asynchronously right before post()), ring neighbours, double-buffered receives, misuse errors.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "ring/transport.hpp"
#include "ring/nccl_transport.hpp"
#include "runtime/gpu.hpp"

using namespace rb;

TEST_SUITE("nccl") {
  TEST_CASE("NCCL transport passes blocks around the ring in compute-stream order") {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int gpus = rb::visible_gpu_count(), min_gpus = 0;
    MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (size > 1 && min_gpus < size) {
      MESSAGE("skipped: " << size << " ranks need " << size << " GPUs, " << min_gpus << " visible");
      return;
    }
    REQUIRE(cudaSetDevice(rank % gpus) == cudaSuccess);
    auto be = attn::gpu::make_cuda_backend("flash");
    auto tr = ring::make_nccl_transport(MPI_COMM_WORLD, *be);
    CHECK(tr->name() == "nccl");
    CHECK(tr->ring_size() == size);
    CHECK(tr->ring_rank() == rank);
    CHECK_THROWS_AS(tr->wait(), std::logic_error);

    const std::size_t n = (std::size_t(1) << 20) + 3;  // odd byte count of floats
    auto* send = static_cast<float*>(be->allocate(n * 4));
    auto* pattern = static_cast<float*>(be->allocate(n * 4));
    float* recv[2] = {static_cast<float*>(be->allocate(n * 4)),
                      static_cast<float*>(be->allocate(n * 4))};
    const int prev = (rank - 1 + size) % size;
    std::vector<float> host(n), got(n);
    for (int step = 0; step < 4; ++step) {
      for (std::size_t i = 0; i < n; ++i) host[i] = float(rank * 1000 + step * 10) + float(i % 7);
      be->copy_to_device(pattern, host.data(), n * 4);
      // The send buffer is produced asynchronously on the compute stream right before post():
      // the transfer must see the finished values, not the zeros.
      be->fill_zero(send, n * 4);
      be->accumulate(send, pattern, n);
      tr->post(send, recv[step % 2], n * 4);
      CHECK_THROWS_AS(tr->post(send, recv[step % 2], n * 4), std::logic_error);
      CHECK(tr->wait() == 0.0);
      be->copy_to_host(got.data(), recv[step % 2], n * 4);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (got[i] != float(prev * 1000 + step * 10) + float(i % 7)) ++wrong;
      CHECK(wrong == 0);
      auto* nccl = dynamic_cast<ring::NcclTransport*>(tr.get());
      REQUIRE(nccl != nullptr);
      CHECK(nccl->last_transfer_seconds() >= 0.0);
    }
    be->release(send);
    be->release(pattern);
    be->release(recv[0]);
    be->release(recv[1]);
  }
}
