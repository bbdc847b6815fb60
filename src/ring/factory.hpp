#pragma once
// Constructors of the two ring interfaces for each path. The host ones live in src/ring
// (MPI transport) and kernels/host (Kokkos backend); the GPU ones in kernels/cuda and
// src/ring/nccl_transport.cpp and exist only when RINGBENCH_HAVE_CUDA is defined.
#include <memory>
#include <string>

#include <mpi.h>

#include "ring/interfaces.hpp"

namespace rb::ring {

std::unique_ptr<AttentionBackend> make_host_backend();
std::unique_ptr<RingTransport> make_mpi_transport(MPI_Comm ring_comm);

#ifdef RINGBENCH_HAVE_CUDA
// kernel: "flash", "cudnn", "naive" or "auto" (cudnn when built with cuDNN and it takes the
// dtype and head dim, else flash where the tensor cores take the shape, else naive).
// Uses the current CUDA device (the driver selected it). Throws std::runtime_error for an
// unavailable kernel path (e.g. cudnn without cuDNN) naming what is missing.
std::unique_ptr<AttentionBackend> make_cuda_backend(const std::string& kernel);
// Collective over ring_comm (builds its own NCCL communicator for the ring from MPI).
std::unique_ptr<RingTransport> make_nccl_transport(MPI_Comm ring_comm, AttentionBackend& backend);
#endif

}  // namespace rb::ring
