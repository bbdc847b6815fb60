#pragma once
// The copy-engine RingTransport (CUDA builds): K/V move between GPUs of one node by the copy
// engines, so no SM is taken from the attention kernels (NCCL's send/recv kernels compete with
// them for every SM: issue #26). Each rank pulls its previous rank's block into its own
// receive buffer with cudaMemcpyAsync on a copy stream, through CUDA IPC:
//
//   post(s):  1. receive "pull issued" for s-1 from the next rank; copy stream waits on its
//               `pulled` event (my buffer about to be overwritten is no longer being read)
//             2. record `ready` on the compute stream (send produced, receive buffer free)
//             3. offer {IPC handle, offset, bytes} of the send buffer to the next rank
//             4. take the previous rank's offer; copy stream waits on its `ready`, then copies
//             5. record `pulled`; tell the previous rank its pull is issued
//   finish(): receive the last "pull issued"; the compute stream waits on the next rank's
//             `pulled`, so the pass ends only when nobody reads this rank's buffers.
//
// The host messages order the cross-process event records and waits: a rank records `ready`
// or `pulled` again only after its neighbour has issued its wait on the previous record, so
// every wait binds to the record it means (a later one could close a cycle around the ring).
// Memory handles are opened once per allocation (cached by handle) and closed with the
// transport, which lives for one point. Peer access: ring/transport_choice.hpp decides,
// from probe_copy_engine.
//
// On a ring across nodes the copy engines take only the hops inside a node (HopLinks): a rank
// whose previous rank is on another node pulls nothing (NCCL receives for it), one whose next
// rank is on another node offers nothing, and NCCL (nccl_transport.hpp, one direction each)
// moves those hops: make_mixed_transport puts the two together.
#include <mpi.h>

#include <memory>

#include "ring/transport.hpp"
#include "ring/transport_choice.hpp"

namespace rb::ring {

// Collective over ring_comm (each rank on its current CUDA device): can every rank's GPU read
// its previous rank's GPU memory (visible to this process, peer access)? Says which hop cannot.
// in_local false: this rank's hop in crosses nodes (not the copy engines'): not checked.
CopyEngineProbe probe_copy_engine(MPI_Comm ring_comm, bool in_local = true);

// Collective over ring_comm. Throws where a neighbour's GPU cannot be reached. links: which of
// this rank's hops the copy engines take (the others: nothing moves on them here).
std::unique_ptr<RingTransport> make_copy_engine_transport(MPI_Comm ring_comm,
                                                          AttentionBackend& backend,
                                                          HopLinks links = {});

// Collective over ring_comm: the copy engines on the hops inside a node, NCCL on the others.
std::unique_ptr<RingTransport> make_mixed_transport(MPI_Comm ring_comm, AttentionBackend& backend,
                                                    HopLinks links);

}  // namespace rb::ring
