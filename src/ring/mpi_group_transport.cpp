// GroupTransport over MPI collectives on host buffers, on a private duplicate of the group's
// communicator so its traffic never matches another component's. Counts above INT_MAX go as a
// derived datatype of 1 MiB elements (every size the schemes use is a multiple of it, or small).
#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ring/group_transport.hpp"
#include "ring/mpi_error.hpp"
#include "runtime/mpi.hpp"

namespace rb::ring {
namespace {

void check(int rc, const char* call) {
  throw_if_mpi_error(rc, "MPI group transport", call);
}

// A (count, datatype) pair for `units` elements of `base`, counted in chunks when too many.
class Count {
 public:
  Count(std::size_t units, MPI_Datatype base) : type_(base) {
    constexpr std::size_t kChunk = std::size_t{1} << 20;
    if (units <= static_cast<std::size_t>(INT_MAX)) {
      count_ = static_cast<int>(units);
      return;
    }
    if (units % kChunk != 0)
      throw std::invalid_argument("MPI group transport: " + std::to_string(units) +
                                  " elements is above INT_MAX and not a multiple of 1 Mi");
    check(MPI_Type_contiguous(static_cast<int>(kChunk), base, &type_), "MPI_Type_contiguous");
    check(MPI_Type_commit(&type_), "MPI_Type_commit");
    owned_ = true;
    count_ = static_cast<int>(units / kChunk);
  }
  ~Count() {
    if (owned_) MPI_Type_free(&type_);
  }
  Count(const Count&) = delete;
  Count& operator=(const Count&) = delete;
  int count() const { return count_; }
  MPI_Datatype type() const { return type_; }

 private:
  MPI_Datatype type_;
  int count_ = 0;
  bool owned_ = false;
};

class MpiGroupTransport final : public GroupTransport {
 public:
  explicit MpiGroupTransport(MPI_Comm group_comm) {
    MPI_Comm dup = MPI_COMM_NULL;
    check(MPI_Comm_dup(group_comm, &dup), "MPI_Comm_dup");
    comm_ = Comm(dup);
    rank_ = comm_.rank();
    size_ = comm_.size();
  }

  std::string name() const override { return "mpi"; }
  int group_size() const override { return size_; }
  int group_rank() const override { return rank_; }

  double all_gather(const void* send, void* recv, std::size_t bytes) override {
    return exchange(MPI_Allgather, "MPI_Allgather", send, recv, bytes);
  }

  double reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    const auto t0 = clock::now();
    if (count > static_cast<std::size_t>(INT_MAX))  // MPI_SUM needs a predefined type
      throw std::invalid_argument(
          "MPI group transport: reduce-scatter of more than INT_MAX floats per rank");
    check(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                   comm_.get()),
          "MPI_Reduce_scatter_block");
    return since(t0);
  }

  double all_to_all(const void* send, void* recv, std::size_t bytes) override {
    return exchange(MPI_Alltoall, "MPI_Alltoall", send, recv, bytes);
  }

  // MPI_Ialltoall: the host backend computes on this thread, so the exchange progresses mostly
  // in the MPI calls around it; what this buys on the host is the GPU path's ordering, tested.
  void start_all_to_all(int slot, const void* send, void* recv, std::size_t bytes) override {
    Pending& p = pending(slot);
    if (p.request != MPI_REQUEST_NULL)
      throw std::logic_error("MPI group transport: all-to-all slot " + std::to_string(slot) +
                             " started twice");
    p.count = std::make_unique<Count>(bytes, MPI_BYTE);
    check(MPI_Ialltoall(send, p.count->count(), p.count->type(), recv, p.count->count(),
                        p.count->type(), comm_.get(), &p.request),
          "MPI_Ialltoall");
  }
  void finish_all_to_all(int slot) override {
    Pending& p = pending(slot);
    check(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "MPI_Wait (MPI_Ialltoall)");
    p.count.reset();
  }
  ~MpiGroupTransport() override {
    for (Pending& p : pending_)  // an exchange left running by an exception: end it first
      if (p.request != MPI_REQUEST_NULL) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
  }

 private:
  using clock = std::chrono::steady_clock;
  // MPI_Allgather and MPI_Alltoall: `bytes` to or from every rank, the same call shape.
  using BytesCollective = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype,
                                  MPI_Comm);
  double exchange(BytesCollective call, const char* call_name, const void* send, void* recv,
                  std::size_t bytes) {
    const auto t0 = clock::now();
    const Count n(bytes, MPI_BYTE);
    check(call(send, n.count(), n.type(), recv, n.count(), n.type(), comm_.get()), call_name);
    return since(t0);
  }
  static double since(clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  }
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::unique_ptr<Count> count;  // its datatype lives until the exchange ends
  };
  Pending& pending(int slot) {
    if (slot < 0 || slot >= kAsyncSlots)
      throw std::logic_error("MPI group transport: all-to-all slot " + std::to_string(slot));
    return pending_[static_cast<std::size_t>(slot)];
  }
  Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<Pending> pending_ = std::vector<Pending>(kAsyncSlots);
};

}  // namespace

std::unique_ptr<GroupTransport> make_mpi_group_transport(MPI_Comm group_comm) {
  return std::make_unique<MpiGroupTransport>(group_comm);
}

}  // namespace rb::ring
