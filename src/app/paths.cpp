#include "app/paths.hpp"

#include <stdexcept>

#include "host/host_backend.hpp"
#include "ring/group_transport.hpp"
#include "ring/transport.hpp"
#ifdef RINGBENCH_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace rb {
namespace {

PathFactories host_factories() {
  PathFactories f;
  f.attention_backend = [](const attn::KernelChoice& choice) {
    return attn::make_host_backend(choice);
  };
  f.ring_transport = [](MPI_Comm ring_comm, attn::AttentionBackend&) {
    return ring::make_mpi_transport(ring_comm);
  };
  f.group_transport = [](MPI_Comm group_comm, attn::AttentionBackend&) {
    return ring::make_mpi_group_transport(group_comm);
  };
  return f;
}

PathFactories cuda_factories() {
#ifdef RINGBENCH_HAVE_CUDA
  PathFactories f;
  f.attention_backend = [](const attn::KernelChoice& choice) {
    return attn::gpu::make_cuda_backend(choice);
  };
  f.ring_transport = [](MPI_Comm ring_comm, attn::AttentionBackend& backend) {
    return ring::make_nccl_transport(ring_comm, backend);
  };
  f.group_transport = [](MPI_Comm group_comm, attn::AttentionBackend& backend) {
    return ring::make_nccl_group_transport(group_comm, backend);
  };
  return f;
#else
  throw std::logic_error("cuda path asked for in a build without CUDA");
#endif
}

}  // namespace

PathFactories make_path_factories(Backend backend) {
  return backend == Backend::Cuda ? cuda_factories() : host_factories();
}

}  // namespace rb
