#include "ring/ring_comms.hpp"

#include <utility>

namespace rb::ring {

namespace {
// The attribute keys of the attached communicators: one each per process, made on first use
// and kept until MPI_Finalize (freeing them would gain nothing).
int make_keyval() {
  int keyval = MPI_KEYVAL_INVALID;
  RB_MPI_CHECK(
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &keyval, nullptr));
  return keyval;
}
int nccl_keyval() {
  static const int keyval = make_keyval();
  return keyval;
}
int transport_keyval() {
  static const int keyval = make_keyval();
  return keyval;
}

void* attached(MPI_Comm ring_comm, int keyval) {
  if (ring_comm == MPI_COMM_NULL) return nullptr;
  void* value = nullptr;
  int found = 0;
  RB_MPI_CHECK(MPI_Comm_get_attr(ring_comm, keyval, &value, &found));
  return found ? value : nullptr;
}

// Whether every rank can split: a mix would leave some ranks in ncclCommSplit and the others
// in an InitRank bootstrap, a hang.
bool split_everywhere(MPI_Comm world) {
  int mine = NcclComm::split_supported() ? 1 : 0, all = 0;
  RB_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, world));
  return all == 1;
}
}  // namespace

NcclComm* attached_nccl_comm(MPI_Comm ring_comm) {
  return static_cast<NcclComm*>(attached(ring_comm, nccl_keyval()));
}

MPI_Comm attached_transport_comm(MPI_Comm ring_comm) {
  const auto* c = static_cast<const Comm*>(attached(ring_comm, transport_keyval()));
  return c != nullptr ? c->get() : MPI_COMM_NULL;
}

RingComms::RingComms(MPI_Comm world, std::vector<int> node_of, RingOrder order,
                     std::function<NcclComm&()> world_nccl)
    : world_(world),
      node_of_(std::move(node_of)),
      order_(order),
      world_nccl_(std::move(world_nccl)) {
  if (world_nccl_) split_ = split_everywhere(world_);
}

std::string RingComms::method() const {
  if (!world_nccl_) return "MPI_Comm_split + MPI_Comm_dup";
  if (!split_) return "MPI_Comm_split + ncclCommInitRank";
  return "MPI_Comm_split + ncclCommSplit (rings of 1: ncclCommInitRank)";
}

RingComm& RingComms::get(int ring_size, bool& created) {
  const auto found = by_size_.find(ring_size);
  created = found == by_size_.end();
  if (!created) return *found->second;
  int rank = 0;
  RB_MPI_CHECK(MPI_Comm_rank(world_, &rank));
  auto rc = std::make_unique<RingComm>();
  rc->placement = place_in_ring(rank, node_of_, ring_size, order_);
  const int color = rc->placement.ring_id, key = rc->placement.ring_rank;
  const double t0 = MPI_Wtime();
  MPI_Comm split = MPI_COMM_NULL;
  RB_MPI_CHECK(MPI_Comm_split(world_, color, key, &split));
  rc->mpi = Comm(split);
  if (world_nccl_) {
    // A ring of one needs no world communicator: ranks sharing a GPU (which NCCL refuses in
    // one communicator) can still run it.
    const bool split = split_ && ring_size > 1;
    rc->nccl = split ? NcclComm::split(world_nccl_(), color, key) : NcclComm(rc->mpi.get());
    RB_MPI_CHECK(MPI_Comm_set_attr(rc->mpi.get(), nccl_keyval(), &rc->nccl));
  } else {
    MPI_Comm dup = MPI_COMM_NULL;
    RB_MPI_CHECK(MPI_Comm_dup(rc->mpi.get(), &dup));
    rc->transport = Comm(dup);
    RB_MPI_CHECK(MPI_Comm_set_attr(rc->mpi.get(), transport_keyval(), &rc->transport));
  }
  rc->create_s = MPI_Wtime() - t0;
  return *by_size_.emplace(ring_size, std::move(rc)).first->second;
}

}  // namespace rb::ring
