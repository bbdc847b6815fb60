// The copy-engine RingTransport: the protocol is in ce_transport.hpp.
#include "ring/ce_transport.hpp"

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ring/ipc_memory.hpp"
#include "ring/mpi_error.hpp"
#include "runtime/cuda_check.hpp"

namespace rb::ring {
namespace {

constexpr int kOfferTag = 7301, kPulledTag = 7302, kSetupTag = 7303;
const char* const kWho = "copy-engine transport";

void mpi(int rc, const char* call) {
  throw_if_mpi_error(rc, kWho, call);
}

struct Neighbours {
  int rank = 0, size = 1, prev = 0, next = 0;
};

class CopyEngineTransport final : public RingTransport {
 public:
  CopyEngineTransport(MPI_Comm ring_comm, AttentionBackend& backend, HopLinks links);
  ~CopyEngineTransport() override;

  std::string name() const override { return "copy_engine"; }
  void post(const void* send, void* recv, std::size_t bytes) override;
  double wait() override;
  void finish() override;
  int ring_size() const override { return n_.size; }
  int ring_rank() const override { return n_.rank; }

 private:
  void exchange_events();
  void take_pulled_token();
  void offer(const void* send, std::size_t bytes);
  void pull(void* recv, std::size_t bytes);

  MPI_Comm comm_ = MPI_COMM_NULL;
  Neighbours n_;
  HopLinks links_;  // in_local: this rank pulls; out_local: the next rank pulls from it
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t ready_ = nullptr, pulled_ = nullptr;            // mine, shared with the neighbours
  cudaEvent_t prev_ready_ = nullptr, next_pulled_ = nullptr;  // theirs, opened here
  cudaEvent_t done_ = nullptr;
  IpcMappings opened_;  // the previous rank's allocations
  IpcOffer offer_out_{};
  char token_out_ = 1;
  MPI_Request offer_req_ = MPI_REQUEST_NULL, token_req_ = MPI_REQUEST_NULL;
  bool in_flight_ = false;
  bool token_due_ = false;  // the next rank pulled since the last finish(): its token is owed
};

CopyEngineTransport::CopyEngineTransport(MPI_Comm ring_comm, AttentionBackend& backend,
                                         HopLinks links)
    : links_(links) {
  if (!backend.on_device() || backend.stream() == nullptr)
    throw std::invalid_argument(std::string(kWho) + " needs a GPU attention backend (got '" +
                                backend.name() + "')");
  mpi(MPI_Comm_dup(ring_comm, &comm_), "MPI_Comm_dup");
  MPI_Comm_rank(comm_, &n_.rank);
  MPI_Comm_size(comm_, &n_.size);
  n_.prev = (n_.rank - 1 + n_.size) % n_.size;
  n_.next = (n_.rank + 1) % n_.size;
  compute_ = static_cast<cudaStream_t>(backend.stream());
  RB_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  RB_CUDA_CHECK(cudaEventCreate(&done_));
  if (n_.size == 1) return;
  const CopyEngineProbe probe = probe_copy_engine(comm_, links_.in_local);
  if (!probe.usable) throw std::runtime_error(std::string(kWho) + ": " + probe.why_not);
  exchange_events();
}

// ready_ goes to the next rank (it waits before pulling), pulled_ to the previous one (it waits
// before overwriting what the pull reads).
void CopyEngineTransport::exchange_events() {
  const unsigned flags = cudaEventInterprocess | cudaEventDisableTiming;
  RB_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, flags));
  RB_CUDA_CHECK(cudaEventCreateWithFlags(&pulled_, flags));
  cudaIpcEventHandle_t mine_ready{}, mine_pulled{}, their_ready{}, their_pulled{};
  RB_CUDA_CHECK(cudaIpcGetEventHandle(&mine_ready, ready_));
  RB_CUDA_CHECK(cudaIpcGetEventHandle(&mine_pulled, pulled_));
  mpi(MPI_Sendrecv(&mine_ready, sizeof mine_ready, MPI_BYTE, n_.next, kSetupTag, &their_ready,
                   sizeof their_ready, MPI_BYTE, n_.prev, kSetupTag, comm_, MPI_STATUS_IGNORE),
      "MPI_Sendrecv (events)");
  mpi(MPI_Sendrecv(&mine_pulled, sizeof mine_pulled, MPI_BYTE, n_.prev, kSetupTag, &their_pulled,
                   sizeof their_pulled, MPI_BYTE, n_.next, kSetupTag, comm_, MPI_STATUS_IGNORE),
      "MPI_Sendrecv (events)");
  // A neighbour on another node: its handle means nothing here (and that hop is NCCL's).
  if (links_.in_local) RB_CUDA_CHECK(cudaIpcOpenEventHandle(&prev_ready_, their_ready));
  if (links_.out_local) RB_CUDA_CHECK(cudaIpcOpenEventHandle(&next_pulled_, their_pulled));
}

CopyEngineTransport::~CopyEngineTransport() {
  // No throwing here: finish what is queued, then release quietly. A pass that ended early
  // (an error) may leave a token unreceived; freeing the communicator drops it.
  if (copy_) cudaStreamSynchronize(copy_);
  if (offer_req_ != MPI_REQUEST_NULL) MPI_Request_free(&offer_req_);
  if (token_req_ != MPI_REQUEST_NULL) MPI_Request_free(&token_req_);
  for (cudaEvent_t e : {ready_, pulled_, prev_ready_, next_pulled_, done_})
    if (e) cudaEventDestroy(e);
  if (copy_) cudaStreamDestroy(copy_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void CopyEngineTransport::take_pulled_token() {
  if (!token_due_) return;
  char token = 0;
  mpi(MPI_Recv(&token, 1, MPI_BYTE, n_.next, kPulledTag, comm_, MPI_STATUS_IGNORE),
      "MPI_Recv (pull issued)");
  token_due_ = false;
}

void CopyEngineTransport::post(const void* send, void* recv, std::size_t bytes) {
  if (in_flight_)
    throw std::logic_error(std::string(kWho) +
                           ": post() while an exchange is in flight (call wait() first)");
  in_flight_ = true;
  if (n_.size ==
      1) {  // a ring of one passes the block to itself, in stream order (wait(): nothing)
    if (bytes)
      RB_CUDA_CHECK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, compute_));
    return;
  }
  // 1. The next rank has issued its pull from what I sent last: what writes my receive buffer
  // goes after it (my copy; on a mixed ring, NCCL's receive, which the compute stream orders).
  if (token_due_) {
    take_pulled_token();
    RB_CUDA_CHECK(cudaStreamWaitEvent(links_.in_local ? copy_ : compute_, next_pulled_, 0));
  }
  // 2-3. Send produced, receive buffer free: offer the send buffer.
  RB_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  if (links_.out_local) offer(send, bytes);
  if (links_.in_local) pull(recv, bytes);
}

void CopyEngineTransport::offer(const void* send, std::size_t bytes) {
  mpi(MPI_Wait(&offer_req_, MPI_STATUS_IGNORE), "MPI_Wait (offer)");
  offer_out_ = ipc_offer(send, bytes, kWho);
  mpi(MPI_Isend(&offer_out_, sizeof offer_out_, MPI_BYTE, n_.next, kOfferTag, comm_, &offer_req_),
      "MPI_Isend (offer)");
  token_due_ = true;  // the next rank pulls: it owes a "pull issued"
}

// 4-5. Pull the previous rank's block once it is produced and my buffer is free; tell it when
// the pull is issued.
void CopyEngineTransport::pull(void* recv, std::size_t bytes) {
  IpcOffer in{};
  mpi(MPI_Recv(&in, sizeof in, MPI_BYTE, n_.prev, kOfferTag, comm_, MPI_STATUS_IGNORE),
      "MPI_Recv (offer)");
  if (in.bytes != bytes)
    throw std::logic_error(std::string(kWho) + ": the previous rank offers " +
                           std::to_string(in.bytes) + " B where this rank expects " +
                           std::to_string(bytes) + " B");
  const char* from = opened_.at(in);
  RB_CUDA_CHECK(cudaStreamWaitEvent(copy_, prev_ready_, 0));
  RB_CUDA_CHECK(cudaStreamWaitEvent(copy_, ready_, 0));
  if (bytes) RB_CUDA_CHECK(cudaMemcpyAsync(recv, from, bytes, cudaMemcpyDeviceToDevice, copy_));
  RB_CUDA_CHECK(cudaEventRecord(done_, copy_));
  // 5. Tell the previous rank: it may overwrite what I read once `pulled` has happened.
  RB_CUDA_CHECK(cudaEventRecord(pulled_, copy_));
  mpi(MPI_Wait(&token_req_, MPI_STATUS_IGNORE), "MPI_Wait (pull issued)");
  mpi(MPI_Isend(&token_out_, 1, MPI_BYTE, n_.prev, kPulledTag, comm_, &token_req_),
      "MPI_Isend (pull issued)");
}

double CopyEngineTransport::wait() {
  if (!in_flight_) throw std::logic_error(std::string(kWho) + ": wait() without a posted exchange");
  if (n_.size > 1 && links_.in_local) RB_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
  in_flight_ = false;
  return 0.0;
}

void CopyEngineTransport::finish() {
  if (n_.size == 1 || !token_due_) return;
  take_pulled_token();
  RB_CUDA_CHECK(cudaStreamWaitEvent(compute_, next_pulled_, 0));
  mpi(MPI_Wait(&offer_req_, MPI_STATUS_IGNORE), "MPI_Wait (offer)");
  mpi(MPI_Wait(&token_req_, MPI_STATUS_IGNORE), "MPI_Wait (pull issued)");
}

std::string hop_problem(int rank, int prev, const std::string& prev_bus) {
  int mine = 0, theirs = -1;
  RB_CUDA_CHECK(cudaGetDevice(&mine));
  const std::string who = "ring rank " + std::to_string(rank) + " cannot read ring rank " +
                          std::to_string(prev) + "'s GPU";
  if (cudaDeviceGetByPCIBusId(&theirs, prev_bus.c_str()) != cudaSuccess) {
    cudaGetLastError();
    return who + " (" + prev_bus + " is not visible to its process: CUDA_VISIBLE_DEVICES?)";
  }
  if (theirs == mine) return "";  // one GPU, two processes: IPC within the device
  int can = 0;
  RB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, mine, theirs));
  return can ? ""
             : who + " (no peer access between devices " + std::to_string(mine) + " and " +
                   std::to_string(theirs) + ")";
}

}  // namespace

CopyEngineProbe probe_copy_engine(MPI_Comm ring_comm, bool in_local) {
  int rank = 0, size = 1;
  MPI_Comm_rank(ring_comm, &rank);
  MPI_Comm_size(ring_comm, &size);
  const int prev = (rank - 1 + size) % size, next = (rank + 1) % size;
  int device = 0;
  RB_CUDA_CHECK(cudaGetDevice(&device));
  std::array<char, 32> bus{}, prev_bus{};
  RB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), device));
  mpi(MPI_Sendrecv(bus.data(), static_cast<int>(bus.size()), MPI_CHAR, next, kSetupTag,
                   prev_bus.data(), static_cast<int>(prev_bus.size()), MPI_CHAR, prev, kSetupTag,
                   ring_comm, MPI_STATUS_IGNORE),
      "MPI_Sendrecv (PCI bus ids)");
  std::array<char, 256> mine{}, first{};
  // A hop in from another node is NCCL's: its PCI bus id names no GPU of this node.
  const std::string problem =
      size > 1 && in_local ? hop_problem(rank, prev, std::string(prev_bus.data())) : "";
  std::strncpy(mine.data(), problem.c_str(), mine.size() - 1);
  // Every rank learns the lowest ring rank's problem, so all decide alike and say the same.
  struct {
    int bad;
    int rank;
  } in{problem.empty() ? 0 : 1, rank}, out{};
  mpi(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, ring_comm), "MPI_Allreduce (probe)");
  if (out.bad == 0) return {true, ""};
  if (rank == out.rank) first = mine;
  mpi(MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_CHAR, out.rank, ring_comm),
      "MPI_Bcast (probe)");
  return {false, std::string(first.data())};
}

std::unique_ptr<RingTransport> make_copy_engine_transport(MPI_Comm ring_comm,
                                                          AttentionBackend& backend,
                                                          HopLinks links) {
  return std::make_unique<CopyEngineTransport>(ring_comm, backend, links);
}

}  // namespace rb::ring
