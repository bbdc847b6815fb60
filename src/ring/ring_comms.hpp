#pragma once
// The ring communicators of one ring_attention run, created at most once per ring size and
// reused by every point of that size: a communicator creation is a collective bootstrap
// (ncclCommInitRank: seconds at a thousand ranks), so one per point would cost more than the
// points themselves at scale.
//
// Each ring size gets an MPI communicator (MPI_Comm_split, ranks in ring order) and the
// communicator its transport sends on: on the host path a duplicate of the MPI one (ring
// traffic never matches the parity reference's messages), on the GPU path a NCCL
// communicator, by ncclCommSplit of the world NCCL communicator where NCCL >= 2.18 (no
// bootstrap of its own), else by ncclCommInitRank over the MPI ring communicator. The
// transport's communicator is attached to the MPI one (an MPI attribute), so the transport
// built on that MPI communicator (PathFactories::ring_transport) borrows it instead of
// creating its own.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "ring/ring_order.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"

namespace rb::ring {

struct RingComm {
  RingPlacement placement;  // this rank's ring: id, position, members, nodes, crossing hops
  NcclComm nccl;            // GPU path only (empty on the host path)
  Comm transport;           // host path only: the MPI transport's private duplicate of `mpi`
  Comm mpi;                 // the ring's MPI communicator, rank = placement.ring_rank
  double create_s = 0.0;    // seconds this rank spent creating both
};

class RingComms {
 public:
  // Collective over world. node_of[r]: world rank r's node. world_nccl: the world NCCL
  // communicator (made on first use); empty on the host path, where no NCCL communicator is made.
  RingComms(MPI_Comm world, std::vector<int> node_of, RingOrder order,
            std::function<NcclComm&()> world_nccl);
  RingComms(const RingComms&) = delete;
  RingComms& operator=(const RingComms&) = delete;

  // The communicators of rings of `ring_size`: created (collective over world) on the first
  // call for that size, reused afterwards. `created` says which of the two this call did.
  RingComm& get(int ring_size, bool& created);
  int creations() const { return static_cast<int>(by_size_.size()); }
  // How the communicators are made, e.g. "MPI_Comm_split + ncclCommSplit".
  std::string method() const;
  bool splits_world_nccl() const { return split_; }

 private:
  MPI_Comm world_;
  std::vector<int> node_of_;
  RingOrder order_;
  std::function<NcclComm&()> world_nccl_;
  bool split_ = false;  // every rank's NCCL has ncclCommSplit
  std::map<int, std::unique_ptr<RingComm>> by_size_;
};

// The NCCL communicator attached to an MPI ring communicator by RingComms, or null.
NcclComm* attached_nccl_comm(MPI_Comm ring_comm);
// The MPI transport's communicator attached to an MPI ring communicator, or MPI_COMM_NULL.
MPI_Comm attached_transport_comm(MPI_Comm ring_comm);

}  // namespace rb::ring
