#pragma once
// CUDA IPC of device memory between the ranks' processes, for the copy-engine transports
// (ce_transport, ce_group_transport; CUDA builds): what a rank offers its peers (the allocation
// holding a buffer: IPC handles name whole allocations) and the peers' allocations, opened once
// each and closed with their holder.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace rb::ring {

// What a rank tells a peer about a device buffer to pull from (sent as plain bytes over MPI).
struct IpcOffer {
  cudaIpcMemHandle_t memory;
  std::uint64_t offset = 0;  // of the buffer in its allocation
  std::uint64_t bytes = 0;
};

// The offer of `bytes` at device pointer `buffer`; `who` names the caller in errors.
IpcOffer ipc_offer(const void* buffer, std::size_t bytes, const char* who);

// The peers' allocations opened in this process, by handle.
class IpcMappings {
 public:
  IpcMappings() = default;
  IpcMappings(const IpcMappings&) = delete;
  IpcMappings& operator=(const IpcMappings&) = delete;
  ~IpcMappings();
  // The offered buffer in this process's address space (its allocation opened on first use).
  const char* at(const IpcOffer& offer);

 private:
  std::map<std::string, char*> opened_;
};

}  // namespace rb::ring
