#include "app/paths.hpp"

#include <stdexcept>

#include "host/host_backend.hpp"
#include "ring/group_transport.hpp"
#include "ring/transport.hpp"
#ifdef RINGBENCH_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#include "ring/ce_group_transport.hpp"
#include "ring/ce_transport.hpp"
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
  f.copy_engine_probe = [](MPI_Comm, bool) {
    return ring::CopyEngineProbe{false, "the host path moves K/V with MPI"};
  };
  f.copy_engine_transport = [](MPI_Comm, attn::AttentionBackend&,
                               ring::HopLinks) -> std::unique_ptr<ring::RingTransport> {
    throw std::logic_error("the copy-engine transport needs the cuda path");
  };
  f.group_transport = [](MPI_Comm group_comm, attn::AttentionBackend&) {
    return ring::make_mpi_group_transport(group_comm);
  };
  f.copy_engine_group_transport =
      [](MPI_Comm, attn::AttentionBackend&) -> std::unique_ptr<ring::GroupTransport> {
    throw std::logic_error("the copy-engine all-to-all needs the cuda path");
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
  f.copy_engine_probe = [](MPI_Comm ring_comm, bool in_local) {
    return ring::probe_copy_engine(ring_comm, in_local);
  };
  f.copy_engine_transport = [](MPI_Comm ring_comm, attn::AttentionBackend& backend,
                               ring::HopLinks links) {
    return links.in_local && links.out_local
               ? ring::make_copy_engine_transport(ring_comm, backend)
               : ring::make_mixed_transport(ring_comm, backend, links);
  };
  f.group_transport = [](MPI_Comm group_comm, attn::AttentionBackend& backend) {
    return ring::make_nccl_group_transport(group_comm, backend);
  };
  f.copy_engine_group_transport = [](MPI_Comm group_comm, attn::AttentionBackend& backend) {
    return ring::make_copy_engine_group_transport(
        group_comm, backend, ring::make_nccl_group_transport(group_comm, backend));
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
