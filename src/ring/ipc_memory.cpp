#include "ring/ipc_memory.hpp"

#include <cuda.h>  // CUresult and CUdeviceptr only: the one driver call is found at run time

#include <stdexcept>

#include "runtime/cuda_check.hpp"

namespace rb::ring {
namespace {

// cuMemGetAddressRange through the runtime's driver entry point, so the program does not link
// libcuda (CI has no driver).
using GetRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
GetRange get_range() {
  static const GetRange fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    RB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000,
                                                   cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || f == nullptr)
      throw std::runtime_error("CUDA IPC: the driver has no cuMemGetAddressRange");
    return reinterpret_cast<GetRange>(f);
  }();
  return fn;
}

// The base of the allocation a device pointer lies in.
char* allocation_base(const void* p, const char* who) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (get_range()(&base, &size, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
    throw std::runtime_error(std::string(who) + ": not a device allocation (cuMemGetAddressRange)");
  return reinterpret_cast<char*>(base);
}

}  // namespace

IpcOffer ipc_offer(const void* buffer, std::size_t bytes, const char* who) {
  char* base = allocation_base(buffer, who);
  IpcOffer o{};
  RB_CUDA_CHECK(cudaIpcGetMemHandle(&o.memory, base));
  o.offset = static_cast<std::uint64_t>(static_cast<const char*>(buffer) - base);
  o.bytes = bytes;
  return o;
}

IpcMappings::~IpcMappings() {
  for (auto& [handle, base] : opened_) cudaIpcCloseMemHandle(base);
}

const char* IpcMappings::at(const IpcOffer& offer) {
  const std::string key(reinterpret_cast<const char*>(&offer.memory), sizeof offer.memory);
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    void* base = nullptr;
    RB_CUDA_CHECK(cudaIpcOpenMemHandle(&base, offer.memory, cudaIpcMemLazyEnablePeerAccess));
    it = opened_.emplace(key, static_cast<char*>(base)).first;
  }
  return it->second + offer.offset;
}

}  // namespace rb::ring
