#pragma once
// GPU selection and NCCL communicators. Compiled on every build: without CUDA the
// functions report zero GPUs and the constructors throw a clear "built without CUDA".
#include <memory>
#include <string>

#include <mpi.h>

namespace rb {

struct GpuInfo {
  int index = -1;  // CUDA device ordinal; -1 on the host path
  std::string name;
  std::string uuid;        // "GPU-xxxxxxxx-..."
  std::string pci_bus_id;  // "0000:18:00.0"
  std::size_t total_memory = 0;
  std::string arch;  // compute capability "major.minor" ("9.0" on H100 and H200); "" on the host
};

bool built_with_cuda();
int visible_gpu_count();  // 0 without CUDA, without a driver, or without devices

// Chooses device local_rank % count, makes it current, and describes it.
GpuInfo select_gpu(int local_rank);

// Every live NcclComm is in a process-wide registry (added on construction, removed on
// destruction), so the hang guard (app/watchdog.hpp) can abort them from its own thread:
// ncclCommAbort ends GPU work queued on a communicator whose peers are gone. A no-op without
// NCCL. Returns how many were aborted.
int abort_live_nccl_comms() noexcept;
int live_nccl_comm_count();

// A communicator's asynchronous state (ncclCommGetAsyncError, and ncclGetLastError's text when
// it failed), read under the registry's lock so that it cannot race an abort from another
// thread. `gone`: the registry no longer holds it (aborted, or destroyed), so the handle must
// not be used. Waits on NCCL work poll this (runtime/nccl_wait.hpp).
struct NcclCommHealth {
  bool gone = false;
  // With `gone`: the process is ending (the hang guard or a NCCL error watch aborted and is
  // about to exit with its own code), so a waiting thread should not race it with an error.
  bool ending = false;
  int code = 0;            // ncclResult_t: 0 ncclSuccess, 7 ncclInProgress, else an error
  std::string error;       // ncclGetErrorString(code)
  std::string last_error;  // ncclGetLastError(comm); may be empty
};
NcclCommHealth nccl_comm_health(void* comm);
// Aborts one live communicator and takes it out of the registry (its NcclComm then skips
// ncclCommDestroy). Returns false, doing nothing, when it is no longer live: neither an error
// path nor the hang guard ever aborts a handle twice.
bool abort_nccl_comm(void* comm) noexcept;
// Said by whoever aborts and then ends the process itself (abort_live_nccl_comms says it too).
void mark_nccl_process_ending() noexcept;

// Owns an ncclComm_t built from MPI: ncclGetUniqueId on rank 0 of `comm`, MPI_Bcast,
// ncclCommInitRank on every rank. Collective over `comm`.
class NcclComm {
 public:
  NcclComm();
  explicit NcclComm(MPI_Comm comm);
  // The ranks of `parent` with the same color, ordered by key, as one communicator, by
  // ncclCommSplit (NCCL >= 2.18): no unique id to broadcast and no bootstrap of its own, so a
  // ring of any size comes from the world communicator in far less time than an InitRank.
  // Collective over parent. A negative color takes this rank out (an empty NcclComm).
  static NcclComm split(const NcclComm& parent, int color, int key);
  // Whether split() works here: built against NCCL >= 2.18 and running on it (false without
  // CUDA). Otherwise ring communicators fall back to the InitRank constructor.
  static bool split_supported();
  // Seconds the creation took on this rank (InitRank or split), for the run's records.
  double creation_seconds() const { return creation_s_; }
  ~NcclComm();
  NcclComm(NcclComm&&) noexcept;
  NcclComm& operator=(NcclComm&&) noexcept;
  void* raw() const;  // ncclComm_t; void* keeps nccl.h out of this header
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  void* comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  double creation_s_ = 0.0;
};

}  // namespace rb
