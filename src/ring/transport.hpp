#pragma once
// How K/V blocks travel around the ring: post "send this buffer to the next rank, receive
// from the previous one", then wait; one exchange in flight at a time. MPI on the host path
// (mpi_transport.cpp); NCCL (nccl_transport.cpp) or the copy engines (ce_transport.cpp) on the
// GPU path. The kernels side of the ring algorithm is attn::AttentionBackend (kernels/backend.hpp).
#include <cstddef>
#include <memory>
#include <string>

#include <mpi.h>

#include "backend.hpp"

namespace rb::ring {

using attn::AttentionBackend;
using attn::OutOfMemory;

class RingTransport {
 public:
  virtual ~RingTransport() = default;
  virtual std::string name() const = 0;  // "mpi", "nccl", "copy_engine"
  // Starts sending `send` to the next rank of the ring and receiving `recv` from the previous
  // one. The send buffer's contents are those the compute stream has produced so far, and the
  // receive buffer is not written before the work already enqueued on the compute stream is
  // done (the ring reuses a buffer for receiving right after computing on it).
  virtual void post(const void* send, void* recv, std::size_t bytes) = 0;
  // Makes the received data usable by the compute stream (host: blocks; GPU: stream waits on
  // an event, the host does not block). Returns the seconds the host waited (0 on the GPU;
  // the GPU's exposed wait is measured with backend marks around this call).
  virtual double wait() = 0;
  // Ends a pass (forward or backward): after it, the compute stream's work also covers every
  // read of this rank's buffers by its neighbours, so the ring may free or refill them once the
  // stream is synchronised. Where the transport's own completion already says so: nothing.
  virtual void finish() {}
  virtual int ring_size() const = 0;
  virtual int ring_rank() const = 0;

 protected:
  // A transport holds its communicator and the exchange in flight: one owner, never copied.
  RingTransport() = default;
  RingTransport(const RingTransport&) = delete;
  RingTransport& operator=(const RingTransport&) = delete;
};

// The host transport: MPI_Isend/Irecv over ring_comm.
std::unique_ptr<RingTransport> make_mpi_transport(MPI_Comm ring_comm);
// The GPU transport (CUDA builds; nccl_transport.cpp): collective over ring_comm, borrows the
// NCCL communicator attached to ring_comm (ring/ring_comms.hpp) or builds the ring's own from
// MPI, and orders its transfers on backend's stream.
std::unique_ptr<RingTransport> make_nccl_transport(MPI_Comm ring_comm, AttentionBackend& backend);

}  // namespace rb::ring
