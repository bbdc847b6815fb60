#pragma once
// Monitors sampled by a background thread while a sweep runs (the contention sweep): the GPU
// through NVML (loaded at run time, like nvml.hpp), the node through /proc and /sys, and this
// process's scheduling counters. A value the driver or kernel does not offer is NaN (and the
// reason is in `unavailable`), never made up. Samples carry seconds since the monitor's start
// on the steady clock, the same clock the sweep stamps its phases with (Monitor::now()).
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace rb {

// The node's CPU time so far from /proc/stat (jiffies, every CPU): busy = all but idle and
// iowait (steal, the hypervisor's, counts as busy). cpus == 0 when /proc/stat is unreadable.
struct NodeCpuJiffies {
  double busy = 0, total = 0;
  int cpus = 0;
};
NodeCpuJiffies node_cpu_jiffies();

// One GPU reading. Rates (PCIe) as NVML reports them (a ~20 ms window); energy is the
// driver's counter since it loaded, so differences between samples are what count.
// Every field defaults to NaN (not read).
struct GpuSample {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double sm_clock_hz = kNaN, mem_clock_hz = kNaN, power_w = kNaN, energy_j = kNaN,
         temperature_c = kNaN;
  double gpu_util = kNaN, mem_util = kNaN;  // fractions 0..1 over NVML's last sample period
  double throttle_reasons = kNaN;           // NVML clocks-event/throttle bitmask as a number
  double pcie_tx_Bps = kNaN, pcie_rx_Bps = kNaN, memory_used_bytes = kNaN;
};

// One node reading: busy fraction of each CPU since the previous sample (/proc/stat; NaN in
// the first sample, which has no previous one), and the NUMA allocation counters of each node
// (/sys/devices/system/node/node*/numastat). A busy fraction covers (previous t_s, t_s].
struct NodeSample {
  std::vector<double> cpu_busy;             // per CPU (os index order)
  std::vector<double> numa_hit, numa_miss;  // per NUMA node, counters (pages)
};

// This process: context switches (/proc/self/status) and CPU migrations (/proc/self/sched,
// se.nr_migrations; NaN where the kernel hides it). Both files describe the process's main
// thread (the one that measures), so the monitor thread's own wake-ups are not in them.
// Counters since the thread started; every field defaults to NaN.
struct ProcessSample {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double voluntary_switches = kNaN, involuntary_switches = kNaN, migrations = kNaN;
};

struct MonitorSample {
  double t_s;  // seconds since Monitor::start
  ProcessSample process;
  GpuSample gpu;    // all NaN when this monitor does not watch a GPU
  NodeSample node;  // empty when this monitor does not watch the node
};

struct MonitorOptions {
  double interval_s = 0.1;
  std::string gpu_pci_bus_id;  // "" : no GPU series
  bool node = false;           // the node series (one rank per node asks for them)
};

class Monitor {
 public:
  explicit Monitor(MonitorOptions options);
  ~Monitor();  // stops the thread
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  void start();  // once per Monitor (a second call throws std::logic_error); first sample at t~0
  void stop();   // idempotent; after it, samples() is complete
  double now() const;  // seconds since start() (before start(): since construction), any thread
  std::vector<MonitorSample> samples() const;
  // One line per metric family that is unavailable here and why ("gpu: cannot load
  // libnvidia-ml.so.1", "migrations: /proc/self/sched has no se.nr_migrations", ...).
  std::vector<std::string> unavailable() const;
  int cpu_count() const;              // width of NodeSample::cpu_busy (0 without the node series)
  int numa_count() const;             // width of numa_hit / numa_miss
  std::vector<int> cpu_ids() const;   // OS index of each cpu_busy column (cpuN of /proc/stat)
  std::vector<int> numa_ids() const;  // node number of each numa_hit / numa_miss column

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rb
