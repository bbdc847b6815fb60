#pragma once
// NVML loaded at run time (dlopen of libnvidia-ml.so.1, which comes with the driver, not the
// toolkit): no build dependency, and a machine without the driver still runs and says why.
// One NvmlLibrary is one nvmlInit/nvmlShutdown pair (NVML counts them, so several live
// libraries are fine: read_gpu_clocks and a Monitor's GPU series each hold one).
#include <string>

namespace rb {

// The NVML types and constants used here, declared by hand from the NVML API reference
// (nvml.h): there is no NVML header on a build machine without the driver.
namespace nvml {
using Return = int;  // nvmlReturn_t
using Device = struct nvmlDevice_st*;
constexpr Return kSuccess = 0;            // NVML_SUCCESS
constexpr Return kNotSupported = 3;       // NVML_ERROR_NOT_SUPPORTED
constexpr Return kFunctionNotFound = 13;  // NVML_ERROR_FUNCTION_NOT_FOUND
constexpr int kClockSm = 1;               // NVML_CLOCK_SM
constexpr int kClockMem = 2;              // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;        // NVML_TEMPERATURE_GPU
constexpr int kPcieTxBytes = 0;           // NVML_PCIE_UTIL_TX_BYTES
constexpr int kPcieRxBytes = 1;           // NVML_PCIE_UTIL_RX_BYTES
struct Utilization {                      // nvmlUtilization_t, percent
  unsigned int gpu, memory;
};
struct Memory {  // nvmlMemory_t (the v1 struct of nvmlDeviceGetMemoryInfo), bytes
  unsigned long long total, free, used;
};
}  // namespace nvml

class NvmlLibrary {
 public:
  NvmlLibrary();   // loads the library and calls nvmlInit_v2; ok() says whether both worked
  ~NvmlLibrary();  // nvmlShutdown when the init succeeded, then dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return error_.empty(); }
  // Why the library is not usable ("cannot load libnvidia-ml.so.1 (...)", "nvmlInit failed:
  // ..."); "" when ok().
  const std::string& error() const { return error_; }
  // An entry point, or nullptr when this NVML lacks it (or the library is not usable).
  template <class Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(raw_symbol(name));
  }
  std::string error_string(nvml::Return rc) const;  // nvmlErrorString, or the number
  // The device at `pci_bus_id`; nullptr and `why` set when there is none.
  nvml::Device device_by_bus_id(const std::string& pci_bus_id, std::string& why) const;

 private:
  void* raw_symbol(const char* name) const;
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string error_;
};

}  // namespace rb
