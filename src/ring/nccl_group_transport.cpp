// GroupTransport over NCCL collectives, enqueued on the attention backend's compute stream: the
// all-gather, all-to-all and reduce-scatter schemes cannot compute before their collective is
// done, so a stream of their own would only add an event hop. The scheme measures each
// collective with backend marks around the call; the host never waits here (returns 0).
// The overlapped all-to-all (start/finish) is the exception: Ulysses' head-group pipeline
// computes one group while the next crosses, so those exchanges run on a stream of their own,
// after an event on the compute stream, and the compute stream waits on each one's event.
// The communicator: the NCCL one RingComms attached to the group's MPI communicator where there
// is one (the whole context-parallel group), else this transport's own (hybrid's subgroups).
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ring/group_transport.hpp"
#include "ring/ring_comms.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/gpu.hpp"
#include "runtime/nccl_wait.hpp"

namespace rb::ring {
namespace {

const char* const kCollective = "a context-parallel collective (NCCL)";

class NcclGroupTransport final : public GroupTransport {
 public:
  NcclGroupTransport(MPI_Comm group_comm, attn::AttentionBackend& backend) {
    if (!backend.on_device() || backend.stream() == nullptr)
      throw std::invalid_argument("NCCL group transport needs a GPU attention backend (got '" +
                                  backend.name() + "')");
    stream_ = static_cast<cudaStream_t>(backend.stream());
    comm_ = attached_nccl_comm(group_comm);
    if (comm_ == nullptr) {
      own_ = NcclComm(group_comm);
      comm_ = &own_;
    }
    // The backend synchronises the compute stream where this transport cannot poll: the watch
    // ends the rank on a NCCL async error instead of a silent hang (runtime/nccl_wait.hpp).
    watch_ = std::make_unique<NcclErrorWatch>(nccl_stream_wait_ops(stream_), comms(), kCollective);
  }
  ~NcclGroupTransport() override {
    try {
      wait_for_nccl_work(nccl_stream_wait_ops(stream_), comms(), kCollective);
      if (side_ != nullptr) wait_for_nccl_work(nccl_stream_wait_ops(side_), comms(), kCollective);
    } catch (const std::exception&) {
    }
    watch_.reset();  // before the communicator it watches goes
    for (cudaEvent_t e : done_)
      if (e != nullptr) cudaEventDestroy(e);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (side_ != nullptr) cudaStreamDestroy(side_);
  }

  std::string name() const override { return "nccl"; }
  int group_size() const override { return comm_->size(); }
  int group_rank() const override { return comm_->rank(); }

  double all_gather(const void* send, void* recv, std::size_t bytes) override {
    enqueue("ncclAllGather",
            [&](ncclComm_t c) { return ncclAllGather(send, recv, bytes, ncclUint8, c, stream_); });
    return 0.0;
  }

  double reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    enqueue("ncclReduceScatter", [&](ncclComm_t c) {
      return ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, c, stream_);
    });
    return 0.0;
  }

  double all_to_all(const void* send, void* recv, std::size_t bytes) override {
    all_to_all_on(stream_, send, recv, bytes);
    return 0.0;
  }

  void start_all_to_all(int slot, const void* send, void* recv, std::size_t bytes) override {
    cudaEvent_t& done = done_event(slot);
    RB_CUDA_CHECK(cudaEventRecord(ready_, stream_));  // send is packed (compute stream)
    RB_CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
    all_to_all_on(side_, send, recv, bytes);
    RB_CUDA_CHECK(cudaEventRecord(done, side_));
  }
  void finish_all_to_all(int slot) override {
    RB_CUDA_CHECK(cudaStreamWaitEvent(stream_, done_event(slot), 0));
  }

 private:
  // NCCL has ncclAlltoAll only from 2.28 on, and only where built with it: grouped send/recv
  // is what every NCCL since 2.7 runs an all-to-all as.
  void all_to_all_on(cudaStream_t stream, const void* send, void* recv, std::size_t bytes) {
    const int P = comm_->size();
    const auto* from = static_cast<const char*>(send);
    auto* to = static_cast<char*>(recv);
    enqueue("grouped ncclSend/ncclRecv (all-to-all)", [&](ncclComm_t c) {
      ncclResult_t rc = ncclGroupStart();
      for (int j = 0; j < P && rc == ncclSuccess; ++j) {
        const std::size_t at = static_cast<std::size_t>(j) * bytes;
        rc = ncclSend(from + at, bytes, ncclUint8, j, c, stream);
        if (rc == ncclSuccess) rc = ncclRecv(to + at, bytes, ncclUint8, j, c, stream);
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  // The side stream and the events of the overlapped exchanges, made on first use: the
  // schemes that never overlap keep one stream.
  cudaEvent_t& done_event(int slot) {
    if (slot < 0 || slot >= kAsyncSlots)
      throw std::logic_error("NCCL group transport: all-to-all slot " + std::to_string(slot));
    if (side_ == nullptr) {
      RB_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
      RB_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      done_.assign(kAsyncSlots, nullptr);
    }
    cudaEvent_t& e = done_[static_cast<std::size_t>(slot)];
    if (e == nullptr) RB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  std::vector<NcclCommRef> comms() const {
    return {{comm_->raw(), nccl_comm_name("context-parallel group", comm_->size(), comm_->rank())}};
  }
  template <class Call>
  void enqueue(const char* what, Call call) {
    const ncclResult_t rc = call(static_cast<ncclComm_t>(comm_->raw()));
    if (rc == ncclSuccess) return;
    // An enqueue on a failed communicator returns its async error: say so as the waits do.
    throw_if_nccl_failed(comms(), std::string("while enqueueing ") + what);
    throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(rc));
  }

  NcclComm own_;
  const NcclComm* comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_ = nullptr;  // the overlapped all-to-alls
  cudaEvent_t ready_ = nullptr;
  std::vector<cudaEvent_t> done_;
  std::unique_ptr<NcclErrorWatch> watch_;
};

}  // namespace

std::unique_ptr<GroupTransport> make_nccl_group_transport(MPI_Comm group_comm,
                                                          attn::AttentionBackend& backend) {
  return std::make_unique<NcclGroupTransport>(group_comm, backend);
}

}  // namespace rb::ring
