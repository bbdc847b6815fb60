#include "runtime/nvml.hpp"

#include <dlfcn.h>

#include <cmath>
#include <memory>

namespace rb {
namespace {

// The few NVML entry points used here, declared by hand: there is no NVML header on a
// build machine without the driver. Signatures from the NVML API reference (nvml.h).
using nvmlReturn_t = int;           // NVML_SUCCESS == 0
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr int kNvmlClockSm = 1;     // NVML_CLOCK_SM
using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using HandleByBusIdFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using ClockFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);

struct LibraryCloser {
  void operator()(void* h) const {
    if (h) dlclose(h);
  }
};

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// nvmlInit/nvmlShutdown as a scope: NVML counts them, so every init is paired.
class NvmlSession {
 public:
  explicit NvmlSession(void* lib) : shutdown_(symbol<ShutdownFn>(lib, "nvmlShutdown")) {
    auto init = symbol<InitFn>(lib, "nvmlInit_v2");
    rc_ = init && shutdown_ ? init() : -1;
  }
  ~NvmlSession() {
    if (rc_ == 0) shutdown_();
  }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;
  int rc() const { return rc_; }

 private:
  ShutdownFn shutdown_;
  int rc_ = -1;
};

std::string nvml_error(void* lib, nvmlReturn_t rc) {
  auto text = symbol<ErrorStringFn>(lib, "nvmlErrorString");
  return text ? text(rc) : "NVML error " + std::to_string(rc);
}

}  // namespace

GpuClocks read_gpu_clocks(const std::string& pci_bus_id) {
  GpuClocks clocks;
  clocks.sm_max_hz = clocks.sm_current_hz = std::nan("");
  if (pci_bus_id.empty()) {
    clocks.note = "unavailable: no GPU (host path)";
    return clocks;
  }
  std::unique_ptr<void, LibraryCloser> lib(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    clocks.note = "unavailable: cannot load libnvidia-ml.so.1 (NVIDIA driver not installed?)";
    return clocks;
  }
  NvmlSession session(lib.get());
  if (session.rc() != 0) {
    clocks.note = "unavailable: nvmlInit failed: " + nvml_error(lib.get(), session.rc());
    return clocks;
  }
  auto by_bus = symbol<HandleByBusIdFn>(lib.get(), "nvmlDeviceGetHandleByPciBusId_v2");
  auto max_clock = symbol<ClockFn>(lib.get(), "nvmlDeviceGetMaxClockInfo");
  auto clock = symbol<ClockFn>(lib.get(), "nvmlDeviceGetClockInfo");
  if (!by_bus || !max_clock || !clock) {
    clocks.note = "unavailable: this NVML lacks the clock queries";
    return clocks;
  }
  nvmlDevice_t device = nullptr;
  if (const int rc = by_bus(pci_bus_id.c_str(), &device); rc != 0) {
    clocks.note = "unavailable: no NVML device at " + pci_bus_id + ": " + nvml_error(lib.get(), rc);
    return clocks;
  }
  unsigned int mhz = 0;
  if (const int rc = max_clock(device, kNvmlClockSm, &mhz); rc == 0) clocks.sm_max_hz = mhz * 1e6;
  else clocks.note = "max SM clock unavailable: " + nvml_error(lib.get(), rc);
  if (const int rc = clock(device, kNvmlClockSm, &mhz); rc == 0) clocks.sm_current_hz = mhz * 1e6;
  else clocks.note += (clocks.note.empty() ? "" : "; ") + std::string("current SM clock unavailable: ") +
                      nvml_error(lib.get(), rc);
  return clocks;
}

}  // namespace rb
