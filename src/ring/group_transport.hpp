#pragma once
// How the context-parallel schemes other than the ring move data: collectives over the whole
// context-parallel group (ring/cp_attention.hpp). All-gather (K/V of every rank), reduce-scatter
// (dK/dV back to their owners, summed) and all-to-all (sequence shards <-> head shards,
// Ulysses). Each call returns when its result is usable by the compute stream (host: done;
// GPU: ordered on the backend's stream) and says how long the host waited. MPI on the host path
// (mpi_group_transport.cpp), NCCL on the GPU path (nccl_group_transport.cpp).
#include <cstddef>
#include <memory>
#include <string>

#include <mpi.h>

#include "backend.hpp"

namespace rb::ring {

class GroupTransport {
 public:
  virtual ~GroupTransport() = default;
  virtual std::string name() const = 0;  // "mpi", "nccl"
  virtual int group_size() const = 0;
  virtual int group_rank() const = 0;
  // recv[r * bytes, (r + 1) * bytes) = rank r's send, for every rank r of the group.
  virtual double all_gather(const void* send, void* recv, std::size_t bytes) = 0;
  // recv[i] = sum over ranks r of rank r's send[group_rank * count + i], i < count (fp32).
  virtual double reduce_scatter_sum(const float* send, float* recv, std::size_t count) = 0;
  // Rank r's send[j * bytes, (j + 1) * bytes) lands in rank j's recv[r * bytes, (r + 1) * bytes).
  virtual double all_to_all(const void* send, void* recv, std::size_t bytes) = 0;

  // The same all-to-all, overlapped with compute (Ulysses' head-group pipeline): it starts after
  // the compute issued so far (send is ready) and runs beside what the compute stream does
  // next; recv is usable once finish_all_to_all(slot) returned (host: done; GPU: ordered on the
  // compute stream). `slot` (0 <= slot < 64) names the exchange until its finish; exchanges
  // run one after another in start order. The default runs the exchange at start.
  virtual void start_all_to_all(int slot, const void* send, void* recv, std::size_t bytes) {
    static_cast<void>(slot);
    all_to_all(send, recv, bytes);
  }
  virtual void finish_all_to_all(int slot) { static_cast<void>(slot); }
  static constexpr int kAsyncSlots = 64;

 protected:
  // A transport holds its communicator: one owner, never copied.
  GroupTransport() = default;
  GroupTransport(const GroupTransport&) = delete;
  GroupTransport& operator=(const GroupTransport&) = delete;
};

// The host transport: MPI collectives on a private duplicate of `group_comm`.
std::unique_ptr<GroupTransport> make_mpi_group_transport(MPI_Comm group_comm);
// The GPU transport (CUDA builds): NCCL collectives on backend's compute stream, over the NCCL
// communicator attached to group_comm (ring/ring_comms.hpp) or one of its own made from MPI.
std::unique_ptr<GroupTransport> make_nccl_group_transport(MPI_Comm group_comm,
                                                          attn::AttentionBackend& backend);

}  // namespace rb::ring
