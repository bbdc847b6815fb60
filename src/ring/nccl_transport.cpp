#include "ring/nccl_transport.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "ring/ring_comms.hpp"
#include "ring/transport.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/gpu.hpp"
#include "runtime/nccl_wait.hpp"

namespace rb::ring {

struct NcclTransport::Impl {
  NcclComm own;                    // made here when the ring communicator has none attached
  const NcclComm* comm = nullptr;  // `own`, or the one attached by RingComms (borrowed)
  cudaStream_t compute = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t ready = nullptr;  // compute stream: the send buffer is produced
  cudaEvent_t start = nullptr;  // comm stream: transfer begins (timing)
  cudaEvent_t done = nullptr;   // comm stream: send and receive complete
  NcclHops hops;
  bool in_flight = false;
  bool timed = false;
  // The compute stream waits on `done`, and the attention backend synchronises that stream
  // where this transport cannot poll: the watch ends the rank on a NCCL async error instead of
  // letting it hang there. Declared after `comm`, so it stops before the communicator goes.
  std::unique_ptr<NcclErrorWatch> watch;

  std::vector<NcclCommRef> comms() const {
    return {{comm->raw(), nccl_comm_name("ring", comm->size(), comm->rank())}};
  }
};

namespace {
const char* const kExchange = "the ring exchange (NCCL send/recv)";
}  // namespace

NcclTransport::NcclTransport(MPI_Comm ring_comm, AttentionBackend& backend, NcclHops hops)
    : impl_(std::make_unique<Impl>()) {
  impl_->hops = hops;
  if (!backend.on_device() || backend.stream() == nullptr)
    throw std::invalid_argument("NCCL transport needs a GPU attention backend (got '" +
                                backend.name() + "')");
  impl_->compute = static_cast<cudaStream_t>(backend.stream());
  // A sweep that keeps its ring communicators across points (RingComms) attaches the NCCL
  // one; otherwise (tests, kernel_tuning) this transport makes and owns its own.
  impl_->comm = attached_nccl_comm(ring_comm);
  if (impl_->comm == nullptr) {
    impl_->own = NcclComm(ring_comm);
    impl_->comm = &impl_->own;
  }
  // An experiment knob (docs/ring-attention.md, transports): the send/recv kernels on the
  // highest-priority stream, so their blocks take SMs as the attention kernels' blocks retire.
  const char* priority = std::getenv("RINGBENCH_NCCL_STREAM_PRIORITY");
  int least = 0, greatest = 0;
  RB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const bool high = priority != nullptr && std::string(priority) == "high";
  RB_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->comm_stream, cudaStreamNonBlocking,
                                             high ? greatest : least));
  RB_CUDA_CHECK(cudaEventCreateWithFlags(&impl_->ready, cudaEventDisableTiming));
  RB_CUDA_CHECK(cudaEventCreate(&impl_->start));
  RB_CUDA_CHECK(cudaEventCreate(&impl_->done));
  // Also on a ring of one (no NCCL traffic, an idle thread): the test hook of nccl_wait.hpp
  // then drives the watch's exit path on a single GPU.
  impl_->watch = std::make_unique<NcclErrorWatch>(nccl_stream_wait_ops(impl_->comm_stream),
                                                  impl_->comms(), kExchange);
}

NcclTransport::~NcclTransport() {
  // No throwing in a destructor: finish what is queued (or give up on a failed communicator,
  // which the wait aborts), then release quietly.
  if (impl_->comm_stream) {
    try {
      wait_for_nccl_work(nccl_stream_wait_ops(impl_->comm_stream), impl_->comms(), kExchange);
    } catch (const std::exception&) {
    }
  }
  if (impl_->ready) cudaEventDestroy(impl_->ready);
  if (impl_->start) cudaEventDestroy(impl_->start);
  if (impl_->done) cudaEventDestroy(impl_->done);
  if (impl_->comm_stream) cudaStreamDestroy(impl_->comm_stream);
}

int NcclTransport::ring_size() const {
  return impl_->comm->size();
}
int NcclTransport::ring_rank() const {
  return impl_->comm->rank();
}

void NcclTransport::post(const void* send, void* recv, std::size_t bytes) {
  Impl& m = *impl_;
  if (m.in_flight)
    throw std::logic_error(
        "NCCL transport: post() while an exchange is in flight (call wait() first)");
  RB_CUDA_CHECK(cudaEventRecord(m.ready, m.compute));
  RB_CUDA_CHECK(cudaStreamWaitEvent(m.comm_stream, m.ready, 0));
  RB_CUDA_CHECK(cudaEventRecord(m.start, m.comm_stream));
  const int size = m.comm->size(), rank = m.comm->rank();
  if (size == 1) {
    // A ring of one passes the block to itself.
    if (bytes)
      RB_CUDA_CHECK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, m.comm_stream));
  } else if (bytes && (m.hops.send || m.hops.recv)) {
    auto c = static_cast<ncclComm_t>(m.comm->raw());
    try {
      RB_NCCL_CHECK(ncclGroupStart());
      if (m.hops.send)
        RB_NCCL_CHECK(ncclSend(send, bytes, ncclUint8, (rank + 1) % size, c, m.comm_stream));
      if (m.hops.recv)
        RB_NCCL_CHECK(ncclRecv(recv, bytes, ncclUint8, (rank - 1 + size) % size, c, m.comm_stream));
      RB_NCCL_CHECK(ncclGroupEnd());
    } catch (const std::exception&) {
      // An enqueue on a failed communicator returns its async error: say so as the wait does.
      throw_if_nccl_failed(m.comms(), std::string("while enqueueing ") + kExchange);
      throw;
    }
  }
  RB_CUDA_CHECK(cudaEventRecord(m.done, m.comm_stream));
  m.in_flight = true;
  m.timed = true;
}

double NcclTransport::wait() {
  Impl& m = *impl_;
  if (!m.in_flight) throw std::logic_error("NCCL transport: wait() without a posted exchange");
  RB_CUDA_CHECK(cudaStreamWaitEvent(m.compute, m.done, 0));
  m.in_flight = false;
  return 0.0;
}

double NcclTransport::last_transfer_seconds() {
  Impl& m = *impl_;
  if (!m.timed) return 0.0;
  wait_for_nccl_work(nccl_event_wait_ops(m.done), m.comms(), kExchange);
  float ms = 0.f;
  RB_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.done));
  return double(ms) * 1e-3;
}

std::unique_ptr<RingTransport> make_nccl_transport(MPI_Comm ring_comm, AttentionBackend& backend) {
  return std::make_unique<NcclTransport>(ring_comm, backend);
}

}  // namespace rb::ring
