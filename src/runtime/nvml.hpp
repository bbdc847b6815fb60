#pragma once
// GPU SM clocks from NVML, loaded at run time (dlopen of libnvidia-ml.so.1, which comes with
// the driver, not the toolkit): no build dependency, and a machine without the driver still
// runs. Recorded per rank on /ranks, because a GPU held at a lower clock explains a slow rank.
// The loader itself (shared with the monitors) is NvmlLibrary in nvml_library.hpp.
#include <limits>
#include <string>

namespace rb {

struct GpuClocks {
  double sm_max_hz = std::numeric_limits<double>::quiet_NaN();      // NaN: unavailable
  double sm_current_hz = std::numeric_limits<double>::quiet_NaN();  // NaN: unavailable
  std::string note;  // "" when both were read; otherwise why not
};

// Clocks of the GPU at `pci_bus_id` ("0000:18:00.0"); an empty id (host path) is noted as such.
GpuClocks read_gpu_clocks(const std::string& pci_bus_id);

}  // namespace rb
