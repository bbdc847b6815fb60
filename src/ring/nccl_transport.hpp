#pragma once
// The GPU RingTransport: NCCL send/recv on a dedicated communication stream, ordered after
// the compute stream by events, so that the transfer for ring step i+1 runs while step i
// computes and nothing blocks the host inside the loop (owner: cuda).
//
//   compute stream:  ...produce send buf... [ready]        ...compute step i...  wait(done) use
//   recv comm stream:                       wait(ready) [start] group{send next, recv prev} [done]
//
// post() records `ready` on the compute stream, makes the comm stream wait on it, and
// enqueues the grouped send/recv (ncclGroupStart/End) followed by `done`; wait() makes the
// compute stream wait on `done` and returns 0 (the exposed wait is what the backend's marks
// around wait() measure on the compute stream). The two packet buffers themselves belong
// to the ring algorithm, which allocates them once per point and alternates between them.
// The host never blocks on the comm stream in the loop; the backend's synchronise does, so a
// watch thread (runtime/nccl_wait.hpp) polls the communicator's async error meanwhile and
// ends the rank with exit code 125 on a dead peer or a failed network instead of a hang.
#include <mpi.h>

#include <cstddef>
#include <memory>

#include "ring/transport.hpp"

namespace rb::ring {

// Which of a rank's two hops NCCL moves: both on an NCCL ring; on a mixed ring
// (ring/ce_transport.hpp) only those that cross nodes.
struct NcclHops {
  bool send = true;  // to the next rank
  bool recv = true;  // from the previous rank
};

class NcclTransport final : public RingTransport {
 public:
  // Collective over ring_comm: borrows the NCCL communicator attached to ring_comm
  // (ring/ring_comms.hpp), or builds the ring's own from MPI when none is.
  NcclTransport(MPI_Comm ring_comm, AttentionBackend& backend, NcclHops hops = {});
  ~NcclTransport() override;

  std::string name() const override { return "nccl"; }
  void post(const void* send, void* recv, std::size_t bytes) override;
  double wait() override;
  int ring_size() const override;
  int ring_rank() const override;

  // Seconds the last completed exchange spent on the communication stream (from the start
  // of its send/recv to its end, after the data it sends was ready). Waits for it, and throws
  // on a NCCL error (wait_for_nccl_work).
  double last_transfer_seconds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rb::ring
