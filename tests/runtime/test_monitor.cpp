// The monitors of the contention sweep: a background thread sampling on the steady clock,
// the process counters (/proc/self), the node series (/proc/stat, numastat) and the GPU
// series through NVML (NaN, with the reason, on a machine without the driver). Bounds are
// loose on purpose: CI runs this on two busy cores.
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/monitor.hpp"
#include "runtime/nvml.hpp"

using namespace rb;
using namespace std::chrono_literals;

namespace {

constexpr double kInterval = 0.05;

std::vector<MonitorSample> run_for(Monitor& monitor, std::chrono::milliseconds how_long) {
  monitor.start();
  std::this_thread::sleep_for(how_long);
  monitor.stop();
  return monitor.samples();
}

// The CPUs /proc/stat lists ("cpuN ..."), counted here independently of the monitor.
int cpus_in_proc_stat() {
  std::ifstream in("/proc/stat");
  int count = 0;
  for (std::string line; std::getline(in, line);)
    count += line.size() > 3 && line.compare(0, 3, "cpu") == 0 &&
             std::isdigit(static_cast<unsigned char>(line[3]));
  return count;
}

int numa_nodes_in_sys() {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    count += name.size() > 4 && name.compare(0, 4, "node") == 0 &&
             std::isdigit(static_cast<unsigned char>(name[4]));
  }
  return count;
}

double cpu_seconds_of_this_process() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

bool nvml_loadable() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
}

int lines_starting_with(const std::vector<std::string>& lines, const std::string& prefix) {
  const auto starts = [&](const std::string& l) {
    return l.compare(0, prefix.size(), prefix) == 0;
  };
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), starts));
}

std::vector<double> gpu_fields(const GpuSample& g) {
  return {g.sm_clock_hz,   g.mem_clock_hz, g.power_w,          g.energy_j,
          g.temperature_c, g.gpu_util,     g.mem_util,         g.throttle_reasons,
          g.pcie_tx_Bps,   g.pcie_rx_Bps,  g.memory_used_bytes};
}

}  // namespace

TEST_CASE("monitor: timestamps start near zero, increase strictly and follow the interval") {
  Monitor monitor(MonitorOptions{kInterval, "", false});
  const auto samples = run_for(monitor, 500ms);
  const double elapsed = monitor.now();
  REQUIRE(samples.size() >= 3);
  CHECK(samples.front().t_s >= 0.0);
  CHECK(samples.front().t_s < 0.25);  // the first sample is taken at once, not after an interval
  std::vector<double> gaps;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    CHECK(samples[i].t_s > samples[i - 1].t_s);
    gaps.push_back(samples[i].t_s - samples[i - 1].t_s);
  }
  CHECK(samples.back().t_s <= elapsed);
  std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
  const double median_gap = gaps[gaps.size() / 2];
  CHECK(median_gap >= 0.5 * kInterval);
  CHECK(median_gap <= 4 * kInterval);
  // Each sample sits past a grid tick of its own, so there are never more than the ticks.
  CHECK(samples.size() <= samples.back().t_s / kInterval + 1 + 1e-9);
}

TEST_CASE("monitor: the sampling thread sleeps between samples (no busy loop)") {
  Monitor monitor(MonitorOptions{0.01, "0000:18:00.0", true});  // every series, 100 samples/s
  const double cpu_before = cpu_seconds_of_this_process();
  const auto samples = run_for(monitor, 500ms);
  const double cpu_used = cpu_seconds_of_this_process() - cpu_before;
  CHECK(samples.size() >= 3);
  MESSAGE("CPU time over 0.5 s of sampling at 10 ms: " << cpu_used << " s, " << samples.size()
                                                       << " samples");
  CHECK(cpu_used < 0.1);
}

TEST_CASE("monitor: stop is prompt and idempotent; one start per monitor") {
  Monitor monitor(MonitorOptions{5.0, "", false});
  CHECK_NOTHROW(monitor.stop());  // before start: nothing to stop
  CHECK_THROWS_AS(monitor.start(), std::logic_error);

  Monitor slow(MonitorOptions{5.0, "", false});
  slow.start();
  std::this_thread::sleep_for(100ms);
  const auto before = std::chrono::steady_clock::now();
  slow.stop();
  CHECK(std::chrono::steady_clock::now() - before < 1s);  // not the 5 s interval
  CHECK(slow.samples().size() == 1);                      // the one at t~0
  CHECK_NOTHROW(slow.stop());
  std::this_thread::sleep_for(100ms);
  CHECK(slow.samples().size() == 1);  // nothing after stop
  CHECK_THROWS_AS(slow.start(), std::logic_error);

  const auto scope = std::chrono::steady_clock::now();
  {
    Monitor dropped(MonitorOptions{5.0, "", false});
    dropped.start();
  }  // the destructor stops and joins
  CHECK(std::chrono::steady_clock::now() - scope < 1s);
  CHECK_THROWS_AS(Monitor(MonitorOptions{0.0, "", false}), std::invalid_argument);
}

TEST_CASE("monitor: process counters are read and never decrease") {
  Monitor monitor(MonitorOptions{kInterval, "", false});
  monitor.start();
  for (int i = 0; i < 10; ++i)
    std::this_thread::sleep_for(30ms);  // voluntary switches of this thread
  monitor.stop();
  const auto samples = monitor.samples();
  REQUIRE(samples.size() >= 3);
  const bool has_migrations = lines_starting_with(monitor.unavailable(), "migrations:") == 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const ProcessSample& p = samples[i].process;
    REQUIRE(std::isfinite(p.voluntary_switches));
    REQUIRE(std::isfinite(p.involuntary_switches));
    CHECK(std::isfinite(p.migrations) == has_migrations);
    if (i == 0) continue;
    const ProcessSample& q = samples[i - 1].process;
    CHECK(p.voluntary_switches >= q.voluntary_switches);
    CHECK(p.involuntary_switches >= q.involuntary_switches);
    if (has_migrations) CHECK(p.migrations >= q.migrations);
  }
  CHECK(samples.back().process.voluntary_switches > samples.front().process.voluntary_switches);
}

TEST_CASE("monitor: the node series are present only when asked for") {
  Monitor off(MonitorOptions{kInterval, "", false});
  for (const MonitorSample& s : run_for(off, 150ms)) {
    CHECK(s.node.cpu_busy.empty());
    CHECK(s.node.numa_hit.empty());
    CHECK(s.node.numa_miss.empty());
  }
  CHECK(off.cpu_count() == 0);
  CHECK(off.numa_count() == 0);

  Monitor on(MonitorOptions{kInterval, "", true});
  CHECK(on.cpu_count() == cpus_in_proc_stat());
  CHECK(on.numa_count() == numa_nodes_in_sys());
  const std::vector<int> ids = on.cpu_ids();
  CHECK(static_cast<int>(ids.size()) == on.cpu_count());
  CHECK(std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<int>()) ==
        ids.end());  // increasing
  const auto samples = run_for(on, 400ms);
  REQUIRE(samples.size() >= 3);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const NodeSample& n = samples[i].node;
    REQUIRE(static_cast<int>(n.cpu_busy.size()) == on.cpu_count());
    REQUIRE(static_cast<int>(n.numa_hit.size()) == on.numa_count());
    REQUIRE(static_cast<int>(n.numa_miss.size()) == on.numa_count());
    for (const double busy : n.cpu_busy)
      CHECK((i == 0 ? std::isnan(busy) : busy >= 0.0 && busy <= 1.0));
    for (int k = 0; k < on.numa_count() && i > 0; ++k) {
      CHECK(n.numa_hit[k] >= samples[i - 1].node.numa_hit[k]);  // counters (NaN fails too)
      CHECK(n.numa_miss[k] >= samples[i - 1].node.numa_miss[k]);
    }
  }
}

TEST_CASE("monitor: a busy loop shows in the CPU busy fractions") {
  Monitor monitor(MonitorOptions{kInterval, "", true});
  monitor.start();
  std::this_thread::sleep_for(100ms);
  const double spin_from = monitor.now();
  for (const auto until = std::chrono::steady_clock::now() + 600ms;
       std::chrono::steady_clock::now() < until;) {
  }
  const double spin_to = monitor.now();
  monitor.stop();
  const auto samples = monitor.samples();
  double max_busy = 0, summed = 0;
  int inside = 0;  // samples whose whole interval lies inside the spin
  for (std::size_t i = 1; i < samples.size(); ++i) {
    if (samples[i - 1].t_s < spin_from || samples[i].t_s > spin_to) continue;
    const auto& busy = samples[i].node.cpu_busy;
    max_busy = std::max(max_busy, *std::max_element(busy.begin(), busy.end()));
    for (const double b : busy) summed += b;
    ++inside;
  }
  REQUIRE(inside >= 3);
  MESSAGE("during the spin: max busy " << max_busy << ", busy CPUs on average " << summed / inside);
  CHECK(max_busy >= 0.5);
  CHECK(summed / inside >= 0.7);  // at least most of one CPU: the spin's own
}

TEST_CASE(
    "monitor: without the NVIDIA driver every GPU metric is NaN, and the reason is noted once") {
  if (nvml_loadable()) {
    MESSAGE("libnvidia-ml.so.1 loads here; this test covers machines without the driver");
    return;
  }
  Monitor monitor(MonitorOptions{0.02, "0000:18:00.0", false});
  const auto samples = run_for(monitor, 200ms);
  REQUIRE(samples.size() >= 3);
  for (const MonitorSample& s : samples)
    for (const double value : gpu_fields(s.gpu)) CHECK(std::isnan(value));
  const auto lines = monitor.unavailable();
  CHECK(lines_starting_with(lines, "gpu") == 1);
  CHECK(lines_starting_with(lines, "gpu: cannot load libnvidia-ml.so.1") == 1);
  CHECK(read_gpu_clocks("0000:18:00.0").note.find("cannot load libnvidia-ml.so.1") !=
        std::string::npos);

  Monitor no_gpu(MonitorOptions{0.02, "", false});  // not watching a GPU is not "unavailable"
  for (const MonitorSample& s : run_for(no_gpu, 60ms))
    for (const double value : gpu_fields(s.gpu)) CHECK(std::isnan(value));
  CHECK(lines_starting_with(no_gpu.unavailable(), "gpu") == 0);
}
