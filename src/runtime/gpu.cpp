#include "runtime/gpu.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <mutex>
#include <vector>
#include <stdexcept>
#include <string>

#include "runtime/cuda_check.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {

namespace {
// The registry of live communicators (raw ncclComm_t as void*).
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<void*>& registry() {
  static std::vector<void*> comms;
  return comms;
}
[[maybe_unused]] void register_comm(void* c) {
  if (c == nullptr) return;
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(c);
}
// Returns whether `c` was still live (not aborted by an error path or the hang guard).
[[maybe_unused]] bool unregister_comm(void* c) {
  if (c == nullptr) return false;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  const auto it = std::find(r.begin(), r.end(), c);
  if (it == r.end()) return false;
  r.erase(it);
  return true;
}
std::atomic<bool>& process_ending() {
  static std::atomic<bool> ending{false};
  return ending;
}
// Called with the registry's lock held.
[[maybe_unused]] bool is_live(void* c) {
  const auto& r = registry();
  return c != nullptr && std::find(r.begin(), r.end(), c) != r.end();
}
}  // namespace

void mark_nccl_process_ending() noexcept {
  process_ending().store(true);
}

int live_nccl_comm_count() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return static_cast<int>(registry().size());
}

#ifdef RINGBENCH_HAVE_CUDA

bool built_with_cuda() {
  return true;
}

int visible_gpu_count() {
  int count = 0;
  // No driver, no device or a driver too old for this runtime all mean "no usable GPU" here;
  // the caller then picks the host path instead of failing.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

namespace {
std::string format_uuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}
}  // namespace

GpuInfo select_gpu(int local_rank) {
  const int count = visible_gpu_count();
  if (count == 0)
    throw std::runtime_error("select_gpu: no CUDA device is visible on rank " +
                             std::to_string(mpi::world_rank_or_minus_one()) +
                             " (check the driver and CUDA_VISIBLE_DEVICES)");
  if (local_rank < 0)
    throw std::runtime_error("select_gpu: negative local rank " + std::to_string(local_rank));
  GpuInfo info;
  info.index = local_rank % count;
  RB_CUDA_CHECK(cudaSetDevice(info.index));
  cudaDeviceProp prop{};
  RB_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.index));
  info.name = prop.name;
  info.uuid = format_uuid(prop.uuid);
  info.total_memory = prop.totalGlobalMem;
  info.arch = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  char bus[32] = {0};
  RB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus - 1, info.index));
  info.pci_bus_id = bus;
  // CUDA prints the domain as 8 hex digits ("00000000:18:00.0"); hwloc and nvidia-smi's
  // short form use 4, which is what the /ranks table and hwloc lookups expect.
  if (info.pci_bus_id.size() == 16 && info.pci_bus_id.compare(0, 4, "0000") == 0)
    info.pci_bus_id = info.pci_bus_id.substr(4);
  for (auto& c : info.pci_bus_id)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return info;
}

NcclComm::NcclComm() = default;

NcclComm::NcclComm(MPI_Comm comm) {
  RB_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  RB_MPI_CHECK(MPI_Comm_size(comm, &size_));
  ncclUniqueId id{};
  if (rank_ == 0) RB_NCCL_CHECK(ncclGetUniqueId(&id));
  RB_MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm));
  ncclComm_t c = nullptr;
  const double t0 = MPI_Wtime();
  RB_NCCL_CHECK(ncclCommInitRank(&c, size_, id, rank_));
  creation_s_ = MPI_Wtime() - t0;
  comm_ = c;
  register_comm(comm_);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
bool NcclComm::split_supported() {
  int version = 0;
  return ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 18, 0);
}

NcclComm NcclComm::split(const NcclComm& parent, int color, int key) {
  if (parent.comm_ == nullptr)
    throw std::runtime_error("NCCL communicator split: the parent communicator is empty");
  ncclComm_t c = nullptr;
  const double t0 = MPI_Wtime();
  RB_NCCL_CHECK(ncclCommSplit(static_cast<ncclComm_t>(parent.comm_),
                              color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c, nullptr));
  NcclComm out;
  out.creation_s_ = MPI_Wtime() - t0;
  if (c == nullptr) return out;  // this rank is in no group
  out.comm_ = c;
  int n = 0, r = 0;
  RB_NCCL_CHECK(ncclCommCount(c, &n));
  RB_NCCL_CHECK(ncclCommUserRank(c, &r));
  out.size_ = n;
  out.rank_ = r;
  register_comm(out.comm_);
  return out;
}
#else  // NCCL older than 2.18: no ncclCommSplit
bool NcclComm::split_supported() {
  return false;
}

NcclComm NcclComm::split(const NcclComm&, int, int) {
  throw std::runtime_error("NCCL communicator split needs NCCL >= 2.18 (built against " +
                           std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + ")");
}
#endif

NcclComm::~NcclComm() {
  // Destroy, not abort: every rank reaches here after its collectives completed. An aborted
  // communicator is already freed (ncclCommAbort releases it): nothing left to destroy.
  if (unregister_comm(comm_)) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

int abort_live_nccl_comms() noexcept {
  mark_nccl_process_ending();  // only the hang guard calls this, and it exits right after
  // The lock is held through the aborts so that a destructor on the main thread cannot
  // destroy a communicator being aborted (it waits; the process ends right after anyway).
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (void* c : registry()) ncclCommAbort(static_cast<ncclComm_t>(c));
  const int count = static_cast<int>(registry().size());
  registry().clear();
  return count;
}

bool abort_nccl_comm(void* comm) noexcept {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (!is_live(comm)) return false;
  ncclCommAbort(static_cast<ncclComm_t>(comm));
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), comm), r.end());
  return true;
}

NcclCommHealth nccl_comm_health(void* comm) {
  NcclCommHealth h;
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (!is_live(comm)) {
    h.gone = true;
    h.ending = process_ending().load();
    return h;
  }
  const auto c = static_cast<ncclComm_t>(comm);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(c, &async);
  // A failing query is itself the communicator's error to report.
  h.code = static_cast<int>(asked != ncclSuccess ? asked : async);
  if (h.code != ncclSuccess && h.code != ncclInProgress) {
    h.error = ncclGetErrorString(static_cast<ncclResult_t>(h.code));
    const char* last = ncclGetLastError(c);
    h.last_error = last != nullptr ? last : "";
  }
  return h;
}

#else  // host-only build

bool built_with_cuda() {
  return false;
}
int visible_gpu_count() {
  return 0;
}

GpuInfo select_gpu(int) {
  throw std::runtime_error(
      "ringbench was built without CUDA/NCCL; select_gpu is unavailable (rebuild with "
      "-DRINGBENCH_ENABLE_CUDA=ON, or use backend: host)");
}

NcclComm::NcclComm() = default;

NcclComm::NcclComm(MPI_Comm) {
  throw std::runtime_error(
      "ringbench was built without CUDA/NCCL; NCCL communicators are unavailable (rebuild with "
      "-DRINGBENCH_ENABLE_CUDA=ON, or use backend: host)");
}

bool NcclComm::split_supported() {
  return false;
}

NcclComm NcclComm::split(const NcclComm&, int, int) {
  throw std::runtime_error(
      "ringbench was built without CUDA/NCCL; NCCL communicators are unavailable (rebuild with "
      "-DRINGBENCH_ENABLE_CUDA=ON, or use backend: host)");
}

NcclComm::~NcclComm() = default;

int abort_live_nccl_comms() noexcept {
  return 0;
}
bool abort_nccl_comm(void*) noexcept {
  return false;
}

NcclCommHealth nccl_comm_health(void*) {
  // Without NCCL no communicator is ever live.
  NcclCommHealth h;
  h.gone = true;
  h.ending = process_ending().load();
  return h;
}

#endif

NcclComm::NcclComm(NcclComm&& o) noexcept
    : comm_(o.comm_), rank_(o.rank_), size_(o.size_), creation_s_(o.creation_s_) {
  o.comm_ = nullptr;
  o.rank_ = 0;
  o.size_ = 0;
}

NcclComm& NcclComm::operator=(NcclComm&& o) noexcept {
  if (this != &o) {
    NcclComm dying(std::move(*this));
    comm_ = o.comm_;
    rank_ = o.rank_;
    size_ = o.size_;
    creation_s_ = o.creation_s_;
    o.comm_ = nullptr;
    o.rank_ = 0;
    o.size_ = 0;
  }
  return *this;
}

void* NcclComm::raw() const {
  return comm_;
}

}  // namespace rb
