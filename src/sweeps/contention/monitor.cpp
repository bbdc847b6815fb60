#include "sweeps/contention/monitor.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace rb::contention {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::int64_t max_over_ranks(std::int64_t mine, MPI_Comm world) {
  std::int64_t all = 0;
  RB_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_MAX, world));
  return all;
}

// One number per sample, padded with NaN to `t` samples.
std::vector<double> series(const std::vector<MonitorSample>& s, std::size_t t,
                           const std::function<double(const MonitorSample&)>& value) {
  std::vector<double> out(t, kNaN);
  for (std::size_t i = 0; i < s.size() && i < t; ++i) out[i] = value(s[i]);
  return out;
}

// `width` numbers per sample, row-major [t, width], NaN where a sample has fewer.
std::vector<double> wide_series(const std::vector<MonitorSample>& s, std::size_t t,
                                std::size_t width, std::vector<double> NodeSample::*row) {
  std::vector<double> out(t * width, kNaN);
  for (std::size_t i = 0; i < s.size() && i < t; ++i) {
    const std::vector<double>& r = s[i].node.*row;
    std::copy_n(r.begin(), std::min(r.size(), width),
                out.begin() + static_cast<std::ptrdiff_t>(i * width));
  }
  return out;
}

struct GpuField {
  const char* name;
  double GpuSample::*member;
  const char* units;
  const char* description;
};

const std::vector<GpuField>& gpu_fields() {
  static const std::vector<GpuField> fields = {
      {"sm_clock_hz", &GpuSample::sm_clock_hz, "Hz", "SM clock (NVML)"},
      {"mem_clock_hz", &GpuSample::mem_clock_hz, "Hz", "memory clock (NVML)"},
      {"power_w", &GpuSample::power_w, "W", "board power draw (NVML)"},
      {"energy_j", &GpuSample::energy_j, "J",
       "energy counter since the driver loaded (NVML); differences count"},
      {"temperature_c", &GpuSample::temperature_c, "degC", "GPU temperature (NVML)"},
      {"gpu_util", &GpuSample::gpu_util, "1", "fraction of NVML's last period a kernel ran"},
      {"mem_util", &GpuSample::mem_util, "1",
       "fraction of NVML's last period device memory was read or written"},
      {"throttle_reasons", &GpuSample::throttle_reasons, "1",
       "NVML clocks-event (throttle) reason bitmask, as a number"},
      {"pcie_tx_Bps", &GpuSample::pcie_tx_Bps, "B/s",
       "PCIe transmit throughput (NVML, ~20 ms window)"},
      {"pcie_rx_Bps", &GpuSample::pcie_rx_Bps, "B/s",
       "PCIe receive throughput (NVML, ~20 ms window)"},
      {"memory_used_bytes", &GpuSample::memory_used_bytes, "B", "device memory in use (NVML)"},
  };
  return fields;
}

struct ProcessField {
  const char* name;
  double ProcessSample::*member;
  const char* description;
};

const std::vector<ProcessField>& process_fields() {
  static const std::vector<ProcessField> fields = {
      {"voluntary_switches", &ProcessSample::voluntary_switches,
       "this process's voluntary context switches so far (/proc/self/status)"},
      {"involuntary_switches", &ProcessSample::involuntary_switches,
       "this process's involuntary context switches so far (/proc/self/status)"},
      {"migrations", &ProcessSample::migrations,
       "this process's CPU migrations so far (/proc/self/sched se.nr_migrations)"},
  };
  return fields;
}

// The node's series (local rank 0 records them): a column per CPU or per NUMA node.
struct NodeField {
  const char* name;
  std::vector<double> NodeSample::*member;
  bool per_cpu;  // else per NUMA node
  const char* description;
};

const std::vector<NodeField>& node_fields() {
  static const std::vector<NodeField> fields = {
      {"cpu_busy", &NodeSample::cpu_busy, true,
       "busy fraction of each CPU (os index) since the previous sample (/proc/stat)"},
      {"numa_hit", &NodeSample::numa_hit, false,
       "numa_hit counter (pages) of each NUMA node (numastat)"},
      {"numa_miss", &NodeSample::numa_miss, false,
       "numa_miss counter (pages) of each NUMA node (numastat)"},
  };
  return fields;
}

h5::Meta metric(const std::string& units, const std::string& description) {
  return {units, description, "metric"};
}

void write_who(h5::Group& g, const Monitor& m, const MonitorOptions& o, double stop_s,
               std::size_t samples) {
  g.write_per_rank_string(
      "gpu_pci_bus_id", o.gpu_pci_bus_id,
      {"1", "GPU whose series this rank recorded (the lowest local rank driving it); empty: none",
       "key"});
  g.write_per_rank(
      "watches_node", static_cast<std::int64_t>(o.node ? 1 : 0),
      {"1", "1: this rank recorded the node series (cpu_busy, numa_*): local rank 0", "key"});
  g.write_per_rank("samples", static_cast<std::int64_t>(samples),
                   metric("1", "samples this rank's monitor took (rows past it are NaN padding)"));
  g.write_per_rank(
      "stop_s", stop_s,
      metric("s", "Monitor::now() when this rank's monitor stopped, after the last phase"));
  g.write_per_rank_string(
      "unavailable", cfg::join(m.unavailable(), "\n"),
      metric("1", "metric families unavailable on this rank and why, one per line"));
}

}  // namespace

MonitorOptions monitor_options(const RunContext& ctx, double interval_s) {
  MonitorOptions o;
  o.interval_s = interval_s;
  o.node = ctx.layout.local_rank == 0;
  const std::string bus = ctx.gpu != nullptr ? ctx.gpu->gpu.pci_bus_id : "";
  MPI_Comm raw = MPI_COMM_NULL;
  RB_MPI_CHECK(MPI_Comm_split(ctx.world, ctx.layout.node_index, ctx.layout.rank, &raw));
  const Comm node(raw);
  // Ranks sharing a GPU would each record the same series; the lowest local one does.
  const auto buses = mpi::gather_strings(bus, node.get());
  const auto mine = buses.begin() + node.rank();
  if (!bus.empty() && std::find(buses.begin(), mine, bus) == mine) o.gpu_pci_bus_id = bus;
  return o;
}

void write_monitor(h5::Group& sweep, const Monitor& monitor, const MonitorOptions& options,
                   double stop_s, MPI_Comm world) {
  const std::vector<MonitorSample> s = monitor.samples();
  // At least one row and column everywhere: HDF5 datasets of every rank need the same shape.
  const auto t = static_cast<std::size_t>(
      std::max<std::int64_t>(1, max_over_ranks(static_cast<std::int64_t>(s.size()), world)));
  const auto c = static_cast<std::size_t>(
      std::max<std::int64_t>(1, max_over_ranks(monitor.cpu_count(), world)));
  const auto n = static_cast<std::size_t>(
      std::max<std::int64_t>(1, max_over_ranks(monitor.numa_count(), world)));
  h5::Group g = sweep.group("monitor");
  g.attr("interval_s", options.interval_s);
  g.write_per_rank(
      "t_s", series(s, t, [](const MonitorSample& x) { return x.t_s; }), {t},
      metric(
          "s",
          "sample time: seconds since this rank's monitor started (the clock of phase_start_s)"));
  for (const GpuField& f : gpu_fields())
    g.write_per_rank(f.name, series(s, t, [&f](const MonitorSample& x) { return x.gpu.*f.member; }),
                     {t},
                     metric(f.units, std::string(f.description) +
                                         "; NaN on ranks not watching a GPU or when unavailable"));
  for (const ProcessField& f : process_fields())
    g.write_per_rank(f.name,
                     series(s, t, [&f](const MonitorSample& x) { return x.process.*f.member; }),
                     {t}, metric("1", std::string(f.description) + "; NaN when unavailable"));
  for (const NodeField& f : node_fields()) {
    const std::size_t width = f.per_cpu ? c : n;
    g.write_per_rank(f.name, wide_series(s, t, width, f.member), {t, width},
                     metric("1", std::string(f.description) + "; local rank 0 only"));
  }
  write_who(g, monitor, options, stop_s, s.size());
}

}  // namespace rb::contention
