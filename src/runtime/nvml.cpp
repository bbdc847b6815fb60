#include "runtime/nvml.hpp"

#include <dlfcn.h>

#include <cmath>

#include "runtime/nvml_library.hpp"

namespace rb {
namespace {

using InitFn = nvml::Return (*)();
using ShutdownFn = nvml::Return (*)();
using ErrorStringFn = const char* (*)(nvml::Return);
using HandleByBusIdFn = nvml::Return (*)(const char*, nvml::Device*);
using ClockFn = nvml::Return (*)(nvml::Device, int, unsigned int*);

std::string load_error() {
  const char* detail = dlerror();
  return std::string("cannot load libnvidia-ml.so.1 (NVIDIA driver not installed?)") +
         (detail ? std::string(": ") + detail : "");
}

}  // namespace

NvmlLibrary::NvmlLibrary() {
  handle_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    error_ = load_error();
    return;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(handle_, "nvmlInit_v2"));
  if (!init || !dlsym(handle_, "nvmlShutdown")) {
    error_ = "libnvidia-ml.so.1 has no nvmlInit_v2/nvmlShutdown";
    return;
  }
  if (const nvml::Return rc = init(); rc != nvml::kSuccess) {
    error_ = "nvmlInit failed: " + error_string(rc);
    return;
  }
  initialised_ = true;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) reinterpret_cast<ShutdownFn>(dlsym(handle_, "nvmlShutdown"))();
  if (handle_) dlclose(handle_);
}

void* NvmlLibrary::raw_symbol(const char* name) const {
  return initialised_ ? dlsym(handle_, name) : nullptr;
}

std::string NvmlLibrary::error_string(nvml::Return rc) const {
  // Readable before the init succeeded too: it explains a failed nvmlInit.
  auto text =
      handle_ ? reinterpret_cast<ErrorStringFn>(dlsym(handle_, "nvmlErrorString")) : nullptr;
  return text ? text(rc) : "NVML error " + std::to_string(rc);
}

nvml::Device NvmlLibrary::device_by_bus_id(const std::string& pci_bus_id, std::string& why) const {
  auto by_bus = symbol<HandleByBusIdFn>("nvmlDeviceGetHandleByPciBusId_v2");
  if (!ok() || !by_bus) {
    why = ok() ? "this NVML lacks nvmlDeviceGetHandleByPciBusId_v2" : error_;
    return nullptr;
  }
  nvml::Device device = nullptr;
  if (const nvml::Return rc = by_bus(pci_bus_id.c_str(), &device); rc != nvml::kSuccess) {
    why = "no NVML device at " + pci_bus_id + ": " + error_string(rc);
    return nullptr;
  }
  return device;
}

GpuClocks read_gpu_clocks(const std::string& pci_bus_id) {
  GpuClocks clocks;
  clocks.sm_max_hz = clocks.sm_current_hz = std::nan("");
  if (pci_bus_id.empty()) {
    clocks.note = "unavailable: no GPU (host path)";
    return clocks;
  }
  const NvmlLibrary lib;
  std::string why;
  const nvml::Device device = lib.device_by_bus_id(pci_bus_id, why);
  if (!device) {
    clocks.note = "unavailable: " + why;
    return clocks;
  }
  auto max_clock = lib.symbol<ClockFn>("nvmlDeviceGetMaxClockInfo");
  auto clock = lib.symbol<ClockFn>("nvmlDeviceGetClockInfo");
  if (!max_clock || !clock) {
    clocks.note = "unavailable: this NVML lacks the clock queries";
    return clocks;
  }
  unsigned int mhz = 0;
  if (const int rc = max_clock(device, nvml::kClockSm, &mhz); rc == 0)
    clocks.sm_max_hz = mhz * 1e6;
  else
    clocks.note = "max SM clock unavailable: " + lib.error_string(rc);
  if (const int rc = clock(device, nvml::kClockSm, &mhz); rc == 0)
    clocks.sm_current_hz = mhz * 1e6;
  else
    clocks.note += (clocks.note.empty() ? "" : "; ") +
                   std::string("current SM clock unavailable: ") + lib.error_string(rc);
  return clocks;
}

}  // namespace rb
