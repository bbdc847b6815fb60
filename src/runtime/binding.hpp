#pragma once
// CPU and memory binding. Decisions are pure functions of a MachineModel (NUMA domains,
// their cores and PUs, and which NUMA domain each GPU hangs under), so they are tested on
// hwloc XML exports and synthetic machines; Topology turns a real or XML hwloc topology
// into that model and applies a decision to the calling process.
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace rb {

struct NumaDomain {
  int os_index = -1;
  std::vector<std::vector<int>> cores;  // each core: its PU os indices
};

struct MachineModel {
  std::vector<NumaDomain> numa;  // in topology order
  std::vector<int> gpu_numa;     // index = GPU index, value = NumaDomain position (-1 unknown)
  std::vector<std::string> gpu_names;        // hwloc OS device names ("cuda0", "nvml3", ...)
  std::vector<std::string> gpu_pci_bus_ids;  // "0000:b7:00.0" per GPU; empty string if unknown
};

struct BindingDecision {
  BindingPolicy policy = BindingPolicy::None;
  std::vector<int> pus;     // PU os indices to bind to; empty = leave unbound
  int numa_os_index = -1;   // memory binding target; -1 = none
  std::string explanation;  // one line, for the header and the log
};

// Pure decision. local_rank/local_size: position of this rank on its node; gpu_index: the
// GPU this rank drives (-1 on the host path). Ranks spread evenly over NUMA domains for `numa`;
// `core` gives each local rank a disjoint, contiguous set of cores; `gpu-near` uses the NUMA
// domain of the rank's GPU (falling back to `numa` with an explanation when unknown).
BindingDecision decide_binding(const MachineModel& machine, BindingPolicy policy, int local_rank,
                               int local_size, int gpu_index);

// "0-3,8-11" style list of PU indices.
std::string format_cpu_list(const std::vector<int>& pus);

// Non-empty (one line, with advice) when the launcher had already bound the process
// (cpuset_before differs from the whole machine's cpuset) and ringbench chose something else;
// empty when unbound before, when ringbench leaves the binding alone, or when they agree.
std::string launcher_binding_warning(const std::string& cpuset_before,
                                     const std::string& machine_cpuset,
                                     const BindingDecision& decision);

// The hwloc library this process runs with ("2.9.0"), for the run's provenance.
std::string hwloc_library_version();

class Topology {
 public:
  static Topology load_this_machine();
  static Topology load_xml(const std::string& path);               // keeps I/O objects (GPUs)
  static Topology load_synthetic(const std::string& description);  // hwloc synthetic syntax
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  MachineModel model() const;
  // Same NUMA domains, but GPU i is the PCI device pci_bus_ids[i] (as cudaDeviceGetPCIBusId
  // gives it), so CUDA ordinals renumbered by CUDA_VISIBLE_DEVICES still find their NUMA
  // domain; gpu_names are the bus ids. A bus id not in the topology gets domain -1.
  MachineModel model_for_gpus(const std::vector<std::string>& pci_bus_ids) const;
  // Binds the calling process (CPU and memory). Returns the effective cpuset afterwards.
  // A failed CPU binding throws; a failed memory binding (unsupported, not permitted) is not
  // fatal: it is reported through *warning, or on stderr when warning is null.
  std::string apply(const BindingDecision& decision, std::string* warning = nullptr) const;
  std::string machine_cpuset() const;  // list form of all PUs this process may use
  std::string current_cpuset() const;  // list form of the process binding
  int current_numa_node() const;       // NUMA os index covering the current cpuset, -1 if several

 private:
  struct Impl;
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rb
