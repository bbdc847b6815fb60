#include "runtime/monitor.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <dirent.h>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "runtime/nvml_library.hpp"

namespace rb {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The `unavailable` lines: each reason once, however many samples meet it. Written by the
// constructor and the sampling thread, read by any thread.
class Notes {
 public:
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (seen_.insert(line).second) lines_.push_back(line);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::string> seen_;
  std::vector<std::string> lines_;
};

bool read_text(const std::string& path, std::string& text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  text = all.str();
  return true;
}

// The number after `key` on the line that starts with it, the key followed by blanks or a
// colon: fits /proc/self/status ("key:\t12"), /proc/self/sched ("key   :   12") and numastat
// ("key 12"). NaN when no such line.
double keyed_value(const std::string& text, const std::string& key) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, key.size(), key) == 0 && at + key.size() < end) {
      const char after = text[at + key.size()];
      if (after == ' ' || after == '\t' || after == ':') {
        const char* begin = text.c_str() + at + key.size();
        while (*begin == ' ' || *begin == '\t' || *begin == ':') ++begin;
        char* stop = nullptr;
        const double value = std::strtod(begin, &stop);
        if (stop != begin) return value;
      }
    }
    at = end + 1;
  }
  return kNaN;
}

// ---- this process ----

ProcessSample read_process(Notes& notes) {
  ProcessSample s;
  std::string status, sched;
  if (read_text("/proc/self/status", status)) {
    s.voluntary_switches = keyed_value(status, "voluntary_ctxt_switches");
    s.involuntary_switches = keyed_value(status, "nonvoluntary_ctxt_switches");
  }
  if (std::isnan(s.voluntary_switches) || std::isnan(s.involuntary_switches))
    notes.add(
        "context switches: /proc/self/status has no "
        "voluntary_ctxt_switches/nonvoluntary_ctxt_switches");
  if (!read_text("/proc/self/sched", sched))
    notes.add("migrations: cannot read /proc/self/sched (kernel without CONFIG_SCHED_DEBUG?)");
  else if (std::isnan(s.migrations = keyed_value(sched, "se.nr_migrations")))
    notes.add("migrations: /proc/self/sched has no se.nr_migrations");
  return s;
}

// ---- the node ----

// Jiffies of one CPU from a /proc/stat line: busy = all but idle and iowait. guest and
// guest_nice are already inside user and nice, so they are not added again.
struct CpuTimes {
  int id = -1;
  double busy = 0, total = 0;
};

std::vector<CpuTimes> read_cpu_times() {
  std::vector<CpuTimes> cpus;
  std::string text;
  if (!read_text("/proc/stat", text)) return cpus;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, 3, "cpu") != 0 || line.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(line[3])))
      continue;  // the aggregate "cpu " line and everything else
    std::istringstream fields(line.substr(3));
    CpuTimes cpu;
    fields >> cpu.id;
    double value = 0;
    for (int field = 0; field < 8 && fields >> value; ++field) {  // user .. steal
      cpu.total += value;
      if (field != 3 && field != 4) cpu.busy += value;  // 3: idle, 4: iowait
    }
    cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> numa_node_ids() {
  std::vector<int> ids;
  if (DIR* dir = opendir("/sys/devices/system/node")) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
          name.find_first_not_of("0123456789", 4) == std::string::npos)
        ids.push_back(std::stoi(name.substr(4)));
    }
    closedir(dir);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

class NodeReader {
 public:
  explicit NodeReader(Notes& notes) : notes_(notes) {
    for (const CpuTimes& cpu : read_cpu_times()) cpu_ids.push_back(cpu.id);
    if (cpu_ids.empty()) notes_.add("cpu_busy: cannot read per-CPU lines from /proc/stat");
    numa_ids = numa_node_ids();
    if (numa_ids.empty())
      notes_.add("numa: no /sys/devices/system/node/node* (kernel without NUMA?)");
  }
  NodeSample read();

  std::vector<int> cpu_ids, numa_ids;  // fixed at construction: the columns of every sample

 private:
  std::vector<double> busy_since_previous();
  Notes& notes_;
  std::vector<CpuTimes> previous_;  // by column; empty before the first reading
};

// Busy fraction of each column's CPU since the previous reading. NaN for the first reading,
// for a CPU that went offline, and where no time passed (nothing to divide by).
std::vector<double> NodeReader::busy_since_previous() {
  std::vector<CpuTimes> now(cpu_ids.size());
  for (const CpuTimes& cpu : read_cpu_times()) {
    const auto at = std::find(cpu_ids.begin(), cpu_ids.end(), cpu.id);
    if (at != cpu_ids.end()) now[at - cpu_ids.begin()] = cpu;
  }
  std::vector<double> busy(cpu_ids.size(), kNaN);
  for (std::size_t c = 0; c < now.size() && !previous_.empty(); ++c) {
    const double total = now[c].total - previous_[c].total;
    if (now[c].id >= 0 && previous_[c].id >= 0 && total > 0)
      busy[c] = std::clamp((now[c].busy - previous_[c].busy) / total, 0.0, 1.0);
  }
  previous_ = std::move(now);
  return busy;
}

NodeSample NodeReader::read() {
  NodeSample s;
  s.cpu_busy = busy_since_previous();
  for (const int node : numa_ids) {
    const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/numastat";
    std::string text;
    const bool found = read_text(path, text);
    s.numa_hit.push_back(found ? keyed_value(text, "numa_hit") : kNaN);
    s.numa_miss.push_back(found ? keyed_value(text, "numa_miss") : kNaN);
    if (!found)
      notes_.add("numa: cannot read " + path);
    else if (std::isnan(s.numa_hit.back()) || std::isnan(s.numa_miss.back()))
      notes_.add("numa: " + path + " has no numa_hit/numa_miss");
  }
  return s;
}

// ---- the GPU ----

using ClockFn = nvml::Return (*)(nvml::Device, int, unsigned int*);
using UintFn = nvml::Return (*)(nvml::Device, unsigned int*);
using UllFn = nvml::Return (*)(nvml::Device, unsigned long long*);
using TemperatureFn = nvml::Return (*)(nvml::Device, int, unsigned int*);
using UtilizationFn = nvml::Return (*)(nvml::Device, nvml::Utilization*);
using PcieFn = nvml::Return (*)(nvml::Device, int, unsigned int*);
using MemoryFn = nvml::Return (*)(nvml::Device, nvml::Memory*);

// One GPU metric family (one NVML query). `off`: absent or unsupported, NaN for good.
struct Query {
  const char* metric;
  const char* entry;
  bool off = false;
};

class GpuReader {
 public:
  GpuReader(const std::string& pci_bus_id, Notes& notes);
  GpuSample read();

 private:
  template <class Fn>
  Fn find(Query& query, const char* fallback = nullptr);
  bool accept(Query& query, nvml::Return rc);
  void read_clocks_power(GpuSample& s);
  void read_activity(GpuSample& s);

  Notes& notes_;
  NvmlLibrary lib_;
  nvml::Device device_ = nullptr;
  Query sm_clock_{"sm_clock_hz", "nvmlDeviceGetClockInfo"};
  Query mem_clock_{"mem_clock_hz", "nvmlDeviceGetClockInfo"};
  Query power_{"power_w", "nvmlDeviceGetPowerUsage"};
  Query energy_{"energy_j", "nvmlDeviceGetTotalEnergyConsumption"};
  Query temperature_{"temperature_c", "nvmlDeviceGetTemperature"};
  Query utilization_{"gpu_util/mem_util", "nvmlDeviceGetUtilizationRates"};
  Query throttle_{"throttle_reasons", "nvmlDeviceGetCurrentClocksEventReasons"};
  Query pcie_tx_{"pcie_tx_Bps", "nvmlDeviceGetPcieThroughput"};
  Query pcie_rx_{"pcie_rx_Bps", "nvmlDeviceGetPcieThroughput"};
  Query memory_{"memory_used_bytes", "nvmlDeviceGetMemoryInfo"};
  ClockFn clock_ = nullptr;
  UintFn power_fn_ = nullptr;
  UllFn energy_fn_ = nullptr, throttle_fn_ = nullptr;
  TemperatureFn temperature_fn_ = nullptr;
  UtilizationFn utilization_fn_ = nullptr;
  PcieFn pcie_fn_ = nullptr;
  MemoryFn memory_fn_ = nullptr;
};

GpuReader::GpuReader(const std::string& pci_bus_id, Notes& notes) : notes_(notes) {
  std::string why;
  device_ = lib_.device_by_bus_id(pci_bus_id, why);
  if (!device_) {
    notes_.add("gpu: " + why);  // every GPU metric stays NaN
    return;
  }
  clock_ = find<ClockFn>(sm_clock_);
  find<ClockFn>(mem_clock_);
  power_fn_ = find<UintFn>(power_);
  energy_fn_ = find<UllFn>(energy_);
  temperature_fn_ = find<TemperatureFn>(temperature_);
  utilization_fn_ = find<UtilizationFn>(utilization_);
  // The throttle query was renamed "clocks event reasons" (driver 535); older drivers have
  // only the old name, same signature.
  throttle_fn_ = find<UllFn>(throttle_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  pcie_fn_ = find<PcieFn>(pcie_tx_);
  find<PcieFn>(pcie_rx_);
  memory_fn_ = find<MemoryFn>(memory_);
}

template <class Fn>
Fn GpuReader::find(Query& query, const char* fallback) {
  Fn fn = lib_.symbol<Fn>(query.entry);
  if (!fn && fallback && (fn = lib_.symbol<Fn>(fallback))) query.entry = fallback;
  if (!fn) {
    query.off = true;
    notes_.add(std::string("gpu ") + query.metric + ": this NVML has no " + query.entry +
               (fallback ? std::string(" (nor ") + fallback + ")" : ""));
  }
  return fn;
}

// Whether a query's value can be used. Unsupported turns the metric off (NaN from now on);
// any other error is NaN for this sample only (a transient failure). Either is noted once.
bool GpuReader::accept(Query& query, nvml::Return rc) {
  if (rc == nvml::kSuccess) return true;
  if (rc == nvml::kNotSupported || rc == nvml::kFunctionNotFound) {
    query.off = true;
    notes_.add(std::string("gpu ") + query.metric + ": " + query.entry +
               " not supported on this GPU");
  } else {
    notes_.add(std::string("gpu ") + query.metric + ": " + query.entry +
               " failed (NaN where it did): " + lib_.error_string(rc));
  }
  return false;
}

void GpuReader::read_clocks_power(GpuSample& s) {
  unsigned int value = 0;
  unsigned long long count = 0;
  if (!sm_clock_.off && accept(sm_clock_, clock_(device_, nvml::kClockSm, &value)))
    s.sm_clock_hz = value * 1e6;  // MHz
  if (!mem_clock_.off && accept(mem_clock_, clock_(device_, nvml::kClockMem, &value)))
    s.mem_clock_hz = value * 1e6;
  if (!power_.off && accept(power_, power_fn_(device_, &value))) s.power_w = value * 1e-3;  // mW
  if (!energy_.off && accept(energy_, energy_fn_(device_, &count)))
    s.energy_j = count * 1e-3;  // mJ
  if (!temperature_.off &&
      accept(temperature_, temperature_fn_(device_, nvml::kTemperatureGpu, &value)))
    s.temperature_c = value;
  if (!throttle_.off && accept(throttle_, throttle_fn_(device_, &count)))
    s.throttle_reasons = static_cast<double>(count);  // the bits in use fit a double exactly
}

void GpuReader::read_activity(GpuSample& s) {
  // NVML says KB/s without saying which KB; taken as 1024 bytes (the 2.4 % between the two
  // readings is far inside the noise of its 20 ms window).
  constexpr double kKB = 1024;
  unsigned int value = 0;
  nvml::Utilization utilization{};
  if (!utilization_.off && accept(utilization_, utilization_fn_(device_, &utilization))) {
    s.gpu_util = utilization.gpu / 100.0;
    s.mem_util = utilization.memory / 100.0;
  }
  if (!pcie_tx_.off && accept(pcie_tx_, pcie_fn_(device_, nvml::kPcieTxBytes, &value)))
    s.pcie_tx_Bps = value * kKB;
  if (!pcie_rx_.off && accept(pcie_rx_, pcie_fn_(device_, nvml::kPcieRxBytes, &value)))
    s.pcie_rx_Bps = value * kKB;
  // The v1 query's "used" counts the driver's own reservation too (about 0.5 GB on an idle
  // H100 where nvidia-smi says 0 MiB), so compare samples with each other, not with nvidia-smi.
  nvml::Memory memory{};
  if (!memory_.off && accept(memory_, memory_fn_(device_, &memory)))
    s.memory_used_bytes = static_cast<double>(memory.used);
}

GpuSample GpuReader::read() {
  GpuSample s;  // all NaN
  if (!device_) return s;
  read_clocks_power(s);
  read_activity(s);
  return s;
}

}  // namespace

NodeCpuJiffies node_cpu_jiffies() {
  NodeCpuJiffies sum;
  for (const CpuTimes& cpu : read_cpu_times()) {
    sum.busy += cpu.busy;
    sum.total += cpu.total;
    ++sum.cpus;
  }
  return sum;
}

// ---- the monitor ----

struct Monitor::Impl {
  explicit Impl(MonitorOptions o) : options(std::move(o)) {}
  void run();
  MonitorSample take();
  double seconds_since_origin() const {
    const Clock::duration since = Clock::now().time_since_epoch() - Clock::duration(origin.load());
    return std::chrono::duration<double>(since).count();
  }

  MonitorOptions options;
  Notes notes;
  std::unique_ptr<NodeReader> node;  // with options.node
  std::unique_ptr<GpuReader> gpu;    // with a GPU bus id
  std::atomic<Clock::rep> origin{Clock::now().time_since_epoch().count()};

  std::thread thread;
  std::mutex join_mutex;     // stop() from two threads joins once
  mutable std::mutex mutex;  // guards what follows
  std::condition_variable wake;
  bool started = false, stopping = false;
  std::vector<MonitorSample> samples;
};

MonitorSample Monitor::Impl::take() {
  MonitorSample s;
  s.t_s = seconds_since_origin();  // when the readings begin
  s.process = read_process(notes);
  if (gpu) s.gpu = gpu->read();
  if (node) s.node = node->read();
  return s;
}

// Samples on the grid origin + k * interval. A sample that runs late skips the ticks it
// missed instead of catching up in a burst, so every t_s is past a tick of its own and the
// series stays strictly increasing.
void Monitor::Impl::run() {
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.interval_s));
  Clock::time_point next{Clock::duration(origin.load())};
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    lock.unlock();
    MonitorSample sample;
    try {
      sample = take();
    } catch (const std::exception& e) {
      notes.add(std::string("monitor: sampling stopped: ") + e.what());
      return;
    }
    lock.lock();
    samples.push_back(std::move(sample));
    const Clock::time_point now = Clock::now();
    next += period * ((now - next) / period + 1);
    wake.wait_until(lock, next, [this] { return stopping; });
  }
}

Monitor::Monitor(MonitorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const double interval = impl_->options.interval_s;
  if (!(interval >= 1e-3) || !std::isfinite(interval))
    throw std::invalid_argument("monitor interval must be at least 1 ms, got " +
                                std::to_string(interval) + " s");
  if (impl_->options.node) impl_->node = std::make_unique<NodeReader>(impl_->notes);
  if (!impl_->options.gpu_pci_bus_id.empty())
    impl_->gpu = std::make_unique<GpuReader>(impl_->options.gpu_pci_bus_id, impl_->notes);
}

Monitor::~Monitor() {
  stop();
}

void Monitor::start() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->started || impl_->stopping)
    throw std::logic_error("Monitor::start called twice or after stop (one start per Monitor)");
  impl_->started = true;
  impl_->origin = Clock::now().time_since_epoch().count();
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

void Monitor::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  std::lock_guard<std::mutex> join(impl_->join_mutex);
  if (impl_->thread.joinable()) impl_->thread.join();
}

double Monitor::now() const {
  return impl_->seconds_since_origin();
}

std::vector<MonitorSample> Monitor::samples() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->samples;
}

std::vector<std::string> Monitor::unavailable() const {
  return impl_->notes.lines();
}

int Monitor::cpu_count() const {
  return impl_->node ? static_cast<int>(impl_->node->cpu_ids.size()) : 0;
}

int Monitor::numa_count() const {
  return impl_->node ? static_cast<int>(impl_->node->numa_ids.size()) : 0;
}

std::vector<int> Monitor::cpu_ids() const {
  return impl_->node ? impl_->node->cpu_ids : std::vector<int>{};
}

std::vector<int> Monitor::numa_ids() const {
  return impl_->node ? impl_->node->numa_ids : std::vector<int>{};
}

}  // namespace rb
