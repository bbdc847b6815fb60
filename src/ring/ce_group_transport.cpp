// A GroupTransport whose overlapped all-to-all (Ulysses' head groups, start/finish) moves the
// data with the copy engines through CUDA IPC, so the next head group's exchange takes no SM
// from this group's attention kernels (NCCL's send/recv kernels need SMs, and the attention
// fills them: the exchange then runs mostly after the kernel, issue #26 and #27); the one-shot
// all-to-all too. All-gather and reduce-scatter stay NCCL's.
//
// Each rank pulls its chunk of every rank's send buffer into its own receive buffer:
//   start(slot): 1. record ready[slot] on the compute stream (send packed, receive free)
//                2. all-gather {IPC handle, offset} of every rank's send buffer
//                3. the copy stream waits on every rank's ready[slot] and pulls rank j's chunk
//                   for this rank (its send + rank * bytes) into recv + j * bytes
//                4. record done[slot] on the copy stream
//   finish(slot): the compute stream waits on done[slot]. When no exchange is left in flight
//                (the end of a pipeline), every rank records `pulled` on its copy stream, the
//                ranks all-gather a token, and the compute stream waits on every rank's
//                `pulled`: nobody packs into a send buffer again while a peer still reads it.
// The all-gathers order the cross-process events: a rank records ready[slot] or `pulled` again
// only after every peer has passed the all-gather that follows its wait on the last record.
// Memory handles are opened once per allocation (ring/ipc_memory.hpp) and closed with the
// transport, which lives for one point.
#include "ring/ce_group_transport.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ring/ipc_memory.hpp"
#include "ring/mpi_error.hpp"
#include "runtime/cuda_check.hpp"

namespace rb::ring {
namespace {

const char* const kWho = "copy-engine all-to-all";

void mpi(int rc, const char* call) {
  throw_if_mpi_error(rc, kWho, call);
}

class CopyEngineGroupTransport final : public GroupTransport {
 public:
  CopyEngineGroupTransport(MPI_Comm group_comm, attn::AttentionBackend& backend,
                           std::unique_ptr<GroupTransport> collectives)
      : collectives_(std::move(collectives)) {
    mpi(MPI_Comm_dup(group_comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    compute_ = static_cast<cudaStream_t>(backend.stream());
    RB_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    ready_.assign(kAsyncSlots, nullptr);
    peer_ready_.assign(kAsyncSlots, std::vector<cudaEvent_t>(static_cast<std::size_t>(size_)));
    done_.assign(kAsyncSlots, nullptr);
    pulled_ = shared_event(peer_pulled_);
  }
  ~CopyEngineGroupTransport() override {
    if (copy_) cudaStreamSynchronize(copy_);
    for (auto& peers : peer_ready_)
      for (cudaEvent_t e : peers)
        if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : peer_pulled_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : ready_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : done_)
      if (e) cudaEventDestroy(e);
    if (pulled_) cudaEventDestroy(pulled_);
    if (copy_) cudaStreamDestroy(copy_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "copy_engine"; }
  int group_size() const override { return size_; }
  int group_rank() const override { return rank_; }
  double all_gather(const void* send, void* recv, std::size_t bytes) override {
    return collectives_->all_gather(send, recv, bytes);
  }
  double reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    return collectives_->reduce_scatter_sum(send, recv, count);
  }
  // The one-shot all-to-all (Ulysses in one head group) by the copy engines as well, on the
  // last slot (never a head group's: one group is the only caller).
  double all_to_all(const void* send, void* recv, std::size_t bytes) override {
    start_all_to_all(kAsyncSlots - 1, send, recv, bytes);
    finish_all_to_all(kAsyncSlots - 1);
    return 0.0;
  }
  void start_all_to_all(int slot, const void* send, void* recv, std::size_t bytes) override;
  void finish_all_to_all(int slot) override;

 private:
  // An interprocess event of this rank and every rank's, opened here (theirs[rank_] is mine).
  // Collective over the group.
  cudaEvent_t shared_event(std::vector<cudaEvent_t>& theirs) {
    cudaEvent_t mine = nullptr;
    RB_CUDA_CHECK(cudaEventCreateWithFlags(&mine, cudaEventInterprocess | cudaEventDisableTiming));
    cudaIpcEventHandle_t handle{};
    RB_CUDA_CHECK(cudaIpcGetEventHandle(&handle, mine));
    std::vector<cudaIpcEventHandle_t> all(static_cast<std::size_t>(size_));
    mpi(MPI_Allgather(&handle, sizeof handle, MPI_BYTE, all.data(), sizeof handle, MPI_BYTE, comm_),
        "MPI_Allgather (event handles)");
    theirs.assign(static_cast<std::size_t>(size_), nullptr);
    for (int r = 0; r < size_; ++r)
      if (r != rank_)
        RB_CUDA_CHECK(cudaIpcOpenEventHandle(&theirs[static_cast<std::size_t>(r)],
                                             all[static_cast<std::size_t>(r)]));
    theirs[static_cast<std::size_t>(rank_)] = nullptr;  // mine is waited on directly
    return mine;
  }
  void end_of_pipeline();

  std::unique_ptr<GroupTransport> collectives_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  std::vector<cudaEvent_t> ready_, done_;             // per slot, mine
  std::vector<std::vector<cudaEvent_t>> peer_ready_;  // per slot, every rank's
  cudaEvent_t pulled_ = nullptr;
  std::vector<cudaEvent_t> peer_pulled_;
  IpcMappings opened_;  // the peers' send allocations
  int in_flight_ = 0;
};

void CopyEngineGroupTransport::start_all_to_all(int slot, const void* send, void* recv,
                                                std::size_t bytes) {
  if (slot < 0 || slot >= kAsyncSlots)
    throw std::logic_error(std::string(kWho) + ": slot " + std::to_string(slot));
  const std::size_t s = static_cast<std::size_t>(slot);
  if (ready_[s] == nullptr) {  // first use of the slot: every rank is here (collective)
    ready_[s] = shared_event(peer_ready_[s]);
    RB_CUDA_CHECK(cudaEventCreateWithFlags(&done_[s], cudaEventDisableTiming));
  }
  ++in_flight_;
  RB_CUDA_CHECK(cudaEventRecord(ready_[s], compute_));
  const IpcOffer mine = ipc_offer(send, bytes, kWho);
  std::vector<IpcOffer> offers(static_cast<std::size_t>(size_));
  mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, offers.data(), sizeof mine, MPI_BYTE, comm_),
      "MPI_Allgather (offers)");
  auto* to = static_cast<char*>(recv);
  const std::size_t at_me = static_cast<std::size_t>(rank_) * bytes;
  RB_CUDA_CHECK(cudaStreamWaitEvent(copy_, ready_[s], 0));
  for (int k = 0; k < size_; ++k) {  // rank + k: each rank starts with a different peer
    const int j = (rank_ + k) % size_;
    const IpcOffer& o = offers[static_cast<std::size_t>(j)];
    if (o.bytes != bytes)
      throw std::logic_error(std::string(kWho) + ": rank " + std::to_string(j) + " sends " +
                             std::to_string(o.bytes) + " B a chunk where this rank expects " +
                             std::to_string(bytes));
    const char* from = j == rank_ ? static_cast<const char*>(send) + at_me : opened_.at(o) + at_me;
    if (j != rank_)
      RB_CUDA_CHECK(cudaStreamWaitEvent(copy_, peer_ready_[s][static_cast<std::size_t>(j)], 0));
    if (bytes)
      RB_CUDA_CHECK(cudaMemcpyAsync(to + static_cast<std::size_t>(j) * bytes, from, bytes,
                                    cudaMemcpyDeviceToDevice, copy_));
  }
  RB_CUDA_CHECK(cudaEventRecord(done_[s], copy_));
}

void CopyEngineGroupTransport::finish_all_to_all(int slot) {
  if (slot < 0 || slot >= kAsyncSlots || done_[static_cast<std::size_t>(slot)] == nullptr)
    throw std::logic_error(std::string(kWho) + ": finish of slot " + std::to_string(slot) +
                           " that never started");
  RB_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_[static_cast<std::size_t>(slot)], 0));
  if (--in_flight_ == 0) end_of_pipeline();
}

void CopyEngineGroupTransport::end_of_pipeline() {
  RB_CUDA_CHECK(cudaEventRecord(pulled_, copy_));
  char token = 1;
  std::vector<char> tokens(static_cast<std::size_t>(size_));
  mpi(MPI_Allgather(&token, 1, MPI_BYTE, tokens.data(), 1, MPI_BYTE, comm_),
      "MPI_Allgather (pulls issued)");
  for (int r = 0; r < size_; ++r)
    RB_CUDA_CHECK(cudaStreamWaitEvent(
        compute_, r == rank_ ? pulled_ : peer_pulled_[static_cast<std::size_t>(r)], 0));
}

}  // namespace

std::unique_ptr<GroupTransport> make_copy_engine_group_transport(
    MPI_Comm group_comm, attn::AttentionBackend& backend,
    std::unique_ptr<GroupTransport> collectives) {
  if (!backend.on_device() || backend.stream() == nullptr)
    throw std::invalid_argument(std::string(kWho) + " needs a GPU attention backend (got '" +
                                backend.name() + "')");
  return std::make_unique<CopyEngineGroupTransport>(group_comm, backend, std::move(collectives));
}

}  // namespace rb::ring
